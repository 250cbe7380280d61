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
		Short: "List BatchAccounts with their progress, coverage and verdict, sorted by verdict",
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

// verdictRanks orders verdicts for `get`: those that need someone first (the batch
// cannot be accepted as it stands), then those still moving, in the order a batch moves
// through them, then accounts without a verdict yet, and Accepted last.
var verdictRanks = map[string]int{
	v1alpha1.ReasonAssignmentInvalid: 0, v1alpha1.ReasonTargetDeleted: 0, v1alpha1.ReasonResultRejected: 0,
	v1alpha1.ReasonMissingResult: 0, v1alpha1.ReasonRuleInvalid: 0,
	v1alpha1.ReasonTargetsNotFound: 2, v1alpha1.ReasonShardsMissing: 2,
	v1alpha1.ReasonAwaitingTermination: 3,
	v1alpha1.ReasonResultsPending:      4,
	"":                                 5,
	v1alpha1.ReasonAccepted:            6,
}

// verdictRank ranks a verdict reason; a reason unknown to this plugin (a newer
// controller) comes right after those that need someone.
func verdictRank(reason string) int {
	if r, ok := verdictRanks[reason]; ok {
		return r
	}
	return 1
}

// verdictOf is the Accepted condition's reason, "" before the controller wrote one.
func verdictOf(ba *v1alpha1.BatchAccount) string {
	if c := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted); c != nil {
		return c.Reason
	}
	return ""
}

// sortByVerdict orders accounts by verdict rank, then verdict, namespace and name.
func sortByVerdict(accts []v1alpha1.BatchAccount) {
	slices.SortStableFunc(accts, func(a, b v1alpha1.BatchAccount) int {
		va, vb := verdictOf(&a), verdictOf(&b)
		return cmp.Or(cmp.Compare(verdictRank(va), verdictRank(vb)), strings.Compare(va, vb),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

// progressOfStatus is status.shards.progress, the CRD's Progress printer column: the
// percentage, rounded down, of shards accepted when results are required, else covered.
// A status written before the field existed is given the same value from its counts.
func progressOfStatus(ba *v1alpha1.BatchAccount) string {
	s := &ba.Status.Shards
	if len(ba.Status.Conditions) == 0 {
		return "-"
	}
	p := int64(s.Progress)
	done := s.Covered
	if ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults {
		done = s.Accepted
	}
	if p == 0 && done > 0 && s.Total > 0 {
		p = int64(done) * 100 / int64(s.Total)
	}
	return fmt.Sprintf("%d%%", p)
}

// PrintAccounts writes the accounts as a table sorted by verdict (see verdictRanks):
// NAME, PROGRESS (status.shards.progress), COVERED, TOTAL, ACCEPTED, MISSING, VERDICT
// (the Accepted condition's reason) and AGE, with NAMESPACE first when listing every
// namespace. accts is sorted in place.
func PrintAccounts(w io.Writer, accts []v1alpha1.BatchAccount, withNamespace bool, now time.Time) {
	header := []string{"NAME", "PROGRESS", "COVERED", "TOTAL", "ACCEPTED", "MISSING", "VERDICT", "AGE"}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	sortByVerdict(accts)
	rows := make([][]string, 0, len(accts))
	for i := range accts {
		ba := &accts[i]
		s := ba.Status.Shards
		verdict := verdictOf(ba)
		if verdict == "" {
			verdict = "<none>"
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
		row := []string{ba.Name, progressOfStatus(ba), fmt.Sprint(s.Covered), fmt.Sprint(s.Total), fmt.Sprint(s.Accepted), missing, verdict, age}
		if withNamespace {
			row = append([]string{ba.Namespace}, row...)
		}
		rows = append(rows, row)
	}
	table(w, "", header, rows)
}
