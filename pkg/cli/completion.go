package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// completionTimeout bounds the API calls of one completion: a shell waits for them.
const completionTimeout = 5 * time.Second

// completionKinds are the kinds `explain` and `watch` take, as completed.
var completionKinds = []cobra.Completion{
	cobra.CompletionWithDesc(KindAccount, "a BatchAccount"),
	cobra.CompletionWithDesc(KindWorkload, "a Kueue Workload: the accounts of its Job or JobSet"),
	cobra.CompletionWithDesc(KindJob, "a Job: the accounts naming it"),
	cobra.CompletionWithDesc(KindJobSet, "a JobSet: the accounts naming its children"),
}

// completeAccountNames completes a command's one ACCOUNT argument with the names of the
// BatchAccounts of the namespace (-n, or the context's).
func (o *Options) completeAccountNames(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.completeNames(contextOf(cmd), KindAccount, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeKindName completes "KIND NAME": the kind first, then the names of objects of
// that kind in the namespace. "KIND/NAME" in one word is completed too.
func (o *Options) completeKindName(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		if k, prefix, ok := strings.Cut(toComplete, "/"); ok {
			kind, known := kindAliases[strings.ToLower(k)]
			if !known {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, n := range o.completeNames(contextOf(cmd), kind, prefix) {
				out = append(out, k+"/"+n)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		return completionKinds, cobra.ShellCompDirectiveNoFileComp
	case 1:
		kind, ok := kindAliases[strings.ToLower(args[0])]
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return o.completeNames(contextOf(cmd), kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeNamespaces completes -n with the cluster's namespaces.
func (o *Options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := o.Client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(contextOf(cmd), completionTimeout)
	defer cancel()
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeNames lists the names of objects of kind in the namespace that start with
// prefix, sorted. Completion must not fail loudly: any error completes nothing.
func (o *Options) completeNames(ctx context.Context, kind, prefix string) []cobra.Completion {
	c, ns, err := o.clientAndNamespace()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	var list client.ObjectList
	switch kind {
	case KindAccount:
		list = &v1alpha1.BatchAccountList{}
	case KindWorkload:
		list = &kueue.WorkloadList{}
	case KindJob:
		list = &batchv1.JobList{}
	case KindJobSet:
		list = &jobset.JobSetList{}
	default:
		return nil
	}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var names []string
	_ = meta.EachListItem(list, func(obj runtime.Object) error {
		if m, err := meta.Accessor(obj); err == nil {
			names = append(names, m.GetName())
		}
		return nil
	})
	return withPrefix(names, prefix)
}

// withPrefix keeps the names starting with prefix, sorted.
func withPrefix(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// contextOf is the command's context, or a background one when it has none (cobra's
// __complete runs the completion function outside ExecuteContext in some shells).
func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
