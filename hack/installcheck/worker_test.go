package installcheck

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestWorkerPolicies renders config/worker with kustomize and checks its three
// admission policies, each bound once with Deny alone and failing closed: their first
// matchCondition exempts exactly the ServiceAccount the rendering binds the worker role's
// ClusterRole to (kustomize renames it, but not inside CEL), and the pod policy matches
// the pods naming a Workload (v1alpha1.AnnotationWorkload).
func TestWorkerPolicies(t *testing.T) {
	root, tools := setup(t)
	o, err := tools.RenderKustomize(filepath.Join(root, "config", "worker"))
	if err != nil {
		t.Fatal(err)
	}
	var worker string
	for _, u := range o.Of("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		if err := Into(u, &b); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(b.RoleRef.Name, "worker-role") && len(b.Subjects) == 1 {
			worker = fmt.Sprintf("system:serviceaccount:%s:%s", b.Subjects[0].Namespace, b.Subjects[0].Name)
		}
	}
	if worker == "" {
		t.Fatal("no ClusterRoleBinding of the worker role's ClusterRole to one ServiceAccount rendered")
	}
	if n := len(o.Of("ValidatingAdmissionPolicy")); n != 3 {
		t.Errorf("%d ValidatingAdmissionPolicies rendered, want 3", n)
	}
	want := fmt.Sprintf("request.userInfo.username != '%s'", worker)
	for _, suffix := range []string{"worker-results-worker-only", "worker-pod-workload", "worker-job-workload"} {
		vap := boundPolicy(t, o, suffix)
		if mcs := vap.Spec.MatchConditions; len(mcs) == 0 || mcs[0].Expression != want {
			t.Errorf("policy %s: matchConditions %s, want first %q (every user but the worker role)", vap.Name, jsonString(mcs), want)
		}
		if suffix == "worker-pod-workload" && (len(vap.Spec.MatchConditions) != 2 ||
			!strings.Contains(vap.Spec.MatchConditions[1].Expression, "'"+v1alpha1.AnnotationWorkload+"'")) {
			t.Errorf("policy %s: matchConditions %s, want a second on %s", vap.Name, jsonString(vap.Spec.MatchConditions), v1alpha1.AnnotationWorkload)
		}
	}
}
