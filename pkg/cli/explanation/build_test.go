package explanation

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/indexset"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestExplainAdmissionMove: a Job evicted on h100 with indexes 0 and 1 complete and
// re-admitted on a100: explain says where each shard ran.
func TestExplainAdmissionMove(t *testing.T) {
	ba := clitest.IJ245Account()
	wl := func(flavor string, admitted, evicted bool) *v1alpha1.WorkloadObservation {
		w := clitest.WorkloadObs(false)
		w.Flavors, w.Admitted, w.Evicted = []string{"main=nvidia.com/gpu:" + flavor}, admitted, evicted
		if evicted {
			w.EvictionReason = "Preempted"
		}
		return w
	}
	steps := []struct {
		completed string
		w         *v1alpha1.WorkloadObservation
	}{
		{"0,1", wl("h100", true, false)},
		{"0,1", wl("h100", false, true)},
		{"0-3", wl("a100", true, false)},
	}
	for i, st := range steps {
		done, _ := indexset.Parse(st.completed)
		n := int32(done.Count())
		j := clitest.SeedJob("j", clitest.JobUID, 4).Completed(st.completed, n).ResourceVersion("1").Obj()
		ba = clitest.Compute(ba, clitest.Time0.Add(time.Duration(i)*10*time.Minute), map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: st.w}})
	}
	ex := BuildExplanation(ba, nil, 0)
	adm := ex.Jobs[0].Admissions
	if len(adm) != 2 || adm[0].Shards != "A, B" || adm[0].EvictionReason != "Preempted" || adm[1].Shards != "C, D" {
		t.Fatalf("admissions = %+v", adm)
	}
	for _, want := range []string{
		"ClusterQueue ml-team-gpu on main=nvidia.com/gpu:h100, admission first observed at 2026-11-29T09:00:00Z, evicted at 2026-11-29T09:10:00Z (Preempted); indexes 0,1 completed under it (shards A, B)",
		"ClusterQueue ml-team-gpu on main=nvidia.com/gpu:a100, admission first observed at 2026-11-29T09:20:00Z; indexes 2,3 completed under it (shards C, D)",
	} {
		if !slices.ContainsFunc(adm, func(a AdmissionExplanation) bool { return a.Summary == want }) {
			t.Errorf("no admission reads %q: %+v", want, adm)
		}
	}
	if got := ranOn(&ba.Status.Targets[0], 0); got != "ml-team-gpu on main=nvidia.com/gpu:h100" {
		t.Errorf("shard A ran on %q", got)
	}
	if got := ranOn(&ba.Status.Targets[0], 3); got != "ml-team-gpu on main=nvidia.com/gpu:a100" {
		t.Errorf("shard D ran on %q", got)
	}
}

