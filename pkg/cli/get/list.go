package get

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	fieldsel "k8s.io/apimachinery/pkg/fields"

	"k8s.io/apimachinery/pkg/labels"
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
		return nil, "", fmt.Errorf("listing BatchAccounts %s: %w", where, resolve.NotServed(err))
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.BatchAccount) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return list.Items, list.ResourceVersion, nil
}

// accountFilter is what -l and --field-selector select.
type accountFilter struct {
	labels labels.Selector
	fields fieldsel.Selector
}

// listFilter parses -l and --field-selector.
func (g *Flags) listFilter() (accountFilter, error) {
	ls, err := labels.Parse(g.Selector)
	if err != nil {
		return accountFilter{}, fmt.Errorf("-l %q: %w", g.Selector, err)
	}
	fs, err := fieldsel.ParseSelector(g.FieldSelector)
	if err != nil {
		return accountFilter{}, fmt.Errorf("--field-selector %q: %w", g.FieldSelector, err)
	}
	return accountFilter{labels: ls, fields: fs}, nil
}

func (f accountFilter) empty() bool { return f.labels.Empty() && f.fields.Empty() }

// options are the List (and Watch) options of the filter; a name narrows it to that name.
func (f accountFilter) options(name string) []client.ListOption {
	fs := f.fields
	if name != "" {
		fs = fieldsel.AndSelectors(fs, fieldsel.OneTermEqualSelector("metadata.name", name))
	}
	var opts []client.ListOption
	if !f.labels.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: f.labels})
	}
	if !fs.Empty() {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fs})
	}
	return opts
}
