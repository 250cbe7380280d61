package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

var (
	accountsGR  = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "batchaccounts"}
	workloadsGR = schema.GroupResource{Group: kueue.GroupVersion.Group, Resource: "workloads"}
)

// jobJ is Indexed Job j of two indexes, in the account's opt-in scope.
func jobJ(scope string) *wrappers.JobWrapper {
	return wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").ResourceVersion("1").PodLabel(v1alpha1.LabelScope, scope)
}

// workloadOfJ is Job j's Workload, admitted an hour before testNow.
func workloadOfJ(j *batchv1.Job) *wrappers.WorkloadWrapper {
	return wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Admitted("gpu", testNow.Add(-time.Hour))
}

// accountOfJ maps Job j's indexes 0-1 onto shards A and B.
func accountOfJ() *wrappers.BatchAccountWrapper {
	return wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").AssignJob("j", "0-1", "A", "B")
}

// conditionOf is the status and reason of condition typ, "" when absent.
func conditionOf(conds []metav1.Condition, typ string) string {
	c := apimeta.FindStatusCondition(conds, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}

// TestReconcileWritesStatusOnceThenEmits: each reconcile computes the account and writes
// its status at most once; events follow only that write, one per newsworthy condition
// change (newsworthy), and none when the write failed or nothing changed (the events of a
// conflicting write would repeat those of the replica that won).
func TestReconcileWritesStatusOnceThenEmits(t *testing.T) {
	running := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
	complete := jobJ(v1alpha1.ScopeCoverage).Completed("0-1", 2).Complete(testNow).Obj()
	cases := []struct {
		name string
		objs []client.Object
		h    hooks
		// settle runs one reconcile first, unmeasured: the status is then what it wrote.
		settle bool
		// change alters the cluster after settling.
		change func(t *testing.T, c client.Client)

		wantErr   bool
		wantRetry bool
		// errOrRequeue accepts an error or a requeue alike: a conflict is retried either
		// way.
		errOrRequeue       bool
		wantStatusWrites   int
		wantAccountEvents  []string
		wantWorkloadEvents []string
		// wantCovered is the stored ShardsCovered condition ("" for none).
		wantCovered string
	}{
		{
			name:             "first observation: one write, then one event per milestone, and the Workload's two",
			objs:             []client.Object{accountOfJ().Obj(), complete, workloadOfJ(complete).Obj()},
			wantStatusWrites: 1,
			wantAccountEvents: []string{
				"Normal Admitted", "Normal ShardsCovered", "Normal Terminated", "Normal Accepted",
			},
			wantWorkloadEvents: []string{"Normal ShardsCovered", "Normal Accepted"},
			wantCovered:        "True AllShardsCovered",
		},
		{
			name:        "nothing changed since the last write: no write, no event",
			objs:        []client.Object{accountOfJ().Obj(), complete, workloadOfJ(complete).Obj()},
			settle:      true,
			wantCovered: "True AllShardsCovered",
		},
		{
			name:               "the Job completed: one write, events only for the conditions that turned True",
			objs:               []client.Object{accountOfJ().Obj(), running, workloadOfJ(running).Obj()},
			settle:             true,
			change:             func(t *testing.T, c client.Client) { writeStatus(t, c, complete) },
			wantStatusWrites:   1,
			wantAccountEvents:  []string{"Normal ShardsCovered", "Normal Terminated", "Normal Accepted"},
			wantWorkloadEvents: []string{"Normal ShardsCovered", "Normal Accepted"},
			wantCovered:        "True AllShardsCovered",
		},
		{
			name: "a pod succeeded that the Job controller has not counted yet: no write",
			objs: []client.Object{accountOfJ().Obj(), running, workloadOfJ(running).Obj(),
				wrappers.MakeIndexPod(running, "j-0", 0).UID("pod-0").Succeeded(testNow.Add(-time.Minute), "").Obj()},
			settle: true,
			change: func(t *testing.T, c client.Client) {
				// As the kubelet leaves it: Succeeded, the Job controller's finalizer still on.
				pod := wrappers.MakeIndexPod(running, "j-1", 1).UID("pod-1").Succeeded(testNow, "").
					Finalizers(batchv1.JobTrackingFinalizer).Obj()
				if err := c.Create(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
			},
			wantCovered: "False ShardsMissing",
		},
		{
			// The API server allows it; the Job controller acts on no finished Job.
			name:   "a finished Job's completions changed with its parallelism since: nothing it did changed, no write, no event",
			objs:   []client.Object{accountOfJ().Obj(), complete, workloadOfJ(complete).Obj()},
			settle: true,
			change: func(t *testing.T, c client.Client) {
				var j batchv1.Job
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(complete), &j); err != nil {
					t.Fatal(err)
				}
				j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](1), ptr.To[int32](1)
				if err := c.Update(context.Background(), &j); err != nil {
					t.Fatal(err)
				}
			},
			wantCovered: "True AllShardsCovered",
		},
		{
			name: "the status write conflicts (a stale cache, another replica): no event, retried",
			objs: []client.Object{accountOfJ().Obj(), complete, workloadOfJ(complete).Obj()},
			h: hooks{statusUpdate: func(obj client.Object) error {
				return apierrors.NewConflict(accountsGR, obj.GetName(), errors.New("the object has been modified"))
			}},
			errOrRequeue:     true,
			wantRetry:        true,
			wantStatusWrites: 1,
		},
		{
			name: "the status write fails: the error, no event",
			objs: []client.Object{accountOfJ().Obj(), complete, workloadOfJ(complete).Obj()},
			h: hooks{statusUpdate: func(obj client.Object) error {
				return apierrors.NewServiceUnavailable("etcd is down")
			}},
			wantErr:          true,
			wantRetry:        true,
			wantStatusWrites: 1,
		},
		{
			name: "observing fails: the error, no write, no event",
			objs: []client.Object{accountOfJ().Obj(), complete, workloadOfJ(complete).Obj()},
			h: hooks{list: func(list client.ObjectList) error {
				if _, pods := list.(*corev1.PodList); pods {
					return apierrors.NewServiceUnavailable("the cache is not synced")
				}
				return nil
			}},
			wantErr:   true,
			wantRetry: true,
		},
		{
			name: "the account is gone: nothing",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.h, tc.objs...)
			if tc.settle {
				if _, err := f.reconcile("acct"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.change != nil {
				tc.change(t, f.c)
			}
			f.reset()
			res, err := f.reconcile("acct")
			if (!tc.errOrRequeue && (err != nil) != tc.wantErr) || retried(res, err) != tc.wantRetry {
				t.Fatalf("reconcile = %+v, %v; want error %v, retried %v", res, err, tc.wantErr, tc.wantRetry)
			}
			if got := len(f.writesOf("status-update")); got != tc.wantStatusWrites {
				t.Errorf("%d status writes, want %d: %v", got, tc.wantStatusWrites, f.writes)
			}
			if diff := cmp.Diff(tc.wantAccountEvents, f.eventsOf("BatchAccount")); diff != "" {
				t.Errorf("account events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWorkloadEvents, f.eventsOf("Workload")); diff != "" {
				t.Errorf("Workload events (-want +got):\n%s", diff)
			}
			// Every event follows the status write that recorded its change.
			if first := slices.IndexFunc(f.writes, func(w string) bool { return strings.HasPrefix(w, "event ") }); first >= 0 {
				if w := slices.Index(f.writes, "status-update BatchAccount/acct"); w < 0 || w > first {
					t.Errorf("an event preceded the status write: %v", f.writes)
				}
			}
			if tc.objs == nil {
				return
			}
			if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionShardsCovered); got != tc.wantCovered {
				t.Errorf("stored ShardsCovered = %q, want %q", got, tc.wantCovered)
			}
		})
	}
}

