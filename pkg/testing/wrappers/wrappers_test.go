package wrappers

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestClusterQueueResourceGroupCoversFirstFlavorsResources(t *testing.T) {
	cq := MakeClusterQueue("ml-team").
		Cohort("shared-gpu").
		ReclaimWithinCohort(kueue.PreemptionPolicyAny).
		ResourceGroup(
			GPUFlavorQuotas("h100", "200", "1600Gi", "64"),
			GPUFlavorQuotas("a100", "100", "800Gi", "16"),
		).Obj()

	if cq.Spec.CohortName != "shared-gpu" {
		t.Errorf("cohort = %q", cq.Spec.CohortName)
	}
	if cq.Spec.Preemption == nil || cq.Spec.Preemption.ReclaimWithinCohort != kueue.PreemptionPolicyAny {
		t.Errorf("preemption = %+v", cq.Spec.Preemption)
	}
	if cq.Spec.NamespaceSelector == nil || len(cq.Spec.NamespaceSelector.MatchLabels) != 0 {
		t.Errorf("namespaceSelector = %+v, want select-all", cq.Spec.NamespaceSelector)
	}
	rg := cq.Spec.ResourceGroups[0]
	want := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, GPU}
	if len(rg.CoveredResources) != len(want) {
		t.Fatalf("covered = %v, want %v", rg.CoveredResources, want)
	}
	for i := range want {
		if rg.CoveredResources[i] != want[i] {
			t.Errorf("covered[%d] = %s, want %s", i, rg.CoveredResources[i], want[i])
		}
	}
	if got := rg.Flavors[1].Resources[2].NominalQuota; got.Cmp(resource.MustParse("16")) != 0 {
		t.Errorf("a100 GPU quota = %s", got.String())
	}
}

func TestResourceGroupPanicsOnMismatchedFlavors(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for flavors listing different resources")
		}
	}()
	ResourceGroup(
		MakeFlavorQuotas("h100").Resource(GPU, "8").Obj(),
		MakeFlavorQuotas("a100").Resource(corev1.ResourceCPU, "8").Obj(),
	)
}

func TestFlavorQuotasLimits(t *testing.T) {
	fq := MakeFlavorQuotas("h100").Resource(GPU, "8", "", "2").Obj()
	r := fq.Resources[0]
	if r.BorrowingLimit != nil {
		t.Errorf("borrowing limit set from an empty string: %v", r.BorrowingLimit)
	}
	if r.LendingLimit == nil || r.LendingLimit.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("lending limit = %v", r.LendingLimit)
	}
}

