package webhook

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/crdschema"
	"batchledger.dev/batchledger/pkg/worker"
)

// exampleDir is the Python worker example, written for users to apply.
var exampleDir = filepath.Join("..", "..", "examples", "python-worker")

// loadYAML decodes every document of a YAML file strictly (an unknown or misspelt field
// fails) into the project's scheme, returning each typed object and its JSON.
func loadYAML(t *testing.T, path string) ([]runtime.Object, [][]byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(stripComments(string(doc))) == "" {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		objs, docs = append(objs, obj), append(docs, js)
	}
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// crdValidator validates objects against the BatchAccount CRD's OpenAPI schema, as the
// API server does.
func crdValidator(t *testing.T) validation.SchemaValidator {
	t.Helper()
	return crdschema.Validator(t, "batchledger.dev_batchaccounts.yaml")
}

// TestExamplesPassValidation: every BatchAccount of examples/ passes the CRD's schema,
// its CEL rules and the validating webhook, and every short form there declares a valid
// account that passes them too: a user who applies an example gets what it says.
func TestExamplesPassValidation(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in examples: %v", err)
	}
	check := func(f string, ba *v1alpha1.BatchAccount) {
		t.Helper()
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ba)
		if err != nil {
			t.Fatal(err)
		}
		delete(u, "status") // the zero status is not what a user applies
		if msg := crdErrors(t, u); msg != "" {
			t.Errorf("%s: account %s fails the CRD's schema or rules: %s", f, ba.Name, msg)
		}
		if _, err := (BatchAccountValidator{}).ValidateCreate(context.Background(), ba); err != nil {
			t.Errorf("%s: account %s refused by the webhook: %v", f, ba.Name, err)
		}
	}
	var accounts, shortForms int
	for _, f := range files {
		objs, _ := loadYAML(t, f)
		for _, obj := range objs {
			o, ok := obj.(client.Object)
			if !ok {
				continue
			}
			if ba, ok := obj.(*v1alpha1.BatchAccount); ok {
				accounts++
				check(f, ba)
				continue
			}
			if !relations.HasShortForm(o.GetAnnotations()) {
				continue
			}
			shortForms++
			spec, err := relations.ShortForm(o)
			if err != nil {
				t.Errorf("%s: the short form of %s is invalid: %v", f, o.GetName(), err)
				continue
			}
			ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace()}, Spec: spec}
			ba.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BatchAccount"))
			check(f, ba)
		}
	}
	if accounts == 0 || shortForms == 0 {
		t.Errorf("%d accounts and %d short forms in examples, want at least one of each", accounts, shortForms)
	}
}

// TestPythonWorkerExample: every manifest of examples/python-worker decodes strictly into
// the project's scheme; its BatchAccount passes the CRD's schema and the validating
// webhook; its Job is Indexed, queued, and hands the worker the shard annotations through
// the downward API.
func TestPythonWorkerExample(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(exampleDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in %s: %v", exampleDir, err)
	}
	sv := crdValidator(t)
	var accounts, jobs int
	for _, f := range files {
		objs, docs := loadYAML(t, f)
		for i, obj := range objs {
			switch o := obj.(type) {
			case *v1alpha1.BatchAccount:
				accounts++
				var u map[string]any
				if err := yaml.Unmarshal(docs[i], &u); err != nil {
					t.Fatal(err)
				}
				if res := sv.Validate(u); !res.IsValid() {
					t.Errorf("%s: account %s fails the CRD schema: %v", f, o.Name, res.Errors)
				}
				o.Namespace = "ml-team"
				if _, err := (BatchAccountValidator{}).ValidateCreate(context.Background(), o); err != nil {
					t.Errorf("%s: account %s refused by the webhook: %v", f, o.Name, err)
				}
				if !o.Spec.RequiresResults() {
					t.Errorf("%s: account %s does not require results", f, o.Name)
				}
			case *batchv1.Job:
				jobs++
				checkWorkerJob(t, f, o)
			}
		}
	}
	if accounts == 0 || jobs == 0 {
		t.Errorf("%d accounts and %d Jobs in %s, want at least one of each", accounts, jobs, exampleDir)
	}
}

func checkWorkerJob(t *testing.T, file string, j *batchv1.Job) {
	t.Helper()
	if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("%s: Job %s is not Indexed", file, j.Name)
	}
	if j.Labels["kueue.x-k8s.io/queue-name"] == "" {
		t.Errorf("%s: Job %s has no LocalQueue label", file, j.Name)
	}
	want := map[string]string{
		worker.EnvShard:         v1alpha1.AnnotationShard,
		worker.EnvInputRevision: v1alpha1.AnnotationInputRev,
		worker.EnvModelRevision: v1alpha1.AnnotationModelRev,
		worker.EnvAccount:       v1alpha1.AnnotationAccount,
	}
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if a, ok := want[e.Name]; ok && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['"+a+"']" {
				delete(want, e.Name)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("%s: Job %s does not give its worker %v through the downward API", file, j.Name, want)
	}
}
