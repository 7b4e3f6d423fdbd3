// Package scheduler compares the scheduling engine of
// github.com/ndigo/ndigo/scheduling with github.com/go-co-op/gocron/v2 and
// github.com/robfig/cron/v3 on the same workloads: the heap that 10,000 idle
// tasks keep, the time to register 10,000 tasks, and the lateness of 1,000
// tasks due on the same second. It holds benchmarks only.
package scheduler
