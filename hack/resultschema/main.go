// Command resultschema writes the JSON Schema (draft 2020-12) of the result message a
// worker reports, derived from pkg/result so that the two cannot drift: the properties,
// their JSON types and which are required come from result.Report's fields and JSON
// tags, their descriptions from the fields' godoc, the version and the size limit from
// result.SchemaVersion and result.MaxMessageBytes. `make generate` runs it and `make
// verify-generate` fails when the checked-in schema is stale.
//
// What JSON Schema cannot say (the message's size in bytes, valid <= records, a name
// repeated in one object, integers written as 1.0) is stated in the schema's description
// and enforced by pkg/result's Decode, which stays the definition.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"batchledger.dev/batchledger/pkg/result"
)

// SchemaID is the schema's $id, the file name it is checked in under.
const SchemaID = "https://batchledger.dev/schemas/result-v1.schema.json"

func main() {
	out := flag.String("o", "schemas/result-v1.schema.json", "file to write")
	src := flag.String("src", "pkg/result/report.go", "the Go file declaring result.Report, for the fields' godoc")
	flag.Parse()
	b, err := Generate(*src)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
			err = os.WriteFile(*out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "resultschema:", err)
		os.Exit(1)
	}
}

// object is a JSON object that keeps its members in insertion order, so the schema reads
// in the order of the Go type and regenerates byte for byte.
type object []member

type member struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(m.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Generate returns the schema, indented, with a final newline; src is the Go file that
// declares result.Report (its fields' godoc become the descriptions).
func Generate(src string) ([]byte, error) {
	docs, err := fieldDocs(src, "Report")
	if err != nil {
		return nil, err
	}
	var props object
	var required []string
	rt := reflect.TypeFor[result.Report]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue // Extra: the other members, allowed below
		}
		optional := strings.Contains(","+opts+",", ",omitempty,")
		p := object{{"description", docs[f.Name]}}
		switch f.Type.Kind() {
		case reflect.String:
			if optional {
				p = append(p, member{"type", []string{"string", "null"}})
			} else {
				// Decode counts an empty string or null as absent: a required string is
				// a non-empty one.
				p = append(p, member{"type", "string"}, member{"minLength", 1})
			}
			// A string can hold no more characters than the message has bytes.
			p = append(p, member{"maxLength", result.MaxMessageBytes - 1})
		case reflect.Int64:
			// Counts: integer literals from 0 to the largest int64 (Decode rejects
			// negative counts and does not round floats).
			p = append(p, member{"type", []string{"integer", "null"}}, member{"minimum", 0}, member{"maximum", int64(math.MaxInt64)})
		default:
			return nil, fmt.Errorf("result.Report.%s: no JSON Schema for Go type %s; teach hack/resultschema", f.Name, f.Type)
		}
		if name == result.FieldVersion {
			p = object{{"description", docs[f.Name]}, {"const", result.SchemaVersion}}
		}
		if !optional {
			required = append(required, name)
		}
		props = append(props, member{name, p})
	}
	schema := object{
		{"$schema", "https://json-schema.org/draft/2020-12/schema"},
		{"$id", SchemaID},
		{"title", "batchledger shard result " + result.SchemaVersion},
		{"description", fmt.Sprintf("The result a batchledger worker writes to its container termination message "+
			"(/dev/termination-log) when its shard succeeded. Generated from pkg/result by hack/resultschema; "+
			"pkg/result's Decode is the definition. Beyond this schema, Decode also rejects: a message of %d bytes "+
			"or more (the kubelet truncates it), invalid UTF-8, a member name repeated, counts written with a "+
			"fraction or exponent (1.0, 1e3), valid greater than records, and numbers out of float64 range. "+
			"Members outside the schema are allowed and offered to the account's acceptance rule.", result.MaxMessageBytes)},
		{"type", "object"},
		{"properties", props},
		{"required", required},
		{"additionalProperties", true},
		// Not a validation keyword: tools and tests read the byte limit from here.
		{"x-maxMessageBytes", result.MaxMessageBytes},
	}
	b, err := marshal(schema)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// fieldDocs returns the godoc of each field of the struct type named typeName in file
// src, as one line.
func fieldDocs(src, typeName string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typeName {
			return true
		}
		if st, ok := ts.Type.(*ast.StructType); ok {
			for _, fld := range st.Fields.List {
				for _, id := range fld.Names {
					docs[id.Name] = strings.Join(strings.Fields(fld.Doc.Text()), " ")
				}
			}
		}
		return false
	})
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no struct type %s", src, typeName)
	}
	return docs, nil
}
