#!/usr/bin/env bash
# Builds the install tooling, helm and kustomize, and the linter, golangci-lint, from Go
# module sources (no release downloads, only the Go module proxy), into the same cache as
# hack/build-binaries.sh and links them into ./bin.
#
# The versions are those pinned by the wrapper modules hack/tools/helm,
# hack/tools/kustomize and hack/tools/golangci-lint (their go.mod and committed go.sum), so
# a bump is one `go get` there and nothing else to keep in step. A tool already built for
# its version is reused.
#
#   hack/build-install-tools.sh                build what is missing, link bin/helm and bin/kustomize
#   hack/build-install-tools.sh golangci-lint  the same for bin/golangci-lint (`make lint`; its
#                                              cold build takes ~5 CPU-minutes, so only lint asks for it)
#   hack/build-install-tools.sh gremlins       the same for bin/gremlins (hack/mutate.sh)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# module_version prints the version a wrapper module pins for a module path.
module_version() {
  (cd "$HACK_DIR/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

# build_tool builds pkg from the wrapper module hack/tools/NAME into the cache entry for
# NAME-VERSION, unless that entry already holds the binary.
build_tool() {
  local name=$1 version=$2 pkg=$3 ldflags=$4
  local out; out=$(component_dir "$name" "$version")
  if [ -x "$out/$name" ]; then
    log "$name $version: cached in $out"
  else
    log "$name $version: building $pkg"
    local start=$SECONDS tmp="$out.tmp"
    rm -rf "$tmp"; mkdir -p "$tmp"
    static_build "$HACK_DIR/tools/$name" -ldflags "$ldflags" -o "$tmp/$name" "$pkg" || die "$name: go build $pkg failed"
    rm -rf "$out"; mv "$tmp" "$out"
    log "  built $name ($((SECONDS - start))s)"
  fi
  ln -sf "$out/$name" "$BIN_DIR/$name"
}

# install_tools builds helm and kustomize.
install_tools() {
  local helm_version kustomize_version client_go major minor
  helm_version=$(module_version helm helm.sh/helm/v3)
  kustomize_version=$(module_version kustomize sigs.k8s.io/kustomize/kustomize/v5)
  # helm's release build stamps its version and the Kubernetes version its client-go
  # speaks (lint and `helm template` report it as .Capabilities.KubeVersion).
  client_go=$(module_version helm k8s.io/client-go)
  major=$(( $(echo "${client_go#v}" | cut -d. -f1) + 1 )); minor=$(echo "${client_go#v}" | cut -d. -f2)
  local p helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    helm_ldflags+=" -X $p.k8sVersionMajor=$major -X $p.k8sVersionMinor=$minor"
  done
  build_tool helm "$helm_version" helm.sh/helm/v3/cmd/helm "$helm_ldflags"
  build_tool kustomize "$kustomize_version" sigs.k8s.io/kustomize/kustomize/v5 "-s -w"
  log "install tools ready in $BIN_DIR"
}

# lint_tools builds golangci-lint (it reports the version of its module from build info).
lint_tools() {
  local version
  version=$(module_version golangci-lint github.com/golangci/golangci-lint/v2)
  build_tool golangci-lint "$version" github.com/golangci/golangci-lint/v2/cmd/golangci-lint "-s -w"
}

# mutate_tools builds gremlins, the mutation tester of hack/mutate.sh.
mutate_tools() {
  local version
  version=$(module_version gremlins github.com/go-gremlins/gremlins)
  build_tool gremlins "$version" github.com/go-gremlins/gremlins/cmd/gremlins "-s -w"
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  mkdir -p "$CACHE_DIR" "$BIN_DIR"
  [ $# -gt 0 ] || set -- install
  local what
  for what in "$@"; do
    case $what in
      install) install_tools ;;
      golangci-lint) lint_tools ;;
      gremlins) mutate_tools ;;
      *) die "unknown tool set $what (install, golangci-lint or gremlins)" ;;
    esac
  done
}

main "$@"
