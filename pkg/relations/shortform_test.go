package relations

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// shortFormJob is an Indexed Job of completions indexes with the annotations kv (key,
// value, key, value, ...).
func shortFormJob(completions int32, kv ...string) *batchv1.Job {
	w := wrappers.MakeJob("j", ns).Indexed(completions)
	return w.AnnotationPairs(kv...).Obj()
}

// shortFormJobSet is JobSet train, replicatedJob workers of 2 child Jobs of 4 indexes,
// with the annotations kv.
func shortFormJobSet(kv ...string) *jobsetapi.JobSet {
	w := wrappers.MakeJobSet("train", ns).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(wrappers.MakeJob("", "").Indexed(4).Obj()).Obj())
	return w.AnnotationPairs(kv...).Obj()
}

const (
	inputRev  = v1alpha1.AnnotationInputRev
	modelRev  = v1alpha1.AnnotationModelRev
	shardsAnn = v1alpha1.AnnotationShards
	countAnn  = v1alpha1.AnnotationShardCount
	prefixAnn = v1alpha1.AnnotationShardPrefix
	rjAnn     = v1alpha1.AnnotationReplicatedJob
	requireAn = v1alpha1.AnnotationRequire
	ruleAnn   = v1alpha1.AnnotationRule
)

func TestShortFormJob(t *testing.T) {
	job := shortFormJob(4, inputRev, "D", modelRev, "m-2026-11", shardsAnn, "A, B, C, D", requireAn, "true")
	spec, err := ShortForm(job)
	if err != nil {
		t.Fatal(err)
	}
	m := account.Compile(ns, &spec)
	if len(m.Problems) != 0 {
		t.Fatalf("short form compiles to an invalid mapping: %+v", m.Problems)
	}
	if o, ok := m.ShardOf("job/j", 3); !ok || m.Shards.Name(o) != "D" {
		t.Errorf("index 3 maps to %d", o)
	}
	if spec.Acceptance == nil || !spec.Acceptance.RequireResults {
		t.Errorf("acceptance = %+v", spec.Acceptance)
	}

	one, err := ShortForm(shortFormJob(1, inputRev, "D", modelRev, "m", shardsAnn, "A"))
	if err != nil {
		t.Fatal(err)
	}
	if m := account.Compile(ns, &one); len(m.Problems) != 0 {
		t.Errorf("single-shard short form is invalid: %+v", m.Problems)
	}
}

func TestShortFormJobSet(t *testing.T) {
	js := shortFormJobSet(inputRev, "D", modelRev, "m", countAnn, "8", prefixAnn, "s", rjAnn, "workers")
	spec, err := ShortForm(js)
	if err != nil {
		t.Fatal(err)
	}
	m := account.Compile(ns, &spec)
	if len(m.Problems) != 0 || len(m.Targets) != 2 {
		t.Fatalf("problems %+v targets %d", m.Problems, len(m.Targets))
	}
	if o, _ := m.ShardOf("jobset/train/workers/1", 0); m.Shards.Name(o) != "s4" {
		t.Errorf("workers[1] index 0 maps to %s, want s4", m.Shards.Name(o))
	}
}

