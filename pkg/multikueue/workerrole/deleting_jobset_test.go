package workerrole

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/webhook"
)

// deletingCopyOfJS is the worker's copy of js whose deletion started at testNow: Kueue
// deleted it once its Workload finished, and a finalizer of the namespace user's keeps it.
func deletingCopyOfJS() *jobsetapi.JobSet {
	js := copyOfJS().Obj()
	js.DeletionTimestamp = &metav1.Time{Time: testNow}
	js.Finalizers = []string{"example.com/keep"}
	return js
}

// createdAt is job created at t.
func createdAt(job *batchv1.Job, t time.Time) *batchv1.Job {
	job.CreationTimestamp = metav1.Time{Time: t}
	return job
}

// TestChildOfAJobSetBeingDeletedNotAttributed: the JobSet controller creates no child Job
// for a JobSet being deleted, so a Job claiming a dispatched JobSet's controller reference
// that is created once the JobSet's deletion started is a namespace user's: a worker user
// keeps the finished JobSet's copy with a finalizer of their own, deletes its child
// (released once its end is recorded), and creates a Job of the child's name that passes
// the rule. Such a Job is not held or attributed by the Job webhook, not recorded, and its
// pods are not attributed: its WorkerJob would be the newest child's, which the manager
// follows (kinds.Recorded), and its results would turn the batch Accepted. A child created
// before the deletion started is still recorded, and its pods attributed.
func TestChildOfAJobSetBeingDeletedNotAttributed(t *testing.T) {
	forged := func() *batchv1.Job {
		return createdAt(child(copyOfJS().Obj(), 0).UID("forged-uid").Completed("0-3", 4).Complete(testNow.Add(time.Hour)).Obj(),
			testNow.Add(time.Minute))
	}
	real := func() *batchv1.Job {
		return createdAt(child(copyOfJS().Obj(), 0).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Obj(),
			testNow.Add(-time.Hour))
	}
	for name, tc := range map[string]struct {
		job *batchv1.Job
		// admitted: the Job is new, passing the Job webhook (no creationTimestamp yet).
		admitted bool
		want     bool // held and attributed by the webhook, recorded, its pods attributed
	}{
		"a new Job, its JobSet being deleted":               {job: forged(), admitted: true},
		"a Job created after its JobSet's deletion started": {job: forged()},
		"a child created before its JobSet's deletion":      {job: real(), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.admitted {
				job := tc.job.DeepCopy()
				job.UID, job.CreationTimestamp = "", metav1.Time{}
				raw, _ := json.Marshal(job)
				c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(deletingCopyOfJS()).Build()
				resp := JobHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
					Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
				if !resp.Allowed {
					t.Fatalf("refused (%v): a Job of no dispatched JobSet is admitted unchanged", resp.Result)
				}
				if held := len(resp.Patches) > 0; held != tc.want {
					t.Errorf("patches %+v; want the Job held and attributed: %v", resp.Patches, tc.want)
				}
				return
			}
			r, c := newJobRecorder(interceptor.Funcs{}, deletingCopyOfJS(), tc.job)
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)}); err != nil {
				t.Fatal(err)
			}
			var recs v1alpha1.WorkerJobList
			if err := c.List(context.Background(), &recs); err != nil {
				t.Fatal(err)
			}
			if recorded := len(recs.Items) > 0; recorded != tc.want {
				t.Errorf("records %+v; want the Job recorded: %v", recs.Items, tc.want)
			}
			raw, _ := json.Marshal(wrappers.MakeIndexPod(tc.job, tc.job.Name+"-2", 2).Obj())
			resp := PodHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns",
				Object: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: webhook.JobControllers[0]}}})
			attributed := false
			for _, p := range resp.Patches {
				attributed = attributed || p.Path == annotationPath && p.Operation != "remove"
			}
			if attributed != tc.want {
				t.Errorf("pod patches %+v; want its Workload named: %v", resp.Patches, tc.want)
			}
		})
	}
}