// TestExplainWorkerClusters: a Job MultiKueue dispatched to worker-a, evicted there after
// indexes 0 and 1 completed, and dispatched to worker-b: explain names the worker of each
// admission, of each shard (RanOn) and of the Workload.
func TestExplainWorkerClusters(t *testing.T) {
	ba := clitest.IJ245Account()
	wl := func(cluster string, admitted, evicted bool, nominated ...string) *v1alpha1.WorkloadObservation {
		w := clitest.WorkloadObs(false)
		w.Flavors, w.Admitted, w.Evicted = []string{"main=nvidia.com/gpu:h100"}, admitted, evicted
		w.Cluster, w.NominatedClusters = cluster, nominated
		return w
	}
	steps := []struct {
		completed string
		w         *v1alpha1.WorkloadObservation
	}{
		{"0,1", wl("worker-a", true, false)},
		{"0,1", wl("", false, true, "worker-a", "worker-b")},
		{"0-3", wl("worker-b", true, false)},
	}
	var ex Explanation
	for i, st := range steps {
		done, _ := indexset.Parse(st.completed)
		j := clitest.SeedJob("j", clitest.JobUID, 4).Completed(st.completed, int32(done.Count())).ResourceVersion("1").Obj()
		ba = clitest.Compute(ba, clitest.Time0.Add(time.Duration(i)*10*time.Minute), map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: st.w}})
		ex = BuildExplanation(ba, nil, 0)
		if i == 1 {
			if got, want := ex.Jobs[0].Workload.Summary, "evicted (completed indexes are kept; the Job resumes when re-admitted) to ClusterQueue ml-team-gpu on main=nvidia.com/gpu:h100, being dispatched by MultiKueue to worker-a, worker-b"; got != want {
				t.Errorf("Workload while dispatching reads %q, want %q", got, want)
			}
		}
	}
	adm := ex.Jobs[0].Admissions
	if len(adm) != 2 || adm[0].Cluster != "worker-a" || adm[1].Cluster != "worker-b" {
		t.Fatalf("admissions = %+v", adm)
	}
	if !strings.HasPrefix(adm[0].Summary, "ClusterQueue ml-team-gpu on main=nvidia.com/gpu:h100, in worker cluster worker-a, admission first observed") {
		t.Errorf("first admission reads %q", adm[0].Summary)
	}
	for index, want := range map[int]string{0: "worker-a", 3: "worker-b"} {
		if got := ranOn(&ba.Status.Targets[0], index); got != "ml-team-gpu on main=nvidia.com/gpu:h100, in worker cluster "+want {
			t.Errorf("index %d ran on %q, want in %s", index, got, want)
		}
	}
	if w := ex.Jobs[0].Workload; w.Cluster != "worker-b" || !strings.HasSuffix(w.Summary, ", in MultiKueue worker cluster worker-b") {
		t.Errorf("Workload = %+v, want it in worker-b", w)
	}
}

// TestStillNeededLostResultsOfChildren: a covered shard whose result can no longer
// arrive is re-run by `repair` only for a plain Job target; repair refuses JobSet and
// TrainJob children, so the explanation must not send their owners there.
func TestStillNeededLostResultsOfChildren(t *testing.T) {
	cases := map[string]struct {
		assign     func(*wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper
		key, job   string
		wantRepair bool
		want       string
	}{
		"plain Job": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignJobOrdinals("train-workers-0", "0-1", "0-1")
			},
			key: "job/train-workers-0", wantRepair: true, want: "Run `kubectl batchledger repair train -n ml-team`",
		},
		"JobSet child": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignJobSet("train", "workers", 0, "0-1", "0-1")
			},
			key: "jobset/train/workers/0", want: "append a repair assignment to spec.repairs by hand",
		},
		"TrainJob child": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignTrainJob("train", "workers", 0, "0-1", "0-1")
			},
			key: "trainjob/train/workers/0", want: "append a repair assignment to spec.repairs by hand",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := tc.assign(wrappers.MakeBatchAccount("train", clitest.Namespace).ShardCount("s", 2)).
				RequireResults(clitest.SeedRule).Generation(1).Obj()
			j := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0-1", 2).ResourceVersion("9").Complete(clitest.CompleteT.Time).Obj()
			ba = clitest.Compute(ba, clitest.CompleteT.Time, map[string]account.Observation{tc.key: {Job: jobkind.Facts(j), PodsListed: true}})
			if c := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted); c == nil || c.Reason != v1alpha1.ReasonMissingResult {
				t.Fatalf("fixture: ResultsAccepted %+v, want MissingResult", c)
			}
			needed := strings.Join(BuildExplanation(ba, nil, 0).StillNeeded, "\n")
			if !strings.Contains(needed, tc.want) {
				t.Errorf("still needed lacks %q:\n%s", tc.want, needed)
			}
			if got := strings.Contains(needed, "Run `kubectl batchledger repair"); got != tc.wantRepair {
				t.Errorf("advises `repair`: %v, want %v:\n%s", got, tc.wantRepair, needed)
			}
		})
	}
}

