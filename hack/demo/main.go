// Command demo is `make demo`: it brings up the local control plane with Kueue, JobSet,
// kwok GPU nodes and the batchledger controller, then plays the IJ245 batch of the seed
// step by step and a JobSet inference run, printing after each step what an admin sees:
// the Workload's conditions and the batch account.
//
//	go run ./hack/demo            # leaves the cluster up (make cluster-down stops it)
//	go run ./hack/demo --down     # tears it down at the end
//	go run ./hack/demo --multikueue   # a MultiKueue fleet instead (make demo-multikueue), always torn down
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/worker"
)

const (
	namespace = "ml-team"
	seedRule  = "result.valid == result.records && result.records > 0"
	timeout   = 90 * time.Second
)

func main() {
	down := flag.Bool("down", false, "tear the cluster down at the end instead of leaving it up")
	stateDir := flag.String("state-dir", localcluster.DefaultStateDir(), "the cluster's state directory (shared with hack/cluster)")
	kindConfig := flag.String("kind", "", "play the batches on the kind cluster of this kubeconfig (make demo-kind) instead of a local control plane")
	multiKueue := flag.Bool("multikueue", false, "play a results batch across a MultiKueue fleet (a manager and two workers) instead, then stop the fleet (make demo-multikueue)")
	flag.StringVar(&managerBinary, "manager", "", "the batchledger manager binary to run (make demo builds it with the demo); empty builds ./cmd/batchledger")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *multiKueue:
		err = runMultiKueue(ctx)
	case *kindConfig != "":
		err = runKind(ctx, *kindConfig)
	default:
		err = run(ctx, *stateDir, *down)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo holds the cluster client and the step counter.
type demo struct {
	ctx        context.Context
	c          client.Client
	step       int
	out        io.Writer
	kubeconfig string
}

func run(ctx context.Context, stateDir string, down bool) error {
	d := &demo{ctx: ctx, out: os.Stdout, kubeconfig: filepath.Join(stateDir, "kubeconfig")}
	d.headline("starting the local cluster: Kubernetes v1.35, Kueue v0.17.0, JobSet v0.11.1, kwok GPU nodes, batchledger")
	c, err := startCluster(ctx, stateDir)
	if err != nil {
		return err
	}
	if down {
		defer func() {
			_ = localcluster.StopDetached(stateDir)
			fmt.Fprintln(d.out, "\ncluster stopped")
		}()
	}
	d.c = c
	if err := d.queues(); err != nil {
		return err
	}
	if err := d.ij245(); err != nil {
		return err
	}
	if err := d.jobSetRun(); err != nil {
		return err
	}
	if !down {
		kubeconfig := filepath.Join(stateDir, "kubeconfig")
		// bin/kubectl is not part of the demo's build (make kubectl builds it).
		if _, err := os.Stat(filepath.Join("bin", "kubectl")); err != nil {
			fmt.Fprintln(d.out, "\n(bin/kubectl is not built yet: make kubectl)")
		}
		fmt.Fprintf(d.out, "\nThe cluster is still up. Look around:\n"+
			"  export KUBECONFIG=%s\n"+
			"  %s get batchaccounts,workloads -n %s\n"+
			"  bin/kubectl-batchledger explain account ij245 -n %s   (or: %s batchledger ..., with bin/ on PATH)\n"+
			"Tear it down with: make cluster-down\n", kubeconfig, filepath.Join("bin", "kubectl"), namespace, namespace, filepath.Join("bin", "kubectl"))
	}
	return nil
}

// managerBinary is the --manager flag: the manager binary to run, when already built.
var managerBinary string

// startCluster starts a detached local cluster (so it outlives the demo) with the
// batchledger controller as one more manager.
func startCluster(ctx context.Context, stateDir string) (client.Client, error) {
	if err := localcluster.StopDetached(stateDir); err != nil {
		return nil, fmt.Errorf("stopping the previous cluster: %w", err)
	}
	bin := managerBinary
	if bin == "" {
		binDir := filepath.Join(localcluster.CacheDir(), "demo")
		if err := os.MkdirAll(binDir, 0o755); err != nil {
			return nil, err
		}
		built, err := localcluster.BuildBatchledger(binDir)
		if err != nil {
			return nil, err
		}
		bin = built
	}
	// Each step shows the Workload's conditions and waits for the account's: with short
	// intervals the count a step reached is on the Workload, and the wait the account moved
	// to (admitted) on the account, within show's wait. Users keep the 10s defaults, which
	// spare the API server and Kueue a write per moving count or wait.
	m, err := localcluster.BatchledgerManager(bin, "--workload-message-interval="+demoMessageInterval.String(),
		"--waiting-status-delay="+demoMessageInterval.String())
	if err != nil {
		return nil, err
	}
	cl, err := localcluster.Start(ctx, localcluster.Options{
		StateDir: stateDir, Detach: true, Managers: []localcluster.Manager{m}, Log: os.Stderr,
	})
	if err != nil {
		return nil, err
	}
	fmt.Printf("cluster ready in %s\n", cl.StartupDuration.Round(10*time.Millisecond))
	return client.New(cl.RESTConfig, client.Options{Scheme: scheme.Must()})
}

func (d *demo) headline(text string) {
	d.step++
	bold, reset := "", ""
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		bold, reset = "\033[1m", "\033[0m"
	}
	fmt.Fprintf(d.out, "\n%s== %d. %s%s\n", bold, d.step, text, reset)
}

