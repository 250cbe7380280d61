package multikueue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// jobSetShards are the shards of the JobSet batch: child Job i of replicatedJob "workers"
// runs shards 2i and 2i+1 as its indexes 0 and 1.
var jobSetShards = []string{"A", "B", "C", "D"}

// jobSetAccount is the account "acct" of ns requiring results of JobSet "js", and
// jobSetBatch the JobSet (replicatedJob "workers": two child Jobs of two indexes, all
// running at once, 4 GPUs in all).
func jobSetAccount(ns string) *v1alpha1.BatchAccount {
	return wrappers.MakeBatchAccount("acct", ns).Shards(jobSetShards...).
		AssignJobSet("js", "workers", 0, "0-1", "0-1").AssignJobSet("js", "workers", 1, "0-1", "2-3").RequireResults("").Obj()
}

func jobSetBatch(ns string) *jobsetapi.JobSet {
	child := wrappers.MakeJob("", ns).Indexed(2).Parallelism(2).GPU(1).Obj()
	return wrappers.MakeJobSet("js", ns).Queue("default").
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(child).Obj()).Obj()
}

// dispatchedJobSetBatch starts, in namespace ns (its queues made), the account and then
// the JobSet on the manager; it returns the worker it was dispatched to and the running
// pods of its children there, in shard order.
func dispatchedJobSetBatch(t *testing.T, ns string) (string, []corev1.Pod) {
	t.Helper()
	queues(t, ns)
	create(t, fleet.manager, jobSetAccount(ns))
	create(t, fleet.manager, jobSetBatch(ns))
	worker := dispatchedTo(t, ns, "")
	return worker, runningJobSetPods(t, ns, worker)
}

// runningJobSetPods waits for the 4 running pods of JobSet js of ns on worker, checks
// that each is held and names its manager Workload, and returns them in shard order.
func runningJobSetPods(t *testing.T, ns, worker string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, "4 running pods of JobSet js on "+worker, func() (bool, string) {
		var list corev1.PodList
		if err := fleet.workers[worker].List(t.Context(), &list, client.InNamespace(ns),
			client.MatchingLabels{jobsetapi.JobSetNameKey: "js"}); err != nil {
			return false, err.Error()
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
			return p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil
		})
		return len(pods) == 4, fmt.Sprintf("%d running of %d", len(pods), len(list.Items))
	})
	shardOf := func(p corev1.Pod) int {
		job, _ := strconv.Atoi(p.Labels[jobsetapi.JobIndexKey])
		idx, _ := strconv.Atoi(p.Labels[batchv1.JobCompletionIndexAnnotation])
		return 2*job + idx
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return shardOf(a) - shardOf(b) })
	for _, p := range pods {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) || p.Annotations[v1alpha1.AnnotationWorkload] == "" {
			t.Errorf("pod %s on %s: finalizers %v annotations %v; want it held and naming the manager Workload", p.Name, worker, p.Finalizers, p.Annotations)
		}
	}
	return pods
}

// childJobsHeldAndRecorded waits until the two child Jobs of JobSet js of ns on worker
// are held by the worker role, carry the scope and are recorded in their WorkerJobs for
// the manager's Workload.
func childJobsHeldAndRecorded(t *testing.T, ns, worker string) {
	t.Helper()
	eventually(t, "the child Jobs held and recorded on "+worker, func() (bool, string) {
		var jobs batchv1.JobList
		if err := fleet.workers[worker].List(t.Context(), &jobs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		recs := workerJobs(t, worker, ns)
		var state []string
		ok := len(jobs.Items) == 2
		for _, j := range jobs.Items {
			r, recorded := recs[j.Name]
			held := slices.Contains(j.Finalizers, v1alpha1.WorkerJobFinalizer)
			scope := j.Labels[v1alpha1.LabelScope]
			ok = ok && held && recorded && scope == v1alpha1.ScopeResults && r.JobUID == j.UID &&
				r.Workload == j.Annotations[v1alpha1.AnnotationWorkload] && r.Workload != "" && r.JobSet == "js"
			state = append(state, fmt.Sprintf("%s held=%v scope=%q record=%+v", j.Name, held, scope, r))
		}
		return ok, strings.Join(state, "; ")
	})
}

// workerJobs are the WorkerJobs worker recorded in ns, by child Job name.
func workerJobs(t *testing.T, worker, ns string) map[string]v1alpha1.WorkerJob {
	t.Helper()
	var list v1alpha1.WorkerJobList
	if err := fleet.workers[worker].List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]v1alpha1.WorkerJob{}
	for _, r := range list.Items {
		out[r.Job] = r
	}
	return out
}

