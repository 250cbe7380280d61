package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestBatchedWakesAfterItsDelay: a change wakes its account only after the handler's
// delay, and the earliest pending wake-up wins, so a pod's success (PodBatchPeriod) folds
// into the reconcile of the Job update that follows it (BatchPeriod).
func TestBatchedWakesAfterItsDelay(t *testing.T) {
	acct := wrappers.MakeBatchAccount("acct", "ns").Obj()
	cases := []struct {
		name string
		// events are the handlers' delays, each fired at the given offset.
		events []struct{ at, delay time.Duration }
		// wantReadyAt is when the account becomes ready, after the first event.
		wantReadyAt time.Duration
	}{
		{name: "a Job change", events: []struct{ at, delay time.Duration }{{0, BatchPeriod}}, wantReadyAt: BatchPeriod},
		{name: "a pod's success alone", events: []struct{ at, delay time.Duration }{{0, PodBatchPeriod}}, wantReadyAt: PodBatchPeriod},
		{
			name:        "a pod's success, then the Job update 700ms later: one wake-up, with the Job's",
			events:      []struct{ at, delay time.Duration }{{0, PodBatchPeriod}, {700 * time.Millisecond, BatchPeriod}},
			wantReadyAt: 700*time.Millisecond + BatchPeriod,
		},
		{
			name:        "a success yet to be counted, then the Job counting it 800ms later: one wake-up, with the count",
			events:      []struct{ at, delay time.Duration }{{0, LeadUpPeriod}, {800 * time.Millisecond, BatchPeriod}},
			wantReadyAt: 800*time.Millisecond + BatchPeriod,
		},
		{
			name:        "an admission, nothing after it",
			events:      []struct{ at, delay time.Duration }{{0, LeadUpPeriod}},
			wantReadyAt: LeadUpPeriod,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(testNow)
			q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
				workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clk})
			defer q.ShutDown()
			start := clk.Now()
			for _, e := range tc.events {
				clk.SetTime(start.Add(e.at))
				batched(e.delay, self).Create(context.Background(), event.CreateEvent{Object: acct}, q)
			}
			if n := queued(q, 0); n != 0 {
				t.Fatalf("%d ready before the delay", n)
			}
			clk.SetTime(start.Add(tc.wantReadyAt - time.Millisecond))
			if n := queued(q, 50*time.Millisecond); n != 0 {
				t.Fatalf("%d ready 1ms before %v", n, tc.wantReadyAt)
			}
			clk.SetTime(start.Add(tc.wantReadyAt))
			if n := queued(q, 2*time.Second); n != 1 {
				t.Fatalf("%d ready at %v, want the account once", n, tc.wantReadyAt)
			}
		})
	}
}

// queued waits up to wait (real time: the delaying queue moves items on its own
// goroutine) for an item to be ready, and returns how many are.
func queued(q workqueue.TypedRateLimitingInterface[reconcile.Request], wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return q.Len()
}