// queues applies the seed's Kueue objects as written: ResourceFlavor h100, ClusterQueue
// ml-team in cohort shared-gpu, LocalQueue ml-team/default; plus an a100 flavor.
func (d *demo) queues() error {
	d.headline("queues: the seed's ResourceFlavor h100, ClusterQueue ml-team (cohort shared-gpu), LocalQueue ml-team/default")
	if err := d.c.Create(d.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "e2e", "testdata", "kueue-gpu-queue.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := d.c.Create(d.ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		fmt.Fprintf(d.out, "  created %s %s\n", u.GetKind(), u.GetName())
	}
	a100 := wrappers.MakeResourceFlavor("a100").NodeLabel("gpu-type", "a100").Obj()
	if err := d.c.Create(d.ctx, a100); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	fmt.Fprintln(d.out, "  created ResourceFlavor a100")
	return d.wait("ClusterQueue ml-team active", func() (bool, error) {
		var cq kueue.ClusterQueue
		err := d.c.Get(d.ctx, client.ObjectKey{Name: "ml-team"}, &cq)
		return err == nil && apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive), client.IgnoreNotFound(err)
	})
}

// workerJob is an Indexed Job whose pods run the example worker of shards.
func workerJob(name string, shards []string) *batchv1.Job {
	n := int32(len(shards))
	job := wrappers.MakeJob(name, namespace).Indexed(n).Parallelism(n).Queue("default").GPU(1).Obj()
	ct := &job.Spec.Template.Spec.Containers[0]
	ct.Image = "batchledger/example-worker:dev"
	ct.Env = []corev1.EnvVar{
		{Name: worker.EnvShards, Value: strings.Join(shards, ",")},
		{Name: worker.EnvInputRevision, Value: "D"},
		{Name: worker.EnvModelRevision, Value: "m-2026-11"},
		{Name: worker.EnvOutputPrefix, Value: "s3://batches/" + name + "/"},
	}
	return job
}

// ij245Account is the seed's account of IJ245, requiring every shard's result.
func ij245Account() *v1alpha1.BatchAccount {
	shards := []string{"A", "B", "C", "D"}
	return wrappers.MakeBatchAccount("ij245", namespace).Shards(shards...).AssignJob("j", "0-3", shards...).RequireResults(seedRule).Obj()
}

