package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	celv "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/crdschema"
)

// crdSchema is the BatchAccount CRD's schema of the served version, in the API server's
// internal form.
func crdSchema(t *testing.T) *apiextensions.JSONSchemaProps {
	t.Helper()
	return crdschema.Schema(t, "batchledger.dev_batchaccounts.yaml")
}

// crdErrors validates the creation of the object obj as the API server does, against the
// CRD's OpenAPI schema and its x-kubernetes-validations (CEL rules), and returns every
// message ("" when it passes). The API server skips the rules after some schema errors
// (a wrong type, a value too long); this runs them always, so that a message a rule
// would add is never missed.
func crdErrors(t *testing.T, obj map[string]any) string {
	t.Helper()
	internal := crdSchema(t)
	s, err := schema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	sv, _, err := validation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	errs := validation.ValidateCustomResource(nil, obj, sv)
	celErrs, _ := celv.NewValidator(s, true, cel.PerCallLimit).Validate(t.Context(), field.NewPath(""), s, obj, nil, cel.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

// accountWithSpec is a BatchAccount object whose spec is the JSON spec, for the CRD's
// validators.
func accountWithSpec(t *testing.T, spec string) map[string]any {
	t.Helper()
	// apimachinery's decoder keeps integers int64, as the API server's does.
	var u map[string]any
	if err := utiljson.Unmarshal([]byte(`{"apiVersion":"batchledger.dev/v1alpha1","kind":"BatchAccount","metadata":{"name":"a"},"spec":`+spec+`}`), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestCRDValidationRules: the CRD's CEL rules refuse what can never work, each with a
// message about the mistake made, and admit what is valid.
func TestCRDValidationRules(t *testing.T) {
	const base = `"inputRevision":"D","modelRevision":"m",`
	const namesA = `"shards":{"names":["A"]},`
	const jobA = `"assignments":[{"target":{"job":"j"},"indexes":"0","shards":["A"]}]`
	const acceptRule = `,"acceptance":{"requireResults":true}`
	cases := map[string]struct {
		spec string
		// want are fragments the error must contain; none means the spec is valid.
		want []string
		// not are fragments the error must not contain.
		not []string
	}{
		"a valid account": {spec: `{` + base + namesA + jobA + `}`},
		"a rule with requireResults": {
			spec: `{` + base + namesA + jobA + `,"acceptance":{"requireResults":true,"rule":"result.records > 0","resultContainer":"worker"}}`,
		},
		"requireResults without a rule":        {spec: `{` + base + namesA + jobA + `,"acceptance":{"requireResults":true}}`},
		"an empty rule without requireResults": {spec: `{` + base + namesA + jobA + `,"acceptance":{"rule":""}}`},
		"a rule without requireResults": {
			spec: `{` + base + namesA + jobA + `,"acceptance":{"rule":"result.records > 0"}}`,
			want: []string{"rule and resultContainer apply only with requireResults: true"},
		},
		"a rule with requireResults false": {
			spec: `{` + base + namesA + jobA + `,"acceptance":{"requireResults":false,"rule":"result.records > 0"}}`,
			want: []string{"rule and resultContainer apply only with requireResults: true"},
		},
		"a resultContainer without requireResults": {
			spec: `{` + base + namesA + jobA + `,"acceptance":{"resultContainer":"worker"}}`,
			want: []string{"rule and resultContainer apply only with requireResults: true"},
		},
		"shards by count with a prefix": {spec: `{` + base + `"shards":{"prefix":"s","count":1},"assignments":[{"target":{"job":"j"},"indexes":"0","shardOrdinals":"0"}]}`},
		"shards by a prefix whose count was forgotten": {
			spec: `{` + base + `"shards":{"prefix":"s"},"assignments":[{"target":{"job":"j"},"indexes":"0","shardOrdinals":"0"}]}`,
			want: []string{"declare shards by names or by count"},
			not:  []string{"not both", "exclude each other"},
		},
		"no shards at all": {
			spec: `{` + base + `"shards":{},"assignments":[{"target":{"job":"j"},"indexes":"0","shardOrdinals":"0"}]}`,
			want: []string{"declare shards by names or by count"},
			not:  []string{"not both", "exclude each other"},
		},
		"shards by names and by count": {
			spec: `{` + base + `"shards":{"names":["A"],"count":1},` + jobA + `}`,
			want: []string{"names and count exclude each other; prefix goes with count"},
			not:  []string{"declare shards by names or by count"},
		},
		"shards by names with a prefix": {
			spec: `{` + base + `"shards":{"names":["A"],"prefix":"s"},` + jobA + `}`,
			want: []string{"names and count exclude each other; prefix goes with count"},
		},
		"a jobSet target with an empty job": {
			spec: `{` + base + namesA + `"assignments":[{"target":{"job":"","jobSet":"train","replicatedJob":"w"},"indexes":"0","shards":["A"]}]` + acceptRule + `}`,
			want: []string{"job", "should be at least 1 chars long"},
			not:  []string{"apply only to jobSet and trainJob targets", "exactly one of", "needs replicatedJob"},
		},
		"a job target with an empty jobSet and replicatedJob": {
			spec: `{` + base + namesA + `"assignments":[{"target":{"job":"j","jobSet":"","replicatedJob":""},"indexes":"0","shards":["A"]}]}`,
			want: []string{"jobSet", "replicatedJob", "should be at least 1 chars long"},
			not:  []string{"apply only to jobSet and trainJob targets", "exactly one of", "needs replicatedJob"},
		},
		"a trainJob target with an empty replicatedJob": {
			spec: `{` + base + namesA + `"assignments":[{"target":{"trainJob":"t","replicatedJob":""},"indexes":"0","shards":["A"]}]}`,
			want: []string{"replicatedJob", "should be at least 1 chars long", "a jobSet or trainJob target needs replicatedJob"},
		},
		"a target with only an empty job": {
			spec: `{` + base + namesA + `"assignments":[{"target":{"job":""},"indexes":"0","shards":["A"]}]}`,
			want: []string{"should be at least 1 chars long", "a target names exactly one of job, jobSet or trainJob"},
			not:  []string{"needs replicatedJob", "apply only to jobSet and trainJob targets"},
		},
		"a job target with a replicatedJob": {
			spec: `{` + base + namesA + `"assignments":[{"target":{"job":"j","replicatedJob":"w"},"indexes":"0","shards":["A"]}]}`,
			want: []string{"replicatedJob and jobIndex apply only to jobSet and trainJob targets"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := crdErrors(t, accountWithSpec(t, tc.spec))
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("refused: %s", got)
			}
			if len(tc.want) > 0 && got == "" {
				t.Fatalf("admitted, want an error saying %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("error %q does not say %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("error %q says %q", got, n)
				}
			}
		})
	}
}

// TestCRDShardCountMaximum: the CRD's maximum of spec.shards.count is MaxShardCount, the
// bound the short form checks its shard-count against (a marker cannot name a constant).
func TestCRDShardCountMaximum(t *testing.T) {
	count := crdSchema(t).Properties["spec"].Properties["shards"].Properties["count"]
	if count.Maximum == nil || *count.Maximum != v1alpha1.MaxShardCount {
		t.Errorf("the CRD's maximum of spec.shards.count is %v, want v1alpha1.MaxShardCount = %d", count.Maximum, v1alpha1.MaxShardCount)
	}
}

// TestCRDsAreValid: every generated CRD passes the API server's own validation of a CRD,
// its rules' estimated CEL cost included, so that a rule that is too costly fails here
// rather than at install.
func TestCRDsAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatal(err)
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&crd)
		var internal apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &internal, nil); err != nil {
			t.Fatal(err)
		}
		if errs := crdvalidation.ValidateCustomResourceDefinition(t.Context(), &internal); len(errs) > 0 {
			t.Errorf("%s: %v", filepath.Base(f), errs.ToAggregate())
		}
	}
}
