package account

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// at computes the account at time0+d, on top of prev.
func at(spec *v1alpha1.BatchAccountSpec, prev *v1alpha1.BatchAccountStatus, d time.Duration, obs map[string]Observation, results ...Result) Output {
	return Compute(Input{
		Namespace: "ml-team", Generation: 1, Spec: spec, Previous: prev,
		Observations: obs, Results: results, Now: metav1.NewTime(time0.Add(d)),
	})
}

// wantFixedPoint: computing again from the written status, with the same observations,
// changes nothing (no write loop).
func wantFixedPoint(t *testing.T, spec *v1alpha1.BatchAccountSpec, st v1alpha1.BatchAccountStatus, d time.Duration, obs map[string]Observation, results ...Result) {
	t.Helper()
	again := at(spec, &st, d, obs, results...)
	if !equality.Semantic.DeepEqual(again.Status, st) || len(again.Changed) != 0 {
		t.Errorf("recomputing from the written status changed it (%d condition changes)", len(again.Changed))
	}
}

func completeJob(name, uid string, completions int32) *wrappers.JobWrapper {
	return makeJob(name, uid, completions).Completed(fmt.Sprintf("0-%d", completions-1), completions).Complete(jobCondAt)
}

// TestTerminalRecords: a target's last observation is its record. Deleting the Job
// changes neither coverage, nor results, nor the verdict; the status says it was
// deleted and when.
func TestTerminalRecords(t *testing.T) {
	ab := []string{"A", "B"}
	withResults := makeSpec(ab...).AssignJob("j", "0-1", ab...).RequireResults("").SpecObj()
	noResults := makeSpec(ab...).AssignJob("j", "0-1", ab...).SpecObj()
	accepted := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B")}
	jsSpec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").SpecObj()
	jsKey := "jobset/train/workers/0"

	cases := []struct {
		name string
		spec *v1alpha1.BatchAccountSpec
		// before is observed first (at time0), then nothing (at time0+10s).
		before  map[string]Observation
		results []Result
		// wantCovered, the verdicts after deletion.
		wantCovered    int32
		wantAccepted   int32
		wantVerdict    string
		wantTerminated string
		wantStatus     metav1.ConditionStatus
		wantMessage    string
	}{
		{
			name: "Accepted with results, then the Job is deleted by its TTL",
			spec: withResults, before: map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts(), PodsListed: true}},
			results:     accepted,
			wantCovered: 2, wantAccepted: 2, wantVerdict: v1alpha1.ReasonAccepted, wantTerminated: v1alpha1.ReasonComplete, wantStatus: metav1.ConditionTrue,
			wantMessage: "every shard covered, every target terminated Complete, every shard result accepted",
		},
		{
			name: "Accepted without results, then deleted by hand",
			spec: noResults, before: map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts()}},
			wantCovered: 2, wantVerdict: v1alpha1.ReasonAccepted, wantTerminated: v1alpha1.ReasonComplete, wantStatus: metav1.ConditionTrue,
		},
		{
			name: "deleted before it terminated: coverage kept, it can no longer complete",
			spec: noResults, before: map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 2).Completed("0", 1).Facts()}},
			wantCovered: 1, wantVerdict: v1alpha1.ReasonTargetDeleted, wantTerminated: v1alpha1.ReasonTargetDeleted, wantStatus: metav1.ConditionFalse,
			wantMessage: "1/2 shards covered; missing B = job j index 1; job j deleted before it terminated: it can no longer complete; repair its missing shards",
		},
		{
			name: "a JobSet child that terminated keeps its record when the JobSet goes",
			spec: jsSpec, before: map[string]Observation{jsKey: {Job: completeJob("train-workers-0", "uid-w0", 4).Facts(), RestartAttempt: 2}},
			wantCovered: 4, wantVerdict: v1alpha1.ReasonAccepted, wantTerminated: v1alpha1.ReasonComplete, wantStatus: metav1.ConditionTrue,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := at(tc.spec, nil, 0, tc.before, tc.results...).Status
			gone := at(tc.spec, &live, 10*time.Second, map[string]Observation{}, tc.results...)
			st := gone.Status
			tgt := st.Targets[0]
			if !tgt.Deleted || tgt.Found || tgt.DeletedAt == nil || !tgt.DeletedAt.Time.Equal(time0.Add(10*time.Second)) {
				t.Fatalf("target after deletion: deleted %v found %v deletedAt %v; want deleted at +10s", tgt.Deleted, tgt.Found, tgt.DeletedAt)
			}
			if tgt.UID != live.Targets[0].UID || tgt.CompletedIndexes != live.Targets[0].CompletedIndexes || tgt.Terminal != live.Targets[0].Terminal {
				t.Errorf("record changed: %+v, was %+v", tgt, live.Targets[0])
			}
			if len(st.History) != 0 {
				t.Errorf("a deleted identity is no superseded one: history %+v", st.History)
			}
			if st.Shards.Covered != tc.wantCovered || st.Shards.Accepted != tc.wantAccepted || st.Results.Rejected != 0 {
				t.Errorf("covered %d accepted %d rejected %d; want %d, %d, 0", st.Shards.Covered, st.Shards.Accepted, st.Results.Rejected, tc.wantCovered, tc.wantAccepted)
			}
			wantCond(t, st, v1alpha1.ConditionTerminated, tc.wantStatus, tc.wantTerminated, "")
			wantCond(t, st, v1alpha1.ConditionAccepted, tc.wantStatus, tc.wantVerdict, tc.wantMessage)
			if tc.wantStatus == metav1.ConditionTrue {
				for _, c := range gone.Changed {
					t.Errorf("deletion changed %s to %s/%s", c.Type, c.Status, c.Reason)
				}
			}
			// Later reconciles keep the first time it was seen missing, and write nothing.
			wantFixedPoint(t, tc.spec, st, time.Hour, map[string]Observation{}, tc.results...)
		})
	}
}

