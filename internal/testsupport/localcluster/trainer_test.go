package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

func TestTrainerManagerInstallsItsAPIAndWebhooks(t *testing.T) {
	m, err := TrainerManager()
	if err != nil {
		t.Fatal(err)
	}
	var crds []string
	for _, crd := range m.CRDs {
		crds = append(crds, crd.Name)
	}
	slices.Sort(crds)
	wantCRDs := []string{"clustertrainingruntimes.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org", "trainjobs.trainer.kubeflow.org"}
	if !slices.Equal(crds, wantCRDs) {
		t.Errorf("CRDs = %v, want %v", crds, wantCRDs)
	}
	names := webhookNames(m)
	for _, want := range []string{"defaulter.trainjob.trainer.kubeflow.org", "validator.trainjob.trainer.kubeflow.org",
		"validator.clustertrainingruntime.trainer.kubeflow.org", "validator.trainingruntime.trainer.kubeflow.org"} {
		if !slices.Contains(names, want) {
			t.Errorf("Trainer webhook %s missing from %v", want, names)
		}
	}
	for _, obj := range m.Webhooks {
		if w, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok && w.Name != "defaulter.trainer.kubeflow.org" {
			t.Errorf("mutating configuration %q: the kustomize patches were not applied", w.Name)
		}
	}
}

func TestTrainerRuntimeRunsNodesOnTheKwokImage(t *testing.T) {
	m, err := TrainerManager()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Objects) != 1 {
		t.Fatalf("objects = %d, want the one ClusterTrainingRuntime", len(m.Objects))
	}
	rt, ok := m.Objects[0].(*trainer.ClusterTrainingRuntime)
	if !ok {
		t.Fatalf("object is %T, want a ClusterTrainingRuntime", m.Objects[0])
	}
	if rt.Name != TrainerRuntime || rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.Torch == nil {
		t.Fatalf("runtime %q mlPolicy %+v, want %q with a torch policy", rt.Name, rt.Spec.MLPolicy, TrainerRuntime)
	}
	var images []string
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj.Name != TrainerNodeJob {
			continue
		}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	if len(images) == 0 || slices.ContainsFunc(images, func(i string) bool { return i != TrainerRuntimeImage }) {
		t.Errorf("replicatedJob %q images = %v, want only %s", TrainerNodeJob, images, TrainerRuntimeImage)
	}
}

func TestKueueWithTrainJobsEnablesTheIntegrationAndItsWebhooks(t *testing.T) {
	for _, tc := range []struct {
		trainJobs bool
		want      bool
	}{{trainJobs: true, want: true}, {trainJobs: false, want: false}} {
		m, err := KueueManager(tc.trainJobs)
		if err != nil {
			t.Fatal(err)
		}
		names := webhookNames(m)
		for _, hook := range []string{"mtrainjob.kb.io", "vtrainjob.kb.io"} {
			if got := slices.Contains(names, hook); got != tc.want {
				t.Errorf("trainJobs=%t: webhook %s registered = %t, want %t", tc.trainJobs, hook, got, tc.want)
			}
		}
		env := ManagerEnv{Dir: t.TempDir(), CertDir: t.TempDir(), Host: "127.0.0.1",
			BinaryPath: func(name string) (string, error) { return name, nil }}
		if _, err := m.Command(env); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(env.Dir, "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Integrations struct{ Frameworks []string }
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(cfg.Integrations.Frameworks, KueueTrainJobIntegration); got != tc.want {
			t.Errorf("trainJobs=%t: frameworks %v include %s = %t, want %t", tc.trainJobs, cfg.Integrations.Frameworks, KueueTrainJobIntegration, got, tc.want)
		}
	}
}
