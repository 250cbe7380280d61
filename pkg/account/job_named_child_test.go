package account

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestJobNamedChildDeletedWhileItsOwnerRuns: a Job target may name a JobSet's child by
// its Job name. A restart of the JobSet (or anyone deleting the child while the JobSet
// runs) deletes the child before it terminated, and the JobSet creates it again under
// the same name: as for the child named as a JobSet target, that is a restart in
// progress, not a Job that "can no longer complete". Until the next identity comes the
// batch awaits it (so retention does not take the account, the Workload is not told the
// batch is blocked, and nobody is told to repair shards the JobSet runs again), and the
// next identity then stands for the target. Once the owner ended without creating it, or
// the Job is no child (or no longer known to be one), its deletion is final as before.
func TestJobNamedChildDeletedWhileItsOwnerRuns(t *testing.T) {
	const key = "job/train-workers-0"
	running := makeJob("train-workers-0", "uid-w0", 4).Completed("0-1", 2)
	next := makeJob("train-workers-0", "uid-w0-next", 4).Completed("0-3", 4).Complete(jobCondAt)
	first := Observation{Job: running.Facts(), ChildOwner: OwnerRunning, PodsListed: true}
	// The child and its pods are gone; the manager remembers the Job's last state, and
	// through it its owner.
	gone := func(owner string) Observation { return Observation{DeletedJob: running.Facts(), ChildOwner: owner} }
	recreated := Observation{Job: next.Facts(), ChildOwner: "Completed", PodsListed: true}

	// A target's expected state after the last step: its identity and whether it is a
	// deleted record, the superseded identities, and the verdict.
	type want struct {
		uid                types.UID
		deleted            bool
		history            int
		terminated         string
		admitted           string
		admittedStatus     metav1.ConditionStatus
		accepted           metav1.ConditionStatus
		blocked            bool
		resultsAcceptedWhy string
	}
	waiting := want{history: 1, terminated: v1alpha1.ReasonAwaitingTermination,
		admitted: v1alpha1.ReasonTargetsNotFound, admittedStatus: metav1.ConditionFalse, accepted: metav1.ConditionFalse}
	lost := want{uid: "uid-w0", deleted: true, terminated: v1alpha1.ReasonTargetDeleted,
		admitted: v1alpha1.ReasonTargetDeleted, admittedStatus: metav1.ConditionFalse, accepted: metav1.ConditionFalse, blocked: true}
	// No Kueue in these observations: Admitted is Unknown (NoWorkload), which no verdict waits for.
	accepted := want{uid: "uid-w0-next", history: 1, terminated: v1alpha1.ReasonComplete,
		admitted: v1alpha1.ReasonNoWorkload, admittedStatus: metav1.ConditionUnknown, accepted: metav1.ConditionTrue}
	withResults := func(w want, why string) want { w.resultsAcceptedWhy = why; return w }

	for _, tc := range []struct {
		name    string
		results bool
		steps   []Observation
		want    want
	}{
		{"its JobSet runs: a restart in progress", false, []Observation{first, gone(OwnerRunning)}, waiting},
		{"its JobSet runs, results required: the next identity reports them", true, []Observation{first, gone(OwnerRunning)},
			withResults(waiting, v1alpha1.ReasonResultsPending)},
		{"its JobSet created the child again", false, []Observation{first, gone(OwnerRunning), recreated}, accepted},
		{"its JobSet created the child again, results required", true, []Observation{first, gone(OwnerRunning), recreated},
			withResults(accepted, v1alpha1.ReasonAllResultsAccepted)},
		{"its JobSet Failed before it deleted the child", false, []Observation{first, gone("Failed")}, lost},
		{"its JobSet Failed without creating the child again", false, []Observation{first, gone(OwnerRunning), gone("Failed")}, lost},
		{"the deleted Job is forgotten before the child came again", false, []Observation{first, gone(OwnerRunning), {}}, lost},
		{"a Job of no JobSet", false, []Observation{{Job: running.Facts(), PodsListed: true}, gone("")}, lost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := makeCompactSpec("s", 4).AssignJobOrdinals("train-workers-0", "0-3", "0-3")
			if tc.results {
				w = w.RequireResults("")
			}
			spec := w.SpecObj()
			var st *v1alpha1.BatchAccountStatus
			for i, obs := range tc.steps {
				var rs []Result
				if tc.results {
					// What the identities' pods reported so far: the first two shards of the
					// first, all four of the next.
					rs = []Result{result(key, "uid-w0", 0, "s0"), result(key, "uid-w0", 1, "s1")}
					if obs.Job != nil && obs.Job.UID == "uid-w0-next" {
						for o, shard := range []string{"s0", "s1", "s2", "s3"} {
							rs = append(rs, result(key, "uid-w0-next", o, shard))
						}
					}
				}
				out := at(spec, st, time.Duration(i)*time.Minute, map[string]Observation{key: obs}, rs...)
				st = &out.Status
			}
			got := st.Targets[0]
			if got.UID != tc.want.uid || got.Deleted != tc.want.deleted || len(st.History) != tc.want.history {
				t.Errorf("target follows %q (deleted %v), history %+v; want %q (deleted %v), %d superseded",
					got.UID, got.Deleted, st.History, tc.want.uid, tc.want.deleted, tc.want.history)
			}
			wantCond(t, *st, v1alpha1.ConditionTerminated, condStatus(tc.want.terminated == v1alpha1.ReasonComplete), tc.want.terminated, "")
			wantCond(t, *st, v1alpha1.ConditionAdmitted, tc.want.admittedStatus, tc.want.admitted, "")
			if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted); c.Status != tc.want.accepted {
				t.Errorf("Accepted %s/%s (%q), want %s", c.Status, c.Reason, c.Message, tc.want.accepted)
			}
			if b := Blocker(st); (b != nil) != tc.want.blocked {
				t.Errorf("blocker %+v, want blocked %v", b, tc.want.blocked)
			}
			if why := tc.want.resultsAcceptedWhy; why != "" {
				if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); c.Reason != why {
					t.Errorf("ResultsAccepted %s/%s (%q), want reason %s", c.Status, c.Reason, c.Message, why)
				}
			}
		})
	}
}
