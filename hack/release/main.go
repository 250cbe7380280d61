// Command release builds batchledger's release artifacts offline, from this repository
// and the pinned tools, into one folder (`make release`, default _output/release):
//
//   - install.yaml: config/default rendered by the pinned kustomize, with the manager
//     image set to IMAGE:VERSION;
//   - batchledger-X.Y.Z.tgz: the Helm chart, packaged by the pinned helm with version
//     X.Y.Z and appVersion vX.Y.Z (the image tag it defaults to);
//   - kubectl-batchledger_VERSION_OS_ARCH.tar.gz: the kubectl plugin for linux and darwin
//     on amd64 and arm64, with the LICENSE;
//   - batchledger-image_VERSION.oci.tar: the manager image for linux/amd64 and
//     linux/arm64, one OCI image index in an OCI layout archive, built without a Docker
//     engine (image.go);
//   - SHA256SUMS over all of them.
//
// Every binary is stamped with VERSION (pkg/version).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/mod/semver"
)

// What the release is built from; TestReleaseConfigMatchesTheRepository checks each
// against the files that also use it, so that a rename there cannot leave a release that
// silently ships the old thing.
const (
	// versionVar is the variable -ldflags -X stamps the version into (pkg/version).
	versionVar = "batchledger.dev/batchledger/pkg/version.Version"
	// kustomizeDir is what `make kustomize-build` renders and install.yaml is made of.
	kustomizeDir = "config/default"
	// managerImageName is the manager container's image name in config/manager, which the
	// install.yaml overlay replaces with the release image.
	managerImageName = "batchledger"
	// chartDir is the Helm chart; its values.yaml's image.repository defaults to
	// managerImageName.
	chartDir = "charts/batchledger"
	// pluginPackage and managerPackage are the two commands released.
	pluginPackage  = "./cmd/kubectl-batchledger"
	managerPackage = "./cmd/batchledger"
)

// pluginPlatforms are the platforms the kubectl plugin is released for.
var pluginPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"},
	{OS: "darwin", Architecture: "arm64"},
}

// imagePlatforms are the platforms of the manager image; arm64 is variant v8, as
// distroless and most base images declare it.
var imagePlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
}

// options are the command line.
type options struct {
	version, image, out           string
	helm, kustomize, goTool, root string
}

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "Release version, vMAJOR.MINOR.PATCH[-PRERELEASE] (make release: VERSION, from git describe).")
	flag.StringVar(&o.image, "image", managerImageName, "Image repository of the manager; install.yaml and the chart default to IMAGE:VERSION.")
	flag.StringVar(&o.out, "out", "_output/release", "Folder the artifacts are written to (emptied first).")
	flag.StringVar(&o.helm, "helm", "bin/helm", "The pinned helm (make install-tools).")
	flag.StringVar(&o.kustomize, "kustomize", "bin/kustomize", "The pinned kustomize (make install-tools).")
	flag.StringVar(&o.goTool, "go", "go", "The go command that builds the binaries.")
	flag.StringVar(&o.root, "root", ".", "The repository's root.")
	flag.Parse()
	start := time.Now()
	arts, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	fmt.Printf("release %s in %s (%s):\n", o.version, o.out, time.Since(start).Round(time.Second))
	for _, a := range arts {
		fmt.Printf("  %-48s %10s\n", a.name, humanSize(a.size))
	}
}

// artifact is one file written into the output folder.
type artifact struct {
	name string
	size int64
}

// run builds every artifact and returns them in the order of SHA256SUMS.
func run(ctx context.Context, o options) ([]artifact, error) {
	if err := checkVersion(o.version); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return nil, err
	}
	out := absUnder(root, o.out)
	work := out + ".work"
	for _, d := range []string{out, work} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	defer os.RemoveAll(work)
	b := &builder{o: o, root: root, out: out, work: work, ref: o.image + ":" + o.version}
	if b.created, err = releaseTime(ctx, root); err != nil {
		return nil, err
	}
	for _, step := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"install.yaml", b.installYAML},
		{"chart", b.chart},
		{"plugin binaries", b.plugins},
		{"manager image", b.managerImage},
	} {
		fmt.Fprintf(os.Stderr, "release: %s...\n", step.name)
		if err := step.fn(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return writeChecksums(out)
}

// checkVersion refuses a version a chart cannot carry: Helm needs SemVer 2, and the
// release tags are vX.Y.Z (git describe gives vX.Y.Z-N-gHASH between tags, which is a
// valid prerelease).
func checkVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != strings.SplitN(v, "+", 2)[0] {
		return fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]: tag a release (git tag v0.1.0) or pass VERSION=v0.1.0", v)
	}
	return nil
}

