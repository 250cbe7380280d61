package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestShortFormSweep: a short-form Job the scope webhook did not label is labelled with
// the scope its short form declares, so that the cache holds it and its account is
// created; a Job already labelled, one without a short form, one whose short form does
// not parse and one being deleted are left alone; a Job changed since it was read is
// left for the next sweep, and a failed read ends the sweep with its error.
func TestShortFormSweep(t *testing.T) {
	valid := []string{v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,B"}
	// job is Indexed Job name of 2 completions with the annotations kv (key, value, ...).
	job := func(name string, kv ...string) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, "ns").Indexed(2).AnnotationPairs(kv...)
	}
	results := append(append([]string{}, valid...), v1alpha1.AnnotationRequire, "true")
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "c", errors.New("changed"))

	cases := map[string]struct {
		objs []client.Object
		h    hooks
		// want are the scope labels of the Jobs after the sweep, by name ("": none).
		want     map[string]string
		labelled int
		wantErr  bool
	}{
		"a coverage short form and a results one, unlabelled: labelled with their scopes": {
			objs:     []client.Object{job("cov", valid...).Obj(), job("res", results...).Obj()},
			want:     map[string]string{"cov": v1alpha1.ScopeCoverage, "res": v1alpha1.ScopeResults},
			labelled: 2,
		},
		"already labelled: untouched, also when weaker than its short form": {
			objs: []client.Object{job("res", results...).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()},
			want: map[string]string{"res": v1alpha1.ScopeCoverage},
		},
		"no short form: untouched": {
			objs: []client.Object{job("plain").Obj()},
			want: map[string]string{"plain": ""},
		},
		"a short form that does not parse: untouched until it is fixed": {
			objs: []client.Object{job("bad", v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationShards, "A,B").Obj()},
			want: map[string]string{"bad": ""},
		},
		"a short form naming a shard twice: untouched": {
			objs: []client.Object{job("bad", v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,A").Obj()},
			want: map[string]string{"bad": ""},
		},
		"being deleted: untouched": {
			objs: []client.Object{job("gone", valid...).Finalizers("example.com/keep").Deleting(time.Now()).Obj()},
			want: map[string]string{"gone": ""},
		},
		"changed since it was read: left for the next sweep, the others labelled": {
			objs: []client.Object{job("c", valid...).Obj(), job("d", valid...).Obj()},
			h: hooks{patch: func(obj client.Object) error {
				if obj.GetName() == "c" {
					return conflict
				}
				return nil
			}},
			want:     map[string]string{"c": "", "d": v1alpha1.ScopeCoverage},
			labelled: 1,
		},
		"the list fails: the error": {
			objs:    []client.Object{job("cov", valid...).Obj()},
			h:       hooks{list: func(client.ObjectList) error { return errors.New("etcdserver: request timed out") }},
			want:    map[string]string{"cov": ""},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.h, tc.objs...)
			s := &ShortFormSweep{API: f.c, Writer: f.c}
			labelled, err := s.Sweep(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("Sweep error = %v, want one: %t", err, tc.wantErr)
			}
			if labelled != tc.labelled {
				t.Errorf("labelled %d Jobs, want %d", labelled, tc.labelled)
			}
			got := map[string]string{}
			for name := range tc.want {
				var j batchv1.Job
				if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &j); err != nil {
					t.Fatal(err)
				}
				got[name] = j.Labels[v1alpha1.LabelScope]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scope labels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShortFormSweepRuns: the sweep runs at start, before the first interval has passed,
// and stops with its context.
func TestShortFormSweepRuns(t *testing.T) {
	f := newFixture(t, hooks{}, wrappers.MakeJob("j", "ns").Indexed(2).
		AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShards, "A,B").Obj())
	s := &ShortFormSweep{API: f.c, Writer: f.c, Interval: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var j batchv1.Job
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "j"}, &j); err != nil {
			t.Fatal(err)
		}
		if j.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeCoverage {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Job was not labelled at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start = %v, want nil once its context ends", err)
	}
	if !s.NeedLeaderElection() {
		t.Error("the sweep runs on every replica; want the leader only")
	}
}

// TestShortFormSweepTellsInvalid: a running Job whose short form does not parse, which the
// scope webhook left unlabelled and the ShortFormReconciler never sees, gets a Warning
// InvalidShortForm naming the annotation to fix, once: at the manager's first sweep, or
// at the first after it was created. The admission warning reaches no one when a controller
// (a CronJob) created the Job, or when the webhook failed open.
func TestShortFormSweepTellsInvalid(t *testing.T) {
	broken := []string{v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationShards, "A,B"} // no model revision
	job := func(name string, created time.Time) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, "ns").Indexed(2).AnnotationPairs(broken...).Created(created)
	}
	ended := func(w *wrappers.JobWrapper) *batchv1.Job {
		j := w.Obj()
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow)}}
		return j
	}
	cases := map[string]struct {
		objs []client.Object
		// previous is when the previous sweep began; zero: this is the first.
		previous time.Time
		want     []string
	}{
		"the first sweep: each running Job told": {
			objs: []client.Object{job("old", testNow.Add(-24*time.Hour)).Obj(), job("new", testNow.Add(-5*time.Minute)).Obj()},
			want: []string{"Job/new Warning InvalidShortForm", "Job/old Warning InvalidShortForm"},
		},
		"a later sweep: only the Job created since the previous one": {
			objs:     []client.Object{job("old", testNow.Add(-24*time.Hour)).Obj(), job("new", testNow.Add(-5*time.Minute)).Obj()},
			previous: testNow.Add(-10 * time.Minute),
			want:     []string{"Job/new Warning InvalidShortForm"},
		},
		"an ended Job: not told": {
			objs: []client.Object{ended(job("done", testNow.Add(-time.Hour)))},
		},
		"a short form that parses: labelled, not told": {
			objs: []client.Object{wrappers.MakeJob("ok", "ns").Indexed(2).Created(testNow).
				AnnotationPairs(append(broken, v1alpha1.AnnotationModelRev, "m")...).Obj()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, hooks{}, tc.objs...)
			s := &ShortFormSweep{API: f.c, Writer: f.c, Recorder: f, Now: func() time.Time { return testNow }, swept: tc.previous}
			if _, err := s.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range f.events {
				got = append(got, e.Kind+"/"+e.Name+" "+e.Type+" "+e.Reason)
				if !strings.Contains(e.Note, "annotation "+v1alpha1.AnnotationModelRev+" is missing") {
					t.Errorf("note %q does not name the annotation to fix", e.Note)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// A sweep tells each Job once: the next one, an interval later, tells none again.
			f.events = nil
			s.Now = func() time.Time { return testNow.Add(DefaultShortFormSweepInterval) }
			if _, err := s.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(f.events) != 0 {
				t.Errorf("the next sweep told again: %+v", f.events)
			}
		})
	}
}
