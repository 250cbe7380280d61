package batchledger

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/worker"
)

// The tests of this file run on kind (make test-e2e-kind): real kubelets run the example
// worker image, whose run each test scripts through the environment (pkg/worker's Plan),
// so pod success, failure, retries and termination messages all come from a kubelet and
// a container runtime. They skip on the local control plane's kwok nodes, where the rest
// of the suite plays the same ground step by step.

// releaseNamespace is where the kind cluster's Helm release of batchledger runs.
const releaseNamespace = "batchledger-system"

// gateConfigMap holds the indexes a test keeps running (BATCH_HOLD_INDEXES); pods read it
// when they start, so changing it releases the indexes of the pods created afterwards.
const gateConfigMap = "gate"

// onKubelet turns a Job template's containers into example workers: the worker image
// (never pulled), small CPU and memory requests that fit a kind node, the IJ245 revisions,
// the index's failure count from the downward API, and env.
func onKubelet(spec *corev1.PodSpec, env ...corev1.EnvVar) {
	base := []corev1.EnvVar{
		{Name: worker.EnvInputRevision, Value: "D"},
		{Name: worker.EnvModelRevision, Value: "m-2026-11"},
		{Name: worker.EnvOutputPrefix, Value: "s3://batches/ij245/"},
		{Name: worker.EnvRecords, Value: "1000"},
		{Name: worker.EnvIndexFailures, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"}}},
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Image, c.ImagePullPolicy, c.Args = framework.WorkerImage(), corev1.PullNever, nil
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("16Mi")
		c.Env = append(append(append([]corev1.EnvVar{}, base...), c.Env...), env...)
	}
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// heldIndexes reads BATCH_HOLD_INDEXES from the test's gate ConfigMap.
func heldIndexes() corev1.EnvVar {
	return corev1.EnvVar{Name: worker.EnvHoldIndexes, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: gateConfigMap}, Key: "hold"}}}
}

func setGate(t *testing.T, f *framework.Framework, hold string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gateConfigMap, Namespace: f.Namespace}, Data: map[string]string{"hold": hold}}
	if err := f.Client.Update(f.Ctx, cm); apierrors.IsNotFound(err) {
		f.Create(cm)
	} else if err != nil {
		t.Fatal(err)
	}
}

// kindResultsAccount creates an account requiring results (the seed's rule) for Job job
// over shards, and waits until the controller has seen it, so that every pod is held.
func kindResultsAccount(t *testing.T, f *framework.Framework, name, job string, shards ...string) {
	t.Helper()
	idx := indexset.Range(0, len(shards)-1).String()
	f.Create(wrappers.MakeBatchAccount(name, f.Namespace).Shards(shards...).AssignJob(job, idx, shards...).RequireResults(seedRule).Obj())
	waitAccount(t, f, name, "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
}

// recordedResults lists the results the ledger holds for an account.
func recordedResults(t *testing.T, f *framework.Framework, name string) []v1alpha1.RecordedResult {
	t.Helper()
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: name}); err != nil {
		t.Fatal(err)
	}
	var out []v1alpha1.RecordedResult
	for _, c := range chunks.Items {
		out = append(out, c.Results...)
	}
	return out
}

// nodeGPUType is the gpu-type label of the node a pod ran on.
func nodeGPUType(t *testing.T, f *framework.Framework, p *corev1.Pod) string {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.NodeName}}
	f.Get(n)
	return n.Labels["gpu-type"]
}

// noHeldPods asserts that no pod of the namespace still carries the result finalizer.
func noHeldPods(t *testing.T, f *framework.Framework) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, "no pod held by the result finalizer", func() (bool, string, error) {
		var pods corev1.PodList
		if err := f.Client.List(f.Ctx, &pods, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		var held []string
		for _, p := range pods.Items {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				held = append(held, p.Name)
			}
		}
		return len(held) == 0, strings.Join(held, ","), nil
	})
}