// writeStatus writes obj's status over the stored object's, as its controller (the Job
// controller, the kubelet) would.
func writeStatus(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	cur := obj.DeepCopyObject().(client.Object)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
		t.Fatal(err)
	}
	next := obj.DeepCopyObject().(client.Object)
	next.SetResourceVersion(cur.GetResourceVersion())
	if err := c.Status().Update(context.Background(), next); err != nil {
		t.Fatal(err)
	}
}

// report is the termination message of a worker that processed shard on the account's
// revisions, every record valid.
func report(t *testing.T, shard string) string {
	t.Helper()
	msg, err := result.Encode(result.Report{Shard: shard, InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://b/" + shard, Digest: "sha256:" + shard, Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestReconcileCapturesResultsBeforeTheStatus: the results of succeeded pods are recorded
// in the account's ShardResults chunk before the status that counts them is written, each
// pod once; a failed chunk write leaves the status and events alone; and the held pods of
// a deleted Job are still captured under the identity the account recorded.
func TestReconcileCapturesResultsBeforeTheStatus(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	held := func(w *wrappers.PodWrapper) *corev1.Pod { return w.Finalizers(v1alpha1.ResultFinalizer).Obj() }
	pod0 := held(wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")))
	pod1 := held(wrappers.MakeIndexPod(j, "j-1", 1).Succeeded(testNow.Add(-time.Minute), report(t, "B")))
	running1 := held(wrappers.MakeIndexPod(j, "j-1", 1).Phase(corev1.PodRunning))
	cases := []struct {
		name   string
		objs   []client.Object
		h      hooks
		settle bool
		change func(t *testing.T, c client.Client)

		wantErr bool
		// wantChunkWrites are the chunk writes ("create/update <name>"), in order.
		wantChunkWrites []string
		// wantRecorded are the pods in the chunk, in capture order.
		wantRecorded []string
		wantAccepted string
		wantEvents   bool
	}{
		{
			name:            "two succeeded pods: one chunk created with both, then the status",
			objs:            []client.Object{acct, j, pod0, pod1},
			wantChunkWrites: []string{"create acct-uid-0"},
			wantRecorded:    []string{"j-0", "j-1"},
			wantAccepted:    "True Accepted",
			wantEvents:      true,
		},
		{
			name:         "every pod recorded already: no chunk write",
			objs:         []client.Object{acct, j, pod0, pod1},
			settle:       true,
			wantRecorded: []string{"j-0", "j-1"},
			wantAccepted: "True Accepted",
		},
		{
			name:            "one more pod succeeded: its result joins the chunk",
			objs:            []client.Object{acct, j, pod0, running1},
			settle:          true,
			change:          func(t *testing.T, c client.Client) { writeStatus(t, c, pod1) },
			wantChunkWrites: []string{"update acct-uid-0"},
			wantRecorded:    []string{"j-0", "j-1"},
			wantAccepted:    "True Accepted",
			wantEvents:      true,
		},
		{
			name:   "the Job was deleted: its held pod's result is captured under the recorded UID",
			objs:   []client.Object{acct, j, pod0, running1},
			settle: true,
			change: func(t *testing.T, c client.Client) {
				if err := c.Delete(context.Background(), j.DeepCopy()); err != nil {
					t.Fatal(err)
				}
				writeStatus(t, c, pod1)
			},
			wantChunkWrites: []string{"update acct-uid-0"},
			wantRecorded:    []string{"j-0", "j-1"},
			wantAccepted:    "True Accepted",
			wantEvents:      true,
		},
		{
			name: "the chunk write fails: the error, no status write, no event",
			objs: []client.Object{acct, j, pod0, pod1},
			h: hooks{create: func(obj client.Object) error {
				if _, ok := obj.(*v1alpha1.ShardResults); ok {
					return apierrors.NewServiceUnavailable("etcd is down")
				}
				return nil
			}},
			wantErr:         true,
			wantChunkWrites: []string{"create acct-uid-0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.h, tc.objs...)
			if tc.settle {
				if _, err := f.reconcile("acct"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.change != nil {
				tc.change(t, f.c)
			}
			f.reset()
			_, err := f.reconcile("acct")
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error %v, want an error: %v", err, tc.wantErr)
			}
			var chunkWrites []string
			statusAt, lastChunkAt := -1, -1
			for i, w := range f.writes {
				verb, obj, _ := strings.Cut(w, " ")
				if kind, name, _ := strings.Cut(obj, "/"); kind == "ShardResults" {
					chunkWrites = append(chunkWrites, verb+" "+name)
					lastChunkAt = i
				}
				if w == "status-update BatchAccount/acct" && statusAt < 0 {
					statusAt = i
				}
			}
			if diff := cmp.Diff(tc.wantChunkWrites, chunkWrites); diff != "" {
				t.Errorf("chunk writes (-want +got):\n%s", diff)
			}
			if tc.wantErr && statusAt >= 0 {
				t.Errorf("the status was written after the chunk write failed: %v", f.writes)
			}
			if lastChunkAt >= 0 && statusAt >= 0 && statusAt < lastChunkAt {
				t.Errorf("the status was written before the results it counts: %v", f.writes)
			}
			if got := len(f.events) > 0; got != tc.wantEvents {
				t.Errorf("events emitted = %v, want %v: %v", got, tc.wantEvents, f.events)
			}
			var chunks v1alpha1.ShardResultsList
			if err := f.c.List(context.Background(), &chunks); err != nil {
				t.Fatal(err)
			}
			var recorded []string
			for _, r := range account.RecordedInOrder(chunks.Items) {
				recorded = append(recorded, r.Pod)
			}
			if diff := cmp.Diff(tc.wantRecorded, recorded); diff != "" {
				t.Errorf("recorded pods (-want +got):\n%s", diff)
			}
			for _, c := range chunks.Items {
				if !metav1.IsControlledBy(&c, acct) {
					t.Errorf("chunk %s is not controlled by its account", c.Name)
				}
				for _, r := range c.Results {
					if r.JobUID != j.UID {
						t.Errorf("result of %s recorded under Job UID %q, want %q", r.Pod, r.JobUID, j.UID)
					}
				}
			}
			if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("stored Accepted = %q, want %q", got, tc.wantAccepted)
			}
		})
	}
}

// TestReconcileFollowsTheLatestRestartAttempt: a JobSet target is the child Job of its
// replicatedJob and job index, named as JobSet names it, that is not being deleted;
// children of other indexes never count, nor does a Job of another name that carries the
// child's labels and a controller reference to the JobSet (which a namespace editor can
// write), and the Workload observed and published on is the JobSet's.
func TestReconcileFollowsTheLatestRestartAttempt(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).Obj()
	js.UID = "ts-uid"
	// JobSet names every attempt's child alike, and creates one only once the previous
	// attempt's is gone.
	named := func(name string, jobIndex, attempt int) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, "ns").Indexed(2).UID(fmt.Sprintf("ts-workers-%d-a%d-uid", jobIndex, attempt)).JobSetChild(js, "workers", jobIndex, attempt).
			PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0", 1)
	}
	child := func(jobIndex, attempt int) *wrappers.JobWrapper {
		return named(fmt.Sprintf("ts-workers-%d", jobIndex), jobIndex, attempt)
	}
	deleting := func(w *wrappers.JobWrapper) *batchv1.Job {
		return w.Finalizers("batch.kubernetes.io/test").Deleting(testNow.Add(-time.Second)).Obj()
	}
	wl := wrappers.MakeWorkload("jobset-ts", "ns").UID("wl-ts-uid").ForJobSet(js).Admitted("gpu", testNow.Add(-time.Hour)).Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).
		AssignJobSet("ts", "workers", 0, "0-1", "0-1").Obj()
	cases := []struct {
		name        string
		children    []client.Object
		wantFound   bool
		wantUID     string
		wantAttempt int32
	}{
		{"one child", []client.Object{child(0, 0).Obj()}, true, "ts-workers-0-a0-uid", 0},
		{"a restart created attempt 1", []client.Object{child(0, 1).Obj()}, true, "ts-workers-0-a1-uid", 1},
		{"the only child is being deleted: not found", []client.Object{deleting(child(0, 0))}, false, "", 0},
		{"another job index's later attempt does not count", []client.Object{child(0, 0).Obj(), child(1, 3).Obj()}, true, "ts-workers-0-a0-uid", 0},
		{"a Job of another name claiming a later attempt is not followed", []client.Object{child(0, 0).Obj(), named("mallory", 0, 9).Obj()}, true, "ts-workers-0-a0-uid", 0},
		{"only a Job of another name: not found", []client.Object{named("mallory", 0, 9).Obj()}, false, "", 0},
		{"no child yet: not found", nil, false, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append([]client.Object{acct, js, wl}, tc.children...)...)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "acct").Status
			if len(st.Targets) != 1 {
				t.Fatalf("targets = %+v", st.Targets)
			}
			got := st.Targets[0]
			if got.Found != tc.wantFound || string(got.UID) != tc.wantUID || got.RestartAttempt != tc.wantAttempt {
				t.Errorf("target found %v, UID %q, attempt %d; want %v, %q, %d", got.Found, got.UID, got.RestartAttempt, tc.wantFound, tc.wantUID, tc.wantAttempt)
			}
			if !tc.wantFound {
				return
			}
			if got.Workload == nil || got.Workload.UID != wl.UID {
				t.Errorf("observed Workload %+v, want the JobSet's %s", got.Workload, wl.Name)
			}
			if len(f.applies) != 1 || *f.applies[0].ac.GetName() != wl.Name {
				t.Errorf("published on %v, want the JobSet's Workload %s", f.writesOf("status-apply"), wl.Name)
			}
		})
	}
}

