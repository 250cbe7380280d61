package version_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/version"
)

// TestVersionCommand: `kubectl batchledger version` prints the stamped release in each
// output format, without a cluster, and refuses a format it does not know.
func TestVersionCommand(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v9.8.7"
	want := version.Get()
	cases := []struct {
		name     string
		args     []string
		wantCode int
		// check inspects stdout; nil means stdout must be empty.
		check func(t *testing.T, out string)
	}{
		{"one line by default", []string{"version"}, options.ExitOK, func(t *testing.T, out string) {
			if out != want.String()+"\n" {
				t.Errorf("stdout = %q, want %q", out, want.String()+"\n")
			}
		}},
		{"json", []string{"version", "-o", "json"}, options.ExitOK, decodesTo(want, json.Unmarshal)},
		{"yaml", []string{"version", "--output=yaml"}, options.ExitOK, decodesTo(want, func(b []byte, v any) error { return yaml.Unmarshal(b, v) })},
		{"unknown format", []string{"version", "-o", "wide"}, options.ExitError, nil},
		{"no arguments", []string{"version", "extra"}, options.ExitError, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// No kubeconfig at all: version must not need one.
			t.Setenv("KUBECONFIG", t.TempDir()+"/absent")
			var out, errOut bytes.Buffer
			code := cli.Execute(t.Context(), tc.args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			if tc.check == nil {
				if out.Len() != 0 || errOut.Len() == 0 {
					t.Errorf("want only an error; stdout %q, stderr %q", out.String(), errOut.String())
				}
				return
			}
			tc.check(t, out.String())
		})
	}
}

// decodesTo checks that stdout decodes (with unmarshal) to exactly want.
func decodesTo(want version.Info, unmarshal func([]byte, any) error) func(*testing.T, string) {
	return func(t *testing.T, out string) {
		t.Helper()
		var got version.Info
		if err := unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("decoding %q: %v", out, err)
		}
		if got != want {
			t.Errorf("decoded %+v, want %+v", got, want)
		}
	}
}
