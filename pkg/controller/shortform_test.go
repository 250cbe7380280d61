package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestShortFormReconcile: a short form that parses gets its account; every way it can
// fail to get the account it declares (annotations that do not parse, an account the API
// server refuses, an account of that name with another spec) is a Warning on the Job or
// JobSet that says what to fix, and no retry, while a transient failure is retried.
func TestShortFormReconcile(t *testing.T) {
	const (
		inputRev = v1alpha1.AnnotationInputRev
		modelRev = v1alpha1.AnnotationModelRev
		shards   = v1alpha1.AnnotationShards
		count    = v1alpha1.AnnotationShardCount
		rjAnn    = v1alpha1.AnnotationReplicatedJob
		require  = v1alpha1.AnnotationRequire
	)
	// job is Indexed Job j of 2 completions with the annotations kv (key, value, ...).
	job := func(kv ...string) *batchv1.Job {
		w := wrappers.MakeJob("j", "ns").Indexed(2)
		return w.AnnotationPairs(kv...).Obj()
	}
	// jobSet is JobSet train, replicatedJob workers of 2 child Jobs of 2 indexes.
	jobSet := func(kv ...string) *jobsetapi.JobSet {
		w := wrappers.MakeJobSet("train", "ns").
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(wrappers.MakeJob("", "").Indexed(2).Obj()).Obj())
		return w.AnnotationPairs(kv...).Obj()
	}
	valid := []string{inputRev, "D", modelRev, "m", shards, "A,B"}
	// ended marks a Job Complete at t.
	ended := func(j *batchv1.Job, at time.Time) *batchv1.Job {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
		return j
	}
	const shortFormTTL = 24 * time.Hour
	// declared is the account job(valid...) declares, as the controller created it (but
	// for the indexes, written as ranges: what they mean is compared, not their text).
	declared := func() *wrappers.BatchAccountWrapper {
		return wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").
			AssignJobOrdinals("j", "0-1", "0-1").Label(v1alpha1.LabelShortFormOf, "Job")
	}
	// acceptedOn is the account job(valid...) declares, Accepted on the Job of uid.
	// (created before the re-run, as a run of the name before it).
	acceptedOn := func(uid string) *wrappers.BatchAccountWrapper {
		return declared().Generation(1).Creation(testNow.Add(-2*time.Hour)).TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: types.UID(uid)}).
			Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", testNow.Add(-time.Hour))
	}
	// rerun is job(kv...) created at testNow, after acceptedOn's account.
	rerun := func(kv ...string) *batchv1.Job {
		j := job(kv...)
		j.UID, j.CreationTimestamp = "rerun-uid", metav1.NewTime(testNow)
		return j
	}
	failCreate := func(err error) hooks {
		return hooks{create: func(client.Object) error { return err }}
	}
	accounts := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "batchaccounts"}
	invalid := apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("BatchAccount").GroupKind(), "j",
		field.ErrorList{field.Invalid(field.NewPath("spec", "shards", "names").Index(0), strings.Repeat("x", 300), "may not be longer than 253")})

	cases := map[string]struct {
		kind string // "Job" unless set
		objs []client.Object
		h    hooks
		// wantCreate is the account created, with its label; nil: none.
		wantCreate *v1alpha1.BatchAccount
		// wantAttempt: a create was sent, though it failed.
		wantAttempt bool
		wantErr     bool
		// wantEvents are "<Kind>/<name> <type> <reason>"; wantNote, substrings of each
		// event's note.
		wantEvents []string
		wantNote   []string
		// wantNotNote are substrings no event's note may say.
		wantNotNote []string
	}{
		"a short form that parses: its account, labelled, and no event": {
			objs: []client.Object{job(valid...)},
			wantCreate: wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").
				AssignJobOrdinals("j", "0,1", "0,1").Label(v1alpha1.LabelShortFormOf, "Job").Obj(),
		},
		"a JobSet short form: its account, labelled JobSet": {
			kind: "JobSet",
			objs: []client.Object{jobSet(inputRev, "D", modelRev, "m", count, "4", rjAnn, "workers")},
			wantCreate: wrappers.MakeBatchAccount("train", "ns").Revisions("D", "m").ShardCount("", 4).
				AssignJobSet("train", "workers", 0, "0,1", "0,1").AssignJobSet("train", "workers", 1, "0,1", "2,3").
				Label(v1alpha1.LabelShortFormOf, "JobSet").Obj(),
		},
		"a Job that ended within the short-form TTL: its account (the manager was down while it ran)": {
			objs: []client.Object{ended(job(valid...), testNow.Add(-time.Hour))},
			wantCreate: wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").
				AssignJobOrdinals("j", "0,1", "0,1").Label(v1alpha1.LabelShortFormOf, "Job").Obj(),
		},
		"a Job that ended longer ago than the short-form TTL: retention took its account, none again": {
			objs: []client.Object{ended(job(valid...), testNow.Add(-shortFormTTL))},
		},
		"no short form: nothing":   {objs: []client.Object{job()}},
		"the Job is gone: nothing": {},

		// (a) a short form that does not parse
		"no model revision: a Warning naming the annotation, no account": {
			objs:       []client.Object{job(inputRev, "D", shards, "A,B")},
			wantEvents: []string{"Job/j Warning InvalidShortForm"},
			wantNote:   []string{"no BatchAccount was created", "annotation " + modelRev + " is missing"},
		},
		"replicas x completions is not the shard count: a Warning on the JobSet": {
			kind:       "JobSet",
			objs:       []client.Object{jobSet(inputRev, "D", modelRev, "m", count, "5", rjAnn, "workers")},
			wantEvents: []string{"JobSet/train Warning InvalidShortForm"},
			wantNote:   []string{"annotation " + count + " declares 5 shards, but replicatedJob workers runs 2 replicas x 2 completions = 4 indexes"},
		},
		"an empty name in the shard list: a Warning": {
			objs:       []client.Object{job(inputRev, "D", modelRev, "m", shards, "A,,B")},
			wantEvents: []string{"Job/j Warning InvalidShortForm"},
			wantNote:   []string{"annotation " + shards + " has an empty shard name at position 2"},
		},
		"a shard named twice: a Warning before the API server refuses it": {
			objs:       []client.Object{job(inputRev, "D", modelRev, "m", shards, "A,A")},
			wantEvents: []string{"Job/j Warning InvalidShortForm"},
			wantNote:   []string{"annotation " + shards + `: shard "A" is declared twice`},
		},
		"a Job another account names, its short form not parsing: a Warning that does not deny that account's scope": {
			objs:        []client.Object{job(inputRev, "D", shards, "A,B"), wrappers.MakeBatchAccount("other", "ns").Shards("A").AssignJob("j", "0", "A").Obj()},
			wantEvents:  []string{"Job/j Warning InvalidShortForm"},
			wantNote:    []string{"no BatchAccount was created from them", "annotation " + modelRev + " is missing"},
			wantNotNote: []string{"the pods get no batchledger scope"},
		},
		"require-results alone: a Warning, not silence": {
			objs:       []client.Object{job(require, "true")},
			wantEvents: []string{"Job/j Warning InvalidShortForm"},
			wantNote:   []string{"annotation " + inputRev + " is missing"},
		},

		// (c) the API server refuses the account
		"the account is invalid to the API server: a Warning with its message, no retry": {
			objs:        []client.Object{job(valid...)},
			h:           failCreate(invalid),
			wantAttempt: true,
			wantEvents:  []string{"Job/j Warning ShortFormRejected"},
			wantNote:    []string{"the API server refused BatchAccount j", "may not be longer than 253", "tried again when the Job's annotations or spec change"},
		},
		"the validating webhook forbids the account: a Warning, no retry": {
			objs:        []client.Object{job(valid...)},
			h:           failCreate(apierrors.NewForbidden(accounts, "j", errRuleDoesNotCompile)),
			wantAttempt: true,
			wantEvents:  []string{"Job/j Warning ShortFormRejected"},
			wantNote:    []string{"spec.acceptance.rule: undeclared reference"},
		},
		"a transient failure: retried, no event": {
			objs:        []client.Object{job(valid...)},
			h:           failCreate(apierrors.NewServiceUnavailable("etcd is down")),
			wantAttempt: true,
			wantErr:     true,
		},

		// (d) an account of that name exists
		"the account as declared: nothing": {
			objs: []client.Object{job(valid...), declared().Obj()},
		},
		"the same account written by hand, by shard names: nothing": {
			objs: []client.Object{job(valid...), wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()},
		},
		"the same shards by count and prefix where the annotations list them: nothing": {
			objs: []client.Object{job(inputRev, "D", modelRev, "m", shards, "s0,s1"),
				wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").ShardCount("s", 2).AssignJobOrdinals("j", "0-1", "0-1").Obj()},
		},
		"repairs appended and a result container set since: no difference": {
			objs: []client.Object{job(append(valid, require, "true")...),
				declared().RequireResults("").Repair("j-repair-1", "0", "B").ResultContainer("worker").Obj()},
		},
		"an earlier Job's account of other revisions: a Warning, the account unchanged": {
			objs:       []client.Object{job(valid...), declared().Revisions("D", "m-old").Obj()},
			wantEvents: []string{"Job/j Warning ShortFormMismatch"},
			wantNote: []string{`BatchAccount j (created from the short form of a Job of this name)`,
				`spec.modelRevision is "m-old", the annotations declare "m"`,
				"left unchanged", "delete the BatchAccount (its results go with it) and re-create the Job, or re-create the Job under another name"},
		},
		"the account as declared, written ahead of the Job and Accepted on it: nothing": {
			objs: []client.Object{rerun(valid...), acceptedOn("rerun-uid").Label(v1alpha1.LabelShortFormOf, "").Obj()},
		},
		"a Job re-run under its name after its account was Accepted on the earlier run: a Warning that it is not accounted": {
			objs:        []client.Object{rerun(valid...), acceptedOn("earlier-uid").Obj()},
			wantEvents:  []string{"Job/j Warning ShortFormAlreadyAccepted"},
			wantNote:    []string{"BatchAccount j", "Accepted an earlier run of the name", "this Job is not accounted", "re-create this Job under another name"},
			wantNotNote: []string{"accounts for this Job"},
		},
		"a JobSet applied again under its name after its account was Accepted: a Warning that it is not accounted": {
			kind: "JobSet",
			objs: []client.Object{func() client.Object {
				js := jobSet(inputRev, "D", modelRev, "m", count, "4", rjAnn, "workers")
				js.CreationTimestamp = metav1.NewTime(testNow)
				return js
			}(), wrappers.MakeBatchAccount("train", "ns").Generation(1).Creation(testNow.Add(-2*time.Hour)).Revisions("D", "m").ShardCount("", 4).
				AssignJobSet("train", "workers", 0, "0,1", "0,1").AssignJobSet("train", "workers", 1, "0,1", "2,3").
				Label(v1alpha1.LabelShortFormOf, "JobSet").
				Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", testNow.Add(-time.Hour)).Obj()},
			wantEvents: []string{"JobSet/train Warning ShortFormAlreadyAccepted"},
			wantNote:   []string{"BatchAccount train", "Accepted an earlier run of the name", "this JobSet is not accounted"},
		},
		"a re-run of other revisions after its account was Accepted on the earlier run: the mismatch says it is not accounted": {
			objs:        []client.Object{rerun(inputRev, "E", modelRev, "m", shards, "A,B"), acceptedOn("earlier-uid").Obj()},
			wantEvents:  []string{"Job/j Warning ShortFormMismatch"},
			wantNote:    []string{`spec.inputRevision is "D", the annotations declare "E"`, "does not account for this Job"},
			wantNotNote: []string{"accounts for this Job;"},
		},
		"other shards: a Warning naming shards and assignments": {
			objs:       []client.Object{job(inputRev, "D", modelRev, "m", shards, "A,B,C"), declared().Obj()},
			wantEvents: []string{"Job/j Warning ShortFormMismatch"},
			wantNote:   []string{"spec.shards is names A,B, the annotations declare names A,B,C", "spec.assignments"},
		},
		"only the acceptance differs: a Warning that it may be edited": {
			objs:       []client.Object{job(append(valid, require, "true")...), declared().Obj()},
			wantEvents: []string{"Job/j Warning ShortFormMismatch"},
			wantNote:   []string{"spec.acceptance.requireResults is false, the annotations declare true", "edit the BatchAccount's spec.acceptance (once work was done under it, requireResults may only be turned on), or delete"},
		},
		"an account of that name made by hand: a Warning to rename the Job": {
			objs:       []client.Object{job(valid...), wrappers.MakeBatchAccount("j", "ns").Shards("X").AssignJob("j", "0", "X").Obj()},
			wantEvents: []string{"Job/j Warning ShortFormMismatch"},
			wantNote:   []string{"created by hand", "accounts for this Job", "give the Job another name, or remove its short-form annotations"},
		},
		"an account of that name made by hand for other Jobs: a Warning that this Job is not accounted": {
			objs:        []client.Object{job(valid...), wrappers.MakeBatchAccount("j", "ns").Shards("X").AssignJob("other", "0", "X").Obj()},
			wantEvents:  []string{"Job/j Warning ShortFormMismatch"},
			wantNote:    []string{"created by hand", "does not account for this Job", "give the Job another name"},
			wantNotNote: []string{"accounts for this Job;", "to be accounted by the existing BatchAccount"},
		},
		"a JobSet short form under the name of a Job's account: a Warning": {
			kind: "JobSet",
			objs: []client.Object{jobSet(inputRev, "D", modelRev, "m", count, "4", rjAnn, "workers"),
				wrappers.MakeBatchAccount("train", "ns").Revisions("D", "m").ShardCount("", 4).AssignJobOrdinals("train", "0-3", "0-3").
					Label(v1alpha1.LabelShortFormOf, "Job").Obj()},
			wantEvents:  []string{"JobSet/train Warning ShortFormMismatch"},
			wantNote:    []string{"created from the short form of a Job of this name", "does not account for this JobSet", "give the JobSet another name"},
			wantNotNote: []string{"accounts for this JobSet;", "to be accounted by the existing BatchAccount"},
		},
		"a Job short form under the name of a JobSet's account: a Warning that the Job is not accounted": {
			objs: []client.Object{job(inputRev, "D", modelRev, "m", count, "4"),
				wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").ShardCount("", 4).
					AssignJobSet("j", "workers", 0, "0,1", "0,1").AssignJobSet("j", "workers", 1, "0,1", "2,3").
					Label(v1alpha1.LabelShortFormOf, "JobSet").Obj()},
			wantEvents:  []string{"Job/j Warning ShortFormMismatch"},
			wantNote:    []string{"created from the short form of a JobSet of this name", "does not account for this Job", "give the Job another name"},
			wantNotNote: []string{"accounts for this Job;", "to be accounted by the existing BatchAccount"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.h, tc.objs...)
			var kind kinds.Kind = jobkind.Kind{}
			key := client.ObjectKey{Namespace: "ns", Name: "j"}
			if tc.kind == "JobSet" {
				kind, key.Name = jobsetkind.Kind{}, "train"
			}
			var before v1alpha1.BatchAccount
			existed := f.c.Get(context.Background(), key, &before) == nil
			f.reset()
			r := &ShortFormReconciler{Client: f.c, Recorder: f, Kind: kind, TTL: shortFormTTL, Now: func() time.Time { return testNow }}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
			// An account just created is looked at again, to mark its object once cached.
			created := !existed && tc.wantCreate != nil
			if (err != nil) != tc.wantErr || retried(res, err) != (tc.wantErr || created) {
				t.Fatalf("reconcile = %+v, %v; want retried: %v", res, err, tc.wantErr || created)
			}
			var wantWrites []string
			if tc.wantCreate != nil || tc.wantAttempt {
				wantWrites = []string{"BatchAccount/" + key.Name}
			}
			if diff := cmp.Diff(wantWrites, f.writesOf("create")); diff != "" {
				t.Errorf("creates (-want +got):\n%s", diff)
			}
			if got := append(f.writesOf("update"), f.writesOf("patch")...); len(got) > 0 {
				t.Errorf("wrote %v: the short form never changes an account", got)
			}
			var got []string
			for _, e := range f.events {
				got = append(got, e.Kind+"/"+e.Name+" "+e.Type+" "+e.Reason)
				for _, w := range tc.wantNote {
					if !strings.Contains(e.Note, w) {
						t.Errorf("note %q does not say %q", e.Note, w)
					}
				}
				for _, w := range tc.wantNotNote {
					if strings.Contains(e.Note, w) {
						t.Errorf("note %q says %q", e.Note, w)
					}
				}
				if len(e.Note) > maxEventNote {
					t.Errorf("note of %d bytes, over the API server's %d", len(e.Note), maxEventNote)
				}
			}
			if diff := cmp.Diff(tc.wantEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			var after v1alpha1.BatchAccount
			switch err := f.c.Get(context.Background(), key, &after); {
			case existed:
				if diff := cmp.Diff(before.Spec, after.Spec); err != nil || diff != "" {
					t.Errorf("the existing account changed (%v):\n%s", err, diff)
				}
			case tc.wantCreate != nil:
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.wantCreate.Labels, after.Labels); diff != "" {
					t.Errorf("labels (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantCreate.Spec, after.Spec); diff != "" {
					t.Errorf("spec (-want +got):\n%s", diff)
				}
				if len(after.OwnerReferences) != 0 {
					t.Errorf("owned by %v: the ledger outlives its Jobs", after.OwnerReferences)
				}
			case !apierrors.IsNotFound(err):
				t.Errorf("an account exists (%v), though none was declared", err)
			}
		})
	}
}

// errRuleDoesNotCompile is the message BatchAccountValidator refuses a bad rule with.
var errRuleDoesNotCompile = errors.New(`admission webhook "vbatchaccount.batchledger.dev" denied the request: BatchAccount j: spec.acceptance.rule: undeclared reference to 'reslt'`)

// TestShortFormWatch: the reconciler wakes for a Job or JobSet with a short form when it
// is created and when its annotations or spec change (fixing an annotation is the way
// forward from a Warning), not for its status, nor for objects without a short form; and
// for the object of an account's name when that account is deleted (the way forward from
// ShortFormAlreadyAccepted and ShortFormMismatch), not when one is created or changes.
func TestShortFormWatch(t *testing.T) {
	sf := wrappers.MakeJob("j", "ns").Annotation(v1alpha1.AnnotationInputRev, "D").Generation(1).Obj()
	fixed := sf.DeepCopy()
	fixed.Annotations[v1alpha1.AnnotationModelRev] = "m"
	progressed := sf.DeepCopy()
	progressed.Status.Active = 2
	plain := wrappers.MakeJob("j", "ns").Generation(1).Obj()
	p := shortFormChanges()
	ba := wrappers.MakeBatchAccount("j", "ns").Label(v1alpha1.LabelShortFormOf, "Job").Obj()
	judged := ba.DeepCopy()
	judged.Status.ObservedGeneration = 1
	deleted := accountDeletions()
	for name, tc := range map[string]struct {
		got, want bool
	}{
		"created with a short form":       {p.Create(event.CreateEvent{Object: sf}), true},
		"created without":                 {p.Create(event.CreateEvent{Object: plain}), false},
		"an annotation fixed":             {p.Update(event.UpdateEvent{ObjectOld: sf, ObjectNew: fixed}), true},
		"status only":                     {p.Update(event.UpdateEvent{ObjectOld: sf, ObjectNew: progressed}), false},
		"the short form removed":          {p.Update(event.UpdateEvent{ObjectOld: sf, ObjectNew: plain}), false},
		"a short form added to a new Job": {p.Update(event.UpdateEvent{ObjectOld: plain, ObjectNew: sf}), true},
		"an account deleted":              {deleted.Delete(event.DeleteEvent{Object: ba}), true},
		"an account created":              {deleted.Create(event.CreateEvent{Object: ba}), false},
		"an account's status written":     {deleted.Update(event.UpdateEvent{ObjectOld: ba, ObjectNew: judged}), false},
		"an account, generic":             {deleted.Generic(event.GenericEvent{Object: ba}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: reconciled %v, want %v", name, tc.got, tc.want)
		}
	}
}

// TestShortFormThatNoLongerParsesKeepsItsAccount: annotations an earlier version accepted
// (a rule without require-results) no longer parse after an upgrade; the account made
// from them stands, and the Warning says so rather than that no account was created.
func TestShortFormThatNoLongerParsesKeepsItsAccount(t *testing.T) {
	j := wrappers.MakeJob("j", "ns").Indexed(2).AnnotationPairs(
		v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,B",
		v1alpha1.AnnotationRule, "result.valid == result.records").Obj()
	existing := wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").
		AssignJobOrdinals("j", "0-1", "0-1").Label(v1alpha1.LabelShortFormOf, "Job").Obj()
	existing.Spec.Acceptance = &v1alpha1.AcceptanceCriterion{Rule: "result.valid == result.records"} // as v0.1 created it
	f := newFixture(t, hooks{}, j, existing)
	r := &ShortFormReconciler{Client: f.c, Recorder: f, Kind: jobkind.Kind{}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "j"}}); err != nil {
		t.Fatal(err)
	}
	said := false
	for _, e := range f.events {
		if strings.Contains(e.Note, "no BatchAccount was created") {
			t.Errorf("%s %s on Job j says %q, but BatchAccount j exists and accounts for the Job", e.Type, e.Reason, e.Note)
		}
		said = said || e.Reason == v1alpha1.EventReasonInvalidShortForm && strings.Contains(e.Note, "BatchAccount j, of the same name, stands unchanged")
	}
	if !said {
		t.Errorf("no Warning says the annotations no longer parse and the account stands: %+v", f.events)
	}
}

