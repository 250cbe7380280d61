#!/usr/bin/env bash
# Assembles, offline, the kind node image for Kubernetes $KUBE_VERSION and the images its
# control plane runs, in the Docker engine started by hack/kind/docker.sh.
#
# `kind build node-image` cannot run here: it pulls a base image and the control-plane
# images from registries this machine cannot reach. So this script builds what kind's base
# image holds, from parts available offline:
#   - a Debian bookworm rootfs made by debootstrap from Debian's packages (systemd,
#     containerd, runc, iptables, …), cached as a tarball outside the checkout;
#   - kind's own base files (entrypoint, containerd config, kubelet units) from its Go
#     module, pinned in hack/tools/kind;
#   - kubelet, kubeadm, kube-proxy, CoreDNS, the CNI plugins and a pause (hack/kind/build.sh),
#     and the control-plane binaries of hack/build-binaries.sh, packed as images and
#     preloaded into the node's containerd so kubeadm never pulls.
# Two settings differ from kind's image, both needed on machines whose capability bounding
# set lacks CAP_SYS_RESOURCE: containerd's restrict_oom_score_adj, and (in the cluster
# config, hack/kind/cluster.sh) kubelet's failCgroupV1: false for cgroup v1 hosts.
#
# The image is tagged $NODE_IMAGE and labelled with a hash of its inputs; an image whose
# label matches is reused.
#
#   hack/kind/node-image.sh           build what is missing (needs DOCKER_HOST from docker.sh)
#   hack/kind/node-image.sh rootfs    only the cached Debian rootfs
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$HACK_DIR/kind/lib.sh"

# The rootfs packages: what kind's base image installs, less what only rootless or
# storage tests use (fuse-overlayfs, nfs-common, open-iscsi) and less curl (nothing in the
# node may reach outside the machine).
ROOTFS_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,iptables,nftables,conntrack,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,jq,procps,e2fsprogs
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

KIND_FILES=$(go env GOMODCACHE)/sigs.k8s.io/kind@$KIND_VERSION/images/base/files

# rootfs_tar prints the cached rootfs tarball, making it with debootstrap when missing.
rootfs_tar() {
  local key; key=$(echo "$DEBIAN_SUITE $ROOTFS_PACKAGES" | sha256sum | cut -c1-12)
  local dir="$CACHE_DIR/kind-rootfs-$DEBIAN_SUITE-$key"
  if [ ! -f "$dir/rootfs.tar" ]; then
    command -v debootstrap >/dev/null || die "debootstrap missing: run hack/kind/docker.sh install"
    log "rootfs: debootstrap $DEBIAN_SUITE (about 3 min)"
    local start=$SECONDS tmp="$dir.tmp"
    rm -rf "$tmp"; mkdir -p "$tmp/root"
    debootstrap --variant=minbase --include="$ROOTFS_PACKAGES" "$DEBIAN_SUITE" "$tmp/root" "$DEBIAN_MIRROR" \
      >"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
    # Trim what a node never uses: package lists, docs, caches.
    rm -rf "$tmp/root/var/lib/apt/lists/"* "$tmp/root/var/cache/apt/"* "$tmp/root/usr/share/doc" \
      "$tmp/root/usr/share/man" "$tmp/root/usr/share/locale"
    tar -C "$tmp/root" --numeric-owner -cf "$tmp/rootfs.tar" .
    rm -rf "$tmp/root"; rm -rf "$dir"; mv "$tmp" "$dir"
    log "  rootfs ready ($((SECONDS - start))s, $(du -sh "$dir/rootfs.tar" | cut -f1))"
  fi
  echo "$dir/rootfs.tar"
}

