package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// maxMissingWidth bounds the MISSING column; the account's compact form is already
// bounded, but a table cell should stay a cell.
const maxMissingWidth = 40

func newGetCommand(o *Options) *cobra.Command {
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List BatchAccounts with their coverage and verdict",
		Example: `  kubectl batchledger get -n ml-team
  kubectl batchledger get -A
  kubectl batchledger get ij245`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.clientAndNamespace()
			if err != nil {
				return err
			}
			if allNamespaces {
				ns = ""
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			accts, err := ListAccounts(cmd.Context(), c, ns, name)
			if err != nil {
				return err
			}
			if len(accts) == 0 {
				where := fmt.Sprintf("in namespace %q", ns)
				if allNamespaces {
					where = "in any namespace"
				}
				fmt.Fprintf(o.ErrOut, "No BatchAccounts found %s.\n", where)
				return nil
			}
			PrintAccounts(o.Out, accts, allNamespaces, o.now())
			return nil
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List accounts of every namespace.")
	return cmd
}

// ListAccounts returns the accounts of namespace ("" for all), or the one named name,
// sorted by namespace and name.
func ListAccounts(ctx context.Context, c client.Client, namespace, name string) ([]v1alpha1.BatchAccount, error) {
	if name != "" {
		if namespace == "" {
			return nil, fmt.Errorf("a BatchAccount name needs a namespace: drop -A or the name")
		}
		var ba v1alpha1.BatchAccount
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba); err != nil {
			return nil, describeGetError(err, "BatchAccount", namespace, name)
		}
		return []v1alpha1.BatchAccount{ba}, nil
	}
	var list v1alpha1.BatchAccountList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		where := fmt.Sprintf("in namespace %q", namespace)
		if namespace == "" {
			where = "in all namespaces"
		}
		return nil, fmt.Errorf("listing BatchAccounts %s: %w", where, err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.BatchAccount) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return list.Items, nil
}

// PrintAccounts writes the accounts as a table: NAME, COVERED, TOTAL, ACCEPTED, MISSING,
// VERDICT (the Accepted condition's reason) and AGE, with NAMESPACE first when listing
// every namespace.
func PrintAccounts(w io.Writer, accts []v1alpha1.BatchAccount, withNamespace bool, now time.Time) {
	header := []string{"NAME", "COVERED", "TOTAL", "ACCEPTED", "MISSING", "VERDICT", "AGE"}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	rows := make([][]string, 0, len(accts))
	for i := range accts {
		ba := &accts[i]
		s := ba.Status.Shards
		verdict := "<none>"
		if c := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted); c != nil {
			verdict = c.Reason
		}
		missing := s.Missing
		if missing == "" {
			missing = "-"
		} else if r := []rune(missing); len(r) > maxMissingWidth {
			missing = string(r[:maxMissingWidth-1]) + "…"
		}
		age := "<unknown>"
		if !ba.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(ba.CreationTimestamp.Time))
		}
		row := []string{ba.Name, fmt.Sprint(s.Covered), fmt.Sprint(s.Total), fmt.Sprint(s.Accepted), missing, verdict, age}
		if withNamespace {
			row = append([]string{ba.Namespace}, row...)
		}
		rows = append(rows, row)
	}
	table(w, "", header, rows)
}
