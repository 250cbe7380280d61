package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// namespaceTerminating is the error the API server's NamespaceLifecycle admission
// returns for a create in a namespace being deleted.
func namespaceTerminating(obj client.Object) error {
	err := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("shardresults").GroupResource(), obj.GetName(),
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", obj.GetNamespace()))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace " + obj.GetNamespace() + " is being terminated", Field: "metadata.namespace",
	})
	return err
}

// TestNamespaceDeletionNeverWaitsOnBatchledger: in a namespace being deleted, where the
// API server refuses new objects, result capture records what it still can (appending to
// a chunk that exists), leaves the rest unrecorded without an error (no retry loop that
// waits for nothing), and the releaser lets every held pod go: the recorded ones at once,
// the others after the namespace grace with a Warning on the pod and on the Namespace.
// Any other refusal of a create is still an error, retried.
func TestNamespaceDeletionNeverWaitsOnBatchledger(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Obj()
	ba := accountOfJ().RequireResults("").Obj()
	held := func(name string, idx int) *corev1.Pod {
		return wrappers.MakeIndexPod(j, name, idx).Finalizers(v1alpha1.ResultFinalizer).
			Succeeded(testNow.Add(-time.Minute), reportOf(t, []string{"A", "B"}[idx])).Deleting(testNow.Add(-20 * time.Second)).Obj()
	}
	j0, j1 := held("j-0", 0), held("j-1", 1)
	// j0Recorded is the chunk that recorded j-0 before the namespace's deletion began.
	j0Recorded := func() *v1alpha1.ShardResults {
		c := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
		c.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: j.UID, Pod: j0.Name, PodUID: j0.UID, Sequence: 1}}
		return c
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"example.com/keep"},
		DeletionTimestamp: &metav1.Time{Time: testNow.Add(-20 * time.Second)}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	for _, tc := range []struct {
		name   string
		chunks []client.Object
		// refuse is the API server's answer to a chunk's creation.
		refuse func(client.Object) error

		wantErr bool
		// wantRecorded are the pods the stored chunks record afterwards.
		wantRecorded []types.UID
		// wantUnrecordedReleases are the pods released unrecorded, with Warnings.
		wantUnrecordedReleases float64
	}{
		{
			name:                   "no chunk yet: none can be created, both pods released unrecorded",
			refuse:                 namespaceTerminating,
			wantUnrecordedReleases: 2,
		},
		{
			name:         "j-0's chunk exists: j-1 is appended to it, both released as recorded",
			chunks:       []client.Object{j0Recorded()},
			refuse:       namespaceTerminating,
			wantRecorded: []types.UID{j0.UID, j1.UID},
		},
		{
			name: "a create refused for another reason: the error, retried",
			refuse: func(obj client.Object) error {
				return apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("shardresults").GroupResource(), obj.GetName(), fmt.Errorf("exceeded quota"))
			},
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hooks{create: func(obj client.Object) error {
				if _, ok := obj.(*v1alpha1.ShardResults); ok {
					return tc.refuse(obj)
				}
				return nil
			}}
			f := newFixture(t, h, append([]client.Object{ba, j, ns, j0.DeepCopy(), j1.DeepCopy()}, tc.chunks...)...)
			signStoredChunks(t, f)
			r := f.reconciler()
			r.Metrics = newMetrics(prometheus.NewRegistry())
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ba)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			var chunks v1alpha1.ShardResultsList
			if err := f.c.List(context.Background(), &chunks, client.InNamespace("ns")); err != nil {
				t.Fatal(err)
			}
			var recorded []types.UID
			for _, c := range chunks.Items {
				for _, res := range c.Results {
					recorded = append(recorded, res.PodUID)
				}
			}
			if !slices.Equal(recorded, tc.wantRecorded) {
				t.Errorf("recorded pods %v, want %v", recorded, tc.wantRecorded)
			}
			// The account judges only the results stored, never those of a chunk refused.
			if st := f.account(t, "acct").Status; int(st.Shards.Accepted+st.Results.Rejected) != len(tc.wantRecorded) {
				t.Errorf("the account judged %d accepted and %d rejected results, want %d in all", st.Shards.Accepted, st.Results.Rejected, len(tc.wantRecorded))
			}
			m := newMetrics(prometheus.NewRegistry())
			rel := &PodReleaser{Client: f.c, Metrics: m, Recorder: f, Now: func() time.Time { return testNow }, started: testNow.Add(-time.Hour)}
			for _, p := range []*corev1.Pod{j0, j1} {
				res, err := rel.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
				if err != nil || !res.IsZero() {
					t.Fatalf("release %s = %+v, %v; want released", p.Name, res, err)
				}
				var got corev1.Pod
				if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(p), &got); !apierrors.IsNotFound(err) {
					t.Errorf("pod %s still there (%v), finalizers %v; want it released, and so gone", p.Name, err, got.Finalizers)
				}
			}
			if got := testutil.ToFloat64(m.NamespaceReleases); got != tc.wantUnrecordedReleases {
				t.Errorf("namespace releases metric = %v, want %v", got, tc.wantUnrecordedReleases)
			}
			if got, want := len(f.eventsOf("Namespace")), int(tc.wantUnrecordedReleases); got != want {
				t.Errorf("%d Warnings on the Namespace, want %d: %v", got, want, f.events)
			}
		})
	}
}

// signStoredChunks signs the fixture's stored chunks with its manager's key, as the
// manager signed the chunks it wrote before the test begins.
func signStoredChunks(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	key, err := f.ledger.Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var chunks v1alpha1.ShardResultsList
	if err := f.c.List(ctx, &chunks); err != nil {
		t.Fatal(err)
	}
	for i := range chunks.Items {
		key.Sign(&chunks.Items[i])
		if err := f.c.Update(ctx, &chunks.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
}
