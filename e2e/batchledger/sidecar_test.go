package batchledger

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestResultFromTheWorkerBesideASidecar: a worker pod with an injected "istio-proxy"
// sidecar. A kubelet lists container statuses sorted by name, so the proxy's status comes
// first (the local cluster's kwok stages do the same); only the worker reports the result,
// the proxy says "istio-proxy: shutting down". The result is read from the first container
// of the spec by default, or from the container the account names, never from the first
// status: both batches are Accepted.
func TestResultFromTheWorkerBesideASidecar(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	cases := []struct {
		account, job string
		spec         []string // container names in spec order
		named        string   // acceptance.resultContainer
	}{
		{account: "default", job: "worker-first", spec: []string{"worker", "istio-proxy"}},
		{account: "named", job: "proxy-first", spec: []string{"istio-proxy", "worker"}, named: "worker"},
	}
	for _, tc := range cases {
		ba := wrappers.MakeBatchAccount(tc.account, f.Namespace).Shards("A").AssignJob(tc.job, "0", "A").RequireResults(seedRule)
		if tc.named != "" {
			ba.ResultContainer(tc.named)
		}
		f.Create(ba.Obj())
		waitAccount(t, f, tc.account, "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
		job := wrappers.MakeJob(tc.job, f.Namespace).Indexed(1).Queue("default").GPU(1).
			Container(tc.spec[0], wrappers.DefaultImage).Sidecar(tc.spec[1], wrappers.DefaultImage).
			PodAnnotation(kwok.MessageContainerAnnotation, "worker").Obj()
		f.Create(job)
		job = jobStatus(t, f, tc.job)
		framework.RunningPods(t, job, 1)
		pod := framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
		names := []string{}
		for _, cs := range pod.Status.ContainerStatuses {
			names = append(names, cs.Name)
		}
		if !slices.Equal(names, []string{"istio-proxy", "worker"}) || pod.Status.ContainerStatuses[0].State.Terminated.Message != "istio-proxy: shutting down" {
			t.Fatalf("container statuses %v (first message %q): not in a kubelet's order", names, pod.Status.ContainerStatuses[0].State.Terminated.Message)
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("pod phase %s", pod.Status.Phase)
		}
	}
	for _, tc := range cases {
		c := waitAccountCondition(t, f, tc.account, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
		t.Logf("%s: %s", tc.account, c.Message)
	}
}

// TestPodTemplateCannotMoveTheResultContainer: an account names the container its results
// are read from. While the Job is suspended and has never started, Kubernetes lets anyone
// who may update Jobs edit its pod template's annotations: a user bound to the edit role
// points batchledger.dev/result-container at the Job's sidecar, whose message reports a
// passing result (here kwok's; in a cluster, preset with exec), and starts the Job. The
// account still reads the container it names, whose message is no result: the batch is
// not Accepted.
func TestPodTemplateCannotMoveTheResultContainer(t *testing.T) {
	f := framework.New(t)
	const erin = "erin"
	bindInNamespace(f, erin, "ClusterRole", "edit")
	f.Create(wrappers.MakeBatchAccount("named", f.Namespace).Shards("A").AssignJob("j", "0", "A").RequireResults(seedRule).ResultContainer("worker").Obj())
	waitAccount(t, f, "named", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	// Suspended without a queue: Kueue leaves it alone until erin starts it.
	job := wrappers.MakeJob("j", f.Namespace).Indexed(1).Suspend(true).GPU(1).
		Container("worker", wrappers.DefaultImage).Sidecar("istio-proxy", wrappers.DefaultImage).
		PodAnnotation(kwok.MessageContainerAnnotation, "istio-proxy").Obj()
	f.Create(job)

	as := impersonating(t, erin)
	for _, patch := range []string{
		fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"istio-proxy"}}}}}`, v1alpha1.AnnotationResultContainer),
		`{"spec":{"suspend":false}}`,
	} {
		if err := as.Patch(f.Ctx, job.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatalf("%s (edit) patches the Job with %s: %v", erin, patch, err)
		}
	}
	job = jobStatus(t, f, "j")
	if got := job.Spec.Template.Annotations[v1alpha1.AnnotationResultContainer]; got != "istio-proxy" {
		t.Fatalf("the Job's template names result container %q, want istio-proxy", got)
	}
	framework.RunningPods(t, job, 1)
	pod := framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	if pod.Annotations[v1alpha1.AnnotationResultContainer] != "istio-proxy" {
		t.Fatalf("the pod's annotations %v do not name the sidecar", pod.Annotations)
	}
	ba := waitAccount(t, f, "named", "the pod's result recorded", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Status.Results.Recorded == 1
	})
	if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, ""); !ok {
		t.Errorf("Accepted: %s; want False (the worker container's message is no result)", state)
	}
	if ba.Status.Shards.Accepted != 0 {
		t.Errorf("%d shards accepted, want 0", ba.Status.Shards.Accepted)
	}
}
