#!/usr/bin/env bash
# align.sh MODULE [--check]
#
# Pins every dependency of wrapper module hack/tools/MODULE that hack/tools/kubernetes also
# builds at hack/tools/kubernetes' version, with replace directives, except the modules
# MODULE cannot build with (keep_list). Then the Go build cache reuses the packages
# hack/build-binaries.sh compiled for Kubernetes, etcd and Kueue instead of compiling
# MODULE's own copies: on a cold cache that is most of JobSet's build.
#
# Only where MODULE's own requirements are at most Kubernetes' versions does this save
# anything: the Go build cache keys a package by its module's *selected* version, so a
# replace that pins older sources under a newer selected version compiles them again
# (why kwok, which needs k8s.io/* v0.36, keeps its own module unaligned).
#
# Run it after bumping a pin in either module; --check only reports modules that differ
# (make verify-tools checks JobSet's).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

module=${1:?usage: align.sh MODULE [--check]}
check=${2:-}
[ "$module" != kubernetes ] && [ -f "$module/go.mod" ] || { echo "align.sh: no wrapper module hack/tools/$module" >&2; exit 2; }

# keep_list prints the modules MODULE keeps at its own version: itself, and what it does
# not compile against at Kubernetes' version.
keep_list() {
  case $1 in
  # JobSet needs controller-runtime v0.22 (Kueue, in hack/tools/kubernetes, v0.23).
  jobset) echo sigs.k8s.io/jobset sigs.k8s.io/controller-runtime github.com/open-policy-agent/cert-controller ;;
  *) echo "$1" ;;
  esac
}

# versions prints "path version" for each module of wrapper module DIR's build list,
# after replacements.
versions() {
  (cd "$1" && go list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all) |
    awk 'NF == 2' | sort
}

# differ prints "path version" for each module MODULE resolves to another version than
# Kubernetes does, keep_list excepted.
differ() {
  local keep ours kube
  keep=" $(keep_list "$module") "
  ours=$(versions "$module") || exit 1
  kube=$(versions kubernetes) || exit 1
  join <(echo "$ours") <(echo "$kube") |
    awk -v keep="$keep" '$2 != $3 && index(keep, " " $1 " ") == 0 { print $1, $3 }'
}

if [ "$check" = --check ]; then
  d=$(differ) || exit 1
  [ -z "$d" ] && exit 0
  echo "hack/tools/$module resolves other versions than hack/tools/kubernetes (run hack/tools/align.sh $module):" >&2
  echo "$d" | sed 's/^/  /' >&2
  exit 1
fi

# Replacing one module can change what the replaced versions require, so repeat until
# nothing differs (a few rounds at most).
for _ in 1 2 3 4 5; do
  d=$(differ) || exit 1
  [ -z "$d" ] && break
  while read -r path version; do
    (cd "$module" && go mod edit -replace "$path=$path@$version")
  done <<<"$d"
  (cd "$module" && go mod tidy)
done
[ -z "$(differ)" ] || { echo "align.sh: hack/tools/$module did not converge" >&2; exit 1; }
