package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
)

// TargetKey is the stable key of one assignment target: "job/<name>" for a Job target,
// "jobset/<jobSet>/<replicatedJob>/<jobIndex>" for a child Job of a JobSet. The status
// names targets by it (status.targets[].name, status.history[].target, identities in
// messages), and so do recorded results (ShardResults results[].target), so its grammar
// is part of the API: build keys with TargetRef.Key and read them with ParseTargetKey,
// never by hand. Job, JobSet and replicatedJob names cannot contain "/", so a key reads
// back unambiguously.
//
// It is not the key of the controller's field index of accounts by the Jobs and JobSets
// they name ("job/<name>", "jobset/<name>" for the whole JobSet): that is
// relations.IndexKey, a type of its own.
type TargetKey string

// Prefixes of the two kinds of target key.
const (
	targetKeyJob    = "job/"
	targetKeyJobSet = "jobset/"
)

// Key is the target key of r. A JobSet target without a jobIndex names child 0.
func (r TargetRef) Key() TargetKey {
	if r.JobSet != "" {
		idx := int32(0)
		if r.JobIndex != nil {
			idx = *r.JobIndex
		}
		return TargetKey(fmt.Sprintf("%s%s/%s/%d", targetKeyJobSet, r.JobSet, r.ReplicatedJob, idx))
	}
	return TargetKey(targetKeyJob + r.Job)
}

// JobTargetKey is the target key of the Job named name.
func JobTargetKey(name string) TargetKey { return TargetRef{Job: name}.Key() }

// ParseTargetKey reads a target key back into the reference it was made of (JobIndex
// always set for a JobSet child). It fails on anything TargetRef.Key cannot produce.
func ParseTargetKey(key string) (TargetRef, error) {
	if name, ok := strings.CutPrefix(key, targetKeyJob); ok {
		if name == "" || strings.Contains(name, "/") {
			return TargetRef{}, fmt.Errorf("target key %q: want job/<name>", key)
		}
		return TargetRef{Job: name}, nil
	}
	if rest, ok := strings.CutPrefix(key, targetKeyJobSet); ok {
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return TargetRef{}, fmt.Errorf("target key %q: want jobset/<jobSet>/<replicatedJob>/<jobIndex>", key)
		}
		idx, err := strconv.ParseInt(parts[2], 10, 32)
		if err != nil || idx < 0 || strconv.Itoa(int(idx)) != parts[2] {
			return TargetRef{}, fmt.Errorf("target key %q: job index %q is not a non-negative integer", key, parts[2])
		}
		i := int32(idx)
		return TargetRef{JobSet: parts[0], ReplicatedJob: parts[1], JobIndex: &i}, nil
	}
	return TargetRef{}, fmt.Errorf("target key %q: want job/<name> or jobset/<jobSet>/<replicatedJob>/<jobIndex>", key)
}

// Ref is the reference k was made of; false when k is no well-formed target key.
func (k TargetKey) Ref() (TargetRef, bool) {
	r, err := ParseTargetKey(string(k))
	return r, err == nil
}

// IsJob reports whether k is the key of a Job target.
func (k TargetKey) IsJob() bool {
	r, ok := k.Ref()
	return ok && r.Job != ""
}

// IsJobSetChild reports whether k is the key of a JobSet child target.
func (k TargetKey) IsJobSetChild() bool {
	r, ok := k.Ref()
	return ok && r.JobSet != ""
}

// Describe renders k for messages: "job j", "jobset train workers[0]". A string that is
// no target key is returned as it is.
func (k TargetKey) Describe() string {
	r, ok := k.Ref()
	switch {
	case !ok:
		return string(k)
	case r.JobSet != "":
		return fmt.Sprintf("jobset %s %s[%d]", r.JobSet, r.ReplicatedJob, *r.JobIndex)
	default:
		return "job " + r.Job
	}
}

// String implements fmt.Stringer.
func (k TargetKey) String() string { return string(k) }
