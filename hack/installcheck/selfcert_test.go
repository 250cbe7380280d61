package installcheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestSelfManagedCertificatesOnLocalCluster installs config/default (everything but the
// Deployment) on a local control plane and runs the manager as a process with the
// Deployment's own flags and the ServiceAccount's token, so that the generated RBAC is
// what it gets. The test plays the kubelet: it copies the Secret into the certificate
// folder, as a secret volume would. It checks that
//   - the manager fills the empty Secret with a CA and a serving certificate for the
//     webhook Service, and stays unready until the files are there;
//   - it injects the CA into both webhook configurations and serves a certificate the
//     API server will accept under the Service's DNS name;
//   - it holds the leader Lease, reconciles a BatchAccount and exports its gauges on the
//     secure metrics endpoint, to the metrics-reader role only; deleting the account
//     deletes its series.
//
// It needs the cluster binaries (make binaries) and is skipped with -short or without them.
func TestSelfManagedCertificatesOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	root, tools := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	objs, err := tools.RenderKustomize(filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	d := deployment(t, objs)
	flags := effectiveFlags(d.Spec.Template.Spec.Containers[0].Args)
	if flags["cert-management"] != "self" {
		t.Fatalf("config/default runs --cert-management=%s, want self", flags["cert-management"])
	}
	ns := d.Namespace

	bin, err := localcluster.BuildBatchledger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Log: testLog{t}})
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			t.Skipf("local cluster binaries missing: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range objs.Keys() {
		if k.Kind == "Deployment" {
			continue
		}
		u := objs[k].DeepCopy()
		if err := cl.Create(ctx, u); err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
	}

	// The manager maps its kinds through discovery at start: wait until the API server
	// serves the CRDs (Established), as a Deployment rolled out after them would find them.
	for _, k := range objs.Keys() {
		if k.Kind != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			crd := objs[k].DeepCopy()
			if err := cl.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", k.Name, err)
		}
	}

	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kubeconfig, c.RESTConfig.Host, c.CA.CertPEM, token(d.Spec.Template.Spec.ServiceAccountName))

	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	health, metrics, webhook := ports[0], ports[1], ports[2]
	args := []string{"--kubeconfig=" + kubeconfig}
	for name, v := range flags {
		switch name {
		case "health-probe-bind-address":
			v = fmt.Sprintf("127.0.0.1:%d", health)
		case "metrics-bind-address":
			v = fmt.Sprintf("127.0.0.1:%d", metrics)
		case "webhook-port":
			v = fmt.Sprint(webhook)
		case "webhook-cert-dir":
			v = certDir
		case "zap-log-level":
			v = "2"
		}
		args = append(args, "--"+name+"="+v)
	}
	args = append(args, "--webhook-host=127.0.0.1")
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed when the manager exits, with its error in exitErr.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("manager log:\n%s", localcluster.Tail(logFile.Name(), 60))
		}
	})
	poll := func(what string, timeout time.Duration, cond func() (bool, error)) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			select {
			case <-exited:
				return false, fmt.Errorf("manager exited: %v", exitErr)
			default:
			}
			return cond()
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s", what)
	}

	// The manager writes the CA and serving certificate into the Secret the manifests
	// created empty.
	secretKey := types.NamespacedName{Namespace: ns, Name: flags["webhook-cert-secret"]}
	var secret corev1.Secret
	poll("the Secret is filled", time.Minute, func() (bool, error) {
		if err := cl.Get(ctx, secretKey, &secret); err != nil {
			return false, err
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["ca.crt"]) > 0, nil
	})
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	if code := httpStatus(t, readyz); code == http.StatusOK {
		t.Fatal("ready before the certificate files exist: a Service would route admission requests to it")
	}

	// Play the kubelet: the secret volume shows the Secret's keys as files.
	go func() {
		var last []byte
		for ctx.Err() == nil {
			var s corev1.Secret
			if err := cl.Get(ctx, secretKey, &s); err == nil && !bytes.Equal(s.Data["tls.crt"], last) {
				for _, k := range []string{"ca.crt", "tls.key", "tls.crt"} {
					_ = os.WriteFile(filepath.Join(certDir, k+".tmp"), s.Data[k], 0o600)
					_ = os.Rename(filepath.Join(certDir, k+".tmp"), filepath.Join(certDir, k))
				}
				last = s.Data["tls.crt"]
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	poll("the manager becomes ready", 2*time.Minute, func() (bool, error) { return httpStatus(t, readyz) == http.StatusOK, nil })

	// Both configurations carry the CA, and the server's certificate verifies under the
	// Service's DNS name, as the API server checks it.
	if err := cl.Get(ctx, secretKey, &secret); err != nil {
		t.Fatal(err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	for _, get := range []struct {
		name string
		obj  client.Object
		ca   func() [][]byte
	}{
		{flags["mutating-webhook-configuration"], &mwc, func() (out [][]byte) {
			for _, w := range mwc.Webhooks {
				out = append(out, w.ClientConfig.CABundle)
			}
			return out
		}},
		{flags["validating-webhook-configuration"], &vwc, func() (out [][]byte) {
			for _, w := range vwc.Webhooks {
				out = append(out, w.ClientConfig.CABundle)
			}
			return out
		}},
	} {
		if err := cl.Get(ctx, types.NamespacedName{Name: get.name}, get.obj); err != nil {
			t.Fatal(err)
		}
		for _, ca := range get.ca() {
			if !bytes.Equal(ca, secret.Data["ca.crt"]) {
				t.Errorf("%s: caBundle is not the Secret's CA", get.name)
			}
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatal("ca.crt is not PEM")
	}
	serverName := fmt.Sprintf("%s.%s.svc", flags["webhook-service"], ns)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", webhook), &tls.Config{RootCAs: pool, ServerName: serverName})
	if err != nil {
		t.Fatalf("webhook server certificate does not verify for %s: %v", serverName, err)
	}
	_ = conn.Close()

	// The API server cannot reach the webhook Service here (no pod network), so let it
	// ignore the webhooks from now on and check the controller itself.
	for _, obj := range []client.Object{&mwc, &vwc} {
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		switch w := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range w.Webhooks {
				w.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range w.Webhooks {
				w.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}
		}
		if err := cl.Patch(ctx, obj, patch); err != nil {
			t.Fatal(err)
		}
	}
	poll("the leader Lease is held", time.Minute, func() (bool, error) {
		var l coordinationv1.Lease
		err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "batchledger.batchledger.dev"}, &l)
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", client.IgnoreNotFound(err)
	})

	ba := &v1alpha1.BatchAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "install-check"},
		Spec: v1alpha1.BatchAccountSpec{
			InputRevision: "D", ModelRevision: "m1",
			Shards:      v1alpha1.ShardPopulation{Names: []string{"A", "B", "C"}},
			Assignments: []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j"}, Indexes: "0-2", Shards: []string{"A", "B", "C"}}},
		},
	}
	if err := cl.Create(ctx, ba); err != nil {
		t.Fatal(err)
	}
	poll("the account is reconciled", time.Minute, func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(ba), ba)
		return err == nil && ba.Status.Shards.Total == 3, err
	})

	// Metrics: HTTPS, only for callers allowed to get /metrics.
	series := `batchledger_account_shards{account="install-check",namespace="default"} 3`
	scrape := func(sa string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics), nil)
		req.Header.Set("Authorization", "Bearer "+token(sa))
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("scrape as %s: %v", sa, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, sa := range []string{"stranger", "scraper"} {
		if err := cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "install-check-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "batchledger-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}); err != nil {
		t.Fatal(err)
	}
	if code, _ := scrape("stranger"); code != http.StatusForbidden {
		t.Errorf("a service account without the metrics-reader role scraped with status %d, want 403", code)
	}
	poll("the account's gauges are scraped", 30*time.Second, func() (bool, error) {
		code, body := scrape("scraper")
		return code == http.StatusOK && strings.Contains(body, series), nil
	})
	if err := cl.Delete(ctx, ba); err != nil {
		t.Fatal(err)
	}
	poll("the deleted account's series are gone", 30*time.Second, func() (bool, error) {
		code, body := scrape("scraper")
		return code == http.StatusOK && !strings.Contains(body, `account="install-check"`), nil
	})
	if err := cl.Get(ctx, client.ObjectKeyFromObject(ba), ba); !apierrors.IsNotFound(err) {
		t.Errorf("account still there: %v", err)
	}
}

// testLog sends the local cluster's start-up lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func writeKubeconfig(t *testing.T, path, server string, ca []byte, token string) {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: manager
  user:
    token: %s
contexts:
- name: manager
  context:
    cluster: local
    user: manager
current-context: manager
`, server, base64.StdEncoding.EncodeToString(ca), token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for range n {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out
}