// TestRecordSupersededByANewJob: a new Job under the deleted one's name is a new
// identity; the record goes to history with its terminal condition, as any superseded
// identity, and its results are stale. (Only while the batch is not Accepted: an
// Accepted batch keeps its identities, TestAcceptedKeepsItsIdentities.)
func TestRecordSupersededByANewJob(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	// B's result never came: the batch awaits it.
	old := []Result{result("job/j", "uid-j", 0, "A")}
	st := at(spec, nil, 0, map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts()}}, old...).Status
	st = at(spec, &st, time.Minute, map[string]Observation{}, old...).Status
	st = at(spec, &st, 2*time.Minute, map[string]Observation{"job/j": {Job: makeJob("j", "uid-j2", 2).Facts()}}, old...).Status
	if len(st.History) != 1 || st.History[0].UID != "uid-j" || st.History[0].Terminal != TerminalComplete || st.History[0].CompletedIndexes != "0,1" {
		t.Fatalf("history = %+v", st.History)
	}
	if tgt := st.Targets[0]; tgt.Deleted || tgt.DeletedAt != nil || tgt.UID != "uid-j2" {
		t.Errorf("target = %+v; want the new identity, not deleted", tgt)
	}
	if st.Shards.Covered != 0 || st.Shards.Accepted != 0 || st.Results.Rejected != 1 || st.Results.Rejections[0].Reason != v1alpha1.RejectionStaleIdentity {
		t.Errorf("covered %d accepted %d results %+v", st.Shards.Covered, st.Shards.Accepted, st.Results)
	}
}

// TestAccountCreatedAfterItsJobWasDeleted: never a false acceptance, and the message
// says plainly what may have happened.
func TestAccountCreatedAfterItsJobWasDeleted(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("late", "0-1", "A", "B").RequireResults("").SpecObj()
	st := at(spec, nil, 0, map[string]Observation{}).Status
	want := "0/2 shards covered; missing A, B = job late indexes 0,1; job late not found; this account has never observed it: " +
		"if a Job already ran and was deleted before the account existed, its completions cannot be counted; re-run its shards in a Job the assignments name"
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, want)
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, want)
}

// TestMissingResult: a covered shard whose result can no longer arrive is MissingResult,
// counted and listed, not pending.
func TestMissingResult(t *testing.T) {
	abc := []string{"A", "B", "C"}
	spec := makeSpec(abc...).AssignJob("j", "0-2", abc...).RequireResults("").SpecObj()
	complete := completeJob("j", "uid-j", 3).Obj()
	running := makeJob("j", "uid-j", 3).Completed("0-2", 3).Obj()
	a := result("job/j", "uid-j", 0, "A")
	badB := result("job/j", "uid-j", 1, "B")
	badB.RejectReason, badB.RejectMessage = v1alpha1.RejectionMalformed, "no JSON object in the termination message"
	cases := []struct {
		name         string
		obs          map[string]Observation
		deleteAfter  bool
		afterObs     map[string]Observation
		results      []Result
		wantReason   string
		wantVerdict  string
		wantMissing  string
		wantRejected string
		wantMessage  string
	}{
		{
			name:       "Complete, pods listed, none left, no results (account created after the pods were gone)",
			obs:        map[string]Observation{"job/j": {Job: jobkind.Facts(complete), PodsListed: true}},
			wantReason: v1alpha1.ReasonMissingResult, wantMissing: "0-2",
			wantMessage: "0/3 shard results accepted; no result can arrive for A..C (MissingResult: the identity completed and terminated or was deleted, " +
				"no result was recorded and no pod is left that can report one): re-run them with a repair",
		},
		{
			name:    "Complete, the pod of index 2 still held: C still pending",
			obs:     map[string]Observation{"job/j": {Job: jobkind.Facts(complete), PodsListed: true, SuccessfulPods: pods("p", 2)}},
			results: []Result{a}, wantReason: v1alpha1.ReasonMissingResult, wantMissing: "1",
			wantMessage: "1/3 shard results accepted; no result can arrive for B (MissingResult: the identity completed and terminated or was deleted, " +
				"no result was recorded and no pod is left that can report one): re-run it with a repair; waiting for C",
		},
		{
			name:    "Complete but pods not listed: pending, as before",
			obs:     map[string]Observation{"job/j": {Job: jobkind.Facts(complete)}},
			results: []Result{a}, wantReason: v1alpha1.ReasonResultsPending, wantMessage: "1/3 shard results accepted; waiting for B, C",
		},
		{
			name:       "not terminated: pending even without pods",
			obs:        map[string]Observation{"job/j": {Job: jobkind.Facts(running), PodsListed: true}},
			wantReason: v1alpha1.ReasonResultsPending, wantVerdict: v1alpha1.ReasonAwaitingTermination,
		},
		{
			name: "deleted after A's result was recorded: B and C can no longer arrive",
			obs:  map[string]Observation{"job/j": {Job: jobkind.Facts(complete), SuccessfulPods: pods("p", 1, 2)}}, deleteAfter: true,
			results: []Result{a}, wantReason: v1alpha1.ReasonMissingResult, wantMissing: "1,2",
		},
		{
			name:     "deleted, but the held pod of index 2 is still listed: C pending, B missing",
			obs:      map[string]Observation{"job/j": {Job: jobkind.Facts(complete), SuccessfulPods: pods("p", 1, 2)}},
			afterObs: map[string]Observation{"job/j": {SuccessfulPods: pods("p", 2), PodsListed: true}},
			results:  []Result{a}, deleteAfter: true, wantReason: v1alpha1.ReasonMissingResult, wantMissing: "1",
		},
		{
			name:    "a rejected result is rejected, not missing; it is listed for repair",
			obs:     map[string]Observation{"job/j": {Job: jobkind.Facts(complete), PodsListed: true}},
			results: []Result{a, badB}, wantReason: v1alpha1.ReasonResultRejected, wantMissing: "2", wantRejected: "1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(spec, nil, 0, tc.obs, tc.results...).Status
			if tc.deleteAfter {
				st = at(spec, &st, time.Minute, tc.afterObs, tc.results...).Status
			}
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, tc.wantReason, tc.wantMessage)
			verdict := tc.wantVerdict
			if verdict == "" {
				verdict = tc.wantReason
			}
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, verdict, "")
			if st.Results.MissingOrdinals != tc.wantMissing || st.Results.RejectedOrdinals != tc.wantRejected {
				t.Errorf("missing %q rejected %q; want %q, %q", st.Results.MissingOrdinals, st.Results.RejectedOrdinals, tc.wantMissing, tc.wantRejected)
			}
			if want := int32(mustParse(t, tc.wantMissing).Count()); st.Results.Missing != want {
				t.Errorf("missing count %d, want %d", st.Results.Missing, want)
			}
		})
	}
}