// TestPublishPinsTheWorkloadUID: the verdict is applied to the status of the live (newest)
// Workload of the account's Job, under batchledger's field manager, carrying the UID read:
// a Workload deleted and recreated under the same name (the read was stale) refuses it,
// and that, or a Workload gone, ends the reconcile quietly; its successor wakes it again.
func TestPublishPinsTheWorkloadUID(t *testing.T) {
	j := jobJ(v1alpha1.ScopeCoverage).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().Obj()
	live := workloadOfJ(j).Creation(testNow.Add(-time.Hour)).Obj()
	older := wrappers.MakeWorkload("job-j-old", "ns").UID("wl-old-uid").ForJob(j).Creation(testNow.Add(-2 * time.Hour)).Obj()
	cases := []struct {
		name string
		objs []client.Object
		h    hooks
		// settle runs one reconcile first, unmeasured.
		settle bool

		wantErr bool
		// wantApplied are "<name> <uid>" of the applies sent.
		wantApplied []string
		// wantPublished are the Workloads that carry the verdict afterwards.
		wantPublished []string
	}{
		{
			name:          "one Workload",
			objs:          []client.Object{acct, j, live},
			wantApplied:   []string{"job-j wl-uid"},
			wantPublished: []string{"job-j"},
		},
		{
			name:          "two Workloads of the Job: the newest",
			objs:          []client.Object{acct, j, older, live},
			wantApplied:   []string{"job-j wl-uid"},
			wantPublished: []string{"job-j"},
		},
		{
			name: "a stale read: the Workload was recreated under its name, the apply is refused",
			objs: []client.Object{acct, j, live},
			h: hooks{listWorkloads: func(l *kueue.WorkloadList) {
				for i := range l.Items {
					l.Items[i].UID = "wl-deleted-uid" // what the cache still holds
				}
			}},
			wantApplied: []string{"job-j wl-deleted-uid"},
		},
		{
			name: "the Workload is gone: nothing more",
			objs: []client.Object{acct, j, live},
			h: hooks{apply: func(ac *kueueac.WorkloadApplyConfiguration, _ client.Client) error {
				return apierrors.NewNotFound(workloadsGR, *ac.GetName())
			}},
			wantApplied: []string{"job-j wl-uid"},
		},
		{
			name: "the apply fails: the error",
			objs: []client.Object{acct, j, live},
			h: hooks{apply: func(*kueueac.WorkloadApplyConfiguration, client.Client) error {
				return apierrors.NewServiceUnavailable("etcd is down")
			}},
			wantErr:     true,
			wantApplied: []string{"job-j wl-uid"},
		},
		{
			name:          "the Workload carries the verdict already: no apply",
			objs:          []client.Object{acct, j, live},
			settle:        true,
			wantPublished: []string{"job-j"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.h, tc.objs...)
			if tc.settle {
				if _, err := f.reconcile("acct"); err != nil {
					t.Fatal(err)
				}
				f.reset()
			}
			_, err := f.reconcile("acct")
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error %v, want an error: %v", err, tc.wantErr)
			}
			var gotApplied []string
			for _, a := range f.applies {
				uid := "<no UID>"
				if a.ac.UID != nil {
					uid = string(*a.ac.UID)
				}
				gotApplied = append(gotApplied, *a.ac.GetName()+" "+uid)
				if a.owner != FieldManager || !a.force {
					t.Errorf("applied as %q (force %v), want %q forcing ownership", a.owner, a.force, FieldManager)
				}
				for _, c := range a.ac.Status.Conditions {
					if !strings.HasPrefix(*c.Type, "batchledger.dev/") {
						t.Errorf("applied condition %s, which is not batchledger's", *c.Type)
					}
				}
			}
			if diff := cmp.Diff(tc.wantApplied, gotApplied); diff != "" {
				t.Errorf("applies (-want +got):\n%s", diff)
			}
			var wls kueue.WorkloadList
			if err := f.c.List(context.Background(), &wls); err != nil {
				t.Fatal(err)
			}
			var published []string
			for _, wl := range wls.Items {
				if apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered) != nil {
					published = append(published, wl.Name)
				}
				// Kueue's own conditions are never touched.
				if wl.Name == live.Name && !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
					t.Errorf("Workload %s lost Kueue's Admitted condition: %+v", wl.Name, wl.Status.Conditions)
				}
			}
			if diff := cmp.Diff(tc.wantPublished, published); diff != "" {
				t.Errorf("Workloads carrying the verdict (-want +got):\n%s", diff)
			}
			// The account's own status is written before publishing, whatever the Workload does.
			if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionShardsCovered); got != "True AllShardsCovered" {
				t.Errorf("stored ShardsCovered = %q", got)
			}
		})
	}
}

