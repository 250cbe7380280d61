#!/usr/bin/env bash
# Brings up (and tears down) the e2e kind cluster: one control plane and two GPU-flavored
# workers with real kubelets, Kueue and JobSet from their own Helm charts, Kubeflow Trainer
# from its own kustomize manifests (hack/kind/trainer), and batchledger installed by its
# Helm chart as a user installs it.
#
#   hack/kind/cluster.sh up       build what is missing, start dockerd, create and install
#   hack/kind/cluster.sh install  (re)install JobSet, Trainer, Kueue and batchledger
#   hack/kind/cluster.sh down     delete the cluster and stop dockerd, leaving no trace
#
# `up` replaces a cluster an earlier run left; KIND_REUSE=true reuses it if it is healthy
# (the images are loaded and the charts upgraded again; pods of an unchanged release keep
# running what they ran).
#
# Everything is built from Go module sources and Debian packages (see node-image.sh), and
# cached outside the checkout. Nothing is ever pulled: every image is preloaded in the
# node image or `kind load`ed, and every pod spec the charts render uses
# imagePullPolicy Never.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$HACK_DIR/kind/lib.sh"
export PATH=/usr/bin:/usr/sbin:$BIN_DIR:$PATH
export DOCKER_HOST=unix://$DOCKER_SOCK
KIND=$KIND_BIN_DIR/kind
HELM=$BIN_DIR/helm
KUSTOMIZE=$BIN_DIR/kustomize
export KUBECONFIG=$KIND_KUBECONFIG
KUBECTL=$BIN_DIR/kubectl

exists() { "$KIND" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; }
nodes() { "$KIND" get nodes --name "$KIND_CLUSTER"; }

build() {
  "$HACK_DIR/build-binaries.sh" kubectl
  "$HACK_DIR/build-install-tools.sh"
  "$HACK_DIR/kind/build.sh"
  "$HACK_DIR/kind/docker.sh" up
  "$HACK_DIR/kind/node-image.sh"
  "$HACK_DIR/kind/images.sh"
  "$HACK_DIR/kind/docker.sh" prune
}

# KIND_MIN_FREE_GIB: the disk the cluster takes while the suite runs, with a margin. Each
# node unpacks its images into its own containerd (measured: 4.4 GiB at the peak for the
# three nodes), and a disk that fills half way shows up as an image import or exec error
# far from its cause, so the run stops before it starts.
KIND_MIN_FREE_GIB=${KIND_MIN_FREE_GIB:-6}

need_disk() {
  local dir=$DOCKER_DATA_DIR avail_kib
  avail_kib=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
  [ "$avail_kib" -ge $((KIND_MIN_FREE_GIB * 1024 * 1024)) ] && return
  df -h "$dir" >&2
  die "$((avail_kib / 1024 / 1024)) GiB free where Docker keeps its data ($dir); the kind cluster needs about $KIND_MIN_FREE_GIB GiB. Free some: hack/kind/docker.sh prune (unused images), go clean -cache, or old checkouts"
}

# healthy says whether a cluster that already exists can be reused: its API answers and
# every node has the pod range kube-controller-manager allocates it.
healthy() {
  local i node cidr
  # The kubeconfig is the checkout's (_output); a cluster kept from another checkout has
  # none here yet.
  mkdir -p "$(dirname "$KIND_KUBECONFIG")"
  "$KIND" export kubeconfig --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG" >/dev/null 2>&1 || return 1
  for i in $(seq 1 30); do
    "$KUBECTL" --request-timeout=5s get --raw /readyz >/dev/null 2>&1 && break
    [ "$i" = 30 ] && return 1; sleep 1
  done
  for node in $(nodes); do
    cidr=$("$KUBECTL" --request-timeout=5s get node "$node" -o jsonpath='{.spec.podCIDR}' 2>/dev/null || true)
    [ -n "$cidr" ] || return 1
  done
}

create() {
  if exists; then
    if [ "${KIND_REUSE:-false}" = true ] && healthy; then
      log "kind cluster $KIND_CLUSTER: exists, reused (KIND_REUSE=true)"; return
    fi
    # Left by a run killed before `down`, or kept by KIND_KEEP: either may run an older
    # build under the same image tags, and its nodes may not have survived a restart of
    # dockerd, so a run starts from a new cluster unless told to reuse it.
    log "kind cluster $KIND_CLUSTER: left by an earlier run, recreating"
    "$KIND" delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
  fi
  need_disk
  log "kind cluster $KIND_CLUSTER: creating (1 control plane, 2 workers)"
  local start=$SECONDS
  mkdir -p "$(dirname "$KIND_KUBECONFIG")"
  "$KIND" create cluster --name "$KIND_CLUSTER" --image "$NODE_IMAGE" \
    --config "$HACK_DIR/kind/kind-config.yaml" --kubeconfig "$KIND_KUBECONFIG" --retain=false
  log "  created ($((SECONDS - start))s)"
}

