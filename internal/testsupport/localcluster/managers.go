package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// KueueIntegrations are the Kueue job frameworks the local cluster enables;
// KueueTrainJobIntegration is added with the Trainer manager (Options.Trainer).
var KueueIntegrations = []string{"batch/job", "jobset.x-k8s.io/jobset"}

// KueueTrainJobIntegration is Kueue's job framework for Kubeflow Trainer's TrainJobs.
const KueueTrainJobIntegration = "trainer.kubeflow.org/trainjob"

// kueueWebhookGroups are the API groups whose Kueue webhooks are registered: Kueue's own and
// those of the enabled integrations. Webhooks of disabled integrations (pods, deployments,
// statefulsets, Kubeflow, Ray...) are left out: Kueue would only answer them with no-ops,
// yet every pod creation in the cluster would wait on the call.
var kueueWebhookGroups = []string{"kueue.x-k8s.io", "batch", "jobset.x-k8s.io"}

// trainerGroup is the API group of TrainJobs, whose Kueue webhooks are registered with
// KueueTrainJobIntegration.
const trainerGroup = "trainer.kubeflow.org"

// kueueMetricsCertDir is hard-coded in Kueue v0.17's main: with internal cert management
// off it reads the metrics serving certificate from here and exits if it is missing.
const kueueMetricsCertDir = "/etc/kueue/metrics/certs"

// KueueManager returns the Kueue controller manager (module version from go.mod) with the
// batch/job and JobSet integrations (and TrainJob's with trainJobs), its webhooks and the conversion webhooks of its
// multi-version CRDs.
func KueueManager(trainJobs bool) (Manager, error) {
	integrations, groups := KueueIntegrations, kueueWebhookGroups
	if trainJobs {
		integrations = append(slices.Clone(integrations), KueueTrainJobIntegration)
		groups = append(slices.Clone(groups), trainerGroup)
	}
	dir, err := ModuleDir("sigs.k8s.io/kueue")
	if err != nil {
		return Manager{}, err
	}
	crds, conv, err := componentCRDs(filepath.Join(dir, "config", "components", "crd"))
	if err != nil {
		return Manager{}, fmt.Errorf("kueue: %w", err)
	}
	hooks, err := LoadWebhookComponent(filepath.Join(dir, "config", "components", "webhook"))
	if err != nil {
		return Manager{}, fmt.Errorf("kueue: %w", err)
	}
	return Manager{
		Name:           "kueue",
		CRDs:           crds,
		ConversionCRDs: conv,
		Webhooks:       filterWebhooks(hooks, groups),
		Command: func(env ManagerEnv) (*ManagerCommand, error) {
			bin, err := env.BinaryPath(binKueue)
			if err != nil {
				return nil, err
			}
			cfg := map[string]any{
				"apiVersion": "config.kueue.x-k8s.io/v1beta2",
				"kind":       "Configuration",
				"namespace":  "kueue-system",
				"health":     map[string]any{"healthProbeBindAddress": fmt.Sprintf("%s:%d", env.Host, env.HealthPort)},
				"metrics":    map[string]any{"bindAddress": "0"},
				"webhook": map[string]any{
					"host": env.Host, "port": env.WebhookPort, "certDir": env.CertDir,
				},
				"leaderElection":             map[string]any{"leaderElect": false},
				"internalCertManagement":     map[string]any{"enable": false},
				"manageJobsWithoutQueueName": false,
				"clientConnection":           map[string]any{"qps": 100, "burst": 200},
				// Kueue copies batchledger's scope label from a Job (JobSet, TrainJob) onto the
				// Workload it makes, so that batchledger's Workload cache, selected by that
				// label, holds it without a read and a patch of batchledger's own.
				"integrations": map[string]any{"frameworks": integrations, "labelKeysToCopy": []string{v1alpha1.LabelScope}},
			}
			path, err := writeConfig(env.Dir, cfg)
			if err != nil {
				return nil, err
			}
			mc := &ManagerCommand{Args: []string{bin,
				"--config=" + path,
				// Otherwise Kueue also serves its visibility API from a hard-coded
				// /visibility certificate directory, which nothing here uses.
				"--feature-gates=VisibilityOnDemand=false",
			}}
			if !hostHasFiles(kueueMetricsCertDir, "tls.crt", "tls.key") {
				mc.PrivateFiles = map[string]string{
					kueueMetricsCertDir + "/tls.crt": filepath.Join(env.CertDir, "tls.crt"),
					kueueMetricsCertDir + "/tls.key": filepath.Join(env.CertDir, "tls.key"),
				}
			}
			return mc, nil
		},
	}, nil
}

