package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func TestWorkloadChanged(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := func() *kueue.Workload {
		return wrappers.MakeWorkload("job-j", "").Generation(1).
			Condition(metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: metav1.NewTime(at)}).
			Condition(metav1.Condition{Type: v1alpha1.WorkloadConditionShardsCovered, Status: metav1.ConditionFalse, Reason: "ShardsMissing", Message: "1/4", LastTransitionTime: metav1.NewTime(at)}).
			Obj()
	}
	beingDeleted := func(w *kueue.Workload) { w.DeletionTimestamp = &metav1.Time{Time: at} }
	cases := map[string]struct {
		old    func(*kueue.Workload) // how the old copy differs from the base, if it does
		change func(*kueue.Workload)
		want   bool
	}{
		"nothing":                   {change: func(*kueue.Workload) {}, want: false},
		"only our coverage message": {change: func(w *kueue.Workload) { w.Status.Conditions[1].Message = "2/4" }, want: false},
		"our Accepted condition added": {change: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkloadConditionAccepted})
		}, want: false},
		"our aggregated message, several accounts": {change: func(w *kueue.Workload) {
			w.Status.Conditions[1].Message = "2 accounts; BatchAccount a: 2/4; BatchAccount b: 1/4"
		}, want: true},
		// One account's publish replaced the verdict of several with its own (it read the
		// others from a cache that did not hold them yet): the others must look again.
		"several accounts' message narrowed to one account's": {
			old: func(w *kueue.Workload) {
				w.Status.Conditions[1].Message = "2 accounts; BatchAccount a: 2/4; BatchAccount b: 1/4"
			},
			change: func(w *kueue.Workload) { w.Status.Conditions[1].Message = "4/4" }, want: true},
		"Kueue admits": {change: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue})
		}, want: true},
		"quota reservation flips alone (not read)": {change: func(w *kueue.Workload) { w.Status.Conditions[0].Status = metav1.ConditionFalse }, want: false},
		"Kueue evicts": {change: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"})
		}, want: true},
		"requeue state (not read)": {change: func(w *kueue.Workload) { w.Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](1)} }, want: false},
		"dispatched to a worker":   {change: func(w *kueue.Workload) { w.Status.ClusterName = ptr.To("worker-1") }, want: true},
		"admission recorded":       {change: func(w *kueue.Workload) { w.Status.Admission = &kueue.Admission{ClusterQueue: "gpu"} }, want: true},
		"spec changed":             {change: func(w *kueue.Workload) { w.Generation = 2 }, want: true},
		"deleted":                  {change: func(w *kueue.Workload) { now := metav1.Now(); w.DeletionTimestamp = &now }, want: true},
		// Both copies carry the same deletion time in distinct pointers, as two decoded
		// watch events do: an unrelated update of a Workload being deleted is no change.
		"another update while being deleted": {old: beingDeleted, change: func(w *kueue.Workload) {
			beingDeleted(w)
			w.Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](1)}
		}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, updated := base(), base()
			if tc.old != nil {
				tc.old(old)
			}
			tc.change(updated)
			if got := workloadChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("workloadChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSucceededPodArrived: the cache of succeeded coverage pods (metadata only) wakes
// accounts when an index pod enters it (it succeeded) or leaves it (deleted), never for
// its later updates, and never for a pod without a completion index.
func TestSucceededPodArrived(t *testing.T) {
	pod := func(index bool) *metav1.PartialObjectMetadata {
		m := relations.PodMetadata()
		m.Name, m.Namespace = "j-0", "ns"
		if index {
			m.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}
		}
		return m
	}
	cases := []struct {
		name string
		pass func(p *metav1.PartialObjectMetadata) bool
		want [2]bool // an index pod, a pod without an index
	}{
		{"create (it succeeded)", func(p *metav1.PartialObjectMetadata) bool {
			return succeededPodArrived.Create(event.CreateEvent{Object: p})
		}, [2]bool{true, false}},
		{"update (a finalizer removed)", func(p *metav1.PartialObjectMetadata) bool {
			q := p.DeepCopy()
			q.Finalizers = nil
			return succeededPodArrived.Update(event.UpdateEvent{ObjectOld: p, ObjectNew: q})
		}, [2]bool{false, false}},
		{"delete", func(p *metav1.PartialObjectMetadata) bool {
			return succeededPodArrived.Delete(event.DeleteEvent{Object: p})
		}, [2]bool{true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := [2]bool{tc.pass(pod(true)), tc.pass(pod(false))}; got != tc.want {
				t.Errorf("passes (index pod, pod without index) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJobChanged: the Job predicate passes what an account reads of a Job and drops the
// Job controller's writes of pod counts and the metadata nobody reads.
func TestJobChanged(t *testing.T) {
	cases := map[string]struct {
		old    func(*batchv1.Job) // how the old copy differs from the base, if it does
		change func(*batchv1.Job)
		want   bool
	}{
		"nothing":              {change: func(*batchv1.Job) {}, want: false},
		"resourceVersion only": {change: func(j *batchv1.Job) { j.ResourceVersion = "2" }, want: false},
		"active pods":          {change: func(j *batchv1.Job) { j.Status.Active = 2 }, want: false},
		"ready pods":           {change: func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](2) }, want: false},
		"terminating pods":     {change: func(j *batchv1.Job) { j.Status.Terminating = ptr.To[int32](1) }, want: false},
		"failed pod count":     {change: func(j *batchv1.Job) { j.Status.Failed = 1 }, want: false},
		"a finalizer":          {change: func(j *batchv1.Job) { j.Finalizers = append(j.Finalizers, v1alpha1.RecordFinalizer) }, want: false},
		"managedFields":        {change: func(j *batchv1.Job) { j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}} }, want: false},
		"a condition that is not True": {change: func(j *batchv1.Job) {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse})
		}, want: false},
		"completed index": {change: func(j *batchv1.Job) { j.Status.CompletedIndexes, j.Status.Succeeded = "0-1", 2 }, want: true},
		"succeeded count": {change: func(j *batchv1.Job) { j.Status.Succeeded = 2 }, want: true},
		"failed index":    {change: func(j *batchv1.Job) { j.Status.FailedIndexes = ptr.To("1") }, want: true},
		"success yet to be counted": {change: func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod-1"}}
		}, want: true},
		"Complete": {change: func(j *batchv1.Job) {
			j.Status.Conditions = wrappers.MakeJob("x", "ns").Complete(testNow).Obj().Status.Conditions
		}, want: true},
		"start time gone":   {change: func(j *batchv1.Job) { j.Status.StartTime = nil }, want: true},
		"label":             {change: func(j *batchv1.Job) { j.Labels = map[string]string{"a": "b"} }, want: true},
		"spec (generation)": {change: func(j *batchv1.Job) { j.Generation = 2 }, want: true},
		"deletion":          {change: func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: testNow} }, want: true},
		"active pods while being deleted": {
			old:    func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: testNow} },
			change: func(j *batchv1.Job) { j.Status.Active = 0 }, want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := jobJ(v1alpha1.ScopeCoverage).StartTime(testNow.Add(-time.Minute)).Completed("0", 1).Obj()
			old.Status.Active = 1
			if tc.old != nil {
				tc.old(old)
			}
			updated := old.DeepCopy()
			tc.change(updated)
			if got := jobChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("jobChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDroppedChangesLeaveTheAccountAsIs: nothing a predicate drops holds anything the
// account needs. For each Job and Workload status change, an account settled on the
// objects before it is reconciled again after it: where the predicate drops the change,
// that reconcile must write nothing (no account status, no Workload condition); the
// changes it passes show the check can fail.
func TestDroppedChangesLeaveTheAccountAsIs(t *testing.T) {
	job := func() *batchv1.Job {
		return jobJ(v1alpha1.ScopeCoverage).StartTime(testNow.Add(-time.Hour)).Completed("0", 1).Obj()
	}
	workload := func() *kueue.Workload { return workloadOfJ(job()).Obj() }
	at := metav1.NewTime(testNow.Add(-time.Minute))
	cases := []struct {
		name        string
		job         func(*batchv1.Job)
		workload    func(*kueue.Workload)
		wantPass    bool
		wantWritten bool // a change that passes and must be written
	}{
		{name: "Job: active, ready and terminating pods", job: func(j *batchv1.Job) {
			j.Status.Active, j.Status.Ready, j.Status.Terminating = 1, ptr.To[int32](1), ptr.To[int32](1)
		}},
		{name: "Job: failed pod count", job: func(j *batchv1.Job) { j.Status.Failed = 3 }},
		{name: "Job: completion time", job: func(j *batchv1.Job) { j.Status.CompletionTime = &at }},
		{name: "Job: index completed", job: func(j *batchv1.Job) { j.Status.CompletedIndexes, j.Status.Succeeded = "0-1", 2 },
			wantPass: true, wantWritten: true},
		{name: "Workload: requeue state", workload: func(w *kueue.Workload) {
			w.Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](1)}
		}},
		{name: "Workload: PodsReady", workload: func(w *kueue.Workload) {
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadPodsReady, Status: metav1.ConditionTrue, Reason: "PodsReady", LastTransitionTime: at})
		}},
		{name: "Workload: quota reservation's transition time", workload: func(w *kueue.Workload) {
			apimeta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadQuotaReserved).LastTransitionTime = at
		}},
		{name: "Workload: resource requests", workload: func(w *kueue.Workload) {
			w.Status.ResourceRequests = []kueue.PodSetRequest{{Name: "main"}}
		}},
		{name: "Workload: finished", workload: func(w *kueue.Workload) {
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: at})
		}, wantPass: true, wantWritten: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j, wl := job(), workload()
			f := newFixture(t, hooks{}, accountOfJ().Obj(), j, wl)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			if len(f.writesOf("status-update")) == 0 {
				t.Fatal("the account was never settled")
			}
			// The objects as the settling reconcile left them (it labels the Job and
			// publishes its conditions on the Workload), then changed.
			var pass bool
			if tc.job != nil {
				cur := &batchv1.Job{}
				if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(j), cur); err != nil {
					t.Fatal(err)
				}
				next := cur.DeepCopy()
				tc.job(next)
				pass = jobChanged.Update(event.UpdateEvent{ObjectOld: cur, ObjectNew: next})
				writeStatus(t, f.c, next)
			} else {
				cur := &kueue.Workload{}
				if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), cur); err != nil {
					t.Fatal(err)
				}
				next := cur.DeepCopy()
				tc.workload(next)
				pass = workloadChanged.Update(event.UpdateEvent{ObjectOld: cur, ObjectNew: next})
				writeStatus(t, f.c, next)
			}
			if pass != tc.wantPass {
				t.Fatalf("the predicate passes = %v, want %v", pass, tc.wantPass)
			}
			f.reset()
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			if written := len(f.writes) > 0; written != tc.wantWritten {
				t.Errorf("after the change the reconcile wrote %v, want writes: %v", f.writes, tc.wantWritten)
			}
		})
	}
}

