package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// Paths of the opt-in scope webhooks on Jobs and JobSets. They stamp
// v1alpha1.LabelScope onto the pod template of a Job or JobSet that an account names (or
// that carries a short form that parses), so that the pod webhook and the controller's
// pod cache see only pods whose batch opted in, and onto the object's own metadata (and
// a JobSet's Job templates, which JobSet copies onto its child Jobs), so that the
// controller's caches hold only the Jobs accounts follow and Kueue copies the label onto
// their Workloads (labelKeysToCopy). They fail open (failurePolicy Ignore): a Job
// created while batchledger is down is created unlabelled, and the controller finds it
// by a read from the API server, labels its metadata, and stamps its template while it
// is still suspended and never started.
const (
	JobMutatePath    = "/mutate-batch-v1-job"
	JobSetMutatePath = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
)

// +kubebuilder:webhook:path=/mutate-batch-v1-job,mutating=true,failurePolicy=ignore,sideEffects=None,groups=batch,resources=jobs,verbs=create,versions=v1,name=mjob.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/mutate-jobset-x-k8s-io-v1alpha2-jobset,mutating=true,failurePolicy=ignore,sideEffects=None,groups=jobset.x-k8s.io,resources=jobsets,verbs=create;update,versions=v1alpha2,name=mjobset.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ScopeStamper stamps the opt-in scope label onto the pod templates of new Jobs and
// JobSets whose pods batchledger accounts for: a Job (or JobSet child) an account names,
// or a Job or JobSet whose short form parses (relations.ShortFormScope; one that does not
// gets no account, so no scope either). The label's value tells whether an account
// requires results (ScopeResults: the pods are held until their result is recorded) or
// only counts them (ScopeCoverage). On an update of a JobSet it only keeps the labels
// the old version carried (keepJobSetScope).
type ScopeStamper struct {
	// Reader reads BatchAccounts, indexed by relations.IndexAccountTarget.
	Reader client.Reader
	// Undelivered, when set, adds the accounts the API server stores and Reader has not
	// delivered yet, whenever Reader does not already give an object the strongest scope.
	Undelivered *UndeliveredAccounts
}

// SetupWithManager registers the Job and JobSet handlers on the manager's webhook server.
func (s ScopeStamper) SetupWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(JobMutatePath, &admission.Webhook{Handler: admission.HandlerFunc(s.handleJob)})
	mgr.GetWebhookServer().Register(JobSetMutatePath, &admission.Webhook{Handler: admission.HandlerFunc(s.handleJobSet)})
	return nil
}

// templateMeta is the part of a pod template the stamper reads; Metadata is nil when the
// template has no metadata at all.
type templateMeta struct {
	Metadata *struct {
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata,omitempty"`
}

// labelPatch raises the scope label of the object or template at path (a JSON pointer;
// "" for the admitted object itself) to scope, or returns nothing when it already
// carries that scope or a stronger one.
func labelPatch(path string, t templateMeta, scope string) []jsonpatch.JsonPatchOperation {
	var have string
	if t.Metadata != nil {
		have = t.Metadata.Labels[v1alpha1.LabelScope]
	}
	if scope == "" || relations.StrongerScope(have, scope) == have {
		return nil
	}
	switch {
	case t.Metadata == nil:
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", path+"/metadata",
			map[string]any{"labels": map[string]string{v1alpha1.LabelScope: scope}})}
	case t.Metadata.Labels == nil:
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", path+"/metadata/labels",
			map[string]string{v1alpha1.LabelScope: scope})}
	default:
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add",
			LabelPath(path, v1alpha1.LabelScope), scope)}
	}
}

// handleJob stamps a new Job. The webhook fails open: a Job it cannot classify is
// admitted unchanged, and the controller stamps it later while it is suspended.
func (s ScopeStamper) handleJob(ctx context.Context, req admission.Request) admission.Response {
	// Most Jobs of a cluster are named by no account and declare no short form, which
	// their metadata alone tells: the rest of such a Job, most of its bytes, is never
	// decoded.
	meta, err := ObjectMeta(req.Object.Raw)
	if err != nil {
		return unclassified(JobMutatePath, fmt.Errorf("decoding the Job's metadata: %w", err))
	}
	meta.Name, meta.Namespace = cmp.Or(meta.Name, req.Name), cmp.Or(meta.Namespace, req.Namespace)
	var accounts []*v1alpha1.BatchAccount
	if meta.Name != "" {
		if accounts, err = s.jobAccounts(ctx, &meta); err != nil {
			return unclassified(JobMutatePath, err)
		}
	}
	named := relations.AccountsScope(accounts)
	if named == "" && !relations.HasShortForm(meta.Annotations) {
		return admission.Allowed("")
	}
	judged := finalVerdictWarning("Job", accounts)
	// The Job is decoded twice more: whole, for the short form, and the template's
	// metadata alone, to tell a template without metadata (the patch must add it) from
	// one with.
	var job batchv1.Job
	var tmpl struct {
		templateMeta
		Spec struct {
			Template templateMeta `json:"template"`
		} `json:"spec"`
	}
	if err := decode(req.Object.Raw, &job, &tmpl); err != nil {
		return unclassified(JobMutatePath, fmt.Errorf("decoding the Job: %w", err))
	}
	job.Name, job.Namespace = meta.Name, meta.Namespace
	declared, invalid := relations.ShortFormScope(&job)
	scope := relations.StrongerScope(declared, named)
	ops := append(labelPatch("", tmpl.templateMeta, scope), labelPatch("/spec/template", tmpl.Spec.Template, scope)...)
	if scope != "" {
		ops = append(ops, recordFinalizerPatch(job.Finalizers)...)
	}
	return withWarning(withShortFormWarning(patched(ops), "Job", invalid), judged)
}

