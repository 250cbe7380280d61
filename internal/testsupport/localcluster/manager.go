package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Manager describes a controller-manager process that joins the local cluster the way Kueue
// and JobSet do: its CRDs are installed first, it serves admission (and conversion) webhooks
// on 127.0.0.1 with a certificate from the cluster CA, and its webhook configurations are
// registered as URL webhooks once it is ready. Kueue and JobSet are themselves Managers; a
// later component (the batchledger controller, with a validating webhook for its CRD and a
// mutating webhook for pods) is added through Options.Managers or Cluster.StartManager.
type Manager struct {
	// Name names the process, its log file (<state>/logs/<Name>.log), its state
	// subdirectory and the prefix of its webhook configurations.
	Name string
	// CRDs are installed (server-side apply) and awaited before the manager starts.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ConversionCRDs names CRDs whose conversion webhook the manager serves at /convert.
	ConversionCRDs []string
	// Webhooks are the manager's webhook configurations as kubebuilder generates them
	// (clientConfig.service.path names the handler); the service reference is replaced by a
	// loopback URL and the CA bundle when they are registered.
	Webhooks []client.Object
	// Command returns the command line for the environment the cluster assigned.
	Command func(env ManagerEnv) (*ManagerCommand, error)
	// ReadyPath is polled on HealthPort until it answers 200; default "/readyz".
	ReadyPath string
	// Identity, when set, is who the manager acts as (one of Identities): its kubeconfig
	// is ManagerEnv.Kubeconfig. Nil is the admin.
	Identity *Identity
	// Objects are applied (server-side) after the CRDs and before the manager starts:
	// what an install creates for it besides its Deployment, such as its namespace, its
	// RBAC and admission policies.
	Objects []client.Object
}

// ManagerEnv is what the cluster assigned to a Manager.
type ManagerEnv struct {
	// Dir is the manager's own state directory (for config files).
	Dir string
	// Kubeconfig is the kubeconfig of the manager's Identity (the admin's without one).
	Kubeconfig string
	// CertDir holds tls.crt and tls.key (serving certificate for 127.0.0.1) and ca.crt.
	CertDir string
	// Host is the address every server must bind to: 127.0.0.1.
	Host string
	// WebhookPort, HealthPort and MetricsPort are free loopback ports.
	WebhookPort, HealthPort, MetricsPort int
	// BinaryPath resolves a component binary the way the cluster does (bin/, the cache).
	BinaryPath func(name string) (string, error)
}

// MetricsURL is where the manager serves its Prometheus metrics (plain HTTP on loopback).
func (e ManagerEnv) MetricsURL() string {
	return fmt.Sprintf("http://%s:%d/metrics", e.Host, e.MetricsPort)
}

// ManagerCommand is how to run a Manager.
type ManagerCommand struct {
	// Args is the command line; Args[0] is the binary.
	Args []string
	// Env is added to the environment (KUBECONFIG is always set).
	Env []string
	// PrivateFiles maps absolute paths the manager insists on reading (for example
	// /etc/kueue/metrics/certs/tls.crt) to files in the state dir; they are made visible to
	// that process only, through a private mount namespace.
	PrivateFiles map[string]string
}

// StartManager runs a Manager against the cluster: installs its CRDs, applies its Objects,
// starts it (as its Identity), waits until it is ready, then registers its webhooks and
// conversion webhooks. A manager that exits
// during start-up fails it with an error naming its log file.
func (c *Cluster) StartManager(ctx context.Context, m Manager) error {
	if err := c.installCRDs(ctx, m.CRDs); err != nil {
		return fmt.Errorf("%s: install CRDs: %w", m.Name, err)
	}
	return c.startWithCRDs(ctx, m)
}

