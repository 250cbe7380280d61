package batchledger

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