// TestMissingResultAwaitsARepair: a covered shard whose identity can report no result
// any more is MissingResult only while none of its identities can still run: once a
// repair gives it a further identity (as MissingResult's own message asks), that
// identity may still report the result, so the shard is pending until the repair, too,
// can report nothing more (it terminated with its pods listed, or failed the index).
func TestMissingResultAwaitsARepair(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("j-repair", "0", "B").RequireResults("").SpecObj()
	j := Observation{Job: completeJob("j", "uid-j", 2).Facts(), PodsListed: true}
	a := result("job/j", "uid-j", 0, "A")
	missingB := "1/2 shard results accepted; no result can arrive for B (MissingResult: the identity completed and terminated or was deleted, " +
		"no result was recorded and no pod is left that can report one): re-run it with a repair"
	cases := []struct {
		name        string
		repair      *Observation
		wantReason  string
		wantMessage string
		wantMissing string
	}{
		{name: "the repair Job is not created yet: B pending", repair: nil,
			wantReason: v1alpha1.ReasonResultsPending, wantMessage: "1/2 shard results accepted; waiting for B"},
		{name: "the repair Job runs, its index not complete yet: B pending",
			repair:     &Observation{Job: makeJob("j-repair", "uid-r", 1).Facts(), PodsListed: true},
			wantReason: v1alpha1.ReasonResultsPending, wantMessage: "1/2 shard results accepted; waiting for B"},
		{name: "the repair Job completed its index and ended without a result: B missing",
			repair:     &Observation{Job: completeJob("j-repair", "uid-r", 1).Facts(), PodsListed: true},
			wantReason: v1alpha1.ReasonMissingResult, wantMessage: missingB, wantMissing: "1"},
		{name: "the repair Job failed its index: B missing",
			repair:     &Observation{Job: makeJob("j-repair", "uid-r", 1).FailedIndexes("0").Failed("FailedIndexes", jobCondAt).Facts(), PodsListed: true},
			wantReason: v1alpha1.ReasonMissingResult, wantMessage: missingB, wantMissing: "1"},
		{name: "the repair Job still runs but failed its index: B missing",
			repair:     &Observation{Job: makeJob("j-repair", "uid-r", 1).FailedIndexes("0").Facts(), PodsListed: true},
			wantReason: v1alpha1.ReasonMissingResult, wantMessage: missingB, wantMissing: "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := map[string]Observation{"job/j": j}
			if tc.repair != nil {
				obs["job/j-repair"] = *tc.repair
			}
			st := at(spec, nil, 0, obs, a).Status
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, tc.wantReason, tc.wantMessage)
			if st.Results.MissingOrdinals != tc.wantMissing {
				t.Errorf("missing ordinals %q; want %q", st.Results.MissingOrdinals, tc.wantMissing)
			}
			if blocked := Blocker(&st) != nil; blocked != (tc.wantMissing != "") {
				t.Errorf("blocked = %v; want %v", blocked, tc.wantMissing != "")
			}
		})
	}
}

