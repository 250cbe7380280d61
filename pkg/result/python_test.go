package result

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// pythonDir holds the Python worker module, batchledger_worker.py.
var pythonDir = filepath.Join("..", "..", "python")

// pythonDriver runs requests through the Python module: each request either checks a
// message (validate, bytes as a list of ints, since a bad message need not be UTF-8) or
// builds one (build, keyword arguments); each answer holds the message or the reason.
const pythonDriver = `
import json, sys
sys.path.insert(0, sys.argv[1])
import batchledger_worker as bl
out = []
for req in json.load(sys.stdin):
    try:
        if req["op"] == "validate":
            bl.validate_message(bytes(req["validate"]))
            out.append({})
        else:
            out.append({"msg": bl.build_message(**req["build"])})
    except bl.ResultError as e:
        out.append({"reason": e.reason, "error": str(e)})
json.dump(out, sys.stdout)
`

type pyRequest struct {
	Op       string         `json:"op"` // validate or build
	Validate []int          `json:"validate"`
	Build    map[string]any `json:"build,omitempty"`
}

type pyAnswer struct {
	Msg    string `json:"msg"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func runPython(t *testing.T, reqs []pyRequest) []pyAnswer {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the Python module's agreement with Decode is not checked")
	}
	in, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", pythonDriver, pythonDir)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var answers []pyAnswer
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != len(reqs) {
		t.Fatalf("python3 answered %d of %d requests (%v): %s", len(answers), len(reqs), err, out)
	}
	return answers
}

// TestPythonValidatesLikeDecode: the Python module rejects every message of this
// package's tests for the reason Decode gives, and accepts the ones Decode accepts.
func TestPythonValidatesLikeDecode(t *testing.T) {
	cases := decodeCases(t)
	reqs := make([]pyRequest, len(cases))
	for i, tc := range cases {
		reqs[i].Op, reqs[i].Validate = "validate", make([]int, len(tc.msg))
		for j := 0; j < len(tc.msg); j++ {
			reqs[i].Validate[j] = int(tc.msg[j])
		}
	}
	for i, a := range runPython(t, reqs) {
		tc := cases[i]
		var want string
		if _, err := Decode(tc.msg); err != nil {
			want = err.(*Error).Reason
		}
		if a.Reason != want {
			t.Errorf("%s: Python says %q (%s), Decode says %q", tc.name, a.Reason, a.Error, want)
		}
	}
}

// TestPythonMessagesDecode: what the Python module builds, Decode accepts with the same
// fields, and what it refuses to build, Encode refuses too.
func TestPythonMessagesDecode(t *testing.T) {
	ok := Report{Version: SchemaVersion, Shard: "part-00017", InputRevision: "in-1", ModelRevision: "m-3", Digest: "sha256:00"}
	with := func(f func(*Report)) Report { r := ok; f(&r); return r }
	cases := []struct {
		name   string
		kwargs map[string]any
		want   Report // Decode's report; Encode of it must succeed exactly when Python's did
		refuse bool
	}{
		{"minimal", nil, ok, false},
		{"counts and output", map[string]any{"records": 120000, "valid": 119998, "output": "s3://b/p.parquet"},
			with(func(r *Report) { r.Records, r.Valid, r.Output = 120000, 119998, "s3://b/p.parquet" }), false},
		// json.Number: Go would send 3.0 as 3, an int to Python.
		{"extras keep int and float apart", map[string]any{"extra": map[string]any{"loss": 0.25, "epochs": 3, "f": json.Number("3.0"), "tags": []any{"a", 1}, "u": "ünï\u2028"}},
			with(func(r *Report) {
				r.Extra = map[string]any{"loss": 0.25, "epochs": int64(3), "f": 3.0, "tags": []any{"a", int64(1)}, "u": "ünï\u2028"}
			}), false},
		{"valid > records", map[string]any{"records": 1, "valid": 2}, with(func(r *Report) { r.Records, r.Valid = 1, 2 }), true},
		{"missing digest", map[string]any{"digest": ""}, with(func(r *Report) { r.Digest = "" }), true},
		{"too large", map[string]any{"output": string(bytes.Repeat([]byte("x"), MaxMessageBytes))},
			with(func(r *Report) { r.Output = string(bytes.Repeat([]byte("x"), MaxMessageBytes)) }), true},
	}
	reqs := make([]pyRequest, len(cases))
	for i, tc := range cases {
		kw := map[string]any{"shard": ok.Shard, "input_revision": ok.InputRevision, "model_revision": ok.ModelRevision, "digest": ok.Digest}
		for k, v := range tc.kwargs {
			kw[k] = v
		}
		reqs[i].Op, reqs[i].Build = "build", kw
	}
	for i, a := range runPython(t, reqs) {
		tc := cases[i]
		t.Run(tc.name, func(t *testing.T) {
			goMsg, encErr := Encode(tc.want)
			if tc.refuse {
				if a.Reason == "" || encErr == nil {
					t.Errorf("Python built %q, Encode: %v; want both to refuse", a.Msg, encErr)
				}
				return
			}
			if a.Reason != "" {
				t.Fatalf("Python refused: %s", a.Error)
			}
			got, err := Decode(a.Msg)
			if err != nil {
				t.Fatalf("Decode(%s): %v", a.Msg, err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("Decode(%s) =\n%#v\nwant\n%#v", a.Msg, *got, tc.want)
			}
			if encErr != nil || goMsg != a.Msg {
				t.Errorf("Python wrote\n%s\nEncode writes\n%s (%v)", a.Msg, goMsg, encErr)
			}
		})
	}
}