// JobSetManager returns the JobSet controller manager (module version from go.mod) with its
// webhooks.
func JobSetManager() (Manager, error) {
	dir, err := ModuleDir("sigs.k8s.io/jobset")
	if err != nil {
		return Manager{}, err
	}
	crds, conv, err := componentCRDs(filepath.Join(dir, "config", "components", "crd"))
	if err != nil {
		return Manager{}, fmt.Errorf("jobset: %w", err)
	}
	hooks, err := LoadWebhookComponent(filepath.Join(dir, "config", "components", "webhook"))
	if err != nil {
		return Manager{}, fmt.Errorf("jobset: %w", err)
	}
	return Manager{
		Name:           "jobset",
		CRDs:           crds,
		ConversionCRDs: conv,
		Webhooks:       hooks,
		Command: func(env ManagerEnv) (*ManagerCommand, error) {
			bin, err := env.BinaryPath(binJobSet)
			if err != nil {
				return nil, err
			}
			cfg := map[string]any{
				"apiVersion":     "config.jobset.x-k8s.io/v1alpha1",
				"kind":           "Configuration",
				"leaderElection": map[string]any{"leaderElect": false},
				"health":         map[string]any{"healthProbeBindAddress": fmt.Sprintf("%s:%d", env.Host, env.HealthPort)},
				"metrics":        map[string]any{"bindAddress": "0", "certDir": env.CertDir},
				"webhook": map[string]any{
					"host": env.Host, "port": env.WebhookPort, "certDir": env.CertDir,
				},
				"internalCertManagement": map[string]any{"enable": false},
				"clientConnection":       map[string]any{"qps": 100, "burst": 200},
			}
			path, err := writeConfig(env.Dir, cfg)
			if err != nil {
				return nil, err
			}
			return &ManagerCommand{Args: []string{bin, "--config=" + path}}, nil
		},
	}, nil
}

// componentCRDs loads the CRDs of a kustomize CRD component's bases and the names of those
// switched to webhook conversion.
func componentCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "bases", "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	crds, err := LoadCRDs(files...)
	if err != nil {
		return nil, nil, err
	}
	conv, err := conversionCRDs(dir, crds)
	return crds, conv, err
}

// filterWebhooks keeps the webhooks whose rules only name the given API groups, and drops
// configurations left empty.
func filterWebhooks(objs []client.Object, groups []string) []client.Object {
	inGroups := func(rules []admissionregistrationv1.RuleWithOperations) bool {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				if !slices.Contains(groups, g) {
					return false
				}
			}
		}
		return true
	}
	var out []client.Object
	for _, obj := range objs {
		switch w := obj.DeepCopyObject().(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			w.Webhooks = slices.DeleteFunc(w.Webhooks, func(h admissionregistrationv1.MutatingWebhook) bool { return !inGroups(h.Rules) })
			if len(w.Webhooks) > 0 {
				out = append(out, w)
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			w.Webhooks = slices.DeleteFunc(w.Webhooks, func(h admissionregistrationv1.ValidatingWebhook) bool { return !inGroups(h.Rules) })
			if len(w.Webhooks) > 0 {
				out = append(out, w)
			}
		}
	}
	return out
}

func writeConfig(dir string, cfg map[string]any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, data, 0o644)
}

func hostHasFiles(dir string, names ...string) bool {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

// installCRDs server-side applies CRDs (Kueue's are too large for client-side apply's
// last-applied annotation) and waits until they are served.
func (c *Cluster) installCRDs(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	begin := time.Now()
	// Side by side: the API server spends most of the time building each CRD's schema.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, crd := range crds {
		g.Go(func() error {
			if err := c.apply(gctx, crd); err != nil {
				return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for _, want := range crds {
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.client.Get(ctx, keyOf(want.Name), crd); err != nil {
				return err
			}
			if crdEstablished(crd) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after a minute", want.Name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if len(crds) > 0 {
		c.logf("%d CRDs installed in %s", len(crds), time.Since(begin).Round(10*time.Millisecond))
	}
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
