package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The demo fleet's worker clusters, by the names the manager's Kueue knows them by.
var mkWorkerNames = []string{"worker-a", "worker-b"}

// mkManagerNamespace is where batchledger runs on the manager of the local fleet (the
// harness's default namespace): the workers' reader kubeconfig Secrets go there.
const mkManagerNamespace = "default"

// mkDemo is `make demo-multikueue`: a manager and its workers, each a demo of its own
// cluster (d is the manager's).
type mkDemo struct {
	*demo
	mk      *localcluster.MultiKueue
	workers map[string]*demo
	peak    peakMemory
}

// runMultiKueue starts a MultiKueue fleet on this machine (a manager and two workers,
// localcluster.StartMultiKueue, as e2e/multikueue does), batchledger on the manager
// reading the workers' results with each worker's batchledger-manager-reader token, and
// batchledger in the worker role on each worker; runs a results account of an Indexed
// Job dispatched to a worker and a second one forced to the other worker; prints what
// an admin of the fleet looks at; then stops every cluster.
func runMultiKueue(ctx context.Context) (err error) {
	begin := time.Now()
	d := &mkDemo{demo: &demo{ctx: ctx, out: os.Stdout}, workers: map[string]*demo{}}
	d.headline(fmt.Sprintf("starting a MultiKueue fleet: a manager and workers %s, each a local control plane "+
		"(Kubernetes v1.35, Kueue v0.17.0, JobSet v0.11.1; kwok GPU nodes on the workers)", strings.Join(mkWorkerNames, ", ")))
	if err := d.startFleet(); err != nil {
		if d.mk != nil {
			_ = d.mk.Stop()
		}
		return err
	}
	stopSampling := d.peak.sample(d.mk)
	defer func() {
		stopSampling()
		stopped := time.Now()
		if stopErr := d.mk.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the fleet: %w", stopErr)
		}
		fmt.Fprintf(d.out, "\nfleet stopped in %.1fs; the demo took %s, the fleet's peak resident memory %.0f MiB\n",
			time.Since(stopped).Seconds(), time.Since(begin).Round(time.Second), d.peak.max())
	}()
	if err := d.mkQueues(); err != nil {
		return err
	}
	first, err := d.resultsBatch("ij245", "j", []string{"A", "B", "C", "D"}, "")
	if err != nil {
		return err
	}
	if err := d.holdQueue(first); err != nil {
		return err
	}
	second, err := d.resultsBatch("ij246", "k", []string{"E", "F"}, first)
	if err != nil {
		return err
	}
	d.headline("the verdicts, on the manager's Workloads")
	return d.verdicts(map[string]string{"ij245": first, "ij246": second})
}

// startFleet starts the clusters, batchledger on each in its role, and gives the
// manager's batchledger a reader kubeconfig of each worker.
func (d *mkDemo) startFleet() error {
	bin := managerBinary
	if bin == "" {
		binDir := filepath.Join(localcluster.CacheDir(), "demo")
		if err := os.MkdirAll(binDir, 0o755); err != nil {
			return err
		}
		built, err := localcluster.BuildBatchledger(binDir)
		if err != nil {
			return err
		}
		bin = built
	}
	// Short message intervals, as in `make demo`: each step's counts reach the Workload
	// within show's wait.
	manager, err := localcluster.BatchledgerManager(bin, "--multikueue-worker-results",
		"--workload-message-interval="+demoMessageInterval.String(), "--waiting-status-delay="+demoMessageInterval.String())
	if err != nil {
		return err
	}
	workerRole, err := localcluster.BatchledgerWorker(bin)
	if err != nil {
		return err
	}
	// The manager runs no pod: no node there.
	mk, err := localcluster.StartMultiKueue(d.ctx,
		localcluster.Options{Log: os.Stderr, Nodes: []localcluster.NodeSpec{}, Managers: []localcluster.Manager{manager}},
		mkWorkerNames, localcluster.Options{Log: os.Stderr, Managers: []localcluster.Manager{workerRole}})
	d.mk = mk
	if err != nil {
		return fmt.Errorf("starting the MultiKueue fleet: %w", err)
	}
	if err := mk.GiveReaderKubeconfigs(d.ctx, mkManagerNamespace, 24*time.Hour); err != nil {
		return fmt.Errorf("giving the manager the workers' reader kubeconfigs: %w", err)
	}
	fmt.Fprintf(d.out, "fleet ready in %s: Kueue on the manager dispatches through the AdmissionCheck %q to MultiKueueClusters %s\n",
		mk.StartupDuration.Round(10*time.Millisecond), localcluster.MultiKueueCheck, strings.Join(mkWorkerNames, ", "))
	fmt.Fprintf(d.out, "  manager: batchledger --multikueue-worker-results, reading each worker's WorkerResults with a token of its %s\n",
		localcluster.ManagerReaderServiceAccount)
	fmt.Fprintln(d.out, "  workers: batchledger --role=worker as batchledger-worker (only the pod webhook; config/worker's RBAC and admission policies)")
	if d.c, err = client.New(mk.Manager.RESTConfig, client.Options{Scheme: scheme.Must()}); err != nil {
		return err
	}
	for _, name := range mkWorkerNames {
		c, err := client.New(mk.Workers[name].RESTConfig, client.Options{Scheme: scheme.Must()})
		if err != nil {
			return err
		}
		d.workers[name] = &demo{ctx: d.ctx, c: c, out: d.out}
	}
	return nil
}

