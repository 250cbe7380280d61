package localcluster

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBatchledgerObjectsFollowTheFlags: the manager gets its namespace, ServiceAccount,
// generated ClusterRole (webhook configurations named as config/default names them), the
// users' aggregated ClusterRoles, the pod-release-only and ledger policies, and in the
// namespace it runs in (--namespace, default "default") its Secrets' Role and the empty
// Secret of the result signing key, always; the leader-election Role only with
// --leader-elect, in that namespace.
func TestBatchledgerObjectsFollowTheFlags(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	key := func(o client.Object) string {
		kind := reflect.TypeOf(o).Elem().Name()
		if o.GetNamespace() != "" {
			return kind + "/" + o.GetNamespace() + "/" + o.GetName()
		}
		return kind + "/" + o.GetName()
	}
	always := []string{
		"Namespace/batchledger-system",
		"ServiceAccount/batchledger-system/batchledger-controller-manager",
		"ClusterRole/batchledger-manager-role",
		"ClusterRoleBinding/batchledger-manager-rolebinding",
		"ClusterRole/batchledger-batchaccount-editor-role",
		"ClusterRole/batchledger-batchaccount-viewer-role",
		"ValidatingAdmissionPolicy/batchledger-pod-release-only",
		"ValidatingAdmissionPolicyBinding/batchledger-pod-release-only",
		"ValidatingAdmissionPolicy/batchledger-ledger-manager-only",
		"ValidatingAdmissionPolicyBinding/batchledger-ledger-manager-only",
		"ValidatingAdmissionPolicy/batchledger-index-pod",
		"ValidatingAdmissionPolicyBinding/batchledger-index-pod",
	}
	inDefault := []string{"Namespace/default", "Role/default/batchledger-manager-role",
		"RoleBinding/default/batchledger-manager-rolebinding", "Secret/default/batchledger-ledger-key"}
	for _, tc := range []struct {
		args    []string
		more    []string
		wantErr bool
	}{
		{args: nil, more: inDefault},
		{args: []string{"--workload-message-interval=1s"}, more: inDefault},
		{args: []string{"--leader-elect", "--namespace=default"}, more: append(slices.Clone(inDefault),
			"Role/default/batchledger-leader-election-role", "RoleBinding/default/batchledger-leader-election-rolebinding")},
		{args: []string{"--leader-elect"}, more: append(slices.Clone(inDefault),
			"Role/default/batchledger-leader-election-role", "RoleBinding/default/batchledger-leader-election-rolebinding")},
		{args: []string{"--cert-management=self", "--namespace=batchledger-system"}, more: []string{
			"Role/batchledger-system/batchledger-manager-role", "RoleBinding/batchledger-system/batchledger-manager-rolebinding",
			"Secret/batchledger-system/batchledger-ledger-key"}},
	} {
		objs, err := batchledgerObjects(root, tc.args)
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "--namespace") {
				t.Errorf("%v: error %v, want one asking for --namespace", tc.args, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, key(o))
			if cr, ok := o.(*rbacv1.ClusterRole); ok {
				for _, r := range cr.Rules {
					for _, n := range r.ResourceNames {
						if !strings.HasPrefix(n, "batchledger-") {
							t.Errorf("%v: ClusterRole grants on %q, not named as config/default names it", tc.args, n)
						}
					}
				}
			}
		}
		want := append(slices.Clone(always), tc.more...)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%v: objects\n%s\nwant\n%s", tc.args, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
