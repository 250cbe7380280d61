package workerrole

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// workerPolicy is the ValidatingAdmissionPolicy of config/worker named name.
func workerPolicy(t *testing.T, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	b, err := os.ReadFile("../../../config/worker/worker_policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal([]byte(doc), &vap); err != nil {
			t.Fatal(err)
		}
		if vap.Kind == "ValidatingAdmissionPolicy" && vap.Name == name {
			return &vap
		}
	}
	t.Fatalf("no policy %s in config/worker", name)
	return nil
}

// admits evaluates vap as the API server does for a request of op by user on obj (old:
// the object before an UPDATE): false when a matchCondition matches and a validation
// fails.
func admits(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy, op, user string, obj, old any) bool {
	t.Helper()
	env, err := cel.NewEnv(cel.OptionalTypes(),
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	toMap := func(o any) any {
		if o == nil {
			return nil
		}
		b, _ := json.Marshal(o)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	vars := map[string]any{"object": toMap(obj), "oldObject": toMap(old),
		"request": map[string]any{"operation": op, "userInfo": map[string]any{"username": user}}}
	eval := func(expr string) bool {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return out.Value().(bool)
	}
	for _, mc := range vap.Spec.MatchConditions {
		if !eval(mc.Expression) {
			return true
		}
	}
	for _, v := range vap.Spec.Validations {
		if !eval(v.Expression) {
			return false
		}
	}
	return true
}

// TestWorkerPodPolicyRefusesAWorkloadTheWebhookDidNotWrite: the Job controller copies a
// pod template's annotations and finalizers onto the pods it creates. A Job whose
// template carries batchledger.dev/workload and the result-capture finalizer, but not
// the results scope label, has its pods created by the Job controller past the worker
// role's pod webhook (whose objectSelector is the scope label), so nothing removes the
// annotation; adding the scope label afterwards puts the held, attributed pod in the
// worker role's capture, which records its result for the manager Workload. The policy
// must refuse such a pod at its creation: only a pod the webhook saw (the results scope)
// may carry the annotation.
func TestWorkerPodPolicyRefusesAWorkloadTheWebhookDidNotWrite(t *testing.T) {
	vap := workerPolicy(t, "worker-pod-workload")
	const jobController = "system:serviceaccount:kube-system:job-controller"
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "j-2-abcde", Namespace: "team",
			Annotations:     map[string]string{v1alpha1.AnnotationWorkload: "job-j-d41e5", "batch.kubernetes.io/job-completion-index": "2"},
			Finalizers:      []string{v1alpha1.ResultFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "attacker-job-uid", Controller: ptr.To(true)}},
		},
	}
	if admits(t, vap, "CREATE", jobController, pod, nil) {
		// Admitted: the label then goes on by an editor's update, which the policy allows.
		labelled := pod.DeepCopy()
		labelled.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}
		later := admits(t, vap, "UPDATE", "alice", labelled, pod)
		t.Errorf("a pod the Job controller created with the Workload annotation and the hold from its template, outside the results scope, was admitted; adding the scope label later admitted: %v", later)
	}
	// A pod the webhook saw (the results scope) is admitted as before.
	seen := pod.DeepCopy()
	seen.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}
	if !admits(t, vap, "CREATE", jobController, seen, nil) {
		t.Errorf("a results-scope pod the Job controller created with the webhook's annotation was refused")
	}
	if admits(t, vap, "CREATE", "alice", seen, nil) {
		t.Errorf("a pod a user created with the annotation was admitted")
	}
}

// TestCaptureRecordsAPodAttributedByItsTemplate: the worker role records whatever pod
// the policy let carry the annotation: a pod of a Job that is no MultiKueue copy (no
// marks), attributed only by the annotation its template gave it, gets a WorkerResult
// for the manager Workload, which the manager takes as its dispatched Job's result (it
// does not check the worker Job's UID). Hence the policy above must keep it out.
func TestCaptureRecordsAPodAttributedByItsTemplate(t *testing.T) {
	forged := wrappers.MakeJob("j", "ns").UID("attacker-j-uid").Obj() // no Kueue marks, no scope
	pod := wrappers.MakeIndexPod(forged, "j-2", 2).Finalizers(v1alpha1.ResultFinalizer).
		Annotation(v1alpha1.AnnotationWorkload, "job-j-d41e5").Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		Succeeded(testNow.Add(-time.Minute), `{"version":"batchledger.dev/v1","shard":"C"}`).Obj()
	c, cl := newCapture([]client.Object{forged, pod}, interceptor.Funcs{})
	if _, err := c.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
		t.Fatal(err)
	}
	var recs v1alpha1.WorkerResultList
	if err := cl.List(context.Background(), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs.Items) != 1 || recs.Items[0].Workload != "job-j-d41e5" || recs.Items[0].Job != "j" {
		t.Fatalf("records %+v", recs.Items)
	}
}

// TestWorkerPodPolicyKeepsAHeldPodsImages: the kubelet restarts a container whose image
// an update changed, whatever the restart policy, so a worker user who may update pods
// could run code of their own in a held pod and have its result recorded. A held pod's
// images may not change; a released pod's may (its result is not recorded), and so may
// the pod be released in the same update.
func TestWorkerPodPolicyKeepsAHeldPodsImages(t *testing.T) {
	vap := workerPolicy(t, "worker-pod-workload")
	held := wrappers.MakeIndexPod(wrappers.MakeJob("j", "team").UID("j-uid").Obj(), "j-1", 1).
		Finalizers(v1alpha1.ResultFinalizer).Annotation(v1alpha1.AnnotationWorkload, "job-j-d41e5").
		Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj()
	held.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	held.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "fetch:1"}}
	swapped := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := held.DeepCopy()
		mutate(p)
		return p
	}
	for _, tc := range []struct {
		name string
		old  *corev1.Pod
		new  *corev1.Pod
		want bool
	}{
		{"a held pod's container image changed: refused", held,
			swapped(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "forger:1" }), false},
		{"a held pod's init container image changed: refused", held,
			swapped(func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "forger:1" }), false},
		{"a held pod's labels changed, its images kept: admitted", held,
			swapped(func(p *corev1.Pod) { p.Labels["team"] = "a" }), true},
		{"released in the same update: admitted", held,
			swapped(func(p *corev1.Pod) { p.Finalizers, p.Spec.Containers[0].Image = nil, "forger:1" }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := admits(t, vap, "UPDATE", "alice", tc.new, tc.old); got != tc.want {
				t.Errorf("admitted = %v, want %v", got, tc.want)
			}
		})
	}
}
