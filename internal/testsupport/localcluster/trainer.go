package localcluster

import (
	"fmt"
	"os"
	"path/filepath"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
)

const (
	// TrainerRuntime is the ClusterTrainingRuntime the local cluster installs with the
	// Trainer manager: Trainer's torch-distributed runtime, one replicatedJob "node"
	// (TrainerNodeJob) whose Indexed Job runs one pod per node of the TrainJob.
	TrainerRuntime = "torch-distributed"
	// TrainerNodeJob is the replicatedJob of TrainerRuntime that runs the training nodes.
	TrainerNodeJob = "node"
	// TrainerRuntimeImage replaces the runtime's PyTorch image: kwok nodes run no
	// containers, so nothing pulls it, and a tiny name keeps the objects readable.
	TrainerRuntimeImage = "trainer-node:1.0"

	trainerModule = "github.com/kubeflow/trainer/v2"
)

// TrainerManager returns the Kubeflow Trainer controller manager (module version from
// go.mod) with its webhooks and TrainerRuntime (Options.Trainer). Its CRDs must be
// installed before Kueue starts, or Kueue's TrainJob integration waits for them with a
// backoff (Start does so).
func TrainerManager() (Manager, error) {
	dir, err := ModuleDir(trainerModule)
	if err != nil {
		return Manager{}, err
	}
	base := filepath.Join(dir, "manifests", "base")
	files, err := filepath.Glob(filepath.Join(base, "crds", "*.yaml"))
	if err != nil {
		return Manager{}, err
	}
	crds, err := LoadCRDs(files...)
	if err != nil {
		return Manager{}, fmt.Errorf("trainer: %w", err)
	}
	hooks, err := LoadWebhookComponent(filepath.Join(base, "webhook"))
	if err != nil {
		return Manager{}, fmt.Errorf("trainer: %w", err)
	}
	runtime, err := trainerRuntime(filepath.Join(base, "runtimes", "torch_distributed.yaml"))
	if err != nil {
		return Manager{}, fmt.Errorf("trainer: %w", err)
	}
	return Manager{
		Name:     "trainer",
		CRDs:     crds,
		Webhooks: hooks,
		// Applied before the manager (and its validating webhook) starts: the runtime is
		// part of the install, as the upstream manifests ship it.
		Objects: []client.Object{runtime},
		Command: func(env ManagerEnv) (*ManagerCommand, error) {
			bin, err := env.BinaryPath(binTrainer)
			if err != nil {
				return nil, err
			}
			cfg := map[string]any{
				"apiVersion":     "config.trainer.kubeflow.org/v1alpha1",
				"kind":           "Configuration",
				"leaderElection": map[string]any{"leaderElect": false},
				"health":         map[string]any{"healthProbeBindAddress": fmt.Sprintf("%s:%d", env.Host, env.HealthPort)},
				"metrics":        map[string]any{"bindAddress": "0"},
				"webhook":        map[string]any{"host": env.Host, "port": env.WebhookPort},
				// Its cert-controller would write the serving certificate into a Secret
				// and patch the webhook configurations; the cluster's CA does both here.
				"certManagement":   map[string]any{"enable": false},
				"clientConnection": map[string]any{"qps": 100, "burst": 200},
			}
			path, err := writeConfig(env.Dir, cfg)
			if err != nil {
				return nil, err
			}
			tmp, err := trainerCertTempDir(env)
			if err != nil {
				return nil, err
			}
			return &ManagerCommand{
				Args: []string{bin, "--config=" + path},
				// Trainer's configuration has no certificate directory: its webhook server
				// reads controller-runtime's default, $TMPDIR/k8s-webhook-server/serving-certs.
				Env: []string{"TMPDIR=" + tmp},
			}, nil
		},
	}, nil
}

// trainerCertTempDir makes a temporary directory for the Trainer manager whose
// k8s-webhook-server/serving-certs is the manager's certificate directory.
func trainerCertTempDir(env ManagerEnv) (string, error) {
	tmp := filepath.Join(env.Dir, "tmp")
	certs := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(filepath.Dir(certs), 0o755); err != nil {
		return "", err
	}
	if err := os.Remove(certs); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	return tmp, os.Symlink(env.CertDir, certs)
}

// trainerRuntime reads the torch-distributed ClusterTrainingRuntime, points its node
// containers at TrainerRuntimeImage, and makes a failed node restart the JobSet once
// (backoffLimit 0, maxRestarts 1), as a training cluster configures it, so that tests can
// fail a node and see the restart.
func trainerRuntime(path string) (*trainer.ClusterTrainingRuntime, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.UnmarshalStrict(data, rt); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if rt.Name != TrainerRuntime {
		return nil, fmt.Errorf("%s: ClusterTrainingRuntime %q, want %q", path, rt.Name, TrainerRuntime)
	}
	found := false
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
		if rj.Name != TrainerNodeJob {
			continue
		}
		found = true
		rj.Template.Spec.BackoffLimit = ptr.To[int32](0)
		containers := rj.Template.Spec.Template.Spec.Containers
		for j := range containers {
			containers[j].Image = TrainerRuntimeImage
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: no replicatedJob %q", path, TrainerNodeJob)
	}
	rt.Spec.Template.Spec.FailurePolicy = &jobsetapi.FailurePolicy{MaxRestarts: 1}
	return rt, nil
}