// startIJ245 creates the IJ245 account and job and waits until Kueue admits the Job.
func (d *demo) startIJ245(job *batchv1.Job) error {
	for _, obj := range []client.Object{ij245Account(), job} {
		if err := d.c.Create(d.ctx, obj); err != nil {
			return err
		}
	}
	return d.waitAccount("ij245", "Kueue admits Job j", func(ba *v1alpha1.BatchAccount) bool {
		return apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAdmitted)
	})
}

// ij245 plays the seed's worked case.
func (d *demo) ij245() error {
	shards := []string{"A", "B", "C", "D"}
	d.headline("IJ245: Job j (indexes 0-3 onto shards A, B, C, D of input revision D, model m-2026-11) and its BatchAccount")
	job := workerJob("j", shards)
	if err := d.startIJ245(job); err != nil {
		return err
	}
	if err := d.runningPods(job, 4); err != nil {
		return err
	}
	d.show(job, "ij245")

	d.headline("five successful attempts on indexes 0, 1, 1, 2, 2 (the repeats are extra pods the Job controller counts once per index)")
	for _, i := range []int{0, 1} {
		if err := d.finish(job, i, 0); err != nil {
			return err
		}
	}
	if err := d.repeat(job, 1); err != nil {
		return err
	}
	if err := d.finish(job, 2, 0); err != nil {
		return err
	}
	if err := d.repeat(job, 2); err != nil {
		return err
	}
	if err := d.waitAccount("ij245", "5 attempts over indexes 0-2", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Targets) > 0 && ba.Status.Targets[0].SuccessfulAttempts == 5 && ba.Status.Targets[0].CompletedIndexes == "0-2"
	}); err != nil {
		return err
	}
	d.show(job, "ij245")

	d.headline("a sixth successful attempt: index 3; then the Job controller records Complete (kubectl batchledger watch follows the batch)")
	if err := d.watch("ij245", func(quiet *demo) error { return quiet.finish(job, 3, 0) }); err != nil {
		return err
	}
	d.show(job, "ij245")
	return nil
}

// jobSetRun is an inference run of 8 shards as a JobSet (2 worker Jobs x 4 indexes)
// through the LocalQueue, declared with the short-form annotations.
func (d *demo) jobSetRun() error {
	d.headline("a JobSet inference run through LocalQueue default: workers 2 x 4 indexes onto shards part-0..part-7 (short-form annotations)")
	js := inferJobSet()
	if err := d.c.Create(d.ctx, js); err != nil {
		return err
	}
	if err := d.waitAccount("infer", "the controller creates the account and Kueue admits the JobSet", func(ba *v1alpha1.BatchAccount) bool {
		return apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAdmitted)
	}); err != nil {
		return err
	}
	if err := d.watch("infer", func(quiet *demo) error {
		for i := range 2 {
			child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("infer-workers-%d", i)}}
			if err := quiet.runningPods(child, 4); err != nil {
				return err
			}
			for idx := range 4 {
				if err := quiet.finish(child, idx, 0); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	d.show(js, "infer")
	return nil
}

// inferJobSet is the inference run: a JobSet of 2 worker Jobs x 4 indexes onto shards
// part-0..part-7, declared with the short-form annotations.
func inferJobSet() *jobset.JobSet {
	tmpl := wrappers.MakeJob("", "").Indexed(4).Parallelism(4).GPU(1).Obj()
	ct := &tmpl.Spec.Template.Spec.Containers[0]
	ct.Image = "batchledger/example-worker:dev"
	ct.Env = []corev1.EnvVar{
		{Name: worker.EnvShardPrefix, Value: "part-"},
		{Name: worker.EnvIndexesPerJob, Value: "4"},
		{Name: worker.EnvJobIndex, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + jobset.JobIndexKey + "']"}}},
		{Name: worker.EnvInputRevision, Value: "D"},
		{Name: worker.EnvModelRevision, Value: "m-2026-11"},
		{Name: worker.EnvOutputPrefix, Value: "s3://batches/infer/"},
	}
	js := wrappers.MakeJobSet("infer", namespace).Queue("default").
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(tmpl).Obj()).Obj()
	js.Annotations = map[string]string{
		v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m-2026-11",
		v1alpha1.AnnotationShardCount: "8", v1alpha1.AnnotationShardPrefix: "part-",
		v1alpha1.AnnotationReplicatedJob: "workers", v1alpha1.AnnotationRequire: "true", v1alpha1.AnnotationRule: seedRule,
	}
	return js
}

