// Package resolve finds the BatchAccounts an object concerns, for the verbs that take
// "KIND NAME": an account itself, a Kueue Workload (through its owner Job or JobSet), a
// Job or a JobSet. The kind-specific lookups are in ResolveAccounts, one place.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/kinds/all"
	"batchledger.dev/batchledger/pkg/relations"
)

// Kinds `explain` resolves, with the aliases kubectl users type.
const (
	KindAccount  = "account"
	KindWorkload = "workload"
	KindJob      = "job"
	KindJobSet   = "jobset"
)

// kindAliases maps what a user types to a kind.
var kindAliases = map[string]string{
	"account": KindAccount, "accounts": KindAccount, "batchaccount": KindAccount, "batchaccounts": KindAccount, "ba": KindAccount, "bacct": KindAccount,
	"workload": KindWorkload, "workloads": KindWorkload, "wl": KindWorkload,
	"job": KindJob, "jobs": KindJob,
	"jobset": KindJobSet, "jobsets": KindJobSet, "js": KindJobSet,
}

// KindOf is the kind an alias (account, wl, jobs, trainjob, ...) stands for, in any
// case: one of the aliases above, or any kind of target by name or plural.
func KindOf(alias string) (string, bool) {
	if kind, ok := kindAliases[strings.ToLower(alias)]; ok {
		return kind, true
	}
	return ownerKind(alias)
}

// ParseKindName reads "KIND NAME" or "KIND/NAME" as kubectl does.
func ParseKindName(args []string) (kind, name string, err error) {
	switch len(args) {
	case 1:
		k, n, ok := strings.Cut(args[0], "/")
		if !ok {
			return "", "", fmt.Errorf("name the object: KIND NAME or KIND/NAME (KIND is account, workload, %s)", strings.Join(targetKinds(), ", "))
		}
		args = []string{k, n}
	case 2:
	default:
		return "", "", fmt.Errorf("expected KIND NAME, got %d arguments", len(args))
	}
	kind, ok := KindOf(args[0])
	if !ok {
		return "", "", fmt.Errorf("unknown kind %q: use account, workload, %s", args[0], strings.Join(targetKinds(), ", "))
	}
	if args[1] == "" {
		return "", "", fmt.Errorf("%s name is empty", kind)
	}
	return kind, args[1], nil
}

// ResolveAccounts finds the accounts an object concerns: an account itself; for a Kueue
// Workload, the accounts targeting its owner Job or JobSet; for a Job, the accounts
// targeting it (by name, or as a JobSet child); for a JobSet, the accounts targeting any
// of its children. Of a Job, a Workload, or an owner with a Workload that exists, only
// the accounts that follow its run (account.Follows) concern it: an Accepted account
// names a Job re-run (or a JobSet applied again) under its target's name but speaks for
// nothing of it. Accounts come sorted by name; none found is
// an error naming the object, and saying why an account naming it does not follow it.
func ResolveAccounts(ctx context.Context, c client.Client, namespace, kind, name string) ([]v1alpha1.BatchAccount, error) {
	accts, _, err := Resolve(ctx, c, namespace, kind, name)
	return accts, err
}

// Resolve is ResolveAccounts, and says in words of each account that names the object
// but does not follow its run (account.Follows) why it is left out, for the verbs to
// warn of.
func Resolve(ctx context.Context, c client.Client, namespace, kind, name string) (accts []v1alpha1.BatchAccount, notFollowing []string, err error) {
	named, r, err := namedAccounts(ctx, c, namespace, kind, name)
	if err != nil || r == nil {
		return named, nil, err
	}
	for i := range named {
		if account.Follows(&named[i], r.ref) {
			accts = append(accts, named[i])
		} else {
			notFollowing = append(notFollowing, r.notFollowing(&named[i]))
		}
	}
	if len(accts) == 0 {
		return nil, nil, fmt.Errorf("no BatchAccount follows %s: %s", r.what, strings.Join(notFollowing, "; "))
	}
	return accts, notFollowing, nil
}

// WarnNotFollowing writes to w (the verbs' stderr, so that -o json|yaml stays one
// object) a warning for each account Resolve left out, so that none is left out
// silently; nothing when w is nil.
func WarnNotFollowing(w io.Writer, notFollowing []string) {
	if w == nil {
		return
	}
	for _, n := range notFollowing {
		fmt.Fprintf(w, "Warning: %s\n", n)
	}
}

