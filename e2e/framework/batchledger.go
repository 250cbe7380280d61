package framework

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/internal/testsupport/scrape"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// batchledger is the controller process of a local cluster.
var batchledger struct {
	mu      sync.Mutex
	manager localcluster.Manager
	binary  string
	running bool
}

// SetupWithBatchledger is Setup for suites that need the batchledger controller: on the
// local cluster it builds cmd/batchledger and runs it as one more manager (CRD, webhooks on
// loopback, metrics); on an existing cluster it expects the controller deployed.
func SetupWithBatchledger(m *testing.M, opts ...Option) {
	withBatchledger = true
	Setup(m, opts...)
}

// UnfoundRecheck is the suite's controller's --unfound-target-recheck.
const UnfoundRecheck = 15 * time.Second

// ShortFormSweep is the suite's controller's --short-form-sweep-interval.
const ShortFormSweep = 15 * time.Second

// startBatchledger builds the controller into a new temporary directory and starts it
// on the local cluster. It returns the directory, which the caller removes when the suite
// ends (a 70 MB binary per suite run would otherwise pile up in the machine's /tmp).
func startBatchledger(ctx context.Context, c *localcluster.Cluster) (string, error) {
	dir, err := os.MkdirTemp("", "batchledger-bin-")
	if err != nil {
		return "", err
	}
	bin, err := localcluster.BuildBatchledger(dir)
	if err != nil {
		return dir, err
	}
	// An account looks for an unfound Job again, and the leader for unlabelled short-form
	// Jobs, within seconds, not minutes: the tests of a Job created while the scope
	// webhook failed open wait for them.
	m, err := localcluster.BatchledgerManager(bin, "--unfound-target-recheck="+UnfoundRecheck.String(),
		"--short-form-sweep-interval="+ShortFormSweep.String())
	if err != nil {
		return dir, err
	}
	batchledger.manager, batchledger.binary = m, bin
	if err := c.StartManager(ctx, m); err != nil {
		return dir, err
	}
	batchledger.running = true
	return dir, nil
}

// StopBatchledger stops the controller (local cluster only; the test is skipped elsewhere).
// Its webhooks stay registered, so account writes fail until StartBatchledger.
func StopBatchledger(t testing.TB) {
	t.Helper()
	c := localOnly(t)
	batchledger.mu.Lock()
	defer batchledger.mu.Unlock()
	if err := c.StopManager(localcluster.BatchledgerName); err != nil {
		t.Fatalf("stop batchledger: %v", err)
	}
	batchledger.running = false
	t.Cleanup(func() {
		batchledger.mu.Lock()
		defer batchledger.mu.Unlock()
		if !batchledger.running {
			if err := c.StartManager(context.Background(), batchledger.manager); err != nil {
				t.Errorf("restart batchledger after the test: %v", err)
			}
			batchledger.running = true
		}
	})
}

// StartBatchledger starts the controller again after StopBatchledger.
func StartBatchledger(t testing.TB) {
	t.Helper()
	c := localOnly(t)
	batchledger.mu.Lock()
	defer batchledger.mu.Unlock()
	if err := c.StartManager(t.Context(), batchledger.manager); err != nil {
		t.Fatalf("start batchledger: %v", err)
	}
	batchledger.running = true
}

func localOnly(t testing.TB) *localcluster.Cluster {
	t.Helper()
	if env.cluster == nil {
		t.Skip("needs the local cluster: the controller process is stopped and started by the test")
	}
	return env.cluster
}