// pods lists a Job's pods.
func (d *demo) pods(job *batchv1.Job) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := d.c.List(d.ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})
	return list.Items, err
}

// runningIndexPod is the running pod of an index, if any.
func (d *demo) runningIndexPod(job *batchv1.Job, index int) (*corev1.Pod, error) {
	pods, err := d.pods(job)
	for i := range pods {
		p := &pods[i]
		idx, ok := relations.CompletionIndex(p)
		if ok && idx == index && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Annotations[kwok.ExitCodeAnnotation] == "" {
			return p, err
		}
	}
	return nil, err
}

func (d *demo) runningPods(job *batchv1.Job, n int) error {
	return d.wait(fmt.Sprintf("%d running pods of Job %s on the GPU nodes", n, job.Name), func() (bool, error) {
		pods, err := d.pods(job)
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running >= n, err
	})
}

// finish plays the kubelet: the index's pod runs the example worker, whose termination
// message is the worker's own result JSON, computed from the pod's environment.
func (d *demo) finish(job *batchv1.Job, index int, exitCode int32) error {
	var pod *corev1.Pod
	if err := d.wait(fmt.Sprintf("the running pod of %s index %d", job.Name, index), func() (bool, error) {
		var err error
		pod, err = d.runningIndexPod(job, index)
		return pod != nil, err
	}); err != nil {
		return err
	}
	msg, err := workerMessage(pod)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  pod %s (index %d) succeeds and reports %s\n", pod.Name, index, msg)
	return kwok.Finish(d.ctx, d.c, pod, exitCode, msg)
}

// repeat adds another successful attempt of an index, reporting the same result.
func (d *demo) repeat(job *batchv1.Job, index int) error {
	var src *corev1.Pod
	if err := d.wait(fmt.Sprintf("pod of %s index %d succeeded", job.Name, index), func() (bool, error) {
		pods, err := d.pods(job)
		for i := range pods {
			if idx, ok := relations.CompletionIndex(&pods[i]); ok && idx == index && pods[i].Status.Phase == corev1.PodSucceeded {
				src = &pods[i]
			}
		}
		return src != nil, err
	}); err != nil {
		return err
	}
	msg, err := workerMessage(src)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	if err != nil {
		return err
	}
	jobController, err := kwok.JobControllerClient(cfg)
	if err != nil {
		return err
	}
	p, err := kwok.AddSucceededAttempt(d.ctx, d.c, jobController, src, msg)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  another pod %s of index %d also succeeds\n", p.Name, index)
	return nil
}

// workerMessage runs the example worker's logic with the pod's environment, resolving
// downward-API label references as the kubelet would.
func workerMessage(pod *corev1.Pod) (string, error) {
	env := kwok.ContainerEnv(pod)
	cfg, err := worker.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		return "", err
	}
	r, err := worker.Process(cfg)
	if err != nil {
		return "", err
	}
	return worker.Message(r)
}