// TestRejectedResultAwaitsARepair: a shard whose result was rejected is decided, and the
// batch blocked (ResultRejected), only once no identity that has reported nothing for it
// may still report: a repair that may still run its index may still report an accepted
// result, so the shard is pending (the rejection said, not listed for another repair)
// until the repair, too, has reported or can report nothing more. The identity that
// reported the rejected result does not wait for itself.
func TestRejectedResultAwaitsARepair(t *testing.T) {
	withRepair := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("j-repair", "0", "B").RequireResults("").SpecObj()
	noRepair := makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C").RequireResults("").SpecObj()
	j := Observation{Job: completeJob("j", "uid-j", 2).Facts(), PodsListed: true}
	a := result("job/j", "uid-j", 0, "A")
	badB := result("job/j", "uid-j", 1, "B")
	badB.InputRevision = "C"
	rejectedB := "B (RevisionMismatch): shard B result of pod j-1 (job j index 1) has inputRevision \"C\", the account requires \"D\""
	repairedB := result("job/j-repair", "uid-r", 0, "B")
	badRepairedB := repairedB
	badRepairedB.RejectReason, badRepairedB.RejectMessage = v1alpha1.RejectionCriterionNotMet, "rule false"
	pending := "1/2 shard results accepted; waiting for B; rejected, awaiting a result that may still come: " + rejectedB
	cases := []struct {
		name         string
		spec         *v1alpha1.BatchAccountSpec
		obs          map[string]Observation
		results      []Result
		wantStatus   metav1.ConditionStatus
		wantReason   string
		wantMessage  string
		wantRejected string
	}{
		{name: "the repair Job is not created yet: B pending",
			spec: withRepair, obs: map[string]Observation{"job/j": j}, results: []Result{a, badB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending, wantMessage: pending},
		{name: "the repair Job runs, its index not complete yet: B pending",
			spec: withRepair, obs: map[string]Observation{"job/j": j, "job/j-repair": {Job: makeJob("j-repair", "uid-r", 1).Facts(), PodsListed: true}},
			results:    []Result{a, badB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending, wantMessage: pending},
		{name: "the repair Job completed its index, its pod's result not recorded yet: B pending",
			spec: withRepair, obs: map[string]Observation{"job/j": j, "job/j-repair": {Job: completeJob("j-repair", "uid-r", 1).Facts(), PodsListed: true, SuccessfulPods: pods("r", 0)}},
			results:    []Result{a, badB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending, wantMessage: pending},
		{name: "the repair reported an accepted result: accepted",
			spec: withRepair, obs: map[string]Observation{"job/j": j, "job/j-repair": {Job: completeJob("j-repair", "uid-r", 1).Facts(), PodsListed: true}},
			results:    []Result{a, badB, repairedB},
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonAllResultsAccepted, wantMessage: "2/2 shard results accepted"},
		{name: "the repair's result was rejected too: B rejected",
			spec: withRepair, obs: map[string]Observation{"job/j": j, "job/j-repair": {Job: completeJob("j-repair", "uid-r", 1).Facts(), PodsListed: true}},
			results:    []Result{a, badB, badRepairedB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultRejected, wantRejected: "1"},
		{name: "the repair Job still runs but failed its index: B rejected",
			spec: withRepair, obs: map[string]Observation{"job/j": j, "job/j-repair": {Job: makeJob("j-repair", "uid-r", 1).FailedIndexes("0").Facts(), PodsListed: true}},
			results:    []Result{a, badB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultRejected, wantRejected: "1",
			wantMessage: "1/2 shard results accepted; rejected: " + rejectedB},
		{name: "no repair, the Job still runs another index: B rejected at once",
			spec: noRepair, obs: map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 3).Completed("0,1", 2).Facts(), PodsListed: true}},
			results:    []Result{a, badB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultRejected, wantRejected: "1",
			wantMessage: "1/3 shard results accepted; rejected: " + rejectedB},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(tc.spec, nil, 0, tc.obs, tc.results...).Status
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, tc.wantStatus, tc.wantReason, tc.wantMessage)
			if st.Results.RejectedOrdinals != tc.wantRejected {
				t.Errorf("rejected ordinals %q; want %q", st.Results.RejectedOrdinals, tc.wantRejected)
			}
			if blocked := Blocker(&st) != nil; blocked != (tc.wantRejected != "") {
				t.Errorf("blocked = %v; want %v", blocked, tc.wantRejected != "")
			}
		})
	}
}

// TestAdmissionHistory: a Job evicted on h100 with two indexes complete and re-admitted
// on a100 keeps both admissions, and which indexes completed under each.
func TestAdmissionHistory(t *testing.T) {
	four := []string{"A", "B", "C", "D"}
	spec := makeSpec(four...).AssignJob("j", "0-3", four...).SpecObj()
	wl := func(admitted, evicted bool, flavor string) *v1alpha1.WorkloadObservation {
		w := &v1alpha1.WorkloadObservation{Name: "job-j", Admitted: admitted, Evicted: evicted, ClusterQueue: "ml-team"}
		if flavor != "" {
			w.Flavors = []string{"main=nvidia.com/gpu:" + flavor}
		}
		if evicted {
			w.EvictionReason = "Preempted"
		}
		return w
	}
	steps := []struct {
		completed string
		w         *v1alpha1.WorkloadObservation
	}{
		{"", wl(true, false, "h100")},
		{"0,1", wl(true, false, "h100")},
		{"0,1", wl(false, true, "h100")},
		{"0,1", wl(false, false, "")},
		{"0-2", wl(true, false, "a100")},
		{"0-3", wl(true, false, "a100")},
	}
	var st v1alpha1.BatchAccountStatus
	for i, s := range steps {
		n := int32(mustParse(t, s.completed).Count())
		obs := map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).Completed(s.completed, n).Facts(), Workload: s.w}}
		st = at(spec, &st, time.Duration(i)*time.Minute, obs).Status
		if i == len(steps)-1 {
			wantFixedPoint(t, spec, st, time.Hour, obs)
		}
	}
	got := st.Targets[0].Admissions
	minute := func(i int) metav1.Time { return metav1.NewTime(time0.Add(time.Duration(i) * time.Minute)) }
	want := []v1alpha1.Admission{
		{Workload: "job-j", ClusterQueue: "ml-team", Flavors: []string{"main=nvidia.com/gpu:h100"}, AdmittedAt: minute(0),
			EvictedAt: ptr.To(minute(2)), EvictionReason: "Preempted", CompletedIndexes: "0,1"},
		{Workload: "job-j", ClusterQueue: "ml-team", Flavors: []string{"main=nvidia.com/gpu:a100"}, AdmittedAt: minute(4), CompletedIndexes: "2,3"},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("admissions =\n%+v\nwant\n%+v", got, want)
	}
}

