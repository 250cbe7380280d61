#!/usr/bin/env bash
# align.sh MODULE [--check]
#
# Makes a build share compiled packages with hack/tools/kubernetes (etcd, the Kubernetes
# binaries, Kueue), so that a cold build compiles each shared package once: the Go build
# cache reuses a package only when it and everything it imports have the same versions.
#
#   align.sh jobset    pins every dependency of wrapper module hack/tools/jobset that
#                      hack/tools/kubernetes also builds at hack/tools/kubernetes' version,
#                      with replace directives, except what JobSet cannot build with
#                      (keep_list).
#   align.sh project   makes the project (the repository's go.mod: the manager, the plugin,
#                      the demo) and hack/tools/kubernetes select the same version of every
#                      module both have, the higher of the two on each side, by raising
#                      requirements (no replace: the project's go.mod is also what its
#                      users build with). Kubernetes v1.35.3 is built because its staging
#                      libraries are the project's k8s.io/* v0.35.3 pins.
#
# Only where a module's requirements are at most Kubernetes' versions does a replace save
# anything: the Go build cache keys a package by its module's *selected* version, so a
# replace that pins older sources under a newer selected version compiles them again
# (why kwok, which needs k8s.io/* v0.36, keeps its own module unaligned).
#
# Run it after bumping a pin in any of the modules, project first; --check only reports
# modules that differ (make verify-tools checks both).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

module=${1:?usage: align.sh MODULE [--check]}
check=${2:-}
if [ "$module" != project ] && { [ "$module" = kubernetes ] || [ ! -f "$module/go.mod" ]; }; then
  echo "align.sh: no wrapper module hack/tools/$module" >&2; exit 2
fi
root=$(cd ../.. && pwd)

# keep_list prints the modules MODULE keeps at its own version: itself, and what it does
# not compile against at Kubernetes' version.
keep_list() {
  case $1 in
  # JobSet needs controller-runtime v0.22 (Kueue, in hack/tools/kubernetes, v0.23).
  jobset) echo sigs.k8s.io/jobset sigs.k8s.io/controller-runtime github.com/open-policy-agent/cert-controller ;;
  *) echo "$1" ;;
  esac
}

# versions prints "path selected:source" for each module of wrapper module DIR's build
# list: the version the build list selects, and the version its source comes from (the
# replacement's, if any). The Go build cache keys a package by both, so two modules share
# a compiled package only when both agree.
versions() {
  (cd "$1" && go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}:{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all) |
    awk 'NF == 2' | sort
}

# differ prints "path selected:source" (Kubernetes') for each module whose packages both
# MODULE's binary and Kubernetes' compile and that MODULE resolves otherwise, keep_list
# excepted.
differ() {
  local keep ours kube
  keep=" $(keep_list "$module") "
  ours=$(compiled "$module" "$(main_package "$module")") || exit 1
  kube=$(compiled kubernetes "${KUBERNETES_PACKAGES[@]}") || exit 1
  join <(echo "$ours") <(echo "$kube") |
    awk -v keep="$keep" '$2 != $3 && index(keep, " " $1 " ") == 0 { print $1, $3 }'
}

# main_package prints the package wrapper module MODULE builds (hack/build-binaries.sh).
main_package() {
  case $1 in
  jobset) echo sigs.k8s.io/jobset ;;
  *) echo "align.sh: no main package known for hack/tools/$1" >&2; return 1 ;;
  esac
}

# compiled DIR PACKAGES... prints "path selected:source" (as versions) for each module
# whose packages the build of PACKAGES in module DIR compiles: only those matter to the
# build cache.
compiled() {
  local dir=$1; shift
  (cd "$dir" && go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}:{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}' "$@") |
    awk 'NF == 2' | sort -u
}

# The project's binaries (the manager, the plugin, the demo), and what hack/tools/kubernetes
# builds (hack/build-binaries.sh, hack/kind/build.sh).
PROJECT_PACKAGES=(./cmd/... ./hack/demo)
KUBERNETES_PACKAGES=(go.etcd.io/etcd/server/v3 sigs.k8s.io/kueue/cmd/kueue
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy)

# project_differ prints "path project-version kubernetes-version" for each module that the
# project's binaries compile and Kubernetes resolves to a different version.
project_differ() {
  local ours kube
  ours=$(compiled "$root" "${PROJECT_PACKAGES[@]}") || exit 1
  kube=$(compiled kubernetes "${KUBERNETES_PACKAGES[@]}") || exit 1
  join <(echo "$ours") <(echo "$kube") | awk '$2 != $3'
}

# higher prints the higher of two module versions (semver order; pseudo-versions sort by
# their date like go does for the same base).
higher() { printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1; }

report() {
  echo "$1 resolves other versions than hack/tools/kubernetes (run hack/tools/align.sh $module):" >&2
  echo "$2" | sed 's/^/  /' >&2
  exit 1
}

if [ "$module" = project ]; then
  if [ "$check" = --check ]; then
    d=$(project_differ) || exit 1
    [ -z "$d" ] || report "the project" "$d"
    exit 0
  fi
  for _ in 1 2 3 4 5; do
    d=$(project_differ) || exit 1
    [ -z "$d" ] && break
    raise=()
    while read -r path ours kube; do
      # Neither the project nor hack/tools/kubernetes replaces a module it shares with the
      # other at another version (only Kubernetes' staging modules, by themselves).
      ours=${ours%%:*} kube=${kube%%:*}
      max=$(higher "$ours" "$kube")
      [ "$ours" = "$max" ] || raise+=("$path@$max")
      [ "$kube" = "$max" ] || (cd kubernetes && go mod edit -require "$path@$max")
    done <<<"$d"
    [ ${#raise[@]} -eq 0 ] || (cd "$root" && go get "${raise[@]}")
    (cd "$root" && go mod tidy)
    (cd kubernetes && go mod tidy)
  done
  [ -z "$(project_differ)" ] || { echo "align.sh: the project and hack/tools/kubernetes did not converge" >&2; exit 1; }
  exit 0
fi

if [ "$check" = --check ]; then
  d=$(differ) || exit 1
  [ -z "$d" ] || report "hack/tools/$module" "$d"
  exit 0
fi

# Replacing one module can change what the replaced versions require, so repeat until
# nothing differs (a few rounds at most).
for _ in 1 2 3 4 5; do
  d=$(differ) || exit 1
  [ -z "$d" ] && break
  # Raise the requirement to Kubernetes' selected version and take the source from its
  # version: a replace alone would leave the selected version, part of the cache key, older.
  while read -r path version; do
    (cd "$module" && go mod edit -require "$path@${version%%:*}" -replace "$path=$path@${version#*:}")
  done <<<"$d"
  (cd "$module" && go mod tidy)
done
[ -z "$(differ)" ] || { echo "align.sh: hack/tools/$module did not converge" >&2; exit 1; }
