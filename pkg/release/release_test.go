package release

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	ours        = v1alpha1.ResultFinalizer
	jobTracking = batchv1.JobTrackingFinalizer
	other       = "example.com/keep"
)

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// hooks stand in for other writers of the cluster: beforePatch runs before each patch
// the releaser sends, with the pod patched and the 1-based count of patches so far.
type hooks struct {
	beforePatch func(ctx context.Context, c client.Client, pod types.NamespacedName, call int) error
}

// calls counts the requests the releaser sent.
type calls struct{ lists, patches int }

// newClient is a fake client holding pods that behaves, where the releaser depends on it,
// as the API server does and the fake client does not: List honours Limit and Continue
// (the fake returns everything in one page), and a JSON patch whose test fails is 422
// Invalid (the fake returns json-patch's bare error). Pods can be re-read by NameField.
func newClient(t *testing.T, pods []*corev1.Pod, h hooks) (client.Client, *calls) {
	t.Helper()
	objs := make([]client.Object, len(pods))
	for i, p := range pods {
		objs[i] = p.DeepCopy()
	}
	n := &calls{}
	base := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, NameField, func(o client.Object) []string { return []string{o.GetName()} }).
		Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n.lists++
			return pagedList(ctx, c, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			n.patches++
			if h.beforePatch != nil {
				if err := h.beforePatch(ctx, c, client.ObjectKeyFromObject(obj), n.patches); err != nil {
					return err
				}
			}
			err := c.Patch(ctx, obj, patch, opts...)
			if _, isStatus := err.(apierrors.APIStatus); err != nil && !isStatus {
				// What the API server answers when a JSON patch does not apply.
				return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{Resource: "pods"}, obj.GetName(), err.Error(), 0, false)
			}
			return err
		},
	})
	return c, n
}

// pagedList serves pod metadata lists in pages of Limit, sorted by namespace and name as
// the API server's are; Continue is the offset of the next page.
func pagedList(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	meta, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok || lo.Limit == 0 {
		return c.List(ctx, list, opts...)
	}
	offset := 0
	if lo.Continue != "" {
		var err error
		if offset, err = strconv.Atoi(lo.Continue); err != nil {
			return err
		}
	}
	if err := c.List(ctx, list, &client.ListOptions{Namespace: lo.Namespace, LabelSelector: lo.LabelSelector, FieldSelector: lo.FieldSelector}); err != nil {
		return err
	}
	slices.SortFunc(meta.Items, func(a, b metav1.PartialObjectMetadata) int {
		return compareKeys(key(a.Namespace, a.Name), key(b.Namespace, b.Name))
	})
	total := len(meta.Items)
	end := min(offset+int(lo.Limit), total)
	meta.Items = meta.Items[offset:end]
	meta.Continue = ""
	if end < total {
		meta.Continue = strconv.Itoa(end)
	}
	return nil
}

// finalizersOf reads every pod's finalizers, and "deleted" for a pod no longer there.
func finalizersOf(t *testing.T, c client.Client, pods []*corev1.Pod) map[types.NamespacedName][]string {
	t.Helper()
	out := map[types.NamespacedName][]string{}
	for _, p := range pods {
		var got corev1.Pod
		err := c.Get(context.Background(), client.ObjectKeyFromObject(p), &got)
		switch {
		case apierrors.IsNotFound(err):
			out[client.ObjectKeyFromObject(p)] = []string{"deleted"}
		case err != nil:
			t.Fatal(err)
		default:
			out[client.ObjectKeyFromObject(p)] = got.Finalizers
		}
	}
	return out
}

