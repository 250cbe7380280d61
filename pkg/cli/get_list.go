package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/resolve"
)

// ListAccounts returns the accounts of namespace ("" for all), or the one named name,
// sorted by namespace and name.
func ListAccounts(ctx context.Context, c client.Client, namespace, name string) ([]v1alpha1.BatchAccount, error) {
	if name != "" {
		if namespace == "" {
			return nil, fmt.Errorf("a BatchAccount name needs a namespace: drop -A or the name")
		}
		var ba v1alpha1.BatchAccount
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba); err != nil {
			return nil, resolve.DescribeGetError(err, "BatchAccount", namespace, name)
		}
		return []v1alpha1.BatchAccount{ba}, nil
	}
	accts, _, err := listAccounts(ctx, c, namespace)
	return accts, err
}

// listAccounts lists the accounts of namespace ("" for all) matching opts, sorted by
// namespace and name, with the list's resourceVersion (where a watch starts).
func listAccounts(ctx context.Context, c client.Client, namespace string, opts ...client.ListOption) ([]v1alpha1.BatchAccount, string, error) {
	var list v1alpha1.BatchAccountList
	if err := c.List(ctx, &list, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...); err != nil {
		where := fmt.Sprintf("in namespace %q", namespace)
		if namespace == "" {
			where = "in all namespaces"
		}
		return nil, "", fmt.Errorf("listing BatchAccounts %s: %w", where, err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.BatchAccount) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return list.Items, list.ResourceVersion, nil
}
