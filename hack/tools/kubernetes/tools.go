//go:build tools

// Package tools pins every component built from Kubernetes' dependency graph: the control
// plane, etcd and the Kueue manager (hack/build-binaries.sh), and the kind node's kubelet,
// kubeadm and kube-proxy (hack/kind). JobSet is imported only so that its dependencies get
// one version here; hack/tools/jobset builds it against those versions (hack/tools/align.sh).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/jobset"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
