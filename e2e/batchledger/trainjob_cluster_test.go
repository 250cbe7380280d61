package batchledger

import (
	"fmt"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestTrainJobRunsUnderKueueOnTheLocalCluster: a TrainJob of 3 nodes on Trainer's
// torch-distributed runtime, queued through a LocalQueue that does not exist yet, waits
// suspended; once the queue is there Kueue admits its Workload (owned by the TrainJob) on
// the h100 flavor, the Trainer unsuspends the JobSet it rendered, whose "node" child Job is
// Indexed with 3 completions; kwok runs its 3 pods to success, the real Job controller
// completes the Job and the TrainJob reports Complete. Every relation is logged for the
// TrainJob target kind.
func TestTrainJobRunsUnderKueueOnTheLocalCluster(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	skipWithoutTrainJobs(t, f)

	tj := wrappers.MakeTrainJob("llm", f.Namespace, localcluster.TrainerRuntime).
		NumNodes(3).Queue("default").GPU(2).Obj()
	f.Create(tj)
	if !ptr.Deref(tj.Spec.Suspend, false) {
		t.Errorf("TrainJob created with suspend %v; want Kueue's webhook to suspend it", tj.Spec.Suspend)
	}

	// No LocalQueue yet: the Workload waits, and so does everything the Trainer rendered.
	wl := trainJobWorkload(t, f, tj)
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: tj.Name}}
	framework.Eventually(t, framework.DefaultTimeout, "JobSet "+tj.Name, func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(js), js)
		if apierrors.IsNotFound(err) {
			return false, "not rendered yet", nil
		}
		return err == nil, "", err
	})
	if !ptr.Deref(js.Spec.Suspend, false) {
		t.Errorf("JobSet of a queued TrainJob has suspend %v, want true", js.Spec.Suspend)
	}
	if owner := metav1.GetControllerOf(js); owner == nil || owner.Kind != trainer.TrainJobKind || owner.UID != tj.UID {
		t.Errorf("JobSet controller = %+v, want TrainJob %s (%s)", owner, tj.Name, tj.UID)
	}
	t.Logf("JobSet %s while queued: suspend=%v labels=%v annotations=%v ownerReferences=%s",
		js.Name, ptr.Deref(js.Spec.Suspend, false), js.Labels, js.Annotations, ownerRefs(js))
	var jobs batchv1.JobList
	if err := f.Client.List(f.Ctx, &jobs, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if !ptr.Deref(j.Spec.Suspend, false) {
			t.Errorf("child Job %s runs before admission (suspend %v)", j.Name, j.Spec.Suspend)
		}
	}

	h100Queue(f, "8")
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	flavors := framework.AdmittedFlavors(wl)
	if len(flavors) != 1 || flavors[localcluster.TrainerNodeJob][string(wrappers.GPU)] != "h100" {
		t.Errorf("admitted flavors = %v, want podset %q on h100 GPUs", flavors, localcluster.TrainerNodeJob)
	}
	t.Logf("Workload %s: labels=%v annotations=%v ownerReferences=%s podSets=%s", wl.Name, wl.Labels, wl.Annotations, ownerRefs(wl), podSets(wl))

	framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet unsuspended", func(js *jobset.JobSet) bool {
		return !ptr.Deref(js.Spec.Suspend, false)
	})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: js.Name + "-" + localcluster.TrainerNodeJob + "-0"}}
	framework.WaitFor(t, job, framework.DefaultTimeout, "unsuspended", func(j *batchv1.Job) bool {
		return !ptr.Deref(j.Spec.Suspend, false)
	})
	if ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) != batchv1.IndexedCompletion ||
		ptr.Deref(job.Spec.Completions, 0) != 3 || ptr.Deref(job.Spec.Parallelism, 0) != 3 {
		t.Errorf("node Job %s: completionMode %v completions %v parallelism %v, want Indexed 3 3",
			job.Name, ptr.Deref(job.Spec.CompletionMode, ""), ptr.Deref(job.Spec.Completions, 0), ptr.Deref(job.Spec.Parallelism, 0))
	}
	if owner := metav1.GetControllerOf(job); owner == nil || owner.Kind != "JobSet" || owner.UID != js.UID {
		t.Errorf("node Job controller = %+v, want JobSet %s", owner, js.Name)
	}
	t.Logf("child Job %s: labels=%v annotations=%v ownerReferences=%s", job.Name, job.Labels, job.Annotations, ownerRefs(job))

	pods := framework.RunningPods(t, job, 3)
	for _, p := range pods {
		if got := p.Spec.NodeSelector[localcluster.GPUTypeLabel]; got != "h100" {
			t.Errorf("pod %s nodeSelector %v, want %s=h100 from the admitted flavor", p.Name, p.Spec.NodeSelector, localcluster.GPUTypeLabel)
		}
	}
	t.Logf("pod %s: labels=%v annotations=%v ownerReferences=%s", pods[0].Name, pods[0].Labels, pods[0].Annotations, ownerRefs(&pods[0]))
	for i := range 3 {
		framework.FinishIndexPod(t, job, i, 0, "")
	}

	framework.WaitForJobCondition(t, job, batchv1.JobComplete)
	if job.Status.CompletedIndexes != "0-2" || job.Status.Succeeded != 3 {
		t.Errorf("node Job completed %q succeeded %d, want 0-2 and 3", job.Status.CompletedIndexes, job.Status.Succeeded)
	}
	framework.WaitFor(t, tj, framework.DefaultTimeout, "TrainJob Complete", func(tj *trainer.TrainJob) bool {
		return apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
	})
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadFinished, metav1.ConditionTrue)
	t.Logf("TrainJob %s: %s", tj.Name, framework.StatusYAML(tj))
	for _, p := range tj.Spec.RuntimePatches {
		patch, _ := yaml.Marshal(p)
		t.Logf("TrainJob %s runtime patch:\n%s", tj.Name, patch)
	}

	// The JobSet carries the TrainJob's queue-name label, yet Kueue gives it no Workload of
	// its own: its owner, the TrainJob, is the job Kueue manages.
	var wls kueue.WorkloadList
	if err := f.Client.List(f.Ctx, &wls, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(wls.Items) != 1 {
		var names []string
		for i := range wls.Items {
			names = append(names, wls.Items[i].Name+" "+ownerRefs(&wls.Items[i]))
		}
		t.Errorf("Workloads in the namespace: %v, want only the TrainJob's %s", names, wl.Name)
	}
	f.Get(js)
	t.Logf("JobSet %s when done: labels=%v annotations=%v", js.Name, js.Labels, js.Annotations)
}

