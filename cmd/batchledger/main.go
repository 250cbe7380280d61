// Command batchledger is the manager: it runs the BatchAccount reconciler, the short-form
// reconcilers for annotated Jobs and JobSets, and the BatchAccount validating webhook.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/certs"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/kinds/all"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/multikueue/workerrole"
	"batchledger.dev/batchledger/pkg/relations"
	blscheme "batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/version"
	blwebhook "batchledger.dev/batchledger/pkg/webhook"
)

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
	cfg := bindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if cfg.printVersion {
		fmt.Println(version.Get().String())
		os.Exit(0)
	}
	ctrl.SetLogger(newLogger(&zapOpts))
	log := ctrl.Log.WithName("setup")
	fail := func(err error, msg string, kv ...any) {
		log.Error(err, msg, kv...)
		os.Exit(1)
	}
	if err := cfg.validate(); err != nil {
		fail(err, "invalid flags")
	}
	if cfg.certOpts.Namespace == "" {
		// The key that signs recorded results lives there (controller.Ledger).
		fail(errors.New("the manager's namespace is unknown"), "set --namespace or POD_NAMESPACE")
	}

	scheme, err := blscheme.New()
	if err != nil {
		fail(err, "building scheme")
	}
	webhookServer := webhook.NewServer(cfg.webhookOptions())
	restCfg := ctrl.GetConfigOrDie()
	restCfg.QPS, restCfg.Burst = float32(cfg.apiQPS), cfg.apiBurst
	ctx := ctrl.SetupSignalHandler()
	if cfg.role == roleWorker {
		log.Info("starting the worker role", "version", version.Get().String(), "certManagement", cfg.certManagement)
		if err := runWorker(ctx, cfg, restCfg, scheme, webhookServer); err != nil {
			fail(err, "worker role")
		}
		return
	}
	// Which optional APIs (JobSet, Kueue) are served decides the caches, indexes and
	// controllers below; without one the manager runs without it instead of exiting.
	apis, err := discoverAPIs(ctx, restCfg)
	if err != nil {
		fail(err, "asking which optional APIs the cluster serves")
	}
	if err := apis.served.Report(log, metrics.Registry); err != nil {
		fail(err, "registering the served APIs gauge")
	}
	mgrOpts := cfg.managerOptions(scheme, webhookServer)
	apis.apply(&mgrOpts, scheme)
	mgr, err := ctrl.NewManager(restCfg, mgrOpts)
	if err != nil {
		fail(err, "creating manager")
	}
	if err := controller.SetupIndexes(ctx, mgr, apis.served); err != nil {
		fail(err, "registering field indexes")
	}
	coverage, err := coveragePodCache(ctx, mgr)
	if err != nil {
		fail(err, "setting up the cache of succeeded coverage pods")
	}
	writer, err := controller.NewRESTWriter(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme())
	if err != nil {
		fail(err, "setting up the writer of statuses and result chunks")
	}
	latePods := controller.NewLatePods(mgr.GetConfig(),
		cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err := mgr.Add(latePods); err != nil {
		fail(err, "setting up the caches of late Jobs' pods")
	}
	var workerResults controller.WorkerResults
	if cfg.workerResults {
		if workerResults, err = workerRegistry(mgr, cfg); err != nil {
			fail(err, "setting up the reader of worker clusters' results")
		}
	}
	// The webhooks mark the pods the Job controller creates from their start on: say so in
	// the key Secret before they serve, so that an unmarked pod created since is known for
	// one someone else made (ledgerkey.Source.MarkSince). Left to the key's first load
	// when the Secret cannot be written now.
	markCtx, cancelMark := context.WithTimeout(ctx, 30*time.Second)
	if since, err := keySource(mgr, cfg).MarkSince(markCtx); err != nil {
		log.Error(err, "recording when the webhooks began marking pods; the key's first load records it")
	} else {
		log.Info("the webhooks mark the pods the Job controller creates", "since", since)
	}
	cancelMark()
	setups := controllers(mgr, cfg, coverage, latePods, writer, apis.served, workerResults)
	// webhooksReady is closed once the webhooks are registered on the webhook server.
	webhooksReady := make(chan struct{})
	webhooks := cfg.webhooks(mgr)
	if cfg.selfCerts() {
		if err := registerAfterCerts(mgr, cfg, webhooks, webhooksReady); err != nil {
			fail(err, "setting up webhook certificates")
		}
	} else {
		setups = append(setups, webhooks...)
		close(webhooksReady)
	}
	for _, s := range setups {
		if err := s.SetupWithManager(mgr); err != nil {
			fail(err, "setting up", "component", s)
		}
	}
	if err := mgr.Add(apis.watch(cfg.apiRecheck)); err != nil {
		fail(err, "adding the watch of the served APIs")
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		fail(err, "adding health check")
	}
	if err := mgr.AddReadyzCheck("readyz", cfg.readiness(webhookServer, webhooksReady)); err != nil {
		fail(err, "adding ready check")
	}
	log.Info("starting manager", "version", version.Get().String(), "certManagement", cfg.certManagement, "optionalAPIs", apis.served.String())
	switch err := mgr.Start(ctx); {
	case errors.Is(err, controller.ErrServedAPIsChanged):
		// A clean exit: the Deployment starts the manager again, wired for what is served now.
		log.Info("exiting to follow the optional APIs the cluster serves now")
	case err != nil:
		fail(err, "manager stopped")
	}
}