// TestKindIJ245Accepted: the seed's IJ245 batch (Job j, indexes 0..3 onto shards A..D,
// through a LocalQueue on flavor h100) with real pods. Index 1's first attempt fails
// (exit 3) and the Job controller retries it (backoffLimitPerIndex 1); every pod writes
// its result to /dev/termination-log, the kubelet carries it into the pod status, and the
// batch ends Accepted with four results recorded and every pod released.
func TestKindIJ245Accepted(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	h100Queue(f, "8")
	kindResultsAccount(t, f, "ij245", "j", "A", "B", "C", "D")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).BackoffLimitPerIndex(1).Obj()
	onKubelet(&job.Spec.Template.Spec, envVar(worker.EnvShards, "A,B,C,D"),
		envVar(worker.EnvFailIndexes, "1"), envVar(worker.EnvExitCode, "3"))
	f.Create(job)

	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	wl := framework.WorkloadFor(t, job)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	framework.WaitFor(t, job, framework.DefaultTimeout, "Complete", jobComplete)
	if job.Status.Failed != 1 || job.Status.Succeeded != 4 || job.Status.CompletedIndexes != "0-3" {
		t.Errorf("Job status failed=%d succeeded=%d completed=%q; want index 1 failed once and retried", job.Status.Failed, job.Status.Succeeded, job.Status.CompletedIndexes)
	}
	results := recordedResults(t, f, "ij245")
	shards := map[string]bool{}
	for _, r := range results {
		if r.RejectReason == "" {
			shards[r.Shard] = true
		}
	}
	if len(shards) != 4 {
		t.Errorf("recorded results %+v; want A..D accepted", results)
	}
	for _, p := range framework.JobPods(t, job) {
		if p.Status.Phase == corev1.PodSucceeded {
			if got := nodeGPUType(t, f, &p); got != "h100" {
				t.Errorf("pod %s ran on a %q node, want h100 (the flavor's nodeLabels)", p.Name, got)
			}
		}
	}
	noHeldPods(t, f)
}

