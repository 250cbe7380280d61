package account

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestAcceptedStandsWhenATerminatedJobsListWasLeftOut: a status too large for its index
// lists leaves lists out; a terminated Job's completed indexes are what its record keeps
// once the Job is deleted (its TTL), so they go with the records', never before: a
// verdict reached on them stands after the deletion.
func TestAcceptedStandsWhenATerminatedJobsListWasLeftOut(t *testing.T) {
	// Room for the terminated Jobs' completed indexes, not for their failed and required ones.
	roomForIndexLists(t, 12)
	eight := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	spec := makeSpec(eight...).AssignJob("j", "0-7", eight...).Repair("r", "0-3", "B", "D", "F", "H").SpecObj()
	failed := makeJob("j", "uid-j", 8).Completed("0,2,4,6", 4).FailedIndexes("1,3,5,7").Failed("FailedIndexes", jobCondAt)
	repair := makeJob("r", "uid-r", 4).Completed("0-3", 4).Complete(jobCondAt)
	cases := []struct {
		name string
		obs  map[string]Observation
	}{
		{"the failed Job is deleted", map[string]Observation{"job/r": {Job: repair.Facts()}}},
		{"the repair Job is deleted", map[string]Observation{"job/j": {Job: failed.Facts()}}},
		{"both are deleted", map[string]Observation{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(spec, nil, 0, map[string]Observation{"job/j": {Job: failed.Facts()}, "job/r": {Job: repair.Facts()}}).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			gone := at(spec, &st, time.Minute, tc.obs)
			wantCond(t, gone.Status, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "")
			wantCond(t, gone.Status, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			for _, c := range gone.Changed {
				t.Errorf("deletion changed %s to %s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		})
	}
}

// TestAcceptedStandsWhenNoRoomKeptATerminatedJobsList: a status so large that even the
// terminated Jobs' completed indexes are left out keeps no list a record could read its
// coverage back from (a Failed Job, or one Complete by its successPolicy). An Accepted
// verdict stands on the identities on its record all the same: deleting such a Job (its
// TTL) changes nothing, whichever of them is deleted.
func TestAcceptedStandsWhenNoRoomKeptATerminatedJobsList(t *testing.T) {
	// Room for no index list at all.
	roomForIndexLists(t, 2)
	eight := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	repaired := makeSpec(eight...).AssignJob("j", "0-7", eight...).Repair("r", "0-3", "B", "D", "F", "H").RequireResults("").SpecObj()
	failed := makeJob("j", "uid-j", 8).Completed("0,2,4,6", 4).FailedIndexes("1,3,5,7").Failed("FailedIndexes", jobCondAt)
	repair := makeJob("r", "uid-r", 4).Completed("0-3", 4).Complete(jobCondAt)
	var repairedResults []Result
	for i, s := range eight {
		if i%2 == 0 {
			repairedResults = append(repairedResults, result("job/j", "uid-j", i, s))
		} else {
			repairedResults = append(repairedResults, result("job/r", "uid-r", i/2, s))
		}
	}
	byPolicy := makeSpec("A", "B", "C", "D").AssignJob("p", "0-3", "A", "B", "C", "D").SpecObj()
	policy := makeJob("p", "uid-p", 4).SuccessPolicy(batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](4)}).
		Completed("0-3", 4).Complete(jobCondAt)
	both := map[string]Observation{"job/j": {Job: failed.Facts(), PodsListed: true}, "job/r": {Job: repair.Facts(), PodsListed: true}}
	cases := []struct {
		name    string
		spec    *v1alpha1.BatchAccountSpec
		results []Result
		before  map[string]Observation
		after   map[string]Observation
	}{
		{"the failed Job is deleted", repaired, repairedResults, both, map[string]Observation{"job/r": {Job: repair.Facts(), PodsListed: true}}},
		{"both are deleted", repaired, repairedResults, both, map[string]Observation{}},
		{"a Job Complete by its successPolicy is deleted", byPolicy, nil, map[string]Observation{"job/p": {Job: policy.Facts()}}, map[string]Observation{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(tc.spec, nil, 0, tc.before, tc.results...).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			gone := at(tc.spec, &st, time.Minute, tc.after, tc.results...)
			wantCond(t, gone.Status, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "")
			wantCond(t, gone.Status, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			for _, c := range gone.Changed {
				t.Errorf("deletion changed %s to %s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			wantFixedPoint(t, tc.spec, gone.Status, 2*time.Minute, tc.after, tc.results...)
		})
	}
}

// TestAcceptedKeepsItsIdentities: an Accepted batch is over. Its owners had ended (a
// child awaits a running one), so an owner of the same name running again is another
// object (a JobSet deleted by its TTL and applied again, a TrainJob's JobSet rendered
// anew), and a Job of a target's name with another UID (a Job re-run under its name) is
// another batch's: neither takes the verdict back. Until the spec changes, each
// target's identity on record stands, and a child never created stays so.
func TestAcceptedKeepsItsIdentities(t *testing.T) {
	childSpec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").SpecObj()
	trainSpec := makeCompactSpec("s", 4).AssignTrainJob("llm", "node", 0, "0-3", "0-3").SpecObj()
	jobSpec := makeCompactSpec("s", 4).AssignJobOrdinals("j", "0-3", "0-3").SpecObj()
	byNameSpec := makeCompactSpec("s", 4).AssignJobOrdinals("train-workers-0", "0-3", "0-3").SpecObj()
	// Child 1 was never created (its JobSet failed first); a repair Job covered its shards.
	repairedSpec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-1", "0-1").
		AssignJobSet("train", "workers", 1, "0-1", "2-3").Repair("r", "0-1", "s2", "s3").SpecObj()
	w0, w1, key := "jobset/train/workers/0", "jobset/train/workers/1", "jobset/train/workers/0"
	child := completeJob("train-workers-0", "uid-w0", 4).Facts()
	node := completeJob("llm-node-0", "uid-n0", 4).Facts()
	rerun := func(name string) Observation {
		return Observation{Job: makeJob(name, "uid-again", 4).Facts(), ChildOwner: OwnerRunning}
	}
	one := func(key string, o Observation) map[string]Observation { return map[string]Observation{key: o} }
	// A TrainJob MultiKueue dispatched ran under wOld; created again under its name, it
	// runs under wNew on worker-a, whose records are not read: no child is observed,
	// and its copy counts as replaced (Redispatched).
	wOld := &v1alpha1.WorkloadObservation{Name: "trainjob-llm-old", UID: "wl-old", Admitted: true, ClusterQueue: "gpu", Cluster: "worker-a"}
	wNew := &v1alpha1.WorkloadObservation{Name: "trainjob-llm-new", UID: "wl-new", Admitted: true, ClusterQueue: "gpu", Cluster: "worker-a"}
	unread := Observation{ChildOwner: OwnerRunning, Workload: wNew, ResultsOnWorker: true, WorkerProblem: "worker-a not reachable", Redispatched: true}
	cases := []struct {
		name     string
		spec     *v1alpha1.BatchAccountSpec
		accepted map[string]Observation
		// later are observed in order after the verdict, a minute apart.
		later []map[string]Observation
	}{
		{"a JobSet deleted and applied again under its name", childSpec, one(key, Observation{Job: child, ChildOwner: "Completed"}),
			[]map[string]Observation{one(key, Observation{OwnerEnded: OwnerDeleted, ChildOwner: OwnerDeleted}),
				one(key, Observation{ChildOwner: OwnerRunning}), one(key, rerun("train-workers-0"))}},
		{"the new JobSet runs before the old child is gone", childSpec, one(key, Observation{Job: child, ChildOwner: "Completed"}),
			[]map[string]Observation{one(key, Observation{Job: child, ChildOwner: OwnerRunning}), one(key, rerun("train-workers-0"))}},
		{"a TrainJob's JobSet rendered anew", trainSpec, one("trainjob/llm/node/0", Observation{Job: node, ChildOwner: "Complete"}),
			[]map[string]Observation{one("trainjob/llm/node/0", Observation{ChildOwner: OwnerRunning}), one("trainjob/llm/node/0", rerun("llm-node-0"))}},
		{"a JobSet's child named by its Job name, the JobSet applied again", byNameSpec,
			one("job/train-workers-0", Observation{Job: child, ChildOwner: "Completed"}),
			[]map[string]Observation{one("job/train-workers-0", Observation{Job: child, ChildOwner: OwnerRunning}),
				one("job/train-workers-0", rerun("train-workers-0"))}},
		{"a Job re-run under its name", jobSpec, one("job/j", Observation{Job: completeJob("j", "uid-j", 4).Facts()}),
			[]map[string]Observation{one("job/j", Observation{}), one("job/j", Observation{Job: makeJob("j", "uid-again", 4).Completed("0", 1).Facts()})}},
		{"a Job replaced at once", jobSpec, one("job/j", Observation{Job: completeJob("j", "uid-j", 4).Facts()}),
			[]map[string]Observation{one("job/j", Observation{Job: makeJob("j", "uid-again", 4).Facts()})}},
		{"a dispatched TrainJob created again, on a worker not read", trainSpec,
			one("trainjob/llm/node/0", Observation{Job: node, ChildOwner: "Complete", Workload: wOld}),
			[]map[string]Observation{one("trainjob/llm/node/0", unread)}},
		{"a child never created, its JobSet applied again", repairedSpec,
			map[string]Observation{
				w0:      {Job: completeJob("train-workers-0", "uid-w0", 2).Facts(), ChildOwner: "Failed"},
				w1:      {OwnerEnded: "Failed", ChildOwner: "Failed"},
				"job/r": {Job: completeJob("r", "uid-r", 2).Facts()},
			},
			[]map[string]Observation{
				{w0: {OwnerEnded: OwnerDeleted, ChildOwner: OwnerDeleted}, w1: {OwnerEnded: OwnerDeleted, ChildOwner: OwnerDeleted}, "job/r": {}},
				{w0: {ChildOwner: OwnerRunning}, w1: {ChildOwner: OwnerRunning}, "job/r": {}},
				{w0: rerun("train-workers-0"), w1: rerun("train-workers-1"), "job/r": {}},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(tc.spec, nil, 0, tc.accepted).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			uids, workloads := map[string]types.UID{}, map[string]*v1alpha1.WorkloadObservation{}
			for _, tg := range st.Targets {
				uids[tg.Name], workloads[tg.Name] = tg.UID, tg.Workload
			}
			for i, obs := range tc.later {
				out := at(tc.spec, &st, time.Duration(i+1)*time.Minute, obs)
				st = out.Status
				for _, c := range out.Changed {
					t.Errorf("step %d changed %s to %s/%s: %s", i, c.Type, c.Status, c.Reason, c.Message)
				}
				for _, tg := range st.Targets {
					if tg.UID != uids[tg.Name] {
						t.Errorf("step %d: target %s follows %q; want its identity on record %q", i, tg.Name, tg.UID, uids[tg.Name])
					}
					if w, rec := tg.Workload, workloads[tg.Name]; (w == nil) != (rec == nil) || w != nil && w.UID != rec.UID {
						t.Errorf("step %d: target %s records Workload %+v; want the one on record %+v", i, tg.Name, w, rec)
					}
				}
				if len(st.History) != 0 || st.Shards.Covered != 4 {
					t.Errorf("step %d: history %d, covered %d; want no history, 4 covered", i, len(st.History), st.Shards.Covered)
				}
			}
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			wantFixedPoint(t, tc.spec, st, time.Hour, tc.later[len(tc.later)-1])
		})
	}
}

// TestAcceptedStandsWhenItsRuleNoLongerCompiles: a rule that no longer compiles in this
// controller (after an upgrade) judges nothing new, and takes back no verdict its
// results were judged to under it: an Accepted batch stays Accepted, with the shards it
// accepted. A batch not Accepted yet says RuleInvalid (TestRuleInvalid).
func TestAcceptedStandsWhenItsRuleNoLongerCompiles(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("result.valid == result.records").SpecObj()
	obs := map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts(), PodsListed: true}}
	results := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B")}
	st := at(spec, nil, 0, obs, results...).Status
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
	out := Compute(Input{Namespace: "ml-team", Generation: 1, Spec: spec, Previous: &st, Observations: obs, Results: results,
		Now: metav1.NewTime(time0.Add(time.Hour)), RuleError: "ERROR: <input>:1:8: undeclared reference to 'result'"})
	for _, c := range out.Changed {
		t.Errorf("the rule's compile error changed %s to %s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	if out.Status.Shards.Accepted != 2 || out.Status.Results.Recorded != 2 {
		t.Errorf("shards accepted %d, results recorded %d; want 2, 2", out.Status.Shards.Accepted, out.Status.Results.Recorded)
	}
	wantCond(t, out.Status, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
}

// TestFollows: an account that is not Final follows every run of its targets' names; an
// Accepted one only the identities on its record (its targets' current ones, those in
// history) and the Workloads its targets' records name (by UID, or by name on a record
// written without one). A Job or owner being created, whose UID is not known yet, is on
// no record.
func TestFollows(t *testing.T) {
	status := func(judged int64) v1alpha1.BatchAccountStatus {
		return v1alpha1.BatchAccountStatus{
			ObservedGeneration: judged,
			Targets: []v1alpha1.TargetStatus{
				{Name: "job/j", Job: "j", UID: "j-recorded", Workload: &v1alpha1.WorkloadObservation{Name: "job-j-recorded", UID: "wl-recorded"}},
				{Name: "job/k", Job: "k", UID: "k-recorded", Workload: &v1alpha1.WorkloadObservation{Name: "job-k-old"}},
			},
			History: []v1alpha1.SupersededIdentity{{Target: "job/j", Job: "j", UID: "j-superseded"}},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonAccepted, ObservedGeneration: judged}},
		}
	}
	accepted := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: status(1)}
	changed := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: status(1)}
	notAccepted := accepted.DeepCopy()
	notAccepted.Status.Conditions[0].Status = metav1.ConditionFalse
	cases := []struct {
		name string
		run  RunRef
		// want is Follows for the Accepted account; the others follow every run.
		want bool
	}{
		{"the Job on record", RunRef{Job: "j-recorded"}, true},
		{"a superseded identity in history", RunRef{Job: "j-superseded"}, true},
		{"a Job re-run under a target's name", RunRef{Job: "j-again"}, false},
		{"the Workload on record", RunRef{WorkloadUID: "wl-recorded", WorkloadName: "job-j-recorded"}, true},
		{"a Workload recorded by name alone", RunRef{WorkloadUID: "wl-k-old", WorkloadName: "job-k-old"}, true},
		{"a re-run's Workload", RunRef{WorkloadUID: "wl-again", WorkloadName: "job-j-again"}, false},
		{"a Workload of a recorded name under another UID", RunRef{WorkloadUID: "wl-again", WorkloadName: "job-j-recorded"}, false},
		{"a Job being created", RunRef{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Follows(accepted, tc.run); got != tc.want {
				t.Errorf("Accepted: Follows(%+v) = %v, want %v", tc.run, got, tc.want)
			}
			if !Follows(changed, tc.run) {
				t.Errorf("its spec changed since the verdict: Follows(%+v) = false, want true", tc.run)
			}
			if !Follows(notAccepted, tc.run) {
				t.Errorf("not Accepted: Follows(%+v) = false, want true", tc.run)
			}
		})
	}
}

// TestAcceptedThroughASpecChangeThatJudgesAsBefore: an Accepted batch follows only the
// identities on its record until its spec changes what judges it. A change of
// ttlSecondsAfterFinished alone (a retention setting, editable at any time) judges
// nothing: the verdict stays final, and a Job since re-run under a target's name stays
// another batch's. Before, any new generation made the account follow the re-run: its
// verdict fell to ShardsMissing, and it counted the other batch's indexes and results.
// A change that judges (results now required, a repair appended) takes the verdict up
// again, as before.
func TestAcceptedThroughASpecChangeThatJudgesAsBefore(t *testing.T) {
	base := func() *v1alpha1.BatchAccountSpec { return makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj() }
	done := map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts()}}
	rerun := map[string]Observation{"job/j": {Job: makeJob("j", "uid-again", 2).Completed("0", 1).Facts()}}
	cases := []struct {
		name   string
		change func(*v1alpha1.BatchAccountSpec)
		// wantUID is the identity job/j follows after the change; wantReason Accepted's.
		wantUID    types.UID
		wantReason string
	}{
		{"ttlSecondsAfterFinished set", func(s *v1alpha1.BatchAccountSpec) { s.TTLSecondsAfterFinished = ptr.To(int32(3600)) },
			"uid-j", v1alpha1.ReasonAccepted},
		{"nothing changed but the generation", func(*v1alpha1.BatchAccountSpec) {}, "uid-j", v1alpha1.ReasonAccepted},
		{"results now required", func(s *v1alpha1.BatchAccountSpec) { s.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true} },
			"uid-again", v1alpha1.ReasonShardsMissing},
		{"a repair appended", func(s *v1alpha1.BatchAccountSpec) {
			s.Assignments = append(s.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "r"}, Indexes: "0", Shards: []string{"B"}, Repair: true})
		}, "uid-again", v1alpha1.ReasonShardsMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := base()
			st := at(spec, nil, 0, done).Status
			st = at(spec, &st, time.Minute, rerun).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			changed := base()
			tc.change(changed)
			out := Compute(Input{Namespace: "ml-team", Generation: 2, Spec: changed, Previous: &st, Observations: rerun,
				Now: metav1.NewTime(time0.Add(time.Hour))})
			if got := condOf(out.Status, v1alpha1.ConditionAccepted); got.Reason != tc.wantReason {
				t.Errorf("Accepted %s/%s: %s; want reason %s", got.Status, got.Reason, got.Message, tc.wantReason)
			}
			if got := out.Status.Targets[0].UID; got != tc.wantUID {
				t.Errorf("job/j follows %q, want %q", got, tc.wantUID)
			}
			ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: *changed, Status: st}
			if got, want := Follows(ba, RunRef{Job: "uid-again"}), tc.wantUID == "uid-again"; got != want {
				t.Errorf("Follows(the re-run) = %v before the account judged its new spec, want %v", got, want)
			}
		})
	}
}