// TestReconcileRecordsResultsOfASupersededAttempt: a pod that succeeded and reported its
// result under a JobSet child that a restart then superseded keeps its result in the
// ledger, whether the reconcile first runs while the old child is being deleted or after
// its successor exists: recorded under the old Job UID, rejected as StaleIdentity, never
// standing for the shard; the successor's result stands. Before, such a pod was released
// unrecorded unless a reconcile had captured it in the moment between its success and
// the restart.
func TestReconcileRecordsResultsOfASupersededAttempt(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	js.UID = "ts-uid"
	// JobSet names the child alike in every attempt, and creates the successor only once
	// the old one is gone; the old pod, held by our finalizer, outlives it.
	child := func(attempt int) *wrappers.JobWrapper {
		uid := "ts-workers-0-a" + string(rune('0'+attempt)) + "-uid"
		return wrappers.MakeJob("ts-workers-0", "ns").Indexed(1).UID(uid).JobSetChild(js, "workers", 0, attempt).
			PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults)
	}
	old := child(0).Finalizers("batch.kubernetes.io/test").Deleting(testNow.Add(-time.Second)).Obj()
	oldPod := wrappers.MakeIndexPod(old, "ts-workers-0-0-old", 0).Succeeded(testNow.Add(-time.Minute), reportOf(t, "s0")).
		Finalizers(v1alpha1.ResultFinalizer).Deleting(testNow.Add(-time.Second)).Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 1).
		AssignJobSet("ts", "workers", 0, "0", "0").RequireResults("").Revisions("D", "m").Obj()
	for _, tc := range []struct {
		name     string
		children []client.Object
	}{
		{"the old child is being deleted, its successor not created yet", []client.Object{old}},
		{"the old child is gone, its successor exists", []client.Object{child(1).Obj()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append([]client.Object{acct, js, oldPod.DeepCopy()}, tc.children...)...)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			var recorded []v1alpha1.RecordedResult
			for _, ch := range chunksOf(t, f.c) {
				recorded = append(recorded, ch.Results...)
			}
			if len(recorded) != 1 || recorded[0].PodUID != oldPod.UID || recorded[0].JobUID != old.UID {
				t.Fatalf("recorded %+v; want the old pod's result under Job UID %s", recorded, old.UID)
			}
			st := f.account(t, "acct").Status
			if st.Shards.Accepted != 0 || len(st.Results.Rejections) != 1 || st.Results.Rejections[0].Reason != v1alpha1.RejectionStaleIdentity {
				t.Fatalf("accepted %d, results %+v; want the old result rejected as %s", st.Shards.Accepted, st.Results, v1alpha1.RejectionStaleIdentity)
			}
			if tc.children[0].GetUID() == old.UID {
				return
			}
			cur := child(1).Obj()
			pod := wrappers.MakeIndexPod(cur, "ts-workers-0-0-new", 0).Succeeded(testNow, reportOf(t, "s0")).Obj()
			if err := f.c.Create(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			// The Job controller counts the success: a result stands once its index did.
			cur.Status.CompletedIndexes, cur.Status.Succeeded = "0", 1
			if err := f.c.Status().Update(context.Background(), cur); err != nil {
				t.Fatal(err)
			}
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			if st := f.account(t, "acct").Status; st.Shards.Accepted != 1 {
				t.Errorf("accepted %d after the successor's pod reported; results %+v", st.Shards.Accepted, st.Results)
			}
		})
	}
}