// TestAdmissionsBounded: beyond MaxAdmissions, the first admission and the newest are
// kept; those between them are dropped and counted.
func TestAdmissionsBounded(t *testing.T) {
	spec := makeSpec("A").AssignJob("j", "0", "A").SpecObj()
	var st v1alpha1.BatchAccountStatus
	for i := range 20 {
		for _, w := range []*v1alpha1.WorkloadObservation{
			{Name: "job-j", Admitted: true, ClusterQueue: fmt.Sprintf("cq-%d", i)},
			{Name: "job-j", Evicted: true, EvictionReason: "Preempted"},
		} {
			st = at(spec, &st, time.Duration(i)*time.Minute, map[string]Observation{"job/j": {Job: makeJob("j", "u", 1).Facts(), Workload: w}}).Status
		}
	}
	tgt := st.Targets[0]
	if len(tgt.Admissions) != MaxAdmissions || tgt.AdmissionsDropped != 20-MaxAdmissions {
		t.Fatalf("%d admissions, %d dropped; want %d, %d dropped", len(tgt.Admissions), tgt.AdmissionsDropped, MaxAdmissions, 20-MaxAdmissions)
	}
	for k, a := range tgt.Admissions {
		want := "cq-0"
		if k > 0 {
			want = fmt.Sprintf("cq-%d", 20-MaxAdmissions+k)
		}
		if a.ClusterQueue != want {
			t.Errorf("admissions[%d] on %q; want %q", k, a.ClusterQueue, want)
		}
	}
}

// TestRuleInvalid: a rule that does not compile here is not used to judge results; the
// verdict says why and how to fix it.
func TestRuleInvalid(t *testing.T) {
	spec := makeSpec("A").AssignJob("j", "0", "A").RequireResults("result.valid ==").SpecObj()
	obs := map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 1).Facts(), PodsListed: true}}
	out := Compute(Input{Namespace: "ml-team", Generation: 1, Spec: spec, Observations: obs, Now: metav1.NewTime(time0),
		Results: []Result{result("job/j", "uid-j", 0, "A")}, RuleError: "ERROR: <input>:1:16: Syntax error"})
	msg := "the acceptance rule does not compile in this controller: ERROR: <input>:1:16: Syntax error; " +
		"results are kept but not judged, and their pods stay held: fix spec.acceptance.rule and they are judged"
	wantCond(t, out.Status, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid, msg)
	wantCond(t, out.Status, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid, msg)
	if out.Status.Shards.Accepted != 0 || out.Status.Results.Missing != 0 {
		t.Errorf("results judged under an invalid rule: %+v %+v", out.Status.Shards, out.Status.Results)
	}
}

// TestRecordedInOrderBySequence: the sequence decides which result came first, whatever
// the capture seconds say; results without one keep the old order, first.
func TestRecordedInOrderBySequence(t *testing.T) {
	sec := func(s int) metav1.Time { return metav1.NewTime(time0.Add(time.Duration(s) * time.Second)) }
	chunks := []v1alpha1.ShardResults{
		{Results: []v1alpha1.RecordedResult{{Pod: "late-but-first", Sequence: 1, RecordedAt: sec(5)}, {Pod: "third", Sequence: 3, RecordedAt: sec(4)}}},
		{Results: []v1alpha1.RecordedResult{{Pod: "second", Sequence: 2, RecordedAt: sec(4)}, {Pod: "old-b", RecordedAt: sec(1)}, {Pod: "old-a", RecordedAt: sec(1)}, {Pod: "old-0", RecordedAt: sec(0)}}},
	}
	var got []string
	ordered := RecordedInOrder(chunks)
	for _, r := range ordered {
		got = append(got, r.Pod)
	}
	if last := ordered[len(ordered)-1]; last.Sequence != 3 || last.Recorded(0, last.RecordedAt).Sequence != 3 {
		t.Errorf("the sequence is not carried through a result: %d", last.Sequence)
	}
	if want := "old-0 old-a old-b late-but-first second third"; strings.Join(got, " ") != want {
		t.Errorf("order = %s, want %s", strings.Join(got, " "), want)
	}
}

