package installcheck

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/webhook"
)

// Names of batchledger's mutating webhooks.
const (
	podWebhook       = "mpod.batchledger.dev"
	podAssignWebhook = "mpodassign.batchledger.dev"
	jobWebhook       = "mjob.batchledger.dev"
	jobSetWebhook    = "mjobset.batchledger.dev"
)

// nsLabels are the labels of a namespace called name: the API server sets
// kubernetes.io/metadata.name on every namespace.
func nsLabels(name string, extra ...string) labels.Set {
	set := labels.Set{corev1.LabelMetadataName: name}
	for i := 0; i+1 < len(extra); i += 2 {
		set[extra[i]] = extra[i+1]
	}
	return set
}

// TestChartWebhookScope renders both installs in several shapes and checks what the
// mutating webhooks can reach, by evaluating their selectors on namespaces and pods:
//   - the pod webhook (failurePolicy Fail) selects exactly the pods labelled
//     batchledger.dev/scope=results: not scope=coverage, not unlabelled pods, not an
//     unlabelled Indexed Job pod (what it used to select);
//   - the Job and JobSet webhooks fail open (Ignore), on CREATE (and the JobSet's on
//     UPDATE, to keep its labels), for every Job and JobSet (no objectSelector: they
//     decide whom to label);
//   - the pod assignment webhook fails open (Ignore), on CREATE only, and selects exactly
//     the pods labelled scope=coverage (the pod webhook tells results pods theirs);
//   - none of the four reaches kube-system or the manager's own namespace; the admin's
//     namespaceSelector (chart value webhook.namespaceSelector, kustomize component
//     ../webhook-namespace-selector) narrows all three alike and never widens them.
func TestChartWebhookScope(t *testing.T) {
	root, tools := setup(t)
	chart := filepath.Join(root, "charts", "batchledger")
	type nsCase struct {
		labels labels.Set
		want   bool
	}
	// plain: no admin selector; the fixed exclusions alone.
	plain := func(release string) []nsCase {
		return []nsCase{
			{nsLabels("kube-system"), false},
			{nsLabels(release), false},
			{nsLabels("ml-team"), true},
			{nsLabels("default"), true},
		}
	}
	for _, c := range []struct {
		name      string
		render    func(t *testing.T) Objects
		namespace string
		ns        []nsCase
	}{
		{
			name:      "kustomize config/default",
			render:    func(t *testing.T) Objects { return mustKustomize(t, tools, filepath.Join(root, "config", "default")) },
			namespace: Namespace,
			ns:        plain(Namespace),
		},
		{
			name: "kustomize with ../webhook-namespace-selector",
			render: func(t *testing.T) Objects {
				dir, err := ConfigVariant(root, t.TempDir(), "\n#- ../webhook-namespace-selector\n", "\n- ../webhook-namespace-selector\n")
				if err != nil {
					t.Fatal(err)
				}
				return mustKustomize(t, tools, dir)
			},
			namespace: Namespace,
			ns: []nsCase{
				{nsLabels("ml-team", "batchledger.dev/batches", "enabled"), true},
				{nsLabels("ml-team"), false},
				{nsLabels("ml-team", "batchledger.dev/batches", "disabled"), false},
				{nsLabels("kube-system", "batchledger.dev/batches", "enabled"), false},
				{nsLabels(Namespace, "batchledger.dev/batches", "enabled"), false},
			},
		},
		{
			name:      "chart defaults",
			render:    func(t *testing.T) Objects { return mustChart(t, tools, chart) },
			namespace: Namespace,
			ns:        plain(Namespace),
		},
		{
			name:      "chart, release ledger in namespace ops",
			render:    func(t *testing.T) Objects { return mustChartAs(t, tools, chart, "ledger", "ops") },
			namespace: "ops",
			ns:        append(plain("ops"), nsCase{nsLabels(Namespace), true}),
		},
		{
			name: "chart, namespaceSelector with matchLabels and matchExpressions",
			render: func(t *testing.T) Objects {
				return mustChart(t, tools, chart,
					`webhook.namespaceSelector.matchLabels.batchledger\.dev/batches=enabled`,
					"webhook.namespaceSelector.matchExpressions[0].key=team",
					"webhook.namespaceSelector.matchExpressions[0].operator=In",
					"webhook.namespaceSelector.matchExpressions[0].values={ml,vision}")
			},
			namespace: Namespace,
			ns: []nsCase{
				{nsLabels("ml-team", "batchledger.dev/batches", "enabled", "team", "ml"), true},
				{nsLabels("vision", "batchledger.dev/batches", "enabled", "team", "vision"), true},
				{nsLabels("ml-team", "team", "ml"), false},
				{nsLabels("sales", "batchledger.dev/batches", "enabled", "team", "sales"), false},
				{nsLabels("kube-system", "batchledger.dev/batches", "enabled", "team", "ml"), false},
				{nsLabels(Namespace, "batchledger.dev/batches", "enabled", "team", "ml"), false},
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.render(t)
			mwcs := o.Of("MutatingWebhookConfiguration")
			if len(mwcs) != 1 {
				t.Fatalf("%d MutatingWebhookConfigurations rendered, want 1", len(mwcs))
			}
			hooks := webhooks(t, mwcs[0])
			if got := sortedKeys(hooks); !slices.Equal(got, []string{jobWebhook, jobSetWebhook, podWebhook, podAssignWebhook}) {
				t.Fatalf("mutating webhooks %v, want %s, %s, %s and %s", got, podWebhook, podAssignWebhook, jobWebhook, jobSetWebhook)
			}
			assign := hooks[podAssignWebhook]
			if fp := assign.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Ignore {
				t.Errorf("%s: failurePolicy %v, want Ignore (a pod is never refused for its annotations)", podAssignWebhook, fp)
			}
			for _, p := range []struct {
				labels labels.Set
				want   bool
			}{
				{labels.Set{v1alpha1.LabelScope: v1alpha1.ScopeResults}, false},
				{labels.Set{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}, true},
				{labels.Set{"batch.kubernetes.io/job-completion-index": "3", "batch.kubernetes.io/job-name": "j"}, false},
				{labels.Set{}, false},
			} {
				if got := selects(t, assign.ObjectSelector, p.labels); got != p.want {
					t.Errorf("%s: selects pod labelled %v = %v, want %v", podAssignWebhook, p.labels, got, p.want)
				}
			}
			if !equality.Semantic.DeepEqual(assign.NamespaceSelector, hooks[podWebhook].NamespaceSelector) {
				t.Errorf("%s: namespaceSelector %s differs from the pod webhook's", podAssignWebhook, jsonString(assign.NamespaceSelector))
			}

			pod := hooks[podWebhook]
			if fp := pod.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail {
				t.Errorf("%s: failurePolicy %v, want Fail (a result must never be lost)", podWebhook, fp)
			}
			wantObj := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: v1alpha1.LabelScope, Operator: metav1.LabelSelectorOpIn, Values: []string{v1alpha1.ScopeResults}}}}
			if !equality.Semantic.DeepEqual(pod.ObjectSelector, wantObj) {
				t.Errorf("%s: objectSelector %s, want exactly %s", podWebhook, jsonString(pod.ObjectSelector), jsonString(wantObj))
			}
			for _, p := range []struct {
				labels labels.Set
				want   bool
			}{
				{labels.Set{v1alpha1.LabelScope: v1alpha1.ScopeResults, "batch.kubernetes.io/job-completion-index": "3"}, true},
				{labels.Set{v1alpha1.LabelScope: v1alpha1.ScopeResults}, true},
				{labels.Set{v1alpha1.LabelScope: v1alpha1.ScopeCoverage, "batch.kubernetes.io/job-completion-index": "3"}, false},
				{labels.Set{"batch.kubernetes.io/job-completion-index": "3", "batch.kubernetes.io/job-name": "j"}, false},
				{labels.Set{}, false},
			} {
				if got := selects(t, pod.ObjectSelector, p.labels); got != p.want {
					t.Errorf("%s: selects pod labelled %v = %v, want %v", podWebhook, p.labels, got, p.want)
				}
			}

			// The JobSet webhook answers updates too, only to keep the labels a JobSet
			// carried (a controller's server-side apply removes them).
			operations := map[string][]admissionregistrationv1.OperationType{
				jobWebhook:    {admissionregistrationv1.Create},
				jobSetWebhook: {admissionregistrationv1.Create, admissionregistrationv1.Update},
			}
			for _, name := range []string{jobWebhook, jobSetWebhook} {
				w := hooks[name]
				if fp := w.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Ignore {
					t.Errorf("%s: failurePolicy %v, want Ignore (a Job is never refused for batchledger being down)", name, fp)
				}
				for _, r := range w.Rules {
					if !slices.Equal(r.Operations, operations[name]) {
						t.Errorf("%s: operations %v, want %v", name, r.Operations, operations[name])
					}
				}
				if w.ObjectSelector != nil && (len(w.ObjectSelector.MatchLabels) > 0 || len(w.ObjectSelector.MatchExpressions) > 0) {
					t.Errorf("%s: objectSelector %s, want none", name, jsonString(w.ObjectSelector))
				}
				if !equality.Semantic.DeepEqual(w.NamespaceSelector, pod.NamespaceSelector) {
					t.Errorf("%s: namespaceSelector %s differs from the pod webhook's %s", name, jsonString(w.NamespaceSelector), jsonString(pod.NamespaceSelector))
				}
			}
			for _, n := range c.ns {
				if got := selects(t, pod.NamespaceSelector, n.labels); got != n.want {
					t.Errorf("namespaceSelector %s selects namespace %v = %v, want %v", jsonString(pod.NamespaceSelector), n.labels, got, n.want)
				}
			}
			if d := deployment(t, o); d.Namespace != c.namespace {
				t.Errorf("manager in namespace %s, want %s", d.Namespace, c.namespace)
			}
		})
	}
}

