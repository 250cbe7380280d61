# Shared settings for hack/ scripts: pinned component versions and where their
# binaries are cached. Sourced, not run.

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(cd "$HACK_DIR/.." && pwd)

# Pinned versions of the real components. Bumping one rebuilds it into a new cache entry.
KUBE_VERSION=v1.35.3
ETCD_VERSION=v3.6.6
KWOK_VERSION=v0.8.0
KUEUE_VERSION=v0.17.0
JOBSET_VERSION=v0.11.1
# Kubeflow Trainer: the version Kueue v0.17's go.mod requires (its TrainJob integration).
TRAINER_VERSION=v2.2.0

CACHE_DIR=${BATCHLEDGER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/batchledger}
BIN_DIR=${BATCHLEDGER_BIN_DIR:-$ROOT_DIR/bin}

# BUILD_GOGC is the GOGC the Go compiler runs with in our builds ($GOGC when set). The
# compiler spends much of its time collecting garbage; 400 measured 20-25% less CPU than
# the default 100 on client-go's clientset (125 s -> 99 s wall on 2 cores) for ~30% more
# memory per compile (0.6 GB at most there). Set only on `go build`, never exported to
# the programs we run.
BUILD_GOGC=${GOGC:-400}

# static_build runs `go build` in DIR with the one configuration every binary of ours and
# of the components is built with: static (CGO_ENABLED=0: the binaries run in images FROM
# scratch and in the kind node's rootfs alike), -trimpath, the compiler at BUILD_GOGC. One
# configuration means one set of Go build cache entries. The other arguments go to
# `go build`.
static_build() { local dir=$1; shift; (cd "$dir" && CGO_ENABLED=0 GOGC=$BUILD_GOGC go build -trimpath "$@"); }

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

component_dir() { echo "$CACHE_DIR/$1-$2"; }

# module_stamp prints a digest of wrapper module DIR's go.mod, which fixes every version a
# cached binary was built from. A cache entry is keyed by its component's version; the
# stamp stored beside its binaries (.module-stamp) makes a changed wrapper (a re-aligned
# dependency) rebuild it too.
module_stamp() { sha256sum "$1/go.mod" | cut -c1-16; }

# stamp_matches tells whether cache entry DIR was built from wrapper module MODULE_DIR as
# it is now.
stamp_matches() { [ "$(cat "$1/.module-stamp" 2>/dev/null)" = "$(module_stamp "$2")" ]; }

# link_binaries links every cached component binary into BIN_DIR.
link_binaries() {
  mkdir -p "$BIN_DIR"
  local pair name version f
  for pair in "etcd $ETCD_VERSION" "kubernetes $KUBE_VERSION" "kubectl $KUBE_VERSION" \
    "kwok $KWOK_VERSION" "kueue $KUEUE_VERSION" "jobset $JOBSET_VERSION" "trainer $TRAINER_VERSION"; do
    read -r name version <<<"$pair"
    for f in "$(component_dir "$name" "$version")"/*; do
      [ -x "$f" ] && ln -sf "$f" "$BIN_DIR/$(basename "$f")"
    done
  done
}

# kube_ldflags prints the -ldflags that stamp a Kubernetes binary with its version (as
# Kubernetes' own build does), so kubeadm and kubelet report and check the right one.
kube_ldflags() {
  local v=$1 major minor
  major=$(echo "${v#v}" | cut -d. -f1); minor=$(echo "${v#v}" | cut -d. -f2)
  local p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean ' \
      "$p" "$v" "$p" "$major" "$p" "$minor" "$p"
  done
  printf -- '-s -w'
}