// watch runs `kubectl batchledger watch account NAME` in the foreground until the batch is
// Accepted, while drive moves the batch in a goroutine: a newcomer sees the batch move
// (redrawn in place on a terminal, one line per change otherwise). drive gets a copy of the
// demo that prints nothing, so that it never writes across watch's frames.
func (d *demo) watch(name string, drive func(quiet *demo) error) error {
	quiet := *d
	quiet.out = io.Discard
	driven := make(chan error, 1)
	go func() { driven <- drive(&quiet) }()
	args := []string{"watch", "account", name, "-n", namespace, "--timeout", timeout.String(), "--kubeconfig", d.kubeconfig}
	code := cli.Execute(d.ctx, args, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := <-driven; err != nil {
		return err
	}
	if code != options.ExitOK {
		return fmt.Errorf("kubectl batchledger watch account %s exited %d", name, code)
	}
	return nil
}

// wait polls cond until it holds or the demo's timeout passes.
func (d *demo) wait(what string, cond func() (bool, error)) error {
	fmt.Fprintf(d.out, "  waiting: %s ...", what)
	start := time.Now()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(d.out, " done (%.1fs)\n", time.Since(start).Seconds())
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-d.ctx.Done():
			return d.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *demo) waitAccount(name, what string, cond func(*v1alpha1.BatchAccount) bool) error {
	return d.wait(what, func() (bool, error) {
		var ba v1alpha1.BatchAccount
		err := d.c.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba)
		return err == nil && cond(&ba), client.IgnoreNotFound(err)
	})
}

// demoMessageInterval is the demo manager's --workload-message-interval and
// --waiting-status-delay.
const demoMessageInterval = 2 * time.Second

// publishWait bounds how long show waits for the Workload to carry the account's verdict
// and message: a message-only change reaches the Workload up to the manager's
// --workload-message-interval after the account (10s as the chart installs it on kind).
const publishWait = 15 * time.Second

// published reports whether every Workload of owner carries the verdicts of account
// accountName as the account now states them (status and message), which is what the
// controller converges to; or none of them while the account has no news for a Workload
// (it only waits, with nothing covered).
func (d *demo) published(owner client.Object, accountName string) bool {
	var ba v1alpha1.BatchAccount
	if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: accountName}, &ba); err != nil {
		return false
	}
	wls, err := d.ownerWorkloads(owner)
	if err != nil {
		return false
	}
	news := v1alpha1.HasWorkloadNews(&ba.Status)
	for _, wl := range wls {
		if !news {
			if v1alpha1.CarriesWorkloadConditions(wl.Status.Conditions) {
				return false
			}
			continue
		}
		for _, from := range v1alpha1.PublishedConditions {
			have := apimeta.FindStatusCondition(ba.Status.Conditions, from)
			typ, _ := v1alpha1.WorkloadConditionFor(from)
			got := apimeta.FindStatusCondition(wl.Status.Conditions, typ)
			if have != nil && (got == nil || got.Status != have.Status || got.Message != "BatchAccount "+ba.Name+": "+have.Message) {
				return false
			}
		}
	}
	return true
}

// ownerWorkloads are the Workloads of the demo's namespace that owner (a Job or JobSet)
// runs under.
func (d *demo) ownerWorkloads(owner client.Object) ([]kueue.Workload, error) {
	var wls kueue.WorkloadList
	if err := d.c.List(d.ctx, &wls, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(wls.Items, func(wl kueue.Workload) bool {
		ref := relations.WorkloadOwner(&wl)
		return ref == nil || ref.UID != owner.GetUID()
	}), nil
}

// show prints what an admin sees: the owner's Workload conditions and the account.
func (d *demo) show(owner client.Object, accountName string) {
	deadline := time.Now().Add(publishWait)
	for !d.published(owner, accountName) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if wls, err := d.ownerWorkloads(owner); err == nil {
		for _, wl := range wls {
			fmt.Fprintf(d.out, "\n  Workload %s conditions:\n", wl.Name)
			tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "    TYPE\tSTATUS\tREASON\tMESSAGE")
			for _, c := range wl.Status.Conditions {
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
			}
			_ = tw.Flush()
			if !v1alpha1.CarriesWorkloadConditions(wl.Status.Conditions) {
				fmt.Fprintln(d.out, "    (no batchledger.dev/* condition yet: they appear with the first covered shard, a problem or the verdict)")
			}
		}
	}
	fmt.Fprintf(d.out, "\n  kubectl batchledger explain account %s:\n", accountName)
	var ba v1alpha1.BatchAccount
	if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: namespace, Name: accountName}, &ba); err != nil {
		fmt.Fprintf(d.out, "    (cannot read the account: %v)\n", err)
		return
	}
	d.explain(&ba)
}
