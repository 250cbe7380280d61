package installcheck

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