// chartVersion is the chart's version for a release: the release without its leading v
// (the chart's appVersion is the release itself).
func chartVersion(release string) string { return strings.TrimPrefix(release, "v") }

// releaseTime is when the release's sources were committed (SOURCE_DATE_EPOCH wins): the
// images' creation time and the archives' file times, so that rebuilding one commit
// gives the same bytes.
func releaseTime(ctx context.Context, root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct")
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("reading the commit time (set SOURCE_DATE_EPOCH without git): %w", err)
		}
		s = strings.TrimSpace(string(b))
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("release time %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// builder holds what the steps share.
type builder struct {
	o               options
	root, out, work string
	ref             string
	created         time.Time
}

// installYAML renders config/default through an overlay that only sets the image.
func (b *builder) installYAML(ctx context.Context) error {
	overlay := filepath.Join(b.work, "install")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		return err
	}
	base, err := filepath.Rel(overlay, filepath.Join(b.root, kustomizeDir))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(installOverlay(base, b.o.image, b.o.version)), 0o644); err != nil {
		return err
	}
	rendered, err := b.output(ctx, absUnder(b.root, b.o.kustomize), "build", overlay)
	if err != nil {
		return err
	}
	if err := checkImages(rendered, b.ref); err != nil {
		return fmt.Errorf("the rendered install: %w", err)
	}
	return os.WriteFile(filepath.Join(b.out, "install.yaml"), rendered, 0o644)
}

// installOverlay is the kustomization install.yaml is rendered from: config/default (at
// base, relative to the overlay) with the manager's image replaced by image:tag.
func installOverlay(base, image, tag string) string {
	return fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: %s
  newName: %s
  newTag: %s
`, base, managerImageName, image, tag)
}

// checkImages fails unless every image a manifest names is ref, and one does.
func checkImages(manifests []byte, ref string) error {
	n := 0
	for line := range strings.Lines(string(manifests)) {
		// "image: X" or, first in a list item, "- image: X".
		img, ok := strings.CutPrefix(strings.TrimPrefix(strings.TrimSpace(line), "- "), "image: ")
		if !ok {
			continue
		}
		if img = strings.Trim(img, `"'`); img != ref {
			return fmt.Errorf("names image %s, want %s", img, ref)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("names no image, want %s", ref)
	}
	return nil
}

// chart packages a copy of the chart whose image repository is the release's (the tag
// defaults to the appVersion helm package stamps), and checks what it renders.
func (b *builder) chart(ctx context.Context) error {
	src := filepath.Join(b.root, chartDir)
	dst := filepath.Join(b.work, "chart", filepath.Base(chartDir))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return err
	}
	if b.o.image != managerImageName {
		values := filepath.Join(dst, "values.yaml")
		v, err := os.ReadFile(values)
		if err != nil {
			return err
		}
		nv, err := setChartImage(v, b.o.image)
		if err != nil {
			return err
		}
		if err := os.WriteFile(values, nv, 0o644); err != nil {
			return err
		}
	}
	helm := absUnder(b.root, b.o.helm)
	cv := chartVersion(b.o.version)
	if _, err := b.output(ctx, helm, "package", dst, "--version", cv, "--app-version", b.o.version, "--destination", b.out); err != nil {
		return err
	}
	pkg := filepath.Join(b.out, fmt.Sprintf("%s-%s.tgz", filepath.Base(chartDir), cv))
	rendered, err := b.output(ctx, helm, "template", "batchledger", pkg, "--namespace", "batchledger-system")
	if err != nil {
		return err
	}
	if err := checkImages(rendered, b.ref); err != nil {
		return fmt.Errorf("the packaged chart: %w", err)
	}
	return nil
}

// chartImageLine is values.yaml's image.repository line with the chart's default.
const chartImageLine = "  repository: " + managerImageName + "\n"

// setChartImage replaces the default image repository in the chart's values.yaml with
// image, keeping the file's comments (a YAML round trip would drop them).
func setChartImage(values []byte, image string) ([]byte, error) {
	if n := bytes.Count(values, []byte(chartImageLine)); n != 1 {
		return nil, fmt.Errorf("values.yaml has %d lines %q, want 1", n, strings.TrimSpace(chartImageLine))
	}
	return bytes.Replace(values, []byte(chartImageLine), []byte("  repository: "+image+"\n"), 1), nil
}