func TestIndexedGPUJob(t *testing.T) {
	job := MakeJob("train", "ml-team").
		Indexed(8).
		Queue("default").
		GPU(1).
		Request(corev1.ResourceCPU, "8").
		BackoffLimitPerIndex(2).
		MaxFailedIndexes(5).
		SuccessPolicy(SucceededIndexes("0"), SucceededCount(6)).
		Obj()

	if *job.Spec.CompletionMode != batchv1.IndexedCompletion || *job.Spec.Completions != 8 || *job.Spec.Parallelism != 8 {
		t.Errorf("mode/completions/parallelism = %v/%d/%d", *job.Spec.CompletionMode, *job.Spec.Completions, *job.Spec.Parallelism)
	}
	if job.Labels[QueueLabel] != "default" {
		t.Errorf("queue label = %q", job.Labels[QueueLabel])
	}
	c := job.Spec.Template.Spec.Containers[0]
	if q := c.Resources.Limits[GPU]; q.Value() != 1 {
		t.Errorf("GPU limit = %s", q.String())
	}
	if q := c.Resources.Requests[GPU]; q.Value() != 1 {
		t.Errorf("GPU request = %s", q.String())
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.Value() != 8 {
		t.Errorf("cpu request = %s", q.String())
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %s", job.Spec.Template.Spec.RestartPolicy)
	}
	rules := job.Spec.SuccessPolicy.Rules
	if len(rules) != 2 || *rules[0].SucceededIndexes != "0" || *rules[1].SucceededCount != 6 {
		t.Errorf("success policy = %+v", rules)
	}
	if *job.Spec.BackoffLimitPerIndex != 2 || *job.Spec.MaxFailedIndexes != 5 {
		t.Errorf("backoffLimitPerIndex/maxFailedIndexes = %d/%d", *job.Spec.BackoffLimitPerIndex, *job.Spec.MaxFailedIndexes)
	}
}

func TestParallelismAfterIndexed(t *testing.T) {
	job := MakeJob("etl", "ns").Indexed(100).Parallelism(20).Obj()
	if *job.Spec.Completions != 100 || *job.Spec.Parallelism != 20 {
		t.Errorf("completions/parallelism = %d/%d", *job.Spec.Completions, *job.Spec.Parallelism)
	}
}

func TestGenerateNameClearsName(t *testing.T) {
	job := MakeJob("x", "ns").GenerateName("train-").Obj()
	if job.Name != "" || job.GenerateName != "train-" {
		t.Errorf("name/generateName = %q/%q", job.Name, job.GenerateName)
	}
}

func TestWrappersDoNotShareTemplates(t *testing.T) {
	base := MakeJob("", "").Indexed(4).GPU(1)
	rj := MakeReplicatedJob("workers").Job(base.Obj()).Obj()
	base.GPU(2)
	if q := rj.Template.Spec.Template.Spec.Containers[0].Resources.Limits[GPU]; q.Value() != 1 {
		t.Errorf("replicated job template changed with its source Job: GPU limit %s", q.String())
	}
}

func TestJobSet(t *testing.T) {
	js := MakeJobSet("pytorch-ddp", "ml-team").
		Queue("default").
		SuccessPolicy(jobset.OperatorAll, "workers").
		MaxRestarts(3).
		EnableDNSHostnames(true).
		ReplicatedJob(MakeReplicatedJob("leader").Job(MakeJob("", "").BackoffLimit(0).Obj()).Obj()).
		ReplicatedJob(MakeReplicatedJob("workers").Replicas(1).Job(MakeJob("", "").Indexed(4).BackoffLimit(0).GPU(1).Obj()).Obj()).
		Obj()

	if js.Labels[QueueLabel] != "default" {
		t.Errorf("queue label = %q", js.Labels[QueueLabel])
	}
	if len(js.Spec.ReplicatedJobs) != 2 || js.Spec.ReplicatedJobs[1].Name != "workers" || js.Spec.ReplicatedJobs[1].Replicas != 1 {
		t.Fatalf("replicated jobs = %+v", js.Spec.ReplicatedJobs)
	}
	if got := *js.Spec.ReplicatedJobs[1].Template.Spec.Completions; got != 4 {
		t.Errorf("workers completions = %d", got)
	}
	if js.Spec.SuccessPolicy.TargetReplicatedJobs[0] != "workers" || js.Spec.FailurePolicy.MaxRestarts != 3 || !*js.Spec.Network.EnableDNSHostnames {
		t.Errorf("policies = %+v %+v %+v", js.Spec.SuccessPolicy, js.Spec.FailurePolicy, js.Spec.Network)
	}
}

func TestWorkloadPriorityClass(t *testing.T) {
	pc := MakeWorkloadPriorityClass("high").PriorityValue(1000).Description("urgent").Obj()
	if pc.Value != 1000 || pc.Description != "urgent" || pc.Name != "high" {
		t.Errorf("priority class = %+v", pc)
	}
}

func TestLocalQueue(t *testing.T) {
	lq := MakeLocalQueue("default", "ml-team").ClusterQueue("ml-team").Obj()
	if lq.Namespace != "ml-team" || lq.Spec.ClusterQueue != "ml-team" {
		t.Errorf("local queue = %+v", lq)
	}
}

func TestResourceFlavor(t *testing.T) {
	rf := MakeResourceFlavor("h100").NodeLabel("gpu-type", "h100").Obj()
	if rf.Spec.NodeLabels["gpu-type"] != "h100" {
		t.Errorf("node labels = %v", rf.Spec.NodeLabels)
	}
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestJobStatusSettersWriteWhatTheJobControllerWrites(t *testing.T) {
	done := MakeJob("j", "ns").Indexed(4).UID("uid-j").ResourceVersion("7").Completed("0-3", 4).Complete(t0).Obj()
	if done.UID != "uid-j" || done.ResourceVersion != "7" || done.Status.CompletedIndexes != "0-3" || done.Status.Succeeded != 4 {
		t.Errorf("metadata/status = %s %s %q %d", done.UID, done.ResourceVersion, done.Status.CompletedIndexes, done.Status.Succeeded)
	}
	if c := done.Status.Conditions; len(c) != 2 || c[0].Type != batchv1.JobSuccessCriteriaMet || c[1].Type != batchv1.JobComplete ||
		c[1].Status != corev1.ConditionTrue || c[1].Reason != batchv1.JobReasonCompletionsReached || !c[1].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Complete conditions = %+v", c)
	}
	failed := MakeJob("j", "ns").Indexed(4).FailedIndexes("3").Failed(batchv1.JobReasonBackoffLimitExceeded, t0).Obj()
	if c := failed.Status.Conditions; len(c) != 2 || c[0].Type != batchv1.JobFailureTarget || c[1].Type != batchv1.JobFailed ||
		c[1].Reason != batchv1.JobReasonBackoffLimitExceeded || *failed.Status.FailedIndexes != "3" {
		t.Errorf("Failed conditions = %+v, failedIndexes %v", c, failed.Status.FailedIndexes)
	}
}

func TestJobSetChildIsLabelledAndControlledByItsJobSet(t *testing.T) {
	js := MakeJobSet("ts", "ns").Obj()
	js.UID = "uid-ts"
	child := MakeJob("ts-workers-1", "ns").JobSetChild(js, "workers", 1, 2).Obj()
	want := map[string]string{jobset.JobSetNameKey: "ts", jobset.ReplicatedJobNameKey: "workers", jobset.JobIndexKey: "1",
		"jobset.sigs.k8s.io/restart-attempt": "2"}
	for k, v := range want {
		if child.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, child.Labels[k], v)
		}
	}
	if ref := metav1.GetControllerOf(child); ref == nil || ref.Kind != "JobSet" || ref.UID != "uid-ts" {
		t.Errorf("controller = %+v", ref)
	}
}