// handleJobSet stamps the replicatedJobs of a new JobSet that accounts (or its short-form
// annotations, or those of the TrainJob that renders it) name: their pod templates and
// Job templates, whose labels JobSet copies onto the child Jobs and their pods, also
// when a restart recreates them; and the JobSet's own metadata with the strongest of
// them, which Kueue copies onto the JobSet's Workload (labelKeysToCopy). On an update it
// only keeps the labels the JobSet carried (keepJobSetScope).
func (s ScopeStamper) handleJobSet(ctx context.Context, req admission.Request) admission.Response {
	var js jobsetapi.JobSet
	var tmpl struct {
		templateMeta
		Spec struct {
			ReplicatedJobs []struct {
				Template struct {
					templateMeta
					Spec struct {
						Template templateMeta `json:"template"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"replicatedJobs"`
		} `json:"spec"`
	}
	if err := decode(req.Object.Raw, &js, &tmpl); err != nil {
		return unclassified(JobSetMutatePath, fmt.Errorf("decoding the JobSet: %w", err))
	}
	if req.Operation == admissionv1.Update {
		return keepJobSetScope(req.OldObject.Raw, &js, tmpl.templateMeta, func(i int) (templateMeta, templateMeta) {
			t := tmpl.Spec.ReplicatedJobs[i].Template
			return t.templateMeta, t.Spec.Template
		})
	}
	js.Name, js.Namespace = cmp.Or(js.Name, req.Name), cmp.Or(js.Namespace, req.Namespace)
	scopes, err := replicatedJobScopes(ctx, s.Reader, &js)
	if err == nil && s.Undelivered != nil && js.Name != "" && slices.ContainsFunc(scopes, weaker) {
		var r client.Reader
		if r, err = s.Undelivered.Over(ctx, s.Reader, js.Namespace); err == nil && r != nil {
			scopes, err = replicatedJobScopes(ctx, r, &js)
		}
	}
	if err != nil {
		return unclassified(JobSetMutatePath, err)
	}
	var ops []jsonpatch.JsonPatchOperation
	var strongest string
	for i, scope := range scopes {
		t := tmpl.Spec.ReplicatedJobs[i].Template
		ops = append(ops, labelPatch(fmt.Sprintf("/spec/replicatedJobs/%d/template", i), t.templateMeta, scope)...)
		ops = append(ops, labelPatch(fmt.Sprintf("/spec/replicatedJobs/%d/template/spec/template", i), t.Spec.Template, scope)...)
		strongest = relations.StrongerScope(strongest, scope)
	}
	// The replicatedJobs' scopes drop a short form that does not parse; its author is told.
	_, invalid := relations.ShortFormScope(&js)
	var judged string
	if strongest != "" && js.Name != "" {
		// Accounts naming the JobSet, or the object that rendered it (a TrainJob): a new
		// JobSet of an object they judged is a run they do not follow either.
		accounts, err := relations.LiveAccountsNaming(ctx, s.Reader, js.Namespace, relations.JobSetOwnerKeys(&js)...)
		if err != nil {
			return unclassified(JobSetMutatePath, err)
		}
		judged = finalVerdictWarning("JobSet", accounts)
	}
	return withWarning(withShortFormWarning(patched(append(labelPatch("", tmpl.templateMeta, strongest), ops...)), "JobSet", invalid), judged)
}

// keepJobSetScope keeps, on an update of a JobSet, the scope labels its old version
// (oldRaw) carried: on its metadata, and on each replicatedJob's Job template and pod
// template, by replicatedJob name. The creation webhook's labels belong to no field
// manager, and a controller that renders the JobSet by server-side apply (Trainer, at
// every suspension and resumption of a TrainJob) removes them with the fields it stops
// applying (measured: Trainer's apply after Kueue took its runtime patch back dropped
// the pod template's scope). The Job webhook stamps each child as JobSet creates it, so
// the JobSet's templates are what a child made while that webhook fails open runs with.
// Only what was there is kept, never raised: JobSet refuses any change of a Job
// template. tmpls gives the new object's templates of replicatedJob i.
func keepJobSetScope(oldRaw []byte, js *jobsetapi.JobSet, meta templateMeta, tmpls func(i int) (job, pod templateMeta)) admission.Response {
	var old jobsetapi.JobSet
	if err := json.Unmarshal(oldRaw, &old); err != nil {
		return unclassified(JobSetMutatePath, fmt.Errorf("decoding the old JobSet: %w", err))
	}
	ops := labelPatch("", meta, old.Labels[v1alpha1.LabelScope])
	for i, rj := range js.Spec.ReplicatedJobs {
		j := slices.IndexFunc(old.Spec.ReplicatedJobs, func(o jobsetapi.ReplicatedJob) bool { return o.Name == rj.Name })
		if j < 0 {
			continue
		}
		was := old.Spec.ReplicatedJobs[j].Template
		job, pod := tmpls(i)
		ops = append(ops, labelPatch(fmt.Sprintf("/spec/replicatedJobs/%d/template", i), job, was.Labels[v1alpha1.LabelScope])...)
		ops = append(ops, labelPatch(fmt.Sprintf("/spec/replicatedJobs/%d/template/spec/template", i), pod, was.Spec.Template.Labels[v1alpha1.LabelScope])...)
	}
	return patched(ops)
}

// finalVerdictWarning tells the author of a new Job or JobSet that accounts name which of
// them already reached their final verdict (account.Final: Accepted for their spec): they
// follow only the identities on their record, so this run under a name they account is
// no part of the batch they judged, and without a word it would look accounted. "" when
// none has.
func finalVerdictWarning(kind string, accounts []*v1alpha1.BatchAccount) string {
	var names []string
	for _, ba := range accounts {
		if account.Final(&ba.Status, &ba.Spec, ba.Generation) {
			names = append(names, ba.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return fmt.Sprintf("batchledger: BatchAccount %s already Accepted its batch; this %s, run under a name it accounts, is not part of that batch and is not followed. "+
		"To account this run, change the account's spec or create another account", strings.Join(names, ", "), kind)
}

// withWarning adds warning to resp, unless it is empty.
func withWarning(resp admission.Response, warning string) admission.Response {
	if warning == "" {
		return resp
	}
	return resp.WithWarnings(warning)
}

// withShortFormWarning adds to resp, when the short form of the admitted kind does not
// parse (invalid), a warning that tells its author at once (kubectl prints it) what an
// event on the object would tell later: no account is created, so nothing of the batch is
// accounted, until the annotations are fixed.
func withShortFormWarning(resp admission.Response, kind string, invalid error) admission.Response {
	if invalid == nil {
		return resp
	}
	return resp.WithWarnings(fmt.Sprintf("batchledger: this %s's short-form annotations declare no BatchAccount, so its batch is not accounted: %v", kind, invalid))
}

// jobAccounts are the live accounts naming the Job, as s.Reader tells, or, when the scope
// they give is not the strongest and s.Undelivered is set, with the accounts s.Reader has
// not delivered yet.
func (s ScopeStamper) jobAccounts(ctx context.Context, job metav1.Object) ([]*v1alpha1.BatchAccount, error) {
	accounts, err := relations.AccountsNamingJob(ctx, s.Reader, job)
	if err != nil || !weaker(relations.AccountsScope(accounts)) || s.Undelivered == nil {
		return accounts, err
	}
	r, err := s.Undelivered.Over(ctx, s.Reader, job.GetNamespace())
	if err != nil || r == nil {
		return accounts, err
	}
	return relations.AccountsNamingJob(ctx, r, job)
}

// replicatedJobScopes are the scopes of the replicatedJobs of js, in order: the stronger
// of what their short form and the accounts of r naming them give.
func replicatedJobScopes(ctx context.Context, r client.Reader, js *jobsetapi.JobSet) ([]string, error) {
	scopes := make([]string, len(js.Spec.ReplicatedJobs))
	for i, rj := range js.Spec.ReplicatedJobs {
		scope, err := relations.ReplicatedJobShortFormScope(ctx, r, js, rj.Name)
		if err != nil {
			return nil, err
		}
		if js.Name != "" {
			named, err := relations.ReplicatedJobScope(ctx, r, js, rj.Name)
			if err != nil {
				return nil, err
			}
			scope = relations.StrongerScope(scope, named)
		}
		scopes[i] = scope
	}
	return scopes, nil
}

// weaker reports whether a scope is weaker than the strongest, ScopeResults: another
// account may still raise it.
func weaker(scope string) bool { return scope != v1alpha1.ScopeResults }

// decode unmarshals raw into each of into.
func decode(raw []byte, into ...any) error {
	for _, v := range into {
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
	}
	return nil
}

func patched(ops []jsonpatch.JsonPatchOperation) admission.Response {
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", ops...)
}
