package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The Kueue and JobSet repositories ship their webhook and CRD settings as kustomize
// components: a base plus patches (Kueue narrows its pod webhooks with namespace selectors,
// JobSet narrows its pod webhooks with an object selector, both turn on conversion webhooks
// for some CRDs). This file applies the two patch forms those components use, which is all
// the local cluster needs from kustomize.

type kustomization struct {
	Patches []struct {
		Path   string `json:"path"`
		Patch  string `json:"patch"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
}

func readKustomization(dir string) (*kustomization, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	k := &kustomization{}
	if err := yaml.Unmarshal(data, k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	return k, nil
}

// conversionCRDs returns the CRDs a kustomize CRD component switches to webhook conversion,
// keeping only those with more than one version among crds: a single-version CRD never calls
// its conversion webhook, and its manager need not serve one.
func conversionCRDs(dir string, crds []*apiextensionsv1.CustomResourceDefinition) ([]string, error) {
	k, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	versions := map[string]int{}
	for _, c := range crds {
		versions[c.Name] = len(c.Spec.Versions)
	}
	var out []string
	for _, p := range k.Patches {
		if p.Path == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, p.Path))
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter && versions[crd.Name] > 1 {
			out = append(out, crd.Name)
		}
	}
	return out, nil
}

// LoadWebhookComponent reads the webhook configurations of a kustomize webhook component
// directory (manifests.yaml plus the patches of its kustomization.yaml).
func LoadWebhookComponent(dir string) ([]client.Object, error) {
	objs, err := LoadWebhookManifests(filepath.Join(dir, "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	k, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range k.Patches {
		var err error
		switch {
		case p.Patch != "":
			err = applyMergePatch(objs, []byte(p.Patch))
		case p.Path != "" && p.Target != nil:
			var data []byte
			if data, err = os.ReadFile(filepath.Join(dir, p.Path)); err == nil {
				err = applyJSONPatch(objs, p.Target.Kind, p.Target.Name, data)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	return objs, nil
}

// applyMergePatch applies a strategic-merge patch to webhook configurations: webhooks are
// matched by name (their merge key) and maps merge recursively; anything else replaces.
func applyMergePatch(objs []client.Object, patch []byte) error {
	var p map[string]any
	if err := yaml.Unmarshal(patch, &p); err != nil {
		return err
	}
	meta, _ := p["metadata"].(map[string]any)
	for i, obj := range objs {
		if kindOf(obj) != p["kind"] || obj.GetName() != meta["name"] {
			continue
		}
		doc, err := toMap(obj)
		if err != nil {
			return err
		}
		hooks, _ := doc["webhooks"].([]any)
		patchHooks, _ := p["webhooks"].([]any)
		for _, ph := range patchHooks {
			phm, _ := ph.(map[string]any)
			for _, h := range hooks {
				if hm, _ := h.(map[string]any); hm != nil && hm["name"] == phm["name"] {
					mergeMaps(hm, phm)
				}
			}
		}
		if objs[i], err = fromMap(obj, doc); err != nil {
			return err
		}
	}
	return nil
}

// applyJSONPatch applies an RFC 6902 patch (YAML) to the configuration kind/name; an empty
// name targets every configuration of the kind, as in kustomize (Trainer's patches rename
// theirs that way).
func applyJSONPatch(objs []client.Object, kind, name string, patchYAML []byte) error {
	patchJSON, err := yaml.YAMLToJSON(patchYAML)
	if err != nil {
		return err
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return err
	}
	for i, obj := range objs {
		if kindOf(obj) != kind || (name != "" && obj.GetName() != name) {
			continue
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		out, err := patch.Apply(doc)
		if err != nil {
			return fmt.Errorf("patch %s %s: %w", kind, name, err)
		}
		fresh := reflectNew(obj)
		if err := json.Unmarshal(out, fresh); err != nil {
			return err
		}
		objs[i] = fresh
	}
	return nil
}

func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeMaps(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

func kindOf(obj client.Object) string { return obj.GetObjectKind().GroupVersionKind().Kind }

func toMap(obj client.Object) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(data, &m)
}

func fromMap(like client.Object, m map[string]any) (client.Object, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := reflectNew(like)
	return out, json.Unmarshal(data, out)
}

// reflectNew returns a zero value of obj's type, so unmarshalling a patched document into it
// keeps nothing the patch removed.
func reflectNew(obj client.Object) client.Object {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}
