package main

import (
	"context"
	"fmt"
	"os"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/worker"
)

// workerImageOnKind is the example worker image hack/kind/images.sh builds and loads.
const workerImageOnKind = "batchledger.dev/example-worker:e2e"

// runKind is `make demo-kind`: the same two batches on the kind cluster hack/kind/cluster.sh
// brings up, where batchledger runs as its Helm chart installs it and real kubelets run
// the pods. Nothing is finished by hand: each pod runs the example worker image, whose run
// is scripted through its environment — IJ245's index 3 fails its first attempt and the
// Job controller retries it, as on a real GPU node.
func runKind(ctx context.Context, kubeconfig string) error {
	d := &demo{ctx: ctx, out: os.Stdout, kubeconfig: kubeconfig}
	d.headline("the kind cluster: real kubelets on GPU-flavored workers, Kueue and JobSet from their charts, batchledger from its chart")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s (run make kind-up first): %w", kubeconfig, err)
	}
	if d.c, err = client.New(cfg, client.Options{Scheme: scheme.Must()}); err != nil {
		return err
	}
	if err := d.queues(); err != nil {
		return err
	}
	if err := d.ij245OnKubelets(); err != nil {
		return err
	}
	if err := d.jobSetRunOnKubelets(); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nThe kind cluster is still up. Look around:\n"+
		"  export KUBECONFIG=%s\n"+
		"  bin/kubectl get batchaccounts,workloads,pods -n %s -o wide\n"+
		"Tear it down with: make kind-down\n", kubeconfig, namespace)
	return nil
}

// onKubelet makes a pod template run the example worker image on a kind node: never
// pulled, small requests beside its GPU, and the failures of its index so far.
func onKubelet(spec *corev1.PodSpec, env ...corev1.EnvVar) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Image, c.ImagePullPolicy = workerImageOnKind, corev1.PullNever
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("16Mi")
		c.Env = append(c.Env, corev1.EnvVar{Name: worker.EnvIndexFailures, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"}}})
		c.Env = append(c.Env, env...)
	}
}

func (d *demo) ij245OnKubelets() error {
	shards := []string{"A", "B", "C", "D"}
	d.headline("IJ245 on real kubelets: Job j (indexes 0-3 onto shards A..D); index 3 fails its first attempt (exit 3) and is retried")
	job := workerJob("j", shards)
	job.Spec.BackoffLimitPerIndex = new(int32(1))
	job.Spec.BackoffLimit = nil
	onKubelet(&job.Spec.Template.Spec,
		corev1.EnvVar{Name: worker.EnvWorkSeconds, Value: "3"},
		corev1.EnvVar{Name: worker.EnvFailIndexes, Value: "3"},
		corev1.EnvVar{Name: worker.EnvExitCode, Value: "3"})
	if err := d.startIJ245(job); err != nil {
		return err
	}
	d.headline("the pods run; kubectl batchledger watch follows the batch to its verdict")
	if err := d.watch("ij245", func(*demo) error { return nil }); err != nil {
		return err
	}
	var done batchv1.Job
	if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(job), &done); err == nil {
		fmt.Fprintf(d.out, "\n  Job j: succeeded %d, failed %d (index 3's first attempt), completedIndexes %s\n",
			done.Status.Succeeded, done.Status.Failed, done.Status.CompletedIndexes)
	}
	d.show(job, "ij245")
	return nil
}

func (d *demo) jobSetRunOnKubelets() error {
	d.headline("a JobSet inference run on real kubelets: workers 2 x 4 indexes onto shards part-0..part-7 (short-form annotations)")
	js := inferJobSet()
	for i := range js.Spec.ReplicatedJobs {
		onKubelet(&js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec, corev1.EnvVar{Name: worker.EnvWorkSeconds, Value: "2"})
	}
	if err := d.c.Create(d.ctx, js); err != nil {
		return err
	}
	if err := d.waitAccount("infer", "the controller creates the account and Kueue admits the JobSet", func(ba *v1alpha1.BatchAccount) bool {
		return apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAdmitted)
	}); err != nil {
		return err
	}
	if err := d.watch("infer", func(*demo) error { return nil }); err != nil {
		return err
	}
	d.show(js, "infer")
	return nil
}
