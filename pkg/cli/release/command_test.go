package release

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// runReleaseCommand runs NewCommand against c under a root that carries kubectl's
// connection flags, as the plugin's root command does, and returns stdout, stderr and the exit code.
func runReleaseCommand(t *testing.T, c client.Client, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	var out, errOut bytes.Buffer
	o := options.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.NewClient = func() (client.Client, error) { return c, nil }
	root := &cobra.Command{Use: "kubectl-batchledger", SilenceErrors: true, SilenceUsage: true}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	root.AddCommand(NewCommand(o))
	root.SetArgs(append([]string{"release"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := options.ExitCodeOf(root.ExecuteContext(t.Context()), &errOut)
	return out.String(), errOut.String(), code
}

func TestReleaseCommand(t *testing.T) {
	const tracking = batchv1.JobTrackingFinalizer
	pods := func() []client.Object {
		return []client.Object{
			wrappers.MakePod("j-0-abcde", ns).Finalizers(tracking, v1alpha1.ResultFinalizer).Obj(),
			wrappers.MakePod("j-1-fghij", ns).Finalizers(v1alpha1.ResultFinalizer).Obj(),
			wrappers.MakePod("j-2-klmno", ns).Finalizers(tracking).Obj(),
			wrappers.MakePod("v-0-pqrst", "vision").Finalizers(v1alpha1.ResultFinalizer).Obj(),
		}
	}
	heldOnly := func() []client.Object {
		return []client.Object{wrappers.MakePod("j-2-klmno", ns).Finalizers(tracking).Obj()}
	}
	forbidden := interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == "j-1-fghij" {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("denied"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}
	cases := map[string]struct {
		objs           []client.Object
		funcs          interceptor.Funcs
		args           []string
		wantOut        string
		wantErr        string
		wantCode       int
		wantFinalizers map[string][]string
	}{
		"one namespace": {
			objs: pods(),
			args: []string{"-n", ns},
			wantOut: `released pod ml-team/j-0-abcde
released pod ml-team/j-1-fghij
released 2 pods held by batchledger in namespace ml-team
`,
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking},
				"ml-team/j-1-fghij": nil,
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  {v1alpha1.ResultFinalizer},
			},
		},
		"all namespaces": {
			objs: pods(),
			args: []string{"-A"},
			wantOut: `released pod ml-team/j-0-abcde
released pod ml-team/j-1-fghij
released pod vision/v-0-pqrst
released 3 pods held by batchledger across all namespaces
`,
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking},
				"ml-team/j-1-fghij": nil,
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  nil,
			},
		},
		"dry run": {
			objs: pods(),
			args: []string{"--all-namespaces", "--dry-run"},
			wantOut: `would release pod ml-team/j-0-abcde
would release pod ml-team/j-1-fghij
would release pod vision/v-0-pqrst
would release 3 pods held by batchledger across all namespaces (dry run: nothing changed)
`,
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking, v1alpha1.ResultFinalizer},
				"ml-team/j-1-fghij": {v1alpha1.ResultFinalizer},
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  {v1alpha1.ResultFinalizer},
			},
		},
		"client dry run by name": {
			objs:    pods(),
			args:    []string{"-n", "vision", "--dry-run=client"},
			wantOut: "would release pod vision/v-0-pqrst\nwould release 1 pod held by batchledger in namespace vision (dry run: nothing changed)\n",
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking, v1alpha1.ResultFinalizer},
				"ml-team/j-1-fghij": {v1alpha1.ResultFinalizer},
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  {v1alpha1.ResultFinalizer},
			},
		},
		"server dry run": {
			objs: pods(),
			funcs: interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if po := (&client.PatchOptions{}).ApplyOptions(opts); len(po.DryRun) != 1 || po.DryRun[0] != "All" {
					return errors.New("a patch without dryRun=All")
				}
				return c.Patch(ctx, obj, patch, opts...)
			}},
			args:    []string{"-n", ns, "--dry-run=server"},
			wantOut: "released pod ml-team/j-0-abcde (server dry run)\nreleased pod ml-team/j-1-fghij (server dry run)\nreleased 2 pods held by batchledger in namespace ml-team (server dry run)\n",
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking, v1alpha1.ResultFinalizer},
				"ml-team/j-1-fghij": {v1alpha1.ResultFinalizer},
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  {v1alpha1.ResultFinalizer},
			},
		},
		"an unknown dry-run": {
			objs:           heldOnly(),
			args:           []string{"--dry-run=maybe"},
			wantErr:        "error: invalid argument \"maybe\" for \"--dry-run\" flag: invalid dry-run value \"maybe\": use \"none\", \"client\" or \"server\"\n",
			wantCode:       options.ExitError,
			wantFinalizers: map[string][]string{"ml-team/j-2-klmno": {tracking}},
		},
		"the kubeconfig's namespace without -n": {
			objs: []client.Object{wrappers.MakePod("d-0", "default").Finalizers(v1alpha1.ResultFinalizer).Obj()},
			wantOut: `released pod default/d-0
released 1 pod held by batchledger in namespace default
`,
			wantFinalizers: map[string][]string{"default/d-0": nil},
		},
		"nothing held in a namespace": {
			objs:           heldOnly(),
			args:           []string{"-n", ns},
			wantOut:        "no pod is held by batchledger in namespace ml-team\n",
			wantFinalizers: map[string][]string{"ml-team/j-2-klmno": {tracking}},
		},
		"nothing held anywhere": {
			objs:           heldOnly(),
			args:           []string{"-A"},
			wantOut:        "no pod is held by batchledger in any namespace\n",
			wantFinalizers: map[string][]string{"ml-team/j-2-klmno": {tracking}},
		},
		"a pod that cannot be released": {
			objs:  pods(),
			funcs: forbidden,
			args:  []string{"-n", ns},
			wantOut: `released pod ml-team/j-0-abcde
released 1 pod held by batchledger in namespace ml-team; 1 still held
`,
			wantErr: `error: 1 of 2 held pods still held:
ml-team/j-1-fghij: removing finalizer batchledger.dev/result-capture: pods "j-1-fghij" is forbidden: denied
`,
			wantCode: options.ExitError,
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking},
				"ml-team/j-1-fghij": {v1alpha1.ResultFinalizer},
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  {v1alpha1.ResultFinalizer},
			},
		},
		"a list that fails": {
			objs: pods(),
			funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("denied"))
			}},
			args:     []string{"-A"},
			wantErr:  "error: listing pods in all namespaces: pods is forbidden: denied\nlisting jobs in all namespaces: pods is forbidden: denied\n",
			wantCode: options.ExitError,
			wantFinalizers: map[string][]string{
				"ml-team/j-0-abcde": {tracking, v1alpha1.ResultFinalizer},
				"ml-team/j-1-fghij": {v1alpha1.ResultFinalizer},
				"ml-team/j-2-klmno": {tracking},
				"vision/v-0-pqrst":  {v1alpha1.ResultFinalizer},
			},
		},
		"arguments are refused": {
			objs:           heldOnly(),
			args:           []string{"j-0-abcde"},
			wantErr:        "error: unknown command \"j-0-abcde\" for \"kubectl-batchledger release\"\n",
			wantCode:       options.ExitError,
			wantFinalizers: map[string][]string{"ml-team/j-2-klmno": {tracking}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base := clitest.FakeClient(tc.objs...)
			c := interceptor.NewClient(base, tc.funcs)
			out, errOut, code := runReleaseCommand(t, c, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantOut, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErr, errOut); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			got := map[string][]string{}
			for _, o := range tc.objs {
				var p corev1.Pod
				if err := base.Get(t.Context(), client.ObjectKeyFromObject(o), &p); err != nil {
					t.Fatal(err)
				}
				got[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}.String()] = p.Finalizers
			}
			if diff := cmp.Diff(tc.wantFinalizers, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers afterwards (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReleaseCommandJobs: the Jobs held for their records are released too, each of the
// record finalizer only, and reported after the pods.
func TestReleaseCommandJobs(t *testing.T) {
	const foreground = "foregroundDeletion"
	objs := []client.Object{
		wrappers.MakePod("j-0-abcde", ns).Finalizers(v1alpha1.ResultFinalizer).Obj(),
		wrappers.MakeJob("j", ns).Finalizers(foreground, v1alpha1.RecordFinalizer).Obj(),
		wrappers.MakeJob("k", ns).Finalizers(foreground).Obj(),
	}
	for _, tc := range []struct {
		args           []string
		wantOut        string
		wantFinalizers []string
	}{
		{[]string{"-n", ns, "--dry-run"}, `would release pod ml-team/j-0-abcde
would release 1 pod held by batchledger in namespace ml-team (dry run: nothing changed)
would release Job ml-team/j
would release 1 Job held by batchledger in namespace ml-team (dry run: nothing changed)
`, []string{foreground, v1alpha1.RecordFinalizer}},
		{[]string{"-n", ns}, `released pod ml-team/j-0-abcde
released 1 pod held by batchledger in namespace ml-team
released Job ml-team/j
released 1 Job held by batchledger in namespace ml-team
`, []string{foreground}},
	} {
		base := clitest.FakeClient(objs...)
		out, errOut, code := runReleaseCommand(t, base, tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errOut)
		}
		if diff := cmp.Diff(tc.wantOut, out); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", tc.args, diff)
		}
		var j, k batchv1.Job
		if err := base.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "j"}, &j); err != nil {
			t.Fatal(err)
		}
		if err := base.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "k"}, &k); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.wantFinalizers, j.Finalizers); diff != "" {
			t.Errorf("%v: Job j's finalizers (-want +got):\n%s", tc.args, diff)
		}
		if diff := cmp.Diff([]string{foreground}, k.Finalizers); diff != "" {
			t.Errorf("%v: Job k, never held, changed (-want +got):\n%s", tc.args, diff)
		}
	}
}
