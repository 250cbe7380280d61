package options

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DryRun is kubectl's --dry-run strategy of a mutating command.
type DryRun string

// The dry-run strategies, as kubectl names them.
const (
	// DryRunNone sends every request: the command does what it says.
	DryRunNone DryRun = "none"
	// DryRunClient sends no mutating request: the command prints what it would do.
	DryRunClient DryRun = "client"
	// DryRunServer sends every mutating request with dryRun=All: the API server runs
	// admission (webhooks included) and validation, and persists nothing.
	DryRunServer DryRun = "server"
)

// String implements pflag.Value.
func (d *DryRun) String() string { return string(*d) }

// Type implements pflag.Value; it is what --help shows as the value's type.
func (d *DryRun) Type() string { return "string" }

// Set implements pflag.Value. As in kubectl, "true" is client and "false" none: both
// spellings of the old boolean flag keep their meaning.
func (d *DryRun) Set(v string) error {
	switch v {
	case "", string(DryRunNone), "false":
		*d = DryRunNone
	case string(DryRunClient), "true":
		*d = DryRunClient
	case string(DryRunServer):
		*d = DryRunServer
	default:
		return fmt.Errorf(`invalid dry-run value %q: use "none", "client" or "server"`, v)
	}
	return nil
}

// ClientSide is true when no mutating request may be sent (not to be confused with an
// API client).
func (d DryRun) ClientSide() bool { return d == DryRunClient }

// ServerSide is true when mutating requests are sent with dryRun=All.
func (d DryRun) ServerSide() bool { return d == DryRunServer }

// CreateOptions and PatchOptions carry dryRun=All under DryRunServer.
func (d DryRun) CreateOptions() []client.CreateOption {
	if d.ServerSide() {
		return []client.CreateOption{client.DryRunAll}
	}
	return nil
}

func (d DryRun) PatchOptions(more ...client.PatchOption) []client.PatchOption {
	if d.ServerSide() {
		more = append(more, client.DryRunAll)
	}
	return more
}

// AddDryRunFlag adds --dry-run to cmd, with kubectl's meaning: none (the default),
// client, or server; --dry-run alone is client.
func AddDryRunFlag(cmd *cobra.Command, d *DryRun, client, server string) {
	*d = DryRunNone
	f := cmd.Flags().VarPF(d, "dry-run", "", fmt.Sprintf(`Must be "none", "client", or "server". client: %s server: %s --dry-run alone means client.`, client, server))
	f.NoOptDefVal = string(DryRunClient)
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{string(DryRunNone), string(DryRunClient), string(DryRunServer)}, cobra.ShellCompDirectiveNoFileComp))
}
