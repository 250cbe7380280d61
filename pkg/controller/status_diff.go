package controller

import (
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// statusChanges names what differs between two statuses of an account, for the log line
// of each status write (verbosity 3): "why did it write" is the first question about a
// write rate. Fields are named by their JSON names; a target's as target/<name>.<field>,
// a condition's as condition/<type>.
func statusChanges(was, now *v1alpha1.BatchAccountStatus) []string {
	var out []string
	out = appendFieldChanges(out, "", reflect.ValueOf(*was), reflect.ValueOf(*now), "targets", "conditions")
	targets := map[string]*v1alpha1.TargetStatus{}
	for i := range was.Targets {
		targets[was.Targets[i].Name] = &was.Targets[i]
	}
	for i := range now.Targets {
		t := &now.Targets[i]
		prev, ok := targets[t.Name]
		delete(targets, t.Name)
		if !ok {
			out = append(out, "target/"+t.Name)
			continue
		}
		out = appendFieldChanges(out, "target/"+t.Name+".", reflect.ValueOf(*prev), reflect.ValueOf(*t))
	}
	for name := range targets {
		out = append(out, "target/"+name+" (gone)")
	}
	for _, c := range now.Conditions {
		if !sameCondition(apimeta.FindStatusCondition(was.Conditions, c.Type), &c) {
			out = append(out, "condition/"+c.Type)
		}
	}
	return out
}

// appendFieldChanges appends prefix+<json name> for each field of the structs was and now
// that differs, skipping the fields named in skip.
func appendFieldChanges(out []string, prefix string, was, now reflect.Value, skip ...string) []string {
	t := was.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || slices.Contains(skip, name) {
			continue
		}
		if !equality.Semantic.DeepEqual(was.Field(i).Interface(), now.Field(i).Interface()) {
			out = append(out, prefix+name)
		}
	}
	return out
}