// selects evaluates a webhook's label selector as the API server does: a nil selector
// selects everything.
func selects(t *testing.T, s *metav1.LabelSelector, set labels.Set) bool {
	t.Helper()
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %s: %v", jsonString(s), err)
	}
	return sel.Matches(set)
}

func mustKustomize(t *testing.T, tools Tools, dir string) Objects {
	t.Helper()
	o, err := tools.RenderKustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func mustChart(t *testing.T, tools Tools, chart string, set ...string) Objects {
	t.Helper()
	o, err := tools.RenderChart(chart, set...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// mustChartAs renders the chart as release in namespace.
func mustChartAs(t *testing.T, tools Tools, chart, release, namespace string, set ...string) Objects {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := run(tools.Helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestChartAndKustomizeManagerRBAC evaluates, with RBAC's own matching rules, what the
// manager's ServiceAccount may do to the objects pkg/certs' rotator writes, in every
// install shape: update exactly the two webhook configurations and the certificate
// Secret it is told by its flags (by resourceNames), list and watch them (a rule without
// names: an informer lists the collection), and nothing else on them: no get (the
// rotator reads through its cache), patch, create or delete, and no update of anyone
// else's configuration or Secret.
func TestChartAndKustomizeManagerRBAC(t *testing.T) {
	root, tools := setup(t)
	chart := filepath.Join(root, "charts", "batchledger")
	certManager, err := ConfigVariant(root, t.TempDir(), "\n- ../internalcert\n", "\n- ../certmanager\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		render func(t *testing.T) Objects
	}{
		{"kustomize config/default", func(t *testing.T) Objects { return mustKustomize(t, tools, filepath.Join(root, "config", "default")) }},
		{"kustomize with cert-manager", func(t *testing.T) Objects { return mustKustomize(t, tools, certManager) }},
		{"chart defaults", func(t *testing.T) Objects { return mustChart(t, tools, chart) }},
		{"chart with cert-manager", func(t *testing.T) Objects { return mustChart(t, tools, chart, "webhook.certMode=certManager") }},
		{"chart, release ledger in namespace ops", func(t *testing.T) Objects { return mustChartAs(t, tools, chart, "ledger", "ops") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.render(t)
			d := deployment(t, o)
			flags := effectiveFlags(d.Spec.Template.Spec.Containers[0].Args)
			sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: d.Namespace, Name: d.Spec.Template.Spec.ServiceAccountName}
			perms := grantedTo(t, o, sa)
			mwc, vwc, secret := flags["mutating-webhook-configuration"], flags["validating-webhook-configuration"], flags["webhook-cert-secret"]
			self := flags["cert-management"] == "self"
			const arg = "admissionregistration.k8s.io"
			for _, r := range []struct {
				verb, group, resource, namespace, name string
				want                                   bool
			}{
				{"update", arg, "mutatingwebhookconfigurations", "", mwc, true},
				{"update", arg, "validatingwebhookconfigurations", "", vwc, true},
				{"list", arg, "mutatingwebhookconfigurations", "", "", true},
				{"watch", arg, "mutatingwebhookconfigurations", "", "", true},
				{"list", arg, "validatingwebhookconfigurations", "", "", true},
				{"watch", arg, "validatingwebhookconfigurations", "", "", true},
				{"update", arg, "mutatingwebhookconfigurations", "", "kueue-mutating-webhook-configuration", false},
				{"update", arg, "validatingwebhookconfigurations", "", "kueue-validating-webhook-configuration", false},
				{"update", arg, "mutatingwebhookconfigurations", "", vwc, false},
				{"get", arg, "mutatingwebhookconfigurations", "", mwc, false},
				{"patch", arg, "mutatingwebhookconfigurations", "", mwc, false},
				{"patch", arg, "validatingwebhookconfigurations", "", vwc, false},
				{"delete", arg, "mutatingwebhookconfigurations", "", mwc, false},
				{"create", arg, "mutatingwebhookconfigurations", "", "", false},
				{"update", "", "secrets", d.Namespace, secret, self},
				{"list", "", "secrets", d.Namespace, "", self},
				{"watch", "", "secrets", d.Namespace, "", self},
				{"get", "", "secrets", d.Namespace, flags["ledger-key-secret"], true},
				{"update", "", "secrets", d.Namespace, flags["ledger-key-secret"], true},
				{"delete", "", "secrets", d.Namespace, flags["ledger-key-secret"], false},
				{"get", "", "secrets", "kube-system", flags["ledger-key-secret"], false},
				{"update", "", "secrets", d.Namespace, "some-other-secret", false},
				{"get", "", "secrets", d.Namespace, "some-other-secret", false},
				{"create", "", "secrets", d.Namespace, "", false},
				{"list", "", "secrets", "kube-system", "", false},
				{"update", "", "secrets", "kube-system", secret, false},
			} {
				if got := perms.allows(r.verb, r.group, r.resource, r.namespace, r.name); got != r.want {
					t.Errorf("%s may %s %s %q in namespace %q: %v, want %v", sa.Name, r.verb, r.resource, r.name, r.namespace, got, r.want)
				}
			}
		})
	}
}

// permissions are the rules bound to one subject: cluster-wide ones (ClusterRoleBindings)
// and per namespace (RoleBindings, to a Role or a ClusterRole).
type permissions struct {
	cluster     []rbacv1.PolicyRule
	inNamespace map[string][]rbacv1.PolicyRule
}

// grantedTo collects the rules every rendered binding grants the subject.
func grantedTo(t *testing.T, o Objects, s rbacv1.Subject) permissions {
	t.Helper()
	p := permissions{inNamespace: map[string][]rbacv1.PolicyRule{}}
	roleRules := func(kind, ns, name string) []rbacv1.PolicyRule {
		u, ok := o[Key{kind, ns, name}]
		if !ok {
			t.Errorf("%s %s/%s is bound but not rendered", kind, ns, name)
			return nil
		}
		var r rbacv1.ClusterRole // a Role has the same rules
		if err := Into(u, &r); err != nil {
			t.Fatal(err)
		}
		return r.Rules
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range o.Of(kind) {
			var b rbacv1.RoleBinding
			if err := Into(u, &b); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(b.Subjects, func(x rbacv1.Subject) bool {
				return x.Kind == s.Kind && x.Namespace == s.Namespace && x.Name == s.Name
			}) {
				continue
			}
			roleNS := ""
			if b.RoleRef.Kind == "Role" {
				roleNS = b.Namespace
			}
			rules := roleRules(b.RoleRef.Kind, roleNS, b.RoleRef.Name)
			if kind == "ClusterRoleBinding" {
				p.cluster = append(p.cluster, rules...)
			} else {
				p.inNamespace[b.Namespace] = append(p.inNamespace[b.Namespace], rules...)
			}
		}
	}
	return p
}

// allows decides a resource request as RBAC does: some rule names the verb, API group
// and resource (or "*"), and either lists no resourceNames or lists the request's name;
// a request without a name (list, watch, create) never matches a rule with
// resourceNames. namespace "" is a cluster-scoped resource.
func (p permissions) allows(verb, group, resource, namespace, name string) bool {
	rules := p.cluster
	if namespace != "" {
		rules = append(slices.Clone(rules), p.inNamespace[namespace]...)
	}
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if has(r.Verbs, verb) && has(r.APIGroups, group) && has(r.Resources, resource) &&
			(len(r.ResourceNames) == 0 || name != "" && slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// comparePolicies: the same ValidatingAdmissionPolicies and bindings, identical specs.
func comparePolicies(t *testing.T, k, h Objects) {
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		ks := k.Of(kind)
		if len(ks) == 0 {
			t.Errorf("no %s rendered by kustomize", kind)
		}
		for _, u := range ks {
			other, ok := h[Key{kind, "", u.GetName()}]
			if !ok {
				continue // compareInventory reports it
			}
			a, b := u.Object["spec"], other.Object["spec"]
			if !equality.Semantic.DeepEqual(a, b) {
				t.Errorf("%s %s: specs differ:\n%s", kind, u.GetName(), diff(a, b))
			}
		}
	}
}

// Name suffixes of the four ValidatingAdmissionPolicies each install renders (after its
// name prefix: config/default's namePrefix, the chart's fullname).
const (
	releaseOnlyPolicy = "-pod-release-only"
	heldScopePolicy   = "-held-pod-scope"
	ledgerPolicy      = "-ledger-manager-only"
	indexPodPolicy    = "-index-pod"
)

// checkPolicy checks a rendering's three admission policies, each bound once with Deny
// alone and failing closed (the ledger's: checkLedgerPolicy):
//   - pod-release-only: UPDATE of pods (not their subresources), evaluated for exactly
//     the manager's ServiceAccount;
//   - held-pod-scope: UPDATE of pods and pods/status (whose update may change labels),
//     evaluated for every user but only for a pod whose old object carries the
//     result-capture finalizer and the scope label, and validating that label, both by
//     the names pkg/apis defines;
//   - index-pod: CREATE and UPDATE of pods and pods/status, evaluated for every user but
//     only for a pod that carries the index-pod mark by the name pkg/apis defines, and
//     naming the users webhook.JobControllers lists.
func checkPolicy(t *testing.T, o Objects) {
	d := deployment(t, o)
	vaps, bindings := o.Of("ValidatingAdmissionPolicy"), o.Of("ValidatingAdmissionPolicyBinding")
	if len(vaps) != 4 || len(bindings) != 4 {
		t.Fatalf("%d ValidatingAdmissionPolicies and %d bindings rendered, want 4 and 4", len(vaps), len(bindings))
	}
	checkIndexPodPolicy(t, o)
	checkLedgerPolicy(t, o)
	rules := func(resources ...string) []admissionregistrationv1.NamedRuleWithOperations {
		return []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources},
		}}}
	}

	vap := boundPolicy(t, o, releaseOnlyPolicy)
	if mc := vap.Spec.MatchConstraints; mc == nil || !equality.Semantic.DeepEqual(mc.ResourceRules, rules("pods")) {
		t.Errorf("policy %s: matchConstraints %s, want UPDATE of v1 pods alone", vap.Name, jsonString(vap.Spec.MatchConstraints))
	}
	want := fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if mcs := vap.Spec.MatchConditions; len(mcs) != 1 || mcs[0].Expression != want {
		t.Errorf("policy %s: matchConditions %s, want the single expression %q", vap.Name, jsonString(mcs), want)
	}

	vap = boundPolicy(t, o, heldScopePolicy)
	if mc := vap.Spec.MatchConstraints; mc == nil || !equality.Semantic.DeepEqual(mc.ResourceRules, rules("pods", "pods/status")) {
		t.Errorf("policy %s: matchConstraints %s, want UPDATE of v1 pods and pods/status", vap.Name, jsonString(vap.Spec.MatchConstraints))
	}
	wantConditions := []string{
		fmt.Sprintf("'%s' in oldObject.metadata.?finalizers.orValue([])", v1alpha1.ResultFinalizer),
		fmt.Sprintf("'%s' in oldObject.metadata.?labels.orValue({})", v1alpha1.LabelScope),
	}
	var got []string
	for _, mc := range vap.Spec.MatchConditions {
		got = append(got, mc.Expression)
	}
	if !slices.Equal(got, wantConditions) {
		t.Errorf("policy %s: matchConditions %q, want %q (every user, held pods only)", vap.Name, got, wantConditions)
	}
	if len(vap.Spec.Validations) != 1 || !strings.Contains(vap.Spec.Validations[0].Expression, "'"+v1alpha1.LabelScope+"'") ||
		!strings.Contains(vap.Spec.Validations[0].Expression, "'"+v1alpha1.ResultFinalizer+"'") {
		t.Errorf("policy %s: validations %s, want one on the %s label and the %s finalizer",
			vap.Name, jsonString(vap.Spec.Validations), v1alpha1.LabelScope, v1alpha1.ResultFinalizer)
	}
}

// boundPolicy returns the rendering's ValidatingAdmissionPolicy whose name ends in suffix,
// after checking what every batchledger policy must be: failing closed, with validations,
// bound by exactly one binding, with validationActions [Deny] alone and no parameters or
// narrowing of its own.
func boundPolicy(t *testing.T, o Objects, suffix string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	for _, u := range o.Of("ValidatingAdmissionPolicy") {
		if strings.HasSuffix(u.GetName(), suffix) {
			if err := Into(u, &vap); err != nil {
				t.Fatal(err)
			}
		}
	}
	if vap.Name == "" {
		t.Fatalf("no ValidatingAdmissionPolicy *%s rendered", suffix)
	}
	if fp := vap.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail {
		t.Errorf("policy %s: failurePolicy %v, want Fail", vap.Name, fp)
	}
	if len(vap.Spec.Validations) == 0 {
		t.Errorf("policy %s has no validations", vap.Name)
	}
	n := 0
	for _, u := range o.Of("ValidatingAdmissionPolicyBinding") {
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if err := Into(u, &b); err != nil {
			t.Fatal(err)
		}
		if b.Spec.PolicyName != vap.Name {
			continue
		}
		n++
		if !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) || b.Spec.ParamRef != nil || b.Spec.MatchResources != nil {
			t.Errorf("binding %s: %s, want validationActions [Deny] alone", b.Name, jsonString(b.Spec))
		}
	}
	if n != 1 {
		t.Errorf("policy %s is bound by %d bindings, want 1", vap.Name, n)
	}
	return &vap
}

