package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/release"
	blscheme "batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	ourWebhooks   = "batchledger-mutating-webhook-configuration"
	otherWebhooks = "someone-elses-webhooks"
)

func webhookConfiguration(name string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestReleaseHeldPods: the webhook configuration goes first, then the held pods and the
// held Jobs are released, each of batchledger's finalizer only.
func TestReleaseHeldPods(t *testing.T) {
	const held = v1alpha1.ResultFinalizer
	// latePod is held by an API server that had not yet seen the configuration deleted.
	latePod := wrappers.MakePod("late", "ml-team").Finalizers(held).Obj()
	cases := map[string]struct {
		objs []client.Object
		cfg  releaseConfig
		// deleteErr is what deleting our webhook configuration answers instead of the fake.
		deleteErr error
		// admitDuringSleep creates latePod while releaseHeldPods waits for the recheck.
		admitDuringSleep bool
		wantCalls        []string
		wantSleeps       []time.Duration
		wantErr          string
		wantWebhooks     []string
		wantFinalizers   map[string][]string
	}{
		"webhook configuration deleted first, then pods released": {
			objs: []client.Object{
				webhookConfiguration(ourWebhooks), webhookConfiguration(otherWebhooks),
				wrappers.MakePod("a", "ml-team").Finalizers(batchv1.JobTrackingFinalizer, held).Obj(), wrappers.MakePod("b", "vision").Finalizers(held).Obj(),
				wrappers.MakeJob("j", "ml-team").Finalizers(metav1.FinalizerDeleteDependents, v1alpha1.RecordFinalizer).Obj(),
				wrappers.MakeJob("k", "vision").Finalizers(metav1.FinalizerDeleteDependents).Obj(),
			},
			cfg:          releaseConfig{MutatingWebhookConfigurations: []string{ourWebhooks}},
			wantCalls:    []string{"delete " + ourWebhooks, "list pods", "patch ml-team/a", "patch vision/b", "list jobs", "patch ml-team/j"},
			wantWebhooks: []string{otherWebhooks},
			wantFinalizers: map[string][]string{
				"ml-team/a":     {batchv1.JobTrackingFinalizer},
				"vision/b":      nil,
				"job ml-team/j": {metav1.FinalizerDeleteDependents},
				"job vision/k":  {metav1.FinalizerDeleteDependents},
			},
		},
		"a missing webhook configuration is fine": {
			objs:           []client.Object{webhookConfiguration(otherWebhooks), wrappers.MakePod("a", "ml-team").Finalizers(held).Obj()},
			cfg:            releaseConfig{MutatingWebhookConfigurations: []string{ourWebhooks}},
			wantCalls:      []string{"delete " + ourWebhooks, "list pods", "patch ml-team/a", "list jobs"},
			wantWebhooks:   []string{otherWebhooks},
			wantFinalizers: map[string][]string{"ml-team/a": nil},
		},
		"no webhook configuration named: only pods": {
			objs:           []client.Object{webhookConfiguration(ourWebhooks), wrappers.MakePod("a", "ml-team").Finalizers(held).Obj()},
			cfg:            releaseConfig{},
			wantCalls:      []string{"list pods", "patch ml-team/a", "list jobs"},
			wantWebhooks:   []string{ourWebhooks},
			wantFinalizers: map[string][]string{"ml-team/a": nil},
		},
		"a pod held while the deletion propagates is released by the second pass": {
			objs:             []client.Object{webhookConfiguration(ourWebhooks), wrappers.MakePod("a", "ml-team").Finalizers(held).Obj()},
			cfg:              releaseConfig{MutatingWebhookConfigurations: []string{ourWebhooks}, RecheckAfter: 5 * time.Second},
			admitDuringSleep: true,
			wantCalls:        []string{"delete " + ourWebhooks, "list pods", "patch ml-team/a", "list jobs", "list pods", "patch ml-team/late", "list jobs"},
			wantSleeps:       []time.Duration{5 * time.Second},
			wantFinalizers:   map[string][]string{"ml-team/a": nil, "ml-team/late": nil},
		},
		"one namespace only": {
			objs:         []client.Object{wrappers.MakePod("a", "ml-team").Finalizers(held).Obj(), wrappers.MakePod("b", "vision").Finalizers(held).Obj()},
			cfg:          releaseConfig{Options: release.Options{Namespace: "vision"}, MutatingWebhookConfigurations: []string{ourWebhooks}},
			wantCalls:    []string{"delete " + ourWebhooks, "list pods", "patch vision/b", "list jobs"},
			wantWebhooks: nil,
			wantFinalizers: map[string][]string{
				"ml-team/a": {held},
				"vision/b":  nil,
			},
		},
		"dry run deletes and releases nothing": {
			objs:           []client.Object{webhookConfiguration(ourWebhooks), wrappers.MakePod("a", "ml-team").Finalizers(held).Obj()},
			cfg:            releaseConfig{Options: release.Options{DryRun: true}, MutatingWebhookConfigurations: []string{ourWebhooks}, RecheckAfter: 5 * time.Second},
			wantCalls:      []string{"list pods", "list jobs"},
			wantWebhooks:   []string{ourWebhooks},
			wantFinalizers: map[string][]string{"ml-team/a": {held}},
		},
		"a webhook configuration that cannot be deleted fails, pods are released all the same": {
			objs:           []client.Object{webhookConfiguration(ourWebhooks), wrappers.MakePod("a", "ml-team").Finalizers(held).Obj()},
			cfg:            releaseConfig{MutatingWebhookConfigurations: []string{ourWebhooks}},
			deleteErr:      apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, ourWebhooks, errors.New("denied")),
			wantCalls:      []string{"delete " + ourWebhooks, "list pods", "patch ml-team/a", "list jobs"},
			wantErr:        `deleting MutatingWebhookConfiguration batchledger-mutating-webhook-configuration: mutatingwebhookconfigurations.admissionregistration.k8s.io "batchledger-mutating-webhook-configuration" is forbidden: denied`,
			wantWebhooks:   []string{ourWebhooks},
			wantFinalizers: map[string][]string{"ml-team/a": nil},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			base := fake.NewClientBuilder().WithScheme(blscheme.Must()).WithObjects(tc.objs...).Build()
			var calls []string
			c := interceptor.NewClient(base, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					calls = append(calls, "delete "+obj.GetName())
					if tc.deleteErr != nil {
						return tc.deleteErr
					}
					return c.Delete(ctx, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					calls = append(calls, "list "+strings.ToLower(strings.TrimSuffix(list.GetObjectKind().GroupVersionKind().Kind, "List"))+"s")
					return c.List(ctx, list, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					calls = append(calls, fmt.Sprintf("patch %s/%s", obj.GetNamespace(), obj.GetName()))
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			var sleeps []time.Duration
			sleep := func(ctx context.Context, d time.Duration) error {
				sleeps = append(sleeps, d)
				if tc.admitDuringSleep {
					return base.Create(ctx, latePod.DeepCopy())
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
			var pods corev1.PodList
			if err := base.List(ctx, &pods); err != nil {
				t.Fatal(err)
			}
			finalizers := map[string][]string{}
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
				t.Errorf("finalizers afterwards (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReleaseHeldPodsStillHeld fails when a pod could not be released.
func TestReleaseHeldPodsStillHeld(t *testing.T) {
	base := fake.NewClientBuilder().WithScheme(blscheme.Must()).
		WithObjects(wrappers.MakePod("a", "ml-team").Finalizers(v1alpha1.ResultFinalizer).Obj(), wrappers.MakePod("b", "ml-team").Finalizers(v1alpha1.ResultFinalizer).Obj()).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == "a" {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a", errors.New("denied"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	err := releaseHeldPods(context.Background(), c, releaseConfig{}, testr.New(t), nil)
	want := `1 of 2 held pods still held: ml-team/a: removing finalizer batchledger.dev/result-capture: pods "a" is forbidden: denied`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

// TestRunReleaseUsage refuses contradictory or missing scope flags, and negative waits,
// before it connects.
func TestRunReleaseUsage(t *testing.T) {
	// A run that got past its flags fails to reach this cluster instead of exiting for
	// want of a kubeconfig.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	for name, args := range map[string][]string{
		"namespace and all namespaces":   {"--namespace", "ml-team", "--all-namespaces"},
		"no namespace, not all of them":  {"--all-namespaces=false"},
		"an argument":                    {"ml-team"},
		"an unknown flag":                {"--namespaces", "ml-team"},
		"a Deployment without namespace": {"--stop-deployment", "batchledger-controller-manager"},
		"an empty webhook configuration": {"--mutating-webhook-configuration", ""},
		"a negative stop timeout":        {"--stop-deployment", "batchledger-system/batchledger-controller-manager", "--stop-timeout=-2m"},
		"a negative recheck":             {"--mutating-webhook-configuration", "batchledger-mutating-webhook-configuration", "--recheck-after=-5s"},
	} {
		t.Run(name, func(t *testing.T) {
			if code := runRelease(context.Background(), args); code != releaseUsage {
				t.Errorf("exit %d, want %d", code, releaseUsage)
			}
		})
	}
}

// unreachableKubeconfig names an API server no one listens on.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: nowhere
  context:
    cluster: nowhere
    user: nobody
current-context: nowhere
users:
- name: nobody
  user:
    token: none
`
