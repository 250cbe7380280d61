package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
)

// TargetKey is the stable key of one assignment target: "job/<name>" for a Job target,
// "<kind>/<owner>/<replicatedJob>/<jobIndex>" for a child Job of a replicatedJob of an
// owner of that kind ("jobset/<jobSet>/...", "trainjob/<trainJob>/..."). The status names
// targets by it (status.targets[].name, status.history[].target, identities in messages),
// and so do recorded results (ShardResults results[].target), so its grammar is part of
// the API: build keys with TargetRef.Key and read them with ParseTargetKey, never by
// hand. Object and replicatedJob names cannot contain "/", so a key reads back
// unambiguously.
//
// It is not the key of the controller's field index of accounts by the objects they
// name ("job/<name>", "jobset/<name>" for the whole JobSet): that is kinds.IndexKey, a
// type of its own.
type TargetKey string

// The target kinds as target keys and the kinds registry name them.
const (
	TargetKindJob      = "job"
	TargetKindJobSet   = "jobset"
	TargetKindTrainJob = "trainjob"
)

// ownerField is a TargetRef field that names an owner of replicatedJob children: the
// JobSet of a JobSet target, the TrainJob of a TrainJob target.
type ownerField struct {
	kind  string
	field string // its JSON name
	name  func(*TargetRef) *string
}

// childOwners are the owner fields of TargetRef, in the order a key is read. A kind whose
// targets name a replicatedJob child adds its field here.
var childOwners = []ownerField{
	{TargetKindJobSet, "jobSet", func(r *TargetRef) *string { return &r.JobSet }},
	{TargetKindTrainJob, "trainJob", func(r *TargetRef) *string { return &r.TrainJob }},
}

// ChildTargetKinds are the target kinds whose targets name a replicatedJob child
// (TargetKindJobSet, TargetKindTrainJob), in the order a key is read: the order in
// which messages list them.
func ChildTargetKinds() []string {
	out := make([]string, len(childOwners))
	for i, f := range childOwners {
		out[i] = f.kind
	}
	return out
}

// Kind is the kind of target r names: TargetKindJob, or the kind of its child owner; ""
// when it names none (an invalid target). When several are set (also invalid), the Job
// wins, then the child owners in order.
func (r TargetRef) Kind() string {
	kind, _ := r.owner()
	return kind
}

// Owner is the name of the object r names: the Job, or the owner of the child Job.
func (r TargetRef) Owner() string {
	_, name := r.owner()
	return name
}

func (r TargetRef) owner() (string, string) {
	if r.Job != "" {
		return TargetKindJob, r.Job
	}
	for _, f := range childOwners {
		if n := *f.name(&r); n != "" {
			return f.kind, n
		}
	}
	return "", ""
}

// Field is the JSON name of the field of r that names its object ("job", "jobSet",
// "trainJob"), for messages.
func (r TargetRef) Field() string {
	kind := r.Kind()
	for _, f := range childOwners {
		if f.kind == kind {
			return f.field
		}
	}
	return TargetKindJob
}

// NamedKinds counts the kinds r names an object of (exactly one is valid).
func (r TargetRef) NamedKinds() int {
	n := 0
	if r.Job != "" {
		n++
	}
	for _, f := range childOwners {
		if *f.name(&r) != "" {
			n++
		}
	}
	return n
}

// IsChild reports whether r names a child Job of a replicatedJob (a JobSet or TrainJob
// target), whose owner may delete and recreate it.
func (r TargetRef) IsChild() bool {
	k := r.Kind()
	return k != "" && k != TargetKindJob
}

// Index is r's job index (default 0).
func (r TargetRef) Index() int32 {
	if r.JobIndex != nil {
		return *r.JobIndex
	}
	return 0
}

// Key is the target key of r. A child target without a jobIndex names child 0.
func (r TargetRef) Key() TargetKey {
	kind, name := r.owner()
	if kind == TargetKindJob || kind == "" {
		return TargetKey(TargetKindJob + "/" + r.Job)
	}
	return TargetKey(fmt.Sprintf("%s/%s/%s/%d", kind, name, r.ReplicatedJob, r.Index()))
}

// JobTargetKey is the target key of the Job named name.
func JobTargetKey(name string) TargetKey { return TargetRef{Job: name}.Key() }

// ParseTargetKey reads a target key back into the reference it was made of (JobIndex
// always set for a child target). It fails on anything TargetRef.Key cannot produce.
func ParseTargetKey(key string) (TargetRef, error) {
	kind, rest, _ := strings.Cut(key, "/")
	if kind == TargetKindJob {
		if rest == "" || strings.Contains(rest, "/") {
			return TargetRef{}, fmt.Errorf("target key %q: want job/<name>", key)
		}
		return TargetRef{Job: rest}, nil
	}
	for _, f := range childOwners {
		if kind != f.kind {
			continue
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return TargetRef{}, fmt.Errorf("target key %q: want %s/<name>/<replicatedJob>/<jobIndex>", key, kind)
		}
		idx, err := strconv.ParseInt(parts[2], 10, 32)
		if err != nil || idx < 0 || strconv.Itoa(int(idx)) != parts[2] {
			return TargetRef{}, fmt.Errorf("target key %q: job index %q is not a non-negative integer", key, parts[2])
		}
		i := int32(idx)
		r := TargetRef{ReplicatedJob: parts[1], JobIndex: &i}
		*f.name(&r) = parts[0]
		return r, nil
	}
	kinds := []string{"job/<name>"}
	for _, f := range childOwners {
		kinds = append(kinds, f.kind+"/<name>/<replicatedJob>/<jobIndex>")
	}
	return TargetRef{}, fmt.Errorf("target key %q: want %s", key, strings.Join(kinds, " or "))
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

// IsChild reports whether k is the key of a child target (TargetRef.IsChild).
func (k TargetKey) IsChild() bool {
	r, ok := k.Ref()
	return ok && r.IsChild()
}

// Describe renders k for messages: "job j", "jobset train workers[0]", "trainjob llm
// node[0]". A string that is no target key is returned as it is.
func (k TargetKey) Describe() string {
	r, ok := k.Ref()
	switch {
	case !ok:
		return string(k)
	case r.IsChild():
		return fmt.Sprintf("%s %s %s[%d]", r.Kind(), r.Owner(), r.ReplicatedJob, r.Index())
	default:
		return "job " + r.Job
	}
}

// String implements fmt.Stringer.
func (k TargetKey) String() string { return string(k) }
