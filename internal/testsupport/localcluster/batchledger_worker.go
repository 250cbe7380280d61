package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/multikueue"
)

// BatchledgerWorkerName is the Manager name of batchledger in the worker role.
const BatchledgerWorkerName = "batchledger-worker"

// ManagerReaderServiceAccount is the worker's ServiceAccount the manager reads
// WorkerResults as (config/worker/manager_reader_role.yaml).
const ManagerReaderServiceAccount = "batchledger-manager-reader"

// podWebhook is the one webhook of config/webhook the worker role serves; its others,
// jobWebhook and unlabelledJobWebhook, are config/worker's.
const (
	podWebhook           = "mpod.batchledger.dev"
	jobWebhook           = "mjob-worker.batchledger.dev"
	unlabelledJobWebhook = "mjob-worker-unlabelled.batchledger.dev"
)

// BatchledgerWorker runs the batchledger binary in the worker role of a MultiKueue worker
// cluster (--role=worker): its CRDs, only the pod webhook of config/webhook and the Job
// webhook of config/worker (worker_job_webhook.yaml), and the
// RBAC and admission policies of config/worker, as the ServiceAccount they name
// (BatchledgerWorkerIdentity).
func BatchledgerWorker(binary string, extraArgs ...string) (Manager, error) {
	m, err := BatchledgerManager(binary)
	if err != nil {
		return Manager{}, err
	}
	root, err := RepoRoot()
	if err != nil {
		return Manager{}, err
	}
	var hooks []client.Object
	for _, obj := range m.Webhooks {
		if w, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			w = w.DeepCopy()
			w.Webhooks = filterPodWebhook(w.Webhooks)
			if len(w.Webhooks) > 0 {
				hooks = append(hooks, w)
			}
		}
	}
	objs, err := workerObjects(filepath.Join(root, "config", "worker"))
	if err != nil {
		return Manager{}, err
	}
	jobHook, err := workerJobWebhook(filepath.Join(root, "config", "worker", "worker_job_webhook.yaml"))
	if err != nil {
		return Manager{}, err
	}
	hooks = append(hooks, jobHook)
	return Manager{
		Name:     BatchledgerWorkerName,
		CRDs:     m.CRDs,
		Webhooks: hooks,
		Identity: &BatchledgerWorkerIdentity,
		Objects:  append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: BatchledgerNamespace}}}, objs...),
		Command: func(env ManagerEnv) (*ManagerCommand, error) {
			args := append([]string{binary, "--role=worker"}, batchledgerFlags(env, BatchledgerNamespace)...)
			return &ManagerCommand{Args: append(args, extraArgs...)}, nil
		},
	}, nil
}

// workerJobWebhook is config/worker's Job webhook configuration (JobHolder's), read
// from path.
func workerJobWebhook(path string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	docs, err := readYAMLDocs(path)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: %d documents, want one", path, len(docs))
	}
	var w admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(docs[0], &w); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &w, nil
}

func filterPodWebhook(ws []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
	var out []admissionregistrationv1.MutatingWebhook
	for _, w := range ws {
		if w.Name == podWebhook {
			out = append(out, w)
		}
	}
	return out
}

// workerObjects reads config/worker's RBAC and admission policies as its kustomization
// renders them: names prefixed with batchledgerPrefix, namespace "system" made
// BatchledgerNamespace.
func workerObjects(dir string) ([]client.Object, error) {
	var out []client.Object
	for _, file := range []string{"worker_role.yaml", "manager_reader_role.yaml", "worker_policy.yaml"} {
		docs, err := readYAMLDocs(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, err
			}
			var obj client.Object
			switch meta.Kind {
			case "ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			case "Role":
				obj = &rbacv1.Role{}
			case "RoleBinding":
				obj = &rbacv1.RoleBinding{}
			case "ValidatingAdmissionPolicy":
				obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			case "ValidatingAdmissionPolicyBinding":
				obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			default:
				return nil, fmt.Errorf("%s: unexpected %s", file, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			obj.SetName(batchledgerPrefix + obj.GetName())
			if obj.GetNamespace() == "system" {
				obj.SetNamespace(BatchledgerNamespace)
			}
			switch b := obj.(type) {
			case *rbacv1.ClusterRoleBinding:
				b.RoleRef.Name = batchledgerPrefix + b.RoleRef.Name
				renameSubjects(b.Subjects)
			case *rbacv1.RoleBinding:
				b.RoleRef.Name = batchledgerPrefix + b.RoleRef.Name
				renameSubjects(b.Subjects)
			case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
				b.Spec.PolicyName = batchledgerPrefix + b.Spec.PolicyName
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

func renameSubjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		subjects[i].Name = batchledgerPrefix + subjects[i].Name
		if subjects[i].Namespace == "system" {
			subjects[i].Namespace = BatchledgerNamespace
		}
	}
}

// GiveReaderKubeconfigs gives the manager's batchledger, in its namespace namespace, a
// kubeconfig of each worker: a token of the worker's ServiceAccount
// ManagerReaderServiceAccount (TokenRequest, valid validity), which may only read
// WorkerResults there, in a Secret labelled multikueue.LabelWorkerCluster=<worker>.
// Each worker runs BatchledgerWorker (which creates the ServiceAccount).
func (mk *MultiKueue) GiveReaderKubeconfigs(ctx context.Context, namespace string, validity time.Duration) error {
	mgr, err := client.New(mk.Manager.RESTConfig, client.Options{Scheme: clusterScheme()})
	if err != nil {
		return err
	}
	for name, w := range mk.Workers {
		kubeconfig, err := w.ReaderKubeconfig(ctx, validity)
		if err != nil {
			return fmt.Errorf("worker %s: %w", name, err)
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "batchledger-worker-" + name, Namespace: namespace,
				Labels: map[string]string{multikueue.LabelWorkerCluster: name}},
			Data: map[string][]byte{multikueue.KubeconfigKey: kubeconfig},
		}
		if err := mgr.Create(ctx, secret); err != nil {
			return fmt.Errorf("worker %s: %w", name, err)
		}
	}
	return nil
}

// ReaderKubeconfig is a kubeconfig of the cluster holding a token of
// ManagerReaderServiceAccount, from the TokenRequest API.
func (c *Cluster) ReaderKubeconfig(ctx context.Context, validity time.Duration) ([]byte, error) {
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: clusterScheme()})
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: BatchledgerNamespace, Name: ManagerReaderServiceAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(validity.Seconds()))}}
	if err := cl.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("a token of %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, a := range cfg.AuthInfos {
		a.Token, a.ClientCertificateData, a.ClientKeyData = tr.Status.Token, nil, nil
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(b), "client-certificate") {
		return nil, fmt.Errorf("the reader kubeconfig still holds a client certificate")
	}
	return b, nil
}
