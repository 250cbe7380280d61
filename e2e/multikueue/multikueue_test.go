// Package multikueue runs batchledger's end-to-end tests across a MultiKueue fleet on this
// machine: a manager cluster (Kueue with a MultiKueue AdmissionCheck, JobSet, batchledger)
// and two worker clusters, worker-a and worker-b (Kueue, JobSet, kwok GPU nodes), each a
// whole local control plane (internal/testsupport/localcluster.StartMultiKueue), started
// once per test binary (~2.7 GiB resident in all). With E2E_USE_EXISTING_CLUSTER=true the
// suite is skipped.
//
//	go test -p 1 -count=1 -timeout 20m ./e2e/multikueue -run 'TestName$' -v
package multikueue

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The worker clusters, by the names the manager knows them by.
var workerNames = []string{"worker-a", "worker-b"}

// timeout bounds each wait: two control planes share a small, busy machine.
const timeout = 3 * time.Minute

// fleet is the clusters every test of the binary shares, and their clients.
var fleet struct {
	mk      *localcluster.MultiKueue
	manager client.Client
	workers map[string]client.Client
}

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	if os.Getenv(framework.UseExistingClusterEnv) == "true" {
		// A fleet is several clusters this suite starts itself; one existing cluster is
		// not one.
		fmt.Fprintln(os.Stderr, "e2e/multikueue: skipped: it starts its own manager and worker clusters")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "batchledger-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := localcluster.BuildBatchledger(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	bl, err := localcluster.BatchledgerManager(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The manager runs no pod: no fake node.
	mgr := localcluster.Options{Log: os.Stderr, Nodes: []localcluster.NodeSpec{}, Managers: []localcluster.Manager{bl}}
	mk, err := localcluster.StartMultiKueue(ctx, mgr, workerNames, localcluster.Options{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the MultiKueue fleet:", err)
		return 1
	}
	defer func() {
		if err := mk.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the fleet:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: fleet ready in %s (manager %s)\n", mk.StartupDuration.Round(10*time.Millisecond),
		mk.Manager.StartupDuration.Round(10*time.Millisecond))
	fmt.Fprintf(os.Stderr, "e2e: manager memory: %s\n", memoryLine(mk.Manager.MemoryMiB()))
	fleet.mk, fleet.workers = mk, map[string]client.Client{}
	if fleet.manager, err = client.New(mk.Manager.RESTConfig, client.Options{Scheme: scheme.Must()}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	for _, name := range workerNames {
		w := mk.Workers[name]
		fmt.Fprintf(os.Stderr, "e2e: %s started in %s, memory: %s\n", name, w.StartupDuration.Round(10*time.Millisecond), memoryLine(w.MemoryMiB()))
		if fleet.workers[name], err = client.New(w.RESTConfig, client.Options{Scheme: scheme.Must()}); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	return m.Run()
}

// memoryLine renders the resident memory of a cluster's components, total first.
func memoryLine(mib map[string]float64) string {
	var names []string
	total := 0.0
	for n, v := range mib {
		names = append(names, n)
		total += v
	}
	sort.Strings(names)
	parts := []string{fmt.Sprintf("total %.0f MiB", total)}
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f", n, mib[n]))
	}
	return strings.Join(parts, ", ")
}

// TestDispatchedJobCoveredOnTheManager: an Indexed Job queued on the manager through a
// ClusterQueue with the MultiKueue AdmissionCheck is dispatched to the worker and runs
// there (kwok); its coverage account on the manager follows the status Kueue copies
// back, reaches ShardsCovered and Accepted under the manager Job's identity, names the
// worker on its Workload observation and its admission (with the indexes completed
// there), and the verdict lands on the manager's Workload.
func TestDispatchedJobCoveredOnTheManager(t *testing.T) {
	ns := "mk-covered"
	queues(t, ns)

	shards := []string{"A", "B", "C", "D"}
	create(t, fleet.manager, wrappers.MakeBatchAccount("acct", ns).Shards(shards...).AssignJob("j", "0-3", shards...).Obj())
	job := wrappers.MakeJob("j", ns).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	create(t, fleet.manager, job)

	// Kueue's webhook hands the Job to MultiKueue; no pod of it is made on the manager.
	waitFor(t, fleet.manager, job, "managed by MultiKueue", func(j *batchv1.Job) (bool, string) {
		return multikueue.Dispatched(j), fmt.Sprintf("managedBy %v", j.Spec.ManagedBy)
	})

	// On the worker it was dispatched to: the copy runs; finish indexes 0 and 1 first.
	worker := dispatchedTo(t, ns, "")
	pods := remotePods(t, worker, ns, "j", 4)
	finish(t, worker, pods[:2])
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "2 shards covered, on "+worker, func(a *v1alpha1.BatchAccount) (bool, string) {
		return a.Status.Shards.Covered == 2 && len(a.Status.Targets) == 1 && a.Status.Targets[0].Workload != nil &&
			a.Status.Targets[0].Workload.Cluster == worker, summary(a)
	})

	finish(t, worker, pods[2:])
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})

	local := &batchv1.Job{}
	get(t, fleet.manager, job, local)
	tgt := acct.Status.Targets[0]
	if tgt.UID != local.UID || tgt.CompletedIndexes != "0-3" {
		t.Errorf("target identity %s completed %q; want the manager Job's %s, 0-3", tgt.UID, tgt.CompletedIndexes, local.UID)
	}
	if len(tgt.Admissions) != 1 || tgt.Admissions[0].Cluster != worker || tgt.Admissions[0].CompletedIndexes != "0-3" {
		t.Errorf("admissions %+v; want one on %s that completed 0-3", tgt.Admissions, worker)
	}
	if c := apimeta.FindStatusCondition(acct.Status.Conditions, v1alpha1.ConditionShardsCovered); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("ShardsCovered = %+v, want True", c)
	}

	// The verdict on the manager's Workload, the one that names the worker.
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tgt.Workload.Name}}
	waitFor(t, fleet.manager, wl, "the verdict published", func(w *kueue.Workload) (bool, string) {
		c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
		return c != nil && c.Status == metav1.ConditionTrue && multikueue.Cluster(w) == worker,
			fmt.Sprintf("cluster %q conditions %v", multikueue.Cluster(w), conditionTypes(w.Status.Conditions))
	})
}

