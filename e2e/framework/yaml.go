package framework

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LoadObjects decodes the objects of a multi-document YAML file (testdata written as users
// write them) into typed objects of Scheme. Namespaced objects are moved into namespace,
// whatever namespace the file names: the file stays as written, the test stays isolated.
func LoadObjects(t testing.TB, path, namespace string) []client.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(Scheme).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []client.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if isEmptyYAML(doc) {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cobj, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s: %T is not an object", path, obj)
		}
		namespaced, err := env.client.IsObjectNamespaced(cobj)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if namespaced {
			cobj.SetNamespace(namespace)
		}
		out = append(out, cobj)
	}
}

// LoadObject loads a file holding exactly one object of type T.
func LoadObject[T client.Object](t testing.TB, path, namespace string) T {
	t.Helper()
	objs := LoadObjects(t, path, namespace)
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want 1", path, len(objs))
	}
	obj, ok := objs[0].(T)
	if !ok {
		t.Fatalf("%s: object is a %T", path, objs[0])
	}
	return obj
}

func isEmptyYAML(doc []byte) bool {
	for _, l := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}