// TestProgress: percent of shards accepted when results are required, else covered,
// rounded down.
func TestProgress(t *testing.T) {
	three := []string{"A", "B", "C"}
	j := makeJob("j", "uid-j", 3).Completed("0-1", 2).Obj()
	cases := []struct {
		name    string
		spec    *v1alpha1.BatchAccountSpec
		results []Result
		want    int32
	}{
		{"covered 2 of 3", makeSpec(three...).AssignJob("j", "0-2", three...).SpecObj(), nil, 66},
		{"accepted 1 of 3", makeSpec(three...).AssignJob("j", "0-2", three...).RequireResults("").SpecObj(), []Result{result("job/j", "uid-j", 0, "A")}, 33},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(tc.spec, nil, 0, map[string]Observation{"job/j": {Job: jobkind.Facts(j)}}, tc.results...).Status
			if st.Shards.Progress != tc.want {
				t.Errorf("progress %d, want %d", st.Shards.Progress, tc.want)
			}
		})
	}
}

// TestAnyValidSpecGetsAStatus: 1,024 assignments naming 63-character Jobs, in every
// state that lists targets, give condition messages far under the API's 32,768 bytes,
// and so do the Workload-facing copies (prefixed with a 253-character account name).
func TestAnyValidSpecGetsAStatus(t *testing.T) {
	const n = 1024
	spec := makeCompactSpec("s", n)
	name := func(i int) string { return fmt.Sprintf("%s-%04d", strings.Repeat("j", 58), i) }
	for i := range n {
		spec.AssignJobOrdinals(name(i), "0", fmt.Sprint(i))
	}
	evicted := &v1alpha1.WorkloadObservation{Name: strings.Repeat("w", 63), Evicted: true}
	cases := map[string]func(i int) (Observation, bool){
		"none exists": func(int) (Observation, bool) { return Observation{}, false },
		"all evicted": func(i int) (Observation, bool) {
			return Observation{Job: makeJob(name(i), "u-"+name(i), 1).Facts(), Workload: evicted}, true
		},
		"all failed": func(i int) (Observation, bool) {
			return Observation{Job: makeJob(name(i), "u-"+name(i), 1).Condition(batchv1.JobFailed, "BackoffLimitExceeded", jobCondAt).Facts()}, true
		},
		"all not found but one": func(i int) (Observation, bool) {
			return Observation{Job: makeJob(name(i), "u-"+name(i), 1).Facts()}, i == 0
		},
		"none indexed": func(i int) (Observation, bool) {
			return Observation{Job: makeJob(name(i), "u-"+name(i), 1).CompletionMode(batchv1.NonIndexedCompletion).Facts()}, true
		},
	}
	for cname, obsOf := range cases {
		t.Run(cname, func(t *testing.T) {
			obs := map[string]Observation{}
			for i := range n {
				if o, ok := obsOf(i); ok {
					obs["job/"+name(i)] = o
				}
			}
			st := at(spec.SpecObj(), nil, 0, obs).Status
			for _, c := range st.Conditions {
				workloadFacing := "BatchAccount " + strings.Repeat("a", 253) + ": " + c.Message
				if len(c.Message) > MaxConditionMessage || len(workloadFacing) > 32768 {
					t.Errorf("%s message is %d bytes (Workload-facing %d)", c.Type, len(c.Message), len(workloadFacing))
				}
			}
			if raw, _ := json.Marshal(st); len(raw) > etcdRequestLimit*2/3 {
				t.Errorf("status is %d bytes of JSON", len(raw))
			}
			if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted); c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("Accepted = %+v", c)
			}
		})
	}
}

// TestJobDeletedBeforeItTerminatedThenRepaired: once a repair covers the missing shards
// of a Job deleted while it ran, the deleted Job stands like a failed one and the batch
// can be Accepted; a repair Job deleted while it ran blocks as the original would.
func TestJobDeletedBeforeItTerminatedThenRepaired(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("j-repair-1", "0", "B").SpecObj()
	running := makeJob("j", "uid-j", 2).Completed("0", 1).Obj()
	st := at(spec, nil, 0, map[string]Observation{"job/j": {Job: jobkind.Facts(running)}}).Status
	repaired := completeJob("j-repair-1", "uid-r", 1).Obj()
	st = at(spec, &st, time.Minute, map[string]Observation{"job/j-repair-1": {Job: jobkind.Facts(repaired)}}).Status
	wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonTargetDeleted, "job j deleted before it terminated")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted,
		"every shard covered, every target terminated (job j deleted before it terminated, its shards covered by repair)")

	// The repair Job deleted while it ran, before it covered B.
	st = at(spec, nil, 0, map[string]Observation{"job/j": {Job: jobkind.Facts(running)}, "job/j-repair-1": {Job: makeJob("j-repair-1", "uid-r", 1).Facts()}}).Status
	st = at(spec, &st, time.Minute, map[string]Observation{}).Status
	wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted,
		"job j, job j-repair-1 deleted before they terminated: can no longer complete; repair their missing shards")
}

