package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// builderIndexer registers the controller's field indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// indexedReader is a fake client holding objs with the controller's field indexes.
func indexedReader(t testing.TB, funcs *interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	if err := relations.RegisterIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

func scopeOp(path string, value any) []jsonpatch.JsonPatchOperation {
	return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", path, value)}
}

// metaScope is the scope label ops add to the labels of the metadata at path ("" for
// the admitted object's own), whichever of the three shapes labelPatch uses; "" when
// they add none.
func metaScope(ops []jsonpatch.JsonPatchOperation, path string) string {
	for _, op := range ops {
		switch op.Path {
		case path + "/metadata/labels/batchledger.dev~1scope":
			s, _ := op.Value.(string)
			return s
		case path + "/metadata/labels":
			s, _ := op.Value.(map[string]any)[v1alpha1.LabelScope].(string)
			return s
		case path + "/metadata":
			l, _ := op.Value.(map[string]any)["labels"].(map[string]any)
			s, _ := l[v1alpha1.LabelScope].(string)
			return s
		}
	}
	return ""
}

// TestScopeStamperJobs: a new Job gets the scope its accounts (or short-form annotations)
// give it, the strongest when several do, and nothing when none names it.
func TestScopeStamperJobs(t *testing.T) {
	const ns = "ml-team"
	results := wrappers.MakeBatchAccount("needs-results", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").Obj()
	coverage := wrappers.MakeBatchAccount("counts", ns).Shards("A").AssignJob("c", "0", "A").Obj()
	alsoResults := wrappers.MakeBatchAccount("counts-too", ns).Shards("A").AssignJob("r", "0", "A").Obj()
	child := wrappers.MakeBatchAccount("train", ns).Shards("A").AssignJobSet("ts", "workers", 1, "0", "A").RequireResults("true").Obj()
	h := ScopeStamper{Reader: indexedReader(t, nil, results, coverage, alsoResults, child)}
	labelsPath := "/spec/template/metadata/labels"
	job := func(name string) *batchv1.Job {
		return &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		}
	}
	withTemplateLabels := func(j *batchv1.Job, l map[string]string) *batchv1.Job { j.Spec.Template.Labels = l; return j }
	shortForm := func(j *batchv1.Job, require string) *batchv1.Job {
		j.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m", v1alpha1.AnnotationShards: "A", v1alpha1.AnnotationRequire: require}
		return j
	}
	// malformed is a short form without its model revision: it declares no account.
	malformed := func(j *batchv1.Job) *batchv1.Job {
		j.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationShards: "A", v1alpha1.AnnotationRequire: "true"}
		return j
	}
	// jobSetChild is a child Job as JobSet creates it: labelled, and controlled by it.
	jobSetChild := func(rj, idx string) *batchv1.Job {
		j := job("ts-" + rj + "-" + idx)
		j.Labels = map[string]string{jobsetapi.JobSetNameKey: "ts", jobsetapi.ReplicatedJobNameKey: rj, jobsetapi.JobIndexKey: idx}
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "ts", UID: "ts-uid", Controller: ptr.To(true)}}
		return j
	}
	handMade := func(name string) *batchv1.Job {
		j := jobSetChild("workers", "1")
		j.Name, j.OwnerReferences = name, nil
		return j
	}
	// meta is the scope the Job's own metadata gets (the manager's cache selects Jobs by
	// it): the scope its accounts give it, whatever its template carries.
	// warns: the Job's author is told its short form does not parse, naming what to fix.
	cases := map[string]struct {
		job   *batchv1.Job
		want  []jsonpatch.JsonPatchOperation
		meta  string
		warns string
	}{
		"an account requiring results names it (another only counts it): results": {
			job:  job("r"),
			want: scopeOp(labelsPath, map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
			meta: v1alpha1.ScopeResults,
		},
		"an account counting coverage names it": {
			job:  withTemplateLabels(job("c"), map[string]string{"app": "x"}),
			want: scopeOp(labelsPath+"/batchledger.dev~1scope", v1alpha1.ScopeCoverage),
			meta: v1alpha1.ScopeCoverage,
		},
		"no account names it: untouched": {job: job("other")},
		"template already stamped: only its metadata is labelled": {
			job:  withTemplateLabels(job("r"), map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
			meta: v1alpha1.ScopeResults,
		},
		"template and metadata already stamped: untouched": {job: func() *batchv1.Job {
			j := withTemplateLabels(job("r"), map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults})
			j.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}
			return j
		}()},
		"a weaker stamp is raised": {
			job:  withTemplateLabels(job("r"), map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}),
			want: scopeOp(labelsPath+"/batchledger.dev~1scope", v1alpha1.ScopeResults),
			meta: v1alpha1.ScopeResults,
		},
		"a stronger stamp is never lowered": {
			job:  withTemplateLabels(job("c"), map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
			meta: v1alpha1.ScopeCoverage,
		},
		"short form requiring results": {
			job:  shortForm(job("sf"), "true"),
			want: scopeOp(labelsPath, map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
			meta: v1alpha1.ScopeResults,
		},
		"short form without results": {
			job:  shortForm(job("sf"), ""),
			want: scopeOp(labelsPath, map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}),
			meta: v1alpha1.ScopeCoverage,
		},
		"a short form that does not parse: untouched, its pods would be held for no account": {
			job: malformed(job("sf")), warns: v1alpha1.AnnotationModelRev,
		},
		"a short form that does not parse gives nothing beyond the accounts naming the Job": {
			job:   malformed(job("c")),
			want:  scopeOp(labelsPath, map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}),
			meta:  v1alpha1.ScopeCoverage,
			warns: v1alpha1.AnnotationModelRev,
		},
		"the JobSet child an account names": {
			job:  jobSetChild("workers", "1"),
			want: scopeOp(labelsPath, map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
			meta: v1alpha1.ScopeResults,
		},
		"another job index of that replicatedJob: untouched":  {job: jobSetChild("workers", "0")},
		"a hand-made Job with that child's labels: untouched": {job: handMade("ts-workers-1-retry")},
		"another replicatedJob of that JobSet: untouched":     {job: jobSetChild("leader", "1")},
	}
	t.Run("a template without metadata gets it", func(t *testing.T) {
		raw := []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"r","namespace":"ml-team"},"spec":{"template":{"spec":{}}}}`)
		resp := admit(t, admission.HandlerFunc(h.handleJob), raw)
		want := scopeOp("/spec/template/metadata", map[string]any{"labels": map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults}})
		if diff := cmp.Diff(want, specOps(patchOf(t, resp))); diff != "" {
			t.Errorf("patch (-want +got):\n%s", diff)
		}
	})
	t.Run("metadata after the spec is still read", func(t *testing.T) {
		raw := []byte(`{"spec":{"template":{"spec":{}}},"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"c","namespace":"ml-team"}}`)
		resp := admit(t, admission.HandlerFunc(h.handleJob), raw)
		if got := metaScope(patchOf(t, resp), ""); got != v1alpha1.ScopeCoverage {
			t.Errorf("scope label on the Job's metadata = %q, want %q", got, v1alpha1.ScopeCoverage)
		}
	})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(tc.job)
			if err != nil {
				t.Fatal(err)
			}
			resp := admit(t, admission.HandlerFunc(h.handleJob), raw)
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			ops := patchOf(t, resp)
			if diff := cmp.Diff(tc.want, specOps(ops)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			if got := metaScope(ops, ""); got != tc.meta {
				t.Errorf("scope label on the Job's metadata = %q, want %q", got, tc.meta)
			}
			checkShortFormWarning(t, resp, tc.warns)
		})
	}
}

