// Command batchledger is the manager: it runs the BatchAccount reconciler, the short-form
// reconcilers for annotated Jobs and JobSets, and the BatchAccount validating webhook.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/certs"
	"batchledger.dev/batchledger/pkg/controller"
	blscheme "batchledger.dev/batchledger/pkg/scheme"
	blwebhook "batchledger.dev/batchledger/pkg/webhook"
)

// version is stamped at build time (-ldflags -X main.version=...).
var version = "dev"

// Values of --cert-management.
const (
	// certsExternal: tls.crt and tls.key are provided in the cert dir (cert-manager, a
	// mounted Secret, or the e2e framework) and the caBundle is injected by whoever issued them.
	certsExternal = "external"
	// certsSelf: the manager issues, rotates and injects them itself (pkg/certs).
	certsSelf = "self"
)

// With --metrics-secure the metrics endpoint authenticates callers with TokenReviews
// and authorizes them with SubjectAccessReviews (get on the /metrics non-resource URL).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	// The uninstall hook runs the same image: `batchledger release ...` lets go of every
	// pod still held for its result (cmd/batchledger/release.go).
	if len(os.Args) > 1 && os.Args[1] == "release" {
		os.Exit(runRelease(ctrl.SetupSignalHandler(), os.Args[2:]))
	}
	var (
		metricsAddr, probeAddr, webhookHost, certDir string
		pprofAddr                                    string
		webhookPort                                  int
		leaderElect, enableWebhooks                  bool
		metricsSecure, enableHTTP2                   bool
		certManagement                               string
		certOpts                                     certs.Options
		leaseDuration, renewDeadline, retryPeriod    time.Duration
		accountSyncs                                 int
		apiQPS                                       float64
		apiBurst                                     int
		maxResultHold                                time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint; 0 disables it.")
	flag.BoolVar(&metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS, only to callers allowed to get the /metrics non-resource URL.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of the pprof endpoint, for profiling under load; empty disables it.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	// Defaults are client-go's and kube-controller-manager's; tests shorten them to see a
	// takeover within seconds.
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits after the last renewal before it takes the leader Lease.")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing its Lease before it gives up leading.")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often candidates try to acquire or renew the Lease.")
	flag.IntVar(&accountSyncs, "concurrent-account-syncs", 5, "BatchAccounts reconciled side by side (as kube-controller-manager's --concurrent-job-syncs).")
	// Sized for releasing the pods of a 100,000-index batch: at 100 requests per second the
	// releases alone take about 17 minutes, while the account keeps its share of the budget.
	flag.Float64Var(&apiQPS, "kube-api-qps", 100, "Requests per second to the API server (client-go's default is 5).")
	flag.IntVar(&apiBurst, "kube-api-burst", 200, "Burst of requests to the API server above --kube-api-qps.")
	flag.DurationVar(&maxResultHold, "max-result-hold", controller.DefaultMaxResultHold,
		"Longest a succeeded pod is held for its result; past it the pod is released unrecorded, with a Warning event.")
	flag.BoolVar(&enableWebhooks, "enable-webhooks", true, "Serve the BatchAccount validating webhook.")
	flag.StringVar(&webhookHost, "webhook-host", "", "Address the webhook server binds to.")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "Folder with the webhook serving tls.crt and tls.key.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the webhook and metrics servers (off: HTTP/2 stream-reset and rapid-reset attacks).")
	flag.StringVar(&certManagement, "cert-management", certsExternal,
		"Who provides the webhook certificate: 'external' (files in --webhook-cert-dir, caBundle injected by e.g. cert-manager) "+
			"or 'self' (the manager issues it into --webhook-cert-secret, mounted at --webhook-cert-dir, rotates it and injects the CA).")
	flag.StringVar(&certOpts.Namespace, "namespace", podNamespace(), "Namespace the manager runs in: its leader-election Lease, and with self-managed certificates the Secret and webhook Service, are there.")
	flag.StringVar(&certOpts.SecretName, "webhook-cert-secret", certs.DefaultSecretName, "Secret the self-managed webhook certificate is kept in.")
	flag.StringVar(&certOpts.ServiceName, "webhook-service", certs.DefaultServiceName, "Service in front of the webhook server; the self-managed certificate is issued for it.")
	flag.StringVar(&certOpts.ValidatingWebhookConfiguration, "validating-webhook-configuration", certs.DefaultValidatingWebhookConfiguration,
		"ValidatingWebhookConfiguration the self-managed CA is injected into.")
	flag.StringVar(&certOpts.MutatingWebhookConfiguration, "mutating-webhook-configuration", certs.DefaultMutatingWebhookConfiguration,
		"MutatingWebhookConfiguration the self-managed CA is injected into.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	if certManagement != certsExternal && certManagement != certsSelf {
		log.Error(fmt.Errorf("--cert-management=%q: want %q or %q", certManagement, certsExternal, certsSelf), "invalid flags")
		os.Exit(1)
	}
	selfCerts := enableWebhooks && certManagement == certsSelf

	scheme, err := blscheme.New()
	if err != nil {
		log.Error(err, "building scheme")
		os.Exit(1)
	}
	tlsOpts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure, TLSOpts: tlsOpts}
	if metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if certDir == "" {
		// controller-runtime's default; named here because the rotator watches it too.
		certDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	webhookServer := webhook.NewServer(webhook.Options{
		Host: webhookHost, Port: webhookPort, CertDir: certDir, TLSOpts: tlsOpts,
	})
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(apiQPS), apiBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "batchledger.batchledger.dev",
		// The Lease lives in the manager's namespace; empty lets controller-runtime read
		// the in-cluster service account's.
		LeaderElectionNamespace: certOpts.Namespace,
		LeaseDuration:           &leaseDuration,
		RenewDeadline:           &renewDeadline,
		RetryPeriod:             &retryPeriod,
		// A replica that stops normally (rollout, drain) hands the Lease over at once
		// instead of leaving the batch unreconciled for a whole lease duration. Safe
		// because the manager exits right after it stops leading.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
		Cache:                         cacheOptions(),
		PprofBindAddress:              pprofAddr,
	})
	if err != nil {
		log.Error(err, "creating manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controller.SetupIndexes(ctx, mgr); err != nil {
		log.Error(err, "registering field indexes")
		os.Exit(1)
	}
	metrics := controller.NewMetrics()
	r := &controller.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("batchledger"),
		Metrics: metrics, Criteria: acceptance.NewCache(acceptance.DefaultCacheSize),
		MaxConcurrentReconciles: accountSyncs,
	}
	setups := []setup{
		r,
		&controller.PodReleaser{Client: mgr.GetClient(), Metrics: metrics, Recorder: mgr.GetEventRecorder("batchledger"), MaxHold: maxResultHold},
		&controller.ShortFormReconciler{Client: mgr.GetClient(), Kind: "Job"},
		&controller.ShortFormReconciler{Client: mgr.GetClient(), Kind: "JobSet"},
	}
	var webhooks []setup
	if enableWebhooks {
		webhooks = []setup{blwebhook.BatchAccountValidator{}, blwebhook.PodResultHolder{},
			blwebhook.ScopeStamper{Reader: mgr.GetClient()}}
	}
	// webhooksReady is closed once the webhooks are registered on the webhook server.
	webhooksReady := make(chan struct{})
	if selfCerts {
		certOpts.CertDir = certDir
		certsReady, err := certs.Setup(mgr, certOpts)
		if err != nil {
			log.Error(err, "setting up webhook certificates")
			os.Exit(1)
		}
		// Registering a webhook adds the webhook server to the manager, and the server
		// fails to start without its certificate files. So the webhooks are registered
		// only once the rotator has written the certificate and injected the CA; the
		// controllers start meanwhile.
		if err := mgr.Add(&afterCerts{certsReady: certsReady, setups: webhooks, mgr: mgr, done: webhooksReady}); err != nil {
			log.Error(err, "adding the webhook registration")
			os.Exit(1)
		}
	} else {
		setups = append(setups, webhooks...)
		close(webhooksReady)
	}
	for _, s := range setups {
		if err := s.SetupWithManager(mgr); err != nil {
			log.Error(err, "setting up", "component", s)
			os.Exit(1)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding health check")
		os.Exit(1)
	}
	ready := healthz.Ping
	if enableWebhooks {
		// Ready only when the webhook server answers, so that a Service routes admission
		// requests to this replica only once it can serve them with a trusted certificate.
		started := webhookServer.StartedChecker()
		ready = func(req *http.Request) error {
			select {
			case <-webhooksReady:
				return started(req)
			default:
				return errors.New("webhook certificate not ready yet")
			}
		}
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		log.Error(err, "adding ready check")
		os.Exit(1)
	}
	log.Info("starting manager", "version", version, "certManagement", certManagement)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// setup is a component that registers itself with the manager.
type setup interface{ SetupWithManager(ctrl.Manager) error }

// afterCerts registers the webhooks once the self-managed certificate is ready. It runs
// on every replica, leader or not: all replicas serve admission requests.
type afterCerts struct {
	certsReady <-chan struct{}
	setups     []setup
	mgr        ctrl.Manager
	done       chan struct{}
}

// Start waits for the certificate, then registers the webhooks (which starts the webhook
// server on the running manager). An error stops the manager.
func (a *afterCerts) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("setup")
	log.Info("waiting for the self-managed webhook certificate")
	select {
	case <-ctx.Done():
		return nil
	case <-a.certsReady:
	}
	for _, s := range a.setups {
		if err := s.SetupWithManager(a.mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", s, err)
		}
	}
	close(a.done)
	log.Info("webhook certificate ready; webhooks registered")
	return nil
}