// skipWithoutTrainJobs skips a test on a cluster that does not serve TrainJobs (an
// existing cluster without Kubeflow Trainer).
func skipWithoutTrainJobs(t *testing.T, f *framework.Framework) {
	t.Helper()
	if _, err := f.Client.RESTMapper().RESTMapping(trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind(), trainer.GroupVersion.Version); err != nil {
		t.Skipf("the cluster serves no TrainJobs (run Kubeflow Trainer, framework.WithTrainer): %v", err)
	}
}

// admittedTwoNodeTrainJob creates, on the h100 queue, the account "llm" requiring the
// results of shards A and B from indexes 0-1 of TrainJob llm's node Job, waits for the
// controller to observe it, then creates that TrainJob of 2 nodes and waits for Kueue to
// admit its Workload.
func admittedTwoNodeTrainJob(t *testing.T, f *framework.Framework) (*trainer.TrainJob, *kueue.Workload) {
	t.Helper()
	h100Queue(f, "8")
	f.Create(wrappers.MakeBatchAccount("llm", f.Namespace).Shards("A", "B").
		AssignTrainJob("llm", localcluster.TrainerNodeJob, 0, "0-1", "0-1").RequireResults(seedRule).Obj())
	waitAccount(t, f, "llm", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	tj := wrappers.MakeTrainJob("llm", f.Namespace, localcluster.TrainerRuntime).NumNodes(2).Queue("default").GPU(1).Obj()
	f.Create(tj)
	wl := trainJobWorkload(t, f, tj)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	return tj, wl
}

// trainJobWorkload waits for the Workload Kueue creates for the TrainJob: the one whose
// controller is the TrainJob.
func trainJobWorkload(t *testing.T, f *framework.Framework, tj *trainer.TrainJob) *kueue.Workload {
	t.Helper()
	var found *kueue.Workload
	framework.Eventually(t, framework.DefaultTimeout, "the Workload of TrainJob "+tj.Name, func() (bool, string, error) {
		var wls kueue.WorkloadList
		if err := f.Client.List(f.Ctx, &wls, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		var seen []string
		for i := range wls.Items {
			wl := &wls.Items[i]
			if owner := metav1.GetControllerOf(wl); owner != nil && owner.UID == tj.UID {
				if owner.Kind != trainer.TrainJobKind || owner.APIVersion != trainer.GroupVersion.String() {
					return false, "", fmt.Errorf("workload %s controller %s %s, want %s %s", wl.Name, owner.APIVersion, owner.Kind, trainer.GroupVersion, trainer.TrainJobKind)
				}
				found = wl
				return true, "", nil
			}
			seen = append(seen, wl.Name+" "+ownerRefs(wl))
		}
		return false, "workloads: " + strings.Join(seen, "; "), nil
	})
	return found
}

// ownerRefs renders an object's owner references for the log: kind/name, controller and
// blockOwnerDeletion.
func ownerRefs(obj metav1.Object) string {
	var out []string
	for _, r := range obj.GetOwnerReferences() {
		out = append(out, fmt.Sprintf("%s %s/%s controller=%t blockOwnerDeletion=%t",
			r.APIVersion, r.Kind, r.Name, ptr.Deref(r.Controller, false), ptr.Deref(r.BlockOwnerDeletion, false)))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// podSets renders a Workload's pod sets: name and count.
func podSets(wl *kueue.Workload) string {
	var out []string
	for _, ps := range wl.Spec.PodSets {
		out = append(out, fmt.Sprintf("%s×%d", ps.Name, ps.Count))
	}
	return strings.Join(out, ",")
}
