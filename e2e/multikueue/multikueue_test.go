// Package multikueue runs batchledger's end-to-end tests across a MultiKueue fleet on this
// machine: a manager cluster (Kueue with a MultiKueue AdmissionCheck, JobSet, batchledger
// reading the workers' results) and two worker clusters, worker-a and worker-b (Kueue,
// JobSet, kwok GPU nodes, batchledger in the worker role), each a whole local control
// plane (internal/testsupport/localcluster.StartMultiKueue), started once per test binary
// (~2.8 GiB resident in all). The manager reads each worker with a token of the worker's
// batchledger-manager-reader ServiceAccount, not the admin's kubeconfig. With
// E2E_USE_EXISTING_CLUSTER=true the suite is skipped.
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/result"
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
	// workerRole is batchledger in the worker role, as each worker runs it.
	workerRole localcluster.Manager
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
	// An admission only changes which wait an account is in, a write deferred
	// --waiting-status-delay (30s): tests that wait for the admission on a worker to be
	// recorded would wait that long.
	bl, err := localcluster.BatchledgerManager(bin, "--multikueue-worker-results", "--waiting-status-delay=1s")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if fleet.workerRole, err = localcluster.BatchledgerWorker(bin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The manager runs no pod: no fake node.
	mgr := localcluster.Options{Log: os.Stderr, Nodes: []localcluster.NodeSpec{}, Managers: []localcluster.Manager{bl}}
	mk, err := localcluster.StartMultiKueue(ctx, mgr, workerNames, localcluster.Options{Log: os.Stderr, Managers: []localcluster.Manager{fleet.workerRole}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the MultiKueue fleet:", err)
		return 1
	}
	defer func() {
		if err := mk.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the fleet:", err)
		}
	}()
	// batchledger on the manager runs in localcluster's default namespace: its worker
	// kubeconfig Secrets go there.
	if err := mk.GiveReaderKubeconfigs(ctx, "default", 24*time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: giving the manager the workers' reader kubeconfigs:", err)
		return 1
	}
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
	code := m.Run()
	if code != 0 {
		// The state directories go with the fleet: what batchledger did on each cluster is
		// kept in the failed run's output.
		tail := func(c *localcluster.Cluster, component string) {
			if err := c.WriteLogTail(os.Stderr, component, failedLogLines); err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
			}
		}
		tail(mk.Manager, localcluster.BatchledgerName)
		for _, name := range workerNames {
			tail(mk.Workers[name], localcluster.BatchledgerWorkerName)
		}
	}
	return code
}

// failedLogLines is how many of batchledger's last log lines per cluster a failed run
// prints.
const failedLogLines = 300

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

// TestDispatchedJobResultsRecordedOnTheWorker: an account requiring results of a Job
// dispatched to a worker is Accepted on the manager's Workload: batchledger in the worker
// role held each pod, recorded its result in a WorkerResult there under the manager's
// Workload, and released it; the manager read the records with the worker's read-only
// identity and recorded the results in its own chunk, under the manager Job's identity
// and naming the worker.
func TestDispatchedJobResultsRecordedOnTheWorker(t *testing.T) {
	ns := "mk-results"
	shards := []string{"A", "B"}
	job, worker, pods := dispatchedResultsBatch(t, ns, shards)
	for _, p := range pods {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) || p.Annotations[v1alpha1.AnnotationWorkload] == "" {
			t.Errorf("pod %s on %s: finalizers %v annotations %v; want it held and naming the manager Workload", p.Name, worker, p.Finalizers, p.Annotations)
		}
	}
	finishWithResults(t, worker, pods, shards)
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	local := &batchv1.Job{}
	get(t, fleet.manager, job, local)
	wantRecordedFrom(t, ns, local.UID, worker, 2)

	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: acct.Status.Targets[0].Workload.Name}}
	waitFor(t, fleet.manager, wl, "the verdict published", func(w *kueue.Workload) (bool, string) {
		c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("conditions %v", conditionTypes(w.Status.Conditions))
	})
}

