#!/usr/bin/env bash
# Builds the real components batchledger is tested against, from Go module sources:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, kwokctl,
# and the Kueue and JobSet managers. No image registry or setup-envtest download is
# needed, only the Go module proxy.
#
# Binaries land in a cache outside the checkout, keyed by component version, because CI
# clones the repository into a fresh folder each time: a cache inside the clone would be
# empty on every run. They are then linked into ./bin (git-ignored).
#
#   hack/build-binaries.sh            build what is missing, link into bin/
#   BATCHLEDGER_CACHE_DIR=/x ...      use another cache folder
#
# Idempotent: a component already built for its pinned version is skipped.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# bin_name is the binary a package builds to; etcd's main package is its module root.
bin_name() { case $1 in go.etcd.io/etcd/server/v3) echo etcd ;; *) basename "$1" ;; esac; }

build_component() {
  local name=$1 version=$2 ldflags=$3; shift 3
  local out; out=$(component_dir "$name" "$version")
  local missing=0 pkg bin
  for pkg in "$@"; do
    [ -x "$out/$(bin_name "$pkg")" ] || missing=1
  done
  if [ "$missing" = 0 ]; then
    log "$name $version: cached in $out"
    return
  fi
  log "$name $version: building $* (cold builds take minutes on 2 cores)"
  local start=$SECONDS tmp="$out.tmp"
  rm -rf "$tmp"; mkdir -p "$tmp"
  for pkg in "$@"; do
    bin=$(bin_name "$pkg")
    (cd "$HACK_DIR/tools/$name" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/$bin" "$pkg") \
      || die "$name: go build $pkg failed"
    log "  built $bin ($((SECONDS - start))s)"
  done
  rm -rf "$out"; mv "$tmp" "$out"
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  mkdir -p "$CACHE_DIR" "$BIN_DIR"
  build_component etcd "$ETCD_VERSION" "-s -w" go.etcd.io/etcd/server/v3
  build_component kubernetes "$KUBE_VERSION" "$(kube_ldflags "$KUBE_VERSION")" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  build_component kwok "$KWOK_VERSION" "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
    sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
  build_component kueue "$KUEUE_VERSION" "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    sigs.k8s.io/kueue/cmd/kueue
  build_component jobset "$JOBSET_VERSION" "-s -w" sigs.k8s.io/jobset
  link_binaries
  log "binaries ready in $BIN_DIR"
}

main "$@"