// run is the run of an existing Job, Workload or owner that accounts naming it may not
// follow.
type run struct {
	ref account.RunRef
	// what is the run in words: `Job "j" (uid ...)`.
	what string
	// named is what the accounts name: `Job "j"`, `JobSet "train"`.
	named string
	// match is how the accounts name it.
	match func(v1alpha1.TargetRef) bool
}

// notFollowing says why ba, naming the run's object, does not follow it: it is Accepted
// on the identities on its record, earlier runs of the name.
func (r *run) notFollowing(ba *v1alpha1.BatchAccount) string {
	var uids []string
	for _, t := range ba.Status.Targets {
		if ref, ok := v1alpha1.TargetKey(t.Name).Ref(); ok && t.UID != "" && r.match(ref) {
			uids = append(uids, string(t.UID))
		}
	}
	msg := fmt.Sprintf("BatchAccount %q names %s but was Accepted on an earlier run of the name", ba.Name, r.named)
	if len(uids) > 0 {
		msg += fmt.Sprintf(" (%s %s)", output.Plural(len(uids), "Job uid", "Job uids"), strings.Join(uids, ", "))
	}
	return msg + ": it speaks for nothing of this run"
}

// namedAccounts finds the accounts naming the object, and the run of a Job, a Workload,
// or an owner's Workload that exists (nil for an account, and for a Job or owner not
// found).
func namedAccounts(ctx context.Context, c client.Client, namespace, kind, name string) ([]v1alpha1.BatchAccount, *run, error) {
	switch kind {
	case KindAccount:
		var ba v1alpha1.BatchAccount
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba); err != nil {
			return nil, nil, DescribeGetError(err, "BatchAccount", namespace, name)
		}
		return []v1alpha1.BatchAccount{ba}, nil, nil
	case KindWorkload:
		var wl kueue.Workload
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &wl); err != nil {
			return nil, nil, DescribeGetError(err, "Workload", namespace, name)
		}
		owner := relations.WorkloadOwner(&wl)
		if owner == nil {
			return nil, nil, fmt.Errorf("Workload %q in namespace %q is owned by no %s; batchledger accounts only for those", name, namespace, objectKinds())
		}
		ownerKind := all.Kinds.Owning(*owner).Name()
		accts, _, err := namedAccounts(ctx, c, namespace, ownerKind, owner.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("Workload %q: %w", name, err)
		}
		// The Workload is the run asked about, whatever Job of its owner's name exists now.
		return accts, &run{
			ref:   account.RunRef{WorkloadUID: wl.UID, WorkloadName: wl.Name},
			what:  fmt.Sprintf("Workload %q (uid %s)", wl.Name, wl.UID),
			named: fmt.Sprintf("%s %q", owner.Kind, owner.Name),
			match: func(t v1alpha1.TargetRef) bool { return t.Kind() == ownerKind && t.Owner() == owner.Name },
		}, nil
	case KindJob:
		var job batchv1.Job
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, DescribeGetError(err, "Job", namespace, name)
		}
		found := err == nil
		match := func(t v1alpha1.TargetRef) bool {
			return t.Job == name || (found && relations.NamesJob(t, &job))
		}
		accts, err := accountsWhere(ctx, c, namespace, match)
		if err != nil {
			return nil, nil, err
		}
		if len(accts) == 0 {
			if !found {
				return nil, nil, fmt.Errorf("Job %q not found in namespace %q, and no BatchAccount there targets it", name, namespace)
			}
			return nil, nil, fmt.Errorf("no BatchAccount in namespace %q targets Job %q", namespace, name)
		}
		if !found {
			// A Job deleted is no run: the accounts' records stand for it.
			return accts, nil, nil
		}
		return accts, &run{
			ref:   account.RunRef{Job: job.UID},
			what:  fmt.Sprintf("Job %q (uid %s)", name, job.UID),
			named: fmt.Sprintf("Job %q", name), match: match,
		}, nil
	}
	k := all.Kinds.Named(kind)
	if k == nil {
		return nil, nil, fmt.Errorf("unknown kind %q", kind)
	}
	accts, err := accountsWhere(ctx, c, namespace, func(t v1alpha1.TargetRef) bool { return t.Kind() == kind && t.Owner() == name })
	if err != nil {
		return nil, nil, err
	}
	if len(accts) == 0 {
		return nil, nil, fmt.Errorf("no BatchAccount in namespace %q targets %s %q", namespace, k.Object().Kind, name)
	}
	wl, err := ownerWorkload(ctx, c, namespace, k.NewObject(), k.Object().Kind, name)
	if err != nil || wl == nil {
		return accts, nil, err
	}
	// The owner's run is its Workload: one applied again under the name has another.
	named := fmt.Sprintf("%s %q", k.Object().Kind, name)
	return accts, &run{
		ref:   account.RunRef{WorkloadUID: wl.UID, WorkloadName: wl.Name},
		what:  fmt.Sprintf("%s (Workload %q, uid %s)", named, wl.Name, wl.UID),
		named: named,
		match: func(t v1alpha1.TargetRef) bool { return t.Kind() == kind && t.Owner() == name },
	}, nil
}

