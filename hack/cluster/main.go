// Command cluster runs the local control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok GPU nodes, JobSet and Kueue) for the demo and for running the e2e
// suite against a long-lived cluster.
//
//	go run ./hack/cluster up       start it, print the kubeconfig path, leave it running
//	go run ./hack/cluster status   show its components, API health and nodes
//	go run ./hack/cluster down     stop it and delete its state
//
// The state dir defaults to ${BATCHLEDGER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/batchledger}/cluster
// (--state-dir overrides it); the kubeconfig is <state dir>/kubeconfig and each component
// logs to <state dir>/logs/<component>.log. Binaries come from hack/build-binaries.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
)

func main() {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	stateDir := fs.String("state-dir", localcluster.DefaultStateDir(), "directory for the cluster's certificates, kubeconfig, data, logs and pid files")
	binDir := fs.String("bin-dir", "", "directory searched first for component binaries (default: bin/, then the build cache)")
	trainer := fs.Bool("trainer", false, "also run the Kubeflow Trainer manager (TrainJobs, the torch-distributed ClusterTrainingRuntime, Kueue's TrainJob integration)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./hack/cluster [flags] up|down|status\n\nflags:\n")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	// Accept flags before or after the subcommand.
	args := os.Args[1:]
	cmd := ""
	var rest []string
	for _, a := range args {
		if cmd == "" && (a == "up" || a == "down" || a == "status") {
			cmd = a
			continue
		}
		rest = append(rest, a)
	}
	_ = fs.Parse(rest)
	if cmd == "" || fs.NArg() > 0 {
		fs.Usage()
		os.Exit(2)
	}

	var err error
	switch cmd {
	case "up":
		err = up(*stateDir, *binDir, *trainer)
	case "down":
		err = down(*stateDir)
	case "status":
		err = status(*stateDir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func up(stateDir, binDir string, trainer bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if st, err := localcluster.Status(ctx, stateDir); err == nil && st.Healthy() {
		fmt.Fprintf(os.Stderr, "a local cluster is already running in %s\n", stateDir)
		fmt.Println(st.Kubeconfig)
		return nil
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		StateDir: stateDir,
		BinDir:   binDir,
		Detach:   true,
		Trainer:  trainer,
		Log:      os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "local cluster started in %s; logs in %s/logs; stop it with: go run ./hack/cluster down\n",
		c.StartupDuration.Round(10*time.Millisecond), c.StateDir)
	fmt.Fprintf(os.Stderr, "export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Println(c.Kubeconfig)
	return nil
}

func down(stateDir string) error {
	if _, err := os.Stat(stateDir); os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "no local cluster state in %s\n", stateDir)
		return nil
	}
	if err := localcluster.StopDetached(stateDir); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "local cluster stopped; %s removed\n", stateDir)
	return nil
}

func status(stateDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := localcluster.Status(ctx, stateDir)
	if err != nil {
		return err
	}
	fmt.Print(st.String())
	if !st.Healthy() {
		return fmt.Errorf("the local cluster in %s is not running or not healthy", stateDir)
	}
	return nil
}