// jobComplete reports the Job controller's Complete condition.
func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestKindTrainerHeadlessService: the seed's trainer Job with its headless Service. Every
// worker waits until the hostnames of all four ranks (trainer-<i>.trainer) resolve through
// CoreDNS, as a distributed trainer's rendezvous does, and only then succeeds; the
// coverage account over the four indexes is Accepted.
func TestKindTrainerHeadlessService(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	objs := framework.LoadObjects(t, "../testdata/trainer-headless.yaml", f.Namespace)
	hosts := "trainer-0.trainer,trainer-1.trainer,trainer-2.trainer,trainer-3.trainer"
	f.Create(wrappers.MakeBatchAccount("trainer", f.Namespace).Shards("r0", "r1", "r2", "r3").AssignJob("trainer", "0-3", "r0", "r1", "r2", "r3").Obj())
	var job *batchv1.Job
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			// After the rendezvous each rank works 30 s, as a trainer trains: a rank that
			// exited at once would leave the headless Service's DNS (Succeeded pods are not
			// endpoints) before a slower rank, whose lookups CoreDNS answered NXDOMAIN while
			// the records were not yet published, had resolved it; that rank then waited
			// forever (seen once in CI: rank 0 Running 3 min after ranks 1-3 succeeded).
			onKubelet(&j.Spec.Template.Spec, envVar(worker.EnvShards, "r0,r1,r2,r3"), envVar(worker.EnvWaitForHosts, hosts),
				envVar(worker.EnvWorkSeconds, "30"))
			job = j
		}
		f.Create(o)
	}
	framework.WaitFor(t, job, 3*framework.DefaultTimeout, "Complete (every rank resolved its peers)", jobComplete)
	for _, p := range framework.JobPods(t, job) {
		if p.Spec.Hostname != "trainer-"+p.Annotations[batchv1.JobCompletionIndexAnnotation] || p.Spec.Subdomain != "trainer" {
			t.Errorf("pod %s hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
	}
	waitAccountCondition(t, f, "trainer", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// TestKindSeedJobSet: the seed's pytorch-ddp JobSet through Kueue on flavor a100. The
// leader runs until the JobSet is done; each worker first resolves the leader's hostname
// (pytorch-ddp-leader-0-0.pytorch-ddp, the JobSet's headless Service), then succeeds. The
// JobSet completes by its successPolicy over workers and the account over workers' four
// indexes is Accepted, on the JobSet's Workload too.
func TestKindSeedJobSet(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	f.GPUQueue("default", wrappers.GPUFlavorQuotas("a100", "64", "512Gi", "8"))
	js := framework.LoadObject[*jobset.JobSet](t, "../testdata/pytorch-ddp-jobset.yaml", f.Namespace)
	js.Labels = map[string]string{wrappers.QueueLabel: "default"}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		switch rj.Name {
		case "leader": // not Indexed: it is index 0 of its own, held until the JobSet ends
			onKubelet(&rj.Template.Spec.Template.Spec, envVar(worker.EnvIndex, "0"), envVar(worker.EnvHoldIndexes, "0"), envVar(worker.EnvShards, "leader"))
		case "workers":
			onKubelet(&rj.Template.Spec.Template.Spec, envVar(worker.EnvShards, "w0,w1,w2,w3"),
				envVar(worker.EnvWaitForHosts, "pytorch-ddp-leader-0-0.pytorch-ddp"))
		}
	}
	f.Create(wrappers.MakeBatchAccount("ddp", f.Namespace).Shards("w0", "w1", "w2", "w3").
		AssignJobSet("pytorch-ddp", "workers", 0, "0-3", "0-3").Obj())
	f.Create(js)
	framework.WaitFor(t, js, 3*framework.DefaultTimeout, "JobSet Completed", func(js *jobset.JobSet) bool {
		return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted))
	})
	waitAccountCondition(t, f, "ddp", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	wl := framework.WorkloadFor(t, js)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if got := framework.AdmittedFlavors(wl)["workers"]["nvidia.com/gpu"]; got != "a100" {
		t.Errorf("workers admitted on GPU flavor %q, want a100", got)
	}
}

// TestKindOverQuotaLandsOnA100: one ClusterQueue with 4 GPUs of flavor h100 and 8 of
// a100. Job first takes the h100 GPUs for 45 s; Job second, queued meanwhile, does not
// fit on h100 and Kueue admits it on a100, so its pods run on the a100 node while first's
// run on the h100 node. The account over both Jobs' eight indexes is Accepted.
func TestKindOverQuotaLandsOnA100(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	f.GPUQueue("default", wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "4"), wrappers.GPUFlavorQuotas("a100", "64", "512Gi", "8"))
	shards := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	f.Create(wrappers.MakeBatchAccount("spill", f.Namespace).Shards(shards...).
		AssignJob("first", "0-3", shards[:4]...).AssignJob("second", "0-3", shards[4:]...).Obj())
	first := wrappers.MakeJob("first", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	onKubelet(&first.Spec.Template.Spec, envVar(worker.EnvShards, "A,B,C,D"), envVar(worker.EnvWorkSeconds, "45"))
	f.Create(first)
	framework.WaitForWorkloadCondition(t, framework.WorkloadFor(t, first), kueue.WorkloadAdmitted, metav1.ConditionTrue)

	second := wrappers.MakeJob("second", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	onKubelet(&second.Spec.Template.Spec, envVar(worker.EnvShards, "E,F,G,H"))
	f.Create(second)
	wl := framework.WorkloadFor(t, second)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	if got := framework.AdmittedFlavors(wl)["main"]["nvidia.com/gpu"]; got != "a100" {
		t.Errorf("second admitted on GPU flavor %q, want a100 (h100 is full)", got)
	}
	if wl := framework.WorkloadFor(t, first); apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		t.Fatalf("first finished before second was admitted: the test proves nothing (raise first's work time)")
	}
	waitAccountCondition(t, f, "spill", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	for name, want := range map[string]string{"first": "h100", "second": "a100"} {
		for _, p := range framework.JobPods(t, jobStatus(t, f, name)) {
			if got := nodeGPUType(t, f, &p); got != want {
				t.Errorf("pod %s of %s ran on a %q node, want %s", p.Name, name, got, want)
			}
		}
	}
}

// TestKindPreemptionKeepsCoverage: two low-priority Jobs of two indexes carry four
// shards; index 0 of each succeeds, index 1 keeps running. A high-priority batch needs
// three of the four GPUs: Kueue evicts one Job, the Job controller stops its running pod,
// and the index that succeeded stays covered. Once the urgent batch is done the evicted
// Job is re-admitted, runs only index 1 again, and the batch is Accepted.
func TestKindPreemptionKeepsCoverage(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	preemptionQueue(t, f)
	setGate(t, f, "1")
	f.Create(wrappers.MakeBatchAccount("cross", f.Namespace).Shards("A", "B", "C", "D").
		AssignJob("j", "0-1", "A", "B").AssignJob("k", "0-1", "C", "D").Obj())
	jobs := map[string]*batchv1.Job{}
	for name, shards := range map[string]string{"j": "A,B", "k": "C,D"} {
		job := wrappers.MakeJob(name, f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).BackoffLimit(4).PriorityClass(f.Namespace + "-low").Obj()
		onKubelet(&job.Spec.Template.Spec, envVar(worker.EnvShards, shards), heldIndexes())
		f.Create(job)
		jobs[name] = job
	}
	waitAccount(t, f, "cross", "2/4 shards covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 2 })

	urgent := wrappers.MakeJob("urgent", f.Namespace).Indexed(3).Parallelism(3).Queue("default").GPU(1).PriorityClass(f.Namespace + "-high").Obj()
	onKubelet(&urgent.Spec.Template.Spec, envVar(worker.EnvShards, "U0,U1,U2"))
	f.Create(urgent)
	var evicted *batchv1.Job
	framework.Eventually(t, framework.DefaultTimeout, "one of j, k evicted by the urgent batch", func() (bool, string, error) {
		for _, job := range jobs {
			if apimeta.IsStatusConditionTrue(framework.WorkloadFor(t, job).Status.Conditions, kueue.WorkloadEvicted) {
				evicted = job
				return true, "", nil
			}
		}
		return false, "no eviction yet", nil
	})
	// The evicted Job's retry of index 1 must finish: open the gate before it is re-admitted.
	setGate(t, f, "")
	ba := waitAccount(t, f, "cross", "eviction recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/"+evicted.Name)
		return tg != nil && tg.Workload != nil && tg.Workload.Evicted
	})
	if ba.Status.Shards.Covered != 2 {
		t.Errorf("coverage after eviction = %d, want 2 kept", ba.Status.Shards.Covered)
	}
	framework.WaitFor(t, urgent, framework.DefaultTimeout, "urgent Complete", func(j *batchv1.Job) bool { return j.Status.Succeeded == 3 })
	// The Job that kept running still holds index 1: stop that pod; its retry reads the open gate.
	for name, job := range jobs {
		if name == evicted.Name {
			continue
		}
		for _, p := range framework.JobPods(t, job) {
			if p.Status.Phase == corev1.PodRunning {
				if err := f.Client.Delete(f.Ctx, &p); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		}
	}
	ba = waitAccount(t, f, "cross", "all four shards covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 4 })
	waitAccountCondition(t, f, "cross", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if tg := target(ba, "job/"+evicted.Name); tg.CompletedIndexes != "0,1" || tg.UID != evicted.UID {
		t.Errorf("evicted target after re-admission = %+v; same identity, both indexes", tg)
	}
	var index0 int
	for _, p := range framework.JobPods(t, evicted) {
		if framework.PodIndex(&p) == 0 {
			index0++
		}
	}
	if index0 != 1 {
		t.Errorf("evicted Job %s ran index 0 %d times; want once, before the eviction", evicted.Name, index0)
	}
}

// TestKindManagerLeaderDeletedMidBatch: the Helm release runs two manager replicas. While
// the six pods of a results batch run, the manager pod holding the leader Lease is
// deleted; the standby takes the Lease, the pods that finish meanwhile are held by the
// result finalizer, and no result is lost: all six are recorded, the batch is Accepted,
// every pod released.
func TestKindManagerLeaderDeletedMidBatch(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	h100Queue(f, "8")
	shards := []string{"A", "B", "C", "D", "E", "F"}
	kindResultsAccount(t, f, "ha", "j", shards...)
	job := wrappers.MakeJob("j", f.Namespace).Indexed(6).Parallelism(6).Queue("default").GPU(1).Obj()
	// Every index works for 25 s: they finish across the failover (a 15 s Lease).
	onKubelet(&job.Spec.Template.Spec, envVar(worker.EnvShards, strings.Join(shards, ",")), envVar(worker.EnvWorkSeconds, "25"))
	f.Create(job)
	framework.RunningPods(t, job, 6)

	before := leaseHolder(t, f)
	pod := strings.SplitN(before, "_", 2)[0]
	if err := f.Client.Delete(f.Ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: releaseNamespace}}); err != nil {
		t.Fatalf("delete the leader %s: %v", pod, err)
	}
	t.Logf("deleted the leader %s", pod)
	framework.Eventually(t, 2*framework.DefaultTimeout, "a new leader", func() (bool, string, error) {
		h := leaseHolder(t, f)
		return h != "" && !strings.HasPrefix(h, pod+"_"), h, nil
	})
	waitAccountCondition(t, f, "ha", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if got := len(recordedResults(t, f, "ha")); got < 6 {
		t.Errorf("%d results recorded, want all 6", got)
	}
	noHeldPods(t, f)
}

func leaseHolder(t *testing.T, f *framework.Framework) string {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "batchledger.batchledger.dev", Namespace: releaseNamespace}}
	f.Get(l)
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestKindResultOfPodDeletedRightAfterSuccess: each pod of a results batch is deleted the
// moment its kubelet reports it Succeeded. The result finalizer keeps the pod (and its
// termination message) until the result is recorded; then the pod goes. Nothing is lost.
func TestKindResultOfPodDeletedRightAfterSuccess(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	h100Queue(f, "8")
	kindResultsAccount(t, f, "gone", "j", "A", "B", "C")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(3).Parallelism(3).Queue("default").GPU(1).Obj()
	onKubelet(&job.Spec.Template.Spec, envVar(worker.EnvShards, "A,B,C"))
	f.Create(job)
	deleted := map[string]bool{}
	framework.Eventually(t, 2*framework.DefaultTimeout, "three pods deleted right after success", func() (bool, string, error) {
		for _, p := range framework.JobPods(t, job) {
			if p.Status.Phase == corev1.PodSucceeded && !deleted[p.Name] {
				if err := f.Client.Delete(f.Ctx, &p); err != nil && !apierrors.IsNotFound(err) {
					return false, "", err
				}
				deleted[p.Name] = true
			}
		}
		return len(deleted) == 3, "", nil
	})
	waitAccountCondition(t, f, "gone", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	recorded := map[string]bool{}
	for _, r := range recordedResults(t, f, "gone") {
		recorded[r.Pod] = r.RejectReason == ""
	}
	for name := range deleted {
		if !recorded[name] {
			t.Errorf("the result of deleted pod %s is not recorded (recorded: %v)", name, recorded)
		}
	}
	framework.Eventually(t, framework.DefaultTimeout, "the deleted pods gone", func() (bool, string, error) {
		left := 0
		for _, p := range framework.JobPods(t, job) {
			if deleted[p.Name] {
				left++
			}
		}
		return left == 0, "", nil
	})
}

// HelmUninstallEnv, set to "true", runs TestKindHelmUninstall: it uninstalls the Helm
// release, so make test-e2e-kind runs it last, alone.
const HelmUninstallEnv = "E2E_HELM_UNINSTALL"

// TestKindHelmUninstall: pods of a results batch finish while the manager is scaled to
// zero, so they stay held by the result finalizer. `helm uninstall` runs the chart's
// pre-delete hook (the manager image's `release` command): no pod is left Terminating and
// the namespace deletes.
func TestKindHelmUninstall(t *testing.T) {
	if os.Getenv(HelmUninstallEnv) != "true" {
		t.Skip("uninstalls the Helm release: make test-e2e-kind runs it last with " + HelmUninstallEnv + "=true")
	}
	f := framework.New(t, framework.OnRealKubelets())
	h100Queue(f, "8")
	kindResultsAccount(t, f, "bye", "j", "A", "B")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	onKubelet(&job.Spec.Template.Spec, envVar(worker.EnvShards, "A,B"), envVar(worker.EnvWorkSeconds, "15"))
	f.Create(job)
	framework.RunningPods(t, job, 2)
	scaleManager(t, f, 0)
	framework.Eventually(t, 2*framework.DefaultTimeout, "both pods Succeeded and held", func() (bool, string, error) {
		held := 0
		for _, p := range framework.JobPods(t, job) {
			if p.Status.Phase == corev1.PodSucceeded && slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				held++
			}
		}
		return held == 2, framework.SummarizePods(framework.JobPods(t, job)), nil
	})

	helm := os.Getenv("HELM")
	if helm == "" {
		helm = filepath.Join("..", "..", "bin", "helm")
	}
	ctx, cancel := context.WithTimeout(f.Ctx, 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, helm, "uninstall", "batchledger", "-n", releaseNamespace, "--wait", "--timeout", "2m").CombinedOutput()
	t.Logf("helm uninstall: %s", out)
	if err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if err := f.Client.Delete(f.Ctx, ns); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*framework.DefaultTimeout, "the namespace deleted, no pod left Terminating", func() (bool, string, error) {
		var pods corev1.PodList
		if err := f.Client.List(f.Ctx, &pods, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(ns), ns)
		return apierrors.IsNotFound(err) && len(pods.Items) == 0, framework.SummarizePods(pods.Items), nil
	})
}

func scaleManager(t *testing.T, f *framework.Framework, replicas int32) {
	t.Helper()
	var deps appsv1.DeploymentList
	if err := f.Client.List(f.Ctx, &deps, client.InNamespace(releaseNamespace)); err != nil {
		t.Fatal(err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		d.Spec.Replicas = &replicas
		if err := f.Client.Update(f.Ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, framework.DefaultTimeout, "manager pods gone", func() (bool, string, error) {
		var pods corev1.PodList
		err := f.Client.List(f.Ctx, &pods, client.InNamespace(releaseNamespace), client.MatchingLabels{"app.kubernetes.io/name": "batchledger"})
		return err == nil && len(pods.Items) == 0, framework.SummarizePods(pods.Items), err
	})
}
