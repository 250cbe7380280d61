# Shared settings for hack/kind scripts: versions and cache folders of the kind e2e path.
# Sourced after hack/lib.sh, not run.

KIND_VERSION=$(cd "$HACK_DIR/tools/kind" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
COREDNS_VERSION=$(cd "$HACK_DIR/tools/coredns" && go list -m -f '{{.Version}}' github.com/coredns/coredns)
CNI_VERSION=$(cd "$HACK_DIR/tools/cni-plugins" && go list -m -f '{{.Version}}' github.com/containernetworking/plugins)

KIND_BIN_DIR=$(component_dir kind "$KIND_VERSION")
NODE_BIN_DIR=$(component_dir kubernetes-node "$KUBE_VERSION")
CNI_BIN_DIR=$(component_dir cni-plugins "$CNI_VERSION")
# CoreDNS with kubeadm's plugins only (hack/tools/coredns/main.go).
COREDNS_BIN_DIR=$(component_dir coredns "$COREDNS_VERSION-kubeadm-plugins")
# KIND_OWN_BIN_DIR holds hack/kind's own programs, rebuilt from the checkout.
KIND_OWN_BIN_DIR=$CACHE_DIR/kind-own
NODE_IMAGE=batchledger.dev/kind-node:$KUBE_VERSION
DOCKER_SOCK=${BATCHLEDGER_DOCKER_RUN_DIR:-/run/batchledger-docker}/docker.sock
# DOCKER_DATA_DIR is the private engine's data root: in the cache, so images outlive runs.
DOCKER_DATA_DIR=$CACHE_DIR/docker
MANAGER_IMAGE=batchledger.dev/batchledger:e2e
WORKER_IMAGE=batchledger.dev/example-worker:e2e
# TRAINER_IMAGE is the name Trainer's manifests give its manager (hack/kind/trainer).
TRAINER_IMAGE=ghcr.io/kubeflow/trainer/trainer-controller-manager:$TRAINER_VERSION
# KIND_CLUSTER is the kind cluster's name; its kubeconfig is written to KIND_KUBECONFIG.
KIND_CLUSTER=${KIND_CLUSTER:-batchledger-e2e}
KIND_KUBECONFIG=${KIND_KUBECONFIG:-$ROOT_DIR/_output/kind/kubeconfig}
