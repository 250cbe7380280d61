package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPlanFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		index   int
		want    Plan
		wantErr bool
	}{
		{name: "no script: succeed at once", index: 3, want: Plan{ExitCode: 1}},
		{name: "work time", env: map[string]string{EnvWorkSeconds: "1.5"}, want: Plan{Work: 1500 * time.Millisecond, ExitCode: 1}},
		{name: "held index", env: map[string]string{EnvHoldIndexes: "2,5-7"}, index: 6, want: Plan{Hold: true, ExitCode: 1}},
		{name: "index not held", env: map[string]string{EnvHoldIndexes: "2,5-7"}, index: 4, want: Plan{ExitCode: 1}},
		{name: "first attempt of a failing index fails", env: map[string]string{EnvFailIndexes: "1", EnvExitCode: "42"}, index: 1, want: Plan{Fail: true, ExitCode: 42}},
		{name: "its retry succeeds", env: map[string]string{EnvFailIndexes: "1", EnvIndexFailures: "1"}, index: 1, want: Plan{Attempt: 1, ExitCode: 1}},
		{name: "fails twice with two failing attempts", env: map[string]string{EnvFailIndexes: "1", EnvFailAttempts: "2", EnvIndexFailures: "1"}, index: 1, want: Plan{Fail: true, Attempt: 1, ExitCode: 1}},
		{name: "other indexes succeed", env: map[string]string{EnvFailIndexes: "1"}, index: 0, want: Plan{ExitCode: 1}},
		{name: "hosts", env: map[string]string{EnvWaitForHosts: " a.svc, b.svc ,"}, want: Plan{ExitCode: 1, WaitForHosts: []string{"a.svc", "b.svc"}}},
		{name: "bad seconds", env: map[string]string{EnvWorkSeconds: "soon"}, wantErr: true},
		{name: "negative seconds", env: map[string]string{EnvWorkSeconds: "-1"}, wantErr: true},
		{name: "bad index set", env: map[string]string{EnvHoldIndexes: "3-1"}, wantErr: true},
		{name: "exit code 0 is no failure", env: map[string]string{EnvExitCode: "0"}, wantErr: true},
		{name: "exit code out of range", env: map[string]string{EnvExitCode: "256"}, wantErr: true},
		{name: "bad failure count", env: map[string]string{EnvIndexFailures: "x"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlanFromEnv(func(k string) string { return tc.env[k] }, tc.index)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.Work != tc.want.Work || got.Hold != tc.want.Hold || got.Fail != tc.want.Fail || got.ExitCode != tc.want.ExitCode ||
				got.Attempt != tc.want.Attempt || len(got.WaitForHosts) != len(tc.want.WaitForHosts) {
				t.Fatalf("plan = %+v, want %+v", got, tc.want)
			}
			for i := range got.WaitForHosts {
				if got.WaitForHosts[i] != tc.want.WaitForHosts[i] {
					t.Fatalf("hosts = %v, want %v", got.WaitForHosts, tc.want.WaitForHosts)
				}
			}
		})
	}
}

// resolverAfter resolves a host only from its n-th lookup on, as CoreDNS answers for a
// pod's hostname only once the pod is ready.
type resolverAfter struct{ n, calls int }

func (r *resolverAfter) LookupHost(context.Context, string) ([]string, error) {
	r.calls++
	if r.calls < r.n {
		return nil, errors.New("no such host")
	}
	return []string{"10.244.1.7"}, nil
}

func TestPlanRun(t *testing.T) {
	t.Run("waits until every host resolves", func(t *testing.T) {
		r := &resolverAfter{n: 3}
		if err := (Plan{WaitForHosts: []string{"peer"}}).Run(t.Context(), r, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if r.calls != 3 {
			t.Fatalf("%d lookups, want 3", r.calls)
		}
	})
	t.Run("a held index runs until stopped", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		if err := (Plan{Hold: true}).Run(ctx, &resolverAfter{}, time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the stop", err)
		}
	})
	t.Run("stopped while waiting for a host", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := (Plan{WaitForHosts: []string{"never"}}).Run(ctx, &resolverAfter{n: 1 << 30}, time.Millisecond); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the stop", err)
		}
	})
	t.Run("work ends", func(t *testing.T) {
		if err := (Plan{Work: time.Millisecond}).Run(t.Context(), &resolverAfter{}, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	})
}