// TestJobDeletedBeforeItTerminatedAwaitsItsRepair: a Job deleted while it ran blocks the
// batch (TargetDeleted: "repair its missing shards") only while a missing shard of it has
// no identity left that may still cover it. Once a repair gives each of them one that may
// still run (created or not yet), the batch awaits the repair, as the message asked; a
// repair that failed the index blocks again.
func TestJobDeletedBeforeItTerminatedAwaitsItsRepair(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("j-repair-1", "0", "B").SpecObj()
	running := makeJob("j", "uid-j", 2).Completed("0", 1)
	cases := []struct {
		name        string
		repair      *Observation
		wantReason  string
		wantMessage string
		wantBlocked bool
	}{
		{name: "the repair Job is not created yet", wantReason: v1alpha1.ReasonAwaitingTermination,
			wantMessage: "not terminated: job j (deleted before it terminated; other identities may still cover its missing shards), job j-repair-1 (not found); coverage does not imply termination"},
		{name: "the repair Job runs", repair: &Observation{Job: makeJob("j-repair-1", "uid-r", 1).Facts()}, wantReason: v1alpha1.ReasonAwaitingTermination,
			wantMessage: "not terminated: job j (deleted before it terminated; other identities may still cover its missing shards), job j-repair-1; coverage does not imply termination"},
		{name: "the repair Job failed the index", repair: &Observation{Job: makeJob("j-repair-1", "uid-r", 1).FailedIndexes("0").Failed("FailedIndexes", jobCondAt).Facts()},
			wantReason: v1alpha1.ReasonTargetDeleted, wantBlocked: true,
			wantMessage: "job j deleted before it terminated: can no longer complete; repair its missing shards"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(spec, nil, 0, map[string]Observation{"job/j": {Job: running.Facts()}}).Status
			obs := map[string]Observation{}
			if tc.repair != nil {
				obs["job/j-repair-1"] = *tc.repair
			}
			st = at(spec, &st, time.Minute, obs).Status
			if !st.Targets[0].Deleted {
				t.Fatalf("targets %+v; want job j's record, deleted", st.Targets)
			}
			wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, tc.wantReason, tc.wantMessage)
			if blocked := Blocker(&st) != nil; blocked != tc.wantBlocked {
				t.Errorf("blocked = %v (%+v); want %v", blocked, Blocker(&st), tc.wantBlocked)
			}
		})
	}
}

// TestClipMessage: a clipped message stays valid UTF-8, within its limit, and says so.
func TestClipMessage(t *testing.T) {
	msg := strings.Repeat("é", 100) // 200 bytes
	got := clipMessage(msg, 51)
	if len(got) > 51 || !utf8.ValidString(got) || !strings.HasSuffix(got, "(message truncated)") {
		t.Errorf("clipped to %d bytes %q", len(got), got)
	}
	if clipMessage("short", 51) != "short" {
		t.Errorf("a short message was changed")
	}
}

// TestOwnerEndedWithoutItsChild: a JobSet child gone before it terminated is a restart
// in progress only while its JobSet may recreate it. Once the JobSet ended (Completed,
// Failed, deleted) the child's last identity is its record, as for a plain Job deleted
// before it terminated: its coverage counts, the account says it can no longer complete
// and how to go on, and no wait for the child to exist is left. That holds whether the
// account saw the JobSet end together with the child's deletion, or took the deletion
// for a restart first. A JobSet the account never saw a child of is only not found (an
// account may be written before its JobSet).
func TestOwnerEndedWithoutItsChild(t *testing.T) {
	spec := makeCompactSpec("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").SpecObj()
	key := "jobset/train/workers/0"
	running := map[string]Observation{key: {Job: makeJob("train-workers-0", "uid-w0", 2).Completed("0", 1).Facts(), RestartAttempt: 3}}
	gone := func(ended string) map[string]Observation { return map[string]Observation{key: {OwnerEnded: ended}} }
	lost := "1/2 shards covered; missing s1 = jobset train workers[0] index 1; jobset train workers[0] deleted before it terminated (its JobSet Failed): it can no longer complete; repair its missing shards"

	for _, tc := range []struct {
		name string
		// steps are observed in order, 10 s apart; the last one is checked.
		steps           []map[string]Observation
		wantCovered     int32
		wantRecordUID   string
		wantHistory     int
		wantTerminated  string
		wantCoveredMsg  string
		wantAdmittedWhy string
	}{{
		name:          "the JobSet failed and deleted its active child in one observation",
		steps:         []map[string]Observation{running, gone(string(jobset.JobSetFailed))},
		wantCovered:   1,
		wantRecordUID: "uid-w0", wantTerminated: v1alpha1.ReasonTargetDeleted, wantCoveredMsg: lost,
		wantAdmittedWhy: v1alpha1.ReasonTargetDeleted,
	}, {
		name:          "taken for a restart first, then the JobSet recorded Failed",
		steps:         []map[string]Observation{running, gone(""), gone(string(jobset.JobSetFailed))},
		wantCovered:   1,
		wantRecordUID: "uid-w0", wantTerminated: v1alpha1.ReasonTargetDeleted, wantCoveredMsg: lost,
		wantAdmittedWhy: v1alpha1.ReasonTargetDeleted,
	}, {
		name:        "a restart in progress while the JobSet runs: superseded, waiting for the successor",
		steps:       []map[string]Observation{running, gone("")},
		wantHistory: 1, wantTerminated: v1alpha1.ReasonAwaitingTermination,
		wantAdmittedWhy: v1alpha1.ReasonTargetsNotFound,
	}, {
		// An account written before its JobSet: nothing says the JobSet ever existed.
		name:            "a JobSet the account never saw anything of is not found: the account waits for it",
		steps:           []map[string]Observation{gone(OwnerDeleted)},
		wantTerminated:  v1alpha1.ReasonAwaitingTermination,
		wantAdmittedWhy: v1alpha1.ReasonTargetsNotFound,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var st *v1alpha1.BatchAccountStatus
			for i, obs := range tc.steps {
				out := at(spec, st, time.Duration(i)*10*time.Second, obs)
				st = &out.Status
			}
			last := tc.steps[len(tc.steps)-1]
			tgt := st.Targets[0]
			if string(tgt.UID) != tc.wantRecordUID || (tc.wantRecordUID != "") != tgt.Deleted {
				t.Errorf("target: uid %q deleted %v; want uid %q", tgt.UID, tgt.Deleted, tc.wantRecordUID)
			}
			if st.Shards.Covered != tc.wantCovered || len(st.History) != tc.wantHistory {
				t.Errorf("covered %d, history %d; want %d, %d", st.Shards.Covered, len(st.History), tc.wantCovered, tc.wantHistory)
			}
			wantCond(t, *st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, tc.wantTerminated, "")
			wantCond(t, *st, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, tc.wantAdmittedWhy, "")
			if tc.wantCoveredMsg != "" {
				wantCond(t, *st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, tc.wantCoveredMsg)
			}
			wantFixedPoint(t, spec, *st, time.Hour, last)
		})
	}
}

