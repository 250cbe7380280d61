package installcheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/webhook"
)

// TestIndexPodPolicyOnLocalCluster applies the index-pod ValidatingAdmissionPolicy of
// config/default on a local control plane (the chart renders the same spec,
// checkPolicy), and writes pods as the users who write them in a cluster: Kubernetes'
// Job controller, the garbage collector, a kubelet's status update, and a namespace
// editor (impersonated; the admin's RBAC, the policy binds every user alike). Only the
// Job controller creates a marked pod, naming its own Job and index; nobody adds or
// changes a mark; only the Job controller (adopting, releasing) and the garbage collector
// (orphaning) change a marked pod's ownerReferences, completion index or Job and JobSet
// labels; everything else about a marked pod, and every unmarked pod, is left alone.
//
// It needs the cluster binaries (make binaries) and is skipped with -short or without them.
func TestIndexPodPolicyOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	root, tools := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	objs := mustKustomize(t, tools, root+"/config/default")
	c, cl, admin := startBareCluster(ctx, t)
	const ns = "ml-team"
	createPodNamespace(ctx, t, cl, ns)
	for _, k := range objs.Keys() {
		if strings.HasPrefix(k.Kind, "ValidatingAdmissionPolicy") && strings.HasSuffix(k.Name, indexPodPolicy) {
			if err := cl.Create(ctx, objs[k].DeepCopy()); err != nil {
				t.Fatalf("create %s: %v", k, err)
			}
		}
	}
	policy := policyName(objs, indexPodPolicy)
	as := func(user string) kubernetes.Interface {
		cfg := rest.CopyConfig(c.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	const (
		otherUID = "22222222-2222-2222-2222-222222222222"
		gc       = "system:serviceaccount:kube-system:generic-garbage-collector"
		editor   = "erin"
	)
	// The pods' owner exists, so that the garbage collector, which runs, does not delete
	// them between their creation and the patch a case tries; another controller manages
	// it, so that the Job controller ignores it and its pods.
	ownerJob, err := admin.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Spec: batchv1.JobSpec{
		ManagedBy: ptr.To("batchledger.dev/installcheck"), Suspend: ptr.To(true),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "worker", Image: "registry.example/worker:1"}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobUID := string(ownerJob.UID)
	jobController := webhook.JobControllers[0]
	// Every writer may create and patch pods: only the policy tells them apart.
	writers := []string{editor, gc, "system:node:n1"}
	writers = append(writers, webhook.JobControllers...)
	podWriter := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-writer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "create", "patch", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-writers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: podWriter.Name}}
	for _, u := range writers {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	for _, o := range []client.Object{podWriter, binding} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	seq := 0
	// meta is the metadata of pod index 1 of Job j (of uid) as the Job controller creates
	// it, marked with mark ("" none), owned by Job j of uid ("" no owner).
	meta := func(uid, mark string) metav1.ObjectMeta {
		seq++
		m := metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("j-1-%d", seq),
			Labels: map[string]string{"batch.kubernetes.io/job-name": "j", "batch.kubernetes.io/controller-uid": uid,
				"jobset.sigs.k8s.io/jobset-name": "js", "team": "ml"},
			Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "1"}}
		if mark != "" {
			m.Annotations[v1alpha1.AnnotationIndexPod] = mark
		}
		if uid != "" {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: types.UID(uid), Controller: ptr.To(true)}}
		}
		return m
	}
	create := func(user string, m metav1.ObjectMeta) (*corev1.Pod, error) {
		return as(user).CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: m, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"batchledger.dev/no-such-node": "true"}, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "worker", Image: "registry.example/worker:1"}},
		}}, metav1.CreateOptions{})
	}
	denied := func(err error) bool { return err != nil && strings.Contains(err.Error(), policy) }

	// The API server loads a new policy asynchronously: wait until it refuses the editor's
	// marked pod.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := create(editor, meta(jobUID, jobUID+"/1"))
		return denied(err), nil
	}); err != nil {
		t.Fatalf("the policy %s never refused the editor's marked pod: %v", policy, err)
	}
	waitTypeChecked(ctx, t, admin, policy)

	for _, tc := range []struct {
		name, user string
		meta       metav1.ObjectMeta
		wantDenied bool
	}{
		{"the Job controller's pod, marked with its Job and index", jobController, meta(jobUID, jobUID+"/1"), false},
		{"kube-controller-manager's pod (no per-controller credentials)", webhook.JobControllers[1], meta(jobUID, jobUID+"/1"), false},
		{"the Job controller's pod, marked for another Job (its template's mark)", jobController, meta(jobUID, otherUID+"/1"), true},
		{"the Job controller's pod, marked for another index", jobController, meta(jobUID, jobUID+"/0"), true},
		{"the Job controller's pod, marked, with another Job's name label (manualSelector)", jobController, func() metav1.ObjectMeta {
			m := meta(jobUID, jobUID+"/1")
			m.Labels["batch.kubernetes.io/job-name"] = "victim"
			return m
		}(), true},
		{"an editor's marked pod", editor, meta(jobUID, jobUID+"/1"), true},
		{"an editor's pod with the Job's owner and index, unmarked", editor, meta(jobUID, ""), false},
		{"a pod created as the Job controller before it is handed to its Job", jobController, meta("", jobUID+"/1"), false},
		// kube-controller-manager without per-controller credentials creates every
		// controller's pods as itself: a ReplicaSet's pod made from a template carrying a
		// Job's mark would, orphaned, be filed under that Job.
		{"a marked pod of a ReplicaSet, created as kube-controller-manager", webhook.JobControllers[1], func() metav1.ObjectMeta {
			m := meta("", jobUID+"/1")
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: types.UID(otherUID), Controller: ptr.To(true)}}
			return m
		}(), true},
	} {
		t.Run("create: "+tc.name, func(t *testing.T) {
			_, err := create(tc.user, tc.meta)
			if denied(err) != tc.wantDenied || (err != nil && !denied(err)) {
				t.Errorf("create as %s: %v; want denied by %s: %v", tc.user, err, policy, tc.wantDenied)
			}
		})
	}

	mark := func(uid string) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationIndexPod, uid+"/1")
	}
	owner := func(name, uid string) string {
		return fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":%q,"uid":%q,"controller":true}]}}`, name, uid)
	}
	label := func(k, v string) string { return fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, k, v) }
	for _, tc := range []struct {
		name, user string
		unmarked   bool // the pod is created unmarked
		unowned    bool // the pod is created as the Job controller, without an owner
		patch      string
		status     bool // through pods/status
		wantDenied bool
	}{
		{"a kubelet's status update", "system:node:n1", false, false, `{"status":{"phase":"Running"}}`, true /* status */, false},
		{"an editor labels a marked pod", editor, false, false, label("team", "infer"), false, false},
		{"an editor annotates a marked pod", editor, false, false, `{"metadata":{"annotations":{"note":"x"}}}`, false, false},
		{"an editor names another result container", editor, false, false, `{"metadata":{"annotations":{"batchledger.dev/result-container":"setup"}}}`, false, true},
		{"an editor names another default container", editor, false, false, `{"metadata":{"annotations":{"kubectl.kubernetes.io/default-container":"setup"}}}`, false, true},
		{"an editor removes the mark", editor, false, false, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.AnnotationIndexPod), false, false},
		{"an editor marks an unmarked pod", editor, true, false, mark(jobUID), false, true},
		{"an editor changes the mark", editor, false, false, mark(otherUID), false, true},
		{"an editor renames the pod's owner", editor, false, false, owner("victim", jobUID), false, true},
		{"an editor gives the pod another owner", editor, false, false, owner("j", otherUID), false, true},
		{"an editor moves the pod to another index", editor, false, false, `{"metadata":{"annotations":{"batch.kubernetes.io/job-completion-index":"0"}}}`, false, true},
		{"an editor relabels the pod's JobSet", editor, false, false, label("jobset.sigs.k8s.io/jobset-name", "victim"), false, true},
		{"an editor relabels the pod's Job", editor, false, false, label("batch.kubernetes.io/job-name", "victim"), false, true},
		{"an editor adds a JobSet label", editor, false, false, label("jobset.sigs.k8s.io/job-index", "3"), false, true},
		{"the garbage collector orphans the pod", gc, false, false, `{"metadata":{"ownerReferences":null}}`, false, false},
		{"the Job controller adopts the pod for a recreated Job", jobController, false, false, owner("j", otherUID), false, false},
		{"the Job controller hands its new pod to its Job", jobController, false, true, owner("j", jobUID), false, false},
		{"an editor hands such a pod to a Job", editor, false, true, owner("j", jobUID), false, true},
	} {
		t.Run("update: "+tc.name, func(t *testing.T) {
			m := meta(jobUID, jobUID+"/1")
			switch {
			case tc.unmarked:
				m = meta(jobUID, "")
			case tc.unowned:
				m = meta("", jobUID+"/1")
			}
			p, err := create(jobController, m)
			if err != nil {
				t.Fatal(err)
			}
			pods := as(tc.user).CoreV1().Pods(ns)
			if tc.status {
				_, err = pods.Patch(ctx, p.Name, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{}, "status")
			} else {
				_, err = pods.Patch(ctx, p.Name, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
			}
			if denied(err) != tc.wantDenied || (err != nil && !denied(err)) {
				t.Errorf("patch as %s: %v; want denied by %s: %v", tc.user, err, policy, tc.wantDenied)
			}
		})
	}
}