// config is the manager's command line.
type config struct {
	metricsAddr, probeAddr, webhookHost, certDir string
	pprofAddr                                    string
	webhookPort                                  int
	leaderElect, enableWebhooks                  bool
	scopeLiveReads                               bool
	metricsSecure, enableHTTP2                   bool
	certManagement                               string
	certOpts                                     certs.Options
	leaseDuration, renewDeadline, retryPeriod    time.Duration
	accountSyncs                                 int
	apiQPS                                       float64
	apiBurst                                     int
	maxResultHold                                time.Duration
	workloadMessageInterval                      time.Duration
	waitingStatusDelay                           time.Duration
	unfoundRecheck                               time.Duration
	shortFormSweep                               time.Duration
	apiRecheck                                   time.Duration
	ledgerKeySecret                              string
	perAccountMetrics                            bool
	shortFormTTL                                 time.Duration
	// role is roleManager or roleWorker (--role).
	role string
	// workerResultRetention: how long the worker role keeps a WorkerResult.
	workerResultRetention time.Duration
	// workerResults: the manager reads the results worker clusters recorded.
	workerResults bool
	// printVersion: print the build (pkg/version) and exit, touching no cluster.
	printVersion bool
	// mappings are the compiled mappings the account reconciler and the pod webhooks
	// share: each spec is compiled once in the process.
	mappings account.MappingCache
}