// startWithCRDs is StartManager once m's CRDs are served.
func (c *Cluster) startWithCRDs(ctx context.Context, m Manager) error {
	if err := c.applyObjects(ctx, m); err != nil {
		return err
	}
	env, err := c.startInstance(ctx, m.Name, m)
	if err != nil {
		return err
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", env.WebhookPort)
	if err := c.registerWebhooks(ctx, m.Name, base, m.Webhooks); err != nil {
		return fmt.Errorf("%s: register webhooks: %w", m.Name, err)
	}
	if err := c.setConversion(ctx, base+"/convert", m.ConversionCRDs); err != nil {
		return fmt.Errorf("%s: conversion webhooks: %w", m.Name, err)
	}
	c.logf("%s ready (webhooks on %s)", m.Name, base)
	return nil
}

// startInstance starts one process of m under name (its log, state directory and pid
// file) and waits until it is ready and its webhook server presents a certificate the
// API server accepts.
func (c *Cluster) startInstance(ctx context.Context, name string, m Manager) (ManagerEnv, error) {
	kubeconfig, err := c.KubeconfigFor(m.Identity)
	if err != nil {
		return ManagerEnv{}, fmt.Errorf("%s: %w", name, err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return ManagerEnv{}, err
	}
	env := ManagerEnv{
		Dir:         filepath.Join(c.StateDir, name),
		Kubeconfig:  kubeconfig,
		CertDir:     filepath.Join(c.StateDir, name, "certs"),
		Host:        "127.0.0.1",
		WebhookPort: ports[0], HealthPort: ports[1], MetricsPort: ports[2],
		BinaryPath: c.bins.find,
	}
	c.recordManager(name, env)
	if err := c.CA.IssueServing(env.CertDir, name); err != nil {
		return ManagerEnv{}, err
	}
	mc, err := m.Command(env)
	if err != nil {
		return ManagerEnv{}, fmt.Errorf("%s: %w", name, err)
	}
	p, err := c.startProcess(procSpec{
		name:         name,
		args:         mc.Args,
		env:          append([]string{"KUBECONFIG=" + env.Kubeconfig}, mc.Env...),
		privateFiles: mc.PrivateFiles,
	})
	if err != nil {
		return ManagerEnv{}, err
	}
	readyPath := m.ReadyPath
	if readyPath == "" {
		readyPath = "/readyz"
	}
	readyURL := fmt.Sprintf("http://127.0.0.1:%d%s", env.HealthPort, readyPath)
	if err := waitReady(ctx, p, 2*time.Minute, func() error { return httpOK(ctx, plainHTTP, readyURL) }); err != nil {
		return ManagerEnv{}, err
	}
	// The readiness probe says the webhook server listens; check it also presents a
	// certificate the apiserver will accept before pointing failurePolicy=Fail hooks at it.
	if err := waitReady(ctx, p, 30*time.Second, func() error { return c.tlsHandshake(env.WebhookPort) }); err != nil {
		return ManagerEnv{}, err
	}
	return env, nil
}

// applyObjects server-side applies a Manager's Objects, in order.
func (c *Cluster) applyObjects(ctx context.Context, m Manager) error {
	for _, obj := range m.Objects {
		if err := c.apply(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			return fmt.Errorf("%s: apply %T %s: %w", m.Name, obj, obj.GetName(), err)
		}
	}
	return nil
}

// registerWebhooks creates the webhook configurations, named <manager>-<name>, with URL
// client configs on loopback.
func (c *Cluster) registerWebhooks(ctx context.Context, manager, base string, objs []client.Object) error {
	// loopback points one webhook's client config at base + its service path, served with
	// a certificate of the cluster CA.
	loopback := func(name string, cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return fmt.Errorf("webhook %s has no service path", name)
		}
		u := base + *cc.Service.Path
		cc.URL, cc.Service, cc.CABundle = &u, nil, c.CA.CertPEM
		return nil
	}
	for _, obj := range objs {
		obj = obj.DeepCopyObject().(client.Object)
		obj.SetName(manager + "-" + obj.GetName())
		obj.SetResourceVersion("")
		var err error
		switch w := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range w.Webhooks {
				err = errors.Join(err, loopback(w.Webhooks[i].Name, &w.Webhooks[i].ClientConfig))
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range w.Webhooks {
				err = errors.Join(err, loopback(w.Webhooks[i].Name, &w.Webhooks[i].ClientConfig))
			}
		default:
			err = fmt.Errorf("unsupported webhook object %T", obj)
		}
		if err != nil {
			return err
		}
		if err := c.apply(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// setConversion points the named CRDs' conversion at the manager's /convert endpoint.
func (c *Cluster) setConversion(ctx context.Context, url string, crds []string) error {
	for _, name := range crds {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"conversion": apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: c.CA.CertPEM},
				ConversionReviewVersions: []string{"v1"},
			},
		}}})
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crd.Name = name
		if err := c.client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
	}
	return nil
}

func (c *Cluster) tlsHandshake(port int) error {
	pool := x509.NewCertPool()
	pool.AddCert(c.CA.Cert)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return err
	}
	return conn.Close()
}

// LoadWebhookManifests reads the webhook configurations of a kubebuilder manifests.yaml.
func LoadWebhookManifests(path string) ([]client.Object, error) {
	docs, err := readYAMLDocs(path)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, doc := range docs {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var obj client.Object
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
		case "ValidatingWebhookConfiguration":
			obj = &admissionregistrationv1.ValidatingWebhookConfiguration{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// LoadCRDs reads every CustomResourceDefinition in the given YAML files.
func LoadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		docs, err := readYAMLDocs(path)
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(doc, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				out = append(out, crd)
			}
		}
	}
	return out, nil
}

// readYAMLDocs splits a multi-document YAML file, skipping empty documents.
func readYAMLDocs(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufioReader(data))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes()
}

var plainHTTP = &http.Client{Timeout: 2 * time.Second}

// httpOK GETs url and succeeds on 200.
func httpOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
