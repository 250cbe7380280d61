package workers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
)

// unreachableKubeconfig points at a loopback port nothing listens on.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: w
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: reader
  user: {token: "t"}
contexts:
- name: w
  context: {cluster: w, user: reader}
current-context: w
`

func workerSecret(name, worker, kubeconfig string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "batchledger-system", Labels: map[string]string{multikueue.LabelWorkerCluster: worker}},
		Data:       map[string][]byte{multikueue.KubeconfigKey: []byte(kubeconfig)},
	}
}

// TestRegistryFollowsSecrets: a labelled Secret makes its worker configured and read;
// a worker that does not answer is unreachable since the first failed probe; a deleted
// Secret leaves the worker unconfigured; before the Secrets were read whole, every
// worker counts as configured (nothing is lost for a Secret not seen yet); a kubeconfig
// that does not parse makes the worker unreachable with the error.
func TestRegistryFollowsSecrets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Date(2026, 1, 1, 12, 3, 0, 0, time.UTC)
	r := &Registry{Namespace: "batchledger-system", Scheme: scheme.Must(), Now: func() time.Time { return now }}
	r.init()
	r.ctx = ctx
	state := func(worker string) multikueue.WorkerState {
		t.Helper()
		_, s, err := r.Records(ctx, worker, "ns", "job-j")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := state("worker-a"); !s.Configured || s.Problem("worker-a") == "" {
		t.Errorf("before the Secrets were read: %+v, want configured, not read yet", s)
	}
	r.ready = true
	if s := state("worker-a"); s.Configured {
		t.Errorf("no Secret: %+v, want unconfigured", s)
	}
	r.secretChanged(workerSecret("kc-a", "worker-a", unreachableKubeconfig))
	if s := state("worker-a"); !s.Configured || s.Synced {
		t.Errorf("Secret given: %+v, want configured, not synced", s)
	}
	probeCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	r.probeAll(probeCtx)
	stop()
	s := state("worker-a")
	if !s.UnreachableSince.Equal(now) || s.Err == "" || !strings.Contains(s.Problem("worker-a"), "worker-a not reachable since 2026-01-01T12:03:00Z") {
		t.Errorf("after a failed probe: %+v (%q), want unreachable since %s", s, s.Problem("worker-a"), now)
	}
	r.secretGone("kc-a")
	if s := state("worker-a"); s.Configured {
		t.Errorf("Secret deleted: %+v, want unconfigured", s)
	}
	r.secretChanged(workerSecret("kc-b", "worker-b", "not a kubeconfig"))
	if s := state("worker-b"); !s.Configured || s.UnreachableSince.IsZero() || !strings.Contains(s.Err, multikueue.KubeconfigKey) {
		t.Errorf("unusable kubeconfig: %+v, want unreachable with the error", s)
	}
}

// TestRegistryKeepsAWorkerAnotherSecretNames: two Secrets name worker-a (a kubeconfig
// rotated by giving the new one before deleting the old, or relabelling the old one):
// the worker stays configured, read with the Secret left, until no Secret names it.
func TestRegistryKeepsAWorkerAnotherSecretNames(t *testing.T) {
	for name, tc := range map[string]struct {
		leave func(r *Registry) // takes kc-old away from worker-a
	}{
		"old Secret deleted":    {leave: func(r *Registry) { r.secretGone("kc-old") }},
		"old Secret relabelled": {leave: func(r *Registry) { r.secretChanged(workerSecret("kc-old", "worker-b", unreachableKubeconfig)) }},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &Registry{Namespace: "batchledger-system", Scheme: scheme.Must()}
			r.init()
			r.ctx, r.ready = ctx, true
			state := func() multikueue.WorkerState {
				t.Helper()
				_, s, err := r.Records(ctx, "worker-a", "ns", "job-j")
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			r.secretChanged(workerSecret("kc-old", "worker-a", unreachableKubeconfig))
			r.secretChanged(workerSecret("kc-new", "worker-a", strings.Replace(unreachableKubeconfig, `token: "t"`, `token: "t2"`, 1)))
			tc.leave(r)
			if s := state(); !s.Configured {
				t.Errorf("kc-new still names worker-a: %+v, want configured", s)
			}
			r.secretGone("kc-new")
			if s := state(); s.Configured {
				t.Errorf("no Secret names worker-a: %+v, want unconfigured", s)
			}
		})
	}
}

// TestWakeWaitsForRoomInTheQueue: a record read while the accounts' queue is full still
// wakes its accounts once there is room, in order (an account whose dispatched children
// are read is not checked again by itself); a wake-up gives up only when its worker's
// context ends.
func TestWakeWaitsForRoomInTheQueue(t *testing.T) {
	r := &Registry{}
	events := r.Events()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range cap(events) {
		r.wake(ctx, &v1alpha1.WorkerJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rec-%d", i)}})
	}
	sent := make(chan struct{})
	go func() {
		r.wake(ctx, &v1alpha1.WorkerJob{ObjectMeta: metav1.ObjectMeta{Name: "past-the-queue"}})
		close(sent)
	}()
	var last string
	for range cap(events) + 1 {
		select {
		case ev := <-events:
			last = ev.Object.GetName()
		case <-time.After(10 * time.Second):
			t.Fatalf("a wake-up was lost after %q", last)
		}
	}
	<-sent
	if last != "past-the-queue" {
		t.Errorf("the last wake-up was %q, want the one sent while the queue was full", last)
	}

	for range cap(events) {
		r.wake(ctx, &v1alpha1.WorkerJob{})
	}
	gone, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.wake(gone, &v1alpha1.WorkerJob{})
		close(done)
	}()
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a wake-up of a worker whose context ended still waits")
	}
}