// TestShortFormInvalid: every mistake in the annotations is an error that names the
// annotation to fix and what is wrong with it (the controller's InvalidShortForm event).
func TestShortFormInvalid(t *testing.T) {
	valid := func(kv ...string) []string { return append([]string{inputRev, "D", modelRev, "m"}, kv...) }
	cases := map[string]struct {
		job  *batchv1.Job
		js   *jobsetapi.JobSet
		want []string
	}{
		"no model revision": {
			job:  shortFormJob(1, inputRev, "D", shardsAnn, "A"),
			want: []string{"annotation " + modelRev + " is missing", "needs both"},
		},
		"no input revision": {
			job:  shortFormJob(1, modelRev, "m", shardsAnn, "A", requireAn, "true"),
			want: []string{"annotation " + inputRev + " is missing"},
		},
		"no shards": {
			job:  shortFormJob(1, valid()...),
			want: []string{shardsAnn, countAnn, "is required"},
		},
		"shards declared twice over": {
			job:  shortFormJob(2, valid(shardsAnn, "A,B", countAnn, "2")...),
			want: []string{"annotations " + shardsAnn + " and " + countAnn + " both declare the shards"},
		},
		"a shard prefix with a shard list, which it would not name": {
			job:  shortFormJob(2, valid(shardsAnn, "0,1", prefixAnn, "part-")...),
			want: []string{"annotation " + prefixAnn + " applies only with " + countAnn},
		},
		"an empty shard name": {
			job:  shortFormJob(3, valid(shardsAnn, "A,,B")...),
			want: []string{"annotation " + shardsAnn + " has an empty shard name at position 2"},
		},
		"a trailing comma": {
			job:  shortFormJob(2, valid(shardsAnn, "A,B,")...),
			want: []string{"annotation " + shardsAnn + " has an empty shard name at position 3"},
		},
		"a shard name given twice": {
			job:  shortFormJob(3, valid(shardsAnn, "A,B,A")...),
			want: []string{"annotation " + shardsAnn + `: shard "A" is declared twice`},
		},
		"a negative count": {
			job:  shortFormJob(1, valid(countAnn, "-3")...),
			want: []string{"annotation " + countAnn + `="-3" is not a count from 1 to 1000000`},
		},
		"a count that is no number": {
			job:  shortFormJob(1, valid(countAnn, "ten")...),
			want: []string{"annotation " + countAnn + `="ten" is not a count from 1 to 1000000`},
		},
		"a count past int32": {
			job:  shortFormJob(1, valid(countAnn, "4294967300")...),
			want: []string{"annotation " + countAnn + `="4294967300" is not a count from 1 to 1000000`},
		},
		"a count past int32 that would wrap negative": {
			job:  shortFormJob(1, valid(countAnn, "3000000000")...),
			want: []string{"annotation " + countAnn + `="3000000000" is not a count from 1 to 1000000`},
		},
		"a JobSet's count past int32 that wraps to its indexes": {
			js:   shortFormJobSet(valid(countAnn, "4294967304", rjAnn, "workers")...),
			want: []string{"annotation " + countAnn + `="4294967304" is not a count from 1 to 1000000`},
		},
		"a count past the account's maximum": {
			job:  shortFormJob(1, valid(countAnn, "1000001")...),
			want: []string{"annotation " + countAnn + `="1000001" is not a count from 1 to 1000000`},
		},
		"require-results neither true nor false": {
			job:  shortFormJob(1, valid(shardsAnn, "A", requireAn, "yes")...),
			want: []string{"annotation " + requireAn + `="yes" is not true or false`},
		},
		"an acceptance rule without require-results": {
			job:  shortFormJob(1, valid(shardsAnn, "A", ruleAnn, "result.records > 0")...),
			want: []string{"annotation " + ruleAnn + " applies only with " + requireAn + `: "true"`},
		},
		"an acceptance rule with require-results false": {
			job:  shortFormJob(1, valid(shardsAnn, "A", requireAn, "false", ruleAnn, "result.records > 0")...),
			want: []string{"annotation " + ruleAnn + " applies only with " + requireAn + `: "true"`},
		},
		"a JobSet without replicated-job": {
			js:   shortFormJobSet(valid(countAnn, "8")...),
			want: []string{"annotation " + rjAnn + " is missing"},
		},
		"a JobSet naming a replicatedJob it does not have": {
			js:   shortFormJobSet(valid(countAnn, "8", rjAnn, "leader")...),
			want: []string{"annotation " + rjAnn + ` names replicatedJob "leader", which the JobSet does not have (it has workers)`},
		},
		"replicas x completions is not the shard count": {
			js:   shortFormJobSet(valid(countAnn, "9", rjAnn, "workers")...),
			want: []string{"annotation " + countAnn + " declares 9 shards, but replicatedJob workers runs 2 replicas x 4 completions = 8 indexes"},
		},
		"a shard list of the wrong length": {
			js:   shortFormJobSet(valid(shardsAnn, "A,B", rjAnn, "workers")...),
			want: []string{"annotation " + shardsAnn + " declares 2 shards"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.js != nil {
				_, err = ShortForm(tc.js)
			} else {
				_, err = ShortForm(tc.job)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestShortFormScope: the scope is that of the account the short form declares, and none
// for a short form that does not parse, which it says (the scope webhook warns the
// Job's author): no account will exist to record its pods' results.
func TestShortFormScope(t *testing.T) {
	notAWorkload := wrappers.MakeBatchAccount("j", ns).Obj()
	notAWorkload.Annotations = map[string]string{inputRev: "D", modelRev: "m", shardsAnn: "A"}
	cases := map[string]struct {
		obj  client.Object
		want string
		// invalid: a short form that does not parse, which ShortFormScope says.
		invalid bool
	}{
		"no short form":                  {obj: shortFormJob(1), want: ""},
		"requiring results":              {obj: shortFormJob(1, inputRev, "D", modelRev, "m", shardsAnn, "A", requireAn, "true"), want: v1alpha1.ScopeResults},
		"require-results in other case":  {obj: shortFormJob(1, inputRev, "D", modelRev, "m", shardsAnn, "A", requireAn, "True"), want: v1alpha1.ScopeResults},
		"not requiring results":          {obj: shortFormJob(1, inputRev, "D", modelRev, "m", shardsAnn, "A", requireAn, "false"), want: v1alpha1.ScopeCoverage},
		"require-results empty":          {obj: shortFormJob(1, inputRev, "D", modelRev, "m", shardsAnn, "A", requireAn, ""), want: v1alpha1.ScopeCoverage},
		"a rule without require-results": {obj: shortFormJob(1, inputRev, "D", modelRev, "m", shardsAnn, "A", ruleAnn, "result.valid"), want: "", invalid: true},
		"requiring results, but no model revision": {
			obj: shortFormJob(1, inputRev, "D", shardsAnn, "A", requireAn, "true"), want: "", invalid: true,
		},
		"only require-results": {obj: shortFormJob(1, requireAn, "true"), want: "", invalid: true},
		"a JobSet requiring results": {
			obj:  shortFormJobSet(inputRev, "D", modelRev, "m", countAnn, "8", rjAnn, "workers", requireAn, "true"),
			want: v1alpha1.ScopeResults,
		},
		"a JobSet whose shards do not fit its replicatedJob": {
			obj:  shortFormJobSet(inputRev, "D", modelRev, "m", countAnn, "9", rjAnn, "workers", requireAn, "true"),
			want: "", invalid: true,
		},
		"neither Job nor JobSet": {obj: notAWorkload, want: "", invalid: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ShortFormScope(tc.obj)
			if got != tc.want {
				t.Errorf("ShortFormScope = %q, want %q", got, tc.want)
			}
			if (err != nil) != tc.invalid {
				t.Errorf("ShortFormScope error = %v, want one: %t", err, tc.invalid)
			}
		})
	}
}

// TestShortFormPending: a short form requiring results that names the target declares an
// account the controller is about to create, pending until an account of that name
// exists, for ShortFormWait from the declaring object's creation or the holder's start
// (an account not there by then was refused or deleted); none for a short form that does
// not require results, does not parse or names another replicatedJob, nor for a batch
// that ended longer ago than the retention, nor for an account created for the very
// object and deleted since.
func TestShortFormPending(t *testing.T) {
	now := t0.Add(30 * 24 * time.Hour)
	results := []string{inputRev, "D", modelRev, "m", shardsAnn, "A,B", requireAn, "true"}
	job := func(kv ...string) *wrappers.JobWrapper {
		return wrappers.MakeJob("j", ns).Indexed(2).AnnotationPairs(kv...)
	}
	train := func(kv ...string) *jobsetapi.JobSet {
		return wrappers.MakeJobSet("train", ns).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(wrappers.MakeJob("", "").Indexed(2).Obj()).Obj()).
			AnnotationPairs(kv...).Obj()
	}
	jobRef := []v1alpha1.TargetRef{{Job: "j"}}
	childRef := func(rj string) []v1alpha1.TargetRef {
		return []v1alpha1.TargetRef{{Job: "train-" + rj + "-1"}, {JobSet: "train", ReplicatedJob: rj, JobIndex: ptr.To[int32](1)}}
	}
	week := 7 * 24 * time.Hour
	started := now.Add(-10 * time.Second) // the holder's start
	created := func(j *batchv1.Job, at time.Time) *batchv1.Job {
		j.CreationTimestamp = metav1.NewTime(at)
		return j
	}
	cases := []struct {
		name  string
		objs  []client.Object
		refs  []v1alpha1.TargetRef
		ttl   time.Duration
		since time.Time
		want  []string
	}{
		{"waited for ShortFormWait since the holder started: not coming", []client.Object{job(results...).Obj()}, jobRef, week, now.Add(-ShortFormWait), nil},
		{"created a moment ago, the holder long started", []client.Object{created(job(results...).Obj(), now.Add(-time.Second))}, jobRef, week, now.Add(-time.Hour), []string{"j"}},
		{"created longer ago than ShortFormWait, the holder long started", []client.Object{created(job(results...).Obj(), now.Add(-ShortFormWait))}, jobRef, week, now.Add(-time.Hour), nil},
		{"a Job's short form requiring results, no account yet", []client.Object{job(results...).Obj()}, jobRef, week, time.Time{}, []string{"j"}},
		{"its account exists", []client.Object{job(results...).Obj(), wrappers.MakeBatchAccount("j", ns).Obj()}, jobRef, week, time.Time{}, nil},
		{"its account was created for this Job and deleted since: not coming",
			[]client.Object{job(results...).UID("j-uid").Annotation(v1alpha1.AnnotationShortFormCreated, "j-uid").Obj()}, jobRef, week, time.Time{}, nil},
		{"marked created for another Job of its name (a copied manifest): still waited for",
			[]client.Object{job(results...).UID("j-uid").Annotation(v1alpha1.AnnotationShortFormCreated, "old-uid").Obj()}, jobRef, week, time.Time{}, []string{"j"}},
		{"a short form counting coverage only", []client.Object{job(inputRev, "D", modelRev, "m", shardsAnn, "A,B").Obj()}, jobRef, week, time.Time{}, nil},
		{"a short form that does not parse", []client.Object{job(inputRev, "D", modelRev, "m", shardsAnn, "A,A", requireAn, "true").Obj()}, jobRef, week, time.Time{}, nil},
		{"no short form", []client.Object{job().Obj()}, jobRef, week, time.Time{}, nil},
		{"no such Job", nil, jobRef, week, time.Time{}, nil},
		{"a batch that ended longer ago than the retention", []client.Object{job(results...).Complete(t0).Obj()}, jobRef, week, time.Time{}, nil},
		{"a batch that ended, kept forever", []client.Object{job(results...).Complete(t0).Obj()}, jobRef, 0, time.Time{}, []string{"j"}},
		{"a JobSet's short form naming the child's replicatedJob", []client.Object{train(append(results[:4:4], countAnn, "4", rjAnn, "workers", requireAn, "true")...)},
			childRef("workers"), week, time.Time{}, []string{"train"}},
		{"a JobSet's short form naming another replicatedJob", []client.Object{train(append(results[:4:4], countAnn, "4", rjAnn, "workers", requireAn, "true")...)},
			childRef("leader"), week, time.Time{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			since := tc.since
			if since.IsZero() {
				since = started
			}
			got, recheck, err := ShortFormPending(context.Background(), reader(t, tc.objs...), ns, tc.refs, tc.ttl, now, since)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pending %v, want %v", got, tc.want)
			}
			if len(got) > 0 && (recheck <= 0 || recheck > ShortFormWait) || len(got) == 0 && recheck != 0 {
				t.Errorf("looked at again after %s; want within ShortFormWait while an account is waited for, never otherwise", recheck)
			}
		})
	}
}
