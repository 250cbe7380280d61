package worker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"batchledger.dev/batchledger/pkg/indexset"
)

// Environment variables that script how a worker's run goes, so that a demo or an
// end-to-end test on real kubelets gets pod success, failure, retries and long-running
// shards from the container itself rather than from a simulated kubelet. All are
// optional; without them a worker does its work at once and succeeds.
const (
	// EnvWorkSeconds is how long the work takes, in seconds (may be fractional).
	EnvWorkSeconds = "BATCH_WORK_SECONDS"
	// EnvHoldIndexes are indexes (e.g. "2,5-7") whose work never ends: the pod runs until
	// it is stopped. Fed from a ConfigMap key, it lets a test release the indexes for the
	// pods created after it changes the key (a retry, a resumed Job).
	EnvHoldIndexes = "BATCH_HOLD_INDEXES"
	// EnvFailIndexes are indexes whose attempts fail, exiting with EnvExitCode.
	EnvFailIndexes = "BATCH_FAIL_INDEXES"
	// EnvFailAttempts is how many attempts of a failing index fail before one succeeds
	// (default 1); it counts EnvIndexFailures.
	EnvFailAttempts = "BATCH_FAIL_ATTEMPTS"
	// EnvExitCode is the exit code of a failing attempt (default 1).
	EnvExitCode = "BATCH_EXIT_CODE"
	// EnvIndexFailures is how many attempts of this index failed before: give it the
	// pod annotation batch.kubernetes.io/job-index-failure-count through the downward API
	// (the Job controller sets it with backoffLimitPerIndex).
	EnvIndexFailures = "BATCH_INDEX_FAILURES"
	// EnvWaitForHosts are host names (comma-separated) that must resolve before the work
	// starts, as a distributed trainer's rendezvous waits for its peers.
	EnvWaitForHosts = "BATCH_WAIT_FOR_HOSTS"
)

// Plan is how one attempt of an index runs.
type Plan struct {
	Work         time.Duration
	Hold         bool
	Fail         bool
	ExitCode     int
	Attempt      int // failures of this index before this attempt
	WaitForHosts []string
}

// PlanFromEnv reads the plan of the attempt of index from the environment.
func PlanFromEnv(getenv func(string) string, index int) (Plan, error) {
	p := Plan{ExitCode: 1}
	if v := getenv(EnvWorkSeconds); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s < 0 {
			return p, fmt.Errorf("%s=%q: not a number of seconds", EnvWorkSeconds, v)
		}
		p.Work = time.Duration(s * float64(time.Second))
	}
	var err error
	if p.Hold, err = indexIn(getenv, EnvHoldIndexes, index); err != nil {
		return p, err
	}
	failing, err := indexIn(getenv, EnvFailIndexes, index)
	if err != nil {
		return p, err
	}
	attempts := 1
	for name, dst := range map[string]*int{EnvFailAttempts: &attempts, EnvExitCode: &p.ExitCode, EnvIndexFailures: &p.Attempt} {
		if v := getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil || *dst < 0 {
				return p, fmt.Errorf("%s=%q: not a non-negative integer", name, v)
			}
		}
	}
	if p.ExitCode == 0 || p.ExitCode > 255 {
		return p, fmt.Errorf("%s=%d: a failing exit code is 1..255", EnvExitCode, p.ExitCode)
	}
	p.Fail = failing && p.Attempt < attempts
	for _, h := range strings.Split(getenv(EnvWaitForHosts), ",") {
		if h = strings.TrimSpace(h); h != "" {
			p.WaitForHosts = append(p.WaitForHosts, h)
		}
	}
	return p, nil
}

func indexIn(getenv func(string) string, name string, index int) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return false, nil
	}
	s, err := indexset.Parse(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: %v", name, v, err)
	}
	return s.Contains(index), nil
}

// Resolver looks host names up; net.DefaultResolver in a pod.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Run waits for the plan's hosts and its work. It returns ctx's error when the pod is
// stopped first (a held index always is).
func (p Plan) Run(ctx context.Context, r Resolver, retry time.Duration) error {
	for _, h := range p.WaitForHosts {
		for {
			if _, err := r.LookupHost(ctx, h); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for host %s: %w", h, ctx.Err())
			case <-time.After(retry):
			}
		}
	}
	if p.Hold {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(p.Work):
		return nil
	}
}

var _ Resolver = net.DefaultResolver