// bindFlags registers the manager's flags on fs and returns the config they fill.
func bindFlags(fs *flag.FlagSet) *config {
	c := &config{}
	fs.BoolVar(&c.printVersion, "version", false, "Print the version and exit.")
	fs.StringVar(&c.role, "role", roleManager,
		"'manager': batchledger where BatchAccounts live (a single cluster or a MultiKueue manager); "+
			"'worker': on a MultiKueue worker cluster, only hold results-scope pods and record their results in WorkerResults for the manager to read (docs/multikueue.md).")
	fs.BoolVar(&c.workerResults, "multikueue-worker-results", false,
		"Read the results batchledger's worker role records on MultiKueue worker clusters, with the kubeconfig (key 'kubeconfig') of each Secret in --namespace labelled "+
			multikueue.LabelWorkerCluster+"=<worker>, the worker's MultiKueueCluster name (docs/multikueue.md).")
	fs.DurationVar(&c.workerResultRetention, "worker-result-retention", workerrole.DefaultRetention,
		"With --role=worker: how long a WorkerResult is kept after it was recorded, and a WorkerJob after its Job ended (never while the Job exists), for the manager to read them.")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint; 0 disables it.")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS, only to callers allowed to get the /metrics non-resource URL.")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", "", "Address of the pprof endpoint, for profiling under load; empty disables it.")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	// Defaults are client-go's and kube-controller-manager's; tests shorten them to see a
	// takeover within seconds.
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits after the last renewal before it takes the leader Lease.")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing its Lease before it gives up leading.")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often candidates try to acquire or renew the Lease.")
	fs.IntVar(&c.accountSyncs, "concurrent-account-syncs", 5, "BatchAccounts reconciled side by side (as kube-controller-manager's --concurrent-job-syncs).")
	fs.DurationVar(&c.workloadMessageInterval, "workload-message-interval", 10*time.Second,
		"How long progress waits before it is written to a Workload (our conditions appearing with the first covered shard, a count that moved, shards covered while the batch still waits); a problem and the batch's acceptance are written at once, and the live count is on the BatchAccount. 0 writes every change at once.")
	// Under Kueue's baseline a Workload appears tens of seconds after its account's first
	// status and its first index completes 10-30 s after admission: 30 s lets most of
	// those waits go with the next write that must go at once.
	fs.DurationVar(&c.waitingStatusDelay, "waiting-status-delay", 30*time.Second,
		"How long an account status that only changes which wait the account is in (its Workloads appearing, one expected wait giving way to another, Kueue admitting them) waits before it is written, so that the steps of a batch share writes; a new account's first status waits as long at most for Kueue to create its queued Jobs' Workloads; coverage, verdicts and problems are written at once. 0 writes every change at once.")
	fs.DurationVar(&c.unfoundRecheck, "unfound-target-recheck", controller.DefaultUnfoundRecheck,
		"The least an account naming a Job that no read found waits before it looks for it again (a quarter of its age, at most 5m): a Job created while the scope webhook failed open sends no event.")
	fs.DurationVar(&c.shortFormSweep, "short-form-sweep-interval", controller.DefaultShortFormSweepInterval,
		"How often the leader looks for short-form Jobs without the scope label (created while the scope webhook failed open, or fixed after their short form did not parse) and labels them, so that their accounts are created; it also looks at start. 0 looks only at start.")
	// Sized for releasing the pods of a 100,000-index batch: at 100 requests per second the
	// releases alone take about 17 minutes, while the account keeps its share of the budget.
	fs.Float64Var(&c.apiQPS, "kube-api-qps", 100, "Requests per second to the API server (client-go's default is 5).")
	fs.IntVar(&c.apiBurst, "kube-api-burst", 200, "Burst of requests to the API server above --kube-api-qps.")
	fs.DurationVar(&c.maxResultHold, "max-result-hold", controller.DefaultMaxResultHold,
		"Longest a succeeded pod is held for its result; past it the pod is released unrecorded, with a Warning event.")
	fs.BoolVar(&c.perAccountMetrics, "per-account-metrics", true,
		"Export the per-account gauges (batchledger_account_*): a few series per BatchAccount; off for clusters of many accounts.")
	fs.DurationVar(&c.shortFormTTL, "short-form-ttl", controller.DefaultShortFormTTL,
		"How long a short-form account whose spec sets no ttlSecondsAfterFinished is kept after its batch finished; 0 keeps it.")
	fs.DurationVar(&c.apiRecheck, "api-recheck-interval", controller.DefaultAPIRecheck,
		"How often the leader asks discovery whether an optional API (JobSet, TrainJob, Kueue's Workload) was installed or removed since it started; then it exits, to be started again following it.")
	fs.BoolVar(&c.enableWebhooks, "enable-webhooks", true, "Serve the BatchAccount validating webhook.")
	fs.BoolVar(&c.scopeLiveReads, "scope-live-reads", false,
		"With more than one replica: the Job and JobSet scope webhook also asks the API server for the accounts its cache has not delivered yet (one metadata-only LIST per new Job no cached account gives the results scope), "+
			"since the replica that admitted an account may not be the one asked about the Job applied with it.")
	fs.StringVar(&c.webhookHost, "webhook-host", "", "Address the webhook server binds to.")
	fs.IntVar(&c.webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&c.certDir, "webhook-cert-dir", "", "Folder with the webhook serving tls.crt and tls.key.")
	fs.BoolVar(&c.enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the webhook and metrics servers (off: HTTP/2 stream-reset and rapid-reset attacks).")
	fs.StringVar(&c.certManagement, "cert-management", certsExternal,
		"Who provides the webhook certificate: 'external' (files in --webhook-cert-dir, caBundle injected by e.g. cert-manager) "+
			"or 'self' (the manager issues it into --webhook-cert-secret, mounted at --webhook-cert-dir, rotates it and injects the CA).")
	fs.StringVar(&c.certOpts.Namespace, "namespace", podNamespace(), "Namespace the manager runs in: its leader-election Lease, and with self-managed certificates the Secret and webhook Service, are there.")
	fs.StringVar(&c.ledgerKeySecret, "ledger-key-secret", ledgerkey.DefaultSecretName,
		"Secret in --namespace holding the key that signs the recorded results; created (or filled, when empty) on first use, never replaced.")
	fs.StringVar(&c.certOpts.SecretName, "webhook-cert-secret", certs.DefaultSecretName, "Secret the self-managed webhook certificate is kept in.")
	fs.StringVar(&c.certOpts.ServiceName, "webhook-service", certs.DefaultServiceName, "Service in front of the webhook server; the self-managed certificate is issued for it.")
	fs.StringVar(&c.certOpts.ValidatingWebhookConfiguration, "validating-webhook-configuration", certs.DefaultValidatingWebhookConfiguration,
		"ValidatingWebhookConfiguration the self-managed CA is injected into.")
	fs.StringVar(&c.certOpts.MutatingWebhookConfiguration, "mutating-webhook-configuration", certs.DefaultMutatingWebhookConfiguration,
		"MutatingWebhookConfiguration the self-managed CA is injected into.")
	return c
}

