#!/usr/bin/env bash
# The e2e suite on kind: brings the cluster up (hack/kind/cluster.sh), runs every e2e
# package against it (E2E_USE_EXISTING_CLUSTER + KUBECONFIG; tests that drive pods through
# kwok's stages skip, saying so), then `helm uninstall` last (TestKindHelmUninstall), checks
# that no node ever tried to pull an image, and tears everything down — also on failure.
#
#   hack/kind/test.sh                 the whole run
#   KIND_KEEP=true hack/kind/test.sh  leave the cluster (and dockerd) running afterwards
#   KIND_REUSE=true hack/kind/test.sh reuse a healthy cluster a KIND_KEEP run left
#   E2E_KIND_RUN=Regexp               only the tests matching (go test -run)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$HACK_DIR/kind/lib.sh"

cleanup() {
  local rc=$?
  if [ "${KIND_KEEP:-false}" != true ]; then "$HACK_DIR/kind/cluster.sh" down || true; fi
  exit $rc
}
trap cleanup EXIT

# no_pulls fails when a node's containerd or kubelet tried to pull an image: every image
# must be preloaded, since a pull reaches for an address outside this machine.
no_pulls() {
  export DOCKER_HOST=unix://$DOCKER_SOCK PATH=/usr/bin:/usr/sbin:$PATH
  local node found=0
  for node in $("$KIND_BIN_DIR/kind" get nodes --name "$KIND_CLUSTER"); do
    if docker exec "$node" sh -c 'journalctl --no-pager -u containerd -u kubelet 2>/dev/null' |
      grep -E 'PullImage "|Pulling image|ErrImagePull|ImagePullBackOff' | head -5 | grep .; then
      log "node $node tried to pull an image (above)"; found=1
    fi
  done
  [ "$found" = 0 ] || die "an image was pulled: preload it (node-image.sh, images.sh) and use imagePullPolicy Never"
  log "no node tried to pull an image"
}

main() {
  local start=$SECONDS
  "$HACK_DIR/kind/cluster.sh" up
  local up=$((SECONDS - start))
  export E2E_USE_EXISTING_CLUSTER=true KUBECONFIG=$KIND_KUBECONFIG HELM=$BIN_DIR/helm
  cd "$ROOT_DIR"
  go test -p 1 -count=1 -timeout "${E2E_TIMEOUT:-40m}" -run "${E2E_KIND_RUN:-.}" ./e2e/...
  E2E_HELM_UNINSTALL=true go test -count=1 -timeout 10m -run '^TestKindHelmUninstall$' ./e2e/batchledger/
  no_pulls
  log "kind e2e: cluster up in ${up}s, whole run $((SECONDS - start))s"
}

main "$@"
