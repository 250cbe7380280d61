package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/worker"
)

// queuedTemplate is the template Kueue recorded in the Workload before admission.
func queuedTemplate(j *batchv1.Job) *corev1.PodTemplateSpec {
	t := j.Spec.Template.DeepCopy()
	t.Spec.NodeSelector = nil
	delete(t.Labels, batchv1.ControllerUidLabel)
	delete(t.Labels, "controller-uid")
	return t
}

func TestPlanRepairIJ245(t *testing.T) {
	j := clitest.FailedJob()
	plan, err := NewPlan(Input{
		Account:         clitest.FailedAccount(),
		Jobs:            clitest.JobsByName(j),
		QueuedTemplates: map[string]*corev1.PodTemplateSpec{"j": queuedTemplate(j)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Repairs) != 1 || plan.Waiting != "" {
		t.Fatalf("plan = %+v", plan)
	}
	r := plan.Repairs[0]
	wantA := v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}}
	if !equalAssignment(r.Assignment, wantA) {
		t.Errorf("assignment = %+v, want %+v", r.Assignment, wantA)
	}
	if r.Why != "job j index 3: job j Failed (BackoffLimitExceeded) without completing it" || r.Shards != "D" || r.Count != 1 || !r.Queued {
		t.Errorf("repair = %+v", r)
	}
	job := r.Job
	s := job.Spec
	if job.Name != "j-repair-1" || job.Namespace != ns || *s.Completions != 1 || *s.Parallelism != 1 ||
		*s.CompletionMode != batchv1.IndexedCompletion || !*s.Suspend || *s.BackoffLimit != 0 || s.Selector != nil || s.SuccessPolicy != nil {
		t.Errorf("repair Job spec = %+v", s)
	}
	if want := map[string]string{wrappers.QueueLabel: "default", wrappers.PriorityClassLabel: "batch-low"}; !maps.Equal(job.Labels, want) {
		t.Errorf("labels = %v, want %v", job.Labels, want)
	}
	if want := map[string]string{v1alpha1.AnnotationRepairFor: "ij245", v1alpha1.AnnotationRepairOf: "j", v1alpha1.AnnotationRepairShards: "D"}; !maps.Equal(job.Annotations, want) {
		t.Errorf("annotations = %v, want %v", job.Annotations, want)
	}
	if want := map[string]string{"app": "infer"}; !maps.Equal(s.Template.Labels, want) {
		t.Errorf("pod labels = %v, want the user's only (generated labels stripped)", s.Template.Labels)
	}
	if s.Template.Spec.NodeSelector != nil {
		t.Errorf("node selector %v: Kueue's injection must not pin the repair to the old flavor", s.Template.Spec.NodeSelector)
	}
	env := s.Template.Spec.Containers[0].Env
	if !slices.Contains(env, corev1.EnvVar{Name: EnvRepairOf, Value: "j"}) || !slices.Contains(env, corev1.EnvVar{Name: EnvOriginalIndexes, Value: "3"}) {
		t.Errorf("env = %v", env)
	}
	// The original is untouched.
	if j.Spec.Template.Labels[batchv1.JobNameLabel] != "j" || j.Spec.Template.Spec.Containers[0].Env != nil {
		t.Errorf("planning modified the original Job: %+v", j.Spec.Template)
	}
}

func equalAssignment(a, b v1alpha1.Assignment) bool {
	return a.Target == b.Target && a.Indexes == b.Indexes && slices.Equal(a.Shards, b.Shards) && a.ShardOrdinals == b.ShardOrdinals && a.Repair == b.Repair
}