# network wires pod networking as a CNI daemon would: the reference bridge plugin on each
# node over the pod range kube-controller-manager allocated it, and on every node a route
# to each other node's range through that node (all nodes share one L2 network, the kind
# Docker network, as flannel's host-gw backend assumes).
network() {
  local node cidr ip
  local -A cidrs=() ips=()
  for node in $(nodes); do
    local i
    for i in $(seq 1 60); do
      cidr=$("$KUBECTL" get node "$node" -o jsonpath='{.spec.podCIDR}' 2>/dev/null || true)
      [ -n "$cidr" ] && break; sleep 1
    done
    [ -n "$cidr" ] || die "node $node has no podCIDR"
    ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$node")
    cidrs[$node]=$cidr; ips[$node]=$ip
  done
  for node in "${!cidrs[@]}"; do
    docker exec -i "$node" sh -c 'mkdir -p /etc/cni/net.d && cat > /etc/cni/net.d/10-batchledger-bridge.conflist' <<JSON
{
  "cniVersion": "1.0.0",
  "name": "batchledger-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${cidrs[$node]}"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
    docker exec "$node" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
    local other
    for other in "${!cidrs[@]}"; do
      [ "$other" = "$node" ] && continue
      docker exec "$node" ip route replace "${cidrs[$other]}" via "${ips[$other]}"
    done
  done
  log "pod network: bridge on each node, routes between ${#cidrs[@]} nodes"
  "$KUBECTL" wait --for=condition=Ready node --all --timeout=180s >/dev/null
}

# gpus gives each worker 8 nvidia.com/gpu, as a device plugin would advertise them (the
# documented way to advertise an extended resource: a patch of the node's status). The
# workers' gpu-type labels come from kind-config.yaml; Kueue's ResourceFlavors select them.
gpus() {
  local node
  for node in $("$KUBECTL" get nodes -l gpu-type -o name); do
    "$KUBECTL" patch "$node" --subresource=status --type=merge \
      -p '{"status":{"capacity":{"nvidia.com/gpu":"8"}}}' >/dev/null
  done
  log "GPU capacity: $("$KUBECTL" get nodes -l gpu-type -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.labels.gpu-type}:{.status.allocatable.nvidia\.com/gpu} {end}')"
}

install() {
  local img
  for img in "$MANAGER_IMAGE" "$WORKER_IMAGE" "registry.k8s.io/kueue/kueue:$KUEUE_VERSION" "registry.k8s.io/jobset/jobset:$JOBSET_VERSION" "$TRAINER_IMAGE"; do
    "$KIND" load docker-image --name "$KIND_CLUSTER" "$img" 2>&1 | { grep -v "not yet present on node" || true; }
  done
  log "images loaded into every node"
  local mod; mod=$(go env GOMODCACHE)
  local start=$SECONDS
  "$HELM" upgrade --install jobset "$mod/sigs.k8s.io/jobset@$JOBSET_VERSION/charts/jobset" \
    -n jobset-system --create-namespace -f "$HACK_DIR/kind/jobset-values.yaml" --wait --timeout 5m >/dev/null
  log "JobSet $JOBSET_VERSION installed from its chart ($((SECONDS - start))s)"
  trainer_install "$mod/github.com/kubeflow/trainer/v2@$TRAINER_VERSION/manifests"
  log "Trainer $TRAINER_VERSION applied from its manifests ($((SECONDS - start))s)"
  "$HELM" upgrade --install kueue "$mod/sigs.k8s.io/kueue@$KUEUE_VERSION/charts/kueue" \
    -n kueue-system --create-namespace -f "$HACK_DIR/kind/kueue-values.yaml" --wait --timeout 5m >/dev/null
  # See kueue-values.yaml: the visibility API is off, so its APIServices must go.
  "$KUBECTL" delete apiservice v1beta1.visibility.kueue.x-k8s.io v1beta2.visibility.kueue.x-k8s.io --ignore-not-found >/dev/null
  log "Kueue $KUEUE_VERSION installed from its chart ($((SECONDS - start))s)"
  trainer_runtime
  log "Trainer's webhooks serve: its runtime applied ($((SECONDS - start))s)"
  # Kueue's webhooks answer only once its internal certificates are injected.
  wait_until 120 "Kueue's webhooks serve" "$KUBECTL" create --dry-run=server -f - <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: batchledger-kind-probe
YAML
  "$HELM" upgrade --install batchledger "$ROOT_DIR/charts/batchledger" \
    -n batchledger-system --create-namespace -f "$HACK_DIR/kind/batchledger-values.yaml" --wait --timeout 5m >/dev/null
  # The pod webhook fails closed for pods of results batches: probe it with one (dry run).
  wait_until 120 "batchledger's pod webhook serves" "$KUBECTL" create --dry-run=server -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: batchledger-kind-probe
  namespace: default
  labels:
    batchledger.dev/scope: results
spec:
  containers:
  - name: c
    image: batchledger.dev/example-worker:e2e
    imagePullPolicy: Never
YAML
  log "batchledger installed by its chart ($((SECONDS - start))s): $("$KUBECTL" -n batchledger-system get deploy -o jsonpath='{range .items[*]}{.metadata.name} {.status.readyReplicas}/{.spec.replicas}{end}')"
}

# TRAINER_MANIFESTS is Trainer's install as hack/kind/trainer renders it.
TRAINER_MANIFESTS=$(dirname "$KIND_KUBECONFIG")/trainer.yaml
# TRAINER_RUNTIME_LABEL marks the one object of TRAINER_MANIFESTS that Trainer's own
# webhooks admit: its torch-distributed ClusterTrainingRuntime.
TRAINER_RUNTIME_LABEL=trainer.kubeflow.org/framework

# trainer_install MANIFESTS installs Kubeflow Trainer, but its runtime, from its module's
# kustomize manifests with hack/kind/trainer's kustomization (which says why not its
# chart). It comes before Kueue, whose TrainJob integration waits, with a growing backoff,
# for Trainer's CRDs; trainer_runtime comes after Kueue, whose install hides the wait for
# Trainer's webhook (its cert-controller issues the certificate inside the cluster).
trainer_install() {
  local manifests=$1 dir; dir=$(mktemp -d)
  cp "$HACK_DIR"/kind/trainer/*.yaml "$dir/"
  cp -r "$manifests" "$dir/upstream" && chmod -R u+w "$dir/upstream"
  "$KUSTOMIZE" build "$dir" >"$TRAINER_MANIFESTS" || die "kustomize build of Trainer's manifests failed"
  # The CRDs first: kubectl maps every object of a file, selected or not, to its kind.
  "$KUSTOMIZE" build "$dir/upstream/base/crds" >"$dir/crds.yaml"
  "$KUBECTL" apply --server-side --field-manager=batchledger-kind -f "$dir/crds.yaml" >/dev/null
  "$KUBECTL" wait --for=condition=Established -f "$dir/crds.yaml" --timeout=60s >/dev/null
  "$KUBECTL" apply --server-side --field-manager=batchledger-kind -f "$TRAINER_MANIFESTS" \
    -l "!$TRAINER_RUNTIME_LABEL" >/dev/null
  rm -rf "$dir"
}

# trainer_runtime applies Trainer's runtime until its webhooks admit it: the wait for
# Trainer to serve.
trainer_runtime() {
  wait_until 180 "Trainer's webhooks admit its runtime" "$KUBECTL" apply --server-side \
    --field-manager=batchledger-kind -f "$TRAINER_MANIFESTS" -l "$TRAINER_RUNTIME_LABEL" </dev/null
}

# wait_until SECONDS WHAT CMD...: retries CMD (stdin is replayed) until it succeeds.
wait_until() {
  local seconds=$1 what=$2; shift 2
  local input; input=$(cat)
  local i
  for i in $(seq 1 "$seconds"); do
    if printf '%s\n' "$input" | "$@" >/dev/null 2>&1; then return; fi
    sleep 1
  done
  printf '%s\n' "$input" | "$@" >&2 || true
  die "timed out waiting until $what"
}

up() {
  local start=$SECONDS
  build
  create
  network
  gpus
  install
  log "kind cluster $KIND_CLUSTER ready in $((SECONDS - start))s; KUBECONFIG=$KIND_KUBECONFIG"
}

down() {
  if [ -S "$DOCKER_SOCK" ] && exists; then
    "$KIND" delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
    log "kind cluster $KIND_CLUSTER deleted"
  fi
  # kind's network outlives its clusters; it is ours, so it goes too.
  [ -S "$DOCKER_SOCK" ] && docker network rm kind >/dev/null 2>&1 || true
  "$HACK_DIR/kind/docker.sh" down
  rm -f "$KIND_KUBECONFIG" "$TRAINER_MANIFESTS"
}

case ${1:-} in
  up) up ;;
  install) install ;;
  down) down ;;
  *) die "usage: $0 up|install|down" ;;
esac
