package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"batchledger.dev/batchledger/pkg/release"
	blscheme "batchledger.dev/batchledger/pkg/scheme"
)

// Exit codes of `batchledger release`.
const (
	releaseOK = 0
	// releaseFailed: a pod or Job is still held, or the webhook configurations, the
	// manager's Deployment, the pods or the Jobs could not be read or written. A Helm
	// pre-delete hook then fails and the uninstall stops, rather than stranding pods.
	releaseFailed = 1
	// releaseUsage: the flags are wrong.
	releaseUsage = 2
)

// releaseConfig is what one `batchledger release` run does.
type releaseConfig struct {
	// Options choose the namespace, dry run, page size.
	release.Options
	// MutatingWebhookConfigurations are deleted before anything else so that no webhook
	// holds a new pod or Job while or after we release: the pod webhook's, and on a
	// worker install the worker role's Job webhook's.
	MutatingWebhookConfigurations []string
	// StopDeployment, when set, is the manager's Deployment, scaled to 0 after the webhook
	// configurations are deleted and before anything is released: a running manager
	// still holds the Jobs accounts name (JobRecorder.Hold) without any webhook.
	StopDeployment types.NamespacedName
	// StopTimeout bounds the wait for StopDeployment's pods to stop; the release runs
	// after it all the same.
	StopTimeout time.Duration
	// RecheckAfter is how long after deleting the webhook configuration a second pass
	// runs: an API server answers from its own watch of webhook configurations, so for a
	// moment after the deletion it may still send a new pod to the webhook, and the pod
	// is held after the first pass listed. Zero makes no second pass.
	RecheckAfter time.Duration
}

// runRelease is the manager's `release` subcommand, for a Helm pre-delete hook running
// the manager image: it deletes the webhooks' MutatingWebhookConfigurations (with
// --mutating-webhook-configuration), then stops the manager (with --stop-deployment), then
// removes the result-capture finalizer from every pod that carries it and the record
// finalizers from every Job that carries them. It returns 0 only when every held pod and
// Job was released (or, with --dry-run, when they could be listed).
//
// RBAC: pods and jobs list and patch (cluster-wide with --all-namespaces), delete on the
// named mutatingwebhookconfigurations.admissionregistration.k8s.io, and get of the named
// deployments.apps and update of its deployments/scale. Nothing else: pods and Jobs are
// re-read with a list by name, never a get.
func runRelease(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	var (
		cfg           releaseConfig
		allNamespaces bool
	)
	fs.BoolVar(&allNamespaces, "all-namespaces", true, "Release pods of every namespace; false needs --namespace.")
	fs.StringVar(&cfg.Namespace, "namespace", "", "Release pods of this namespace only (with --all-namespaces unset or false).")
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "Change nothing: log the webhook configuration that would be deleted and the pods that would be released.")
	fs.Var((*stringList)(&cfg.MutatingWebhookConfigurations), "mutating-webhook-configuration",
		"MutatingWebhookConfiguration of a webhook that holds pods or Jobs, deleted first (a missing one is fine); repeat for several.")
	var stopDeploymentFlag string
	fs.StringVar(&stopDeploymentFlag, "stop-deployment", "",
		"NAMESPACE/NAME of the manager's Deployment, scaled to 0 after the webhook configurations are deleted; the release waits until its pods stop. Empty stops none.")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", 2*time.Minute,
		"How long to wait for --stop-deployment's pods to stop; the release runs after it all the same.")
	fs.DurationVar(&cfg.RecheckAfter, "recheck-after", 5*time.Second,
		"After deleting the webhook configuration, release again after this long, for pods admitted while API servers still saw it; 0 disables.")
	ctrlconfig.RegisterFlags(fs) // --kubeconfig, as the manager takes it
	zopts := zap.Options{}
	zopts.BindFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return releaseOK
	} else if err != nil {
		return releaseUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "release takes no arguments, got %q\n", fs.Args())
		return releaseUsage
	}
	// A negative wait would silently skip what it protects: the manager's pods stopping,
	// or the pass that releases pods admitted while API servers still saw the webhook.
	if cfg.StopTimeout < 0 {
		fmt.Fprintf(fs.Output(), "--stop-timeout=%s: want 0 (do not wait) or a positive duration\n", cfg.StopTimeout)
		return releaseUsage
	}
	if cfg.RecheckAfter < 0 {
		fmt.Fprintf(fs.Output(), "--recheck-after=%s: want 0 (no second pass) or a positive duration\n", cfg.RecheckAfter)
		return releaseUsage
	}
	if stopDeploymentFlag != "" {
		key, err := parseDeployment(stopDeploymentFlag)
		if err != nil {
			fmt.Fprintln(fs.Output(), err)
			return releaseUsage
		}
		cfg.StopDeployment = key
	}
	explicitAll := false
	fs.Visit(func(f *flag.Flag) { explicitAll = explicitAll || f.Name == "all-namespaces" })
	switch {
	case cfg.Namespace != "" && explicitAll && allNamespaces:
		fmt.Fprintln(fs.Output(), "--namespace and --all-namespaces=true contradict each other")
		return releaseUsage
	case cfg.Namespace == "" && !allNamespaces:
		fmt.Fprintln(fs.Output(), "--all-namespaces=false needs --namespace")
		return releaseUsage
	}
	ctrl.SetLogger(newLogger(&zopts))
	log := ctrl.Log.WithName("release")

	s, err := blscheme.New()
	if err != nil {
		log.Error(err, "building scheme")
		return releaseFailed
	}
	c, err := client.New(ctrl.GetConfigOrDie(), client.Options{Scheme: s})
	if err != nil {
		log.Error(err, "creating client")
		return releaseFailed
	}
	if err := releaseHeldPods(ctx, c, cfg, log, sleepCtx); err != nil {
		log.Error(err, "release incomplete")
		return releaseFailed
	}
	return releaseOK
}