// TestPlanRepairCompact: a compact population is repaired by ordinals, preserving order;
// the repair Job's index k stands for the k-th missing original index.
func TestPlanRepairCompact(t *testing.T) {
	ba := wrappers.MakeBatchAccount("big", ns).ShardCount("s", 8).AssignJobOrdinals("big", "0-7", "0-7").Generation(1).Obj()
	j := clitest.Admitted(clitest.SeedJob("big", "uid-big", 8).Completed("0-2,5", 4).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/big": {Job: jobkind.Facts(j)}})
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
	if err != nil {
		t.Fatal(err)
	}
	r := plan.Repairs[0]
	want := v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "big-repair-1"}, Indexes: "0-3", ShardOrdinals: "3,4,6,7"}
	if !equalAssignment(r.Assignment, want) || *r.Job.Spec.Completions != 4 || *r.Job.Spec.Parallelism != 4 || r.Shards != "s3, s4, s6, s7" {
		t.Errorf("repair = %+v %+v", r, r.Assignment)
	}
	if !slices.Contains(r.Job.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: EnvOriginalIndexes, Value: "3,4,6,7"}) {
		t.Errorf("env = %v", r.Job.Spec.Template.Spec.Containers[0].Env)
	}
	// Without a recorded Workload template, the Job's own template is copied as is.
	if r.Job.Spec.Template.Spec.NodeSelector["gpu-type"] != "h100" {
		t.Errorf("node selector = %v", r.Job.Spec.Template.Spec.NodeSelector)
	}
}

// TestPlanRepairOrderFollowsShards: an explicit mapping in reverse order repairs the
// missing shards in shard order, and the environment says which original index each
// repair index stands for.
func TestPlanRepairOrderFollowsShards(t *testing.T) {
	ba := wrappers.MakeBatchAccount("rev", ns).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "D", "C", "B", "A").Generation(1).Obj()
	j := clitest.Admitted(clitest.SeedJob("j", clitest.JobUID, 4).Completed("0,2", 2).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}})
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
	if err != nil {
		t.Fatal(err)
	}
	r := plan.Repairs[0]
	if !slices.Equal(r.Assignment.Shards, []string{"A", "C"}) ||
		!slices.Contains(r.Job.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: EnvOriginalIndexes, Value: "3,1"}) {
		t.Errorf("repair = %+v, env %v", r.Assignment, r.Job.Spec.Template.Spec.Containers[0].Env)
	}
}

// TestPlanRepairSeveralJobs: one repair Job per original Job with missing shards, each
// under the first free name; a Job still running is left alone and said so.
func TestPlanRepairSeveralJobs(t *testing.T) {
	ba := wrappers.MakeBatchAccount("cross", ns).Shards("A", "B", "C", "D", "E", "F").
		AssignJob("j", "0-1", "A", "B").AssignJob("k", "0-1", "C", "D").AssignJob("l", "0-1", "E", "F").Generation(1).Obj()
	j := clitest.Admitted(clitest.SeedJob("j", "uid-j", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
	k := clitest.Admitted(clitest.SeedJob("k", "uid-k", 2).Completed("1", 1).ResourceVersion("9").Obj())
	k.Spec.BackoffLimitPerIndex, k.Spec.MaxFailedIndexes = ptr.To(int32(1)), ptr.To(int32(2))
	k.Status.FailedIndexes = ptr.To("0") // index 0 failed for good; k still runs
	l := clitest.Admitted(clitest.SeedJob("l", "uid-l", 2).Completed("0", 1).ResourceVersion("9").Obj())
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}, "job/k": {Job: jobkind.Facts(k)}, "job/l": {Job: jobkind.Facts(l), Workload: clitest.WorkloadObs(false)}})
	taken := wrappers.MakeJob("j-repair-1", ns).Obj() // someone's unrelated Job
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j, k, l, taken)})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Repairs) != 2 {
		t.Fatalf("repairs = %+v", plan.Repairs)
	}
	rj, rk := plan.Repairs[0], plan.Repairs[1]
	if !equalAssignment(rj.Assignment, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-2"}, Indexes: "0", Shards: []string{"B"}}) ||
		!equalAssignment(rk.Assignment, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "k-repair-1"}, Indexes: "0", Shards: []string{"C"}}) {
		t.Errorf("assignments = %+v, %+v", rj.Assignment, rk.Assignment)
	}
	if rk.Why != "job k index 0: index failed" || *rk.Job.Spec.MaxFailedIndexes != 1 || *rk.Job.Spec.BackoffLimitPerIndex != 1 {
		t.Errorf("k's repair = %+v (maxFailedIndexes clamped to completions)", rk)
	}
	if want := "shard F still waits for job l index 1 (not completed yet; the Job is running)"; plan.Waiting != want {
		t.Errorf("waiting = %q, want %q", plan.Waiting, want)
	}
}