// TestDispatchedJobResultsPendingNeverMissing: an account requiring results of a Job
// that ran on a worker counts its shards covered, and its results pending with the
// worker named, never MissingResult: the pods that hold them were on the worker, not
// lost from the manager.
func TestDispatchedJobResultsPendingNeverMissing(t *testing.T) {
	ns := "mk-results"
	queues(t, ns)
	shards := []string{"A", "B"}
	create(t, fleet.manager, wrappers.MakeBatchAccount("acct", ns).Shards(shards...).AssignJob("j", "0-1", shards...).RequireResults("").Obj())
	job := wrappers.MakeJob("j", ns).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	create(t, fleet.manager, job)

	worker := dispatchedTo(t, ns, "")
	finish(t, worker, remotePods(t, worker, ns, "j", 2))
	local := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j"}}
	waitFor(t, fleet.manager, local, "Complete, copied from "+worker, func(j *batchv1.Job) (bool, string) {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", j.Status)
	})
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	want := "job j in MultiKueue worker cluster " + worker
	waitFor(t, fleet.manager, acct, "covered and terminated, results pending on "+worker, func(a *v1alpha1.BatchAccount) (bool, string) {
		c := apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionResultsAccepted)
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionShardsCovered) &&
			apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionTerminated) &&
			c != nil && c.Reason == v1alpha1.ReasonResultsPending && strings.Contains(c.Message, want), summary(a)
	})
	if a := acct.Status.Results; a.Missing != 0 {
		t.Errorf("%d results missing (%s); want none: they are on %s", a.Missing, a.MissingOrdinals, worker)
	}
}

