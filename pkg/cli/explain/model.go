package explain

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/resolve"
)

// Explain resolves kind/name to its accounts and explains each, reading the accounts'
// ShardResults chunks (label batchledger.dev/account-uid) for the accepted results;
// BuildExplanation counts only those the account owns.
func Explain(ctx context.Context, c client.Client, namespace, kind, name string, maxRows int) ([]explanation.Explanation, error) {
	exs, _, err := explain(ctx, c, namespace, kind, name, maxRows)
	return exs, err
}

// explain is Explain, and says why each account naming the object but not following its
// run (resolve.Resolve) is not explained, for the command to warn of.
func explain(ctx context.Context, c client.Client, namespace, kind, name string, maxRows int) ([]explanation.Explanation, []string, error) {
	accts, notFollowing, err := resolve.Resolve(ctx, c, namespace, kind, name)
	if err != nil {
		return nil, nil, err
	}
	out := make([]explanation.Explanation, 0, len(accts))
	for i := range accts {
		ba := &accts[i]
		var chunks v1alpha1.ShardResultsList
		if err := c.List(ctx, &chunks, client.InNamespace(ba.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
			return nil, nil, fmt.Errorf("listing ShardResults of BatchAccount %q in namespace %q: %w", ba.Name, ba.Namespace, err)
		}
		out = append(out, explanation.BuildExplanation(ba, chunks.Items, maxRows))
	}
	return out, notFollowing, nil
}