// TestUpdateDelays: a Job or Workload update that only leads up to what an account
// writes waits LeadUpPeriod; one that may change what it writes, BatchPeriod.
func TestUpdateDelays(t *testing.T) {
	at := metav1.NewTime(testNow)
	jobs := map[string]struct {
		change func(*batchv1.Job)
		want   time.Duration
	}{
		"a success yet to be counted": {change: func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod-1"}}
		}, want: LeadUpPeriod},
		"started":             {change: func(j *batchv1.Job) { j.Status.StartTime = &at }, want: LeadUpPeriod},
		"the success counted": {change: func(j *batchv1.Job) { j.Status.CompletedIndexes, j.Status.Succeeded = "0-1", 2 }, want: BatchPeriod},
		"a failed index":      {change: func(j *batchv1.Job) { j.Status.FailedIndexes = ptr.To("1") }, want: BatchPeriod},
		"Complete": {change: func(j *batchv1.Job) {
			j.Status.Conditions = wrappers.MakeJob("x", "ns").Complete(testNow).Obj().Status.Conditions
		}, want: BatchPeriod},
		"unsuspended (spec)": {change: func(j *batchv1.Job) { j.Generation = 2; j.Spec.Suspend = ptr.To(false) }, want: LeadUpPeriod},
		"Suspended no longer True": {change: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse}}
		}, want: LeadUpPeriod},
		"success criteria met": {change: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
		}, want: BatchPeriod},
		"completions (spec)": {change: func(j *batchv1.Job) { j.Generation = 2; j.Spec.Completions = ptr.To[int32](3) }, want: BatchPeriod},
		"label":              {change: func(j *batchv1.Job) { j.Labels = map[string]string{"a": "b"} }, want: BatchPeriod},
		"deletion":           {change: func(j *batchv1.Job) { j.DeletionTimestamp = &at }, want: BatchPeriod},
	}
	for name, tc := range jobs {
		t.Run("Job "+name, func(t *testing.T) {
			old := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).
				Condition(batchv1.JobSuspended, "JobSuspended", testNow.Add(-time.Minute)).Obj()
			next := old.DeepCopy()
			next.ResourceVersion = "2"
			tc.change(next)
			if got := jobUpdateDelay(event.UpdateEvent{ObjectOld: old, ObjectNew: next}); got != tc.want {
				t.Errorf("jobUpdateDelay = %v, want %v", got, tc.want)
			}
		})
	}
	workloads := map[string]struct {
		change func(*kueue.Workload)
		want   time.Duration
	}{
		"admitted": {change: func(w *kueue.Workload) {
			w.Status.Admission = &kueue.Admission{ClusterQueue: "gpu"}
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"})
		}, want: LeadUpPeriod},
		"finished": {change: func(w *kueue.Workload) {
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded"})
		}, want: BatchPeriod},
		"evicted": {change: func(w *kueue.Workload) {
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"})
		}, want: BatchPeriod},
		"dispatched to a worker": {change: func(w *kueue.Workload) { w.Status.ClusterName = ptr.To("worker-1") }, want: BatchPeriod},
		"our shared conditions": {change: func(w *kueue.Workload) {
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkloadConditionShardsCovered, Status: metav1.ConditionFalse, Reason: "ShardsMissing", Message: "2 accounts; a: 1/2; b: 0/2"})
		}, want: BatchPeriod},
		"spec": {change: func(w *kueue.Workload) { w.Generation = 2 }, want: BatchPeriod},
	}
	for name, tc := range workloads {
		t.Run("Workload "+name, func(t *testing.T) {
			old := wrappers.MakeWorkload("job-j", "ns").Generation(1).Obj()
			next := old.DeepCopy()
			next.ResourceVersion = "2"
			tc.change(next)
			if got := workloadUpdateDelay(event.UpdateEvent{ObjectOld: old, ObjectNew: next}); got != tc.want {
				t.Errorf("workloadUpdateDelay = %v, want %v", got, tc.want)
			}
		})
	}
}