// minResultKeep is the shortest --max-result-hold and --worker-result-retention: a
// result is recorded seconds after its pod succeeded, more under load.
const minResultKeep = time.Minute

// minLoopInterval is the shortest --short-form-sweep-interval and --api-recheck-interval.
const minLoopInterval = time.Second

// validate checks the flags that take one of a set of values or a bounded number, so
// that a value the manager would misread is refused at start, and fills the defaults
// that depend on the environment.
func (c *config) validate() error {
	if c.role != roleManager && c.role != roleWorker {
		return fmt.Errorf("--role=%q: want %q or %q", c.role, roleManager, roleWorker)
	}
	if c.certManagement != certsExternal && c.certManagement != certsSelf {
		return fmt.Errorf("--cert-management=%q: want %q or %q", c.certManagement, certsExternal, certsSelf)
	}
	if c.shortFormTTL < 0 {
		return fmt.Errorf("--short-form-ttl=%s: want 0 (keep) or a positive duration", c.shortFormTTL)
	}
	// Both read 0 as their default; a negative one, or one of a few seconds, would
	// release every held pod, or delete every WorkerResult, before its result is read;
	// the worker role also looks again at the WorkerJob of each running Job that often.
	if c.maxResultHold != 0 && c.maxResultHold < minResultKeep {
		return fmt.Errorf("--max-result-hold=%s: want 0 (the default, %s) or at least %s", c.maxResultHold, controller.DefaultMaxResultHold, minResultKeep)
	}
	if c.workerResultRetention != 0 && c.workerResultRetention < minResultKeep {
		return fmt.Errorf("--worker-result-retention=%s: want 0 (the default, %s) or at least %s", c.workerResultRetention, workerrole.DefaultRetention, minResultKeep)
	}
	// The pacing delays read a negative one as 0, writing every change at once; the
	// recheck of unfound targets would look again within milliseconds of a new account's
	// creation, as a pipeline creates it ahead of its Jobs.
	if c.workloadMessageInterval < 0 {
		return fmt.Errorf("--workload-message-interval=%s: want 0 (write every change at once) or a positive duration", c.workloadMessageInterval)
	}
	if c.waitingStatusDelay < 0 {
		return fmt.Errorf("--waiting-status-delay=%s: want 0 (write every change at once) or a positive duration", c.waitingStatusDelay)
	}
	// Above the longest recheck it would stretch that bound: one of hours would silently
	// leave a Job created while the scope webhook failed open unfound that long.
	if c.unfoundRecheck < 0 || c.unfoundRecheck > controller.MaxUnfoundRecheck {
		return fmt.Errorf("--unfound-target-recheck=%s: want 0 (the default, %s) or a positive duration up to %s", c.unfoundRecheck, controller.DefaultUnfoundRecheck, controller.MaxUnfoundRecheck)
	}
	// Each sweep lists the cluster's Jobs and each recheck asks discovery: a shorter
	// interval spends the API budget the releases need back to back. A negative sweep
	// interval would silently sweep only at start.
	if c.shortFormSweep != 0 && c.shortFormSweep < minLoopInterval {
		return fmt.Errorf("--short-form-sweep-interval=%s: want 0 (only at start) or at least %s", c.shortFormSweep, minLoopInterval)
	}
	if c.apiRecheck != 0 && c.apiRecheck < minLoopInterval {
		return fmt.Errorf("--api-recheck-interval=%s: want 0 (the default, %s) or at least %s", c.apiRecheck, controller.DefaultAPIRecheck, minLoopInterval)
	}
	// client-go reads a QPS of 0 as its own 5 a second, and a negative one, NaN or
	// infinity as no limit at all; a burst of 0 as 10, and a negative one fails every
	// request. controller-runtime runs a controller of no workers with one.
	if !(c.apiQPS > 0 && c.apiQPS <= math.MaxFloat32) {
		return fmt.Errorf("--kube-api-qps=%g: want a positive number of requests per second", c.apiQPS)
	}
	if c.apiBurst < 1 {
		return fmt.Errorf("--kube-api-burst=%d: want at least 1", c.apiBurst)
	}
	if c.accountSyncs < 1 {
		return fmt.Errorf("--concurrent-account-syncs=%d: want at least 1", c.accountSyncs)
	}
	// client-go refuses these too, but only once the manager runs, its webhook server
	// already started, and without naming the flags.
	if c.leaderElect {
		if c.retryPeriod <= 0 {
			return fmt.Errorf("--leader-elect-retry-period=%s: want a positive duration", c.retryPeriod)
		}
		if float64(c.renewDeadline) <= leaderelection.JitterFactor*float64(c.retryPeriod) {
			return fmt.Errorf("--leader-elect-renew-deadline=%s: want more than %g × --leader-elect-retry-period (%s)",
				c.renewDeadline, leaderelection.JitterFactor, c.retryPeriod)
		}
		if c.leaseDuration <= c.renewDeadline {
			return fmt.Errorf("--leader-elect-lease-duration=%s: want more than --leader-elect-renew-deadline (%s)", c.leaseDuration, c.renewDeadline)
		}
	}
	// controller-runtime would serve on 9443 instead of a port of 0 or less.
	if c.enableWebhooks && (c.webhookPort < 1 || c.webhookPort > 65535) {
		return fmt.Errorf("--webhook-port=%d: want a TCP port, 1 to 65535", c.webhookPort)
	}
	// Without its key the manager could not sign a result or read one recorded: held
	// pods would wait out --max-result-hold and be released unrecorded.
	if errs := validation.IsDNS1123Subdomain(c.ledgerKeySecret); c.role == roleManager && len(errs) > 0 {
		return fmt.Errorf("--ledger-key-secret=%q: want a Secret name: %s", c.ledgerKeySecret, strings.Join(errs, "; "))
	}
	if c.certDir == "" {
		// controller-runtime's default; named here because the rotator watches it too.
		c.certDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	return nil
}

// selfCerts is whether the manager issues its webhook certificate itself.
func (c *config) selfCerts() bool { return c.enableWebhooks && c.certManagement == certsSelf }

// tlsOptions are the webhook and metrics servers' TLS settings: TLS 1.2 at least, and
// HTTP/1.1 only unless --enable-http2.
func (c *config) tlsOptions() []func(*tls.Config) {
	tlsOpts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if !c.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return tlsOpts
}

// webhookOptions are the webhook server's.
func (c *config) webhookOptions() webhook.Options {
	return webhook.Options{Host: c.webhookHost, Port: c.webhookPort, CertDir: c.certDir, TLSOpts: c.tlsOptions()}
}

// managerOptions are the manager's: metrics, probes, leader election, the webhook server
// and the trimmed caches.
func (c *config) managerOptions(scheme *runtime.Scheme, webhookServer webhook.Server) ctrl.Options {
	metricsOpts := metricsserver.Options{BindAddress: c.metricsAddr, SecureServing: c.metricsSecure, TLSOpts: c.tlsOptions()}
	if c.metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: c.probeAddr,
		LeaderElection:         c.leaderElect,
		LeaderElectionID:       "batchledger.batchledger.dev",
		// The Lease lives in the manager's namespace; empty lets controller-runtime read
		// the in-cluster service account's.
		LeaderElectionNamespace: c.certOpts.Namespace,
		LeaseDuration:           &c.leaseDuration,
		RenewDeadline:           &c.renewDeadline,
		RetryPeriod:             &c.retryPeriod,
		// A replica that stops normally (rollout, drain) hands the Lease over at once
		// instead of leaving the batch unreconciled for a whole lease duration. Safe
		// because the manager exits right after it stops leading.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
		Cache:                         controller.CacheOptions(),
		PprofBindAddress:              c.pprofAddr,
	}
}