// TestShortFormComparesThroughTheMappingCache: an existing account compared with the
// short form that names it is compiled once per spec, through the mappings the account
// reconciler keeps, however often its Job's annotations or spec change; the comparison
// says what it said compiling the account each time.
func TestShortFormComparesThroughTheMappingCache(t *testing.T) {
	j := wrappers.MakeJob("j", "ns").Indexed(2).AnnotationPairs(
		v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,B").Obj()
	accountOf := func(modelRev string) *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("j", "ns").UID("acc-uid").Generation(1).Revisions("D", modelRev).Shards("A", "B").
			AssignJobOrdinals("j", "0-1", "0-1").Obj()
	}
	for name, tc := range map[string]struct {
		existing   *v1alpha1.BatchAccount
		wantEvents int
	}{
		"the account as declared":                  {existing: accountOf("m")},
		"an account of other revisions: a Warning": {existing: accountOf("m-old"), wantEvents: 1},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, hooks{}, j, tc.existing)
			mappings := &account.MappingCache{}
			r := &ShortFormReconciler{Client: f.c, Recorder: f, Kind: jobkind.Kind{}, Mappings: mappings}
			const looks = 3
			for range looks {
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(j)}); err != nil {
					t.Fatal(err)
				}
			}
			if got := mappings.Compiles(); got != 1 {
				t.Errorf("the existing account compiled %d times in %d looks, want once", got, looks)
			}
			if got := len(f.events); got != tc.wantEvents*looks {
				t.Errorf("%d events in %d looks, want %d: %+v", got, looks, tc.wantEvents*looks, f.events)
			}
		})
	}
}

