package localcluster

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// batchledgerPrefix is config/default's namePrefix, which the local cluster gives the
// objects it reads from config/ as kustomize would.
const batchledgerPrefix = "batchledger-"

// batchledgerRunNamespace is the namespace the local cluster runs the manager in (its
// --namespace unless the caller passes another): its Lease, its certificate and the key
// that signs recorded results are there.
const batchledgerRunNamespace = "default"

// batchledgerPolicies are the config/policy files the local cluster applies. Not
// held_pod_scope_policy.yaml: it binds every user, and e2e tests relabel a held pod on
// purpose to see the manager release it.
var batchledgerPolicies = []string{"pod_release_policy.yaml", "ledger_policy.yaml", "index_pod_policy.yaml"}

// batchledgerUserRoles are the config/rbac files of the users' ClusterRoles.
var batchledgerUserRoles = []string{"batchaccount_editor_role.yaml", "batchaccount_viewer_role.yaml"}

// batchledgerObjects are what config/default creates for the manager besides its
// Deployment, for a manager run with args: its namespace and ServiceAccount (the
// BatchledgerIdentity), the ClusterRole `make generate` writes (config/rbac/role.yaml)
// and its binding; with --leader-elect the leader-election Role and binding in the
// --namespace its Lease is in; with --cert-management=self the certificate Secret's
// Role there; the users' ClusterRoles (batchledgerUserRoles); and the admission policies
// of batchledgerPolicies. So the manager runs
// with exactly the permissions and policies an install gives it: a permission it lacks
// fails here as it would on a cluster.
func batchledgerObjects(root string, args []string) ([]client.Object, error) {
	rbacDir, policyDir := filepath.Join(root, "config", "rbac"), filepath.Join(root, "config", "policy")
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: BatchledgerServiceAccount, Namespace: BatchledgerNamespace}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: BatchledgerNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: BatchledgerNamespace, Name: BatchledgerServiceAccount}},
	}
	generated, err := loadObjects(filepath.Join(rbacDir, "role.yaml"))
	if err != nil {
		return nil, err
	}
	// bind adds role (renamed as kustomize would, in namespace ns for a Role) and its
	// binding to the manager's ServiceAccount.
	bind := func(role client.Object, ns string) {
		name := batchledgerPrefix + role.GetName()
		role.SetName(name)
		var binding client.Object
		switch r := role.(type) {
		case *rbacv1.ClusterRole:
			prefixResourceNames(r.Rules)
			binding = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "binding"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: []rbacv1.Subject{sa}}
		case *rbacv1.Role:
			r.Namespace = ns
			prefixResourceNames(r.Rules)
			binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "binding"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{sa}}
		}
		objs = append(objs, role, binding)
	}
	// Roles of the manager's namespace go to the namespace it runs in (--namespace, by
	// default batchledgerRunNamespace), as the install's namespace is the one it runs in.
	ns := cmp.Or(flagValue(args, "--namespace"), batchledgerRunNamespace)
	if ns != BatchledgerNamespace {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	leaderElect := slices.Contains(args, "--leader-elect") || flagValue(args, "--leader-elect") == "true"
	for _, obj := range generated {
		switch obj.(type) {
		case *rbacv1.ClusterRole:
			bind(obj, "")
		case *rbacv1.Role:
			// The Secrets of its namespace: the result signing key, the certificate.
			bind(obj, ns)
		}
	}
	// The result signing key's Secret, created empty as config/manager creates it.
	secrets, err := loadObjects(filepath.Join(root, "config", "manager", "ledger_key_secret.yaml"))
	if err != nil {
		return nil, err
	}
	for _, obj := range secrets {
		obj.SetName(batchledgerPrefix + obj.GetName())
		obj.SetNamespace(ns)
		objs = append(objs, obj)
	}
	// The users' roles, aggregated to the built-in admin, edit and view ClusterRoles.
	for _, file := range batchledgerUserRoles {
		roles, err := loadObjects(filepath.Join(rbacDir, file))
		if err != nil {
			return nil, err
		}
		for _, obj := range roles {
			obj.SetName(batchledgerPrefix + obj.GetName())
			objs = append(objs, obj)
		}
	}
	if leaderElect {
		le, err := loadObjects(filepath.Join(rbacDir, "leader_election_role.yaml"))
		if err != nil {
			return nil, err
		}
		for _, obj := range le {
			bind(obj, ns)
		}
	}
	for _, file := range batchledgerPolicies {
		policies, err := loadObjects(filepath.Join(policyDir, file))
		if err != nil {
			return nil, err
		}
		for _, obj := range policies {
			obj.SetName(batchledgerPrefix + obj.GetName())
			if b, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
				b.Spec.PolicyName = batchledgerPrefix + b.Spec.PolicyName
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// prefixResourceNames renames the objects rules grant by name (the webhook configurations,
// the certificate Secret) as config/default names them.
func prefixResourceNames(rules []rbacv1.PolicyRule) {
	for i := range rules {
		for j, n := range rules[i].ResourceNames {
			rules[i].ResourceNames[j] = batchledgerPrefix + n
		}
	}
}

// loadObjects reads the roles and admission policies of a YAML file; any other kind is
// an error, so that a file growing an object the local cluster would silently skip
// fails here instead.
func loadObjects(path string) ([]client.Object, error) {
	docs, err := readYAMLDocs(path)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, doc := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var obj client.Object
		switch meta.Kind {
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "Role":
			obj = &rbacv1.Role{}
		case "Secret":
			obj = &corev1.Secret{}
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			return nil, fmt.Errorf("%s: unexpected %s", path, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, obj)
	}
	return out, nil
}
