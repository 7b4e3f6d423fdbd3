package schedulingtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

// A Cluster is one scheduler per node, each with a [Recorder], as the
// nodes of a cluster that share a lock store run: the tests of a lock driver
// run the scheduler on it through a Cluster. Make one with [StartCluster].
type Cluster struct {
	// Schedulers are the nodes' schedulers, started, in node order.
	Schedulers []*scheduling.Scheduler
	// Recorders are the nodes' recorders, in node order.
	Recorders []*Recorder
}

// StartCluster starts one scheduler per driver: node i is named "a" + i
// ("a", "b", …), runs on drivers[i] (each node its own driver, as each
// process has its own client, or the same one shared), gets a Recorder
// after cfg's listeners, and adds the tasks that tasks returns (called once
// per node: a task belongs to one scheduler). cfg's other fields apply to
// every node. On error the nodes started are stopped.
func StartCluster(cfg scheduling.Config, drivers []locks.Driver, tasks func() []scheduling.Task) (*Cluster, error) {
	c := &Cluster{}
	for i, d := range drivers {
		r := &Recorder{}
		nc := cfg
		nc.Driver, nc.Node = d, string(rune('a'+i))
		nc.Listeners = append(slices.Clip(cfg.Listeners), r)
		s := scheduling.New(nc)
		err := s.Add(tasks()...)
		if err == nil {
			err = s.Start()
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("schedulingtest: node %s: %w", nc.Node, err), c.Stop(context.Background()))
		}
		c.Schedulers, c.Recorders = append(c.Schedulers, s), append(c.Recorders, r)
	}
	return c, nil
}

// Runs counts the runs that started, by fire, across the nodes.
func (c *Cluster) Runs() map[FireKey]int { return Runs(c.Recorders...) }

// AtMostOnce checks that no fire started on more than one node; see
// [AtMostOnce].
func (c *Cluster) AtMostOnce() error { return AtMostOnce(c.Recorders...) }

// WaitRuns waits, on the real clock, until at least n fires have started
// across the nodes, and returns ctx's error if ctx ends first. It is for
// clusters on the real clock (a test of a real lock store); on a fake clock
// use [Step].
func (c *Cluster) WaitRuns(ctx context.Context, n int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(c.Runs()) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("schedulingtest: %d of %d fires ran: %w", len(c.Runs()), n, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// Stop stops every node and returns their errors joined.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	for _, s := range c.Schedulers {
		errs = append(errs, s.Stop(ctx))
	}
	return errors.Join(errs...)
}
