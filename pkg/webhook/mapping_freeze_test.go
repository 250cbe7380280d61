package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestMappingFreezeSeesJobsTheCacheDoesNotHold: a Job created before the account that
// names it carries no scope label, so the manager's cache does not hold it until the
// account's first reconcile labels it. Its pods were told no shard by the webhook, but
// they run, and once the account's reconcile labels the Job the status freezes the
// mapping: a mapping rewritten in between is judged against a running Job. The webhook
// reads Jobs from the API server (relations.JobsFrom), so it refuses the change at once;
// with the cache alone (the reference case) it is admitted.
// A Job the cache holds is read live too: the cache's copy may still show it suspended
// after it started.
func TestMappingFreezeSeesJobsTheCacheDoesNotHold(t *testing.T) {
	// The JobSet has the child's replicatedJob: a child of one it lacks is followed by no
	// target (jobset.Lacks), so nothing of it would freeze the mapping.
	js := wrappers.MakeJobSet("train", "ml").ReplicatedJob(jobsetapi.ReplicatedJob{Name: "workers", Replicas: 1}).Obj()
	js.UID = "js-uid"
	running := wrappers.MakeJob("j", "ml").Indexed(4).Suspend(false).Obj()
	suspended := wrappers.MakeJob("j", "ml").Indexed(4).Suspend(true).Obj()
	child := wrappers.MakeJob("train-workers-0", "ml").Indexed(4).Suspend(false).JobSetChild(js, "workers", 0, 0).Obj()
	// A Job of another name carrying the child's labels (copied from it, say), labelled
	// with a scope and so in the cache: it is no child, yet a list by the child's labels
	// finds it there.
	lookalike := wrappers.MakeJob("train-workers-0-copy", "ml").Indexed(4).Suspend(true).JobSetChild(js, "workers", 0, 0).
		Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()
	byJob := wrappers.MakeBatchAccount("acct", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj()
	byJobSet := wrappers.MakeBatchAccount("acct", "ml").ShardCount("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").Obj()
	cases := []struct {
		name       string
		account    *v1alpha1.BatchAccount
		cache, api []client.Object
		cacheOnly  bool
		want       string // "" means admitted
	}{
		{name: "a running Job only the API server holds", account: byJob, api: []client.Object{running}, want: "job/j runs"},
		{name: "the same read from the cache alone", account: byJob, api: []client.Object{running}, cacheOnly: true},
		{name: "a suspended Job only the API server holds", account: byJob, api: []client.Object{suspended}},
		{name: "a running Job the cache still holds suspended", account: byJob, cache: []client.Object{suspended}, api: []client.Object{running},
			want: "job/j runs"},
		{name: "a running JobSet child only the API server holds", account: byJobSet, cache: []client.Object{js}, api: []client.Object{js, child},
			want: "runs"},
		{name: "a running JobSet child only the API server holds, the cache holding a Job of its labels", account: byJobSet,
			cache: []client.Object{js, lookalike}, api: []client.Object{js, lookalike, child}, want: "runs"},
		{name: "no Job at all", account: byJob},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache, api := fakeReader(t, tc.cache...), fakeReader(t, tc.api...)
			jobs := relations.JobsFrom(api, cache)
			if tc.cacheOnly {
				jobs = cache
			}
			old := tc.account.DeepCopy()
			ba := old.DeepCopy()
			ba.Spec.InputRevision = "in-2"
			_, err := BatchAccountValidator{Jobs: jobs}.ValidateUpdate(t.Context(), old, ba)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// fakeReader is a fake client holding objs.
func fakeReader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// TestRepairFreezeSeesRunningRepairJobs: a repair's Job tells its pods their shards at
// creation, as any target's does, up to --waiting-status-delay before the account's
// status shows it started. Once work was done under the account, a repair may be taken
// out (or rewritten) only while no work was done under its Job: the status alone lags,
// so a repair entry whose Job runs was taken out and appended again onto another shard,
// and the repair Job's completed index then covered a shard its pod was never told.
// The webhook reads the repair's Job as it reads the other targets' (runningTarget).
func TestRepairFreezeSeesRunningRepairJobs(t *testing.T) {
	repaired := func() *v1alpha1.BatchAccount {
		ba := wrappers.MakeBatchAccount("acct", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").
			SpecRepair("j-repair", "0", "D").Obj()
		// Work under job/j; the repair's Job is not in the status yet.
		ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/j", Job: "j", UID: "uid-j", Found: true, CompletedIndexes: "0-2"}}
		return ba
	}
	running := wrappers.MakeJob("j-repair", "ml").Indexed(1).Suspend(false).Obj()
	suspended := wrappers.MakeJob("j-repair", "ml").Indexed(1).Suspend(true).Obj()
	remap := func(ba *v1alpha1.BatchAccount) { ba.Spec.Repairs[0].Shards = []string{"C"} }
	drop := func(ba *v1alpha1.BatchAccount) { ba.Spec.Repairs = nil }
	appendC := func(ba *v1alpha1.BatchAccount) {
		ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-2"}, Indexes: "0", Shards: []string{"C"}})
	}
	cases := []struct {
		name   string
		mutate func(*v1alpha1.BatchAccount)
		api    []client.Object
		// unreadable: every read of a Job fails.
		unreadable bool
		want       string // "" means admitted
	}{
		{name: "rewrite a repair whose Job runs", mutate: remap, api: []client.Object{running}, want: "repairs are immutable once work was done"},
		{name: "take out a repair whose Job runs", mutate: drop, api: []client.Object{running}, want: "repairs are immutable once work was done"},
		{name: "take out a repair whose Job is still suspended", mutate: drop, api: []client.Object{suspended}},
		{name: "take out a repair whose Job was never created", mutate: drop},
		{name: "append a repair while another's Job runs", mutate: appendC, api: []client.Object{running}},
		// An append takes nothing out: it reads no Job, so a failed read refuses nothing.
		{name: "append a repair while Jobs cannot be read", mutate: appendC, unreadable: true},
		{name: "take out a repair while Jobs cannot be read", mutate: drop, unreadable: true, want: "reading its repairs' Jobs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := repaired()
			ba := old.DeepCopy()
			tc.mutate(ba)
			jobs := fakeReader(t, tc.api...)
			if tc.unreadable {
				jobs = unreadable(t)
			}
			_, err := BatchAccountValidator{Jobs: jobs}.ValidateUpdate(t.Context(), old, ba)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// unreadable is a reader whose every read fails, as an API server that does not answer.
func unreadable(t *testing.T) client.Reader {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("the API server does not answer")
	}
	return fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{Get: fail}).Build()
}

// TestMappingFreezeSeesJobsSuspendedAfterTheyRan: Kueue preempts a Job by suspending it
// again, and the Job controller then clears its startTime; what its pods did stays in its
// status (completed and failed indexes, succeeded and failed counts) and its pods may
// still be stopping (terminating, and they may yet exit 0). Such a Job ran: its pods
// were told their shards under the mapping, and an index it completed covers the shard
// it was told. Preempted before the account's status showed it running, it must still
// freeze the mapping, else a completed index covers a shard its pod never processed.
func TestMappingFreezeSeesJobsSuspendedAfterTheyRan(t *testing.T) {
	preempted := func() *wrappers.JobWrapper { return wrappers.MakeJob("j", "ml").Indexed(4).Suspend(true) }
	cases := []struct {
		name string
		job  *wrappers.JobWrapper
		want string // "" means admitted
	}{
		{name: "suspended, never run", job: preempted()},
		{name: "preempted with an index completed", job: preempted().Completed("0", 1), want: "job/j runs"},
		{name: "preempted with an index failed", job: preempted().FailedIndexes("1"), want: "job/j runs"},
		{name: "preempted after a pod failed", job: func() *wrappers.JobWrapper { w := preempted(); w.Status.Failed = 1; return w }(),
			want: "job/j runs"},
		{name: "preempted, its pods still stopping", job: func() *wrappers.JobWrapper { w := preempted(); w.Status.Terminating = ptr.To[int32](2); return w }(),
			want: "job/j runs"},
		{name: "preempted, a success not counted yet", job: func() *wrappers.JobWrapper {
			w := preempted()
			w.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod-0"}}
			return w
		}(), want: "job/j runs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := wrappers.MakeBatchAccount("acct", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj()
			ba := old.DeepCopy()
			ba.Spec.Assignments[0].Shards = []string{"D", "C", "B", "A"}
			_, err := BatchAccountValidator{Jobs: fakeReader(t, tc.job.Obj())}.ValidateUpdate(t.Context(), old, ba)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestMappingFreezeSeesDispatchedOwnersThatRan: MultiKueue runs a dispatched JobSet's
// (or TrainJob's) children on a worker cluster, so none is on the manager and no Job of
// the target's is read here; until a worker's record of a child is read the account's
// status shows no work either. Kueue unsuspends the manager's owner when it admits it,
// and MultiKueue copies the worker's status back onto it: an owner that is not suspended,
// or whose status shows children that ran, a restart or its end, runs or ran, and freezes
// the mapping. An owner not dispatched is judged by its children alone, as before.
func TestMappingFreezeSeesDispatchedOwnersThatRan(t *testing.T) {
	jobSet := func(dispatched, suspend bool) *jobsetapi.JobSet {
		js := wrappers.MakeJobSet("train", "ml").Suspend(suspend).Obj()
		if dispatched {
			js.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
		}
		return js
	}
	with := func(js *jobsetapi.JobSet, edit func(*jobsetapi.JobSetStatus)) *jobsetapi.JobSet {
		edit(&js.Status)
		return js
	}
	trainJob := func(dispatched, suspend bool, edit func(*trainer.TrainJobStatus)) *trainer.TrainJob {
		tj := wrappers.MakeTrainJob("llm", "ml", "torch").Suspend(suspend).Obj()
		if dispatched {
			tj.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
		}
		if edit != nil {
			edit(&tj.Status)
		}
		return tj
	}
	byJobSet := wrappers.MakeBatchAccount("acct", "ml").ShardCount("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").Obj()
	byTrainJob := wrappers.MakeBatchAccount("acct", "ml").ShardCount("s", 4).AssignTrainJob("llm", "node", 0, "0-3", "0-3").Obj()
	cases := []struct {
		name    string
		account *v1alpha1.BatchAccount
		owner   client.Object
		want    string // "" means admitted
	}{
		{name: "a dispatched JobSet not admitted yet", account: byJobSet, owner: jobSet(true, true)},
		{name: "a dispatched JobSet Kueue admitted", account: byJobSet, owner: jobSet(true, false), want: "jobset/train/workers/0 runs"},
		{name: "a dispatched JobSet preempted after its children ran", account: byJobSet,
			owner: with(jobSet(true, true), func(s *jobsetapi.JobSetStatus) {
				s.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{{Name: "workers", Succeeded: 1}}
			}), want: "runs"},
		{name: "a dispatched JobSet preempted after a restart", account: byJobSet,
			owner: with(jobSet(true, true), func(s *jobsetapi.JobSetStatus) { s.Restarts = 1 }), want: "runs"},
		{name: "a dispatched JobSet whose children are suspended", account: byJobSet,
			owner: with(jobSet(true, true), func(s *jobsetapi.JobSetStatus) {
				s.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{{Name: "workers", Suspended: 1}}
			})},
		{name: "a JobSet not dispatched, unsuspended, no child yet", account: byJobSet, owner: jobSet(false, false)},
		{name: "a dispatched TrainJob not admitted yet", account: byTrainJob, owner: trainJob(true, true, nil)},
		{name: "a dispatched TrainJob Kueue admitted", account: byTrainJob, owner: trainJob(true, false, nil), want: "trainjob/llm/node/0 runs"},
		{name: "a dispatched TrainJob preempted with a child active", account: byTrainJob,
			owner: trainJob(true, true, func(s *trainer.TrainJobStatus) {
				s.JobsStatus = []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1)}}
			}), want: "runs"},
		{name: "a TrainJob not dispatched, unsuspended, no JobSet yet", account: byTrainJob, owner: trainJob(false, false, nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.account.DeepCopy()
			ba := old.DeepCopy()
			ba.Spec.InputRevision = "in-2"
			_, err := BatchAccountValidator{Jobs: fakeReader(t, tc.owner)}.ValidateUpdate(t.Context(), old, ba)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