// wantJobSetRecordedFrom checks that the manager recorded the four results of ns's
// account from worker, each under the worker child Job's identity its WorkerJob names,
// and that each target follows that child with an admission on worker.
func wantJobSetRecordedFrom(t *testing.T, ns, worker string, acct *v1alpha1.BatchAccount) {
	t.Helper()
	recs := workerJobs(t, worker, ns)
	children := map[types.UID]bool{}
	for _, r := range recs {
		children[r.JobUID] = true
	}
	for _, ts := range acct.Status.Targets {
		if !children[ts.UID] || len(ts.Admissions) == 0 || ts.Admissions[len(ts.Admissions)-1].Cluster != worker {
			t.Errorf("target %s: identity %s, admissions %+v; want a child Job recorded on %s (%v), admitted there", ts.Name, ts.UID, ts.Admissions, worker, recs)
		}
	}
	var chunks v1alpha1.ShardResultsList
	if err := fleet.manager.List(t.Context(), &chunks, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var got []v1alpha1.RecordedResult
	for _, c := range chunks.Items {
		got = append(got, c.Results...)
	}
	if len(got) != len(jobSetShards) {
		t.Fatalf("%d results recorded on the manager, want %d: %+v", len(got), len(jobSetShards), got)
	}
	for _, r := range got {
		if r.Cluster != worker || !children[r.JobUID] || r.RejectReason != "" {
			t.Errorf("recorded %+v; want it accepted under a child Job of %s", r, worker)
		}
	}
}

// wantVerdictOnWorkload waits for Accepted on the manager's Workload of ns's account.
func wantVerdictOnWorkload(t *testing.T, acct *v1alpha1.BatchAccount) {
	t.Helper()
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: acct.Namespace, Name: acct.Status.Targets[0].Workload.Name}}
	waitFor(t, fleet.manager, wl, "the verdict published", func(w *kueue.Workload) (bool, string) {
		c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("conditions %v", conditionTypes(w.Status.Conditions))
	})
}

// nothingHeld waits until no pod and no Job of ns on worker carries the worker role's
// finalizers, and the JobSet copy is gone (Kueue deleted it once the Workload finished).
func nothingHeld(t *testing.T, worker, ns string) {
	t.Helper()
	eventually(t, "nothing held on "+worker, func() (bool, string) {
		var pods corev1.PodList
		var jobs batchv1.JobList
		var sets jobsetapi.JobSetList
		cl := fleet.workers[worker]
		if err := cl.List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		if err := cl.List(t.Context(), &jobs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		if err := cl.List(t.Context(), &sets, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var held []string
		for _, p := range pods.Items {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				held = append(held, "pod/"+p.Name)
			}
		}
		for _, j := range jobs.Items {
			if slices.Contains(j.Finalizers, v1alpha1.WorkerJobFinalizer) {
				held = append(held, "job/"+j.Name)
			}
		}
		return len(held) == 0 && len(sets.Items) == 0, fmt.Sprintf("held %v, %d JobSets", held, len(sets.Items))
	})
}

// TestDispatchedJobSetAcceptedFromWorkerRecords: an account requiring results of a JobSet
// dispatched to a worker, where no child Job exists on the manager: batchledger in the
// worker role holds each child Job (its Job webhook) and each pod, records each child Job
// in a WorkerJob and each pod's result in a WorkerResult there; the manager covers each
// target from the WorkerJobs under the worker child's identity, records the results with
// the worker named, and publishes Accepted on its Workload. Once Kueue deletes the
// worker's JobSet nothing stays held.
func TestDispatchedJobSetAcceptedFromWorkerRecords(t *testing.T) {
	ns := "mk-jobset"
	worker, pods := dispatchedJobSetBatch(t, ns)
	var jobs batchv1.JobList
	if err := fleet.manager.List(t.Context(), &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 0 {
		t.Errorf("%d Jobs on the manager (%v), want none: the JobSet is dispatched", len(jobs.Items), err)
	}
	childJobsHeldAndRecorded(t, ns, worker)
	finishWithResults(t, worker, pods, jobSetShards)
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	wantJobSetRecordedFrom(t, ns, worker, acct)
	wantVerdictOnWorkload(t, acct)
	nothingHeld(t, worker, ns)
}

// TestJobSetCreatedBeforeItsAccountRecordedOnWorker: a JobSet created before its account
// waits for quota on the manager (another batch holds the queue's GPUs) while the account
// is created; the account stamps the scope on its pod templates only (JobSet lets a
// suspended JobSet change nothing else), so its children on the worker carry the scope on
// their pod templates only. The worker role still holds each child Job, labels it and
// records it in a WorkerJob, and the account is Accepted from the worker's records.
func TestJobSetCreatedBeforeItsAccountRecordedOnWorker(t *testing.T) {
	ns := "mk-jobset-late-account"
	queues(t, ns)
	blocker := wrappers.MakeJob("blocker", ns).Indexed(1).GPU(8).Queue("default").Obj()
	create(t, fleet.manager, blocker)
	dispatchedTo(t, ns, "")
	create(t, fleet.manager, jobSetBatch(ns))
	create(t, fleet.manager, jobSetAccount(ns))
	waitFor(t, fleet.manager, &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "js"}}, "its pod template stamped, suspended",
		func(js *jobsetapi.JobSet) (bool, string) {
			tmpl := js.Spec.ReplicatedJobs[0].Template
			return tmpl.Spec.Template.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults && ptr.Deref(js.Spec.Suspend, false),
				fmt.Sprintf("suspend %v, Job template labels %v, pod template labels %v", ptr.Deref(js.Spec.Suspend, false), tmpl.Labels, tmpl.Spec.Template.Labels)
		})
	if err := fleet.manager.Delete(t.Context(), blocker, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}

	var worker string
	eventually(t, "the JobSet's Workload admitted on a worker", func() (bool, string) {
		var list kueue.WorkloadList
		if err := fleet.manager.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, wl := range list.Items {
			if slices.ContainsFunc(wl.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "JobSet" && o.Name == "js" }) {
				worker = multikueue.Cluster(&wl)
				return worker != "" && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted), fmt.Sprintf("cluster %q conditions %v", worker, conditionTypes(wl.Status.Conditions))
			}
		}
		return false, fmt.Sprintf("%d Workloads, none of js", len(list.Items))
	})
	pods := runningJobSetPods(t, ns, worker)
	childJobsHeldAndRecorded(t, ns, worker)
	var copied jobsetapi.JobSet
	get(t, fleet.workers[worker], &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "js"}}, &copied)
	if l := copied.Spec.ReplicatedJobs[0].Template.Labels[v1alpha1.LabelScope]; l != "" {
		t.Fatalf("the worker's copy has the scope %q on its Job template: the case this test is about did not happen", l)
	}
	finishWithResults(t, worker, pods, jobSetShards)
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	wantJobSetRecordedFrom(t, ns, worker, acct)
	nothingHeld(t, worker, ns)
}

