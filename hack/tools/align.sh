#!/usr/bin/env bash
# align.sh MODULE [--check]
#
# Makes a build share compiled packages with hack/tools/kubernetes (etcd, the Kubernetes
# binaries, Kueue), so that a cold build compiles each shared package once: the Go build
# cache reuses a package only when it and everything it imports have the same versions.
#
#   align.sh jobset    pins every dependency of wrapper module hack/tools/jobset that
#                      hack/tools/kubernetes also builds at hack/tools/kubernetes' version
#                      (a raised requirement and a replace), except what JobSet cannot
#                      build with (keep_list).
#   align.sh trainer   the same for hack/tools/trainer (the Kubeflow Trainer manager).
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
  # Trainer needs nothing of its own: Kueue v0.17 requires this very Trainer version.
  trainer) echo github.com/kubeflow/trainer/v2 ;;
  *) echo "$1" ;;
  esac
}

# main_package prints the package wrapper module MODULE builds (hack/build-binaries.sh).
main_package() {
  case $1 in
  jobset) echo sigs.k8s.io/jobset ;;
  trainer) echo github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager ;;
  *) echo "align.sh: no main package known for hack/tools/$1" >&2; return 1 ;;
  esac
}

# compiled DIR PACKAGES... prints "path selected:source" for each module whose packages
# the build of PACKAGES in module DIR compiles (only those matter to the build cache): the
# version the build list selects, and the version its source comes from (the
# replacement's, if any). The Go build cache keys a package by both, so two builds share a
# compiled package only when both agree.
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

# What MODULE aligns: its directory, its name in messages, the packages it builds, and the
# modules it keeps at its own version.
if [ "$module" = project ]; then
  dir=$root label="the project" keep="" packages=("${PROJECT_PACKAGES[@]}")
else
  dir=$module label="hack/tools/$module" keep=$(keep_list "$module") packages=("$(main_package "$module")")
fi

# differ prints "path ours kubernetes" (each "selected:source") for each module whose
# packages both MODULE's build and Kubernetes' compile and that they resolve differently,
# keep_list excepted.
differ() {
  local ours kube
  ours=$(compiled "$dir" "${packages[@]}") || exit 1
  kube=$(compiled kubernetes "${KUBERNETES_PACKAGES[@]}") || exit 1
  join <(echo "$ours") <(echo "$kube") |
    awk -v keep=" $keep " '$2 != $3 && index(keep, " " $1 " ") == 0'
}

# higher prints the higher of two module versions (semver order; pseudo-versions sort by
# their date like go does for the same base).
higher() { printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1; }

# align_project raises, on each side, the lower of the two selected versions of each
# module in differ's output D. No replace: the project's go.mod is also what its users
# build with, and neither side replaces a module it shares with the other at another
# version (only Kubernetes' staging modules, by themselves).
align_project() {
  local path ours kube max raise=()
  while read -r path ours kube; do
    ours=${ours%%:*} kube=${kube%%:*}
    max=$(higher "$ours" "$kube")
    [ "$ours" = "$max" ] || raise+=("$path@$max")
    [ "$kube" = "$max" ] || (cd kubernetes && go mod edit -require "$path@$max")
  done <<<"$1"
  [ ${#raise[@]} -eq 0 ] || (cd "$root" && go get "${raise[@]}")
  (cd "$root" && go mod tidy)
  (cd kubernetes && go mod tidy)
}

# align_wrapper raises the wrapper module's requirement of each module in differ's output
# D to Kubernetes' selected version and takes the source from Kubernetes' version: a
# replace alone would leave the selected version, part of the cache key, older.
align_wrapper() {
  local path ours kube
  while read -r path ours kube; do
    (cd "$module" && go mod edit -require "$path@${kube%%:*}" -replace "$path=$path@${kube#*:}")
  done <<<"$1"
  (cd "$module" && go mod tidy)
}

d=$(differ) || exit 1
if [ "$check" = --check ]; then
  [ -z "$d" ] && exit 0
  echo "$label resolves other versions than hack/tools/kubernetes (run hack/tools/align.sh $module):" >&2
  echo "$d" | sed 's/^/  /' >&2
  exit 1
fi

# Raising one module can change what the raised versions require, so repeat until nothing
# differs (a few rounds at most).
for _ in 1 2 3 4 5; do
  [ -z "$d" ] && exit 0
  if [ "$module" = project ]; then align_project "$d"; else align_wrapper "$d"; fi
  d=$(differ) || exit 1
done
[ -z "$d" ] || { echo "align.sh: $label and hack/tools/kubernetes did not converge" >&2; exit 1; }