// mkQueues makes the demo's namespace on every cluster and, on each, the GPU flavor h100
// and ClusterQueue ml-team with LocalQueue ml-team/default: on the manager with the
// MultiKueue AdmissionCheck (its quota only gates dispatch), on the workers over their
// kwok h100 nodes.
func (d *mkDemo) mkQueues() error {
	d.headline("queues: ResourceFlavor h100 and ClusterQueue ml-team on every cluster, the manager's with the MultiKueue AdmissionCheck; LocalQueue ml-team/default")
	clusters := append([]string{"manager"}, mkWorkerNames...)
	for _, name := range clusters {
		cl := d.c
		if w := d.workers[name]; w != nil {
			cl = w.c
		}
		cq := wrappers.MakeClusterQueue(namespace).ResourceGroup(wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "8"))
		if name == "manager" {
			cq = cq.AdmissionCheck(localcluster.MultiKueueCheck)
		}
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
			wrappers.MakeResourceFlavor("h100").NodeLabel(localcluster.GPUTypeLabel, "h100").Obj(),
			cq.Obj(),
			wrappers.MakeLocalQueue("default", namespace).ClusterQueue(namespace).Obj(),
		} {
			if err := cl.Create(d.ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %T %s: %w", name, obj, obj.GetName(), err)
			}
		}
		// Kueue's webhook hands a Job to MultiKueue only once its queue cache knows the
		// LocalQueue's ClusterQueue has the check.
		if err := d.wait(name+": LocalQueue ml-team/default active", func() (bool, error) {
			var lq kueue.LocalQueue
			err := cl.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &lq)
			return err == nil && apimeta.IsStatusConditionTrue(lq.Status.Conditions, kueue.LocalQueueActive), client.IgnoreNotFound(err)
		}); err != nil {
			return err
		}
	}
	return nil
}

// resultsBatch runs a results account (one shard per index, the seed's rule) of an
// Indexed Job queued on the manager, dispatched to a worker other than not, whose pods
// run the example worker there; it returns that worker.
func (d *mkDemo) resultsBatch(account, jobName string, shards []string, not string) (string, error) {
	n := len(shards)
	what := fmt.Sprintf("%s: Job %s (indexes 0-%d onto shards %s) and its results account, queued on the manager", account, jobName, n-1, strings.Join(shards, ", "))
	if not != "" {
		what += fmt.Sprintf(" (%s's ClusterQueue holds: MultiKueue dispatches it to the other worker)", not)
	}
	d.headline(what)
	acct := wrappers.MakeBatchAccount(account, namespace).Shards(shards...).
		AssignJob(jobName, fmt.Sprintf("0-%d", n-1), shards...).RequireResults(seedRule).Obj()
	job := workerJob(jobName, shards)
	for _, obj := range []client.Object{acct, job} {
		if err := d.c.Create(d.ctx, obj); err != nil {
			return "", err
		}
	}
	var worker string
	if err := d.wait("MultiKueue dispatches the Job's Workload to a worker", func() (bool, error) {
		wls, err := d.ownerWorkloads(job)
		if err != nil || len(wls) != 1 {
			return false, err
		}
		worker = multikueue.Cluster(&wls[0])
		return apimeta.IsStatusConditionTrue(wls[0].Status.Conditions, kueue.WorkloadAdmitted) && worker != "" && worker != not, nil
	}); err != nil {
		return "", err
	}
	fmt.Fprintf(d.out, "  admitted on the manager, running on %s; on the manager the Job has spec.managedBy %s and no pod\n",
		worker, ptr.Deref(job.Spec.ManagedBy, ""))
	w := d.workers[worker]
	if err := w.runningPods(job, n); err != nil {
		return "", err
	}
	if err := d.wait("the manager's account admitted on "+worker, func() (bool, error) {
		var ba v1alpha1.BatchAccount
		err := d.c.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: account}, &ba)
		return err == nil && apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAdmitted), client.IgnoreNotFound(err)
	}); err != nil {
		return "", err
	}
	d.show(job, account)

	fmt.Fprintf(d.out, "\n  on %s, batchledger in the worker role holds each pod until its result is recorded there:\n", worker)
	for i := range n {
		if err := w.finish(job, i, 0); err != nil {
			return "", err
		}
	}
	if err := d.waitAccount(account, "the manager reads the results from "+worker+" and accepts the batch", func(ba *v1alpha1.BatchAccount) bool {
		return apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted)
	}); err != nil {
		return "", err
	}
	d.workerResults(worker)
	d.show(job, account)
	return worker, nil
}

