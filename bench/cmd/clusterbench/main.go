// Command clusterbench runs 3 ndigo nodes (schedulers, each with its own
// Redis client and redislocks driver) on one private redis-server, with 100
// locked tasks every second on each node, and reports per fire how many
// nodes ran it and how many Redis commands it cost. It prints a Markdown
// table of medians over -runs runs.
//
//	cd bench && go run ./cmd/clusterbench -runs 3 -duration 60s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redisproc"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

var (
	runs     = flag.Int("runs", 3, "runs; the table shows medians")
	duration = flag.Duration("duration", time.Minute, "how long each run schedules")
	nodes    = flag.Int("nodes", 3, "nodes")
	tasks    = flag.Int("tasks", 100, "locked tasks per node, each every second")
	spread   = flag.Bool("spread", true, "the nodes spread their tasks (scheduling.Config.Spread); false: every node tries every fire")
)

// figures are one run's results.
type figures struct {
	fires         int     // distinct (task, fire) pairs that ran
	runsPerFire   float64 // runs / fires
	doubles       int     // fires run by more than one node
	missed        int     // fires expected in the measured window that no node ran
	evalsPerFire  float64 // script round trips (EVALSHA/EVAL) per fire
	serverPerFire float64 // commands Redis ran per fire, inside scripts too
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	var all []figures
	for i := range *runs {
		f, err := once()
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("run %d: %+v", i+1, f)
		all = append(all, f)
	}
	med := func(get func(figures) float64) float64 {
		xs := make([]float64, len(all))
		for i, f := range all {
			xs[i] = get(f)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	fmt.Printf("Command: `cd bench && go run ./cmd/clusterbench %s`\n\n", strings.Join(os.Args[1:], " "))
	mode := "spreading their tasks (scheduling.Config.Spread: heartbeats included)"
	if !*spread {
		mode = "each trying every fire (-spread=false)"
	}
	fmt.Printf("%d nodes (schedulers in one process, each with its own client and driver) on one redis-server, %s, %d tasks per node, each `@every 1s` with its own lock, for %v; medians of %d runs. There is no peer to give a ratio to.\n\n",
		*nodes, mode, *tasks, *duration, *runs)
	fmt.Println("| fires run | runs per fire | fires run twice | fires missed | script round trips per fire | Redis commands per fire (inside scripts too) |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	fmt.Printf("| %.0f | %.3f | %.0f | %.0f | %.2f | %.2f |\n",
		med(func(f figures) float64 { return float64(f.fires) }), med(func(f figures) float64 { return f.runsPerFire }),
		med(func(f figures) float64 { return float64(f.doubles) }), med(func(f figures) float64 { return float64(f.missed) }),
		med(func(f figures) float64 { return f.evalsPerFire }), med(func(f figures) float64 { return f.serverPerFire }))
}

func once() (figures, error) {
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		return figures{}, err
	}
	defer srv.Stop()
	addr := srv.Addr()
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()

	var mu sync.Mutex // protects ran
	ran := map[string]int{}
	var scheds []*scheduling.Scheduler
	for n := range *nodes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "bench"})
		if err != nil {
			return figures{}, err
		}
		defer d.Close()
		s := scheduling.New(scheduling.Config{Driver: d, Node: "n" + strconv.Itoa(n), Logger: slog.New(slog.DiscardHandler), Spread: *spread})
		for i := range *tasks {
			name := "task" + strconv.Itoa(i)
			err := s.Add(scheduling.NewTask(func(ctx context.Context) error {
				r, _ := scheduling.RunFromContext(ctx)
				mu.Lock()
				ran[name+"@"+strconv.FormatInt(r.Fire.Unix(), 10)]++
				mu.Unlock()
				return nil
			}, scheduling.Name(name), scheduling.Cron("@every 1s"), scheduling.Lock(name), scheduling.LockTTL(10*time.Second)))
			if err != nil {
				return figures{}, err
			}
		}
		scheds = append(scheds, s)
	}
	before, err := commandStats(ctx, admin)
	if err != nil {
		return figures{}, err
	}
	start := time.Now()
	for _, s := range scheds {
		if err := s.Start(); err != nil {
			return figures{}, err
		}
	}
	time.Sleep(*duration)
	errs := make(chan error, len(scheds))
	for _, s := range scheds { // at once, as a deploy stops a fleet
		go func() {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			errs <- s.Stop(stopCtx)
		}()
	}
	for range scheds {
		if err := <-errs; err != nil {
			return figures{}, err
		}
	}
	after, err := commandStats(ctx, admin)
	if err != nil {
		return figures{}, err
	}
	var f figures
	total := 0
	for _, n := range ran {
		f.fires++
		total += n
		if n > 1 {
			f.doubles++
		}
	}
	// Fires strictly inside the window, a second after the start to the
	// second before the end, must all have run.
	for sec := start.Unix() + 2; sec < start.Add(*duration).Unix()-1; sec++ {
		for i := range *tasks {
			if ran["task"+strconv.Itoa(i)+"@"+strconv.FormatInt(sec, 10)] == 0 {
				f.missed++
			}
		}
	}
	if f.fires > 0 {
		f.runsPerFire = float64(total) / float64(f.fires)
		f.evalsPerFire = float64(after["evalsha"]+after["eval"]-before["evalsha"]-before["eval"]) / float64(f.fires)
		var all int64
		for k, v := range after {
			if k != "info" {
				all += v - before[k]
			}
		}
		f.serverPerFire = float64(all) / float64(f.fires)
	}
	return f, nil
}

// commandStats returns INFO commandstats' calls by command.
func commandStats(ctx context.Context, c *redis.Client) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		m[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return m, nil
}