// TestEvictedFromOneWorkerThenDispatchedToAnother: a Job running on the worker it was
// dispatched to is evicted there (its ClusterQueue there stopped, draining it) and
// dispatched again, to the other worker, where it completes. The account keeps both
// admissions, each naming its worker: the first evicted, the second with the indexes it
// completed.
//
// The eviction comes before any index completes: Kueue v0.17's manager cannot requeue a
// dispatched Job evicted after some of its pods succeeded (the worker's status it copied
// is reset, and its own webhook refuses to shrink the Workload's reclaimablePods).
func TestEvictedFromOneWorkerThenDispatchedToAnother(t *testing.T) {
	ns := "mk-evicted"
	queues(t, ns)
	shards := []string{"A", "B", "C", "D"}
	create(t, fleet.manager, wrappers.MakeBatchAccount("acct", ns).Shards(shards...).AssignJob("j", "0-3", shards...).Obj())
	create(t, fleet.manager, wrappers.MakeJob("j", ns).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj())

	first := dispatchedTo(t, ns, "")
	remotePods(t, first, ns, "j", 4)
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "admitted on "+first, func(a *v1alpha1.BatchAccount) (bool, string) {
		adm := a.Status.Targets
		return len(adm) == 1 && len(adm[0].Admissions) == 1 && adm[0].Admissions[0].Cluster == first, summary(a)
	})

	// Drain the first worker's queue: Kueue evicts the Workload there, and MultiKueue
	// dispatches it again; only the other worker can admit it now.
	cq := &kueue.ClusterQueue{}
	get(t, fleet.workers[first], &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}, cq)
	cq.Spec.StopPolicy = ptr.To(kueue.HoldAndDrain)
	if err := fleet.workers[first].Update(t.Context(), cq); err != nil {
		t.Fatal(err)
	}
	second := dispatchedTo(t, ns, first)
	finish(t, second, remotePods(t, second, ns, "j", 4))
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	adm := acct.Status.Targets[0].Admissions
	if len(adm) != 2 || adm[0].Cluster != first || adm[0].EvictedAt == nil || adm[0].CompletedIndexes != "" ||
		adm[1].Cluster != second || adm[1].EvictedAt != nil || adm[1].CompletedIndexes != "0-3" {
		t.Errorf("admissions %+v; want one on %s evicted, then one on %s that completed 0-3", adm, first, second)
	}
}

// queues makes namespace ns on every cluster, the h100 flavor, and a LocalQueue
// "default" on a ClusterQueue "<ns>" of 8 h100 GPUs on each: on the manager with the
// MultiKueue AdmissionCheck (its quota only gates dispatch), on the workers without.
func queues(t *testing.T, ns string) {
	t.Helper()
	clients := []client.Client{fleet.manager}
	for _, name := range workerNames {
		clients = append(clients, fleet.workers[name])
	}
	for _, cl := range clients {
		create(t, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		rf := wrappers.MakeResourceFlavor("h100").NodeLabel(localcluster.GPUTypeLabel, "h100").Obj()
		if err := cl.Create(t.Context(), rf); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		cq := wrappers.MakeClusterQueue(ns).ResourceGroup(wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "8"))
		if cl == fleet.manager {
			cq = cq.AdmissionCheck(localcluster.MultiKueueCheck)
		}
		create(t, cl, cq.Obj())
		create(t, cl, wrappers.MakeLocalQueue("default", ns).ClusterQueue(ns).Obj())
		waitFor(t, cl, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}, "Active", func(q *kueue.ClusterQueue) (bool, string) {
			return apimeta.IsStatusConditionTrue(q.Status.Conditions, kueue.ClusterQueueActive), fmt.Sprintf("%v", q.Status.Conditions)
		})
		// Kueue's webhook hands a Job to MultiKueue only once its queue cache knows the
		// LocalQueue's ClusterQueue has the check: a Job created before stays local and
		// its Workload is rejected.
		waitFor(t, cl, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}, "Active", func(q *kueue.LocalQueue) (bool, string) {
			return apimeta.IsStatusConditionTrue(q.Status.Conditions, kueue.LocalQueueActive), fmt.Sprintf("%v", q.Status.Conditions)
		})
	}
}

