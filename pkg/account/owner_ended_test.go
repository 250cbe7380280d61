package account

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestChildDeletedWhenItsOwnerEnded: a child target given as a Job deleted
// (Observation.DeletedJob) when its owner ended (a JobSet MultiKueue dispatched ended on
// the worker while the child ran there) stands for that Job's record, whether or not
// the account observed that identity before: it ran and can no longer complete, it was
// not "never created". An identity observed before under another UID is history. Its
// completed indexes' results stay pending while the worker's records are read, and are
// missing once they cannot be (no kubeconfig for the worker: PodsListed).
func TestChildDeletedWhenItsOwnerEnded(t *testing.T) {
	const key = "jobset/js/workers/0"
	cut := makeJob("js-workers-0", "uid-b", 2).Completed("0", 1)
	earlier := makeJob("js-workers-0", "uid-a", 2).Completed("0-1", 2)
	worker := &v1alpha1.WorkloadObservation{Name: "jobset-js", Admitted: true, Finished: true, Cluster: "worker-b"}
	cases := []struct {
		name        string
		results     bool
		before      *Observation // observed first, when set
		podsListed  bool
		wantHistory []types.UID
		wantMissing int32 // results missing
	}{
		{name: "never observed before"},
		{name: "observed under another identity before", before: &Observation{Job: earlier.Facts(), ChildOwner: OwnerRunning},
			wantHistory: []types.UID{"uid-a"}},
		{name: "results still read from the worker: pending", results: true},
		{name: "results cannot be read from the worker: missing", results: true, podsListed: true, wantMissing: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := makeCompactSpec("s", 2).AssignJobSet("js", "workers", 0, "0-1", "0-1")
			if tc.results {
				w = w.RequireResults("")
			}
			spec := w.SpecObj()
			var prev *v1alpha1.BatchAccountStatus
			if tc.before != nil {
				st := step(t, spec, nil, map[string]Observation{key: *tc.before}).Status
				prev = &st
			}
			obs := Observation{DeletedJob: cut.Facts(), OwnerEnded: "Completed", ChildOwner: "Completed",
				Workload: worker, ResultsOnWorker: true, PodsListed: tc.podsListed}
			st := step(t, spec, prev, map[string]Observation{key: obs}).Status
			again := step(t, spec, st.DeepCopy(), map[string]Observation{key: obs}).Status
			if got := again.Targets[0]; got.UID != "uid-b" || !got.Deleted || got.CompletedIndexes != "0" || got.DeletedAt == nil {
				t.Errorf("target = uid %s deleted %v completed %q deletedAt %v; want uid-b's record, deleted, completed 0",
					got.UID, got.Deleted, got.CompletedIndexes, got.DeletedAt)
			}
			var history []types.UID
			for _, h := range again.History {
				history = append(history, h.UID)
			}
			if len(history) != len(tc.wantHistory) || len(history) > 0 && history[0] != tc.wantHistory[0] {
				t.Errorf("history %v, want %v", history, tc.wantHistory)
			}
			wantCond(t, again, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted,
				"jobset js workers[0] deleted before it terminated: can no longer complete; repair its missing shards")
			if c := again.Conditions; strings.Contains(c[len(c)-1].Message, "never created") {
				t.Errorf("Accepted says %q", c[len(c)-1].Message)
			}
			if again.Results.Missing != tc.wantMissing {
				t.Errorf("results missing %d, want %d", again.Results.Missing, tc.wantMissing)
			}
		})
	}
}

// TestRecordStandsAgainstAChildGivenDeleted: once no owner can create a next identity of
// a child target (the batch is Accepted, or its owner seen before is gone), a child of
// another identity given as deleted (a MultiKueue worker's record of a JobSet applied
// again under the name, cut short by its end) is another's, as one found would be: the
// identity on record stays the target's, and nothing goes to history.
func TestRecordStandsAgainstAChildGivenDeleted(t *testing.T) {
	const key = "jobset/js/workers/0"
	spec := makeCompactSpec("s", 2).AssignJobSet("js", "workers", 0, "0-1", "0-1").SpecObj()
	worker := &v1alpha1.WorkloadObservation{Name: "jobset-js", Admitted: true, Finished: true, Cluster: "worker-a"}
	done := makeJob("js-workers-0", "uid-a", 2).Completed("0-1", 2).Complete(jobCondAt)
	running := makeJob("js-workers-0", "uid-a", 2).Completed("0", 1)
	other := makeJob("js-workers-0", "uid-x", 2).Completed("0", 1)
	cases := []struct {
		name   string
		before Observation
		then   Observation
	}{
		{name: "Accepted batch, another JobSet of the name ended",
			before: Observation{Job: done.Facts(), ChildOwner: "Completed", Workload: worker},
			then:   Observation{DeletedJob: other.Facts(), OwnerEnded: "Failed", ChildOwner: "Failed", Workload: worker, ResultsOnWorker: true}},
		{name: "owner seen before is gone",
			before: Observation{Job: running.Facts(), ChildOwner: OwnerRunning, Workload: worker},
			then:   Observation{DeletedJob: other.Facts(), OwnerEnded: OwnerDeleted, ChildOwner: OwnerDeleted, Workload: worker, ResultsOnWorker: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first := step(t, spec, nil, map[string]Observation{key: tc.before}).Status
			st := step(t, spec, first.DeepCopy(), map[string]Observation{key: tc.then}).Status
			if got := st.Targets[0]; got.UID != "uid-a" {
				t.Errorf("target follows %s, want the identity on record uid-a", got.UID)
			}
			if len(st.History) != 0 {
				t.Errorf("history %+v, want none", st.History)
			}
			if Final(&first, nil, 1) && !Final(&st, nil, 1) {
				t.Errorf("the Accepted verdict was taken back: %+v", st.Conditions)
			}
		})
	}
}

