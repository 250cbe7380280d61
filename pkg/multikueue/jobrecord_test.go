package multikueue

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestJobRecordRoundTrip: the WorkerJob of a worker's child Job says where it stands in
// its JobSet and its status; the Job the manager makes of the record has the child's
// identity, the facts an account reads of the child (completions, completion mode,
// indexes, terminal condition, scope), is dispatched by MultiKueue (no pod of it is
// looked for), and is controlled by the owner given; two records say the same only when
// no recorded field differs.
func TestJobRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	js := wrappers.MakeJobSet("js", "ns").Obj()
	js.UID = "worker-js-uid"
	base := func() *wrappers.JobWrapper {
		return wrappers.MakeJob("js-workers-1", "ns").UID("child-uid").Indexed(4).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
			JobSetChild(js, "workers", 1, 3)
	}
	for name, tc := range map[string]struct {
		job      *batchv1.Job
		terminal string
	}{
		"running":  {job: base().Completed("0,2", 2).FailedIndexes("1").Obj()},
		"complete": {job: base().Completed("0-3", 4).Complete(at).Obj(), terminal: "Complete"},
		"failed":   {job: base().Completed("0", 1).Failed("BackoffLimitExceeded", at).Obj(), terminal: "Failed"},
		// JobSet allows a template of completionMode NonIndexed.
		"NonIndexed, complete": {job: base().CompletionMode(batchv1.NonIndexedCompletion).Completed("", 4).Complete(at).Obj(), terminal: "Complete"},
	} {
		t.Run(name, func(t *testing.T) {
			d := Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}
			rec := NewJobRecord(tc.job, d)
			if rec.Name != "child-uid" || rec.Workload != d.Workload || rec.JobSet != "js" || rec.ReplicatedJob != "workers" || rec.JobIndex != 1 ||
				rec.RestartAttempt != 3 || rec.Job != tc.job.Name || rec.JobUID != "child-uid" || ptr.Deref(rec.Completions, 0) != 4 ||
				rec.CompletedIndexes != tc.job.Status.CompletedIndexes || rec.Terminal != tc.terminal || rec.Scope != v1alpha1.ScopeResults {
				t.Fatalf("record %+v", rec)
			}
			owner := metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "manager-js-uid", Controller: ptr.To(true)}
			job := RecordJob(rec, &owner)
			want, got := jobkind.Facts(tc.job), jobkind.Facts(job)
			if got.UID != want.UID || got.Name != want.Name || got.Completions != want.Completions || got.Indexed != want.Indexed ||
				got.CompletedIndexes != want.CompletedIndexes || ptr.Deref(got.FailedIndexes, "") != ptr.Deref(want.FailedIndexes, "") ||
				got.Succeeded != want.Succeeded || got.PodScope != want.PodScope || !terminalKept(got.Conditions, want.Conditions) {
				t.Errorf("facts of the recorded Job %+v, want those of the child %+v", got, want)
			}
			if !Dispatched(job) || metav1.GetControllerOf(job).UID != "manager-js-uid" {
				t.Errorf("recorded Job managedBy %v owners %v, want dispatched and controlled by the manager's JobSet", job.Spec.ManagedBy, job.OwnerReferences)
			}
			if !SameJobRecord(rec, NewJobRecord(tc.job, d)) {
				t.Errorf("a record differs from itself")
			}
			changed := tc.job.DeepCopy()
			changed.Status.CompletedIndexes += ",9"
			if SameJobRecord(rec, NewJobRecord(changed, d)) {
				t.Errorf("a record of other completed indexes says the same")
			}
		})
	}
}

// terminalKept reports whether got holds exactly the terminal condition (Complete,
// Failed) of want, if any: the record keeps no other condition.
func terminalKept(got, want []identity.Condition) bool {
	var term []identity.Condition
	for _, c := range want {
		if c.Type == string(batchv1.JobComplete) || c.Type == string(batchv1.JobFailed) {
			term = append(term, c)
		}
	}
	return slices.EqualFunc(got, term, func(a, b identity.Condition) bool {
		return a.Type == b.Type && a.Reason == b.Reason && a.LastTransitionTime.Equal(&b.LastTransitionTime)
	})
}
