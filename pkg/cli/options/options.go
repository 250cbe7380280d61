// Package options holds what every verb of the kubectl plugin shares: kubectl's
// connection flags and the streams (Options), the API clients built from them, the
// scheme of the kinds the plugin reads, kubectl's --dry-run (DryRun), and the exit codes
// a command ends with (CodeError).
package options

import (
	"fmt"
	"os"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/scheme"
)

// Scheme holds the kinds the plugin reads and writes: core, batch, Kueue v1beta2, JobSet
// v1alpha2 and batchledger v1alpha1.
var Scheme = scheme.Must()

// Options are what every command shares: kubectl's connection flags, the streams, and
// seams for tests (a client and a clock).
type Options struct {
	// ConfigFlags are kubectl's flags: --kubeconfig, --context, --namespace/-n, ...
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	// NewClient builds the API client; nil means one from ConfigFlags. Tests pass a fake.
	NewClient func() (client.Client, error)
	// Clock is the clock for ages in `get`; nil means time.Now.
	Clock func() time.Time
}

// NewOptions returns options reading kubeconfig the way kubectl does.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{ConfigFlags: genericclioptions.NewConfigFlags(true), IOStreams: streams}
}

// StdStreams are the process's standard streams.
func StdStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
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

// WatchClient is a client that can watch: the test seam's client when it can, or one
// built from kubectl's flags (Client builds a client without Watch).
func (o *Options) WatchClient() (client.WithWatch, error) {
	if o.NewClient != nil {
		c, err := o.NewClient()
		if err != nil {
			return nil, err
		}
		if wc, ok := c.(client.WithWatch); ok {
			return wc, nil
		}
		return nil, fmt.Errorf("the API client cannot watch")
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: Scheme})
}

// Namespace is the namespace of -n, or of the kubeconfig context, as kubectl resolves it.
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("resolving the namespace: %w", err)
	}
	return ns, nil
}

// Now is the time on Clock.
func (o *Options) Now() time.Time {
	if o.Clock != nil {
		return o.Clock()
	}
	return time.Now()
}

// ClientAndNamespace is the common preamble of every command.
func (o *Options) ClientAndNamespace() (client.Client, string, error) {
	ns, err := o.Namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := o.Client()
	return c, ns, err
}

// TemplateOnly is whether --template was given without -o, which kubectl reads as
// -o go-template.
func TemplateOnly(pf *genericclioptions.PrintFlags) bool {
	t := pf.TemplatePrinterFlags
	given := t != nil && t.TemplateArgument != nil && *t.TemplateArgument != ""
	return given && (pf.OutputFlagSpecified == nil || !pf.OutputFlagSpecified())
}
