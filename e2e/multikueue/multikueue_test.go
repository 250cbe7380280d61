// Package multikueue runs batchledger's end-to-end tests across a MultiKueue fleet on this
// machine: a manager cluster (Kueue with a MultiKueue AdmissionCheck, JobSet, batchledger)
// and a worker cluster (Kueue, JobSet, kwok GPU nodes), each a whole local control plane
// (internal/testsupport/localcluster.StartMultiKueue), started once per test binary.
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
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// workerA is the name the manager knows the worker cluster by.
const workerA = "worker-a"

// timeout bounds each wait: two control planes share a small, busy machine.
const timeout = 3 * time.Minute

// fleet is the clusters every test of the binary shares, and their clients.
var fleet struct {
	mk      *localcluster.MultiKueue
	manager client.Client
	worker  client.Client
}

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
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
	mk, err := localcluster.StartMultiKueue(ctx, mgr, []string{workerA}, localcluster.Options{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the MultiKueue fleet:", err)
		return 1
	}
	defer func() {
		if err := mk.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the fleet:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: fleet ready in %s (manager %s, %s %s)\n", mk.StartupDuration.Round(10*time.Millisecond),
		mk.Manager.StartupDuration.Round(10*time.Millisecond), workerA, mk.Workers[workerA].StartupDuration.Round(10*time.Millisecond))
	for name, c := range map[string]*localcluster.Cluster{"manager": mk.Manager, workerA: mk.Workers[workerA]} {
		fmt.Fprintf(os.Stderr, "e2e: %s memory: %s\n", name, memoryLine(c.MemoryMiB()))
	}
	fleet.mk = mk
	for _, c := range []struct {
		into *client.Client
		from *localcluster.Cluster
	}{{&fleet.manager, mk.Manager}, {&fleet.worker, mk.Workers[workerA]}} {
		cl, err := client.New(c.from.RESTConfig, client.Options{Scheme: scheme.Must()})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		*c.into = cl
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
	ctx := t.Context()
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

	// On the worker: the copy runs; finish indexes 0 and 1 first.
	remote := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j"}}
	waitFor(t, fleet.worker, remote, "a copy of the manager's Job", func(j *batchv1.Job) (bool, string) {
		return multikueue.PrebuiltWorkload(j) != "", fmt.Sprintf("labels %v", j.Labels)
	})
	pods := runningPods(t, ns, remote, 4)
	for _, p := range pods[:2] {
		if err := kwok.Finish(ctx, fleet.worker, &p, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "2 shards covered, on worker-a", func(a *v1alpha1.BatchAccount) (bool, string) {
		return a.Status.Shards.Covered == 2 && len(a.Status.Targets) == 1 && a.Status.Targets[0].Workload != nil &&
			a.Status.Targets[0].Workload.Cluster == workerA, summary(a)
	})

	for _, p := range pods[2:] {
		if err := kwok.Finish(ctx, fleet.worker, &p, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})

	local := &batchv1.Job{}
	get(t, fleet.manager, job, local)
	tgt := acct.Status.Targets[0]
	if tgt.UID != local.UID || tgt.CompletedIndexes != "0-3" {
		t.Errorf("target identity %s completed %q; want the manager Job's %s, 0-3", tgt.UID, tgt.CompletedIndexes, local.UID)
	}
	if len(tgt.Admissions) != 1 || tgt.Admissions[0].Cluster != workerA || tgt.Admissions[0].CompletedIndexes != "0-3" {
		t.Errorf("admissions %+v; want one on %s that completed 0-3", tgt.Admissions, workerA)
	}
	if c := apimeta.FindStatusCondition(acct.Status.Conditions, v1alpha1.ConditionShardsCovered); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("ShardsCovered = %+v, want True", c)
	}

	// The verdict on the manager's Workload, the one that names the worker.
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tgt.Workload.Name}}
	waitFor(t, fleet.manager, wl, "the verdict published", func(w *kueue.Workload) (bool, string) {
		c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
		return c != nil && c.Status == metav1.ConditionTrue && multikueue.Cluster(w) == workerA,
			fmt.Sprintf("cluster %q conditions %v", multikueue.Cluster(w), conditionTypes(w.Status.Conditions))
	})
}

// queues makes namespace ns on both clusters, the h100 flavor, and a LocalQueue
// "default" on a ClusterQueue "<ns>" of 8 h100 GPUs on each: on the manager with the
// MultiKueue AdmissionCheck (its quota only gates dispatch), on the worker without.
func queues(t *testing.T, ns string) {
	t.Helper()
	for _, cl := range []client.Client{fleet.manager, fleet.worker} {
		create(t, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		rf := wrappers.MakeResourceFlavor("h100").NodeLabel(localcluster.GPUTypeLabel, "h100").Obj()
		if err := cl.Create(t.Context(), rf); err != nil && !strings.Contains(err.Error(), "already exists") {
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
	}
}

// runningPods waits until job (on the worker) has n Running pods, and returns them by
// completion index.
func runningPods(t *testing.T, ns string, job *batchv1.Job, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%d running pods of %s on %s", n, job.Name, workerA), func() (bool, string) {
		var list corev1.PodList
		if err := fleet.worker.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err.Error()
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
		return len(pods) == n, fmt.Sprintf("%d running of %d", len(pods), len(list.Items))
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return strings.Compare(a.Labels[batchv1.JobCompletionIndexAnnotation], b.Labels[batchv1.JobCompletionIndexAnnotation])
	})
	return pods
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
