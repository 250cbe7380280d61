/* batchledger authors. Licensed under the Apache License, Version 2.0. */

// Package version says which batchledger a binary is: the release it was stamped with at
// build time and the source revision Go recorded. The manager, the kubectl plugin, the
// chart's appVersion and the metrics' build info all read it from here.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release this binary was built as, stamped at build time with
// -ldflags "-X batchledger.dev/batchledger/pkg/version.Version=v0.1.0"; "dev" otherwise.
var Version = "dev"

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the stamped release (Version).
	Version string `json:"version"`
	// Revision is the VCS commit Go recorded at build time ("" when built without VCS
	// information, e.g. with -buildvcs=false or from a module download).
	Revision string `json:"revision,omitempty"`
	// Modified tells whether the work tree had uncommitted changes at build time.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is the binary's GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	return info
}

// String is the one-line form printed by --version: "v0.1.0 (abc1234, go1.26.8 linux/amd64)".
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown revision"
	} else if i.Modified {
		rev += "-dirty"
	}
	return fmt.Sprintf("%s (%s, %s %s)", i.Version, rev, i.GoVersion, i.Platform)
}
