package webhook

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// TestJSONPointerPaths applies a patch at each path to an object whose keys hold the
// characters a JSON pointer escapes, so a wrong escape either fails or adds a key of
// another name.
func TestJSONPointerPaths(t *testing.T) {
	const key = "example.com/a~b"
	cases := []struct {
		name string
		path string
		doc  string
		want string
	}{
		{
			name: "annotation of the admitted object",
			path: AnnotationPath(key),
			doc:  `{"metadata":{"annotations":{"example.com/a~b":"old"}}}`,
			want: `{"metadata":{"annotations":{"example.com/a~b":"new"}}}`,
		},
		{
			name: "label of the admitted object",
			path: LabelPath("", key),
			doc:  `{"metadata":{"labels":{"example.com/a~b":"old"}}}`,
			want: `{"metadata":{"labels":{"example.com/a~b":"new"}}}`,
		},
		{
			name: "label of a pod template",
			path: LabelPath("/spec/template", key),
			doc:  `{"spec":{"template":{"metadata":{"labels":{"example.com/a~b":"old"}}}}}`,
			want: `{"spec":{"template":{"metadata":{"labels":{"example.com/a~b":"new"}}}}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op, err := json.Marshal([]map[string]string{{"op": "replace", "path": tc.path, "value": "new"}})
			if err != nil {
				t.Fatal(err)
			}
			patch, err := jsonpatch.DecodePatch(op)
			if err != nil {
				t.Fatal(err)
			}
			got, err := patch.Apply([]byte(tc.doc))
			if err != nil {
				t.Fatalf("apply %s: %v", tc.path, err)
			}
			if !jsonpatch.Equal(got, []byte(tc.want)) {
				t.Errorf("apply %s: got %s, want %s", tc.path, got, tc.want)
			}
		})
	}
}
