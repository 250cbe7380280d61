package main

import (
	"context"
	"sync"
	"time"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/internal/testsupport/scrape"
)

// KillRecord is one SIGKILL the driver did.
type KillRecord struct {
	Component string
	// Process is the process killed (batchledger-0 or -1 for the leader).
	Process string
	At      time.Time
	// Down is how long until the component was ready again.
	Down time.Duration
	Err  error
	// Targeted marks a kill a batch asked for (the leader, just before a TTL-0 Job's last
	// pod finishes), beside the seeded schedule.
	Targeted bool
}

// chaos kills components on the plan's schedule and restarts any component that exits by
// itself (a controller that lost its leader Lease exits, as a kubelet would restart it).
type chaos struct {
	cl       *localcluster.Cluster
	replicas []string

	// restartMu serializes restarts: one component down at a time.
	restartMu sync.Mutex
	mu        sync.Mutex
	kills     []KillRecord
	// crashes counts supervisor restarts of components that exited on their own.
	crashes map[string]int
}

// supervised are the processes restarted when they exit by themselves.
func (ch *chaos) supervised() []string {
	return append([]string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue", "jobset"}, ch.replicas...)
}

// supervise restarts exited components until ctx ends.
func (ch *chaos) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		for _, name := range ch.supervised() {
			if !ch.cl.Exited(name) {
				continue
			}
			ch.restartMu.Lock()
			if ch.cl.Exited(name) {
				logf("%s exited by itself; restarting it", name)
				if _, err := ch.cl.RestartComponent(ctx, name); err != nil {
					logf("restart %s: %v", name, err)
				}
				ch.mu.Lock()
				ch.crashes[name]++
				ch.mu.Unlock()
			}
			ch.restartMu.Unlock()
		}
		sleep(ctx, time.Second)
	}
}

// run performs the kill schedule; stop (closed) ends it early.
func (ch *chaos) run(ctx context.Context, kills []Kill) {
	for i, k := range kills {
		sleep(ctx, k.After)
		if ctx.Err() != nil {
			return
		}
		proc := k.Component
		if k.Component == ComponentBatchledger {
			proc = ch.leader()
			if proc == "" {
				proc = ch.replicas[k.Replica%len(ch.replicas)]
			}
		}
		ch.restartMu.Lock()
		at := time.Now()
		down, err := ch.cl.RestartComponent(ctx, proc)
		ch.restartMu.Unlock()
		logf("kill %d/%d: SIGKILL %s, ready again after %s (err %v)", i+1, len(kills), proc, down.Round(10*time.Millisecond), err)
		ch.mu.Lock()
		ch.kills = append(ch.kills, KillRecord{Component: k.Component, Process: proc, At: at, Down: down, Err: err})
		ch.mu.Unlock()
	}
}

// killLeaderNow SIGKILLs the batchledger leader (a replica when none leads) and restarts
// it, closing started just before the kill; a batch's own kill, beside the schedule.
func (ch *chaos) killLeaderNow(ctx context.Context, started chan struct{}) {
	ch.restartMu.Lock()
	defer ch.restartMu.Unlock()
	proc := ch.leader()
	if proc == "" {
		proc = ch.replicas[0]
	}
	at := time.Now()
	close(started)
	down, err := ch.cl.RestartComponent(ctx, proc)
	logf("kill at a batch's end: SIGKILL %s, ready again after %s (err %v)", proc, down.Round(10*time.Millisecond), err)
	ch.mu.Lock()
	ch.kills = append(ch.kills, KillRecord{Component: ComponentBatchledger, Process: proc, At: at, Down: down, Err: err, Targeted: true})
	ch.mu.Unlock()
}

// leader is the batchledger replica holding the Lease, "" when none says so.
func (ch *chaos) leader() string {
	for _, name := range ch.replicas {
		env, ok := ch.cl.ManagerEnv(name)
		if !ok {
			continue
		}
		if isLeader(env.MetricsURL()) {
			return name
		}
	}
	return ""
}

// isLeader reads controller-runtime's leader gauge; a replica that does not answer
// within 2s is not the leader.
func isLeader(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	f, err := scrape.Get(ctx, url)
	return err == nil && f.Controller().Leader
}

func (ch *chaos) snapshot() ([]KillRecord, map[string]int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	crashes := map[string]int{}
	for k, v := range ch.crashes {
		crashes[k] = v
	}
	return append([]KillRecord(nil), ch.kills...), crashes
}