// ownerWorkload reads into obj the owner (a JobSet, a TrainJob, of kind objKind) named
// name, and returns its NewestWorkload; nil when the owner or its Workload does not exist, or the cluster
// serves neither kind (the accounts' records then stand for it).
func ownerWorkload(ctx context.Context, c client.Client, namespace string, obj client.Object, objKind, name string) (*kueue.Workload, error) {
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, DescribeGetError(err, objKind, namespace, name)
	}
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing Workloads in namespace %q: %w", namespace, NotServed(err))
	}
	return relations.NewestWorkloadsByOwner(wls.Items)[obj.GetUID()], nil
}

// ownerKind reads a kind of target typed by its name or plural ("trainjob",
// "trainjobs"): every kind of pkg/kinds/all is explained by name.
func ownerKind(typed string) (string, bool) {
	name := strings.TrimSuffix(strings.ToLower(typed), "s")
	if k := all.Kinds.Named(name); k != nil {
		return k.Name(), true
	}
	return "", false
}

// objectKinds names the objects of every kind of target: "Job, JobSet or TrainJob".
func objectKinds() string {
	names := make([]string, len(all.Kinds))
	for i, k := range all.Kinds {
		names[i] = k.Object().Kind
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// KindNameUse is the usage line of a verb that takes "KIND NAME", every kind spelled
// out: "explain (account|workload|job|jobset|trainjob) NAME".
func KindNameUse(verb string) string {
	return verb + " (" + strings.Join(append([]string{KindAccount, KindWorkload}, targetKinds()...), "|") + ") NAME"
}

// targetKinds are the names of the kinds of target, for messages.
func targetKinds() []string {
	out := make([]string, len(all.Kinds))
	for i, k := range all.Kinds {
		out[i] = k.Name()
	}
	return out
}

// DescribeGetError names the object in a failed Get: kind, name and namespace.
func DescribeGetError(err error, kind, namespace, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %q not found in namespace %q", kind, name, namespace)
	}
	return fmt.Errorf("reading %s %q in namespace %q: %w", kind, name, namespace, NotServed(err))
}

// installedBy names what installs the API of a group, for NotServed.
var installedBy = map[string]string{
	v1alpha1.GroupVersion.Group: "batchledger",
	kueue.GroupVersion.Group:    "Kueue",
}

// NotServed adds to an error saying the cluster serves no such kind (its CRD is not
// installed) what is missing; other errors are returned as they are.
func NotServed(err error) error {
	var nk *meta.NoKindMatchError
	if !errors.As(err, &nk) {
		return err
	}
	gv := nk.GroupKind.Group
	if len(nk.SearchedVersions) > 0 {
		gv += "/" + nk.SearchedVersions[0]
	}
	what := "is its CRD installed?"
	if by, ok := installedBy[nk.GroupKind.Group]; ok {
		what = "is " + by + " installed?"
	}
	return fmt.Errorf("%w: the %s API (%s) is not served by this cluster: %s", err, nk.GroupKind.Kind, gv, what)
}

// accountsWhere lists the accounts of namespace with a target matching match.
func accountsWhere(ctx context.Context, c client.Client, namespace string, match func(v1alpha1.TargetRef) bool) ([]v1alpha1.BatchAccount, error) {
	var list v1alpha1.BatchAccountList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing BatchAccounts in namespace %q: %w", namespace, NotServed(err))
	}
	var out []v1alpha1.BatchAccount
	for _, ba := range list.Items {
		if slices.ContainsFunc(ba.Spec.AllAssignments(), func(a v1alpha1.Assignment) bool {
			return (a.Target.Namespace == "" || a.Target.Namespace == namespace) && match(a.Target)
		}) {
			out = append(out, ba)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.BatchAccount) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
