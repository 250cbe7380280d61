package relations

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestTrackedPods: a Job's pods are tracked while one it controls carries the Job
// controller's tracking finalizer, selected by the Job's selector (a manual one too,
// without the controller-uid label); a pod without it, an orphan, or a pod of another
// Job does not count.
func TestTrackedPods(t *testing.T) {
	j := job("j")
	manual := job("manual")
	manual.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "manual"}}
	manual.Spec.Template.Labels = map[string]string{"app": "manual"}
	// neighbour's pods carry the labels manual's selector matches.
	neighbour := job("neighbour")
	neighbour.Spec.Template.Labels = manual.Spec.Template.Labels
	tracked := func(job *batchv1.Job, name string) *wrappers.PodWrapper {
		return wrappers.MakeIndexPod(job, name, 0).Phase(corev1.PodRunning).Finalizers(batchv1.JobTrackingFinalizer)
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		pods []client.Object
		want bool
	}{
		{name: "no pod", job: j},
		{name: "a pod it controls still tracked", job: j, pods: []client.Object{tracked(j, "p").Obj()}, want: true},
		{name: "its pods' finalizers taken off", job: j, pods: []client.Object{wrappers.MakeIndexPod(j, "p", 0).Phase(corev1.PodRunning).Obj()}},
		{name: "an orphan still tracked", job: j, pods: []client.Object{tracked(j, "p").NoOwner().Obj()}},
		{name: "another Job's pod tracked", job: j, pods: []client.Object{tracked(job("other"), "p").Obj()}},
		{name: "manual selector, a pod it controls still tracked", job: manual,
			pods: []client.Object{tracked(manual, "p").NoLabel(batchv1.ControllerUidLabel).Obj()}, want: true},
		{name: "manual selector, another Job's pod it selects, tracked", job: manual,
			pods: []client.Object{tracked(neighbour, "p").Obj()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TrackedPods(context.Background(), reader(t, tc.pods...), tc.job)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("TrackedPods = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTrackedPodsReadsEveryPage: the pods are read in pages, each asked with a limit, and
// a tracked pod on a later page counts, as one on the first does. A continue token the
// API server no longer honours (410 Gone) is followed by one whole list, as client-go's
// pager does, not by an error that would hold the Job until the next recheck.
func TestTrackedPodsReadsEveryPage(t *testing.T) {
	j := job("j")
	untracked := func(name string) client.Object {
		return wrappers.MakeIndexPod(j, name, 0).Phase(corev1.PodRunning).Obj()
	}
	tracked := wrappers.MakeIndexPod(j, "p3", 0).Phase(corev1.PodRunning).Finalizers(batchv1.JobTrackingFinalizer).Obj()
	page := int64(trackedPodsPage)
	for _, tc := range []struct {
		name       string
		pods       []client.Object
		expire     bool
		want       bool
		wantLimits []int64
	}{
		{name: "tracked pod on the last page", pods: []client.Object{untracked("p1"), untracked("p2"), tracked},
			want: true, wantLimits: []int64{page, page, page}},
		{name: "no tracked pod on any page", pods: []client.Object{untracked("p1"), untracked("p2"), untracked("p3")},
			wantLimits: []int64{page, page, page}},
		{name: "continue expired, tracked pod on a later page", pods: []client.Object{untracked("p1"), untracked("p2"), tracked},
			expire: true, want: true, wantLimits: []int64{page, page, 0}},
		{name: "continue expired, no tracked pod", pods: []client.Object{untracked("p1"), untracked("p2"), untracked("p3")},
			expire: true, wantLimits: []int64{page, page, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &pagedReader{Reader: reader(t, tc.pods...), pageSize: 1, expireContinue: tc.expire}
			got, err := TrackedPods(context.Background(), r, j)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("TrackedPods = %v, want %v", got, tc.want)
			}
			if !slices.Equal(r.limits, tc.wantLimits) {
				t.Errorf("lists asked with limits %v, want %v", r.limits, tc.wantLimits)
			}
		})
	}
}

// pagedReader answers a list as an API server paging it does: at most pageSize items
// (fewer than the limit asked, as a server may), in name order, with a continue token;
// a list without a limit whole. With expireContinue, a list given a continue token fails
// as one whose token the API server compacted away.
type pagedReader struct {
	client.Reader
	pageSize       int
	expireContinue bool
	limits         []int64
}

func (r *pagedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	r.limits = append(r.limits, o.Limit)
	start := 0
	if o.Continue != "" {
		if r.expireContinue {
			return apierrors.NewResourceExpired("The provided continue parameter is too old")
		}
		var err error
		if start, err = strconv.Atoi(o.Continue); err != nil {
			return err
		}
	}
	limit := o.Limit
	o.Limit, o.Continue = 0, ""
	if err := r.Reader.List(ctx, list, o); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	slices.SortFunc(items, func(a, b runtime.Object) int {
		return strings.Compare(a.(metav1.Object).GetName(), b.(metav1.Object).GetName())
	})
	end := len(items)
	if limit > 0 {
		end = min(start+r.pageSize, len(items))
	}
	next := ""
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	list.SetContinue(next)
	return apimeta.SetList(list, items[start:end])
}

// TestCountedByJobController: the built-in Job controller counts a Job no other
// controller manages.
func TestCountedByJobController(t *testing.T) {
	for _, tc := range []struct {
		managedBy *string
		want      bool
	}{
		{want: true},
		{managedBy: ptr.To(batchv1.JobControllerName), want: true},
		{managedBy: ptr.To("kueue.x-k8s.io/multikueue")},
	} {
		j := job("j")
		j.Spec.ManagedBy = tc.managedBy
		if got := CountedByJobController(j); got != tc.want {
			t.Errorf("managedBy %v: CountedByJobController = %v, want %v", ptr.Deref(tc.managedBy, "<nil>"), got, tc.want)
		}
	}
}

// TestTrackingRecheck: a Job deleted a moment ago is read again soon, then less often as
// its deletion ages, never less often than a minute.
func TestTrackingRecheck(t *testing.T) {
	for _, tc := range []struct {
		deletedFor, want time.Duration
	}{
		{0, 5 * time.Second},
		{10 * time.Second, 5 * time.Second},
		{time.Minute, 15 * time.Second},
		{4 * time.Minute, time.Minute},
		{time.Hour, time.Minute},
	} {
		if got := TrackingRecheck(tc.deletedFor); got != tc.want {
			t.Errorf("TrackingRecheck(%v) = %v, want %v", tc.deletedFor, got, tc.want)
		}
	}
}
