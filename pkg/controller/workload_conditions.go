package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// workloadConditions maps the account's verdicts onto the two condition types published
// on a Workload. Kueue caps Workload conditions at 16 and uses up to 9, so two it is.
var workloadConditions = map[string]string{
	v1alpha1.ConditionShardsCovered: v1alpha1.WorkloadConditionShardsCovered,
	v1alpha1.ConditionAccepted:      v1alpha1.WorkloadConditionAccepted,
}

// publishedTypes are the condition types batchledger writes on Workloads.
var publishedTypes = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, typ := range workloadConditions {
		m[typ] = struct{}{}
	}
	return m
}()

// desiredWorkloadConditions are the conditions the Workload should carry for the
// account, with transition times kept from the Workload when the status is unchanged and
// observedGeneration following the Workload's generation.
func desiredWorkloadConditions(wl *kueue.Workload, ba *v1alpha1.BatchAccount) []metav1.Condition {
	var out []metav1.Condition
	for _, from := range []string{v1alpha1.ConditionShardsCovered, v1alpha1.ConditionAccepted} {
		c := apimeta.FindStatusCondition(ba.Status.Conditions, from)
		if c == nil {
			continue
		}
		want := metav1.Condition{
			Type: workloadConditions[from], Status: c.Status, Reason: c.Reason,
			Message:            fmt.Sprintf("BatchAccount %s: %s", ba.Name, c.Message),
			ObservedGeneration: wl.Generation, LastTransitionTime: c.LastTransitionTime,
		}
		if have := apimeta.FindStatusCondition(wl.Status.Conditions, want.Type); have != nil && have.Status == want.Status {
			want.LastTransitionTime = have.LastTransitionTime
		}
		out = append(out, want)
	}
	return out
}

// publish applies the account's verdict conditions to a Workload under batchledger's own
// field manager, so Kueue's conditions are never touched. It writes only when something
// differs, and pins the Workload UID so that a Workload Kueue deleted and recreated under
// the same name is never written through a stale read.
func (r *Reconciler) publish(ctx context.Context, wl *kueue.Workload, ba *v1alpha1.BatchAccount) error {
	want := desiredWorkloadConditions(wl, ba)
	if len(want) == 0 || upToDate(wl.Status.Conditions, want) {
		return nil
	}
	st := kueueac.WorkloadStatus()
	for _, c := range want {
		st.WithConditions(metav1ac.Condition().
			WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
			WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	ac := kueueac.Workload(wl.Name, wl.Namespace).WithUID(wl.UID).WithStatus(st)
	err := r.Status().Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// The Workload went away or was replaced; its successor wakes us again.
		return nil
	case err != nil:
		return fmt.Errorf("publishing conditions on Workload %s: %w", wl.Name, err)
	}
	r.Metrics.workloadWritten()
	return nil
}

func upToDate(have, want []metav1.Condition) bool {
	for _, w := range want {
		h := apimeta.FindStatusCondition(have, w.Type)
		if h == nil || h.Status != w.Status || h.Reason != w.Reason || h.Message != w.Message || h.ObservedGeneration != w.ObservedGeneration {
			return false
		}
	}
	return true
}
