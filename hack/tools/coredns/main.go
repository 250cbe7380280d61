// Command coredns is CoreDNS (the version go.mod pins) built with only the plugins
// kubeadm's Corefile uses, for the kind node image: the same coremain and plugins as
// upstream's binary, without the cloud-provider backends (azure, route53, clouddns, …)
// that make a full build take several times longer on 2 cores. CoreDNS supports exactly
// this through its plugin list (plugin.cfg); plugins register themselves in init.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The plugins of kubeadm v1.35's Corefile.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
