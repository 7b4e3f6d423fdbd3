// Package taskstate holds what the nodes of a cluster share about each
// scheduled task besides its lock: whether it is paused, whether a manual
// run was requested and not yet taken, and the last runs of the task on any
// node. The scheduler reads and writes it through the [Store] contract;
// operators change it through the scheduler's Pause, Resume and RunNow (the
// admin package serves them over HTTP).
//
// [InProcess] is the default, correct on one node: its state lives in the
// process's memory and is lost when it exits. The Redis driver's module
// (redislocks.Module) replaces it app-wide with a store in the same Redis as
// the locks, as it replaces the lock driver; [Module] provides the default
// under the type the replacement decorates. Every implementation passes the
// conformance suite in package taskstatetest.
package taskstate
