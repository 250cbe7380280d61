package installcheck

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
)

// startBareCluster starts a local control plane without Kueue and JobSet for one test
// (stopped when it ends) and returns its controller-runtime client and a clientset, both
// as the cluster admin. It skips the test when the cluster binaries are missing (make
// binaries).
func startBareCluster(ctx context.Context, t *testing.T) (*localcluster.Cluster, client.Client, kubernetes.Interface) {
	t.Helper()
	c, err := localcluster.Start(ctx, localcluster.Options{Log: testLog{t}, SkipKueue: true, SkipJobSet: true})
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			t.Skipf("local cluster binaries missing: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	admin, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return c, c.Client(), admin
}

// createPodNamespace creates namespace ns with its default ServiceAccount, which pod
// admission needs and which the controller manager would create only in its own time.
func createPodNamespace(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// bothInstalls renders the two installs the local-cluster checks apply: config/default
// ("kustomize") and the chart as release ledger in namespace ops ("chart").
func bothInstalls(t *testing.T, root string, tools Tools) map[string]Objects {
	t.Helper()
	return map[string]Objects{
		"kustomize": mustKustomize(t, tools, filepath.Join(root, "config", "default")),
		"chart":     mustChartAs(t, tools, filepath.Join(root, "charts", "batchledger"), "ledger", "ops"),
	}
}

// createIdlePod creates, as the admin, a pod of meta (namespace included) that never runs:
// no node matches it, so nothing but the test (kwok's delete stage clears finalizers, for
// one) touches it. When the test ends it is let go: every finalizer removed, then deleted.
func createIdlePod(ctx context.Context, t *testing.T, admin kubernetes.Interface, meta metav1.ObjectMeta) *corev1.Pod {
	t.Helper()
	p, err := admin.CoreV1().Pods(meta.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{"batchledger.dev/no-such-node": "true"},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "worker", Image: "registry.example/worker:1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pods := admin.CoreV1().Pods(p.Namespace)
		_, _ = pods.Patch(context.Background(), p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	return p
}

// deleteHeldPod deletes p as the admin and returns it as its finalizers hold it: being
// deleted, not gone.
func deleteHeldPod(ctx context.Context, t *testing.T, admin kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	pods := admin.CoreV1().Pods(p.Namespace)
	if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("the deleted pod is not held by its finalizers: %v", err)
	}
	return got
}

// waitTypeChecked waits until the API server has type-checked the ValidatingAdmissionPolicy
// policy against the pod schema, and reports each expression warning (a field named
// wrongly, mismatched types) as an error.
func waitTypeChecked(ctx context.Context, t *testing.T, admin kubernetes.Interface, policy string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		vap, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, policy, metav1.GetOptions{})
		if err != nil || vap.Status.ObservedGeneration != vap.Generation || vap.Status.TypeChecking == nil {
			return false, err
		}
		if w := vap.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			t.Errorf("policy %s: type-checking warnings %s", policy, jsonString(w))
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("policy %s was never type-checked: %v", policy, err)
	}
}
