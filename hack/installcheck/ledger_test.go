package installcheck

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
