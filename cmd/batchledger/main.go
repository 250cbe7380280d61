// Command batchledger is the manager: it runs the BatchAccount reconciler, the short-form
// reconcilers for annotated Jobs and JobSets, and the BatchAccount validating webhook.
package main

import (
	"crypto/tls"
	"flag"
	"os"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/result"
	blwebhook "batchledger.dev/batchledger/pkg/webhook"
)

// version is stamped at build time (-ldflags -X main.version=...).
var version = "dev"

func main() {
	var (
		metricsAddr, probeAddr, webhookHost, certDir string
		webhookPort                                  int
		leaderElect, enableWebhooks                  bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	flag.BoolVar(&enableWebhooks, "enable-webhooks", true, "Serve the BatchAccount validating webhook.")
	flag.StringVar(&webhookHost, "webhook-host", "", "Address the webhook server binds to.")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "Folder with the webhook serving tls.crt and tls.key.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, kueue.AddToScheme, jobsetapi.AddToScheme} {
		if err := add(scheme); err != nil {
			log.Error(err, "building scheme")
			os.Exit(1)
		}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "batchledger.batchledger.dev",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: webhookHost, Port: webhookPort, CertDir: certDir,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }},
		}),
		Cache: cacheOptions(),
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
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("batchledger"),
		Metrics: metrics, Criteria: result.NewCache(result.DefaultCacheSize),
	}
	setups := []interface{ SetupWithManager(ctrl.Manager) error }{
		r,
		&controller.PodReleaser{Client: mgr.GetClient(), Metrics: metrics},
		&controller.ShortFormReconciler{Client: mgr.GetClient(), Kind: "Job"},
		&controller.ShortFormReconciler{Client: mgr.GetClient(), Kind: "JobSet"},
	}
	if enableWebhooks {
		setups = append(setups, blwebhook.BatchAccountValidator{},
			&blwebhook.PodResultHolder{Reader: mgr.GetClient(), TargetIndex: controller.IndexAccountTarget})
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
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		log.Error(err, "adding ready check")
		os.Exit(1)
	}
	log.Info("starting manager", "version", version)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// cacheOptions keep the pod cache to what accounting needs: only pods of Indexed Jobs
// (they carry the completion-index label), without their spec or managed fields, so
// memory follows indexed pods, not every pod of the cluster.
func cacheOptions() cache.Options {
	indexed, _ := labels.NewRequirement(batchv1.JobCompletionIndexAnnotation, selection.Exists, nil)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label: labels.NewSelector().Add(*indexed),
				Transform: func(obj any) (any, error) {
					if p, ok := obj.(*corev1.Pod); ok {
						p.ManagedFields = nil
						p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName}
					}
					return obj, nil
				},
			},
		},
	}
}