// TestWorkerRoleKilledWhileJobSetFinishes: batchledger in the worker role is killed once
// the first child Job's two results were recorded; the second child's pods succeed
// meanwhile, the JobSet completes and Kueue deletes it: the second child Job and its pods
// stay held (the finalizers the worker role put on them). Once the worker role runs again
// it records the child's last status and its pods' results from what its webhooks wrote
// on them, and the manager's account is Accepted: nothing lost.
func TestWorkerRoleKilledWhileJobSetFinishes(t *testing.T) {
	ns := "mk-jobset-killed"
	worker, pods := dispatchedJobSetBatch(t, ns)
	w, acct := finishWhileWorkerRoleDown(t, ns, worker, pods, jobSetShards)
	waitFor(t, fleet.manager, &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "js"}}, "Completed, copied from "+worker,
		func(js *jobsetapi.JobSet) (bool, string) {
			return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetapi.JobSetCompleted)), fmt.Sprintf("status %+v", js.Status)
		})
	eventually(t, "the JobSet copy deleted on "+worker+", its second child held", func() (bool, string) {
		var sets jobsetapi.JobSetList
		if err := fleet.workers[worker].List(t.Context(), &sets, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var job batchv1.Job
		err := fleet.workers[worker].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "js-workers-1"}, &job)
		held := err == nil && job.DeletionTimestamp != nil && slices.Contains(job.Finalizers, v1alpha1.WorkerJobFinalizer)
		return len(sets.Items) == 0 && held, fmt.Sprintf("%d JobSets; child: %v deleting=%v finalizers %v", len(sets.Items), err, job.DeletionTimestamp != nil, job.Finalizers)
	})
	for _, p := range pods[2:] {
		held := &corev1.Pod{}
		get(t, fleet.workers[worker], &p, held)
		if held.Status.Phase != corev1.PodSucceeded || !slices.Contains(held.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s while the worker role is down: %s, finalizers %v; want it Succeeded and held", p.Name, held.Status.Phase, held.Finalizers)
		}
	}

	if err := w.StartManager(t.Context(), fleet.workerRole); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fleet.manager, acct, "Accepted after the worker role restarted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	wantJobSetRecordedFrom(t, ns, worker, acct)
	if r := workerJobs(t, worker, ns)["js-workers-1"]; r.Terminal != string(batchv1.JobComplete) || r.CompletedIndexes != "0,1" && r.CompletedIndexes != "0-1" {
		t.Errorf("record of the second child %+v, want it Complete with indexes 0 and 1", r)
	}
	wantVerdictOnWorkload(t, acct)
	nothingHeld(t, worker, ns)
}
