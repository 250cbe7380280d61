package installcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
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

// TestLedgerPolicyOnLocalCluster applies the ledger-manager-only ValidatingAdmissionPolicy
// of each install in turn (config/default, then the chart as release ledger in namespace
// ops: one at a time, since each refuses the other's manager) with both installs' RBAC on
// a local control plane (OwnerReferencesPermissionEnforcement on), and writes the ledger
// as each user, impersonated so that the user's own RBAC applies:
//   - a namespace editor (a Role granting batchledger.dev's every resource and verb) and
//     the cluster admin are refused, by the policy and with its message, when they create
//     a chunk carrying an account's UID label and controller reference, update or delete
//     a chunk, delete the namespace's chunks as a collection, or update or patch an
//     account's status; and nothing they tried is left changed;
//   - the install's manager ServiceAccount, with its generated RBAC, creates a chunk
//     (blockOwnerDeletion included: batchaccounts/finalizers), updates it and writes the
//     account's status;
//   - the garbage collector, the namespace controller and system:kube-controller-manager
//     delete chunks, but the garbage collector may not update one.
//
// It needs the cluster binaries (make binaries) and is skipped with -short or without them.
func TestLedgerPolicyOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	root, tools := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	installs := bothInstalls(t, root, tools)
	c, _, clientset := startBareCluster(ctx, t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	as := func(user string, groups ...string) client.Client {
		cfg := rest.CopyConfig(c.RESTConfig)
		if user != "" {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		}
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	admin := as("")
	serviceAccount := func(user string) client.Client {
		return as(user, "system:serviceaccounts", "system:serviceaccounts:"+strings.Split(user, ":")[2])
	}

	// The CRDs (the same in both installs), each install's manager identity and RBAC.
	managers := map[string]string{} // install → ServiceAccount user name
	for _, k := range installs["kustomize"].Keys() {
		if k.Kind == "CustomResourceDefinition" {
			if err := admin.Create(ctx, installs["kustomize"][k].DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"kustomize", "chart"} {
		objs := installs[name]
		d := deployment(t, objs)
		managers[name] = fmt.Sprintf("system:serviceaccount:%s:%s", d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		for _, k := range objs.Keys() {
			switch k.Kind {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			default:
				continue
			}
			if isHook(objs[k]) {
				continue
			}
			if err := admin.Create(ctx, objs[k].DeepCopy()); err != nil {
				t.Fatalf("%s: create %s: %v", name, k, err)
			}
		}
	}

	const ns = "ml-team"
	createPodNamespace(ctx, t, admin, ns)
	// The namespace editor: every verb on every resource of the group, in the namespace.
	const editorName = "jane"
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batchledger-everything"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jane"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "batchledger-everything"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: editorName}}},
		// A kube-controller-manager without per-controller credentials deletes as itself;
		// here it is given the right to, so that only the policy decides.
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ledger-check-delete-chunks"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"shardresults"}, Verbs: []string{"delete"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ledger-check-delete-chunks"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ledger-check-delete-chunks"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "system:kube-controller-manager"}}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	editor := as(editorName)

	// The CRDs must be served before anything of theirs is created.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return admin.List(ctx, &v1alpha1.ShardResultsList{}, client.InNamespace(ns)) == nil &&
			admin.List(ctx, &v1alpha1.BatchAccountList{}, client.InNamespace(ns)) == nil, nil
	})
	if err != nil {
		t.Fatalf("the CRDs are not served: %v", err)
	}
	seq := 0
	newAccount := func(t *testing.T) *v1alpha1.BatchAccount {
		t.Helper()
		seq++
		ba := wrappers.MakeBatchAccount(fmt.Sprintf("ij245-%d", seq), ns).Shards("A").AssignJob("j", "0", "A").Obj()
		if err := admin.Create(ctx, ba); err != nil {
			t.Fatal(err)
		}
		return ba
	}
	// chunk is what the manager writes for ba (and what a forger copies): the account's
	// UID label, a controller reference to it, one accepted result.
	chunk := func(ba *v1alpha1.BatchAccount, name string) *v1alpha1.ShardResults {
		return &v1alpha1.ShardResults{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: v1alpha1.ChunkLabels(ba),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))}},
			Account: ba.Name, AccountUID: ba.UID, FirstOrdinal: 0,
			Results: []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: "forged-job", Index: 0,
				Pod: "j-0", PodUID: "forged-pod", InputRevision: "D", ModelRevision: "m-2026-11", Records: 1000, Valid: 1000, RecordedAt: metav1.Now()}},
		}
	}

	// The canary's status is patched by the editor to a new value on each attempt (never a
	// no-op) until the policy is seen to refuse it, or to allow it once it is deleted.
	canary := newAccount(t)
	attempt := int64(0)
	patchCanary := func(ctx context.Context) error {
		attempt++
		return editor.Status().Patch(ctx, canary.DeepCopy(), client.RawPatch("application/merge-patch+json",
			[]byte(fmt.Sprintf(`{"status":{"observedGeneration":%d}}`, attempt))))
	}

	for _, install := range []string{"kustomize", "chart"} {
		objs, policy := installs[install], policyName(installs[install], ledgerPolicy)
		var created []client.Object
		for _, k := range objs.Keys() {
			if !strings.HasPrefix(k.Kind, "ValidatingAdmissionPolicy") || !strings.HasSuffix(k.Name, ledgerPolicy) {
				continue
			}
			u := objs[k].DeepCopy()
			if err := admin.Create(ctx, u); err != nil {
				t.Fatalf("%s: create %s: %v", install, k, err)
			}
			created = append(created, u)
		}
		if len(created) != 2 {
			t.Fatalf("%s rendered %d ledger policy objects, want a policy and its binding", install, len(created))
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := patchCanary(ctx)
			return err != nil && strings.Contains(err.Error(), policy), nil
		}); err != nil {
			t.Fatalf("the %s policy %s never refused the editor's status patch: %v", install, policy, err)
		}
		waitTypeChecked(ctx, t, clientset, policy)

		manager := serviceAccount(managers[install])
		// The manager's own writes: a chunk with its blockOwnerDeletion reference, an
		// update of it, the account's status.
		ba := newAccount(t)
		recorded := chunk(ba, fmt.Sprintf("%s-0-255", ba.UID))
		t.Run(install+"/the manager records results and writes the status", func(t *testing.T) {
			if err := manager.Create(ctx, recorded); err != nil {
				t.Fatalf("the manager's chunk was refused: %v", err)
			}
			recorded.Results = append(recorded.Results, recorded.Results[0])
			recorded.Results[1].PodUID = "another-pod"
			if err := manager.Update(ctx, recorded); err != nil {
				t.Fatalf("the manager's chunk update was refused: %v", err)
			}
			ba.Status.ObservedGeneration = ba.Generation
			if err := manager.Status().Update(ctx, ba); err != nil {
				t.Fatalf("the manager's status update was refused: %v", err)
			}
		})

		for _, who := range []struct {
			name string
			cl   client.Client
		}{{"a namespace editor", editor}, {"the cluster admin", as("")}} {
			refused := func(t *testing.T, what string, err error, want string) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: %s was allowed", who.name, what)
				}
				t.Logf("refused: %v", err)
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %s refused with %v; want Forbidden by %s saying %q", who.name, what, err, policy, want)
				}
			}
			const chunkMessage, statusMessage = "only batchledger's manager records results", "only batchledger's manager writes it"
			t.Run(install+"/"+who.name+" may not write the ledger", func(t *testing.T) {
				forged := chunk(ba, fmt.Sprintf("%s-0-255-1", ba.UID))
				refused(t, "creating a forged chunk", who.cl.Create(ctx, forged), chunkMessage)
				if err := admin.Get(ctx, client.ObjectKeyFromObject(forged), &v1alpha1.ShardResults{}); !apierrors.IsNotFound(err) {
					t.Errorf("the forged chunk exists (%v)", err)
				}

				var before v1alpha1.ShardResults
				if err := admin.Get(ctx, client.ObjectKeyFromObject(recorded), &before); err != nil {
					t.Fatal(err)
				}
				changed := before.DeepCopy()
				changed.Results[0].ModelRevision = "m-forged"
				refused(t, "updating a chunk", who.cl.Update(ctx, changed), chunkMessage)
				refused(t, "patching a chunk", who.cl.Patch(ctx, before.DeepCopy(), client.RawPatch("application/merge-patch+json",
					[]byte(`{"metadata":{"labels":{"team":"ml"}}}`))), chunkMessage)
				refused(t, "deleting a chunk", who.cl.Delete(ctx, before.DeepCopy()), chunkMessage)
				refused(t, "deleting the namespace's chunks", who.cl.DeleteAllOf(ctx, &v1alpha1.ShardResults{}, client.InNamespace(ns)), chunkMessage)
				var after v1alpha1.ShardResults
				if err := admin.Get(ctx, client.ObjectKeyFromObject(recorded), &after); err != nil {
					t.Fatalf("the chunk is gone: %v", err)
				}
				if after.ResourceVersion != before.ResourceVersion {
					t.Errorf("a refused write changed the chunk: %s", jsonString(after))
				}

				var acct v1alpha1.BatchAccount
				if err := admin.Get(ctx, client.ObjectKeyFromObject(ba), &acct); err != nil {
					t.Fatal(err)
				}
				forgedStatus := acct.DeepCopy()
				forgedStatus.Status.Shards.Accepted = 1
				refused(t, "updating the account's status", who.cl.Status().Update(ctx, forgedStatus), statusMessage)
				refused(t, "patching the account's status", who.cl.Status().Patch(ctx, acct.DeepCopy(), client.RawPatch("application/merge-patch+json",
					[]byte(`{"status":{"shards":{"accepted":1}}}`))), statusMessage)
				var now v1alpha1.BatchAccount
				if err := admin.Get(ctx, client.ObjectKeyFromObject(ba), &now); err != nil {
					t.Fatal(err)
				}
				if now.ResourceVersion != acct.ResourceVersion {
					t.Errorf("a refused write changed the account's status: %s", jsonString(now.Status))
				}
			})
		}

		t.Run(install+"/the garbage collector may delete a chunk, not update it", func(t *testing.T) {
			gc := serviceAccount(ledgerDeleters[0])
			var cur v1alpha1.ShardResults
			if err := admin.Get(ctx, client.ObjectKeyFromObject(recorded), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Labels["team"] = "ml"
			err := gc.Update(ctx, &cur)
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) {
				t.Errorf("the garbage collector's update: %v; want Forbidden by %s", err, policy)
			}
		})
		for _, user := range ledgerDeleters {
			t.Run(install+"/"+user+" may delete a chunk", func(t *testing.T) {
				acct := newAccount(t)
				doomed := chunk(acct, fmt.Sprintf("%s-0-255", acct.UID))
				if err := manager.Create(ctx, doomed); err != nil {
					t.Fatal(err)
				}
				deleter := as(user)
				if strings.HasPrefix(user, "system:serviceaccount:") {
					deleter = serviceAccount(user)
				}
				if err := deleter.Delete(ctx, doomed); err != nil {
					t.Fatalf("%s's delete was refused: %v", user, err)
				}
			})
		}

		// Take this install's policy away (and see it gone) before the next one's cases.
		for _, obj := range created {
			if err := admin.Delete(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return patchCanary(ctx) == nil, nil
		}); err != nil {
			t.Fatalf("the editor's status patch was still refused after deleting the %s policy %s: %v", install, policy, err)
		}
	}
}
