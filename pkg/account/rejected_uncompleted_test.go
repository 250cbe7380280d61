package account

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestRejectedResultOfAnIndexNotCompleted: a rejected result decides its shard only once
// its identity completed the index, as an accepted one stands only then. IJ245's Job j
// completed indexes 0-2 and still runs index 3, whose pod reported a result on the wrong
// model revision before the Job controller counted the index (or was deleted while
// terminating, and the Job runs the index again). Shard D is not covered: a result may
// still come from j, and status.results.rejectedOrdinals, which lists shards whose
// identity completed, may not name it, nor may ResultsAccepted call it ResultRejected.
// Once the Job counts the index, the rejection decides D.
func TestRejectedResultOfAnIndexNotCompleted(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults("").SpecObj()
	accepted := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B"), result("job/j", "uid-j", 2, "C")}
	wrongModel := result("job/j", "uid-j", 3, "D")
	wrongModel.ModelRevision = "m-2026-10"
	withWrong := slices.Concat(accepted, []Result{wrongModel})
	rejectedMsg := `D (RevisionMismatch): shard D result of pod j-3 (job j index 3) has modelRevision "m-2026-10", the account requires "m-2026-11"`

	repaired := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Repair("j-repair-1", "0", "D").RequireResults("").SpecObj()
	repairWrong := result("job/j-repair-1", "uid-r", 0, "D")
	repairWrong.ModelRevision = "m-2026-10"
	completeJ := Observation{Job: completeJob("j", "uid-j", 4).Facts(), PodsListed: true, SuccessfulPods: pods("p", 0, 1, 2, 3)}

	cases := []struct {
		name          string
		spec          *v1alpha1.BatchAccountSpec
		repair        *Observation
		obs           Observation
		results       []Result
		wantRejected  string
		wantMissing   string
		wantCount     int32
		wantReason    string
		wantMessage   string
		wantCondition metav1.ConditionStatus
	}{
		{
			name: "index 3 succeeded, the Job controller has not counted it yet",
			obs: Observation{Job: makeJob("j", "uid-j", 4).Completed("0-2", 3).Facts(), PodsListed: true,
				SuccessfulPods: append(pods("p", 0, 1, 2), PodAttempt{UID: "p-3", Index: 3, Uncounted: true})},
			results: withWrong, wantRejected: "", wantMissing: "", wantCount: 1,
			wantReason:  v1alpha1.ReasonResultsPending,
			wantMessage: "3/4 shard results accepted; waiting for D; not counted, its identity did not complete the index: " + rejectedMsg,
		},
		{
			name: "index 3's pod was deleted while terminating, the Job runs the index again",
			obs: Observation{Job: makeJob("j", "uid-j", 4).Completed("0-2", 3).Facts(), PodsListed: true,
				SuccessfulPods: pods("p", 0, 1, 2)},
			results: withWrong, wantRejected: "", wantMissing: "", wantCount: 1,
			wantReason:  v1alpha1.ReasonResultsPending,
			wantMessage: "3/4 shard results accepted; waiting for D; not counted, its identity did not complete the index: " + rejectedMsg,
		},
		{
			name: "the Job counted index 3: the rejection decides D",
			obs: Observation{Job: completeJob("j", "uid-j", 4).Facts(), PodsListed: true,
				SuccessfulPods: pods("p", 0, 1, 2, 3)},
			results: withWrong, wantRejected: "3", wantMissing: "", wantCount: 1,
			wantReason:  v1alpha1.ReasonResultRejected,
			wantMessage: "3/4 shard results accepted; rejected: " + rejectedMsg,
		},
		{
			name: "the Job runs index 3 again and its result is accepted",
			obs: Observation{Job: completeJob("j", "uid-j", 4).Facts(), PodsListed: true,
				SuccessfulPods: pods("p", 0, 1, 2, 3)},
			results: slices.Concat(withWrong, []Result{result("job/j", "uid-j", 3, "D")}), wantRejected: "", wantMissing: "", wantCount: 1,
			wantReason: v1alpha1.ReasonAllResultsAccepted, wantMessage: "4/4 shard results accepted", wantCondition: metav1.ConditionTrue,
		},
		{
			name: "D's result was rejected, its repair's pod reported a rejected result the repair has not counted yet",
			spec: repaired, obs: completeJ,
			repair: &Observation{Job: makeJob("j-repair-1", "uid-r", 1).Facts(), PodsListed: true,
				SuccessfulPods: []PodAttempt{{UID: "r-0", Index: 0, Uncounted: true}}},
			results: slices.Concat(withWrong, []Result{repairWrong}), wantRejected: "", wantMissing: "", wantCount: 2,
			wantReason: v1alpha1.ReasonResultsPending,
			wantMessage: "3/4 shard results accepted; waiting for D; rejected, awaiting a result that may still come: " + rejectedMsg +
				`; not counted, its identity did not complete the index: D (RevisionMismatch): shard D result of pod j-repair-1-0 (job j-repair-1 index 0) has modelRevision "m-2026-10", the account requires "m-2026-11"`,
		},
		{
			name: "D's result was rejected, and so was its repair's, counted",
			spec: repaired, obs: completeJ,
			repair: &Observation{Job: completeJob("j-repair-1", "uid-r", 1).Facts(), PodsListed: true,
				SuccessfulPods: pods("r", 0)},
			results: slices.Concat(withWrong, []Result{repairWrong}), wantRejected: "3", wantMissing: "", wantCount: 2,
			wantReason: v1alpha1.ReasonResultRejected,
			wantMessage: "3/4 shard results accepted; rejected: " + rejectedMsg +
				`; D (RevisionMismatch): shard D result of pod j-repair-1-0 (job j-repair-1 index 0) has modelRevision "m-2026-10", the account requires "m-2026-11"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := spec
			if tc.spec != nil {
				spec = tc.spec
			}
			obs := map[string]Observation{"job/j": tc.obs}
			if tc.repair != nil {
				obs["job/j-repair-1"] = *tc.repair
			}
			st := at(spec, nil, 0, obs, tc.results...).Status
			if st.Results.RejectedOrdinals != tc.wantRejected || st.Results.MissingOrdinals != tc.wantMissing {
				t.Errorf("results rejectedOrdinals %q missingOrdinals %q, want %q and %q (shards missing %q)",
					st.Results.RejectedOrdinals, st.Results.MissingOrdinals, tc.wantRejected, tc.wantMissing, st.Shards.MissingOrdinals)
			}
			if st.Results.Rejected != tc.wantCount {
				t.Errorf("results rejected = %d, want %d: the result was not accepted either way", st.Results.Rejected, tc.wantCount)
			}
			want := tc.wantCondition
			if want == "" {
				want = metav1.ConditionFalse
			}
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, want, tc.wantReason, tc.wantMessage)
		})
	}
}

// TestRejectedResultOfASharedIdentity: the result of a completion identity two targets
// reach (one Job by its name and as its JobSet's child) is rejected by the mapping
// (DuplicateIndex), not for want of a completed index: the Job counted the index, the
// account only takes it for neither target. The rejection decides its shard, as before
// a rejected result of an uncounted index was made to wait: its message may not say the
// identity did not complete the index.
func TestRejectedResultOfASharedIdentity(t *testing.T) {
	child := makeJob("tw-w-0", "uid-tw-w-0", 1).Completed("0", 1).Complete(jobCondAt)
	running := makeJob("tw-w-0", "uid-tw-w-0", 1)
	spec := makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)).RequireResults("").SpecObj()
	dup := "A (DuplicateIndex): pod tw-w-0-0 (job tw-w-0 index 0): its completion identity (Job UID uid-tw-w-0, index 0) is assigned by two targets (AssignmentValid DuplicateIndex): it stands for no shard"
	cases := []struct {
		name         string
		job          *Observation
		wantRejected string
		wantMessage  string
	}{
		{
			name:         "the Job completed the shared index",
			job:          &Observation{Job: child.Facts(), PodsListed: true},
			wantRejected: "0", wantMessage: "0/2 shard results accepted; rejected: " + dup,
		},
		{
			name:         "the Job still runs the shared index",
			job:          &Observation{Job: running.Facts(), PodsListed: true},
			wantRejected: "0", wantMessage: "0/2 shard results accepted; rejected: " + dup,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(spec, nil, 0, map[string]Observation{byName: *tc.job, asChild: *tc.job}, result(byName, "uid-tw-w-0", 0, "A")).Status
			if st.Results.RejectedOrdinals != tc.wantRejected {
				t.Errorf("results rejectedOrdinals %q, want %q", st.Results.RejectedOrdinals, tc.wantRejected)
			}
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, tc.wantMessage)
		})
	}
}