func TestFinalizerRemovalPatch(t *testing.T) {
	cases := map[string]struct {
		pod       *corev1.Pod
		wantPatch string
		wantHeld  bool
	}{
		"ours only": {
			pod:       wrappers.MakePod("p", "ml-team").Finalizers(ours).Obj(),
			wantPatch: `[{"op":"test","path":"/metadata/finalizers/0","value":"batchledger.dev/result-capture"},{"op":"remove","path":"/metadata/finalizers/0"}]`,
			wantHeld:  true,
		},
		"ours after job-tracking": {
			pod:       wrappers.MakePod("p", "ml-team").Finalizers(jobTracking, ours).Obj(),
			wantPatch: `[{"op":"test","path":"/metadata/finalizers/1","value":"batchledger.dev/result-capture"},{"op":"remove","path":"/metadata/finalizers/1"}]`,
			wantHeld:  true,
		},
		"not ours": {pod: wrappers.MakePod("p", "ml-team").Finalizers(jobTracking).Obj()},
		"none":     {pod: wrappers.MakePod("p", "ml-team").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			patch, held := FinalizerRemovalPatch(tc.pod)
			if held != tc.wantHeld {
				t.Fatalf("held = %v, want %v", held, tc.wantHeld)
			}
			if !held {
				if patch != nil {
					t.Errorf("patch = %v for a pod not held", patch)
				}
				return
			}
			if patch.Type() != types.JSONPatchType {
				t.Errorf("patch type = %s, want %s", patch.Type(), types.JSONPatchType)
			}
			data, err := patch.Data(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.wantPatch {
				t.Errorf("patch =\n%s\nwant\n%s", data, tc.wantPatch)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	// Seven held pods and three not held over two namespaces, for paging.
	var many []*corev1.Pod
	var manyHeld []types.NamespacedName
	manyWant := map[types.NamespacedName][]string{}
	for i := range 10 {
		ns := []string{"ml-team", "vision"}[i%2]
		p := wrappers.MakePod("p"+strconv.Itoa(i), ns)
		if i < 7 {
			p.Finalizers(jobTracking, ours)
			manyHeld = append(manyHeld, key(ns, p.Name))
		} else {
			p.Finalizers(jobTracking)
		}
		many = append(many, p.Obj())
		manyWant[key(ns, p.Name)] = []string{jobTracking}
	}
	slices.SortFunc(manyHeld, compareKeys)

	twoNamespaces := []*corev1.Pod{
		wrappers.MakePod("a", "ml-team").Finalizers(ours).Obj(),
		wrappers.MakePod("b", "vision").Finalizers(ours).Obj(),
	}

	cases := map[string]struct {
		pods  []*corev1.Pod
		opts  Options
		hooks hooks
		// want is the report, with Errors compared by pod only (wantErrs are their messages).
		want           Report
		wantErrs       []string
		wantFinalizers map[types.NamespacedName][]string
		wantLists      int
		wantPatches    int
	}{
		"our finalizer only": {
			pods:           []*corev1.Pod{wrappers.MakePod("a", "ml-team").Finalizers(ours).Obj()},
			opts:           Options{Namespace: "ml-team"},
			want:           Report{Namespace: "ml-team", Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): nil},
			wantLists:      1,
			wantPatches:    1,
		},
		"ours among others: only ours removed, order kept": {
			pods:           []*corev1.Pod{wrappers.MakePod("a", "ml-team").Finalizers(jobTracking, ours, other).Obj()},
			opts:           Options{Namespace: "ml-team"},
			want:           Report{Namespace: "ml-team", Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {jobTracking, other}},
			wantLists:      1,
			wantPatches:    1,
		},
		"pods without ours untouched": {
			pods: []*corev1.Pod{
				wrappers.MakePod("a", "ml-team").Finalizers(jobTracking).Obj(),
				wrappers.MakePod("b", "ml-team").Obj(),
			},
			opts: Options{Namespace: "ml-team"},
			want: Report{Namespace: "ml-team", Examined: 2},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): {jobTracking},
				key("ml-team", "b"): nil,
			},
			wantLists: 1,
		},
		"another namespace untouched with a namespace": {
			pods: twoNamespaces,
			opts: Options{Namespace: "ml-team"},
			want: Report{Namespace: "ml-team", Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): nil,
				key("vision", "b"):  {ours},
			},
			wantLists:   1,
			wantPatches: 1,
		},
		"every namespace released with all namespaces": {
			pods: twoNamespaces,
			opts: Options{},
			want: Report{
				Examined: 2,
				Held:     []types.NamespacedName{key("ml-team", "a"), key("vision", "b")},
				Released: []types.NamespacedName{key("ml-team", "a"), key("vision", "b")},
			},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): nil,
				key("vision", "b"):  nil,
			},
			wantLists:   1,
			wantPatches: 2,
		},
		"dry run changes nothing and lists the held pods": {
			pods: append(slices.Clone(twoNamespaces), wrappers.MakePod("c", "vision").Finalizers(jobTracking).Obj()),
			opts: Options{DryRun: true},
			want: Report{DryRun: true, Examined: 3, Held: []types.NamespacedName{key("ml-team", "a"), key("vision", "b")}},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): {ours},
				key("vision", "b"):  {ours},
				key("vision", "c"):  {jobTracking},
			},
			wantLists: 1,
		},
		"more pods than one page": {
			pods:           many,
			opts:           Options{PageSize: 3},
			want:           Report{Examined: 10, Held: manyHeld, Released: manyHeld},
			wantFinalizers: manyWant,
			wantLists:      4, // 3+3+3+1
			wantPatches:    7,
		},
		"job-tracking added in between: re-read, ours removed at its new index": {
			pods: []*corev1.Pod{wrappers.MakePod("a", "ml-team").Finalizers(ours).Obj()},
			hooks: hooks{beforePatch: func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error {
				if call == 1 {
					return setFinalizers(ctx, c, k, jobTracking, ours)
				}
				return nil
			}},
			want:           Report{Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {jobTracking}},
			wantLists:      2, // the page, then the re-read
			wantPatches:    2,
		},
		"released by the controller in between": {
			pods: []*corev1.Pod{wrappers.MakePod("a", "ml-team").Finalizers(jobTracking, ours).Obj()},
			hooks: hooks{beforePatch: func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error {
				return setFinalizers(ctx, c, k, jobTracking)
			}},
			want:           Report{Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, AlreadyReleased: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {jobTracking}},
			wantLists:      2,
			wantPatches:    1,
		},
		"deleted in between": {
			pods: []*corev1.Pod{wrappers.MakePod("a", "ml-team").Finalizers(ours).Obj()},
			hooks: hooks{beforePatch: func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error {
				if err := setFinalizers(ctx, c, k); err != nil {
					return err
				}
				return c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}})
			}},
			want:           Report{Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, AlreadyGone: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {"deleted"}},
			wantLists:      1,
			wantPatches:    1,
		},
		"finalizers that keep changing: an error after the attempts": {
			pods: []*corev1.Pod{wrappers.MakePod("a", "ml-team").Finalizers(ours).Obj()},
			opts: Options{Attempts: 3},
			hooks: hooks{beforePatch: func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error {
				// Each time one more finalizer ahead of ours.
				f := []string{}
				for i := range call {
					f = append(f, "example.com/f"+strconv.Itoa(i))
				}
				return setFinalizers(ctx, c, k, append(f, ours)...)
			}},
			want:     Report{Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Errors: []PodError{{Pod: key("ml-team", "a")}}},
			wantErrs: []string{"ml-team/a: removing finalizer batchledger.dev/result-capture: the finalizers kept changing, 3 attempts: the server rejected our request due to an error in our request (patch pods a)"},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): {"example.com/f0", "example.com/f1", "example.com/f2", ours},
			},
			wantLists:   3, // the page, then a re-read after each of the first two failures
			wantPatches: 3,
		},
		"a forbidden patch is an error, not retried": {
			pods: []*corev1.Pod{
				wrappers.MakePod("a", "ml-team").Finalizers(ours).Obj(),
				wrappers.MakePod("b", "ml-team").Finalizers(ours).Obj(),
			},
			hooks: hooks{beforePatch: func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error {
				if k.Name == "a" {
					return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, k.Name, errors.New("no patch for you"))
				}
				return nil
			}},
			want: Report{
				Examined: 2,
				Held:     []types.NamespacedName{key("ml-team", "a"), key("ml-team", "b")},
				Released: []types.NamespacedName{key("ml-team", "b")},
				Errors:   []PodError{{Pod: key("ml-team", "a")}},
			},
			wantErrs: []string{`ml-team/a: removing finalizer batchledger.dev/result-capture: pods "a" is forbidden: no patch for you`},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): {ours},
				key("ml-team", "b"): nil,
			},
			wantLists:   1,
			wantPatches: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, n := newClient(t, tc.pods, tc.hooks)
			got, err := Release(ctx, c, tc.opts)
			if err != nil {
				t.Fatalf("Release: %v", err)
			}
			var gotErrs []string
			for _, e := range got.Errors {
				gotErrs = append(gotErrs, e.Error())
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(PodError{}, "Err")); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrs, gotErrs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFinalizers, finalizersOf(t, c, tc.pods), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers afterwards (-want +got):\n%s", diff)
			}
			if n.lists != tc.wantLists || n.patches != tc.wantPatches {
				t.Errorf("%d lists and %d patches, want %d and %d", n.lists, n.patches, tc.wantLists, tc.wantPatches)
			}
			if wantDone := len(tc.wantErrs) == 0 && (!tc.opts.DryRun || len(tc.want.Held) == 0); got.Done() != wantDone {
				t.Errorf("Done() = %v, want %v", got.Done(), wantDone)
			}
		})
	}
}

