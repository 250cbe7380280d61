package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// shortFormResultsJob is Job j of the results scope whose short form requires results:
// the controller creates its account a moment after the Job.
func shortFormResultsJob() *wrappers.JobWrapper {
	return jobJ(v1alpha1.ScopeResults).Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m-2026-11",
			v1alpha1.AnnotationShards, "A,B", v1alpha1.AnnotationRequire, "true")
}

// TestPodOfAShortFormHeldUntilItsAccountExists: a held pod of a short-form results Job
// that succeeded before the controller created the declared account stays held (the
// account will record it), and is looked at again within relations.ShortFormWait. An
// account not there that long after the Job's creation and the releaser's start was
// refused by the API server or deleted since: not coming, the pod goes; so it does once
// the batch ended longer ago than the short-form retention.
func TestPodOfAShortFormHeldUntilItsAccountExists(t *testing.T) {
	long := testNow.Add(-2 * relations.ShortFormWait)
	cases := []struct {
		name             string
		created, started time.Time
		ended            time.Time
		wantHeld         bool
	}{
		{"the Job just created", testNow.Add(-time.Second), long, time.Time{}, true},
		{"the releaser just started", long, testNow, time.Time{}, true},
		{"no account a while after both (refused, or deleted)", long, long, time.Time{}, false},
		{"the batch ended longer ago than the retention", testNow.Add(-time.Second), testNow, testNow.Add(-DefaultShortFormTTL - time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := shortFormResultsJob().Finalizers(v1alpha1.RecordFinalizer)
			if !tc.ended.IsZero() {
				w = w.Completed("0,1", 2).Complete(tc.ended)
			}
			j := w.Obj()
			j.CreationTimestamp = metav1.NewTime(tc.created)
			pod := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Second), "").Obj()
			f := newFixture(t, hooks{}, j, pod)
			r := &PodReleaser{Client: f.c, Recorder: f, ShortFormTTL: DefaultShortFormTTL, Now: func() time.Time { return testNow }, started: tc.started}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil {
				t.Fatal(err)
			}
			if held := slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer); held != tc.wantHeld {
				t.Errorf("held %v (finalizers %v), want %v", held, got.Finalizers, tc.wantHeld)
			}
			if tc.wantHeld && (res.RequeueAfter <= 0 || res.RequeueAfter > relations.ShortFormWait) {
				t.Errorf("looked at again after %s; want within %s", res.RequeueAfter, relations.ShortFormWait)
			}
		})
	}
}

// TestShortFormJobRecordHeldUntilItsAccountExists: a short-form Job deleted before the
// controller created the declared account keeps its record finalizer, so that the
// account, once created, records its end. In a namespace being deleted, where the API
// server refuses the account's creation, nothing is to come: the Job goes at once rather
// than keep the namespace for relations.ShortFormWait.
func TestShortFormJobRecordHeldUntilItsAccountExists(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ns       *corev1.Namespace
		wantHeld bool
	}{
		{name: "namespace live: held for the account", ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, wantHeld: true},
		{name: "no Namespace in the cache: held for the account", wantHeld: true},
		{name: "namespace being deleted: no account can come, released",
			ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"example.com/keep"},
				DeletionTimestamp: &metav1.Time{Time: testNow.Add(-time.Second)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := shortFormResultsJob().Finalizers(foreground, v1alpha1.RecordFinalizer).Completed("0,1", 2).
				Complete(testNow.Add(-time.Minute)).Deleting(testNow.Add(-time.Minute)).Obj()
			objs := []client.Object{j}
			if tc.ns != nil {
				objs = append(objs, tc.ns)
			}
			f := newFixture(t, hooks{}, objs...)
			r := &JobRecorder{Client: f.c, Recorder: f, ShortFormTTL: DefaultShortFormTTL, Now: func() time.Time { return testNow }}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(j)})
			if err != nil {
				t.Fatal(err)
			}
			var got batchv1.Job
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(j), &got); err != nil {
				t.Fatal(err)
			}
			held := slices.Contains(got.Finalizers, v1alpha1.RecordFinalizer)
			if held != tc.wantHeld || held && res.RequeueAfter <= 0 {
				t.Errorf("finalizers %v, requeue after %s; want held %v (looked at again within MaxHold)", got.Finalizers, res.RequeueAfter, tc.wantHeld)
			}
		})
	}
}
