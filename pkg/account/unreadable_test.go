package account

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestUnreadableResultsStandOnlyForTheirIdentities: while the recorded results cannot be
// read (the signing key does not load), the verdict the previous results reached
// stands, since nothing new can be judged. Results are a completion identity's: a
// verdict judged on one identity says nothing of the next (a JobSet restart, a Job
// created again under its name), whose results nobody has judged. So a previous
// ResultsAccepted stands only while every target still has the identity it was judged
// on; otherwise results wait, and the batch is not Accepted on another identity's
// results.
func TestUnreadableResultsStandOnlyForTheirIdentities(t *testing.T) {
	const key = "jobset/train/workers/0"
	spec := makeCompactSpec("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").RequireResults("").SpecObj()
	first := completeJob("train-workers-0", "uid-a", 2)
	next := completeJob("train-workers-0", "uid-b", 2)
	resultsOf := func(uid string) []Result { return []Result{result(key, uid, 0, "s0"), result(key, uid, 1, "s1")} }
	const unreadable = "loading the result signing key: secrets is forbidden"
	for _, tc := range []struct {
		name string
		// later is observed after the first identity's results were all accepted while
		// its JobSet still ran, with the results unreadable.
		later        Observation
		wantResults  metav1.ConditionStatus
		wantAccepted metav1.ConditionStatus
		// wantShards is status.shards.accepted: the shards the standing verdict accepted.
		wantShards int32
	}{
		{"the same identity, its JobSet Completed: its results stand", Observation{Job: first.Facts(), ChildOwner: "Completed", PodsListed: true},
			metav1.ConditionTrue, metav1.ConditionTrue, 2},
		{"a restart's next identity, its JobSet Completed: nothing of it was judged", Observation{Job: next.Facts(), ChildOwner: "Completed", PodsListed: true},
			metav1.ConditionFalse, metav1.ConditionFalse, 0},
		{"a restart deleted the Complete child: its record is the same identity", Observation{ChildOwner: OwnerRunning},
			metav1.ConditionTrue, metav1.ConditionFalse, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := at(spec, nil, 0, map[string]Observation{key: {Job: first.Facts(), ChildOwner: OwnerRunning, PodsListed: true}}, resultsOf("uid-a")...).Status
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, "")
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")
			out := Compute(Input{Namespace: "ml-team", Generation: 1, Spec: spec, Previous: &st,
				Observations: map[string]Observation{key: tc.later}, Now: metav1.NewTime(time0.Add(time.Minute)),
				ResultsUnreadable: unreadable})
			for typ, want := range map[string]metav1.ConditionStatus{
				v1alpha1.ConditionResultsAccepted: tc.wantResults, v1alpha1.ConditionAccepted: tc.wantAccepted,
			} {
				if c := apimeta.FindStatusCondition(out.Status.Conditions, typ); c.Status != want {
					t.Errorf("%s = %s/%s (%q), want %s", typ, c.Status, c.Reason, c.Message, want)
				}
			}
			if got := out.Status.Shards.Accepted; got != tc.wantShards {
				t.Errorf("shards accepted %d, want %d", got, tc.wantShards)
			}
		})
	}
}

// TestUnreadableResultsStandThroughATTLChange: an Accepted batch whose results cannot be
// read now (the signing key does not load) keeps its verdict through a change of
// ttlSecondsAfterFinished alone, a spec that judges as the one its results were judged
// under (status.judgedSpec); a change that judges (a repair appended) leaves its results
// to be judged again, once they can be read.
func TestUnreadableResultsStandThroughATTLChange(t *testing.T) {
	base := func() *v1alpha1.BatchAccountSpec {
		return makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	}
	obs := map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts(), PodsListed: true}}
	results := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B")}
	cases := []struct {
		name         string
		change       func(*v1alpha1.BatchAccountSpec)
		wantResults  string
		wantAccepted metav1.ConditionStatus
	}{
		{"ttlSecondsAfterFinished set", func(s *v1alpha1.BatchAccountSpec) { s.TTLSecondsAfterFinished = ptrTo(int32(60)) },
			v1alpha1.ReasonAllResultsAccepted, metav1.ConditionTrue},
		{"a repair appended", func(s *v1alpha1.BatchAccountSpec) {
			s.Assignments = append(s.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "r"}, Indexes: "0", Shards: []string{"B"}, Repair: true})
		}, v1alpha1.ReasonResultsPending, metav1.ConditionFalse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := base()
			st := at(spec, nil, 0, obs, results...).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			changed := base()
			tc.change(changed)
			out := Compute(Input{Namespace: "ml-team", Generation: 2, Spec: changed, Previous: &st, Observations: obs,
				Now: metav1.NewTime(time0.Add(time.Minute)), ResultsUnreadable: "loading the result signing key: secrets is forbidden"})
			if c := apimeta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionResultsAccepted); c.Reason != tc.wantResults {
				t.Errorf("ResultsAccepted %s/%s (%q), want reason %s", c.Status, c.Reason, c.Message, tc.wantResults)
			}
			if c := apimeta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionAccepted); c.Status != tc.wantAccepted {
				t.Errorf("Accepted %s/%s (%q), want %s", c.Status, c.Reason, c.Message, tc.wantAccepted)
			}
		})
	}
}
