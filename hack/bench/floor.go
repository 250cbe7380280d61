package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/scheme"
)

// The watch floor is what the controller's caches cost alone: a process that holds the
// manager's caches (controller.CacheOptions and NewCoveragePodCache, the same field
// indexes, an informer on every kind a controller watches) under the same load, and
// does nothing else — no event handler, no reconcile, no write. Its CPU is what any
// controller following these objects pays to decode their watch events; the
// controller's CPU above it is what reconciling costs. Each load run starts one beside
// the controller (--watch-floor).

// watchFloorCommand is the bench's subcommand that runs the watch floor until killed.
const watchFloorCommand = "watch-floor"

// watchedKinds are the kinds the manager's controllers and webhooks watch through its
// cache (cmd/batchledger): accounts, Jobs, JobSets (the short form), pods of the results
// scope, Workloads and result chunks.
func watchedKinds() []client.Object {
	return []client.Object{&v1alpha1.BatchAccount{}, &batchv1.Job{}, &jobset.JobSet{}, &corev1.Pod{}, &kueue.Workload{}, &v1alpha1.ShardResults{}}
}

// runWatchFloor holds the caches against the cluster of kubeconfig until ctx ends.
func runWatchFloor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(watchFloorCommand, flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	_ = fs.Parse(args)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}
	// As the manager (cmd/batchledger), the cache leaves out the kinds the cluster does not
	// serve (the bench's cluster runs no Kubeflow Trainer): it cannot start otherwise.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return err
	}
	served, err := controller.DiscoverAPIs(controller.MapperLookup(mapper), controller.OptionalAPIs)
	if err != nil {
		return err
	}
	opts := controller.CacheOptions()
	opts.Scheme, opts.HTTPClient, opts.Mapper = s, hc, mapper
	served.TrimCache(&opts, s)
	main, err := cache.New(cfg, opts)
	if err != nil {
		return err
	}
	if err := relations.RegisterIndexes(ctx, main); err != nil {
		return err
	}
	cov, err := controller.NewCoveragePodCache(ctx, cfg, cache.Options{Scheme: s})
	if err != nil {
		return err
	}
	for _, o := range watchedKinds() {
		if !served.ServedObject(o, s) {
			continue
		}
		if _, err := main.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("informer of %T: %w", o, err)
		}
	}
	if _, err := cov.GetInformer(ctx, relations.PodMetadata()); err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- main.Start(ctx) }()
	go func() { errs <- cov.Start(ctx) }()
	return errors.Join(<-errs, <-errs)
}

// startWatchFloor starts the watch floor as a child process of this one, against cl,
// whose sampler then measures its CPU, with env added to its environment; stop ends it
// and waits for it.
func startWatchFloor(ctx context.Context, cl *cluster, env []string) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	floorCtx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(floorCtx, self, watchFloorCommand, "--kubeconfig="+cl.Kubeconfig)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), env...)
	// It dies with the bench, also when the bench is killed before it can stop it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting the watch floor: %w", err)
	}
	cl.sampler.floorPID = cmd.Process.Pid
	return func() {
		cancel()
		_ = cmd.Wait()
	}, nil
}
