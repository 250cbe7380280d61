// Command pause is the pod sandbox process of the kind nodes' containerd, built here
// because no registry can serve registry.k8s.io/pause. Like Kubernetes' own pause, it
// sleeps until SIGINT or SIGTERM and, as PID 1 of a shared process namespace, reaps the
// zombies it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
