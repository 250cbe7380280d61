#!/usr/bin/env bash
# Builds the real components batchledger is tested against, from Go module sources:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, and the
# Kueue, JobSet and Kubeflow Trainer managers. No image registry or setup-envtest download is needed, only
# the Go module proxy.
#
# Binaries land in a cache outside the checkout, keyed by component version, because CI
# clones the repository into a fresh folder each time: a cache inside the clone would be
# empty on every run. They are then linked into ./bin (git-ignored).
#
#   hack/build-binaries.sh            build what is missing, link into bin/
#   hack/build-binaries.sh kubectl    also kubectl (make kubectl; the kind path needs it)
#   BATCHLEDGER_CACHE_DIR=/x ...      use another cache folder
#
# Idempotent: a component already built for its pinned version is skipped.
#
# Cold builds are what a newcomer waits for, so they compile as little as possible: etcd,
# Kubernetes and Kueue come from one wrapper module (hack/tools/kubernetes), so each shared
# dependency has one version and each package is compiled once for all of them. JobSet's
# module (it needs controller-runtime v0.22) selects that module's versions of everything
# else (hack/tools/align.sh), so it reuses those packages from the Go build cache and
# compiles little of its own; so does Trainer's (hack/tools/trainer: 4 packages, since
# Kueue compiles the rest); kwok (k8s.io/* v0.36) compiles its own. One `go build` per
# module builds all its missing binaries (links overlap compiles); JobSet then Trainer,
# and kwok, build side by side, after Kubernetes: kwok shares nothing with Kubernetes, but compiling both
# at once on 2 cores cost 190 CPU-s more than one after the other (915 s against ~830 s
# wall for a cold `make demo`). kubectl is built only on request: nothing on the local
# control plane runs it, and it is ~70 CPU-s of a newcomer's first `make demo`.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# COMPONENTS lists, one a line: name|version|wrapper module (hack/tools/...)|ldflags|packages.
COMPONENTS="\
etcd|$ETCD_VERSION|kubernetes|-s -w|go.etcd.io/etcd/server/v3
kubernetes|$KUBE_VERSION|kubernetes|$(kube_ldflags "$KUBE_VERSION")|k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
kubectl|$KUBE_VERSION|kubernetes|$(kube_ldflags "$KUBE_VERSION")|k8s.io/kubernetes/cmd/kubectl
kueue|$KUEUE_VERSION|kubernetes|-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION|sigs.k8s.io/kueue/cmd/kueue
jobset|$JOBSET_VERSION|jobset|-s -w|sigs.k8s.io/jobset
trainer|$TRAINER_VERSION|trainer|-s -w|github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
kwok|$KWOK_VERSION|kwok|-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}|sigs.k8s.io/kwok/cmd/kwok"

# go_name is the file `go build -o DIR/` writes for a main package: its last path
# element, skipping a major version suffix (go.etcd.io/etcd/server/v3 -> server).
go_name() {
  local b; b=$(basename "$1")
  if [[ $b =~ ^v[0-9]+$ ]]; then basename "$(dirname "$1")"; else echo "$b"; fi
}

# bin_name is the name a package's binary is cached and linked under.
bin_name() { case $1 in go.etcd.io/etcd/server/v3) echo etcd ;; *) go_name "$1" ;; esac; }

# OPTIONAL lists the components built only when named on the command line (WANTED).
OPTIONAL=" kubectl "
WANTED=" "

# missing_components prints the names of the components of wrapper module MODULE whose
# cache entry lacks a binary, optional ones only when wanted.
missing_components() {
  local module=$1 name version mod ldflags pkgs pkg
  while IFS='|' read -r name version mod ldflags pkgs; do
    [ "$mod" = "$module" ] || continue
    [[ $OPTIONAL != *" $name "* || $WANTED == *" $name "* ]] || continue
    local dir; dir=$(component_dir "$name" "$version")
    if ! stamp_matches "$dir" "$HACK_DIR/tools/$module"; then echo "$name"; continue; fi
    for pkg in $pkgs; do
      if [ ! -x "$dir/$(bin_name "$pkg")" ]; then
        echo "$name"; break
      fi
    done
  done <<<"$COMPONENTS"
}

# build_module builds the listed components of wrapper module MODULE with one `go build`
# into a scratch folder, then moves each component's binaries into its cache entry.
build_module() {
  local module=$1; shift
  local want=" $* " start=$SECONDS scratch="$CACHE_DIR/.build-$module"
  local name version mod ldflags pkgs pkg args=() all=()
  while IFS='|' read -r name version mod ldflags pkgs; do
    [[ $want == *" $name "* ]] || continue
    for pkg in $pkgs; do
      args+=("-ldflags=$pkg=$ldflags"); all+=("$pkg")
    done
  done <<<"$COMPONENTS"
  log "$module module: building $* (${all[*]})"
  rm -rf "$scratch"; mkdir -p "$scratch"
  static_build "$HACK_DIR/tools/$module" "${args[@]}" -o "$scratch/" "${all[@]}" || die "$module module: go build failed"
  while IFS='|' read -r name version mod ldflags pkgs; do
    [[ $want == *" $name "* ]] || continue
    local out tmp; out=$(component_dir "$name" "$version"); tmp="$out.tmp"
    rm -rf "$tmp"; mkdir -p "$tmp"
    for pkg in $pkgs; do mv "$scratch/$(go_name "$pkg")" "$tmp/$(bin_name "$pkg")"; done
    module_stamp "$HACK_DIR/tools/$module" >"$tmp/.module-stamp"
    rm -rf "$out"; mv "$tmp" "$out"
  done <<<"$COMPONENTS"
  rm -rf "$scratch"
  log "$module module: built $* in $((SECONDS - start))s"
}

# build_missing builds the components of wrapper module MODULE that are not cached.
build_missing() {
  local module=$1 missing
  missing=$(missing_components "$module" | tr '\n' ' ')
  if [ -z "${missing// }" ]; then
    log "$module module: cached in $CACHE_DIR"
    return
  fi
  # shellcheck disable=SC2086 # missing is a list of names
  build_module "$module" $missing
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  local arg
  for arg in "$@"; do
    [[ $OPTIONAL == *" $arg "* ]] || die "unknown optional component $arg (have:$OPTIONAL)"
    WANTED+="$arg "
  done
  mkdir -p "$CACHE_DIR" "$BIN_DIR"
  build_missing kubernetes
  # JobSet and Trainer reuse what the Kubernetes build compiled (hack/tools/align.sh):
  # little of their own, so they build one after the other beside kwok.
  local aligned kwok
  { build_missing jobset && build_missing trainer; } & aligned=$!
  build_missing kwok & kwok=$!
  wait "$aligned" || die "building JobSet or Trainer failed"
  wait "$kwok" || die "building kwok failed"
  link_binaries
  log "binaries ready in $BIN_DIR"
}

main "$@"
