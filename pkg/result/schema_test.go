package result

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaFile is the checked-in JSON Schema that hack/resultschema generates from this
// package (`make generate`).
var schemaFile = filepath.Join("..", "..", "schemas", "result-v1.schema.json")

// beyondSchema names the decodeCases that Decode rejects for what JSON Schema cannot
// express; the schema accepts them (their JSON parses) and must not be read as the
// whole contract. Any other disagreement is a drift between the schema and Decode.
var beyondSchema = map[string]string{
	"duplicate field":           "a JSON parser keeps one of the two members; the schema never sees both",
	"exactly 4096 bytes":        "the size of the message in bytes",
	"more than 4096 bytes":      "the size of the message in bytes",
	"valid > records":           "a relation between two members",
	"extra number out of range": "a number beyond float64 is still a JSON number",
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatalf("%v (run make generate)", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("result-v1.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("result-v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaAccepts reports whether msg is one JSON document the schema accepts.
func schemaAccepts(s *jsonschema.Schema, msg string) (bool, error) {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(msg))
	if err != nil {
		return false, err // not one JSON document: nothing for a schema to accept
	}
	return s.Validate(inst) == nil, s.Validate(inst)
}

// TestSchemaAgreesWithDecode validates every good and bad message of the package's tests
// against the checked-in schema: the schema accepts exactly what Decode accepts, except
// for the rejections listed in beyondSchema, which JSON Schema cannot express.
func TestSchemaAgreesWithDecode(t *testing.T) {
	s := compileSchema(t)
	cases := decodeCases(t)
	// Messages Encode writes are accepted by both.
	for _, r := range []Report{
		{Shard: "part-1", InputRevision: "in", ModelRevision: "m", Digest: "sha256:00", Records: 10, Valid: 9},
		{Shard: "p", InputRevision: "in", ModelRevision: "m", Output: "s3://b/k", Digest: "d", Extra: map[string]any{"loss": 0.25, "tags": []any{"a"}}},
	} {
		msg, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, decodeCase{name: "encoded " + r.Shard, msg: msg})
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, decodeErr := Decode(tc.msg)
			accepted, why := schemaAccepts(s, tc.msg)
			if reason, ok := beyondSchema[tc.name]; ok {
				seen[tc.name] = true
				if decodeErr == nil || !accepted {
					t.Errorf("listed as beyond the schema (%s), but Decode: %v, schema accepts: %v (%v)", reason, decodeErr, accepted, why)
				}
				return
			}
			if accepted != (decodeErr == nil) {
				t.Errorf("schema accepts = %v (%v); Decode: %v", accepted, why, decodeErr)
			}
		})
	}
	for name := range beyondSchema {
		if !seen[name] {
			t.Errorf("beyondSchema names %q, which is no test case", name)
		}
	}
}

// TestSchemaLimits: the limits the schema states are this package's constants.
func TestSchemaLimits(t *testing.T) {
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Max        int `json:"x-maxMessageBytes"`
		Properties map[string]struct {
			Const string `json:"const"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Max != MaxMessageBytes {
		t.Errorf("x-maxMessageBytes = %d, want %d", doc.Max, MaxMessageBytes)
	}
	if got := doc.Properties[FieldVersion].Const; got != SchemaVersion {
		t.Errorf("version const = %q, want %q", got, SchemaVersion)
	}
}