// controllers are the reconcilers: accounts, held pods, held Job records, and the short
// forms of Jobs and JobSets.
func controllers(mgr ctrl.Manager, c *config, coveragePods cache.Cache, latePods *controller.LatePods, writer controller.Writer, apis *controller.ServedAPIs,
	workerResults controller.WorkerResults) []setup {
	metrics := controller.NewMetrics(c.perAccountMetrics)
	// One Ledger for every controller that reads recorded results: the key is loaded once.
	ledger := &controller.Ledger{Source: keySource(mgr, c)}
	setups := []setup{
		&controller.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), CoveragePods: coveragePods, LatePods: latePods, Writer: writer,
			Recorder: mgr.GetEventRecorder("batchledger"),
			Metrics:  metrics, Criteria: acceptance.NewCache(acceptance.DefaultCacheSize),
			MaxConcurrentReconciles: c.accountSyncs, WorkloadMessageInterval: c.workloadMessageInterval,
			WaitingStatusDelay: c.waitingStatusDelay, UnfoundRecheck: c.unfoundRecheck, APIs: apis, Ledger: ledger, ShortFormTTL: c.shortFormTTL,
			WorkerResults: workerResults, Mappings: &c.mappings,
		},
		&controller.PodReleaser{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Metrics: metrics, Ledger: ledger,
			Recorder: mgr.GetEventRecorder("batchledger"), MaxHold: c.maxResultHold, ShortFormTTL: c.shortFormTTL},
		&controller.JobRecorder{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("batchledger"), Metrics: controller.NewJobRecordMetrics(),
			ShortFormTTL: c.shortFormTTL, APIs: apis, CoveragePods: coveragePods, LatePods: latePods.SucceededPods},
	}
	// The short-form Jobs the scope webhook did not label are not in the cache.
	setups = append(setups, &controller.ShortFormSweep{API: mgr.GetAPIReader(), Writer: mgr.GetClient(), Interval: c.shortFormSweep, Metrics: metrics,
		Recorder: mgr.GetEventRecorder("batchledger")})
	for _, k := range all.Kinds {
		setups = append(setups, &controller.ShortFormReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("batchledger"), Kind: k, APIs: apis, TTL: c.shortFormTTL,
			Mappings: &c.mappings})
	}
	return setups
}