// TestPlanRepairAgain: a repair Job that failed too is repaired again from the original,
// under the next free name.
func TestPlanRepairAgain(t *testing.T) {
	ba := clitest.IJ245Account()
	ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}, Repair: true})
	j := clitest.FailedJob()
	r1 := clitest.Admitted(clitest.SeedJob("j-repair-1", "uid-r1", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}, "job/j-repair-1": {Job: jobkind.Facts(r1)}})
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j, r1)})
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Repairs[0].Assignment.Target.Job; got != "j-repair-2" || plan.Repairs[0].Original != "j" {
		t.Errorf("repair = %+v", plan.Repairs[0])
	}
}

// TestPlanRepairWhileItsJobIsBeingCreated: a repair assignment appended whose Job the
// account has not observed yet (repair names the Job before it creates it) is no identity
// lost: the shard waits for it, and no second repair is planned.
func TestPlanRepairWhileItsJobIsBeingCreated(t *testing.T) {
	ba := clitest.IJ245Account()
	ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}, Repair: true})
	j := clitest.FailedJob()
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}})
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
	if err == nil || !strings.Contains(err.Error(), "nothing to repair now: shard D still waits for") || !strings.Contains(err.Error(), "job j-repair-1 index 0 (Job not found)") {
		t.Errorf("plan %+v, error %v; want nothing planned while j-repair-1 is on its way", plan, err)
	}
}

