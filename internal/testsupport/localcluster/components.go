package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
)

// startControlPlane starts etcd and kube-apiserver and writes the admin kubeconfig.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	pki := filepath.Join(c.StateDir, "pki")

	etcdBin, _ := c.bins.find(binEtcd)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd, err := c.startProcess(procSpec{name: "etcd", args: []string{etcdBin,
		"--name=default",
		"--data-dir=" + filepath.Join(c.StateDir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// Test data is disposable; fsync would dominate etcd's cost on a small machine.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}})
	if err != nil {
		return err
	}
	if err := waitReady(ctx, etcd, time.Minute, func() error { return httpOK(ctx, plainHTTP, etcdURL+"/health") }); err != nil {
		return err
	}
	c.logf("etcd ready on %s", etcdURL)

	token := randomToken()
	tokens := filepath.Join(pki, "tokens.csv")
	if err := c.writeTokens(tokens, token); err != nil {
		return err
	}
	if err := c.writeKubeconfig(apiPort, token); err != nil {
		return err
	}
	if err := c.writeIdentityKubeconfigs(apiPort); err != nil {
		return err
	}
	apiBin, _ := c.bins.find(binAPIServer)
	api, err := c.startProcess(procSpec{name: "kube-apiserver", args: []string{apiBin,
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + filepath.Join(pki, "apiserver"),
		"--tls-cert-file=" + filepath.Join(pki, "apiserver", "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(pki, "apiserver", "tls.key"),
		"--token-auth-file=" + tokens,
		// Without client and request-header CAs the controller manager and scheduler log
		// authentication errors every few seconds.
		"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--requestheader-client-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-allowed-names=front-proxy-client",
		"--authorization-mode=RBAC",
		// As hardened clusters run it: setting an owner reference with blockOwnerDeletion
		// needs update on the owner's finalizers, which only RBAC of a component's own
		// identity (not the admin's) can show missing.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		// There is no kube-proxy or real node network: never publish endpoints for the
		// kubernetes Service.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		fmt.Sprintf("--profiling=%t", c.apiProfiling),
	}})
	if err != nil {
		return err
	}
	hc, err := c.apiHTTPClient(token)
	if err != nil {
		return err
	}
	readyz := fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort)
	if err := waitReady(ctx, api, 2*time.Minute, func() error { return httpOK(ctx, hc, readyz) }); err != nil {
		return err
	}
	c.logf("kube-apiserver ready on https://127.0.0.1:%d", apiPort)
	return nil
}

// apiHTTPClient is a raw HTTP client for the apiserver's health endpoints.
func (c *Cluster) apiHTTPClient(token string) (*http.Client, error) {
	pool := x509.NewCertPool()
	pool.AddCert(c.CA.Cert)
	return &http.Client{Timeout: 2 * time.Second, Transport: &bearer{token: token, rt: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}}, nil
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// selfSignedHTTP reads the health endpoints of the controller manager and scheduler, which
// serve an in-memory self-signed certificate; /healthz needs no authentication there.
var selfSignedHTTP = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe only
}}

// startKCMAndScheduler starts kube-controller-manager (all default controllers) and
// kube-scheduler and waits for both to be healthy.
func (c *Cluster) startKCMAndScheduler(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	// args are the flags both share: the admin kubeconfig for everything (the controller
	// manager's controllers then act as their own ServiceAccounts), HTTPS on a loopback
	// port, no leader election (there is one of each), no profiling.
	args := func(bin string, port int, more ...string) []string {
		path, _ := c.bins.find(bin)
		return append([]string{path,
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--leader-elect=false",
			"--profiling=false",
		}, more...)
	}
	pki := filepath.Join(c.StateDir, "pki")
	kcm, err := c.startProcess(procSpec{name: "kube-controller-manager", args: args(binKCM, ports[0],
		"--service-account-private-key-file="+filepath.Join(pki, "sa.key"),
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--cluster-name=batchledger-local",
		// Each controller acts as its own ServiceAccount in kube-system (the garbage
		// collector as generic-garbage-collector, ...), as under kubeadm and kind, so that
		// admission policies naming them see the same users as on a real cluster.
		"--use-service-account-credentials=true",
	)})
	if err != nil {
		return err
	}
	sched, err := c.startProcess(procSpec{name: "kube-scheduler", args: args(binScheduler, ports[1])})
	if err != nil {
		return err
	}
	for _, p := range []struct {
		proc *process
		port int
	}{{kcm, ports[0]}, {sched, ports[1]}} {
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", p.port)
		if err := waitReady(ctx, p.proc, 2*time.Minute, func() error { return httpOK(ctx, selfSignedHTTP, url) }); err != nil {
			return err
		}
		c.logf("%s ready", p.proc.name)
	}
	return nil
}

// startKwokAndNodes starts kwok with the stages of package kwok, creates the fake nodes
// and waits until they are Ready and schedulable (the node lifecycle controller of
// kube-controller-manager removes the not-ready taint).
func (c *Cluster) startKwokAndNodes(ctx context.Context, nodes []NodeSpec) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.StateDir, "kwok")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stages := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(stages, kwok.Stages(), 0o644); err != nil {
		return err
	}
	kwokBin, _ := c.bins.find(binKwok)
	kw, err := c.startProcess(procSpec{name: "kwok", args: []string{kwokBin,
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + stages,
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		fmt.Sprintf("--server-address=127.0.0.1:%d", ports[0]),
		"--node-ip=127.0.0.1",
		"--cidr=10.244.0.1/16",
		"--node-lease-duration-seconds=40",
	}, env: []string{
		// kwok also loads ~/.kwok/kwok.yaml; a private HOME keeps a user's file out.
		"HOME=" + dir,
	}})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := c.client.Create(ctx, n.node()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	err = waitReady(ctx, kw, 2*time.Minute, func() error {
		for _, n := range nodes {
			node := &corev1.Node{}
			if err := c.client.Get(ctx, keyOf(n.Name), node); err != nil {
				return err
			}
			if !nodeSchedulable(node) {
				return fmt.Errorf("node %s not Ready and untainted yet (taints %v)", n.Name, node.Spec.Taints)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.logf("kwok ready with %d nodes", len(nodes))
	return nil
}