// webhooks are the admission webhooks, none with --enable-webhooks=false.
func (c *config) webhooks(mgr ctrl.Manager) []setup {
	if !c.enableWebhooks {
		return nil
	}
	assign := blwebhook.PodAssignmentAnnotator{Reader: mgr.GetClient(), Mappings: &c.mappings}
	// The scope webhook also knows the accounts admitted here that the cache has not
	// delivered yet: a Job applied with its account is stamped at its creation.
	admitted := &blwebhook.AdmittedAccounts{Reader: mgr.GetClient()}
	// The results scope's pods are held and told their assignment in one call; the
	// assignment webhook sees the coverage scope's.
	stamper := blwebhook.ScopeStamper{Reader: admitted}
	if c.scopeLiveReads {
		// Another replica may have admitted the account: the API server knows it.
		stamper.Undelivered = &blwebhook.UndeliveredAccounts{API: mgr.GetAPIReader()}
	}
	// A Job created before its account is not in the cache until the account labels it,
	// and the cache's copy of one it holds may lag its start: the targets' Jobs are read
	// from the API server (the reader the reconciler resolves an uncached target with).
	// Only a spec update of an account without work on record reads them.
	jobs := relations.JobsFrom(mgr.GetAPIReader(), mgr.GetClient())
	return []setup{blwebhook.BatchAccountValidator{Admitted: admitted, Jobs: jobs}, blwebhook.PodResultHolder{Assign: &assign},
		assign, stamper}
}