// NeedLeaderElection is false: standby replicas serve webhooks too.
func (a *afterCerts) NeedLeaderElection() bool { return false }

// podNamespace is the namespace the pod runs in: POD_NAMESPACE (downward API) or the
// service account's namespace file; empty outside a pod.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// cacheOptions keep the caches to what accounting reads. Pods: only those in the opt-in
// scope (their Job's template carries v1alpha1.LabelScope), without managed fields and
// with a spec cut down to the container names a result is read from, so memory follows
// the accounted pods, not every pod of the cluster. Workloads: without the pod templates
// Kueue copies into each podSet.
func cacheOptions() cache.Options {
	scoped, _ := labels.NewRequirement(v1alpha1.LabelScope, selection.Exists, nil)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label: labels.NewSelector().Add(*scoped),
				Transform: func(obj any) (any, error) {
					if p, ok := obj.(*corev1.Pod); ok {
						p.ManagedFields = nil
						p.Spec = containerNames(p.Spec)
					}
					return obj, nil
				},
			},
			&kueue.Workload{}: {
				Transform: func(obj any) (any, error) {
					if wl, ok := obj.(*kueue.Workload); ok {
						wl.ManagedFields = nil
						for i := range wl.Spec.PodSets {
							wl.Spec.PodSets[i].Template = corev1.PodTemplateSpec{}
						}
					}
					return obj, nil
				},
			},
		},
	}
}

// containerNames keeps of a pod spec what result capture reads: the node, the containers'
// names in spec order (the default result container is the first) and the native sidecars.
func containerNames(spec corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{NodeName: spec.NodeName}
	for _, c := range spec.Containers {
		out.Containers = append(out.Containers, corev1.Container{Name: c.Name})
	}
	for _, c := range spec.InitContainers {
		out.InitContainers = append(out.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	return out
}
