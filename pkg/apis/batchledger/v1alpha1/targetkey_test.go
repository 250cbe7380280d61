package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestTargetKeyRoundTrip: every target reference reads back from its key, and the key's
// kind and description follow the reference's kind.
func TestTargetKeyRoundTrip(t *testing.T) {
	cases := []struct {
		name     string
		ref      TargetRef
		key      TargetKey
		want     TargetRef // the reference read back: JobIndex always set for a child
		child    bool
		describe string
	}{
		{"job", TargetRef{Job: "ij245"}, "job/ij245", TargetRef{Job: "ij245"}, false, "job ij245"},
		{"jobset child with index", TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](3)},
			"jobset/train/workers/3", TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](3)}, true, "jobset train workers[3]"},
		{"jobset child without index is child 0", TargetRef{JobSet: "train", ReplicatedJob: "workers"},
			"jobset/train/workers/0", TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](0)}, true, "jobset train workers[0]"},
		{"trainjob child", TargetRef{TrainJob: "llm", ReplicatedJob: "node", JobIndex: ptr.To[int32](0)},
			"trainjob/llm/node/0", TargetRef{TrainJob: "llm", ReplicatedJob: "node", JobIndex: ptr.To[int32](0)}, true, "trainjob llm node[0]"},
		{"namespace is not part of the key", TargetRef{Job: "j", Namespace: "other"}, "job/j", TargetRef{Job: "j"}, false, "job j"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.ref.Key()
			if key != tc.key {
				t.Fatalf("Key() = %q, want %q", key, tc.key)
			}
			back, err := ParseTargetKey(string(key))
			if err != nil {
				t.Fatalf("ParseTargetKey(%q): %v", key, err)
			}
			if diff := cmp.Diff(tc.want, back); diff != "" {
				t.Errorf("ParseTargetKey(%q) (-want +got):\n%s", key, diff)
			}
			if key.IsChild() != tc.child || key.IsJob() == tc.child {
				t.Errorf("IsChild() = %v, IsJob() = %v; want child %v", key.IsChild(), key.IsJob(), tc.child)
			}
			if got := key.Describe(); got != tc.describe {
				t.Errorf("Describe() = %q, want %q", got, tc.describe)
			}
		})
	}
}

// TestParseTargetKeyRejects: strings TargetRef.Key cannot produce are refused, and are
// neither a Job nor a JobSet child key.
func TestParseTargetKeyRejects(t *testing.T) {
	for _, s := range []string{
		"", "job/", "job/a/b", "jobs/a", "jobset/train", "jobset/train/workers", "jobset//workers/0",
		"jobset/train//0", "jobset/train/workers/-1", "jobset/train/workers/x", "jobset/train/workers/01",
		"jobset/train/workers/0/1", "jobset/train/workers/99999999999", "JOB/a",
		"trainjob/llm", "trainjob/llm/node", "trainjob//node/0", "trainjobs/llm/node/0",
	} {
		if ref, err := ParseTargetKey(s); err == nil {
			t.Errorf("ParseTargetKey(%q) = %+v, want an error", s, ref)
		}
		if k := TargetKey(s); k.IsJob() || k.IsChild() {
			t.Errorf("TargetKey(%q): IsJob %v, IsChild %v; want neither", s, k.IsJob(), k.IsChild())
		}
	}
}

// TestJobTargetKey is the key of a Job target.
func TestJobTargetKey(t *testing.T) {
	if got := JobTargetKey("ij245"); got != (TargetRef{Job: "ij245"}).Key() || got != "job/ij245" {
		t.Errorf("JobTargetKey = %q", got)
	}
}

// TestIsWorkloadCondition: exactly the two published types are batchledger's; Kueue's
// conditions, and other types under the batchledger.dev/ prefix, are not.
func TestIsWorkloadCondition(t *testing.T) {
	cases := map[string]bool{
		WorkloadConditionShardsCovered:  true,
		WorkloadConditionAccepted:       true,
		"Admitted":                      false,
		"QuotaReserved":                 false,
		"Evicted":                       false,
		ConditionAccepted:               false,
		"batchledger.dev/SomethingElse": false,
		"":                              false,
	}
	for typ, want := range cases {
		if got := IsWorkloadCondition(typ); got != want {
			t.Errorf("IsWorkloadCondition(%q) = %v, want %v", typ, got, want)
		}
	}
	for _, c := range PublishedConditions {
		wl, ok := WorkloadConditionFor(c)
		if !ok || !IsWorkloadCondition(wl) {
			t.Errorf("WorkloadConditionFor(%q) = %q, %v: want a published Workload condition", c, wl, ok)
		}
	}
	for _, c := range []string{ConditionAssignmentValid, ConditionAdmitted, ConditionTerminated, ConditionResultsAccepted} {
		if wl, ok := WorkloadConditionFor(c); ok {
			t.Errorf("WorkloadConditionFor(%q) = %q: not published", c, wl)
		}
	}
}