// TestPlanRepairRefuses: each case repair must not act on, with a message naming why.
func TestPlanRepairRefuses(t *testing.T) {
	j := clitest.FailedJob()
	cases := []struct {
		name string
		in   func() Input
		want string
	}{
		{"nothing missing", func() Input {
			s := clitest.SeedSteps()
			return Input{Account: s.Steps[3], Jobs: clitest.JobsByName(s.Job)}
		}, `BatchAccount "ij245" in namespace "ml-team": nothing to repair: all 4 shards are covered`},
		{"shard still running", func() Input {
			s := clitest.SeedSteps()
			return Input{Account: s.Steps[0], Jobs: clitest.JobsByName(s.Job)}
		}, "nothing to repair now: shard D still waits for job j index 3 (not completed yet; the Job is running) to complete"},
		{"JobSet targets", func() Input {
			ba := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 4).
				AssignJobSet("train", "workers", 0, "0-1", "0-1").AssignJobSet("train", "workers", 1, "0-1", "2-3").Generation(1).Obj()
			w1 := clitest.SeedJob("train-workers-1", "uid-w1", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			w0 := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0-1", 2).ResourceVersion("9").Obj()
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"jobset/train/workers/0": {Job: jobkind.Facts(w0)}, "jobset/train/workers/1": {Job: jobkind.Facts(w1)}})
			return Input{Account: ba, Jobs: clitest.JobsByName(w0, w1)}
		}, "shard s3 assigned to JobSet children (jobset train workers[1] index 1 (job train-workers-1 Failed (BackoffLimitExceeded) without completing it)): repair creates follow-up Jobs for plain Job targets only"},
		{"TrainJob targets", func() Input {
			ba := wrappers.MakeBatchAccount("llm", ns).ShardCount("s", 2).AssignTrainJob("llm", "node", 0, "0-1", "0-1").Generation(1).Obj()
			n := clitest.SeedJob("llm-node-0", "uid-n", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"trainjob/llm/node/0": {Job: jobkind.Facts(n)}})
			return Input{Account: ba, Jobs: clitest.JobsByName(n)}
		}, "shard s1 assigned to TrainJob children (trainjob llm node[0] index 1 (job llm-node-0 Failed (BackoffLimitExceeded) without completing it)): repair creates follow-up Jobs for plain Job targets only; re-submit the TrainJob (its nodes are the ranks of one training run, not independent work); otherwise append"},
		{"JobSet targets name no TrainJob", func() Input {
			ba := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").Generation(1).Obj()
			w0 := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"jobset/train/workers/0": {Job: jobkind.Facts(w0)}})
			return Input{Account: ba, Jobs: clitest.JobsByName(w0)}
		}, "repair creates follow-up Jobs for plain Job targets only; a JobSet that ended recreates no child: append a repair assignment to spec.repairs by hand"},
		{"JobSet targets while the JobSet runs", func() Input {
			ba := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").Generation(1).Obj()
			w0 := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"jobset/train/workers/0": {Job: jobkind.Facts(w0), ChildOwner: account.OwnerRunning}})
			return Input{Account: ba, Jobs: clitest.JobsByName(w0)}
		}, "repair creates follow-up Jobs for plain Job targets only; a JobSet restart re-runs its children under new identities; otherwise append a repair assignment to spec.repairs by hand"},
		{"a JobSet child while the JobSet runs, beside a Job deleted before it terminated", func() Input {
			// Terminated names the deleted Job first (TargetDeleted), the awaited child after.
			ba := wrappers.MakeBatchAccount("mixed", ns).ShardCount("s", 4).AssignJobOrdinals("j", "0-1", "0-1").
				AssignJobSet("train", "workers", 0, "0-1", "2-3").Generation(1).Obj()
			pj := clitest.SeedJob("j", "uid-j", 2).Completed("0", 1).ResourceVersion("9").Obj()
			w0 := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(pj)}, "jobset/train/workers/0": {Job: jobkind.Facts(w0), ChildOwner: account.OwnerRunning}})
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {DeletedJob: jobkind.Facts(pj)}, "jobset/train/workers/0": {Job: jobkind.Facts(w0), ChildOwner: account.OwnerRunning}})
			return Input{Account: ba, Jobs: clitest.JobsByName(w0)}
		}, "a JobSet restart re-runs its children under new identities"},
		{"plain Job and JobSet targets", func() Input {
			ba := wrappers.MakeBatchAccount("mixed", ns).ShardCount("s", 4).AssignJobOrdinals("j", "0-1", "0-1").
				AssignJobSet("train", "workers", 0, "0-1", "2-3").Generation(1).Obj()
			pj := clitest.SeedJob("j", "uid-j", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			w0 := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0", 1).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(pj)}, "jobset/train/workers/0": {Job: jobkind.Facts(w0)}})
			return Input{Account: ba, Jobs: clitest.JobsByName(pj, w0)}
		}, "by hand; nothing was created, for shard s1 of plain Jobs neither: run repair again once no child's shard is left to re-run"},
		{"invalid mapping", func() Input {
			ba := clitest.FailedAccount()
			ba.Spec.Assignments[0].Shards = []string{"A", "A", "A", "A"}
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}})
			return Input{Account: ba, Jobs: clitest.JobsByName(j)}
		}, "AssignmentValid is False (DuplicateShard): shard A is assigned twice"},
		{"stale status", func() Input {
			ba := clitest.FailedAccount()
			ba.Generation = 2
			return Input{Account: ba, Jobs: clitest.JobsByName(j)}
		}, "the status describes spec generation 1 but the spec is at generation 2"},
		{"stale status of an invalid mapping, fixed since", func() Input {
			ba := clitest.FailedAccount()
			ba.Spec.Assignments[0].Shards = []string{"A", "A", "A", "A"}
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}})
			ba.Spec.Assignments[0].Shards = []string{"A", "B", "C", "D"}
			ba.Generation = 2
			return Input{Account: ba, Jobs: clitest.JobsByName(j)}
		}, "the status describes spec generation 1 but the spec is at generation 2"},
		{"missing shards truncated", func() Input {
			ba := clitest.FailedAccount()
			ba.Status.Shards.MissingOrdinalsTruncated = true
			return Input{Account: ba, Jobs: clitest.JobsByName(j)}
		}, "1 shards are missing, more than the status can list (it names only the lowest); repair needs the whole list"},
		{"results truncated", func() Input {
			ba := clitest.FailedAccount()
			ba.Status.Results.OrdinalsTruncated = true
			return Input{Account: ba, Jobs: clitest.JobsByName(j)}
		}, "more shards lack an acceptable result than the status can list (it names only the lowest); repair needs the whole list"},
		{"no status", func() Input { return Input{Account: clitest.IJ245Account()} }, "has no status yet"},
		{"original Job gone", func() Input { return Input{Account: clitest.FailedAccount(), Jobs: clitest.JobsByName()} },
			`Job "j" not found in namespace "ml-team": a repair Job copies its pod template (shards D were assigned to it)`},
		{"original Job recreated", func() Input {
			again := clitest.FailedJob()
			again.UID = "uid-new"
			return Input{Account: clitest.FailedAccount(), Jobs: clitest.JobsByName(again)}
		}, `Job "j" (uid uid-new) is not the identity the account observed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := NewPlan(tc.in())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("plan %+v, err %v; want an error containing %q", plan, err, tc.want)
			}
		})
	}
}

// repairCluster serves the failed IJ245 with Job j and its Workload (with the queued template).
func repairCluster(funcs interceptor.Funcs) client.WithWatch {
	j := clitest.FailedJob()
	wl := clitest.WorkloadOf(j)
	wl.Spec.PodSets = []kueue.PodSet{{Name: "main", Count: 4, Template: *queuedTemplate(j)}}
	return interceptor.NewClient(clitest.FakeClient(clitest.FailedAccount(), j, wl), funcs)
}

// TestRepairDryRun: a client dry run (--dry-run, --dry-run=client, the old
// --dry-run=true) prints the Job and the spec.repairs entry and sends no request that
// changes anything.
func TestRepairDryRun(t *testing.T) {
	for _, flag := range []string{"--dry-run", "--dry-run=client", "--dry-run=true"} {
		t.Run(flag, func(t *testing.T) {
			c := repairCluster(interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
					return errors.New("a client dry run sent a create")
				},
				Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					return errors.New("a client dry run sent a patch")
				},
			})
			out, errOut, code := run(t, c, "repair", "ij245", "-n", ns, flag)
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			clitest.Golden(t, "repair_dry_run", []byte(out))
		})
	}
}

// TestRepairServerDryRun: --dry-run=server sends the account change and the Job with
// dryRun=All, unsuspends nothing and stores nothing.
func TestRepairServerDryRun(t *testing.T) {
	var sent []string
	dryRunAll := func(dr []string) bool { return len(dr) == 1 && dr[0] == metav1.DryRunAll }
	c := repairCluster(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			sent = append(sent, fmt.Sprintf("create %s dryRun=%v", obj.GetName(), dryRunAll((&client.CreateOptions{}).ApplyOptions(opts).DryRun)))
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			sent = append(sent, fmt.Sprintf("patch %s dryRun=%v", obj.GetName(), dryRunAll((&client.PatchOptions{}).ApplyOptions(opts).DryRun)))
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	out, errOut, code := run(t, c, "repair", "ij245", "-n", ns, "--dry-run=server")
	if code != options.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := []string{"patch ij245 dryRun=true", "create j-repair-1 dryRun=true"}; !slices.Equal(sent, want) {
		t.Errorf("requests %q, want %q", sent, want)
	}
	if !strings.HasPrefix(out, "BatchAccount ml-team/ij245 (server dry run):\n  created Job j-repair-1: 1 index for shard D") || strings.Contains(out, "Follow it with") {
		t.Errorf("output:\n%s", out)
	}
	var jobs batchv1.JobList
	if err := c.List(t.Context(), &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 1 {
		t.Errorf("server dry run stored Jobs: %d (%v)", len(jobs.Items), err)
	}
	var ba v1alpha1.BatchAccount
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "ij245"}, &ba); err != nil || len(ba.Spec.Repairs) != 0 {
		t.Errorf("server dry run stored spec.repairs %+v (%v)", ba.Spec.Repairs, err)
	}
}

// TestRepairApplies creates the Job, appends its entry to spec.repairs after a conflict,
// under the repair field manager and at the resourceVersion read, leaves
// spec.assignments alone, and leaves the queued Job to Kueue.
func TestRepairApplies(t *testing.T) {
	conflicts := 0
	var owners []string
	var locked bool
	c := repairCluster(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*v1alpha1.BatchAccount); ok {
			po := (&client.PatchOptions{}).ApplyOptions(opts)
			owners = append(owners, po.FieldManager)
			data, _ := patch.Data(obj)
			locked = strings.Contains(string(data), `"resourceVersion"`)
			if conflicts == 0 {
				conflicts++
				return apierrors.NewConflict(schema.GroupResource{Group: "batchledger.dev", Resource: "batchaccounts"}, obj.GetName(), errors.New("the object has been modified"))
			}
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	out, errOut, code := run(t, c, "repair", "ij245", "-n", ns)
	if code != options.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "BatchAccount ml-team/ij245:\n" +
		"  created Job j-repair-1: 1 index for shard D (job j index 3: job j Failed (BackoffLimitExceeded) without completing it); queued through LocalQueue default; Kueue unsuspends it on admission\n" +
		"  appended to spec.repairs: job j-repair-1 index 0 → shard D\n" +
		"Follow it with: kubectl batchledger explain account ij245 -n ml-team\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	var job batchv1.Job
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "j-repair-1"}, &job); err != nil {
		t.Fatal(err)
	}
	if !*job.Spec.Suspend || job.Annotations[v1alpha1.AnnotationRepairFor] != "ij245" {
		t.Errorf("repair Job = %+v", job.ObjectMeta)
	}
	var ba v1alpha1.BatchAccount
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "ij245"}, &ba); err != nil {
		t.Fatal(err)
	}
	if n := len(ba.Spec.Repairs); n != 1 || ba.Spec.Repairs[0].Target.Job != "j-repair-1" || conflicts != 1 {
		t.Errorf("spec.repairs after repair = %+v (conflicts %d)", ba.Spec.Repairs, conflicts)
	}
	if len(ba.Spec.Assignments) != 1 {
		t.Errorf("spec.assignments changed: %+v", ba.Spec.Assignments)
	}
	if len(owners) != 2 || owners[0] != FieldManager || owners[1] != FieldManager || !locked {
		t.Errorf("account patches: field managers %q, with resourceVersion %v; want two by %q, locked", owners, locked, FieldManager)
	}
	// The API server bumps the generation on a spec change; the fake client does not.
	ba.Generation = 2
	if err := c.Update(t.Context(), &ba); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, c, "repair", "ij245", "-n", ns); code != options.ExitError || !strings.Contains(errOut, "wait for the controller") {
		t.Errorf("a second repair before the controller observed the first: exit %d (%q), want 1 (stale status)", code, errOut)
	}
}

// TestRepairUnqueued: a Job without a Kueue queue is unsuspended once the account names it.
func TestRepairUnqueued(t *testing.T) {
	j := clitest.FailedJob()
	delete(j.Labels, wrappers.QueueLabel)
	ba := clitest.Compute(clitest.IJ245Account(), clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}})
	c := clitest.FakeClient(ba, j)
	if _, errOut, code := run(t, c, "repair", "ij245", "-n", ns); code != options.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var job batchv1.Job
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "j-repair-1"}, &job); err != nil {
		t.Fatal(err)
	}
	if *job.Spec.Suspend || len(job.Labels) != 1 || job.Labels[wrappers.PriorityClassLabel] != "batch-low" {
		t.Errorf("unqueued repair Job: suspend %v, labels %v", *job.Spec.Suspend, job.Labels)
	}
}

// TestRepairRollsBack: when the account cannot be updated, the created Job is deleted:
// no Job runs unaccounted.
func TestRepairRollsBack(t *testing.T) {
	c := repairCluster(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "batchledger.dev", Resource: "batchaccounts"}, obj.GetName(), errors.New("no RBAC"))
	}})
	_, errOut, code := run(t, c, "repair", "ij245", "-n", ns)
	if code != options.ExitError || !strings.Contains(errOut, `appending to spec.repairs of BatchAccount "ij245" in namespace "ml-team"`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	var job batchv1.Job
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "j-repair-1"}, &job); !apierrors.IsNotFound(err) {
		t.Errorf("repair Job left behind after a failed account update: %v", err)
	}
}

// TestRepairNamesTheJobBeforeItExists: the account names a repair Job before the Job is
// created, so that no pod of it is created before its account assigns it a shard; when
// the Job cannot be created, the entry is taken out of the account again.
func TestRepairNamesTheJobBeforeItExists(t *testing.T) {
	var named bool
	c := repairCluster(interceptor.Funcs{Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		var ba v1alpha1.BatchAccount
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ij245"}, &ba); err != nil {
			return err
		}
		named = slices.ContainsFunc(ba.Spec.Repairs, func(a v1alpha1.Assignment) bool { return a.Target.Job == obj.GetName() })
		return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(), errors.New("quota"))
	}})
	_, errOut, code := run(t, c, "repair", "ij245", "-n", ns)
	if !named {
		t.Error("the repair Job was created before its account named it")
	}
	if code != options.ExitError || !strings.Contains(errOut, `creating repair Job "j-repair-1"`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	var ba v1alpha1.BatchAccount
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "ij245"}, &ba); err != nil || len(ba.Spec.Repairs) != 0 {
		t.Errorf("spec.repairs after a Job that could not be created: %+v (%v)", ba.Spec.Repairs, err)
	}
}

// workerShard is the shard pkg/worker resolves in container c of job at index.
func workerShard(t *testing.T, job *batchv1.Job, index string) string {
	t.Helper()
	env := map[string]string{worker.EnvIndex: index}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	cfg, err := worker.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	shard, err := cfg.Shard()
	if err != nil {
		t.Fatal(err)
	}
	return shard
}

// TestPlanRepairWorkerFindsItsShard: the project's example worker, run in a repair Job,
// processes the repaired shard, not the shard its repair index had in the original.
func TestPlanRepairWorkerFindsItsShard(t *testing.T) {
	j := clitest.FailedJob()
	j.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: worker.EnvShards, Value: "A,B,C,D"}, {Name: worker.EnvModelRevision, Value: "m-2026-11"}}
	if got := workerShard(t, j, "3"); got != "D" {
		t.Fatalf("original index 3 resolves to %q", got)
	}
	plan, err := NewPlan(Input{Account: clitest.FailedAccount(), Jobs: clitest.JobsByName(j)})
	if err != nil {
		t.Fatal(err)
	}
	if got := workerShard(t, plan.Repairs[0].Job, "0"); got != "D" {
		t.Errorf("repair index 0 resolves to shard %q, want D", got)
	}

	// Compact population, JobSet-style worker configuration.
	ba := wrappers.MakeBatchAccount("big", ns).ShardCount("s", 8).AssignJobOrdinals("big", "0-7", "0-7").Generation(1).Obj()
	big := clitest.Admitted(clitest.SeedJob("big", "uid-big", 8).Completed("0-2,5", 4).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
	big.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: worker.EnvShardPrefix, Value: "s"}, {Name: worker.EnvIndexesPerJob, Value: "8"}}
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/big": {Job: jobkind.Facts(big)}})
	plan, err = NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(big)})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []string{"s3", "s4", "s6", "s7"} {
		if got := workerShard(t, plan.Repairs[0].Job, strconv.Itoa(k)); got != want {
			t.Errorf("repair index %d resolves to shard %q, want %s", k, got, want)
		}
	}
}

// TestPlanRepairLarge: 99,990 missing shards of a 100,000-shard batch plan into one
// repair Job whose assignment and environment stay in interval form.
func TestPlanRepairLarge(t *testing.T) {
	ba := wrappers.MakeBatchAccount("big", ns).ShardCount("s", 100000).AssignJobOrdinals("big", "0-99999", "0-99999").Generation(1).Obj()
	j := clitest.Admitted(clitest.SeedJob("big", "uid-big", 100000).Completed("0-9", 10).ResourceVersion("9").Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
	ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/big": {Job: jobkind.Facts(j)}})
	start := time.Now()
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("planned the repair of 99,990 shards in %s", time.Since(start))
	r := plan.Repairs[0]
	if r.Assignment.Indexes != "0-99989" || r.Assignment.ShardOrdinals != "10-99999" || *r.Job.Spec.Completions != 99990 ||
		!slices.Contains(r.Job.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: EnvOriginalIndexes, Value: "10-99999"}) {
		t.Errorf("repair = %+v", r.Assignment)
	}
}

// TestRepairWithoutKueue: Kueue is optional; on a cluster that does not serve its
// Workload API, repair plans from the Jobs alone (no queued template to restore), as it
// does for a Job without a Workload.
func TestRepairWithoutKueue(t *testing.T) {
	noKueue := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*kueue.WorkloadList); ok {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: kueue.GroupVersion.Group, Kind: "Workload"}, SearchedVersions: []string{kueue.GroupVersion.Version}}
		}
		return c.List(ctx, list, opts...)
	}}
	forbidden := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*kueue.WorkloadList); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: kueue.GroupVersion.Group, Resource: "workloads"}, "", errors.New("no RBAC"))
		}
		return c.List(ctx, list, opts...)
	}}
	cases := map[string]struct {
		funcs    interceptor.Funcs
		wantCode int
		wantErr  string
	}{
		"Kueue served":                    {wantCode: options.ExitOK},
		"Kueue's Workload API not served": {funcs: noKueue, wantCode: options.ExitOK},
		// Not being allowed to read what is there is another matter: say so.
		"Workloads not readable": {funcs: forbidden, wantCode: options.ExitError, wantErr: `listing Kueue Workloads in namespace "ml-team"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := run(t, repairCluster(tc.funcs), "repair", "ij245", "-n", ns, "--dry-run")
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Fatalf("exit %d (stderr %q), want %d with %q", code, errOut, tc.wantCode, tc.wantErr)
			}
			if code == options.ExitOK && !strings.Contains(out, "j-repair-1") {
				t.Errorf("no repair Job planned:\n%s", out)
			}
		})
	}
}

