package webhook

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// AdmittedMemory is how long AdmittedAccounts adds an account its validator admitted
// to what the cache holds: far longer than a watch takes to deliver it.
const AdmittedMemory = time.Minute

// AdmittedAccounts reads what the manager's cache holds (Reader) and adds, to the
// BatchAccounts listed by relations.IndexAccountTarget, those this replica's
// BatchAccountValidator admitted in the last AdmittedMemory, as admitted. The scope
// webhook reads accounts through it: a Job created right after the account that names
// it (one `kubectl apply` of both) may reach the webhook before the cache's watch has
// delivered the account, and read from the cache alone it would be created unstamped.
// Its pods would not be held then, and a copy MultiKueue dispatches to a worker would
// carry no scope, so no result of it would ever be recorded. The validator sees every
// create and update of an account before it is stored, so the replica that admitted it
// knows it before any Job can be created after it.
type AdmittedAccounts struct {
	client.Reader
	// Now is the clock; tests may replace it.
	Now func() time.Time

	mu       sync.Mutex
	admitted map[types.NamespacedName]admittedAccount
}

type admittedAccount struct {
	account *v1alpha1.BatchAccount
	keys    []relations.IndexKey
	at      time.Time
	// uid, created and generation are those of the object admitted: the API server
	// sets them before it calls the validating webhooks (a spec update's generation is
	// the one it will be stored with).
	uid        types.UID
	created    time.Time
	generation int64
}

// supersedes reports whether the admitted account is newer than cached, the cache's copy
// of the account of its name: a spec of a later generation of the same object, or
// another object of that name created after it (the account deleted and created again).
// The cache's copy of an account just updated may name the Job with the old spec's scope
// (requireResults just turned on) and must not hide the spec admitted after it.
func (e admittedAccount) supersedes(cached *v1alpha1.BatchAccount) bool {
	if e.uid != "" && cached.UID != "" && cached.UID != e.uid {
		return e.created.After(cached.CreationTimestamp.Time)
	}
	return cached.Generation < e.generation
}

// remember keeps ba, admitted now, unless the request is a dry run (nothing is stored).
// Safe on a nil receiver: a validator without a memory remembers nothing.
func (a *AdmittedAccounts) remember(ctx context.Context, ba *v1alpha1.BatchAccount) {
	if a == nil {
		return
	}
	if req, err := admission.RequestFromContext(ctx); err == nil && req.DryRun != nil && *req.DryRun {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admitted == nil {
		a.admitted = map[types.NamespacedName]admittedAccount{}
	}
	for k, e := range a.admitted {
		if now.Sub(e.at) >= AdmittedMemory {
			delete(a.admitted, k)
		}
	}
	// The scope is read from the name and the spec alone: the status, which may be long,
	// is not kept.
	kept := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: ba.Name, Namespace: ba.Namespace}, Spec: *ba.Spec.DeepCopy()}
	a.admitted[client.ObjectKeyFromObject(ba)] = admittedAccount{account: kept, keys: relations.AccountKeys(kept), at: now,
		uid: ba.UID, created: ba.CreationTimestamp.Time, generation: ba.Generation}
}

// List lists from Reader, and adds to a list of BatchAccounts selected by one
// relations.IndexAccountTarget key the accounts admitted in the last AdmittedMemory that
// name that key and are not in the list (by name), or are newer than the list's copy,
// which they then replace (admittedAccount.supersedes; one that no longer names the key
// takes the copy out). Like the cache's, what it adds is shared: read-only.
func (a *AdmittedAccounts) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := a.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	accounts, namespace, key, ok := accountsByTarget(list, opts)
	if !ok {
		return nil
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, e := range a.admitted {
		if name.Namespace != namespace || now.Sub(e.at) >= AdmittedMemory {
			continue
		}
		if i := slices.IndexFunc(accounts.Items, func(ba v1alpha1.BatchAccount) bool { return ba.Name == name.Name }); i >= 0 {
			if !e.supersedes(&accounts.Items[i]) {
				continue
			}
			accounts.Items = slices.Delete(accounts.Items, i, i+1)
		}
		if slices.Contains(e.keys, key) {
			accounts.Items = append(accounts.Items, *e.account)
		}
	}
	return nil
}

func (a *AdmittedAccounts) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}
