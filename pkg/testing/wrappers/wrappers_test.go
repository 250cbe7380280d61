package wrappers

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