// checkShortFormWarning fails t unless resp warns that a short form declares no account,
// naming about (the annotation at fault), when about is set, and warns of nothing else
// when it is not.
func checkShortFormWarning(t *testing.T, resp admission.Response, about string) {
	t.Helper()
	if about == "" {
		if len(resp.Warnings) > 0 {
			t.Errorf("warnings %q, want none", resp.Warnings)
		}
		return
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "declare no BatchAccount") || !strings.Contains(resp.Warnings[0], about) {
		t.Errorf("warnings %q, want one that the short form declares no BatchAccount, naming %s", resp.Warnings, about)
	}
}

// TestScopeStamperJobSets: only the replicatedJobs accounts name are stamped.
func TestScopeStamperJobSets(t *testing.T) {
	const ns = "ml-team"
	train := wrappers.MakeBatchAccount("train", ns).Shards("A", "B").
		AssignJobSet("ts", "workers", 0, "0", "A").AssignJobSet("ts", "workers", 1, "0", "B").Obj()
	h := ScopeStamper{Reader: indexedReader(t, nil, train)}
	rj := func(name string, labels map[string]string) jobsetapi.ReplicatedJob {
		r := jobsetapi.ReplicatedJob{Name: name, Replicas: 2}
		r.Template.Spec.Template.Labels = labels
		return r
	}
	js := &jobsetapi.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "ts", Namespace: ns},
		Spec:       jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{rj("leader", nil), rj("workers", map[string]string{"role": "w"})}},
	}
	raw, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	resp := admit(t, admission.HandlerFunc(h.handleJobSet), raw)
	// The JobSet itself, workers' Job template (JobSet copies its labels onto the child
	// Jobs) and its pod template; leader is named by no account.
	want := append(append(scopeOp("/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}),
		scopeOp("/spec/replicatedJobs/1/template/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeCoverage})...),
		scopeOp("/spec/replicatedJobs/1/template/spec/template/metadata/labels/batchledger.dev~1scope", v1alpha1.ScopeCoverage)...)
	if diff := cmp.Diff(want, patchOf(t, resp)); !resp.Allowed || diff != "" {
		t.Errorf("allowed=%v, patch (-want +got):\n%s", resp.Allowed, diff)
	}

	// leader runs 2 replicas of 1 index: a short form over it declares 2 shards.
	for name, tc := range map[string]struct {
		shards string
		want   []jsonpatch.JsonPatchOperation
		warns  string
	}{
		"short form names its replicatedJob": {
			shards: "A,B",
			want: append(append(scopeOp("/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
				scopeOp("/spec/replicatedJobs/0/template/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults})...),
				scopeOp("/spec/replicatedJobs/0/template/spec/template/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults})...),
		},
		"a short form whose shards do not fit the replicatedJob: untouched, with a warning": {
			shards: "A,B,C", warns: v1alpha1.AnnotationShards,
		},
	} {
		t.Run(name, func(t *testing.T) {
			sf := js.DeepCopy()
			sf.Name = "other"
			sf.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m",
				v1alpha1.AnnotationShards: tc.shards, v1alpha1.AnnotationReplicatedJob: "leader", v1alpha1.AnnotationRequire: "true"}
			raw, _ := json.Marshal(sf)
			resp := admit(t, admission.HandlerFunc(h.handleJobSet), raw)
			if diff := cmp.Diff(tc.want, patchOf(t, resp)); !resp.Allowed || diff != "" {
				t.Errorf("allowed=%v, patch (-want +got):\n%s", resp.Allowed, diff)
			}
			checkShortFormWarning(t, resp, tc.warns)
		})
	}
}

// TestScopeStamperKeepsJobSetScopeOnUpdate: an update of a JobSet keeps the scope labels
// the JobSet carried, wherever the new version lost them (as Trainer's server-side apply
// drops the creation webhook's labels), and adds none it did not carry: JobSet refuses a
// changed Job template, and raising a scope is the controller's, while suspended. No
// account is read for an update.
func TestScopeStamperKeepsJobSetScopeOnUpdate(t *testing.T) {
	broken := &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return context.DeadlineExceeded
	}}
	h := ScopeStamper{Reader: indexedReader(t, broken)}
	scoped := func(scope string) map[string]string {
		return map[string]string{v1alpha1.LabelScope: scope, "app": "llm"}
	}
	jobSet := func(meta, job, pod map[string]string, rjs ...string) *jobsetapi.JobSet {
		js := &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "ml-team", Labels: meta}}
		for _, name := range rjs {
			rj := jobsetapi.ReplicatedJob{Name: name, Replicas: 1}
			rj.Template.Labels, rj.Template.Spec.Template.Labels = job, pod
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rj)
		}
		return js
	}
	labelled := jobSet(scoped(v1alpha1.ScopeResults), scoped(v1alpha1.ScopeResults), scoped(v1alpha1.ScopeResults), "init", "node")
	for name, tc := range map[string]struct {
		old, new *jobsetapi.JobSet
		want     []jsonpatch.JsonPatchOperation
	}{
		"the pod templates' scope dropped": {
			old: labelled, new: jobSet(scoped(v1alpha1.ScopeResults), scoped(v1alpha1.ScopeResults), map[string]string{"app": "llm"}, "init", "node"),
			want: append(scopeOp("/spec/replicatedJobs/0/template/spec/template/metadata/labels/batchledger.dev~1scope", v1alpha1.ScopeResults),
				scopeOp("/spec/replicatedJobs/1/template/spec/template/metadata/labels/batchledger.dev~1scope", v1alpha1.ScopeResults)...),
		},
		"every label dropped, of a replicatedJob moved": {
			old: labelled, new: jobSet(nil, nil, nil, "node"),
			want: append(append(scopeOp("/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults}),
				scopeOp("/spec/replicatedJobs/0/template/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults})...),
				scopeOp("/spec/replicatedJobs/0/template/spec/template/metadata/labels", map[string]any{v1alpha1.LabelScope: v1alpha1.ScopeResults})...),
		},
		"kept": {old: labelled, new: labelled},
		"raised by the update: left as it is": {
			old: jobSet(scoped(v1alpha1.ScopeCoverage), scoped(v1alpha1.ScopeCoverage), scoped(v1alpha1.ScopeCoverage), "node"),
			new: jobSet(scoped(v1alpha1.ScopeCoverage), scoped(v1alpha1.ScopeCoverage), scoped(v1alpha1.ScopeResults), "node"),
		},
		"lowered by the update: kept": {
			old:  jobSet(nil, nil, scoped(v1alpha1.ScopeResults), "node"),
			new:  jobSet(nil, nil, scoped(v1alpha1.ScopeCoverage), "node"),
			want: scopeOp("/spec/replicatedJobs/0/template/spec/template/metadata/labels/batchledger.dev~1scope", v1alpha1.ScopeResults),
		},
		"never scoped: nothing added": {old: jobSet(nil, nil, nil, "node"), new: jobSet(nil, nil, nil, "node")},
	} {
		t.Run(name, func(t *testing.T) {
			oldRaw, _ := json.Marshal(tc.old)
			newRaw, _ := json.Marshal(tc.new)
			resp := admission.HandlerFunc(h.handleJobSet).Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Namespace: "ml-team", Name: "llm",
				Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw},
			}})
			if diff := cmp.Diff(tc.want, patchOf(t, resp)); !resp.Allowed || len(resp.Warnings) != 0 || diff != "" {
				t.Errorf("allowed=%v warnings=%v, patch (-want +got):\n%s", resp.Allowed, resp.Warnings, diff)
			}
		})
	}
}

