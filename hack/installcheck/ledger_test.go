package installcheck

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Kubernetes' own deleters of ShardResults, which the ledger policy lets delete them: the
// garbage collector (an account deleted) and the namespace controller (a namespace
// deleted), each with its own ServiceAccount under kube-controller-manager's
// --use-service-account-credentials, and kube-controller-manager itself without it.
var ledgerDeleters = []string{
	"system:serviceaccount:kube-system:generic-garbage-collector",
	"system:serviceaccount:kube-system:namespace-controller",
	"system:kube-controller-manager",
}

// checkLedgerPolicy checks the ledger's admission policy: CREATE, UPDATE and DELETE of
// shardresults and UPDATE of batchaccounts/status (every API version), evaluated for
// every user but the manager's ServiceAccount, refusing all but the deletes of
// ledgerDeleters, and a message that says why for each resource.
func checkLedgerPolicy(t *testing.T, o Objects) {
	d := deployment(t, o)
	vap := boundPolicy(t, o, ledgerPolicy)
	rule := func(resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}}
	}
	want := []admissionregistrationv1.NamedRuleWithOperations{
		rule("shardresults", admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
		rule("batchaccounts/status", admissionregistrationv1.Update),
	}
	if mc := vap.Spec.MatchConstraints; mc == nil || !equality.Semantic.DeepEqual(mc.ResourceRules, want) {
		t.Errorf("policy %s: matchConstraints %s, want %s", vap.Name, jsonString(vap.Spec.MatchConstraints), jsonString(want))
	}
	cond := fmt.Sprintf("request.userInfo.username != 'system:serviceaccount:%s:%s'", d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if mcs := vap.Spec.MatchConditions; len(mcs) != 1 || mcs[0].Expression != cond {
		t.Errorf("policy %s: matchConditions %s, want the single expression %q (every user but the manager)", vap.Name, jsonString(mcs), cond)
	}
	if len(vap.Spec.Validations) != 2 {
		t.Fatalf("policy %s: validations %s, want one for shardresults and one for the status", vap.Name, jsonString(vap.Spec.Validations))
	}
	chunks, status := vap.Spec.Validations[0], vap.Spec.Validations[1]
	for _, u := range ledgerDeleters {
		if !strings.Contains(chunks.Expression, "'"+u+"'") {
			t.Errorf("policy %s: the shardresults validation %q does not let %s delete", vap.Name, chunks.Expression, u)
		}
	}
	for _, v := range vap.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || !strings.Contains(v.Message, "only batchledger's manager") {
			t.Errorf("policy %s: validation %q: reason %v, message %q; want Forbidden, saying that only batchledger's manager writes it", vap.Name, v.Expression, v.Reason, v.Message)
		}
	}
	if !strings.Contains(chunks.Message, "delete the BatchAccount") || !strings.Contains(status.Message, "spec") {
		t.Errorf("policy %s: messages %q and %q do not say what a user may do instead", vap.Name, chunks.Message, status.Message)
	}
}

// writeVerbs are the verbs that change an object.
var writeVerbs = sets.New("create", "update", "patch", "delete", "deletecollection", "*")

// checkLedgerRBAC checks who the rendering lets write the ledger: every role that grants a
// write verb on shardresults or batchaccounts/status (directly or by a wildcard) is
// aggregated into no other role and bound to the manager's ServiceAccount alone; and the
// users' roles are aggregated to the built-in admin, edit and view ClusterRoles with
// exactly the rules Kueue's pattern gives them: editors manage BatchAccounts and read the
// ledger, viewers read all three.
func checkLedgerRBAC(t *testing.T, o Objects) {
	d := deployment(t, o)
	manager := rbacv1.Subject{Kind: "ServiceAccount", Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: d.Namespace}
	ledger := []string{"shardresults", "batchaccounts/status"}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, u := range o.Of(kind) {
			var writes []string
			for _, r := range rules(t, u) {
				if !slices.Contains(r.APIGroups, v1alpha1.GroupVersion.Group) && !slices.Contains(r.APIGroups, "*") {
					continue
				}
				for _, res := range ledger {
					if (slices.Contains(r.Resources, res) || slices.Contains(r.Resources, "*")) && writeVerbs.HasAny(r.Verbs...) {
						writes = append(writes, res+" "+strings.Join(sets.List(writeVerbs.Intersection(sets.New(r.Verbs...))), ","))
					}
				}
			}
			if len(writes) == 0 {
				continue
			}
			for l := range u.GetLabels() {
				if strings.HasPrefix(l, "rbac.authorization.k8s.io/aggregate-to-") {
					t.Errorf("%s %s grants %v and is aggregated by label %s", kind, u.GetName(), writes, l)
				}
			}
			bound := 0
			for _, bkind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				for _, bu := range o.Of(bkind) {
					var b rbacv1.RoleBinding
					if err := Into(bu, &b); err != nil {
						t.Fatal(err)
					}
					if b.RoleRef.Kind != kind || b.RoleRef.Name != u.GetName() || (kind == "Role" && bu.GetNamespace() != u.GetNamespace()) {
						continue
					}
					bound++
					if len(b.Subjects) != 1 || b.Subjects[0] != manager {
						t.Errorf("%s %s grants %v and %s %s binds it to %s, want the manager's ServiceAccount alone", kind, u.GetName(), writes, bkind, bu.GetName(), jsonString(b.Subjects))
					}
				}
			}
			if bound == 0 {
				t.Errorf("%s %s grants %v and is bound by nothing: only the manager's role may", kind, u.GetName(), writes)
			}
		}
	}

	read := []string{"get", "list", "watch"}
	all := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	for _, want := range []struct {
		aggregateTo []string
		grants      map[string][]string
	}{
		{[]string{"admin", "edit"}, map[string][]string{"batchaccounts": all, "batchaccounts/status": read, "shardresults": read}},
		{[]string{"view"}, map[string][]string{"batchaccounts": read, "batchaccounts/status": read, "shardresults": read}},
	} {
		var found []*unstructured.Unstructured
		for _, u := range o.Of("ClusterRole") {
			var to []string
			for l, v := range u.GetLabels() {
				if agg, ok := strings.CutPrefix(l, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
					to = append(to, agg)
				}
			}
			slices.Sort(to)
			if slices.Equal(to, want.aggregateTo) {
				found = append(found, u)
			}
		}
		if len(found) != 1 {
			t.Errorf("%d ClusterRoles aggregated to exactly %v, want 1", len(found), want.aggregateTo)
			continue
		}
		got := map[string][]string{}
		for _, r := range rules(t, found[0]) {
			if !slices.Equal(r.APIGroups, []string{v1alpha1.GroupVersion.Group}) || len(r.ResourceNames) > 0 {
				t.Errorf("ClusterRole %s: rule %s, want rules of group %s without resourceNames", found[0].GetName(), jsonString(r), v1alpha1.GroupVersion.Group)
				continue
			}
			for _, res := range r.Resources {
				got[res] = sets.List(sets.New(got[res]...).Insert(r.Verbs...))
			}
		}
		if !equality.Semantic.DeepEqual(got, want.grants) {
			t.Errorf("ClusterRole %s (aggregated to %v) grants %v, want %v", found[0].GetName(), want.aggregateTo, got, want.grants)
		}
	}
}
