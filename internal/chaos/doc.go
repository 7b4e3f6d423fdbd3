// Package chaos holds the fault tests of ndigo: real redis-server and
// PostgreSQL processes and real node processes are killed, paused,
// restarted and stopped, and PostgreSQL backends terminated, while locked
// tasks run, a Sentinel setup fails over to its replica, histories of lock operations recorded under faults
// are checked for linearizability with github.com/anishathalye/porcupine,
// and a lease holder process is stopped past its lease on PostgreSQL and
// etcd, round after round, while a successor writes through Guard.
//
// The package has no API: everything is in its tests. A node process is the
// test binary itself, re-executed with CHAOS_ROLE set (see node_test.go; the
// stall holder of stall_test.go is one too), or the payroll example built
// with go build. docs/GUARANTEES.md names the test
// behind each guarantee.
package chaos
