package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/multikueue/workerrole"
	"batchledger.dev/batchledger/pkg/multikueue/workers"
)

// Values of --role.
const (
	// roleManager: the whole of batchledger on the cluster where accounts live (a
	// single cluster, or a MultiKueue manager).
	roleManager = "manager"
	// roleWorker: on a MultiKueue worker cluster, only the pod webhook and the capture
	// of results into WorkerResults (pkg/multikueue/workerrole).
	roleWorker = "worker"
)

// runWorker runs the worker role until ctx ends: the pod webhook (holding results-scope
// pods and naming the manager Workload on them), the capture into WorkerResults and the
// release of held pods under the single-cluster rules. No BatchAccount, no Kueue API.
func runWorker(ctx context.Context, c *config, restCfg *rest.Config, scheme *runtime.Scheme, webhookServer webhook.Server) error {
	opts := c.managerOptions(scheme, webhookServer)
	opts.Cache = workerrole.CacheOptions()
	opts.LeaderElectionID = "batchledger-worker.batchledger.dev"
	mgr, err := ctrl.NewManager(restCfg, opts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	releaser := &controller.PodReleaser{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorders: workerrole.Recorders{Reader: mgr.GetClient()}, Metrics: controller.NewMetrics(false),
		Recorder: mgr.GetEventRecorder("batchledger"), MaxHold: c.maxResultHold}
	capture := &workerrole.Capture{Client: mgr.GetClient(), Releaser: releaser, Retention: c.workerResultRetention}
	if err := capture.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the capture: %w", err)
	}
	jobs := &workerrole.JobRecorder{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), MaxHold: c.maxResultHold}
	if err := jobs.SetupWithManager(mgr, capture.ExpireJobs); err != nil {
		return fmt.Errorf("setting up the JobSet child Jobs' records: %w", err)
	}
	webhooksReady := make(chan struct{})
	var hooks []setup
	if c.enableWebhooks {
		hooks = []setup{workerrole.PodHolder{Reader: mgr.GetClient()}, workerrole.JobHolder{Reader: mgr.GetClient()}}
	}
	if c.selfCerts() {
		if err := registerAfterCerts(mgr, c, hooks, webhooksReady); err != nil {
			return fmt.Errorf("setting up webhook certificates: %w", err)
		}
	} else {
		for _, h := range hooks {
			if err := h.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("setting up the pod webhook: %w", err)
			}
		}
		close(webhooksReady)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", c.readiness(webhookServer, webhooksReady)); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("manager stopped: %w", err)
	}
	return nil
}

// workerRegistry is the manager's reader of the workers' WorkerResults (pkg/multikueue/
// workers), added to mgr: it follows the worker kubeconfig Secrets of the manager's
// namespace.
func workerRegistry(mgr ctrl.Manager, c *config) (*workers.Registry, error) {
	secrets, err := workers.NewSecretCache(mgr.GetConfig(),
		cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}, c.certOpts.Namespace)
	if err != nil {
		return nil, err
	}
	r := &workers.Registry{Namespace: c.certOpts.Namespace, Scheme: mgr.GetScheme(), Secrets: secrets}
	return r, mgr.Add(r)
}