# inputs_hash fingerprints everything the node image is made of.
inputs_hash() {
  {
    echo "$KUBE_VERSION $KIND_VERSION $COREDNS_VERSION $CNI_VERSION $ROOTFS_PACKAGES"
    cat "$HACK_DIR/kind/node-image.sh"
    sha256sum "$NODE_BIN_DIR"/* "$CNI_BIN_DIR"/* "$COREDNS_BIN_DIR"/* "$KIND_OWN_BIN_DIR/pause" \
      "$(component_dir kubernetes "$KUBE_VERSION")"/kube-* "$(component_dir etcd "$ETCD_VERSION")"/etcd | cut -c1-64
  } | sha256sum | cut -c1-16
}

image_label() { docker image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }

# build_image builds TAG from a Dockerfile given on stdin with CONTEXT (legacy builder:
# BuildKit is not installed here, and nothing is pulled).
build_image() {
  local tag=$1 context=${2:-}
  local empty=""
  if [ -z "$context" ]; then empty=$(mktemp -d); context=$empty; fi
  DOCKER_BUILDKIT=0 docker build -q -t "$tag" -f - "$context" >/dev/null || die "docker build $tag failed"
  [ -z "$empty" ] || rm -rf "$empty"
}

# binary_image packs one static binary as an image FROM scratch, run as COMMAND on PATH.
binary_image() {
  local tag=$1 binary=$2 base=${3:-scratch}
  local ctx; ctx=$(mktemp -d)
  cp "$binary" "$ctx/"
  build_image "$tag" "$ctx" <<DOCKERFILE
FROM $base
COPY $(basename "$binary") /usr/local/bin/$(basename "$binary")
ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
ENTRYPOINT ["/usr/local/bin/$(basename "$binary")"]
DOCKERFILE
  rm -rf "$ctx"
}

main() {
  command -v docker >/dev/null && docker info >/dev/null 2>&1 || die "no Docker engine: run hack/kind/docker.sh up first"
  local hash; hash=$(inputs_hash)
  if [ "$(image_label "$NODE_IMAGE" dev.batchledger.inputs)" = "$hash" ]; then
    log "node image $NODE_IMAGE: cached"
    return
  fi
  local start=$SECONDS
  local rootfs_image="batchledger.dev/kind-rootfs:$DEBIAN_SUITE"
  docker image inspect "$rootfs_image" >/dev/null 2>&1 || docker import "$(rootfs_tar)" "$rootfs_image" >/dev/null

  # The control-plane images kubeadm asks for, by the exact names it asks for.
  local kube kubectl; kube=$(component_dir kubernetes "$KUBE_VERSION"); kubectl=$(component_dir kubectl "$KUBE_VERSION")
  local -A images=() name
  while read -r name; do images[${name}]=1; done < <("$NODE_BIN_DIR/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null)
  local ref
  for ref in "${!images[@]}"; do
    case $ref in
      */kube-apiserver:*) binary_image "$ref" "$kube/kube-apiserver" ;;
      */kube-controller-manager:*) binary_image "$ref" "$kube/kube-controller-manager" ;;
      */kube-scheduler:*) binary_image "$ref" "$kube/kube-scheduler" ;;
      */kube-proxy:*) binary_image "$ref" "$NODE_BIN_DIR/kube-proxy" "$rootfs_image" ;; # needs iptables
      */etcd:*) binary_image "$ref" "$(component_dir etcd "$ETCD_VERSION")/etcd" ;;
      */coredns:*) binary_image "$ref" "$COREDNS_BIN_DIR/coredns"
        # CoreDNS' Deployment runs the image's entrypoint with -conf; upstream's is /coredns.
        build_image "$ref" "" <<<"FROM $ref"$'\n'"ENTRYPOINT [\"/usr/local/bin/coredns\"]" ;;
      */pause:*) binary_image "$ref" "$KIND_OWN_BIN_DIR/pause" ;;
      *) die "kubeadm asks for an image this script does not build: $ref" ;;
    esac
  done
  # containerd's own sandbox image in kind's config (pause:3.10) may differ from kubeadm's.
  local sandbox; sandbox=$(sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$KIND_FILES/etc/containerd/config.toml")
  if [ -n "$sandbox" ] && [ -z "${images[$sandbox]:-}" ]; then
    binary_image "$sandbox" "$KIND_OWN_BIN_DIR/pause"; images[$sandbox]=1
  fi
  log "node image: control-plane images built (${#images[@]})"

  # The base: kind's files on the rootfs, the node binaries, containerd's settings.
  local ctx; ctx=$(mktemp -d)
  cp -r "$KIND_FILES" "$ctx/files"; chmod -R u+w "$ctx/files"
  mkdir -p "$ctx/bin" "$ctx/cni"
  cp "$NODE_BIN_DIR/kubelet" "$NODE_BIN_DIR/kubeadm" "$kubectl/kubectl" "$ctx/bin/"
  cp "$CNI_BIN_DIR"/* "$ctx/cni/"
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$ctx/files/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$ctx/files/etc/containerd/config.toml" || die "kind's containerd config changed: restrict_oom_score_adj not found"
  build_image batchledger.dev/kind-node-base:"$KUBE_VERSION" "$ctx" <<DOCKERFILE
FROM $rootfs_image
COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/etc/ /etc/
COPY bin/ /usr/bin/
COPY cni/ /opt/cni/bin/
RUN chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && ln -sf /usr/lib/systemd/systemd /sbin/init \
 && for b in containerd ctr containerd-shim-runc-v2; do ln -sf /usr/bin/\$b /usr/local/bin/\$b; done \
 && ln -sf /usr/sbin/runc /usr/local/sbin/runc \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests \
 && ctr oci spec > /etc/containerd/cri-base.json \
 && echo "$KUBE_VERSION" > /kind/version
DOCKERFILE
  rm -rf "$ctx"

  # Preload the images into the node's containerd, then commit.
  local box=batchledger-node-preload
  docker rm -f "$box" >/dev/null 2>&1 || true
  docker run -d --name "$box" --privileged --entrypoint sleep batchledger.dev/kind-node-base:"$KUBE_VERSION" infinity >/dev/null
  docker exec -d "$box" sh -c 'containerd >/var/log/containerd-preload.log 2>&1'
  local i; for i in $(seq 1 30); do docker exec "$box" ctr version >/dev/null 2>&1 && break; sleep 1; done
  for ref in "${!images[@]}"; do
    docker save "$ref" | docker exec -i "$box" ctr -n k8s.io images import --no-unpack --all-platforms - >/dev/null \
      || die "preloading $ref failed"
  done
  docker exec "$box" sh -c 'pkill containerd; sleep 1; rm -f /var/log/containerd-preload.log'
  docker commit "$box" batchledger.dev/kind-node-preloaded:"$KUBE_VERSION" >/dev/null
  docker rm -f "$box" >/dev/null
  build_image "$NODE_IMAGE" "" <<DOCKERFILE
FROM batchledger.dev/kind-node-preloaded:$KUBE_VERSION
LABEL dev.batchledger.inputs=$hash
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
CMD []
DOCKERFILE
  log "node image $NODE_IMAGE ready ($((SECONDS - start))s)"
}

case ${1:-} in
  rootfs) rootfs_tar ;; # only the debootstrap step (it needs no Docker engine)
  *) main ;;
esac