// TestShortFormDeletedAccountStaysDeleted: the account a short form declares is created
// once for its object, which is marked with its own UID (AnnotationShortFormCreated). An
// account deleted since (by hand, `kubectl delete batchaccounts -l
// batchledger.dev/short-form-of`, or retention) is not created again when the reconciler
// next looks (the manager's start, a change of the object's spec or annotations): its
// results went with it, and a new one would only report them missing. A mark copied
// from another object (a manifest applied again as a new object) does not count, and
// removing the mark asks for the account again. An account made from this short form by
// an earlier version is marked as well; one made by hand is not the short form's, nor
// one older than the object (an earlier object's of its name, a Job applied again): once
// that is deleted, the object gets its own.
func TestShortFormDeletedAccountStaysDeleted(t *testing.T) {
	valid := []string{v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,B"}
	job := func(kv ...string) *batchv1.Job {
		return wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").AnnotationPairs(append(valid, kv...)...).Obj()
	}
	jobSet := func(kv ...string) *jobsetapi.JobSet {
		js := wrappers.MakeJobSet("train", "ns").
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(wrappers.MakeJob("", "").Indexed(2).Obj()).Obj()).
			AnnotationPairs(append([]string{v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m",
				v1alpha1.AnnotationShardCount, "4", v1alpha1.AnnotationReplicatedJob, "workers"}, kv...)...).Obj()
		js.UID = "train-uid"
		return js
	}
	declared := wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").
		AssignJobOrdinals("j", "0-1", "0-1").Label(v1alpha1.LabelShortFormOf, "Job")
	marked := v1alpha1.AnnotationShortFormCreated
	for name, tc := range map[string]struct {
		obj      client.Object
		existing *v1alpha1.BatchAccount
		// deleteThenLook deletes the account after the first reconcile and reconciles
		// again, as the manager's next start does.
		deleteThenLook bool
		wantAccount    bool
		// wantMark is the object's AnnotationShortFormCreated afterwards ("" for none).
		wantMark string
	}{
		"created: the Job marked with its own UID":                         {obj: job(), wantAccount: true, wantMark: "j-uid"},
		"created, then deleted by its user: not created again":             {obj: job(), deleteThenLook: true, wantMark: "j-uid"},
		"a JobSet's, deleted by its user: not created again":               {obj: jobSet(), deleteThenLook: true, wantMark: "train-uid"},
		"marked, its account gone: none":                                   {obj: job(marked, "j-uid"), wantMark: "j-uid"},
		"a mark copied from another Job of its name: created, marked anew": {obj: job(marked, "old-uid"), wantAccount: true, wantMark: "j-uid"},
		"made from this short form by an earlier version: marked":          {obj: job(), existing: declared.Obj(), wantAccount: true, wantMark: "j-uid"},
		"a Job applied again under its name while the earlier one's account stands: unmarked, then its own account once that is deleted": {
			obj: wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").AnnotationPairs(valid...).Created(testNow).Obj(),
			existing: wrappers.MakeBatchAccount("j", "ns").Revisions("D", "m").Shards("A", "B").AssignJobOrdinals("j", "0-1", "0-1").
				Label(v1alpha1.LabelShortFormOf, "Job").Creation(testNow.Add(-time.Hour)).Obj(),
			deleteThenLook: true, wantAccount: true, wantMark: "j-uid"},
		"an account of that name made by hand: not the short form's, unmarked": {obj: job(),
			existing: wrappers.MakeBatchAccount("j", "ns").Shards("X").AssignJob("j", "0", "X").Obj(), wantAccount: true},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.obj}
			if tc.existing != nil {
				objs = append(objs, tc.existing)
			}
			// The API server stamps what it creates; the fake client does not.
			stamp := hooks{create: func(obj client.Object) error {
				obj.SetCreationTimestamp(metav1.NewTime(testNow))
				return nil
			}}
			f := newFixture(t, stamp, objs...)
			var kind kinds.Kind = jobkind.Kind{}
			if _, ok := tc.obj.(*jobsetapi.JobSet); ok {
				kind = jobsetkind.Kind{}
			}
			key := client.ObjectKeyFromObject(tc.obj)
			r := &ShortFormReconciler{Client: f.c, Recorder: f, Kind: kind, Now: func() time.Time { return testNow }}
			look := func() {
				t.Helper()
				// Until it asks for no requeue: the mark follows the create.
				for range 3 {
					res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
					if err != nil {
						t.Fatal(err)
					}
					if res.RequeueAfter == 0 {
						return
					}
				}
				t.Fatal("still requeued after 3 looks")
			}
			look()
			if tc.deleteThenLook {
				if err := f.c.Delete(context.Background(), &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
					t.Fatal(err)
				}
				look()
			}
			err := f.c.Get(context.Background(), key, &v1alpha1.BatchAccount{})
			if got := err == nil; got != tc.wantAccount || err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("account exists: %v (%v), want %v", got, err, tc.wantAccount)
			}
			obj := kind.NewObject()
			if err := f.c.Get(context.Background(), key, obj); err != nil {
				t.Fatal(err)
			}
			if got := obj.GetAnnotations()[marked]; got != tc.wantMark {
				t.Errorf("%s = %q, want %q", marked, got, tc.wantMark)
			}
		})
	}
}