// TestPublishAppliesWorkloadsSideBySide: an account of several Jobs publishes its verdict
// on their Workloads side by side, not one after another: the apply hook holds each apply
// until all of them are in flight, which one-at-a-time publishing never reaches. A
// failed apply fails the reconcile, after the others were sent.
func TestPublishAppliesWorkloadsSideBySide(t *testing.T) {
	names := []string{"j", "k", "l"}
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C").
		AssignJob("j", "0", "A").AssignJob("k", "0", "B").AssignJob("l", "0", "C").Obj()
	objs := []client.Object{acct}
	for _, n := range names {
		j := wrappers.MakeJob(n, "ns").Indexed(1).UID(n+"-uid").ResourceVersion("1").
			PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
		objs = append(objs, j, wrappers.MakeWorkload("job-"+n, "ns").UID("wl-"+n).ForJob(j).Admitted("gpu", testNow.Add(-time.Hour)).Obj())
	}
	for _, tc := range []struct {
		name    string
		fail    string // the Workload whose apply fails, if any
		wantErr bool
	}{
		{name: "every apply succeeds"},
		{name: "one apply fails", fail: "job-k", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inFlight sync.WaitGroup
			inFlight.Add(len(names))
			all := make(chan struct{})
			go func() { inFlight.Wait(); close(all) }()
			f := newFixture(t, hooks{apply: func(ac *kueueac.WorkloadApplyConfiguration, _ client.Client) error {
				inFlight.Done()
				select {
				case <-all:
				case <-time.After(10 * time.Second):
					return fmt.Errorf("apply of %s waited alone: the applies were not in flight together", *ac.GetName())
				}
				if *ac.GetName() == tc.fail {
					return apierrors.NewInternalError(fmt.Errorf("injected"))
				}
				return nil
			}}, objs...)
			_, err := f.reconcile("acct")
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error = %v, want error %v", err, tc.wantErr)
			}
			got := f.writesOf("status-apply")
			slices.Sort(got)
			if want := []string{"Workload/job-j", "Workload/job-k", "Workload/job-l"}; !slices.Equal(got, want) {
				t.Errorf("applied %v, want %v", got, want)
			}
		})
	}
}