// TestWorkerRoleKilledMidBatch: batchledger in the worker role is killed after two of a
// Job's four indexes were recorded; the other two pods succeed meanwhile and stay held
// (the finalizer is on the pod) while Kueue finishes the Workload and deletes the worker's
// Job; once the worker role runs again it records them from the Workload name its webhook
// wrote on each pod, and the manager's account is Accepted: nothing lost.
func TestWorkerRoleKilledMidBatch(t *testing.T) {
	ns := "mk-killed"
	shards := []string{"A", "B", "C", "D"}
	_, worker, pods := dispatchedResultsBatch(t, ns, shards)
	w, acct := finishWhileWorkerRoleDown(t, ns, worker, pods, shards)
	// Kueue finishes the Workload from the worker's Job and deletes that Job; the two
	// pods, succeeded and unrecorded, are held.
	local := &batchv1.Job{}
	waitFor(t, fleet.manager, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j"}}, "Complete, copied from "+worker, func(j *batchv1.Job) (bool, string) {
		local = j
		return jobComplete(j), fmt.Sprintf("status %+v", j.Status)
	})
	eventually(t, "the Job copy deleted on "+worker, func() (bool, string) {
		var copyOfJ batchv1.Job
		err := fleet.workers[worker].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "j"}, &copyOfJ)
		return apierrors.IsNotFound(err) || err == nil && copyOfJ.DeletionTimestamp != nil, fmt.Sprintf("get: %v", err)
	})
	for _, p := range pods[2:] {
		held := &corev1.Pod{}
		get(t, fleet.workers[worker], &p, held)
		if held.Status.Phase != corev1.PodSucceeded || !slices.Contains(held.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s while the worker role is down: %s, finalizers %v; want it Succeeded and held", p.Name, held.Status.Phase, held.Finalizers)
		}
	}
	get(t, fleet.manager, acct, acct)
	if a := acct; a.Status.Results.Recorded > 2 {
		t.Errorf("%d results recorded while the worker role was down", a.Status.Results.Recorded)
	}

	if err := w.StartManager(t.Context(), fleet.workerRole); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fleet.manager, acct, "Accepted after the worker role restarted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	wantRecordedFrom(t, ns, local.UID, worker, 4)
	eventually(t, "the held pods released on "+worker, func() (bool, string) {
		var list corev1.PodList
		if err := fleet.workers[worker].List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var held []string
		for _, p := range list.Items {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				held = append(held, p.Name)
			}
		}
		return len(held) == 0, fmt.Sprintf("held %v", held)
	})
}

// TestWorkerNotReachableNamed: while the manager cannot reach the worker a results
// account's Job runs on (its kubeconfig Secret made to point at a port nothing listens
// on), the account's results stay pending and its message names the worker and since
// when it is not reachable; the worker keeps recording meanwhile, and once the manager
// reaches it again the account is Accepted with the results recorded there.
func TestWorkerNotReachableNamed(t *testing.T) {
	ns := "mk-unreachable"
	shards := []string{"A", "B"}
	job, worker, pods := dispatchedResultsBatch(t, ns, shards)

	secret := &corev1.Secret{}
	get(t, fleet.manager, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "batchledger-worker-" + worker}}, secret)
	reachable := secret.Data[multikueue.KubeconfigKey]
	setKubeconfig := func(kubeconfig []byte) {
		t.Helper()
		// Not t.Context(): it runs from Cleanup too, after the test's context ended.
		s := &corev1.Secret{}
		if err := fleet.manager.Get(context.Background(), client.ObjectKeyFromObject(secret), s); err != nil {
			t.Fatal(err)
		}
		s.Data[multikueue.KubeconfigKey] = kubeconfig
		if err := fleet.manager.Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { setKubeconfig(reachable) })
	cfg, err := clientcmd.Load(reachable)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://127.0.0.1:1"
	}
	unreachable, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	setKubeconfig(unreachable)

	finishWithResults(t, worker, pods, shards)
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	want := "results of job j pending on " + worker + ": " + worker + " not reachable since "
	waitFor(t, fleet.manager, acct, "results pending, naming "+worker, func(a *v1alpha1.BatchAccount) (bool, string) {
		c := apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionResultsAccepted)
		return c != nil && c.Reason == v1alpha1.ReasonResultsPending && strings.Contains(c.Message, want) &&
			apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionShardsCovered), summary(a)
	})
	if n := acct.Status.Results.Recorded; n != 0 {
		t.Errorf("%d results recorded while %s was not reachable", n, worker)
	}

	setKubeconfig(reachable)
	waitFor(t, fleet.manager, acct, "Accepted once "+worker+" is reachable", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	local := &batchv1.Job{}
	get(t, fleet.manager, job, local)
	wantRecordedFrom(t, ns, local.UID, worker, 2)
}