// TestShortFormMarkedOnceItsAccountIsCached: the object is marked as having had its
// account created (AnnotationShortFormCreated) only once the manager's cache holds the
// account, never right after the create. The pod releaser and the Job recorder read that
// cache and take a marked object's account, when it is missing, as deleted for good
// (relations.ShortFormPending): marked while the cache still lagged the create, a pod
// ending then would be let go unrecorded instead of waiting for the account.
func TestShortFormMarkedOnceItsAccountIsCached(t *testing.T) {
	valid := []string{v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,B"}
	for _, tc := range []struct {
		name string
		// cached is whether the cache holds the account created before the reconciler
		// looks again.
		cached      bool
		wantMark    string
		wantRequeue bool
	}{
		{name: "the cache lags the create: not marked, looked at again", wantRequeue: true},
		{name: "the cache holds the account: marked", cached: true, wantMark: "j-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").AnnotationPairs(valid...).Obj()
			live := newFixture(t, hooks{}, job.DeepCopy())
			cache := newFixture(t, hooks{}, job.DeepCopy())
			r := &ShortFormReconciler{Client: cacheOf{Client: live.c, cache: cache.c}, Recorder: live, Kind: jobkind.Kind{},
				Now: func() time.Time { return testNow }}
			key := client.ObjectKeyFromObject(job)
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
			if err != nil {
				t.Fatal(err)
			}
			if tc.cached {
				var ba v1alpha1.BatchAccount
				if err := live.c.Get(context.Background(), key, &ba); err != nil {
					t.Fatal(err)
				}
				ba.ResourceVersion = ""
				if err := cache.c.Create(context.Background(), &ba); err != nil {
					t.Fatal(err)
				}
				if res, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			if err := live.c.Get(context.Background(), key, &v1alpha1.BatchAccount{}); err != nil {
				t.Errorf("the declared account was not created: %v", err)
			}
			var got batchv1.Job
			if err := live.c.Get(context.Background(), key, &got); err != nil {
				t.Fatal(err)
			}
			if mark := got.Annotations[v1alpha1.AnnotationShortFormCreated]; mark != tc.wantMark {
				t.Errorf("%s = %q, want %q", v1alpha1.AnnotationShortFormCreated, mark, tc.wantMark)
			}
			if (res.RequeueAfter > 0) != tc.wantRequeue {
				t.Errorf("RequeueAfter = %v, want a requeue: %v", res.RequeueAfter, tc.wantRequeue)
			}
		})
	}
}
