package locks

// Len returns how many leases d's table holds, expired ones included.
func (d *InProcessDriver) Len() int {
	d.t.mu.Lock()
	defer d.t.mu.Unlock()
	return len(d.t.holders)
}
