#!/usr/bin/env bash
# Builds, from Go module sources only, every binary the kind e2e path needs beyond the
# local control plane's (hack/build-binaries.sh): kind itself, the node's kubelet, kubeadm
# and kube-proxy, CoreDNS, the reference CNI plugins, and two small programs of ours (the
# OCI runtime wrapper dockerd needs on this kind of machine, and the pod sandbox's pause).
#
# Binaries land in the shared cache outside the checkout (hack/lib.sh), one folder per
# component version, and are reused by later runs. Kubernetes' node binaries come from
# the same wrapper module (hack/tools/kubernetes) as the control plane, so they share its
# Go build cache.
#
#   hack/kind/build.sh      build what is missing; prints nothing else
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$HACK_DIR/kind/lib.sh"

# build_into builds the packages of the wrapper module hack/tools/MODULE into DIR
# (static_build), unless DIR already holds every binary, built from the module as it is
# now.
build_into() {
  local dir=$1 module=$2 ldflags=$3; shift 3
  local missing=0 pkg
  stamp_matches "$dir" "$module" || missing=1
  for pkg in "$@"; do [ -x "$dir/$(basename "$pkg")" ] || missing=1; done
  if [ "$missing" = 0 ]; then log "$(basename "$dir"): cached"; return; fi
  log "$(basename "$dir"): building $* (cold builds take minutes on 2 cores)"
  local start=$SECONDS tmp="$dir.tmp"
  rm -rf "$tmp"; mkdir -p "$tmp"
  # One `go build` for all: links overlap compiles.
  local args=() pkg
  for pkg in "$@"; do args+=("-ldflags=$pkg=$ldflags"); done
  static_build "$module" "${args[@]}" -o "$tmp/" "$@" || die "go build $* failed"
  module_stamp "$module" >"$tmp/.module-stamp"
  log "  built $* ($((SECONDS - start))s)"
  rm -rf "$dir"; mv "$tmp" "$dir"
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  build_into "$KIND_BIN_DIR" "$HACK_DIR/tools/kind" "-s -w" sigs.k8s.io/kind
  build_into "$NODE_BIN_DIR" "$HACK_DIR/tools/kubernetes" "$(kube_ldflags "$KUBE_VERSION")" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy
  build_into "$CNI_BIN_DIR" "$HACK_DIR/tools/cni-plugins" "-s -w" \
    github.com/containernetworking/plugins/plugins/main/bridge \
    github.com/containernetworking/plugins/plugins/ipam/host-local \
    github.com/containernetworking/plugins/plugins/main/loopback \
    github.com/containernetworking/plugins/plugins/meta/portmap
  build_into "$COREDNS_BIN_DIR" "$HACK_DIR/tools/coredns" "-s -w" batchledger.dev/hack/tools/coredns
  # Our own programs change with the checkout, so they are rebuilt (cheaply) every time.
  mkdir -p "$KIND_OWN_BIN_DIR"
  { static_build "$ROOT_DIR" -o "$KIND_OWN_BIN_DIR/runtime-wrapper" ./hack/kind/runtime-wrapper &&
    static_build "$ROOT_DIR" -ldflags "-s -w" -o "$KIND_OWN_BIN_DIR/pause" ./hack/kind/pause; } ||
    die "building hack/kind programs failed"
}

main "$@"
