package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestManagerImageIndex builds the image from small fake binaries into an OCI layout
// archive and reads it back: one index, named by the version, with an image per platform
// whose single layer is that platform's binary at /batchledger, run as 65532 with the
// binary as entrypoint; and a rebuild gives the same digest.
func TestManagerImageIndex(t *testing.T) {
	dir := t.TempDir()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := imageSpec{Version: "v1.2.3", Created: created}
	contents := map[string][]byte{}
	for _, p := range imagePlatforms {
		path := filepath.Join(dir, "bin-"+p.Architecture)
		content := []byte("#!fake manager for " + p.String())
		if err := os.WriteFile(path, content, 0o755); err != nil {
			t.Fatal(err)
		}
		spec.Binaries = append(spec.Binaries, platformBinary{p, path})
		contents[p.String()] = content
	}
	idx, err := buildImageIndex(spec)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.oci.tar")
	layoutDir := filepath.Join(dir, "layout")
	if err := writeImageArchive(idx, spec.Version, layoutDir, archive, created); err != nil {
		t.Fatal(err)
	}
	if names := tarNames(t, archive); !slices.Contains(names, "oci-layout") || !slices.Contains(names, "index.json") {
		t.Errorf("archive holds %v, want an OCI layout (oci-layout, index.json, blobs/)", names)
	}

	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want the one image index", len(topManifest.Manifests))
	}
	entry := topManifest.Manifests[0]
	if entry.MediaType != types.OCIImageIndex || entry.Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Errorf("index.json entry %s %v, want an OCI image index named v1.2.3", entry.MediaType, entry.Annotations)
	}
	wantDigest, err := idx.Digest()
	if err != nil || entry.Digest != wantDigest {
		t.Errorf("index.json names %s, want the built index %s (%v)", entry.Digest, wantDigest, err)
	}
	multi, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range im.Manifests {
		platforms = append(platforms, desc.Platform.String())
		img, err := multi.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkManagerImage(t, desc.Platform, img, contents[desc.Platform.String()])
	}
	if want := []string{"linux/amd64", "linux/arm64/v8"}; !slices.Equal(platforms, want) {
		t.Errorf("index platforms %v, want %v", platforms, want)
	}

	again, err := buildImageIndex(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := again.Digest(); err != nil || d != wantDigest {
		t.Errorf("rebuild digest %s, want %s (%v): the image must be reproducible", d, wantDigest, err)
	}
}

// checkManagerImage checks one platform's image: OCI media types, its config, and a single
// layer holding exactly the binary.
func checkManagerImage(t *testing.T, p *v1.Platform, img v1.Image, wantBinary []byte) {
	t.Helper()
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("%s: media type %s (%v), want %s", p, mt, err, types.OCIManifestSchema1)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Architecture || cfg.Variant != p.Variant {
		t.Errorf("%s: config platform %s/%s/%s", p, cfg.OS, cfg.Architecture, cfg.Variant)
	}
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/batchledger"}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("%s: user %q entrypoint %v cmd %v, want 65532:65532 [/batchledger] []", p, cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("%s: labels %v, want the version", p, cfg.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", p, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hdr.Name)
		got, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == "batchledger" && (hdr.Mode != 0o755 || hdr.Uid != 0 || !bytes.Equal(got, wantBinary)) {
			t.Errorf("%s: /batchledger mode %o uid %d content %q, want 755, root, %q", p, hdr.Mode, hdr.Uid, got, wantBinary)
		}
	}
	if !slices.Equal(files, []string{"batchledger"}) {
		t.Errorf("%s: layer holds %v, want only batchledger", p, files)
	}
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}
