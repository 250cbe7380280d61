// Package crdschema reads batchledger's generated CRDs (config/crd/bases) for unit tests
// that validate objects as the API server does.
package crdschema

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Schema is the OpenAPI schema of the served version of the CRD in file (a name in
// config/crd/bases, e.g. "batchledger.dev_batchaccounts.yaml"), in the API server's
// internal form.
func Schema(t testing.TB, file string) *apiextensions.JSONSchemaProps {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != v1alpha1.GroupVersion.Version {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		return &internal
	}
	t.Fatalf("%s has no version %s", file, v1alpha1.GroupVersion.Version)
	return nil
}

// Validator validates objects against the OpenAPI schema of the CRD in file, as the API
// server does (its CEL rules apart).
func Validator(t testing.TB, file string) validation.SchemaValidator {
	t.Helper()
	sv, _, err := validation.NewSchemaValidator(Schema(t, file))
	if err != nil {
		t.Fatal(err)
	}
	return sv
}
