package webhook

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestIndexPodMark: both pod webhooks mark an index pod the Job controller creates with
// its Job's UID and its completion index, replacing a mark its template carried; they
// take the mark off a pod anyone else creates, and leave every other pod alone.
func TestIndexPodMark(t *testing.T) {
	results := wrappers.MakeJob("j", "ml-team").UID("j-uid").Indexed(4).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj()
	coverage := wrappers.MakeJob("c", "ml-team").UID("c-uid").Indexed(4).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()
	created := func(job string) *wrappers.PodWrapper {
		j := results
		if job == "c" {
			j = coverage
		}
		return wrappers.MakeIndexPod(j, job+"-2-x", 2).NotByJobController()
	}
	forged := func(w *wrappers.PodWrapper, mark string) *corev1.Pod {
		p := w.Obj()
		p.Annotations[v1alpha1.AnnotationIndexPod] = mark
		return p
	}
	bare := wrappers.MakePod("bare", "ml-team").Obj()
	bare.Annotations = map[string]string{v1alpha1.AnnotationIndexPod: "j-uid/2"}
	jobController, mallory := JobControllers[0], "mallory"
	for name, tc := range map[string]struct {
		user string
		pod  *corev1.Pod
		want string // the mark after admission; "" none
	}{
		"the Job controller's pod":                             {jobController, created("j").Obj(), "j-uid/2"},
		"kube-controller-manager's pod":                        {JobControllers[1], created("j").Obj(), "j-uid/2"},
		"the Job controller's pod, a mark in its template":     {jobController, forged(created("j"), "other-uid/1"), "j-uid/2"},
		"the Job controller's coverage pod":                    {jobController, created("c").Obj(), "c-uid/2"},
		"a pod someone else made with a Job's owner and index": {mallory, created("j").Obj(), ""},
		"a pod someone else made, claiming the mark":           {mallory, forged(created("j"), "j-uid/2"), ""},
		"a pod no Job controls, claiming the mark":             {mallory, bare, ""},
		"a pod of no index, by the Job controller":             {jobController, wrappers.MakePod("p", "ml-team").Obj(), ""},
		"the Job controller's pod with another Job's name label (manualSelector)": {jobController,
			created("j").Label(batchv1.JobNameLabel, "victim").Obj(), ""},
		"the Job controller's pod with another Job's UID label (manualSelector)": {jobController,
			created("j").Label(batchv1.ControllerUidLabel, "victim-uid").Obj(), ""},
	} {
		for _, h := range []struct {
			name string
			h    admission.Handler
		}{
			{"pod webhook", PodResultHolder{}},
			{"pod assignment webhook", PodAssignmentAnnotator{Reader: indexedReader(t, nil)}},
		} {
			t.Run(name+", "+h.name, func(t *testing.T) {
				after, _ := admitPodAs(t, h.h, tc.pod, tc.user)
				if got := after.Annotations[v1alpha1.AnnotationIndexPod]; got != tc.want {
					t.Errorf("mark %q after admission, want %q", got, tc.want)
				}
			})
		}
	}
}