func TestWorkloadStatusSetters(t *testing.T) {
	job := MakeJob("j", "ns").UID("uid-j").Obj()
	wl := MakeWorkload("job-j", "ns").UID("uid-wl").ForJob(job).
		Admitted("gpu", t0).FlavorAssigned("main", GPU, "h100").FlavorAssigned("main", corev1.ResourceCPU, "default").Obj()
	if ref := metav1.GetControllerOf(wl); ref == nil || ref.Kind != "Job" || ref.UID != "uid-j" {
		t.Errorf("controller = %+v", ref)
	}
	if !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		t.Errorf("conditions = %+v", wl.Status.Conditions)
	}
	if psa := wl.Status.Admission.PodSetAssignments; wl.Status.Admission.ClusterQueue != "gpu" || len(psa) != 1 ||
		psa[0].Flavors[GPU] != "h100" || psa[0].Flavors[corev1.ResourceCPU] != "default" {
		t.Errorf("admission = %+v", wl.Status.Admission)
	}
	evicted := MakeWorkload("job-j", "ns").Admitted("gpu", t0).Evicted("Preempted", t0.Add(time.Minute)).Finished(t0.Add(time.Hour)).Obj()
	if apimeta.IsStatusConditionTrue(evicted.Status.Conditions, kueue.WorkloadAdmitted) ||
		apimeta.FindStatusCondition(evicted.Status.Conditions, kueue.WorkloadEvicted).Reason != "Preempted" ||
		!apimeta.IsStatusConditionTrue(evicted.Status.Conditions, kueue.WorkloadFinished) {
		t.Errorf("after eviction and finish: %+v", evicted.Status.Conditions)
	}
}

func TestSucceededIndexPodsAreControlledAttempts(t *testing.T) {
	job := MakeJob("j", "ns").Indexed(3).UID("uid-j").Obj()
	pods := SucceededIndexPods(job, "p", t0, 0, 2, 2)
	if len(pods) != 3 {
		t.Fatalf("%d pods", len(pods))
	}
	for n, idx := range []string{"0", "2", "2"} {
		p := pods[n]
		if p.Name != "p-"+string(rune('0'+n)) || p.Annotations[batchv1.JobCompletionIndexAnnotation] != idx ||
			p.Status.Phase != corev1.PodSucceeded || !metav1.IsControlledBy(&p, job) {
			t.Errorf("pod %d = %s index %q phase %s", n, p.Name, p.Annotations[batchv1.JobCompletionIndexAnnotation], p.Status.Phase)
		}
	}
	if pods[1].UID == pods[2].UID {
		t.Error("two attempts of one index share a UID")
	}
}

func TestBatchAccountConditionReplacesItsType(t *testing.T) {
	ba := MakeBatchAccount("a", "ns").Generation(3).
		Condition("Accepted", metav1.ConditionFalse, "ResultsPending", "waiting", t0).
		Condition("Accepted", metav1.ConditionTrue, "Accepted", "done", t0.Add(time.Minute)).Obj()
	if c := ba.Status.Conditions; len(c) != 1 || c[0].Status != metav1.ConditionTrue || c[0].ObservedGeneration != 3 {
		t.Errorf("conditions = %+v", c)
	}
}

func TestIndexPodWithSidecarKeepsStatusOrder(t *testing.T) {
	job := MakeJob("j", "ns").Indexed(1).Obj()
	statuses := []corev1.ContainerStatus{{Name: "proxy"}, {Name: "worker"}} // kubelet order: by name
	p := MakeIndexPod(job, "j-0", 0).Sidecar("proxy").ContainerStatuses(statuses...).Obj()
	if len(p.Spec.Containers) != 2 || p.Spec.Containers[0].Name != "worker" || p.Spec.Containers[1].Name != "proxy" {
		t.Errorf("containers = %+v; want worker, then proxy", p.Spec.Containers)
	}
	if len(p.Status.ContainerStatuses) != 2 || p.Status.ContainerStatuses[0].Name != "proxy" {
		t.Errorf("statuses = %+v; want them in the order given", p.Status.ContainerStatuses)
	}
}
