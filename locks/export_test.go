package locks

// Len returns how many keys d's table holds: those with a lease (expired
// ones included) or waiters, and the free ones no sweep dropped yet.
func (d *InProcessDriver) Len() int {
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	return len(d.t.keys)
}