// TestJobDeletedTheMomentItFinished: a Job deleted by a TTL of 0 the moment it finished
// is gone before the account observed its end. The Job's last state, which its deletion
// delivered (Observation.DeletedJob), completes the record: it terminated Complete and the
// batch is Accepted, not "deleted before it terminated". Only the same identity's last
// state counts, and never one that would rewrite a record that already ended.
func TestJobDeletedTheMomentItFinished(t *testing.T) {
	ab := []string{"A", "B"}
	spec := makeSpec(ab...).AssignJob("j", "0-1", ab...).SpecObj()
	running := map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 2).Completed("0", 1).Facts()}}
	for _, tc := range []struct {
		name         string
		deleted      *batchv1.Job
		wantTerminal string
		wantCovered  int32
		wantVerdict  string
	}{
		{name: "its last state recorded Complete", deleted: completeJob("j", "uid-j", 2).Obj(),
			wantTerminal: TerminalComplete, wantCovered: 2, wantVerdict: v1alpha1.ReasonAccepted},
		{name: "its deletion was not seen", wantCovered: 1, wantVerdict: v1alpha1.ReasonTargetDeleted},
		{name: "the last state of another identity", deleted: completeJob("j", "uid-other", 2).Obj(),
			wantCovered: 1, wantVerdict: v1alpha1.ReasonTargetDeleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := at(spec, nil, 0, running).Status
			gone := map[string]Observation{"job/j": {DeletedJob: jobkind.Facts(tc.deleted)}}
			st := at(spec, &live, 10*time.Second, gone).Status
			tgt := st.Targets[0]
			if !tgt.Deleted || tgt.UID != "uid-j" || tgt.Terminal != tc.wantTerminal || st.Shards.Covered != tc.wantCovered {
				t.Errorf("record: deleted %v uid %s terminal %q, covered %d; want deleted uid-j %q, %d",
					tgt.Deleted, tgt.UID, tgt.Terminal, st.Shards.Covered, tc.wantTerminal, tc.wantCovered)
			}
			wantCond(t, st, v1alpha1.ConditionAccepted, map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[tc.wantVerdict == v1alpha1.ReasonAccepted], tc.wantVerdict, "")
			// The record stands from then on, the deleted Job's state or not.
			wantFixedPoint(t, spec, st, time.Hour, map[string]Observation{})
			wantFixedPoint(t, spec, st, time.Hour, gone)
		})
	}
}

// TestJobSetNotFoundBeforeOrAfterItWasSeen: a JobSet that is not found was deleted only
// if the account saw one of its children; then a child it never saw was never created and
// will not be. Before that, the JobSet may just not exist yet (an account written first):
// no TargetDeleted, no repair advice, until the JobSet and its children appear.
func TestJobSetNotFoundBeforeOrAfterItWasSeen(t *testing.T) {
	spec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-1", "0-1").
		AssignJobSet("train", "workers", 1, "0-1", "2-3").SpecObj()
	w0, w1 := "jobset/train/workers/0", "jobset/train/workers/1"
	notYet := map[string]Observation{w0: {OwnerEnded: OwnerDeleted}, w1: {OwnerEnded: OwnerDeleted}}
	started := map[string]Observation{w0: {Job: makeJob("train-workers-0", "uid-w0", 2).Completed("0-1", 2).Complete(jobCondAt).Facts()}, w1: {}}

	// Written before the JobSet: waiting, twice over (a fixed point).
	out := at(spec, nil, 0, notYet)
	wantCond(t, out.Status, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, "waiting for jobset train workers[0], jobset train workers[1] to exist")
	wantCond(t, out.Status, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")
	wantFixedPoint(t, spec, out.Status, time.Hour, notYet)

	// One child seen, then the JobSet deleted: the other child will never come.
	st := at(spec, nil, 0, started).Status
	out = at(spec, &st, 10*time.Second, notYet)
	wantCond(t, out.Status, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing,
		"2/4 shards covered; missing s2, s3 = jobset train workers[1] indexes 0,1; jobset train workers[0] deleted after it recorded Complete, its record stands; jobset train workers[1] was never created and will not be (its JobSet was deleted); repair its missing shards")
	wantCond(t, out.Status, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted, "")
}
