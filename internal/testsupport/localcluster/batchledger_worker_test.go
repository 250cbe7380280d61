package localcluster

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/webhook"
)

// TestBatchledgerWorkerInstallsTheWorkerRoleOnly: the worker role registers only the pod
// webhook and its Job webhook, runs as its own ServiceAccount with --role=worker, and gets config/worker's
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
	if want := []string{podWebhook, jobWebhook, unlabelledJobWebhook}; !slices.Equal(hooks, want) {
		t.Errorf("webhooks %v, want only %v", hooks, want)
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

// TestWorkerPoliciesNameTheWorkerRole: config/worker's two admission policies are
// installed, each bound under its renamed name, and each exempts exactly the
// ServiceAccount the worker role's ClusterRole is bound to (the identity the worker role
// runs as): a policy naming another user would refuse the worker role's own records, or
// let someone else write them. The pod policy lets exactly webhook.JobControllers
// create an annotated pod, as the webhook does.
func TestWorkerPoliciesNameTheWorkerRole(t *testing.T) {
	m, err := BatchledgerWorker("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	var worker string
	policies, bound := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}, map[string]bool{}
	for _, obj := range m.Objects {
		switch o := obj.(type) {
		case *rbacv1.ClusterRoleBinding:
			if o.RoleRef.Name == "batchledger-worker-role" && len(o.Subjects) == 1 {
				worker = "system:serviceaccount:" + o.Subjects[0].Namespace + ":" + o.Subjects[0].Name
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policies[o.Name] = o
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if o.Name == o.Spec.PolicyName && slices.Equal(o.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
				bound[o.Spec.PolicyName] = true
			}
		}
	}
	if worker != m.Identity.User {
		t.Fatalf("the worker role's ClusterRole is bound to %q, the worker role runs as %q", worker, m.Identity.User)
	}
	want := "request.userInfo.username != '" + worker + "'"
	for _, name := range []string{"batchledger-worker-results-worker-only", "batchledger-worker-pod-workload", "batchledger-worker-job-workload"} {
		p := policies[name]
		if p == nil || !bound[name] {
			t.Errorf("policy %s installed %v, bound with Deny %v", name, p != nil, bound[name])
			continue
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("policy %s fails open", name)
		}
		if len(p.Spec.MatchConditions) == 0 || p.Spec.MatchConditions[0].Expression != want {
			t.Errorf("policy %s: first matchCondition %+v, want %q", name, p.Spec.MatchConditions, want)
		}
	}
	if p := policies["batchledger-worker-pod-workload"]; p != nil {
		create := p.Spec.Validations[0].Expression
		for _, u := range webhook.JobControllers {
			if !strings.Contains(create, "'"+u+"'") {
				t.Errorf("the pod policy's creation rule %q does not let the Job controller %s create", create, u)
			}
		}
		if !strings.Contains(p.Spec.MatchConditions[1].Expression, "'"+v1alpha1.AnnotationWorkload+"'") {
			t.Errorf("the pod policy matches %q, not pods naming %s", p.Spec.MatchConditions[1].Expression, v1alpha1.AnnotationWorkload)
		}
	}
}