// TestPlanRepairKeepsParallelism: a repair Job runs at most as many pods at once as its
// original did: the original's parallelism is what its queue's quota admits, and a repair
// Job asking for more would wait for quota that never comes (Kueue admits a Job's pods at
// once).
func TestPlanRepairKeepsParallelism(t *testing.T) {
	cases := map[string]struct {
		parallelism int32
		want        int32
	}{
		"original ran 2 at once, 4 shards to re-run": {parallelism: 2, want: 2},
		"original ran 8 at once, 4 shards to re-run": {parallelism: 8, want: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("big", ns).ShardCount("s", 8).AssignJobOrdinals("big", "0-7", "0-7").Generation(1).Obj()
			j := clitest.Admitted(clitest.SeedJob("big", "uid-big", 8).Parallelism(tc.parallelism).Completed("0-2,5", 4).ResourceVersion("9").
				Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj())
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/big": {Job: jobkind.Facts(j)}})
			plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
			if err != nil {
				t.Fatal(err)
			}
			s := plan.Repairs[0].Job.Spec
			if *s.Completions != 4 || *s.Parallelism != tc.want {
				t.Errorf("repair Job completions %d parallelism %d, want 4 and %d", *s.Completions, *s.Parallelism, tc.want)
			}
		})
	}
}

