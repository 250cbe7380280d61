// Package cli implements the kubectl plugin kubectl-batchledger: `explain` renders a
// whole batch account in prose and tables (or as a structured Explanation), `get` lists
// accounts, `watch` follows a batch live, `map` draws its shards as a grid (or an SVG),
// `repair` re-runs the missing shards in follow-up Jobs joined to the account by entries
// of spec.repairs, and `release` lets go of the pods batchledger holds (for an uninstall).
// get and explain print through kubectl's printers (k8s.io/cli-runtime); repair and
// release take kubectl's --dry-run=none|client|server; names complete from the cluster.
//
// The commands read the account status the controller wrote; they never recompute a
// verdict. What they derive (the identity each missing shard waits for, which recorded
// result stands for a shard, what is still needed) is derived from that status and the
// account's own mapping, so the plugin and the controller cannot disagree about a batch.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/scheme"
)

// Exit codes of the plugin.
const (
	// ExitOK means the command did what was asked.
	ExitOK = 0
	// ExitError means the command failed; the message names the object concerned.
	ExitError = 1
	// ExitNotAccepted is returned by `explain --exit-code` when a batch explained is not
	// Accepted, so that a CI pipeline can gate on the verdict without parsing output; and
	// by `watch` when a batch can no longer be accepted without repair.
	ExitNotAccepted = 2
)

// Scheme holds the kinds the plugin reads and writes: core, batch, Kueue v1beta2, JobSet
// v1alpha2 and batchledger v1alpha1.
var Scheme = scheme.Must()

// CodeError is an error that carries the process exit code it should end with.
type CodeError struct {
	Code int
	Err  error
}

func (e *CodeError) Error() string { return e.Err.Error() }

func (e *CodeError) Unwrap() error { return e.Err }

// errNotAccepted ends `explain --exit-code` with ExitNotAccepted; the explanation already
// said why, so nothing more is printed.
var errNotAccepted = &CodeError{Code: ExitNotAccepted, Err: errors.New("the batch is not Accepted")}

// Options are what every command shares: kubectl's connection flags, the streams, and
// seams for tests (a client and a clock).
type Options struct {
	// ConfigFlags are kubectl's flags: --kubeconfig, --context, --namespace/-n, ...
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	// NewClient builds the API client; nil means one from ConfigFlags. Tests pass a fake.
	NewClient func() (client.Client, error)
	// Now is the clock for ages in `get`; nil means time.Now.
	Now func() time.Time
}

// NewOptions returns options reading kubeconfig the way kubectl does.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{ConfigFlags: genericclioptions.NewConfigFlags(true), IOStreams: streams}
}

// Client returns the API client the commands use.
func (o *Options) Client() (client.Client, error) {
	if o.NewClient != nil {
		return o.NewClient()
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: Scheme})
}

// Namespace is the namespace of -n, or of the kubeconfig context, as kubectl resolves it.
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("resolving the namespace: %w", err)
	}
	return ns, nil
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// clientAndNamespace is the common preamble of every command.
func (o *Options) clientAndNamespace() (client.Client, string, error) {
	ns, err := o.Namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := o.Client()
	return c, ns, err
}

// NewCommand builds the plugin's root command with its subcommands.
func NewCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-batchledger",
		Short: "Explain, list, watch, map and repair batchledger BatchAccounts; release held pods",
		Long: `kubectl batchledger answers the question a batch owner has when a batch "finished":
which declared shards were processed, by which Job and completion index, under which
input and model revision, and were their outputs accepted?`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl batchledger"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", o.completeNamespaces)
	root.AddCommand(newExplainCommand(o))
	root.AddCommand(newGetCommand(o))
	root.AddCommand(newRepairCommand(o))
	root.AddCommand(newWatchCommand(o))
	root.AddCommand(newMapCommand(o))
	root.AddCommand(newReleaseCommand(o))
	root.AddCommand(newVersionCommand(o))
	return root
}

// Execute runs the plugin with args (without the program name) and returns the exit
// code: ExitOK, ExitError (after printing "error: ..." to stderr), or the code of a
// CodeError such as ExitNotAccepted.
func Execute(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	cmd := NewCommand(NewOptions(streams))
	cmd.SetArgs(args)
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	err := cmd.ExecuteContext(ctx)
	return exitCode(err, streams.ErrOut)
}

// exitCode maps a command error to the exit code, printing the message of real errors.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ce *CodeError
	if errors.As(err, &ce) {
		if ce != errNotAccepted {
			fmt.Fprintln(stderr, "error:", ce.Err)
		}
		return ce.Code
	}
	fmt.Fprintln(stderr, "error:", err)
	return ExitError
}

// StdStreams are the process's standard streams.
func StdStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}
