/* batchledger authors. Licensed under the Apache License, Version 2.0. */

package version

import "testing"

func TestInfoString(t *testing.T) {
	cases := []struct {
		name string
		info Info
		want string
	}{
		{"a release from a clean tree", Info{Version: "v0.1.0", Revision: "0123456789abcdef", GoVersion: "go1.26.8", Platform: "linux/amd64"}, "v0.1.0 (0123456789ab, go1.26.8 linux/amd64)"},
		{"a dirty tree says so", Info{Version: "dev", Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26.8", Platform: "darwin/arm64"}, "dev (0123456789ab-dirty, go1.26.8 darwin/arm64)"},
		{"no VCS information", Info{Version: "dev", GoVersion: "go1.26.8", Platform: "linux/arm64"}, "dev (unknown revision, go1.26.8 linux/arm64)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGetReportsTheStampedVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9"
	if got := Get(); got.Version != "v9.9.9" || got.GoVersion == "" || got.Platform == "" {
		t.Errorf("Get() = %+v, want version v9.9.9 with Go version and platform", got)
	}
}
