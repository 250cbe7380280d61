package controller

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/relations"
)

// DefaultShortFormSweepInterval is how often ShortFormSweep looks for short-form Jobs
// the scope webhook did not label.
const DefaultShortFormSweepInterval = 10 * time.Minute

// shortFormSweepPage bounds one page of the sweep's LIST of Jobs' metadata.
const shortFormSweepPage = 500

// ShortFormSweep labels the short-form Jobs that carry no scope label, so that the
// manager's cache, which holds only labelled Jobs (CacheOptions), holds them and the
// ShortFormReconciler creates their accounts. The scope webhook labels a short-form Job at
// its creation, but it fails open: a Job created while no replica answered (a
// single-replica manager restarting or being upgraded, a timeout) and a Job whose short
// form did not parse then and was fixed since are otherwise never seen. Other kinds of
// target need no sweep: their caches are not selected by the label.
//
// It runs on the leader, once at start (what was created while the manager was down)
// and then every Interval. A sweep is one metadata-only LIST of the cluster's Jobs, in
// pages, and one read of each unlabelled short-form Job.
type ShortFormSweep struct {
	// API reads from the API server: the Jobs are not in the manager's cache.
	API client.Reader
	// Writer labels them.
	Writer client.Writer
	// Interval is the time between sweeps; 0 sweeps only at start.
	Interval time.Duration
	// Metrics counts the labelled Jobs (MetricScopeLabels, kind Job).
	Metrics *Metrics
	// Recorder emits InvalidShortForm on a Job whose short form does not parse; nil:
	// none.
	Recorder events.EventRecorder
	// Now is the clock; tests may replace it.
	Now func() time.Time

	// swept is when the last sweep that ended without error began; zero before it.
	swept time.Time
}

// sweepSlack is how much older than the previous sweep a Job whose short form does not
// parse may be and still be told so: a Job created while that sweep listed may have been
// missed by it.
const sweepSlack = time.Minute

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;patch

// SetupWithManager adds the sweep to the manager, to run on the leader.
func (s *ShortFormSweep) SetupWithManager(mgr ctrl.Manager) error { return mgr.Add(s) }

// NeedLeaderElection: only the leader labels Jobs.
func (s *ShortFormSweep) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every Interval until ctx ends. A failed sweep is logged
// and tried again at the next.
func (s *ShortFormSweep) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("short-form-sweep")
	for {
		if labelled, err := s.Sweep(ctx); err != nil {
			log.Error(err, "sweeping for unlabelled short-form Jobs", "labelled", labelled)
		} else if labelled > 0 {
			log.Info("labelled short-form Jobs the scope webhook had not", "labelled", labelled)
		}
		if s.Interval <= 0 {
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Interval):
		}
	}
}

// Sweep labels every short-form Job of the cluster that parses and carries no scope
// label with the scope its short form declares, and returns how many it labelled. A
// Job whose short form does not parse is left for a later sweep (its author was warned
// at its creation); one that changed since it was read is left for the account
// reconcile or the next sweep.
func (s *ShortFormSweep) Sweep(ctx context.Context) (int, error) {
	began := s.now()
	labelled := 0
	opts := []client.ListOption{client.Limit(shortFormSweepPage)}
	for {
		var page metav1.PartialObjectMetadataList
		page.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
		if err := s.API.List(ctx, &page, opts...); err != nil {
			return labelled, err
		}
		for i := range page.Items {
			m := &page.Items[i]
			if !unlabelledShortForm(m) {
				continue
			}
			ok, err := s.label(ctx, client.ObjectKeyFromObject(m))
			if err != nil {
				return labelled, err
			}
			if ok {
				labelled++
			}
		}
		if page.Continue == "" {
			s.swept = began
			return labelled, nil
		}
		opts = []client.ListOption{client.Limit(shortFormSweepPage), client.Continue(page.Continue)}
	}
}

// unlabelledShortForm reports whether a Job's metadata declare a short form the scope
// webhook did not label it for, on a Job not being deleted.
func unlabelledShortForm(m metav1.Object) bool {
	return relations.HasShortForm(m.GetAnnotations()) && m.GetLabels()[v1alpha1.LabelScope] == "" && m.GetDeletionTimestamp() == nil
}

// tellInvalid emits InvalidShortForm on a running Job whose short form does not parse,
// once: at the manager's first sweep, or at the first after the Job was created (a Job
// created within sweepSlack before a sweep began is told by the next one too). The scope
// webhook's admission warning reaches only a person who ran kubectl, not a Job a
// controller (a CronJob) created nor one created while the webhook failed open, and the
// ShortFormReconciler never sees an unlabelled Job.
func (s *ShortFormSweep) tellInvalid(job *batchv1.Job, invalid error) {
	if s.Recorder == nil || invalid == nil {
		return
	}
	if _, ended := (jobkind.Kind{}).FinishedAt(job); ended {
		return
	}
	if !s.swept.IsZero() && job.CreationTimestamp.Time.Before(s.swept.Add(-sweepSlack)) {
		return // told at an earlier sweep
	}
	s.Recorder.Eventf(job, nil, corev1.EventTypeWarning, v1alpha1.EventReasonInvalidShortForm, EventActionCreateAccount, "%s",
		clip(invalidShortFormNote(invalid, "at the manager's next look for short-form Jobs"), maxEventNote))
}

func (s *ShortFormSweep) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// label reads the Job whole (its short form may depend on its spec) and, when it still
// wants a label and its short form parses, labels its metadata with the short form's
// scope, on the condition that it did not change since the read.
func (s *ShortFormSweep) label(ctx context.Context, key client.ObjectKey) (bool, error) {
	var job batchv1.Job
	if err := s.API.Get(ctx, key, &job); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !unlabelledShortForm(&job) {
		return false, nil
	}
	scope, invalid := relations.ShortFormScope(&job)
	if invalid != nil || scope == "" {
		ctrl.LoggerFrom(ctx).V(1).Info("short-form Job left unlabelled: its short form does not parse", "job", key, "reason", invalid)
		s.tellInvalid(&job, invalid)
		return false, nil
	}
	base := job.DeepCopy()
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[v1alpha1.LabelScope] = scope
	switch err := s.Writer.Patch(ctx, &job, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); {
	case err == nil:
		s.Metrics.scopeLabelled(cachedJob)
		return true, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}