// TestStillNeededChildrenByOwner: the shards of a JobSet child and of a TrainJob node that
// can no longer be covered or accepted are re-run by their owner, each its own way, as
// `kubectl batchledger repair` says when it refuses them: a JobSet restarts its children,
// a TrainJob is re-submitted. The advice for one must not speak of the other.
func TestStillNeededChildrenByOwner(t *testing.T) {
	jobSet := func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
		return w.AssignJobSet("train", "node", 0, "0-1", "0-1")
	}
	trainJob := func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
		return w.AssignTrainJob("train", "node", 0, "0-1", "0-1")
	}
	// The child failed after covering shard s0 only, and its owner ended.
	failed := clitest.SeedJob("train-node-0", "uid-n0", 2).Completed("0", 1).ResourceVersion("9").
		Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
	// The child completed both shards, and no result can arrive any more.
	complete := clitest.SeedJob("train-node-0", "uid-n0", 2).Completed("0-1", 2).ResourceVersion("9").Complete(clitest.CompleteT.Time).Obj()
	cases := map[string]struct {
		assign  func(*wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper
		key     string
		job     *batchv1.Job
		results bool
		stale   bool
		running bool
		want    string
		mustNot string
	}{
		"JobSet child lost a shard": {assign: jobSet, key: "jobset/train/node/0", job: failed,
			want: "`kubectl batchledger repair` does not re-run JobSet children: a JobSet that ended recreates no child: append a repair assignment to spec.repairs by hand.", mustNot: "TrainJob"},
		// While its JobSet runs, its failure policy may restart the child (Terminated
		// AwaitingTermination).
		"JobSet child lost a shard, its JobSet runs": {assign: jobSet, key: "jobset/train/node/0", job: failed, running: true,
			want: "`kubectl batchledger repair` does not re-run JobSet children: a JobSet restart re-runs its children under new identities; otherwise append", mustNot: "TrainJob"},
		"TrainJob node lost a shard": {assign: trainJob, key: "trainjob/train/node/0", job: failed,
			want: "`kubectl batchledger repair` does not re-run TrainJob children: re-submit the TrainJob", mustNot: "JobSet restart"},
		"JobSet child lost its results": {assign: jobSet, key: "jobset/train/node/0", job: complete, results: true,
			want: "Some are assigned to JobSet children, which `kubectl batchledger repair` does not re-run: a JobSet that ended recreates no child: append", mustNot: "TrainJob"},
		"TrainJob node lost its results": {assign: trainJob, key: "trainjob/train/node/0", job: complete, results: true,
			want: "Some are assigned to TrainJob children, which `kubectl batchledger repair` does not re-run: re-submit the TrainJob", mustNot: "JobSet restart"},
		// repair refuses children whatever the generation the status judges.
		"TrainJob node lost its results, spec changed since": {assign: trainJob, key: "trainjob/train/node/0", job: complete, results: true, stale: true,
			want: "Some are assigned to TrainJob children, which `kubectl batchledger repair` does not re-run: re-submit the TrainJob", mustNot: "can re-run them"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := tc.assign(wrappers.MakeBatchAccount("train", clitest.Namespace).ShardCount("s", 2)).Generation(1)
			if tc.results {
				w = w.RequireResults(clitest.SeedRule)
			}
			obs := account.Observation{Job: jobkind.Facts(tc.job), PodsListed: true, OwnerEnded: "Failed"}
			if tc.running {
				obs.ChildOwner, obs.OwnerEnded = account.OwnerRunning, ""
			}
			ba := clitest.Compute(w.Obj(), clitest.CompleteT.Time, map[string]account.Observation{tc.key: obs})
			if tc.stale {
				ba.Generation++
			}
			needed := strings.Join(BuildExplanation(ba, nil, 0).StillNeeded, "\n")
			if !strings.Contains(needed, tc.want) {
				t.Errorf("still needed lacks %q:\n%s", tc.want, needed)
			}
			if strings.Contains(needed, tc.mustNot) {
				t.Errorf("still needed speaks of %q:\n%s", tc.mustNot, needed)
			}
		})
	}
}