// TestDispatchedBeforeItsAccountResultsMissing: a Job MultiKueue dispatched before any
// account named it runs on the worker unstamped (its copy's template carries no scope),
// so its pods there are not held and the worker role records none of their results. A
// results account created afterwards says so while the Job runs, and once it terminated
// counts its results as lost (MissingResult, which a repair re-runs), saying why,
// instead of waiting for results that can never be recorded.
func TestDispatchedBeforeItsAccountResultsMissing(t *testing.T) {
	ns := "mk-unstamped"
	queues(t, ns)
	shards := []string{"A", "B"}
	job := wrappers.MakeJob("j", ns).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	create(t, fleet.manager, job)
	worker := dispatchedTo(t, ns, "")
	pods := remotePods(t, worker, ns, "j", 2)
	for _, p := range pods {
		if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s of a Job no account named is held on %s", p.Name, worker)
		}
	}

	create(t, fleet.manager, wrappers.MakeBatchAccount("acct", ns).Shards(shards...).
		AssignJob("j", "0-1", shards...).RequireResults("").Obj())
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	why := "results of job j pending on " + worker + ": its copy there was made before an account required its results"
	waitFor(t, fleet.manager, acct, "results pending, saying why", func(a *v1alpha1.BatchAccount) (bool, string) {
		c := apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionResultsAccepted)
		return c != nil && c.Reason == v1alpha1.ReasonResultsPending && strings.Contains(c.Message, why), summary(a)
	})

	finishWithResults(t, worker, pods, shards)
	why = "results of job j on " + worker + ": its copy there was made before an account required its results"
	waitFor(t, fleet.manager, acct, "the results missing, saying why", func(a *v1alpha1.BatchAccount) (bool, string) {
		c := apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionResultsAccepted)
		return c != nil && c.Reason == v1alpha1.ReasonMissingResult && strings.Contains(c.Message, why) &&
			apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionShardsCovered), summary(a)
	})
	if n := acct.Status.Results.Recorded; n != 0 {
		t.Errorf("%d results recorded of pods no one held", n)
	}
}

// TestRemovedWorkerResultsMissing: once the manager's kubeconfig Secret of the worker a
// results account's Job ran on is deleted, the results recorded there cannot be read:
// when the Job has terminated they count as MissingResult (repair may re-run them), as
// the results of a terminated Job without pods do on one cluster. Given the Secret
// again, the manager reads them and the account is Accepted.
func TestRemovedWorkerResultsMissing(t *testing.T) {
	ns := "mk-removed"
	shards := []string{"A", "B"}
	job, worker, pods := dispatchedResultsBatch(t, ns, shards)

	secret := &corev1.Secret{}
	get(t, fleet.manager, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "batchledger-worker-" + worker}}, secret)
	given := secret.DeepCopy()
	given.ResourceVersion, given.UID, given.CreationTimestamp, given.ManagedFields = "", "", metav1.Time{}, nil
	restore := func() {
		// Not t.Context(): it runs from Cleanup too, after the test's context ended.
		if err := fleet.manager.Create(context.Background(), given.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(restore)
	if err := fleet.manager.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}

	finishWithResults(t, worker, pods, shards)
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "MissingResult, the Job terminated", func(a *v1alpha1.BatchAccount) (bool, string) {
		c := apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionResultsAccepted)
		return c != nil && c.Reason == v1alpha1.ReasonMissingResult && a.Status.Results.Missing == 2 &&
			apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionTerminated), summary(a)
	})

	restore()
	waitFor(t, fleet.manager, acct, "Accepted once "+worker+" is given again", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	local := &batchv1.Job{}
	get(t, fleet.manager, job, local)
	wantRecordedFrom(t, ns, local.UID, worker, 2)
}

