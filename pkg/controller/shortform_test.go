package controller

import (
	"strings"
	"testing"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func TestShortFormJob(t *testing.T) {
	job := wrappers.MakeJob("j", "ml").Indexed(4).
		Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m-2026-11").
		Annotation(v1alpha1.AnnotationShards, "A, B, C, D").Annotation(v1alpha1.AnnotationRequire, "true").Obj()
	spec, err := ShortFormJob(job)
	if err != nil {
		t.Fatal(err)
	}
	m := account.Compile("ml", &spec)
	if len(m.Problems) != 0 {
		t.Fatalf("short form compiles to an invalid mapping: %+v", m.Problems)
	}
	if o, ok := m.ShardOf("job/j", 3); !ok || m.Shards.Name(o) != "D" {
		t.Errorf("index 3 maps to %d", o)
	}
	if spec.Acceptance == nil || !spec.Acceptance.RequireResults {
		t.Errorf("acceptance = %+v", spec.Acceptance)
	}
}

func TestShortFormJobSet(t *testing.T) {
	worker := wrappers.MakeJob("", "").Indexed(4).Obj()
	js := wrappers.MakeJobSet("train", "ml").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(worker).Obj()).Obj()
	js.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m", v1alpha1.AnnotationShardCount: "8", v1alpha1.AnnotationShardPrefix: "s", v1alpha1.AnnotationReplicatedJob: "workers"}
	spec, err := ShortFormJobSet(js)
	if err != nil {
		t.Fatal(err)
	}
	m := account.Compile("ml", &spec)
	if len(m.Problems) != 0 || len(m.Targets) != 2 {
		t.Fatalf("problems %+v targets %d", m.Problems, len(m.Targets))
	}
	if o, _ := m.ShardOf("jobset/train/workers/1", 0); m.Shards.Name(o) != "s4" {
		t.Errorf("workers[1] index 0 maps to %s, want s4", m.Shards.Name(o))
	}

	js.Annotations[v1alpha1.AnnotationShardCount] = "9"
	if _, err := ShortFormJobSet(js); err == nil || !strings.Contains(err.Error(), "2 replicas x 4 completions = 8 indexes for 9 shards") {
		t.Errorf("count mismatch: %v", err)
	}
	js.Annotations[v1alpha1.AnnotationReplicatedJob] = "leader"
	if _, err := ShortFormJobSet(js); err == nil || !strings.Contains(err.Error(), `names replicatedJob "leader"`) {
		t.Errorf("unknown replicatedJob: %v", err)
	}
}

func TestShortFormErrors(t *testing.T) {
	for name, ann := range map[string]map[string]string{
		"no revisions": {v1alpha1.AnnotationShards: "A"},
		"no shards":    {v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m"},
		"bad count":    {v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m", v1alpha1.AnnotationShardCount: "-3"},
	} {
		t.Run(name, func(t *testing.T) {
			job := wrappers.MakeJob("j", "ml").Indexed(1).Obj()
			job.Annotations = ann
			if _, err := ShortFormJob(job); err == nil {
				t.Errorf("accepted %v", ann)
			}
		})
	}
}

func TestShortFormSingleIndex(t *testing.T) {
	job := wrappers.MakeJob("one", "ml").Indexed(1).Obj()
	job.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m", v1alpha1.AnnotationShards: "A"}
	spec, err := ShortFormJob(job)
	if err != nil {
		t.Fatal(err)
	}
	if m := account.Compile("ml", &spec); len(m.Problems) != 0 {
		t.Errorf("single-shard short form is invalid: %+v", m.Problems)
	}
}