// registerAfterCerts sets up the self-managed certificate and registers the webhooks
// once it is ready, closing done then. Registering a webhook adds the webhook server to
// the manager, and the server fails to start without its certificate files. So the
// webhooks are registered only once the rotator has written the certificate and
// injected the CA; the controllers start meanwhile.
func registerAfterCerts(mgr ctrl.Manager, c *config, webhooks []setup, done chan struct{}) error {
	opts := c.certOpts
	opts.CertDir = c.certDir
	certsReady, err := certs.Setup(mgr, opts)
	if err != nil {
		return err
	}
	if err := mgr.Add(&afterCerts{certsReady: certsReady, setups: webhooks, mgr: mgr, done: done}); err != nil {
		return fmt.Errorf("adding the webhook registration: %w", err)
	}
	return nil
}

// readiness is the readyz check: with webhooks, ready only when the webhook server
// answers, so that a Service routes admission requests to this replica only once it can
// serve them with a trusted certificate.
func (c *config) readiness(webhookServer webhook.Server, webhooksReady <-chan struct{}) healthz.Checker {
	if !c.enableWebhooks {
		return healthz.Ping
	}
	started := webhookServer.StartedChecker()
	return func(req *http.Request) error {
		select {
		case <-webhooksReady:
			return started(req)
		default:
			return errors.New("webhook certificate not ready yet")
		}
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

// coveragePodCache is the second pod cache (controller.NewCoveragePodCache), added to
// mgr. It shares the manager's HTTP client and RESTMapper, and starts with the controllers
// (only the leader watches).
func coveragePodCache(ctx context.Context, mgr ctrl.Manager) (cache.Cache, error) {
	c, err := controller.NewCoveragePodCache(ctx, mgr.GetConfig(),
		cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

// keySource is where the manager's signing key lives: its Secret in --namespace.
func keySource(mgr ctrl.Manager, c *config) ledgerkey.Source {
	return ledgerkey.Source{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: c.certOpts.Namespace, Name: c.ledgerKeySecret}
}