// workerResults prints the worker's WorkerResults of the demo's namespace, as
// `kubectl get workerresults` shows them there.
func (d *mkDemo) workerResults(worker string) {
	var list v1alpha1.WorkerResultList
	if err := d.workers[worker].c.List(d.ctx, &list, client.InNamespace(namespace)); err != nil {
		fmt.Fprintf(d.out, "    (cannot list the WorkerResults of %s: %v)\n", worker, err)
		return
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.WorkerResult) int {
		return strings.Compare(a.Job+"/"+strconv.Itoa(int(a.Index)), b.Job+"/"+strconv.Itoa(int(b.Index)))
	})
	fmt.Fprintf(d.out, "\n  kubectl get workerresults -n %s, on %s (what the manager reads there):\n", namespace, worker)
	tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    WORKLOAD\tJOB\tINDEX\tPOD\tFINISHED")
	for _, r := range list.Items {
		fmt.Fprintf(tw, "    %s\t%s\t%d\t%s\t%s\n", r.Workload, r.Job, r.Index, r.Pod, r.FinishedAt.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
}

// holdQueue stops worker's ClusterQueue admitting new Workloads (stopPolicy Hold; what
// runs there goes on), so that MultiKueue dispatches the next Job to another worker.
func (d *mkDemo) holdQueue(worker string) error {
	cl := d.workers[worker].c
	var cq kueue.ClusterQueue
	if err := cl.Get(d.ctx, client.ObjectKey{Name: namespace}, &cq); err != nil {
		return err
	}
	cq.Spec.StopPolicy = ptr.To(kueue.Hold)
	return cl.Update(d.ctx, &cq)
}

// verdicts prints each account's verdict as its manager Workload carries it, with the
// worker the Workload ran on, and fails unless every one is Accepted there.
func (d *mkDemo) verdicts(ranOn map[string]string) error {
	accounts := make([]string, 0, len(ranOn))
	for a := range ranOn {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	var failed []string
	for _, name := range accounts {
		var ba v1alpha1.BatchAccount
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba); err != nil {
			return err
		}
		if len(ba.Status.Targets) == 0 || ba.Status.Targets[0].Workload == nil {
			return fmt.Errorf("BatchAccount %s observed no Workload", name)
		}
		var wl kueue.Workload
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: ba.Status.Targets[0].Workload.Name}, &wl); err != nil {
			return err
		}
		verdict := "no verdict"
		c := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
		if c != nil {
			verdict = fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
		}
		fmt.Fprintf(d.out, "  BatchAccount %s: Workload %s (MultiKueue worker cluster %s): %s; %d of %d shard results recorded from %s\n",
			name, wl.Name, multikueue.Cluster(&wl), verdict, ba.Status.Results.Recorded, ba.Status.Shards.Total, ranOn[name])
		if c == nil || c.Status != metav1.ConditionTrue {
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not Accepted on their Workloads: %s", strings.Join(failed, ", "))
	}
	return nil
}

// peakMemory is the highest resident memory of the fleet's processes (every cluster's
// components and batchledger), sampled each second.
type peakMemory struct {
	mu  sync.Mutex
	mib float64
}

// sample starts sampling mk; the returned func stops it after a last sample.
func (p *peakMemory) sample(mk *localcluster.MultiKueue) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	measure := func() {
		total := 0.0
		for _, c := range append([]*localcluster.Cluster{mk.Manager}, clusterValues(mk.Workers)...) {
			for _, v := range c.MemoryMiB() {
				total += v
			}
		}
		p.mu.Lock()
		p.mib = max(p.mib, total)
		p.mu.Unlock()
	}
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			measure()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func (p *peakMemory) max() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mib
}

func clusterValues(m map[string]*localcluster.Cluster) []*localcluster.Cluster {
	out := make([]*localcluster.Cluster, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}
