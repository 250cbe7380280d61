#!/usr/bin/env bash
# Installs and runs the Docker engine the kind e2e path uses, and removes every trace of it.
#
#   hack/kind/docker.sh install   apt-get install docker.io debootstrap iptables (root)
#   hack/kind/docker.sh up        start dockerd in the background (idempotent)
#   hack/kind/docker.sh down      stop it; remove its bridges, iptables chains and mounts
#   hack/kind/docker.sh prune     remove the images this path no longer uses (engine up)
#   hack/kind/docker.sh env       print the DOCKER_HOST to export
#
# The engine is a private one: its own socket, pid file, exec root and data root, so it
# never meets a Docker the machine may already run. The data root lives in the cache
# outside the checkout, so the node image and component images survive between runs.
# Its default OCI runtime is hack/kind/runtime-wrapper (see its godoc): privileged
# containers otherwise fail on machines whose bounding set lacks CAP_SYS_RESOURCE.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$HACK_DIR/kind/lib.sh"

RUN_DIR=${BATCHLEDGER_DOCKER_RUN_DIR:-/run/batchledger-docker}
SOCK=$RUN_DIR/docker.sock
PIDFILE=$RUN_DIR/dockerd.pid
# The Debian engine's client speaks the engine's API version; a newer client elsewhere on
# PATH (e.g. /usr/local/bin/docker) may not, so the scripts put /usr/bin first.
export PATH=/usr/bin:/usr/sbin:$PATH

install() {
  if command -v dockerd >/dev/null && command -v debootstrap >/dev/null && command -v iptables >/dev/null; then
    log "docker.io, debootstrap, iptables: installed"; return
  fi
  [ "$(id -u)" = 0 ] || die "installing docker.io needs root (apt-get)"
  log "installing docker.io debootstrap iptables from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap iptables >/dev/null
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

up() {
  install
  if running; then log "dockerd: running (pid $(cat "$PIDFILE"))"; return; fi
  [ -x "$KIND_OWN_BIN_DIR/runtime-wrapper" ] || die "no runtime wrapper: run hack/kind/build.sh"
  mkdir -p "$RUN_DIR" "$DOCKER_DATA_DIR"
  cat >"$RUN_DIR/daemon.json" <<JSON
{
  "runtimes": {"capwrap": {"path": "$KIND_OWN_BIN_DIR/runtime-wrapper"}},
  "default-runtime": "capwrap",
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "2"}
}
JSON
  # kind mounts /lib/modules into its nodes; make sure an empty one is ours to remove.
  [ -d /lib/modules ] || { mkdir -p /lib/modules; touch "$RUN_DIR/made-lib-modules"; }
  sysctl -n net.ipv4.ip_forward >"$RUN_DIR/ip_forward.before" 2>/dev/null || true
  # dockerd rewrites the host's iptables (its chains, FORWARD and NAT rules for each
  # bridge); down restores this snapshot.
  iptables-save >"$RUN_DIR/iptables.before" 2>/dev/null || true
  log "dockerd: starting (data root $DOCKER_DATA_DIR)"
  nohup dockerd --config-file "$RUN_DIR/daemon.json" --data-root "$DOCKER_DATA_DIR" --exec-root "$RUN_DIR/exec" \
    --pidfile "$PIDFILE" -H "unix://$SOCK" >"$RUN_DIR/dockerd.log" 2>&1 &
  local i
  for i in $(seq 1 60); do
    DOCKER_HOST=unix://$SOCK docker info >/dev/null 2>&1 && { log "dockerd: ready"; return; }
    sleep 1
  done
  tail -20 "$RUN_DIR/dockerd.log" >&2
  die "dockerd did not become ready"
}

down() {
  if running; then
    local pid; pid=$(cat "$PIDFILE")
    log "dockerd: stopping (pid $pid)"
    kill "$pid"
    local i; for i in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  # What dockerd leaves behind: its bridges, iptables chains, netns mounts, ip_forward.
  local link
  for link in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | { grep -E '^(docker0|br-)' || true; }); do
    ip link delete "$link" 2>/dev/null || true
  done
  if [ -s "$RUN_DIR/iptables.before" ]; then
    iptables-restore <"$RUN_DIR/iptables.before" || log "warning: restoring iptables failed"
  else # no snapshot (an engine started by an older script): remove Docker's chains
    local table chain
    for table in filter nat; do
      for chain in DOCKER DOCKER-ISOLATION-STAGE-1 DOCKER-ISOLATION-STAGE-2 DOCKER-USER; do
        { iptables -t "$table" -S 2>/dev/null || true; } | { grep -E -- "-j $chain( |$)|docker0|br-[0-9a-f]{12}" || true; } | sed 's/^-A/-D/' |
          while read -r rule; do eval "iptables -t $table $rule" 2>/dev/null || true; done
        iptables -t "$table" -F "$chain" 2>/dev/null || true
        iptables -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
    iptables -P FORWARD ACCEPT 2>/dev/null || true # dockerd set DROP
  fi
  if [ -f "$RUN_DIR/ip_forward.before" ]; then
    sysctl -qw net.ipv4.ip_forward="$(cat "$RUN_DIR/ip_forward.before")" 2>/dev/null || true
  fi
  { grep -o " $RUN_DIR/[^ ]*" /proc/mounts 2>/dev/null || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  if [ -f "$RUN_DIR/made-lib-modules" ]; then rmdir /lib/modules 2>/dev/null || true; fi
  rm -rf "$RUN_DIR"
  log "dockerd: down, bridges and chains removed"
}

# prune removes every image this path made that the current versions no longer use: node
# images of other Kubernetes versions, the control-plane images already preloaded into the
# node image, component images of other versions, and the untagged images each rebuild of
# a tag leaves behind. The data root lives in the cache and outlives runs, so without this
# it grows by about a gigabyte per Kubernetes version and 200 MB per run until the disk
# fills (a CI run once failed so, unpacking an image inside a node).
prune() {
  export DOCKER_HOST=unix://$SOCK
  local -A keep=(
    ["$NODE_IMAGE"]=1 ["$MANAGER_IMAGE"]=1 ["$WORKER_IMAGE"]=1
    ["registry.k8s.io/kueue/kueue:$KUEUE_VERSION"]=1 ["registry.k8s.io/jobset/jobset:$JOBSET_VERSION"]=1
  )
  local ref removed=0
  while read -r ref; do
    case $ref in
      batchledger.dev/kind-rootfs:*) continue ;; # the debootstrap rootfs, keyed by its packages
      batchledger.dev/* | registry.k8s.io/*) [ -n "${keep[$ref]:-}" ] && continue ;;
      *) continue ;; # not ours
    esac
    docker rmi "$ref" >/dev/null 2>&1 && removed=$((removed + 1))
  done < <(docker images --format '{{.Repository}}:{{.Tag}}' | grep -v ':<none>$')
  docker image prune -f >/dev/null
  log "docker: $removed unused tags removed, untagged images pruned; $(docker system df --format '{{.Type}} {{.Size}}' | head -1)"
}

case ${1:-} in
  install) install ;;
  prune) prune ;;
  up) up ;;
  down) down ;;
  env) echo "export DOCKER_HOST=unix://$SOCK PATH=/usr/bin:/usr/sbin:\$PATH" ;;
  *) die "usage: $0 install|up|down|prune|env" ;;
esac