// finishWhileWorkerRoleDown finishes the first two pods with their results and waits
// for the manager's account "acct" to record them, then stops batchledger's worker role on
// worker and finishes the other pods while it is down. It returns the worker, to start the
// role again, and the account.
func finishWhileWorkerRoleDown(t *testing.T, ns, worker string, pods []corev1.Pod, shards []string) (*localcluster.Cluster, *v1alpha1.BatchAccount) {
	t.Helper()
	finishWithResults(t, worker, pods[:2], shards[:2])
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "2 results recorded", func(a *v1alpha1.BatchAccount) (bool, string) {
		return a.Status.Results.Recorded == 2, summary(a)
	})
	w := fleet.mk.Workers[worker]
	if err := w.StopManager(localcluster.BatchledgerWorkerName); err != nil {
		t.Fatal(err)
	}
	finishWithResults(t, worker, pods[2:], shards[2:])
	return w, acct
}

// finishWithResults ends pods on worker's kwok nodes with exit code 0, each reporting the
// result of the shard of the same position in shards (the account's revisions).
func finishWithResults(t *testing.T, worker string, pods []corev1.Pod, shards []string) {
	t.Helper()
	for i, p := range pods {
		msg, err := result.Encode(result.Report{Shard: shards[i], InputRevision: "D", ModelRevision: "m-2026-11",
			Output: "s3://b/" + shards[i], Digest: "sha256:" + shards[i], Records: 1, Valid: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := kwok.Finish(t.Context(), fleet.workers[worker], &p, 0, msg); err != nil {
			t.Fatal(err)
		}
	}
}

// wantRecordedFrom checks that the manager recorded n results of ns's account, each
// accepted under the manager Job's identity jobUID and naming worker.
func wantRecordedFrom(t *testing.T, ns string, jobUID types.UID, worker string, n int) {
	t.Helper()
	var chunks v1alpha1.ShardResultsList
	if err := fleet.manager.List(t.Context(), &chunks, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var got []v1alpha1.RecordedResult
	for _, c := range chunks.Items {
		got = append(got, c.Results...)
	}
	if len(got) != n {
		t.Fatalf("%d results recorded on the manager, want %d: %+v", len(got), n, got)
	}
	for _, r := range got {
		if r.Cluster != worker || r.JobUID != jobUID || r.RejectReason != "" {
			t.Errorf("recorded %+v; want it accepted under the manager's %s, from %s", r, jobUID, worker)
		}
	}
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
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
// dispatchedResultsBatch starts the batch most results tests run: in namespace ns (its
// queues made), an account "acct" requiring results of one shard per index of the Indexed
// Job "j", one index per shard, all running at once; it returns the manager's Job, the
// worker it was dispatched to and the Job's running pods there.
func dispatchedResultsBatch(t *testing.T, ns string, shards []string) (*batchv1.Job, string, []corev1.Pod) {
	t.Helper()
	queues(t, ns)
	n := int32(len(shards))
	create(t, fleet.manager, wrappers.MakeBatchAccount("acct", ns).Shards(shards...).
		AssignJob("j", fmt.Sprintf("0-%d", n-1), shards...).RequireResults("").Obj())
	job := wrappers.MakeJob("j", ns).Indexed(n).Parallelism(n).Queue("default").GPU(1).Obj()
	create(t, fleet.manager, job)
	worker := dispatchedTo(t, ns, "")
	return job, worker, remotePods(t, worker, ns, "j", int(n))
}

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
