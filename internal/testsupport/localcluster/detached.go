package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultStateDir is where `hack/cluster` keeps the cluster it leaves running:
// <cache dir>/cluster, so its kubeconfig has a known path (<cache dir>/cluster/kubeconfig).
func DefaultStateDir() string { return filepath.Join(CacheDir(), "cluster") }

// StopDetached stops the components recorded in a state dir's pid files (a cluster started
// with Options.Detach by another process) and removes the state dir.
func StopDetached(stateDir string) error {
	recs, err := readPidRecords(stateDir)
	if err != nil {
		return err
	}
	if err := killRecorded(stateDir, recs, stopGrace); err != nil {
		return err
	}
	return os.RemoveAll(stateDir)
}

// ComponentStatus is one component of a detached cluster.
type ComponentStatus struct {
	// Name is the component (etcd, kube-apiserver, kueue, ...).
	Name string
	// PID is its process id, which is also its process group id.
	PID int
	// Running reports the recorded process still runs.
	Running bool
	// LogFile is where its output goes.
	LogFile string
}

// ClusterStatus describes a detached cluster.
type ClusterStatus struct {
	// StateDir is the inspected state dir.
	StateDir string
	// Kubeconfig is the admin kubeconfig path in it.
	Kubeconfig string
	// Components are the processes its pid files record.
	Components []ComponentStatus
	// APIReady reports a healthy API server; APIError says why not.
	APIReady bool
	APIError string
	// Nodes maps each node to whether it is Ready and schedulable.
	Nodes map[string]bool
}

// Healthy reports every component running, the API ready and every node schedulable.
func (s *ClusterStatus) Healthy() bool {
	if len(s.Components) == 0 || !s.APIReady {
		return false
	}
	for _, c := range s.Components {
		if !c.Running {
			return false
		}
	}
	for _, ok := range s.Nodes {
		if !ok {
			return false
		}
	}
	return true
}

// Status inspects the cluster of a state dir.
func Status(ctx context.Context, stateDir string) (*ClusterStatus, error) {
	recs, err := readPidRecords(stateDir)
	if err != nil {
		return nil, err
	}
	st := &ClusterStatus{StateDir: stateDir, Kubeconfig: filepath.Join(stateDir, "kubeconfig"), Nodes: map[string]bool{}}
	for _, r := range recs {
		st.Components = append(st.Components, ComponentStatus{Name: r.Name, PID: r.PID, Running: r.alive(stateDir), LogFile: r.LogFile})
	}
	if len(recs) == 0 {
		st.APIError = "no components recorded"
		return st, nil
	}
	if err := st.checkAPI(ctx); err != nil {
		st.APIError = err.Error()
	}
	return st, nil
}

func (s *ClusterStatus) checkAPI(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 3 * time.Second
	c, err := client.New(cfg, client.Options{Scheme: clusterScheme()})
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	s.APIReady = true
	for i := range nodes.Items {
		s.Nodes[nodes.Items[i].Name] = nodeSchedulable(&nodes.Items[i])
	}
	if len(nodes.Items) == 0 {
		return errors.New("no nodes")
	}
	return nil
}

// String renders the status for people.
func (s *ClusterStatus) String() string {
	if len(s.Components) == 0 {
		return fmt.Sprintf("no local cluster in %s\n", s.StateDir)
	}
	out := fmt.Sprintf("state dir:  %s\nkubeconfig: %s\n", s.StateDir, s.Kubeconfig)
	for _, c := range s.Components {
		state := "running"
		if !c.Running {
			state = "NOT RUNNING"
		}
		out += fmt.Sprintf("  %-24s pid %-8d %-12s log %s\n", c.Name, c.PID, state, c.LogFile)
	}
	if s.APIReady {
		out += "api server: ready\n"
	} else {
		out += fmt.Sprintf("api server: not ready (%s)\n", s.APIError)
	}
	for _, n := range sortedKeys(s.Nodes) {
		state := "Ready"
		if !s.Nodes[n] {
			state = "NOT READY"
		}
		out += fmt.Sprintf("  node %-20s %s\n", n, state)
	}
	return out
}
