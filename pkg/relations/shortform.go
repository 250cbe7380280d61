package relations

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
	"batchledger.dev/batchledger/pkg/kinds/shortform"
)

// The short form is parsed by its kind (Kind.ShortForm), once, for both of its readers:
// the controller creates the account ShortForm returns, and the scope webhooks stamp the
// scope of that same account (ShortFormScope). So a short form that does not parse gets
// neither an account nor a scope: no pod is held for an account that will never exist.

// HasShortForm reports whether annotations declare a short form: any of its annotations.
func HasShortForm(annotations map[string]string) bool { return shortform.Declared(annotations) }

// ShortFormKind is the kind whose objects are of obj's type; nil when none is.
func ShortFormKind(obj client.Object) kinds.Kind {
	t := reflect.TypeOf(obj)
	for _, k := range all.Kinds {
		if reflect.TypeOf(k.NewObject()) == t {
			return k
		}
	}
	return nil
}

// ShortForm is the account spec the short-form annotations of obj (a Job, a JobSet, a
// TrainJob) declare, or an error naming the annotation to fix and what is wrong with it.
func ShortForm(obj client.Object) (v1alpha1.BatchAccountSpec, error) {
	k := ShortFormKind(obj)
	if k == nil {
		return v1alpha1.BatchAccountSpec{}, fmt.Errorf("a short form is declared on an object of a kind of target, not a %T", obj)
	}
	spec, err := k.ShortForm(obj)
	if err != nil {
		return spec, err
	}
	return spec, checkMapping(obj.GetNamespace(), obj.GetAnnotations(), &spec)
}

// ShortFormScope is the scope the short form of obj gives the pods of the Jobs its
// account names: the scope of the account ShortForm declares. It is "" when obj carries
// no short form, and "" with ShortForm's error when it carries one that does not parse.
func ShortFormScope(obj client.Object) (string, error) {
	if !HasShortForm(obj.GetAnnotations()) {
		return "", nil
	}
	spec, err := ShortForm(obj)
	if err != nil {
		return "", err
	}
	return specScope(&spec), nil
}

// ShortFormWait is how long an account a short form declares is waited for: from the
// creation of its declaring object, or from since (the holder's start) when later. The
// controller creates it within a reconcile or two (ShortFormReconciler); one that is not
// there by then is not coming (the API server refused it, or it was deleted since).
const ShortFormWait = time.Minute

// ShortFormCreated reports whether the account obj's short form declares was created
// for obj itself (v1alpha1.AnnotationShortFormCreated names obj's UID): one not there
// any more was deleted since, and is not created again.
func ShortFormCreated(obj client.Object) bool {
	v, ok := obj.GetAnnotations()[v1alpha1.AnnotationShortFormCreated]
	return ok && v == string(obj.GetUID())
}

// ShortFormExpired reports whether obj, of kind k, is a batch that ended ttl or longer
// before now (ttl 0: none is): its short form gets no account any more, since retention
// deleted it (or would at once), and creating it again would only repeat that.
func ShortFormExpired(k kinds.Kind, obj client.Object, ttl time.Duration, now time.Time) bool {
	ended, ok := k.FinishedAt(obj)
	return ok && ttl > 0 && !now.Before(ended.Add(ttl))
}

// ShortFormPending returns the names of the accounts requiring results that a short form
// declares naming one of the targets refs (of namespace), that do not exist yet and are
// still waited for (ShortFormWait), and how soon, a second at least, the first of them
// stops being waited for (a hold for them is looked at again then). It reads, through r,
// the short form of each target's declaring object (the Job, or the JobSet or TrainJob of
// a child target). A pod may succeed, and its Job be deleted, before the controller
// created the account; letting them go then would lose what the account is declared to
// record, so the pod releaser and the Job recorder hold them for it as for an existing
// account. None is pending for an expired batch (ShortFormExpired with ttl), nor for an
// object whose account was created and deleted since (ShortFormCreated).
func ShortFormPending(ctx context.Context, r client.Reader, namespace string, refs []v1alpha1.TargetRef, ttl time.Duration, now, since time.Time) ([]string, time.Duration, error) {
	var pending []string
	var until time.Time
	for _, ref := range refs {
		name := ref.Owner()
		if slices.Contains(pending, name) {
			continue
		}
		k := KindOf(ref)
		obj := k.NewObject()
		// Read only: the cache's own copies serve.
		if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj, client.UnsafeDisableDeepCopy); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				continue // gone, or of a kind whose API is not served
			}
			return nil, 0, err
		}
		if !HasShortForm(obj.GetAnnotations()) {
			continue
		}
		waitedUntil := obj.GetCreationTimestamp().Time
		if since.After(waitedUntil) {
			waitedUntil = since
		}
		waitedUntil = waitedUntil.Add(ShortFormWait)
		if !now.Before(waitedUntil) {
			continue
		}
		if ShortFormExpired(k, obj, ttl, now) || ShortFormCreated(obj) {
			// Created once for obj: if it is gone, it was deleted and is not coming.
			continue
		}
		var ba v1alpha1.BatchAccount
		switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba, client.UnsafeDisableDeepCopy); {
		case err == nil:
			continue // it exists: it holds, or not, as any account does
		case !apierrors.IsNotFound(err):
			return nil, 0, err
		}
		spec, err := ShortForm(obj)
		if err != nil || !spec.RequiresResults() || !slices.ContainsFunc(spec.AllAssignments(), func(a v1alpha1.Assignment) bool {
			return a.Target.Key() == ref.Key()
		}) {
			continue // a short form that does not parse declares no account
		}
		pending = append(pending, name)
		if until.IsZero() || waitedUntil.Before(until) {
			until = waitedUntil
		}
	}
	if len(pending) == 0 {
		return nil, 0, nil
	}
	return pending, max(until.Sub(now), time.Second), nil
}

// ReplicatedJobShortFormScope is the scope the short forms of a new JobSet js, or of the
// object that renders it (kinds.JobSetRenderer: a TrainJob, read through r), give the
// pods of replicatedJob: the scope of a declared account naming that replicatedJob's
// children, "" when none does.
func ReplicatedJobShortFormScope(ctx context.Context, r client.Reader, js client.Object, replicatedJob string) (string, error) {
	scope := ""
	for _, o := range jobSetOwners(js) {
		k, owner := o.kind, o.name
		obj := js
		if reflect.TypeOf(k.NewObject()) != reflect.TypeOf(js) {
			obj = k.NewObject()
			if err := r.Get(ctx, client.ObjectKey{Namespace: js.GetNamespace(), Name: owner}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return "", err
			}
		}
		if !HasShortForm(obj.GetAnnotations()) {
			continue
		}
		spec, err := ShortForm(obj)
		if err != nil {
			continue // a short form that does not parse declares no account
		}
		for _, a := range spec.Assignments {
			if a.Target.ReplicatedJob == replicatedJob {
				scope = StrongerScope(scope, specScope(&spec))
			}
		}
	}
	return scope, nil
}

// checkMapping refuses a declared account whose mapping is not a partition, by the rules the
// account itself is checked by (account.Compile): of a short form, only its shard list
// can be at fault (a name given twice).
func checkMapping(namespace string, ann map[string]string, spec *v1alpha1.BatchAccountSpec) error {
	m := account.Compile(namespace, spec)
	if len(m.Problems) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(m.Problems))
	for _, p := range m.Problems {
		msgs = append(msgs, p.Message)
	}
	return fmt.Errorf("annotation %s: %s", shortform.ShardsAnnotation(ann), strings.Join(msgs, "; "))
}