// TestReleaseListError returns the List error naming where it listed.
func TestReleaseListError(t *testing.T) {
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.Must()).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no list"))
		},
	})
	_, err := Release(context.Background(), c, Options{})
	if want := `listing pods in all namespaces: pods is forbidden: no list`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// setFinalizers writes a pod's finalizers as another controller would, between the
// releaser's read and its patch.
func setFinalizers(ctx context.Context, c client.Client, k types.NamespacedName, f ...string) error {
	var pod corev1.Pod
	if err := c.Get(ctx, k, &pod); err != nil {
		return err
	}
	pod.Finalizers = f
	return c.Update(ctx, &pod)
}

// TestEachHeld: EachHeld passes each object that carries one of the finalizers asked
// for, with those it carries in the order asked, of every page of what the options
// select (a label selector included), and counts every object listed.
func TestEachHeld(t *testing.T) {
	pods := []*corev1.Pod{
		wrappers.MakePod("a", "ml").Finalizers(ours).Label("team", "x").Obj(),
		wrappers.MakePod("b", "ml").Finalizers(ours).Obj(),
		wrappers.MakePod("c", "ml").Finalizers(other).Label("team", "x").Obj(),
		wrappers.MakePod("d", "vision").Finalizers(other, jobTracking, ours).Label("team", "x").Obj(),
		wrappers.MakePod("e", "vision").Label("team", "x").Obj(),
	}
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	cases := []struct {
		name       string
		finalizers []string
		opts       []client.ListOption
		want       map[types.NamespacedName][]string
		listed     int
	}{
		{name: "every namespace", finalizers: []string{ours}, listed: 5,
			want: map[types.NamespacedName][]string{key("ml", "a"): {ours}, key("ml", "b"): {ours}, key("vision", "d"): {ours}}},
		{name: "a label selector", finalizers: []string{ours}, opts: []client.ListOption{client.MatchingLabels{"team": "x"}}, listed: 4,
			want: map[types.NamespacedName][]string{key("ml", "a"): {ours}, key("vision", "d"): {ours}}},
		{name: "a namespace, two finalizers in the order asked", finalizers: []string{ours, other}, opts: []client.ListOption{client.InNamespace("vision")}, listed: 2,
			want: map[types.NamespacedName][]string{key("vision", "d"): {ours, other}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, n := newClient(t, pods, hooks{})
			got := map[types.NamespacedName][]string{}
			listed, err := EachHeld(context.Background(), c, podKind, tc.finalizers, func(obj *metav1.PartialObjectMetadata, carried []string) {
				got[key(obj.Namespace, obj.Name)] = carried
			}, append(tc.opts, client.Limit(2))...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			if listed != tc.listed || n.lists != (tc.listed+1)/2 {
				t.Errorf("listed %d in %d pages, want %d in pages of 2", listed, n.lists, tc.listed)
			}
		})
	}
}
