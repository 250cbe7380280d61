package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/release"
	blscheme "batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	releaseNamespace = "batchledger-system"
	managerName      = "batchledger-controller-manager"
	workerWebhooks   = "batchledger-worker-job-webhook"
)

var (
	managerKey    = types.NamespacedName{Namespace: releaseNamespace, Name: managerName}
	managerLabels = map[string]string{"app.kubernetes.io/instance": "batchledger", "control-plane": "controller-manager"}
)

func managerDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: managerName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: managerLabels},
		},
	}
}

func managerPod(name string) *corev1.Pod {
	w := wrappers.MakePod(name, releaseNamespace).Phase(corev1.PodRunning)
	for k, v := range managerLabels {
		w = w.Label(k, v)
	}
	return w.Obj()
}

// TestReleaseHeldPodsStopsTheManager: the webhook configurations go first, then the
// manager's Deployment is scaled to 0 and its pods waited for, and only then are pods and
// Jobs released. The manager is modelled as a fake that holds a new Job (as
// JobRecorder.Hold does with a Job that appears) each time the release has listed Jobs,
// for as long as one of its pods exists; a Deployment controller as one that deletes the
// pods of a Deployment scaled to 0 once stopAfterPolls polls have slept.
func TestReleaseHeldPodsStopsTheManager(t *testing.T) {
	const record = v1alpha1.RecordFinalizer
	// hookPod runs the release in the release namespace; it is not the manager's.
	hookPod := wrappers.MakePod("release-held-pods-x", releaseNamespace).Phase(corev1.PodRunning).Label("app.kubernetes.io/component", "release-held-pods").Obj()
	// finished is a manager pod that ended: it holds nothing any more.
	finished := managerPod("manager-old")
	finished.Status.Phase = corev1.PodFailed
	cases := map[string]struct {
		objs []client.Object
		cfg  releaseConfig
		// stopAfterPolls is how many poll sleeps the manager's pods take to stop once scaled
		// to 0; negative never.
		stopAfterPolls int
		// managerHolds makes the running manager hold a new Job after each Jobs list.
		managerHolds   bool
		scaleErr       error
		wantCalls      []string
		wantSleeps     []time.Duration
		wantErr        string
		wantReplicas   *int32
		wantWebhooks   []string
		wantFinalizers map[string][]string
	}{
		"webhooks deleted, manager stopped, then Jobs released": {
			objs: []client.Object{
				webhookConfiguration(ourWebhooks), webhookConfiguration(workerWebhooks), webhookConfiguration(otherWebhooks),
				managerDeployment(), managerPod("manager-a"), managerPod("manager-b"), finished, hookPod,
				wrappers.MakeJob("j", "ml-team").Finalizers(record).Obj(),
			},
			cfg: releaseConfig{MutatingWebhookConfigurations: []string{ourWebhooks, workerWebhooks},
				StopDeployment: managerKey, StopTimeout: time.Minute},
			stopAfterPolls: 1,
			managerHolds:   true,
			wantCalls: []string{
				"delete " + ourWebhooks, "delete " + workerWebhooks,
				"get " + managerName, "scale " + managerName + " to 0",
				"list manager pods", "list manager pods",
				"list pods", "list jobs", "patch ml-team/j",
			},
			wantSleeps:   []time.Duration{stopPollInterval},
			wantReplicas: ptr.To[int32](0),
			wantWebhooks: []string{otherWebhooks},
			wantFinalizers: map[string][]string{
				"job ml-team/j": nil, releaseNamespace + "/release-held-pods-x": nil,
			},
		},
		// The window this closes, as the release ran before: the manager still runs after
		// the last pass and holds a Job nothing releases.
		"without stopping the manager, a Job it holds after the last pass stays held": {
			objs: []client.Object{
				webhookConfiguration(ourWebhooks), managerDeployment(), managerPod("manager-a"),
				wrappers.MakeJob("j", "ml-team").Finalizers(record).Obj(),
			},
			cfg:          releaseConfig{MutatingWebhookConfigurations: []string{ourWebhooks}},
			managerHolds: true,
			wantCalls:    []string{"delete " + ourWebhooks, "list pods", "list jobs", "patch ml-team/j"},
			wantReplicas: ptr.To[int32](2),
			wantFinalizers: map[string][]string{
				"job ml-team/j": nil, "job ml-team/appeared-1": {record}, releaseNamespace + "/manager-a": nil,
			},
		},
		"pods still running after the timeout: released all the same, no error": {
			objs: []client.Object{
				managerDeployment(), managerPod("manager-a"),
				wrappers.MakeJob("j", "ml-team").Finalizers(record).Obj(),
			},
			cfg:            releaseConfig{StopDeployment: managerKey, StopTimeout: 5 * time.Second},
			stopAfterPolls: -1,
			wantCalls: []string{
				"get " + managerName, "scale " + managerName + " to 0",
				"list manager pods", "list manager pods", "list manager pods", "list manager pods",
				"list pods", "list jobs", "patch ml-team/j",
			},
			wantSleeps:   []time.Duration{stopPollInterval, stopPollInterval, stopPollInterval},
			wantReplicas: ptr.To[int32](0),
			wantFinalizers: map[string][]string{
				"job ml-team/j": nil, releaseNamespace + "/manager-a": nil,
			},
		},
		"a Deployment already gone is fine": {
			objs:           []client.Object{wrappers.MakeJob("j", "ml-team").Finalizers(record).Obj()},
			cfg:            releaseConfig{StopDeployment: managerKey, StopTimeout: time.Minute},
			wantCalls:      []string{"get " + managerName, "list pods", "list jobs", "patch ml-team/j"},
			wantFinalizers: map[string][]string{"job ml-team/j": nil},
		},
		"a Deployment that cannot be scaled fails, Jobs are released all the same": {
			objs:     []client.Object{managerDeployment(), wrappers.MakeJob("j", "ml-team").Finalizers(record).Obj()},
			cfg:      releaseConfig{StopDeployment: managerKey, StopTimeout: time.Minute},
			scaleErr: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments/scale"}, managerName, errors.New("denied")),
			wantCalls: []string{"get " + managerName, "scale " + managerName + " to 0",
				"list pods", "list jobs", "patch ml-team/j"},
			wantErr:        `scaling Deployment batchledger-system/batchledger-controller-manager to 0: deployments/scale.apps "batchledger-controller-manager" is forbidden: denied`,
			wantReplicas:   ptr.To[int32](2),
			wantFinalizers: map[string][]string{"job ml-team/j": nil},
		},
		"dry run stops nothing": {
			objs:           []client.Object{managerDeployment(), managerPod("manager-a"), wrappers.MakeJob("j", "ml-team").Finalizers(record).Obj()},
			cfg:            releaseConfig{Options: release.Options{DryRun: true}, StopDeployment: managerKey, StopTimeout: time.Minute},
			wantCalls:      []string{"get " + managerName, "list pods", "list jobs"},
			wantReplicas:   ptr.To[int32](2),
			wantFinalizers: map[string][]string{"job ml-team/j": {record}, releaseNamespace + "/manager-a": nil},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			base := fake.NewClientBuilder().WithScheme(blscheme.Must()).WithObjects(tc.objs...).Build()
			managerRuns := func(ctx context.Context) bool {
				var pods corev1.PodList
				if err := base.List(ctx, &pods, client.InNamespace(releaseNamespace), client.MatchingLabels(managerLabels)); err != nil {
					t.Fatal(err)
				}
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning {
						return true
					}
				}
				return false
			}
			var calls []string
			held := 0
			c := interceptor.NewClient(base, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					calls = append(calls, "delete "+obj.GetName())
					return c.Delete(ctx, obj, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					calls = append(calls, "get "+key.Name)
					return c.Get(ctx, key, obj, opts...)
				},
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					calls = append(calls, fmt.Sprintf("%s %s to 0", sub, obj.GetName()))
					if tc.scaleErr != nil {
						return tc.scaleErr
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lo := (&client.ListOptions{}).ApplyOptions(opts)
					kind := strings.ToLower(strings.TrimSuffix(list.GetObjectKind().GroupVersionKind().Kind, "List")) + "s"
					if _, ok := list.(*corev1.PodList); ok && lo.LabelSelector != nil {
						kind = "manager pods"
					}
					calls = append(calls, "list "+kind)
					if err := c.List(ctx, list, opts...); err != nil {
						return err
					}
					if kind == "jobs" && tc.managerHolds && managerRuns(ctx) {
						held++
						return base.Create(ctx, wrappers.MakeJob(fmt.Sprintf("appeared-%d", held), "ml-team").Finalizers(record).Obj())
					}
					return nil
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					calls = append(calls, fmt.Sprintf("patch %s/%s", obj.GetNamespace(), obj.GetName()))
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			var sleeps []time.Duration
			polls := 0
			sleep := func(ctx context.Context, d time.Duration) error {
				sleeps = append(sleeps, d)
				polls++
				var d0 appsv1.Deployment
				if err := base.Get(ctx, managerKey, &d0); apierrors.IsNotFound(err) {
					return nil
				} else if err != nil {
					return err
				}
				if ptr.Deref(d0.Spec.Replicas, 1) == 0 && tc.stopAfterPolls >= 0 && polls >= tc.stopAfterPolls {
					return base.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(releaseNamespace), client.MatchingLabels(managerLabels))
				}
				return nil
			}

			err := releaseHeldPods(ctx, c, tc.cfg, testr.New(t), sleep)
			if gotErr := fmt.Sprint(err); (err != nil || tc.wantErr != "") && gotErr != tc.wantErr {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSleeps, sleeps); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			var d appsv1.Deployment
			var gotReplicas *int32
			if err := base.Get(ctx, managerKey, &d); err == nil {
				gotReplicas = d.Spec.Replicas
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantReplicas, gotReplicas); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
			var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
			if err := base.List(ctx, &mwcs); err != nil {
				t.Fatal(err)
			}
			var webhooks []string
			for _, m := range mwcs.Items {
				webhooks = append(webhooks, m.Name)
			}
			if diff := cmp.Diff(tc.wantWebhooks, webhooks, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("webhook configurations left (-want +got):\n%s", diff)
			}
			finalizers := map[string][]string{}
			var pods corev1.PodList
			if err := base.List(ctx, &pods); err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				finalizers[p.Namespace+"/"+p.Name] = p.Finalizers
			}
			var jobs batchv1.JobList
			if err := base.List(ctx, &jobs); err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs.Items {
				finalizers["job "+j.Namespace+"/"+j.Name] = j.Finalizers
			}
			if diff := cmp.Diff(tc.wantFinalizers, finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("objects and their finalizers afterwards (-want +got):\n%s", diff)
			}
		})
	}
}