// TestStillNeededChildBesideALostJob: Terminated names a Job deleted before it terminated
// first (TargetDeleted), and a JobSet child it awaits after it: while the JobSet runs,
// the advice for the child's shard is the JobSet's restart, not that it ended.
func TestStillNeededChildBesideALostJob(t *testing.T) {
	w := wrappers.MakeBatchAccount("train", clitest.Namespace).ShardCount("s", 4).Generation(1).
		AssignJobOrdinals("j", "0-1", "0-1").AssignJobSet("train", "node", 0, "0-1", "2-3").Obj()
	j := jobkind.Facts(clitest.SeedJob("j", "uid-j", 2).Completed("0", 1).ResourceVersion("9").Obj())
	child := account.Observation{Job: jobkind.Facts(clitest.SeedJob("train-node-0", "uid-n0", 2).Completed("0", 1).ResourceVersion("9").
		Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()), ChildOwner: account.OwnerRunning}
	ba := clitest.Compute(w, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: j}, "jobset/train/node/0": child})
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {DeletedJob: j}, "jobset/train/node/0": child})
	needed := strings.Join(BuildExplanation(ba, nil, 0).StillNeeded, "\n")
	if want := "a JobSet restart re-runs its children under new identities"; !strings.Contains(needed, want) {
		t.Errorf("still needed lacks %q:\n%s", want, needed)
	}
}

// TestStillNeededAbsentTargets: a shard assigned to a Job that does not exist waits for it
// to be created. A JobSet or TrainJob child counts only when its owner creates it (a Job
// created by hand under its name is no child), so the advice names the owner to create,
// not the child.
func TestStillNeededAbsentTargets(t *testing.T) {
	cases := map[string]struct {
		assign  func(*wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper
		want    string
		mustNot string
	}{
		"plain Job": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignJobOrdinals("j", "0-1", "0-1")
			},
			want: "shards s0, s1 are assigned to job j index 0, job j index 1, which does not exist: create it.",
		},
		"JobSet child": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignJobSet("train", "node", 0, "0-1", "0-1")
			},
			want:    "which does not exist: a child Job is created by its owner, JobSet train: create it or, if it exists, wait for it.",
			mustNot: "create it.",
		},
		"TrainJob node": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignTrainJob("llm", "node", 0, "0-1", "0-1")
			},
			want:    "which does not exist: a child Job is created by its owner, TrainJob llm: create it or, if it exists, wait for it.",
			mustNot: "create it.",
		},
		"plain Job and JobSet child": {
			assign: func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignJobOrdinals("j", "0", "0").AssignJobSet("train", "node", 0, "0", "1")
			},
			want: "which does not exist: create it; a child Job is created by its owner, JobSet train: create it or, if it exists, wait for it.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := tc.assign(wrappers.MakeBatchAccount("acct", clitest.Namespace).ShardCount("s", 2)).Generation(1).Obj()
			ba = clitest.Compute(ba, clitest.Time0, nil)
			needed := strings.Join(BuildExplanation(ba, nil, 0).StillNeeded, "\n")
			if !strings.Contains(needed, tc.want) {
				t.Errorf("still needed lacks %q:\n%s", tc.want, needed)
			}
			if tc.mustNot != "" && strings.Contains(strings.ReplaceAll(needed, tc.want, ""), tc.mustNot) {
				t.Errorf("still needed says %q:\n%s", tc.mustNot, needed)
			}
		})
	}
}