// checkIndexPodPolicy checks the index-pod policy (checkPolicy).
func checkIndexPodPolicy(t *testing.T, o Objects) {
	vap := boundPolicy(t, o, indexPodPolicy)
	want := []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "pods/status"}},
	}}}
	if mc := vap.Spec.MatchConstraints; mc == nil || !equality.Semantic.DeepEqual(mc.ResourceRules, want) {
		t.Errorf("policy %s: matchConstraints %s, want CREATE and UPDATE of v1 pods and pods/status", vap.Name, jsonString(vap.Spec.MatchConstraints))
	}
	wantCondition := fmt.Sprintf("'%s' in object.metadata.?annotations.orValue({})", v1alpha1.AnnotationIndexPod)
	if mcs := vap.Spec.MatchConditions; len(mcs) != 1 || mcs[0].Expression != wantCondition {
		t.Errorf("policy %s: matchConditions %s, want the single expression %q", vap.Name, jsonString(mcs), wantCondition)
	}
	for _, user := range webhook.JobControllers {
		if !slices.ContainsFunc(vap.Spec.Validations, func(v admissionregistrationv1.Validation) bool { return strings.Contains(v.Expression, "'"+user+"'") }) {
			t.Errorf("policy %s: no validation names the Job controller's user %s", vap.Name, user)
		}
	}
}