// releaseHeldPods deletes the webhook configurations, then stops the manager's Deployment
// and waits for its pods to stop, then releases the held pods and Jobs, then (after a
// configuration was named) waits RecheckAfter with sleep and releases again: in that order
// nothing is left to hold a pod or Job after the last pass looked. It logs each pod, each
// Job and each pass's reports, and returns an error unless every held pod and Job was
// released. A webhook configuration that cannot be deleted, or a Deployment that cannot be
// stopped, is an error, but the pods are released all the same: they are stranded either
// way once the manager is gone.
func releaseHeldPods(ctx context.Context, c client.Client, cfg releaseConfig, log logr.Logger, sleep func(context.Context, time.Duration) error) error {
	var errs []error
	for _, name := range cfg.MutatingWebhookConfigurations {
		if cfg.DryRun {
			log.Info("would delete the webhook configuration (dry run)", "mutatingWebhookConfiguration", name)
		} else if err := deleteWebhookConfiguration(ctx, c, name, log); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.StopDeployment.Name != "" {
		if err := stopDeployment(ctx, c, cfg.StopDeployment, cfg.StopTimeout, cfg.DryRun, log, sleep); err != nil {
			if ctx.Err() != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	passes := 1
	if len(cfg.MutatingWebhookConfigurations) > 0 && cfg.RecheckAfter > 0 && !cfg.DryRun {
		passes = 2
	}
	for pass := 1; pass <= passes; pass++ {
		if pass > 1 {
			log.Info("releasing again, for pods admitted while API servers still saw the webhook configuration", "after", cfg.RecheckAfter.String())
			if err := sleep(ctx, cfg.RecheckAfter); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		listed := true
		for _, k := range release.Kinds {
			rep, err := k.Release(ctx, c, cfg.Options)
			logReport(log, rep, pass, k.Noun)
			if err != nil {
				// The other kind is released all the same; no second pass.
				errs, listed = append(errs, err), false
				continue
			}
			if len(rep.Errors) > 0 {
				errs = append(errs, fmt.Errorf("%d of %d held %ss still held: %w", len(rep.Errors), len(rep.Held), k.Noun, rep.Err()))
			}
		}
		if !listed {
			break
		}
	}
	return errors.Join(errs...)
}

// deleteWebhookConfiguration deletes the named MutatingWebhookConfiguration; one that is
// already gone is fine.
func deleteWebhookConfiguration(ctx context.Context, c client.Client, name string, log logr.Logger) error {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	switch err := c.Delete(ctx, mwc); {
	case apierrors.IsNotFound(err):
		log.Info("the webhook configuration is already gone", "mutatingWebhookConfiguration", name)
	case err != nil:
		return fmt.Errorf("deleting MutatingWebhookConfiguration %s: %w", name, err)
	default:
		log.Info("deleted the webhook configuration: API servers hold no new pod or Job through it once they see it gone", "mutatingWebhookConfiguration", name)
	}
	return nil
}

// logReport logs every pod (or Job: noun) of a pass and its counts.
func logReport(log logr.Logger, rep *release.Report, pass int, noun string) {
	log = log.WithValues("pass", pass, "kind", noun)
	key := strings.ToLower(noun)
	if rep.DryRun {
		for _, p := range rep.Held {
			log.Info("would release "+noun+" (dry run)", key, p.String())
		}
	}
	for _, p := range rep.Released {
		log.Info("released "+noun, key, p.String())
	}
	for _, p := range rep.AlreadyGone {
		log.Info(noun+" already gone", key, p.String())
	}
	for _, p := range rep.AlreadyReleased {
		log.Info(noun+" already released", key, p.String())
	}
	for _, e := range rep.Errors {
		log.Error(e.Err, noun+" still held", key, e.Pod.String())
	}
	ns := rep.Namespace
	if ns == "" {
		ns = "<all>"
	}
	log.Info("release pass done", "namespace", ns, "dryRun", rep.DryRun, "examined", rep.Examined,
		"held", len(rep.Held), "released", len(rep.Released), "alreadyGone", len(rep.AlreadyGone),
		"alreadyReleased", len(rep.AlreadyReleased), "stillHeld", len(rep.Errors))
}

// sleepCtx waits d, or less when ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