// TestChildOwnerAdvice: every kind of child target the API declares
// (v1alpha1.ChildTargetKinds) has its owner's name and remedy here, which explain and
// repair both give, and is listed in the API's order; a kind the table does not know
// gets generic advice, never a wrong owner.
func TestChildOwnerAdvice(t *testing.T) {
	for _, tc := range []struct {
		kinds      []string
		ended      bool
		wantNames  string
		wantRemedy string
	}{
		{kinds: []string{v1alpha1.TargetKindJobSet}, wantNames: "JobSet",
			wantRemedy: "a JobSet restart re-runs its children under new identities; otherwise append a repair assignment to spec.repairs by hand"},
		{kinds: []string{v1alpha1.TargetKindJobSet}, ended: true, wantNames: "JobSet",
			wantRemedy: "a JobSet that ended recreates no child: append a repair assignment to spec.repairs by hand"},
		{kinds: []string{v1alpha1.TargetKindTrainJob, v1alpha1.TargetKindJobSet}, ended: true, wantNames: "JobSet or TrainJob",
			wantRemedy: "re-submit the TrainJob (its nodes are the ranks of one training run, not independent work) (a JobSet that ended recreates no child); otherwise append"},
		{kinds: []string{"raycluster"}, wantNames: "raycluster", wantRemedy: "its owner may re-run a raycluster child; otherwise append"},
	} {
		kinds := sortedKinds(slices.Clone(tc.kinds))
		if got := ownerNames(kinds); got != tc.wantNames {
			t.Errorf("ownerNames(%v) = %q, want %q", tc.kinds, got, tc.wantNames)
		}
		if got := OwnerRemedy(kinds, tc.ended); !strings.HasPrefix(got, tc.wantRemedy) {
			t.Errorf("OwnerRemedy(%v, %v) = %q, want it to start %q", tc.kinds, tc.ended, got, tc.wantRemedy)
		}
	}
	api := v1alpha1.ChildTargetKinds()
	for _, k := range api {
		if _, ok := childOwners[k]; !ok {
			t.Errorf("child target kind %q has no advice in childOwners", k)
		}
	}
	reversed := slices.Clone(api)
	slices.Reverse(reversed)
	if got := sortedKinds(append(reversed, "other")); !slices.Equal(got, append(api, "other")) {
		t.Errorf("sortedKinds = %v, want the API's order %v, then the others", got, api)
	}
}

// TestExplainTruncatedResultOrdinals: status.results lists only the lowest missing and
// rejected ordinals when OrdinalsTruncated, while results.missing stays the whole count.
// The shards explain names must not pass for all of them: "+N more" counts from the
// whole, and a rejected list the status may have cut says so.
func TestExplainTruncatedResultOrdinals(t *testing.T) {
	evens := func(n int) string {
		var o []int
		for i := range n {
			o = append(o, 2*i)
		}
		return indexset.Of(o...).String()
	}
	cases := []struct {
		name                 string
		missing              int32
		missingOrds, rejOrds string
		truncated            bool
		wantMissing, wantRej string
	}{
		{
			name: "missing list truncated: the whole count", missing: 40, missingOrds: evens(10), truncated: true,
			wantMissing: "s0, s2, s4, s6, s8, s10, s12, s14, … (+32 more)",
		},
		{
			name: "rejected list truncated: said so", missing: 0, rejOrds: evens(10), truncated: true,
			wantRej: "s0, s2, s4, s6, s8, s10, s12, s14, … (+2 more, and more the status does not list)",
		},
		{
			name: "whole lists, as before", missing: 10, missingOrds: evens(10), rejOrds: "1,3",
			wantMissing: "s0, s2, s4, s6, s8, s10, s12, s14, … (+2 more)", wantRej: "s1, s3",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("train", clitest.Namespace).ShardCount("s", 100).
				AssignJobOrdinals("train-workers-0", "0-99", "0-99").RequireResults(clitest.SeedRule).Generation(1).Obj()
			j := clitest.SeedJob("train-workers-0", "uid-w0", 100).Completed("0-99", 100).ResourceVersion("9").Complete(clitest.CompleteT.Time).Obj()
			ba = clitest.Compute(ba, clitest.CompleteT.Time, map[string]account.Observation{"job/train-workers-0": {Job: jobkind.Facts(j), PodsListed: true}})
			ba.Status.Results.Missing, ba.Status.Results.MissingOrdinals = tc.missing, tc.missingOrds
			ba.Status.Results.RejectedOrdinals, ba.Status.Results.OrdinalsTruncated = tc.rejOrds, tc.truncated
			r := BuildExplanation(ba, nil, 0).Results
			if r.MissingShards != tc.wantMissing || r.RejectedShards != tc.wantRej {
				t.Errorf("missing shards %q rejected shards %q, want %q and %q", r.MissingShards, r.RejectedShards, tc.wantMissing, tc.wantRej)
			}
		})
	}
}