// StartBatchledgerReplicas replaces the controller for the rest of the test by n
// replicas electing a leader (Lease in namespace default, short lease timings so a
// takeover is seen within seconds) behind one webhook address, each reading from the
// API server the accounts its cache has not delivered, as the chart's replicas do
// (--scope-live-reads); extraArgs are added to every replica's flags. The single
// controller comes back when the test ends.
func StartBatchledgerReplicas(t testing.TB, n int, extraArgs ...string) *localcluster.Replicas {
	t.Helper()
	StopBatchledger(t)
	c := env.cluster
	args := append([]string{"--leader-elect", "--namespace=default", "--scope-live-reads",
		"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"},
		extraArgs...)
	m, err := localcluster.BatchledgerManager(batchledger.binary, args...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartReplicas(t.Context(), m, n)
	if err != nil {
		t.Fatalf("start %d batchledger replicas: %v", n, err)
	}
	// Registered after StopBatchledger's cleanup, so it runs first: the replicas are gone
	// before the single controller starts again and takes its webhooks back.
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop replicas: %v", err)
		}
	})
	return r
}

// KillManager SIGKILLs a manager of the local cluster (a replica, say), as a node failure would.
func KillManager(t testing.TB, name string) {
	t.Helper()
	if err := localOnly(t).KillManager(name); err != nil {
		t.Fatalf("kill %s: %v", name, err)
	}
}

// ControllerMetrics are batchledger's own counters and its leader gauge, read from its
// metrics endpoint.
type ControllerMetrics = scrape.Controller

// BatchledgerMetrics reads the controller's counters (local cluster only).
func BatchledgerMetrics(t testing.TB) ControllerMetrics {
	t.Helper()
	return ManagerMetrics(t, localcluster.BatchledgerName)
}

// ManagerMetrics reads the counters of the named batchledger process (the controller,
// or one of StartBatchledgerReplicas' replicas).
func ManagerMetrics(t testing.TB, name string) ControllerMetrics {
	t.Helper()
	return ScrapeManager(t, name).Controller()
}

// ScrapeManager reads every metric the named batchledger process serves (local cluster
// only): controller-runtime's as well as batchledger's own.
func ScrapeManager(t testing.TB, name string) scrape.Families {
	t.Helper()
	env, ok := localOnly(t).ManagerEnv(name)
	if !ok {
		t.Fatalf("read %s metrics: %s is not running", name, name)
	}
	f, err := scrape.Get(t.Context(), env.MetricsURL())
	if err != nil {
		t.Fatalf("read %s metrics: %v", name, err)
	}
	return f
}

// StatusWatch counts the status changes of one object as the API server reports them,
// leaving out batchledger's own conditions: they are what the controller writes, not
// what it observes.
type StatusWatch struct {
	mu      sync.Mutex
	changes int
}

// Changes is the number of status changes seen so far.
func (w *StatusWatch) Changes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changes
}

// WatchStatus starts counting status changes of obj (a Job, a Workload, ...) until the
// test ends.
func WatchStatus(t testing.TB, obj client.Object) *StatusWatch {
	t.Helper()
	gvk, err := env.client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatalf("watch %T: %v", obj, err)
	}
	wc, err := client.NewWithWatch(env.config, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatalf("watch client: %v", err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	w, err := wc.Watch(t.Context(), list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"metadata.name": obj.GetName()})
	if err != nil {
		t.Fatalf("watch %s: %v", describe(obj), err)
	}
	sw := &StatusWatch{}
	go func() {
		defer w.Stop()
		var last any
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			status := observedStatus(u)
			if last != nil && !equality.Semantic.DeepEqual(last, status) {
				sw.mu.Lock()
				sw.changes++
				sw.mu.Unlock()
			}
			last = status
		}
	}()
	return sw
}

// observedStatus is an object's status without batchledger's conditions
// (v1alpha1.IsWorkloadCondition).
func observedStatus(u *unstructured.Unstructured) any {
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	conds, _, _ := unstructured.NestedSlice(status, "conditions")
	kept := conds[:0:0]
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && v1alpha1.IsWorkloadCondition(fmt.Sprint(m["type"])) {
			continue
		}
		kept = append(kept, c)
	}
	if status != nil {
		status["conditions"] = kept
	}
	return status
}
