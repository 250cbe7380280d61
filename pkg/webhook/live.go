package webhook

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// UndeliveredAccounts finds the accounts the API server stores that the manager's cache
// has not delivered yet. With several replicas, the validating webhook that admitted an
// account and the scope webhook asked about the Job applied with it may be different
// replicas, so AdmittedAccounts' memory cannot tell the second about the first: the API
// server can. The scope webhook asks it for every new Job (and JobSet) the cache does not
// already give the strongest scope: one metadata-only LIST of the namespace's accounts,
// and a LIST by name of each account missing from the cache or newer there (a spec the
// cache has not seen, or another object of that name). Off by default (--scope-live-reads; the chart sets it with more
// than one replica): with one replica AdmittedAccounts closes the race alone.
type UndeliveredAccounts struct {
	// API reads the API server (the manager's API reader). It needs only list on
	// batchaccounts, which the controller has.
	API client.Reader
}

// Over returns base (the cache the scope webhook reads, whose accounts' generations tell
// what it has seen) with the accounts of namespace it has not delivered: its lists of
// accounts by relations.IndexAccountTarget give the API server's copy of an undelivered
// account instead of base's, and add those that name the key. Nil when there are none.
func (u UndeliveredAccounts) Over(ctx context.Context, base client.Reader, namespace string) (client.Reader, error) {
	var stored metav1.PartialObjectMetadataList
	stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BatchAccountList"))
	if err := u.API.List(ctx, &stored, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the stored accounts of %s: %w", namespace, err)
	}
	if len(stored.Items) == 0 {
		return nil, nil
	}
	var cached v1alpha1.BatchAccountList
	if err := base.List(ctx, &cached, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	seen := make(map[string]*v1alpha1.BatchAccount, len(cached.Items))
	for i := range cached.Items {
		seen[cached.Items[i].Name] = &cached.Items[i]
	}
	var fresh []admittedAccount
	for _, m := range stored.Items {
		// The cache has seen the stored spec when it holds the same object (an account
		// deleted and created again restarts its generations) at its generation or later.
		if c, ok := seen[m.Name]; ok && c.UID == m.UID && c.Generation >= m.Generation {
			continue
		}
		var one v1alpha1.BatchAccountList
		if err := u.API.List(ctx, &one, client.InNamespace(namespace), client.MatchingFields{"metadata.name": m.Name}); err != nil {
			return nil, fmt.Errorf("reading account %s/%s: %w", namespace, m.Name, err)
		}
		for i := range one.Items {
			fresh = append(fresh, admittedAccount{account: &one.Items[i], keys: relations.AccountKeys(&one.Items[i])})
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	undeliveredAccounts.Add(float64(len(fresh)))
	return withAccounts{Reader: base, namespace: namespace, accounts: fresh}, nil
}

// withAccounts is a Reader whose lists of accounts by one relations.IndexAccountTarget key
// give, in place of Reader's account of the same name, each of accounts that names the
// key.
type withAccounts struct {
	client.Reader
	namespace string
	accounts  []admittedAccount
}

func (w withAccounts) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := w.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	accounts, namespace, key, ok := accountsByTarget(list, opts)
	if !ok || namespace != w.namespace {
		return nil
	}
	accounts.Items = slices.DeleteFunc(accounts.Items, func(ba v1alpha1.BatchAccount) bool {
		return slices.ContainsFunc(w.accounts, func(e admittedAccount) bool { return e.account.Name == ba.Name })
	})
	for _, e := range w.accounts {
		if slices.Contains(e.keys, key) {
			accounts.Items = append(accounts.Items, *e.account)
		}
	}
	return nil
}

// accountsByTarget tells a list of BatchAccounts selected by one exact
// relations.IndexAccountTarget key: the list, its namespace and the key.
func accountsByTarget(list client.ObjectList, opts []client.ListOption) (*v1alpha1.BatchAccountList, string, relations.IndexKey, bool) {
	accounts, ok := list.(*v1alpha1.BatchAccountList)
	if !ok {
		return nil, "", "", false
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector == nil {
		return nil, "", "", false
	}
	key, ok := lo.FieldSelector.RequiresExactMatch(relations.IndexAccountTarget)
	if !ok {
		return nil, "", "", false
	}
	return accounts, lo.Namespace, relations.IndexKey(key), true
}