// dispatchedTo waits until the only Workload of ns on the manager is admitted on a
// worker other than not, and returns that worker.
func dispatchedTo(t *testing.T, ns, not string) string {
	t.Helper()
	var cluster string
	eventually(t, "the Workload of "+ns+" admitted on a worker", func() (bool, string) {
		var list kueue.WorkloadList
		if err := fleet.manager.List(t.Context(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
			return false, fmt.Sprintf("%d Workloads (%v)", len(list.Items), err)
		}
		wl := &list.Items[0]
		cluster = multikueue.Cluster(wl)
		admitted := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
		return admitted && cluster != "" && cluster != not,
			fmt.Sprintf("cluster %q nominated %v conditions %v", cluster, wl.Status.NominatedClusterNames, conditionTypes(wl.Status.Conditions))
	})
	return cluster
}

// remotePods waits until the copy of Job name on worker has n Running pods, and
// returns them by completion index.
func remotePods(t *testing.T, worker, ns, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%d running pods of %s on %s", n, name, worker), func() (bool, string) {
		var job batchv1.Job
		if err := fleet.workers[worker].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return false, err.Error()
		}
		if multikueue.PrebuiltWorkload(&job) == "" {
			return false, fmt.Sprintf("Job %s on %s is no MultiKueue copy: labels %v", name, worker, job.Labels)
		}
		var list corev1.PodList
		if err := fleet.workers[worker].List(t.Context(), &list, client.InNamespace(ns),
			client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
			return false, err.Error()
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
			return p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil
		})
		return len(pods) == n, fmt.Sprintf("%d running of %d", len(pods), len(list.Items))
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return strings.Compare(a.Labels[batchv1.JobCompletionIndexAnnotation], b.Labels[batchv1.JobCompletionIndexAnnotation])
	})
	return pods
}

// finish ends pods on worker's kwok nodes with exit code 0.
func finish(t *testing.T, worker string, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := kwok.Finish(t.Context(), fleet.workers[worker], &p, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
}

func create(t *testing.T, cl client.Client, obj client.Object) {
	t.Helper()
	if err := cl.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(t *testing.T, cl client.Client, key, into client.Object) {
	t.Helper()
	if err := cl.Get(t.Context(), client.ObjectKeyFromObject(key), into); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls obj on cl until cond holds, failing after timeout with the last state.
func waitFor[T client.Object](t *testing.T, cl client.Client, obj T, desc string, cond func(T) (bool, string)) {
	t.Helper()
	eventually(t, fmt.Sprintf("%T %s: %s", obj, obj.GetName(), desc), func() (bool, string) {
		if err := cl.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		return cond(obj)
	})
}

func eventually(t *testing.T, desc string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, desc, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// summary is an account's coverage and conditions, for failure messages.
func summary(a *v1alpha1.BatchAccount) string {
	var b strings.Builder
	fmt.Fprintf(&b, "covered %d/%d", a.Status.Shards.Covered, a.Status.Shards.Total)
	for _, c := range a.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, tg := range a.Status.Targets {
		fmt.Fprintf(&b, "; target %s uid %s completed %q workload %+v admissions %+v", tg.Name, tg.UID, tg.CompletedIndexes, tg.Workload, tg.Admissions)
	}
	return b.String()
}

func conditionTypes(conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, c.Type+"="+string(c.Status))
	}
	return out
}
