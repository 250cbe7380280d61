package localcluster

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestBatchledgerWorkerInstallsTheWorkerRoleOnly: the worker role registers only the pod
// webhook, runs as its own ServiceAccount with --role=worker, and gets config/worker's
// RBAC renamed as its kustomization renders it: the manager's reader ClusterRole is
// batchledger-manager-reader, bound to the ServiceAccount of that name.
func TestBatchledgerWorkerInstallsTheWorkerRoleOnly(t *testing.T) {
	m, err := BatchledgerWorker("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	var hooks []string
	for _, obj := range m.Webhooks {
		w, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
		if !ok {
			t.Errorf("webhook configuration %T %s, want only mutating", obj, obj.GetName())
			continue
		}
		for _, h := range w.Webhooks {
			hooks = append(hooks, h.Name)
		}
	}
	if len(hooks) != 1 || hooks[0] != podWebhook {
		t.Errorf("webhooks %v, want only %s", hooks, podWebhook)
	}
	if m.Identity == nil || m.Identity.User != "system:serviceaccount:"+BatchledgerNamespace+":"+BatchledgerWorkerServiceAccount {
		t.Errorf("identity %+v, want the worker's ServiceAccount", m.Identity)
	}
	cmd, err := m.Command(ManagerEnv{Host: "127.0.0.1"})
	if err != nil || cmd.Args[1] != "--role=worker" {
		t.Errorf("command %v (%v), want --role=worker", cmd, err)
	}
	var reader *rbacv1.ClusterRoleBinding
	roles := map[string]bool{}
	for _, obj := range m.Objects {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			roles[o.Name] = true
		case *rbacv1.ClusterRoleBinding:
			if o.Name == "batchledger-manager-reader" {
				reader = o
			}
		}
	}
	if !roles["batchledger-manager-reader"] || !roles["batchledger-worker-role"] {
		t.Errorf("cluster roles %v, want batchledger-manager-reader and batchledger-worker-role", roles)
	}
	if reader == nil || reader.RoleRef.Name != "batchledger-manager-reader" || len(reader.Subjects) != 1 ||
		reader.Subjects[0].Name != ManagerReaderServiceAccount || reader.Subjects[0].Namespace != BatchledgerNamespace {
		t.Errorf("reader binding %+v, want batchledger-manager-reader bound to %s/%s", reader, BatchledgerNamespace, ManagerReaderServiceAccount)
	}
}