// TestScopeStamperWarnsOfAFinalVerdict: an account Accepted for its spec follows only the
// identities on its record, so a Job or JobSet created under a name it accounts is no
// part of its batch; the author is told at admission, naming the account. An account not
// Accepted, or Accepted for an earlier spec, follows the new run and gives no warning.
func TestScopeStamperWarnsOfAFinalVerdict(t *testing.T) {
	const ns = "ml-team"
	accepted := func(ba *v1alpha1.BatchAccount, judgedGeneration int64) *v1alpha1.BatchAccount {
		ba.Generation = 2
		ba.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonAccepted, ObservedGeneration: judgedGeneration}}
		return ba
	}
	done := accepted(wrappers.MakeBatchAccount("done", ns).Shards("A").AssignJob("j", "0", "A").Obj(), 2)
	reopened := accepted(wrappers.MakeBatchAccount("reopened", ns).Shards("A").AssignJob("k", "0", "A").Obj(), 1)
	open := wrappers.MakeBatchAccount("open", ns).Shards("A").AssignJob("l", "0", "A").Obj()
	doneJS := accepted(wrappers.MakeBatchAccount("done-js", ns).Shards("A").AssignJobSet("ts", "workers", 0, "0", "A").Obj(), 2)
	doneTJ := accepted(wrappers.MakeBatchAccount("done-tj", ns).Shards("A").AssignTrainJob("llm", "workers", 0, "0", "A").Obj(), 2)
	reopenedTJ := accepted(wrappers.MakeBatchAccount("reopened-tj", ns).Shards("A").AssignTrainJob("vlm", "workers", 0, "0", "A").Obj(), 1)
	h := ScopeStamper{Reader: indexedReader(t, nil, done, reopened, open, doneJS, doneTJ, reopenedTJ)}
	job := func(name string) []byte {
		raw, err := json.Marshal(&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	jobSet := func(name string, owners ...metav1.OwnerReference) []byte {
		raw, err := json.Marshal(&jobsetapi.JobSet{TypeMeta: metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners},
			Spec:       jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{{Name: "workers", Replicas: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// renderedBy is the controller reference Trainer puts on the JobSet of TrainJob name.
	renderedBy := func(name string) metav1.OwnerReference {
		tj := wrappers.MakeTrainJob(name, ns, "torch").UID(name + "-uid").Obj()
		return *metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	}
	for name, tc := range map[string]struct {
		handler admission.HandlerFunc
		raw     []byte
		warns   string
		// unstamped: no account names the object, so it is admitted unchanged.
		unstamped bool
	}{
		"a Job an Accepted account names":                     {h.handleJob, job("j"), "BatchAccount done already Accepted its batch; this Job", false},
		"a Job an account Accepted for an earlier spec names": {h.handleJob, job("k"), "", false},
		"a Job an account not Accepted names":                 {h.handleJob, job("l"), "", false},
		"a JobSet an Accepted account names":                  {h.handleJobSet, jobSet("ts"), "BatchAccount done-js already Accepted its batch; this JobSet", false},
		"the JobSet of a TrainJob an Accepted account names": {h.handleJobSet, jobSet("llm", renderedBy("llm")),
			"BatchAccount done-tj already Accepted its batch; this JobSet", false},
		"the JobSet of a TrainJob an account Accepted for an earlier spec names": {h.handleJobSet, jobSet("vlm", renderedBy("vlm")), "", false},
		"a JobSet of a TrainJob's name that no TrainJob renders":                 {h.handleJobSet, jobSet("llm"), "", true},
	} {
		t.Run(name, func(t *testing.T) {
			resp := admit(t, tc.handler, tc.raw)
			if !resp.Allowed || len(resp.Patches) == 0 != tc.unstamped {
				t.Errorf("allowed=%v patches=%v: the run is stamped as any Job its accounts name", resp.Allowed, resp.Patches)
			}
			switch {
			case tc.warns == "" && len(resp.Warnings) > 0:
				t.Errorf("warnings %q, want none", resp.Warnings)
			case tc.warns != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.warns)):
				t.Errorf("warnings %q, want one saying %q", resp.Warnings, tc.warns)
			}
		})
	}
}

// TestScopeStamperFailsOpen: a failed account lookup or an undecodable object admits the
// Job unchanged, with a warning and a metric: never a denial of someone else's Job.
func TestScopeStamperFailsOpen(t *testing.T) {
	broken := &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return context.DeadlineExceeded
	}}
	h := ScopeStamper{Reader: indexedReader(t, broken)}
	job, _ := json.Marshal(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ml-team"},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{}}})
	for name, raw := range map[string][]byte{"lookup fails": job, "undecodable": []byte(`{"spec":`)} {
		t.Run(name, func(t *testing.T) {
			resp := admit(t, admission.HandlerFunc(h.handleJob), raw)
			if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 {
				t.Errorf("allowed=%v patches=%v warnings=%v", resp.Allowed, resp.Patches, resp.Warnings)
			}
		})
	}
}

// BenchmarkScopeStamperJob is the scope webhook's cost per Job, which it pays for every
// Job the cluster creates: most are named by no account.
func BenchmarkScopeStamperJob(b *testing.B) {
	const ns = "ml-team"
	h := ScopeStamper{Reader: indexedReader(b, nil, wrappers.MakeBatchAccount("counts", ns).Shards("A").AssignJob("named", "0", "A").Obj())}
	for _, bc := range []struct{ name, job string }{{"named by no account", "other"}, {"named by an account", "named"}} {
		job := wrappers.MakeJob(bc.job, ns).Indexed(2).Parallelism(2).Queue("team").GPU(1).Obj()
		job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
		raw, err := json.Marshal(job)
		if err != nil {
			b.Fatal(err)
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Object: runtime.RawExtension{Raw: raw}}}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if resp := h.handleJob(context.Background(), req); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			}
		})
	}
}
