package release

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
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
	record     = v1alpha1.RecordFinalizer
	foreground = metav1.FinalizerDeleteDependents
)

func TestRemovalPatchOfTheRecordFinalizer(t *testing.T) {
	job := wrappers.MakeJob("j", "ml-team").Finalizers(foreground, record).Obj()
	patch, held := RemovalPatch(job, record)
	if !held {
		t.Fatal("a Job carrying the record finalizer is not held")
	}
	data, err := patch.Data(job)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"op":"test","path":"/metadata/finalizers/1","value":"batchledger.dev/record"},{"op":"remove","path":"/metadata/finalizers/1"}]`; string(data) != want {
		t.Errorf("patch =\n%s\nwant\n%s", data, want)
	}
	if _, held := RemovalPatch(wrappers.MakeJob("j", "ml-team").Finalizers(foreground, ours).Obj(), record); held {
		t.Error("a Job carrying only other finalizers is held")
	}
}

// TestReleaseJobs: ReleaseJobs removes the record finalizer and the worker role's, and
// only those, from every Job that carries them, keeping the others' order; a Job being deleted with only ours goes; a
// finalizer list changed in between is re-read; pods are never listed.
func TestReleaseJobs(t *testing.T) {
	deleting := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		jobs           []*batchv1.Job
		opts           Options
		beforePatch    func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error
		want           Report
		wantFinalizers map[types.NamespacedName][]string
		wantPatches    int
	}{
		"ours among others: only ours removed, order kept": {
			jobs: []*batchv1.Job{
				wrappers.MakeJob("a", "ml-team").Finalizers(foreground, record, other).Obj(),
				wrappers.MakeJob("b", "ml-team").Finalizers(other).Obj(),
				// The pods' finalizer on a Job is not ours to remove here.
				wrappers.MakeJob("c", "ml-team").Finalizers(ours).Obj(),
			},
			want: Report{Examined: 3, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{
				key("ml-team", "a"): {foreground, other}, key("ml-team", "b"): {other}, key("ml-team", "c"): {ours},
			},
			wantPatches: 1,
		},
		"a worker cluster's child Job: the worker role's finalizer removed too": {
			jobs: []*batchv1.Job{
				wrappers.MakeJob("a", "ml-team").Finalizers(foreground, v1alpha1.WorkerJobFinalizer, other).Obj(),
				wrappers.MakeJob("b", "ml-team").Finalizers(record, v1alpha1.WorkerJobFinalizer).Obj(),
			},
			want: Report{Examined: 2, Held: []types.NamespacedName{key("ml-team", "a"), key("ml-team", "b")},
				Released: []types.NamespacedName{key("ml-team", "a"), key("ml-team", "b")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {foreground, other}, key("ml-team", "b"): nil},
			wantPatches:    3,
		},
		"a Job being deleted goes once released": {
			jobs: []*batchv1.Job{func() *batchv1.Job {
				j := wrappers.MakeJob("a", "vision").Finalizers(record).Obj()
				j.DeletionTimestamp = &deleting
				return j
			}()},
			want:           Report{Examined: 1, Held: []types.NamespacedName{key("vision", "a")}, Released: []types.NamespacedName{key("vision", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("vision", "a"): {"deleted"}},
			wantPatches:    1,
		},
		"a namespace only": {
			jobs: []*batchv1.Job{
				wrappers.MakeJob("a", "ml-team").Finalizers(record).Obj(),
				wrappers.MakeJob("b", "vision").Finalizers(record).Obj(),
			},
			opts:           Options{Namespace: "vision"},
			want:           Report{Namespace: "vision", Examined: 1, Held: []types.NamespacedName{key("vision", "b")}, Released: []types.NamespacedName{key("vision", "b")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {record}, key("vision", "b"): nil},
			wantPatches:    1,
		},
		"dry run changes nothing": {
			jobs:           []*batchv1.Job{wrappers.MakeJob("a", "ml-team").Finalizers(record).Obj()},
			opts:           Options{DryRun: true},
			want:           Report{DryRun: true, Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {record}},
		},
		"foreground deletion added in between: re-read, ours removed at its new index": {
			jobs: []*batchv1.Job{wrappers.MakeJob("a", "ml-team").Finalizers(record).Obj()},
			beforePatch: func(ctx context.Context, c client.Client, k types.NamespacedName, call int) error {
				if call > 1 {
					return nil
				}
				var j batchv1.Job
				if err := c.Get(ctx, k, &j); err != nil {
					return err
				}
				j.Finalizers = []string{foreground, record}
				return c.Update(ctx, &j)
			},
			want:           Report{Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}},
			wantFinalizers: map[types.NamespacedName][]string{key("ml-team", "a"): {foreground}},
			wantPatches:    2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			objs := make([]client.Object, len(tc.jobs))
			for i, j := range tc.jobs {
				objs[i] = j.DeepCopy()
			}
			patches := 0
			base := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(objs...).
				WithIndex(&batchv1.Job{}, NameField, func(o client.Object) []string { return []string{o.GetName()} }).Build()
			c := interceptor.NewClient(base, interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if m, ok := list.(*metav1.PartialObjectMetadataList); ok && m.GetObjectKind().GroupVersionKind().Kind != "JobList" {
						t.Errorf("listed %s", m.GetObjectKind().GroupVersionKind().Kind)
					}
					return pagedList(ctx, c, list, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					patches++
					if tc.beforePatch != nil {
						if err := tc.beforePatch(ctx, c, client.ObjectKeyFromObject(obj), patches); err != nil {
							return err
						}
					}
					err := c.Patch(ctx, obj, patch, opts...)
					if _, isStatus := err.(apierrors.APIStatus); err != nil && !isStatus {
						return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(), err.Error(), 0, false)
					}
					return err
				},
			})
			got, err := ReleaseJobs(ctx, c, tc.opts)
			if err != nil {
				t.Fatalf("ReleaseJobs: %v", err)
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(PodError{}, "Err")); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			after := map[types.NamespacedName][]string{}
			for _, j := range tc.jobs {
				var fresh batchv1.Job
				switch err := c.Get(ctx, client.ObjectKeyFromObject(j), &fresh); {
				case apierrors.IsNotFound(err):
					after[client.ObjectKeyFromObject(j)] = []string{"deleted"}
				case err != nil:
					t.Fatal(err)
				default:
					after[client.ObjectKeyFromObject(j)] = fresh.Finalizers
				}
			}
			if diff := cmp.Diff(tc.wantFinalizers, after, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers afterwards (-want +got):\n%s", diff)
			}
			if patches != tc.wantPatches {
				t.Errorf("%d patches, want %d", patches, tc.wantPatches)
			}
		})
	}
}

// TestReleaseJobsListError names the Jobs in the List error.
func TestReleaseJobsListError(t *testing.T) {
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.Must()).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", context.Canceled)
		},
	})
	_, err := ReleaseJobs(context.Background(), c, Options{Namespace: "ml-team"})
	if want := `listing jobs in namespace "ml-team": jobs.batch is forbidden: context canceled`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// TestReleaseJobsServerDryRunBothFinalizers: under --server-dry-run the API server
// answers each patch with the object as it would be, and stores nothing. A worker
// cluster's Job holding both of our finalizers is then released with one patch per
// finalizer, each built on the stored finalizers: the second must not be built on the
// first's dry-run answer, whose indexes the stored list does not have.
func TestReleaseJobsServerDryRunBothFinalizers(t *testing.T) {
	ctx := context.Background()
	job := wrappers.MakeJob("a", "ml-team").Finalizers(record, v1alpha1.WorkerJobFinalizer).Obj()
	base := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(job.DeepCopy()).
		WithIndex(&batchv1.Job{}, NameField, func(o client.Object) []string { return []string{o.GetName()} }).Build()
	patches := 0
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			// As the API server: apply the JSON patch to the stored object, answer with
			// the result, store nothing.
			var stored batchv1.Job
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &stored); err != nil {
				return err
			}
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			var ops []jsonPatchOp
			if err := json.Unmarshal(data, &ops); err != nil {
				return err
			}
			fins := slices.Clone(stored.Finalizers)
			for _, op := range ops {
				i, _ := strconv.Atoi(strings.TrimPrefix(op.Path, "/metadata/finalizers/"))
				if i >= len(fins) || (op.Op == "test" && fins[i] != op.Value) {
					return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{Group: "batch", Resource: "jobs"},
						obj.GetName(), "the server rejected our request due to an error in our request", 0, false)
				}
				if op.Op == "remove" {
					fins = slices.Delete(fins, i, i+1)
				}
			}
			obj.SetFinalizers(fins)
			return nil
		},
	})
	got, err := ReleaseJobs(ctx, c, Options{ServerDryRun: true, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := Report{ServerDryRun: true, Examined: 1, Held: []types.NamespacedName{key("ml-team", "a")}, Released: []types.NamespacedName{key("ml-team", "a")}}
	if diff := cmp.Diff(want, *got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(PodError{}, "Err")); diff != "" {
		t.Errorf("report (-want +got):\n%s\nerrors: %v", diff, got.Err())
	}
	if patches != 2 {
		t.Errorf("%d patches, want 2 (one per finalizer)", patches)
	}
}