// TestRepairConflictRereadsTheSpec: when the account changed between repair's read and
// its patch, the patch is retried on the account read again only if its spec is the one
// the plan was made from; a spec changed meanwhile (a repair appended by hand, a mapping
// changed) may already re-run the shards, so repair refuses rather than append to it.
func TestRepairConflictRereadsTheSpec(t *testing.T) {
	cases := []struct {
		name string
		// meanwhile changes the stored account between repair's read and its patch.
		meanwhile   func(ba *v1alpha1.BatchAccount)
		wantCode    int
		wantErr     string
		wantRepairs []string
		wantJob     bool
	}{
		{"metadata changed meanwhile", func(ba *v1alpha1.BatchAccount) {
			ba.Labels = map[string]string{"team": "nlp"}
		}, options.ExitOK, "", []string{"j-repair-1"}, true},
		{"a repair appended by hand meanwhile", func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-fix"}, Indexes: "0", Shards: []string{"D"}})
			ba.Generation++ // as the API server does on a spec change
		}, options.ExitError, "changed since repair read it (spec generation 1, now 2)", []string{"j-fix"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := false
			c := repairCluster(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*v1alpha1.BatchAccount); ok && !changed {
					changed = true
					var ba v1alpha1.BatchAccount
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &ba); err != nil {
						return err
					}
					tc.meanwhile(&ba)
					if err := c.Update(ctx, &ba); err != nil {
						return err
					}
					return apierrors.NewConflict(schema.GroupResource{Group: "batchledger.dev", Resource: "batchaccounts"}, obj.GetName(), errors.New("the object has been modified"))
				}
				return c.Patch(ctx, obj, patch, opts...)
			}})
			_, errOut, code := run(t, c, "repair", "ij245", "-n", ns)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.wantCode, tc.wantErr)
			}
			var ba v1alpha1.BatchAccount
			if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "ij245"}, &ba); err != nil {
				t.Fatal(err)
			}
			var repairs []string
			for _, a := range ba.Spec.Repairs {
				repairs = append(repairs, a.Target.Job)
			}
			if !slices.Equal(repairs, tc.wantRepairs) {
				t.Errorf("spec.repairs names %q, want %q", repairs, tc.wantRepairs)
			}
			var job batchv1.Job
			err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "j-repair-1"}, &job)
			if created := err == nil; created != tc.wantJob {
				t.Errorf("repair Job created: %v (%v), want %v", created, err, tc.wantJob)
			}
		})
	}
}
