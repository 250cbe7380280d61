// Package completion completes the plugin's arguments and flags from the cluster: account
// names, "KIND NAME", namespaces. The verbs register these functions; cobra's own
// `completion` command writes the shell scripts that call them (through __complete).
package completion

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// completionTimeout bounds the API calls of one completion: a shell waits for them.
const completionTimeout = 5 * time.Second

// kindCompletions are the kinds `explain` and `watch` take, as completed: an account, a Workload,
// and every kind of target (pkg/kinds/all).
var kindCompletions = func() []cobra.Completion {
	out := []cobra.Completion{
		cobra.CompletionWithDesc(resolve.KindAccount, "a BatchAccount"),
		cobra.CompletionWithDesc(resolve.KindWorkload, "a Kueue Workload: the accounts of its owner"),
	}
	for _, k := range all.Kinds {
		desc := "a " + k.Object().Kind + ": the accounts naming it"
		if _, owner := k.(kinds.Owner); owner {
			desc = "a " + k.Object().Kind + ": the accounts naming its children"
		}
		out = append(out, cobra.CompletionWithDesc(k.Name(), desc))
	}
	return out
}()

// Func is a cobra completion function (of arguments or of a flag's value).
type Func = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective)

// AccountNames completes a command's one ACCOUNT argument with the names of the
// BatchAccounts of the namespace (-n, or the context's).
func AccountNames(o *options.Options) Func {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return objectNames(contextOf(cmd), o, resolve.KindAccount, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// KindName completes "KIND NAME": the kind first, then the names of objects of that kind
// in the namespace. "KIND/NAME" in one word is completed too.
func KindName(o *options.Options) Func {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return kindName(o, cmd, args, toComplete)
	}
}

func kindName(o *options.Options, cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		if k, prefix, ok := strings.Cut(toComplete, "/"); ok {
			kind, known := resolve.KindOf(k)
			if !known {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, n := range objectNames(contextOf(cmd), o, kind, prefix) {
				out = append(out, k+"/"+n)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		return kindCompletions, cobra.ShellCompDirectiveNoFileComp
	case 1:
		kind, ok := resolve.KindOf(args[0])
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return objectNames(contextOf(cmd), o, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// Namespaces completes -n with the cluster's namespaces.
func Namespaces(o *options.Options) Func {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return namespaces(o, cmd, toComplete)
	}
}

func namespaces(o *options.Options, cmd *cobra.Command, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
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

// objectNames lists the names of objects of kind in the namespace that start with prefix,
// sorted. Completion must not fail loudly: any error completes nothing.
func objectNames(ctx context.Context, o *options.Options, kind, prefix string) []cobra.Completion {
	c, ns, err := o.ClientAndNamespace()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	var list client.ObjectList
	switch kind {
	case resolve.KindAccount:
		list = &v1alpha1.BatchAccountList{}
	case resolve.KindWorkload:
		list = &kueue.WorkloadList{}
	default:
		k := all.Kinds.Named(kind)
		if k == nil {
			return nil
		}
		// Names only: the metadata of any kind of target, whatever its API types.
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(k.Object().GroupVersion().WithKind(k.Object().Kind + "List"))
		list = l
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