// TestEndedRecordKeepsItsShape: a JobSet child deleted while its JobSet runs is taken for
// a restart in progress and superseded into history; if the JobSet then ends instead of
// recreating it (a failure past its restarts, seen after the child's deletion), that
// identity is the target's record again. The mapping onto it is judged as it was on the
// Job, whichever the account saw first: a required index it leaves unassigned, or a Job
// that is not Indexed, keeps it invalid, and the record's coverage does not make it
// Accepted.
func TestEndedRecordKeepsItsShape(t *testing.T) {
	key := "jobset/ts/w/0"
	spec := func(indexes string) *v1alpha1.BatchAccountSpec {
		return makeCompactSpec("s", 4).AssignJobSet("ts", "w", 0, indexes, "0-3").SpecObj()
	}
	cases := []struct {
		name  string
		spec  *v1alpha1.BatchAccountSpec
		child *wrappers.JobWrapper
		// indexLists, when set, is the index list budget while the child runs: its lists
		// left out for size before it is superseded.
		indexLists int
		valid      metav1.ConditionStatus
		validWhy   string
		accepted   metav1.ConditionStatus
		acceptWhy  string
	}{
		{"a required index unassigned", spec("0-3"), makeJob("ts-w-0", "uid-x", 8).Completed("0-3", 4), 0,
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"a required index unassigned, its lists left out", spec("0-3"), makeJob("ts-w-0", "uid-x", 8).Completed("0-3", 4), 2,
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"a child that is not Indexed", spec("0-3"), makeJob("ts-w-0", "uid-x", 4).CompletionMode(batchv1.NonIndexedCompletion), 0,
			metav1.ConditionFalse, v1alpha1.ReasonNotIndexed, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"its successPolicy's indexes assigned", spec("0-3"),
			makeJob("ts-w-0", "uid-x", 8).SuccessPolicy(wrappers.SucceededIndexes("0-3")).Completed("0-3", 4), 0,
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
		{"every required index assigned, half covered", makeCompactSpec("s", 8).AssignJobSet("ts", "w", 0, "0-7", "0-7").SpecObj(),
			makeJob("ts-w-0", "uid-x", 8).Completed("0-3", 4), 0,
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			running := map[string]Observation{key: {Job: tc.child.Facts(), ChildOwner: OwnerRunning}}
			saved := statusLimits
			if tc.indexLists > 0 {
				statusLimits = func(n int) limits { l := limitsFor(n); l.indexLists = tc.indexLists; return l }
			}
			st := at(tc.spec, nil, 0, running).Status
			statusLimits = saved
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, tc.valid, tc.validWhy, "")
			if tc.indexLists > 0 && !slices.Contains(st.Targets[0].IndexesOmitted, "required") {
				t.Fatalf("required indexes kept (%q): the case needs them left out", st.Targets[0].Required)
			}
			// The child is gone, its JobSet not ended yet: a restart in progress.
			st = at(tc.spec, &st, time.Minute, map[string]Observation{key: {ChildOwner: OwnerRunning}}).Status
			if len(st.History) != 1 {
				t.Fatalf("history = %+v; want the child superseded", st.History)
			}
			ended := map[string]Observation{key: {OwnerEnded: "Failed", ChildOwner: "Failed"}}
			st = at(tc.spec, &st, 2*time.Minute, ended).Status
			if len(st.History) != 0 || st.Targets[0].UID != "uid-x" {
				t.Fatalf("target = %+v, history = %+v; want the child's record back", st.Targets[0], st.History)
			}
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, tc.valid, tc.validWhy, "")
			wantCond(t, st, v1alpha1.ConditionAccepted, tc.accepted, tc.acceptWhy, "")
			wantFixedPoint(t, tc.spec, st, 3*time.Minute, ended)
		})
	}
}
