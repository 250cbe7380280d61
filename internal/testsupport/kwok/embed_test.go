package kwok

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestStagesAreNamedKwokStages(t *testing.T) {
	docs := bytes.Split(Stages(), []byte("\n---\n"))
	names := map[string]bool{}
	for _, doc := range docs {
		doc = bytes.TrimPrefix(doc, []byte("---\n"))
		var s struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct{ Name string }
			Spec       struct {
				ResourceRef struct{ Kind string } `json:"resourceRef"`
			}
		}
		if err := yaml.Unmarshal(doc, &s); err != nil {
			t.Fatalf("bad stage YAML: %v\n%s", err, doc)
		}
		if s.APIVersion != "kwok.x-k8s.io/v1alpha1" || s.Kind != "Stage" || s.Metadata.Name == "" {
			t.Errorf("not a named kwok Stage: %+v", s)
		}
		if names[s.Metadata.Name] {
			t.Errorf("stage %s defined twice", s.Metadata.Name)
		}
		names[s.Metadata.Name] = true
	}
	for _, want := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-finish", "pod-auto-finish", "pod-terminate", "pod-remove"} {
		if !names[want] {
			t.Errorf("stage %s missing", want)
		}
	}
}

// The stages key on the annotations the Go constants name; a rename must change both.
func TestStagesUseTheAnnotationConstants(t *testing.T) {
	all := string(Stages())
	for _, a := range []string{ExitCodeAnnotation, TerminationMessageAnnotation, AutoExitCodeAnnotation, AutoExitDelayAnnotation, UnmanagedAnnotation, MessageContainerAnnotation} {
		if !strings.Contains(all, a) {
			t.Errorf("no stage mentions %s", a)
		}
	}
}