// plugins cross-compiles the kubectl plugin and archives each with the LICENSE.
func (b *builder) plugins(ctx context.Context) error {
	license, err := os.ReadFile(filepath.Join(b.root, "LICENSE"))
	if err != nil {
		return err
	}
	for _, p := range pluginPlatforms {
		bin := filepath.Join(b.work, "plugin", p.OS+"-"+p.Architecture, "kubectl-batchledger")
		if err := b.goBuild(ctx, p, pluginPackage, bin); err != nil {
			return err
		}
		if err := b.checkStamp(ctx, p, bin, "version"); err != nil {
			return err
		}
		exe, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("kubectl-batchledger_%s_%s_%s.tar.gz", b.o.version, p.OS, p.Architecture)
		if err := writeTarGz(filepath.Join(b.out, name), b.created, []tarFile{
			{"kubectl-batchledger", 0o755, exe},
			{"LICENSE", 0o644, license},
		}); err != nil {
			return err
		}
	}
	return nil
}

// managerImage builds the manager for each image platform and writes the image archive.
func (b *builder) managerImage(ctx context.Context) error {
	spec := imageSpec{Version: b.o.version, Created: b.created}
	for _, p := range imagePlatforms {
		bin := filepath.Join(b.work, "manager", p.OS+"-"+p.Architecture, "batchledger")
		if err := b.goBuild(ctx, p, managerPackage, bin); err != nil {
			return err
		}
		if err := b.checkStamp(ctx, p, bin, "--version"); err != nil {
			return err
		}
		spec.Binaries = append(spec.Binaries, platformBinary{p, bin})
	}
	idx, err := buildImageIndex(spec)
	if err != nil {
		return err
	}
	archive := filepath.Join(b.out, fmt.Sprintf("batchledger-image_%s.oci.tar", b.o.version))
	return writeImageArchive(idx, b.o.version, filepath.Join(b.work, "image"), archive, b.created)
}

// goBuild builds pkg for p the way `make build` and the Dockerfile do: static, trimmed,
// stripped and stamped with the version.
func (b *builder) goBuild(ctx context.Context, p v1.Platform, pkg, out string) error {
	cmd := exec.CommandContext(ctx, b.o.goTool, "build", "-trimpath",
		"-ldflags", fmt.Sprintf("-s -w -X %s=%s", versionVar, b.o.version), "-o", out, pkg)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "release:   %s for %s/%s\n", pkg, p.OS, p.Architecture)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", pkg, p.String(), err)
	}
	return nil
}

// checkStamp runs a binary built for this machine's platform with args and checks that
// it says it is the release; binaries for other platforms are not run.
func (b *builder) checkStamp(ctx context.Context, p v1.Platform, bin string, args ...string) error {
	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return nil
	}
	out, err := b.output(ctx, bin, args...)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(out), b.o.version+" (") {
		return fmt.Errorf("%s %s printed %q, want the version %s", filepath.Base(bin), strings.Join(args, " "), out, b.o.version)
	}
	return nil
}

// output runs a tool in the repository's root and returns its stdout.
func (b *builder) output(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Dir = b.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(tool), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// tarFile is one file of a plugin archive.
type tarFile struct {
	name string
	mode int64
	data []byte
}

// writeTarGz writes files into a gzipped tar with fixed times and owners.
func writeTarGz(path string, mtime time.Time, files []tarFile) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// writeChecksums writes SHA256SUMS (the format `sha256sum -c` reads) over every file in
// out and returns them all, SHA256SUMS last.
func writeChecksums(out string) ([]artifact, error) {
	entries, err := os.ReadDir(out)
	if err != nil {
		return nil, err
	}
	var sums strings.Builder
	var arts []artifact
	for _, e := range entries { // ReadDir sorts by name.
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("unexpected %s in %s", e.Name(), out)
		}
		sum, size, err := sha256File(filepath.Join(out, e.Name()))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, e.Name())
		arts = append(arts, artifact{e.Name(), size})
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	return append(arts, artifact{"SHA256SUMS", int64(sums.Len())}), nil
}

func sha256File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// absUnder resolves p against root unless it is absolute.
func absUnder(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
