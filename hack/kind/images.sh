#!/usr/bin/env bash
# Builds the images the kind cluster runs, from the static binaries already built:
#   batchledger.dev/batchledger:e2e      the manager (bin/batchledger, `make build`)
#   batchledger.dev/example-worker:e2e   the example worker (cmd/example-worker)
#   registry.k8s.io/kueue/kueue:v0.17.0  Kueue's manager (hack/build-binaries.sh)
#   registry.k8s.io/jobset/jobset:v0.11.1 JobSet's manager (hack/build-binaries.sh)
#   ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.2.0  Trainer's manager (likewise)
# Each is FROM scratch: nothing can be pulled here, so neither the golang nor the
# distroless base of the production Dockerfile exists. The manager binary is built
# exactly as that Dockerfile's build stage builds it (static, -trimpath), so the image
# differs from a registry build only in its (empty) base.
#
#   hack/kind/images.sh            build the five images (needs DOCKER_HOST from docker.sh)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$HACK_DIR/kind/lib.sh"

# scratch_image TAG BINARY PATH: an image running BINARY, copied to PATH, as the
# non-root user the charts' runAsNonRoot asks for.
scratch_image() {
  local tag=$1 binary=$2 path=$3
  local ctx; ctx=$(mktemp -d)
  cp "$binary" "$ctx/binary"
  DOCKER_BUILDKIT=0 docker build -q -t "$tag" -f - "$ctx" >/dev/null <<DOCKERFILE || die "docker build $tag failed"
FROM scratch
COPY binary $path
USER 65532:65532
ENTRYPOINT ["$path"]
DOCKERFILE
  rm -rf "$ctx"
  log "image $tag"
}

main() {
  docker info >/dev/null 2>&1 || die "no Docker engine: run hack/kind/docker.sh up first"
  local out="$ROOT_DIR/_output/kind/bin"
  mkdir -p "$out"
  { static_build "$ROOT_DIR" -ldflags "-s -w -X batchledger.dev/batchledger/pkg/version.Version=e2e" -o "$out/batchledger" ./cmd/batchledger &&
    static_build "$ROOT_DIR" -ldflags "-s -w" -o "$out/example-worker" ./cmd/example-worker; } ||
    die "building the manager and the example worker failed"
  scratch_image "$MANAGER_IMAGE" "$out/batchledger" /batchledger
  scratch_image "$WORKER_IMAGE" "$out/example-worker" /example-worker
  scratch_image "registry.k8s.io/kueue/kueue:$KUEUE_VERSION" "$(component_dir kueue "$KUEUE_VERSION")/kueue" /manager
  scratch_image "registry.k8s.io/jobset/jobset:$JOBSET_VERSION" "$(component_dir jobset "$JOBSET_VERSION")/jobset" /manager
  scratch_image "$TRAINER_IMAGE" "$(component_dir trainer "$TRAINER_VERSION")/trainer-controller-manager" /manager
}

main "$@"
