// Package schedulingtest helps test code that schedules tasks with package
// scheduling, and tests package scheduling itself:
//
//   - [Step] advances a fake clock and waits until the schedulers on it
//     have run (or skipped) every fire that fell due;
//   - [Gate] holds the runs of a task until the test opens it, and
//     [StepBlocked] and [SettleBlocked] settle schedulers while the runs a
//     Gate holds are in flight, which Step and [Settle] would wait for;
//   - [Recorder] is a listener that records every run and skip, and
//     [AtMostOnce] checks that no fire ran twice across the nodes of a
//     cluster;
//   - [Driver] wraps a lock driver to inject faults (errors, slow calls,
//     replies lost after the call took effect) and to see each call;
//   - [StartCluster] starts one scheduler per node, each with its own
//     driver and Recorder, so a lock driver's tests run the scheduler on it;
//   - [SkewedClock] is a clock that runs ahead or behind another, for nodes
//     whose clocks disagree.
//
// The package's own tests include a simulation of a cluster: 3 to 5
// schedulers with skewed clocks share one driver that injects every kind of
// fault, and the checks above run over many thousand fires.
package schedulingtest
