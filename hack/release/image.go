package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The manager image's contract, the same as the Dockerfile's (distroless static:nonroot):
// the static binary at /batchledger, run as the numeric non-root user 65532.
const (
	// imageEntrypoint is where the manager binary lives in the image.
	imageEntrypoint = "/batchledger"
	// imageUser is distroless's nonroot user and group, numeric so that no /etc/passwd is
	// needed (the Deployment's runAsNonRoot can verify a numeric user only).
	imageUser = "65532:65532"
)

// imageSpec says what to build: one static manager binary per platform.
type imageSpec struct {
	// Version is the release, recorded in the image's labels.
	Version string
	// Created is the images' creation time (and their files' mtime): the release commit's
	// time, so that a rebuild of one commit gives the same digests.
	Created time.Time
	// Binaries are the manager binaries, one per platform.
	Binaries []platformBinary
}

// platformBinary is a binary built for one platform.
type platformBinary struct {
	Platform v1.Platform
	Path     string
}

// buildImageIndex assembles the multi-platform manager image offline: for each platform,
// an empty base (like FROM scratch) plus one layer holding the binary, and an OCI image
// index over them. Nothing is pulled and no Docker engine is needed.
func buildImageIndex(spec imageSpec) (v1.ImageIndex, error) {
	var idx v1.ImageIndex = empty.Index
	for _, b := range spec.Binaries {
		p := b.Platform
		img, err := buildImage(spec, p, b.Path)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p.String(), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	return idx, nil
}

// buildImage is one platform's image: the binary in a single layer on an empty base.
func buildImage(spec imageSpec, p v1.Platform, binary string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := binaryLayerTar(bin, spec.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: spec.Created}
	cfg.Config.User = imageUser
	cfg.Config.Entrypoint = []string{imageEntrypoint}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "batchledger",
		"org.opencontainers.image.version":  spec.Version,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: spec.Created})
}

// binaryLayerTar is the layer's file system: the binary at imageEntrypoint, owned by
// root and executable by everyone (the image runs as imageUser, who must not be able to
// rewrite it).
func binaryLayerTar(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     imageEntrypoint[1:],
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  mtime,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeImageArchive writes idx as an OCI image layout whose index.json names it by
// refName (the release version, as an OCI tag), into dir, and then dir as one tar archive
// at archive: what `skopeo copy --all oci-archive:ARCHIVE docker://...` pushes.
func writeImageArchive(idx v1.ImageIndex, refName, dir, archive string, mtime time.Time) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": refName,
	})); err != nil {
		return err
	}
	return tarDir(dir, archive, mtime)
}

// tarDir writes the files under dir into an uncompressed tar archive (the layout's blobs
// are compressed already), in a stable order and with fixed owners and times.
func tarDir(dir, archive string, mtime time.Time) (err error) {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	// WalkDir visits in lexical order.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
