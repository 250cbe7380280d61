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
	a.admitted[client.ObjectKeyFromObject(ba)] = admittedAccount{account: kept, keys: relations.AccountKeys(kept), at: now}
}

// List lists from Reader, and adds to a list of BatchAccounts selected by one
// relations.IndexAccountTarget key the accounts admitted in the last AdmittedMemory that
// name that key and are not in the list (by name). Like the cache's, what it adds is
// shared: read-only.
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
		if name.Namespace != namespace || now.Sub(e.at) >= AdmittedMemory || !slices.Contains(e.keys, key) ||
			slices.ContainsFunc(accounts.Items, func(ba v1alpha1.BatchAccount) bool { return ba.Name == name.Name }) {
			continue
		}
		accounts.Items = append(accounts.Items, *e.account)
	}
	return nil
}

func (a *AdmittedAccounts) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}
