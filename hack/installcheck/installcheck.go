// Package installcheck renders batchledger's two install paths, the kustomize tree in
// config/ and the Helm chart in charts/batchledger, and compares what matters for the
// controller to work the same under either: the CRDs, the RBAC rules and bindings, the
// webhook configurations, and the manager Deployment's security-relevant settings.
//
// Both paths take their CRDs, ClusterRole rules and webhook rules from the files
// `make generate` writes, so most drift would come from the hand-written parts (the pod
// webhook's selectors, leader-election RBAC, the Deployment) or from a template that
// stopped reading the generated copies. The test in this package (`make verify-install`)
// runs the real helm and kustomize binaries built by hack/build-install-tools.sh.
package installcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Release and Namespace are the Helm release name and namespace whose rendering names
// objects exactly as config/default does (namePrefix batchledger-, namespace
// batchledger-system), so that the two renderings can be compared object by object.
const (
	Release   = "batchledger"
	Namespace = "batchledger-system"
)

// Tools locates the helm and kustomize binaries.
type Tools struct {
	Helm, Kustomize string
}

// FindTools looks for helm and kustomize: $HELM and $KUSTOMIZE, then ROOT/bin (where
// hack/build-install-tools.sh links them), then PATH. A missing tool is an empty path.
func FindTools(root string) Tools {
	find := func(env, name string) string {
		if p := os.Getenv(env); p != "" {
			return p
		}
		if p := filepath.Join(root, "bin", name); isExecutable(p) {
			return p
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		return ""
	}
	return Tools{Helm: find("HELM", "helm"), Kustomize: find("KUSTOMIZE", "kustomize")}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// RepoRoot walks up from dir to the folder holding batchledger's go.mod.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module batchledger.dev/batchledger\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no batchledger go.mod above the working directory")
		}
		dir = parent
	}
}

// Objects is a rendering: every object, keyed by Key.
type Objects map[Key]*unstructured.Unstructured

// Key identifies an object in a rendering.
type Key struct {
	Kind, Namespace, Name string
}

// String is KIND/NAMESPACE/NAME, or KIND/NAME for a cluster-scoped object.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// Of returns the objects of one kind, sorted by namespace and name.
func (o Objects) Of(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for k, u := range o {
		if k.Kind == kind {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out
}

// Keys returns the keys, sorted.
func (o Objects) Keys() []Key {
	keys := make([]Key, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// Decode parses a multi-document YAML stream; a key seen twice is an error, since both
// tools would then apply one object over the other.
func Decode(data []byte) (Objects, error) {
	objs := Objects{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		k := Key{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
		if _, dup := objs[k]; dup {
			return nil, fmt.Errorf("%s rendered twice", k)
		}
		objs[k] = u
	}
}

// Into converts an object to a typed API object.
func Into(u *unstructured.Unstructured, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

// run executes a tool and returns its standard output.
func run(bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// RenderChart renders the chart as `helm install` would create it, CRDs included, with the
// given --set values.
func (t Tools) RenderChart(chart string, set ...string) (Objects, error) {
	args := []string{"template", Release, chart, "--namespace", Namespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := run(t.Helm, args...)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// RenderKustomize renders a kustomization directory.
func (t Tools) RenderKustomize(dir string) (Objects, error) {
	out, err := run(t.Kustomize, "build", dir)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// ConfigVariant copies the config/ tree under root into a temporary folder tmp, applies
// the textual edits (old → new) to its default/kustomization.yaml, and returns the copied
// default folder: how a user switches config/default to cert-manager or adds the
// ServiceMonitor, done on a copy. An edit whose old text is absent is an error, so that a
// reworded config/default fails the check instead of silently testing the default twice.
func ConfigVariant(root, tmp string, edits ...string) (string, error) {
	if len(edits)%2 != 0 {
		return "", errors.New("edits come in old, new pairs")
	}
	src := filepath.Join(root, "config")
	dst := filepath.Join(tmp, "config")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		return "", err
	}
	k := filepath.Join(dst, "default", "kustomization.yaml")
	b, err := os.ReadFile(k)
	if err != nil {
		return "", err
	}
	s := string(b)
	for i := 0; i < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			return "", fmt.Errorf("config/default/kustomization.yaml no longer contains %q", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return filepath.Join(dst, "default"), os.WriteFile(k, []byte(s), 0o644)
}
