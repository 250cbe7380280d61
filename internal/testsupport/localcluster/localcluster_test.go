package localcluster

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// newTestCluster is a Cluster with only a state dir, enough to run processes.
func newTestCluster(t *testing.T) *Cluster {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{StateDir: dir, stopSignal: make(chan struct{})}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func TestMissingBinarySaysHowToBuildIt(t *testing.T) {
	f := &binaryFinder{dirs: []string{t.TempDir()}}
	_, err := f.find(binAPIServer)
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver") || !strings.Contains(err.Error(), "hack/build-binaries.sh") {
		t.Fatalf("error = %v, want one naming kube-apiserver and hack/build-binaries.sh", err)
	}
}

func TestReadVersionsFromLibSh(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v := readVersions(filepath.Join(root, "hack", "lib.sh"))
	for _, k := range []string{"KUBE_VERSION", "ETCD_VERSION", "KWOK_VERSION", "KUEUE_VERSION", "JOBSET_VERSION", "TRAINER_VERSION"} {
		if !strings.HasPrefix(v[k], "v") {
			t.Errorf("%s = %q", k, v[k])
		}
	}
}

func TestProcessDyingDuringStartupNamesItsLog(t *testing.T) {
	c := newTestCluster(t)
	p, err := c.startProcess(procSpec{name: "broken", args: []string{"/bin/sh", "-c",
		"echo 'listen tcp 127.0.0.1:4242: bind: address already in use' >&2; exit 1"}})
	if err != nil {
		t.Fatal(err)
	}
	err = waitReady(context.Background(), p, 10*time.Second, func() error { return errors.New("not yet") })
	if err == nil {
		t.Fatal("no error for a process that exited")
	}
	for _, want := range []string{"broken exited during start-up", filepath.Join(c.StateDir, "logs", "broken.log"), "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestNotReadyInTimeNamesComponent(t *testing.T) {
	c := newTestCluster(t)
	p, err := c.startProcess(procSpec{name: "slow", args: []string{"/bin/sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	err = waitReady(context.Background(), p, 300*time.Millisecond, func() error { return errors.New("connection refused") })
	if err == nil || !strings.Contains(err.Error(), "slow not ready") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error = %v", err)
	}
}

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	c := newTestCluster(t)
	p, err := c.startProcess(procSpec{name: "parent", args: []string{"/bin/sh", "-c", "sleep 60 & sleep 60 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	pgid := p.cmd.Process.Pid
	time.Sleep(200 * time.Millisecond) // let the shell fork
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// Signal 0 to a process group fails with ESRCH once every member is gone.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("processes of the group survived Stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(p.pidPath); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}
}

func TestKillRecordedStopsDetachedProcesses(t *testing.T) {
	c := newTestCluster(t)
	c.detach = true
	// The state dir in the command line is how a pid file is told from a reused pid.
	p, err := c.startProcess(procSpec{name: "detached", args: []string{"/bin/sh", "-c", "sleep 60 # " + c.StateDir}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readPidRecords(c.StateDir)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records = %+v, %v", recs, err)
	}
	// The start returns once the child is past the point of no return of its exec, a
	// moment before the kernel fills in its new command line, which reads empty until
	// then: on a busy machine that moment shows.
	for deadline := time.Now().Add(5 * time.Second); !recs[0].alive(c.StateDir); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the started process %+v does not count as alive", recs[0])
		}
	}
	if recs[0].alive("/some/other/state") {
		t.Error("a process counts as alive for another state dir")
	}
	if err := killRecorded(c.StateDir, recs, stopGrace); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("detached process still running")
	}
}

func TestPrivateFilesAreVisibleOnlyToTheProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("private mounts need root")
	}
	c := newTestCluster(t)
	src := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(src, []byte("only-for-the-child"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := "/etc/batchledger-localcluster-test/certs/tls.crt"
	p, err := c.startProcess(procSpec{name: "reader", args: []string{"/bin/cat", target},
		privateFiles: map[string]string{target: src}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.waitErr != nil {
		t.Fatalf("reader failed: %v\n%s", p.waitErr, tail(p.logPath, 10))
	}
	if out := tail(p.logPath, 1); out != "only-for-the-child" {
		t.Errorf("reader printed %q", out)
	}
	if _, err := os.Stat("/etc/batchledger-localcluster-test"); !os.IsNotExist(err) {
		t.Errorf("the machine's /etc was modified: %v", err)
	}
}

func TestKueueWebhooksAndConversion(t *testing.T) {
	m, err := KueueManager(false)
	if err != nil {
		t.Fatal(err)
	}
	names := webhookNames(m)
	for _, want := range []string{"mjob.kb.io", "vjob.kb.io", "mjobset.kb.io", "vjobset.kb.io", "vworkload.kb.io", "vclusterqueue.kb.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("Kueue webhook %s missing from %v", want, names)
		}
	}
	for _, unwanted := range []string{"mpod.kb.io", "vpod.kb.io", "mdeployment.kb.io", "mrayjob.kb.io", "mtrainjob.kb.io"} {
		if slices.Contains(names, unwanted) {
			t.Errorf("webhook %s of a disabled integration registered", unwanted)
		}
	}
	slices.Sort(m.ConversionCRDs)
	want := []string{"clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io",
		"multikueueclusters.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"}
	if !slices.Equal(m.ConversionCRDs, want) {
		t.Errorf("conversion CRDs = %v, want %v", m.ConversionCRDs, want)
	}
	if len(m.CRDs) < 10 {
		t.Errorf("only %d Kueue CRDs", len(m.CRDs))
	}
}

func TestJobSetPodWebhooksOnlySeeJobSetPods(t *testing.T) {
	m, err := JobSetManager()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ConversionCRDs) != 0 {
		t.Errorf("conversion for single-version JobSet CRD: %v", m.ConversionCRDs)
	}
	seen := 0
	for _, obj := range m.Webhooks {
		switch w := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				if h.Name == "mpod.kb.io" {
					seen++
					checkJobSetSelector(t, h.Name, h.ObjectSelector)
				}
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				if h.Name == "vpod.kb.io" {
					seen++
					checkJobSetSelector(t, h.Name, h.ObjectSelector)
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("found %d JobSet pod webhooks, want 2", seen)
	}
}

func checkJobSetSelector(t *testing.T, name string, sel interface{ String() string }) {
	t.Helper()
	if !strings.Contains(sel.String(), "jobset.sigs.k8s.io/jobset-name") {
		t.Errorf("%s objectSelector = %v, want one on jobset.sigs.k8s.io/jobset-name", name, sel)
	}
}

func webhookNames(m Manager) []string {
	var names []string
	for _, obj := range m.Webhooks {
		switch w := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				names = append(names, h.Name)
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				names = append(names, h.Name)
			}
		}
	}
	return names
}

func TestTopDir(t *testing.T) {
	for in, want := range map[string]string{"/etc/kueue/metrics/certs/tls.crt": "/etc", "/visibility/tls.crt": "/visibility", "/x": "/x"} {
		if got := topDir(in); got != want {
			t.Errorf("topDir(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPortTakenFailsFastWithTheLog(t *testing.T) {
	etcd, err := newBinaryFinder("").find(binEtcd)
	if err != nil {
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := "http://" + l.Addr().String()
	c := newTestCluster(t)
	p, err := c.startProcess(procSpec{name: "etcd", args: []string{etcd,
		"--data-dir=" + filepath.Join(c.StateDir, "etcd"),
		"--listen-client-urls=" + taken, "--advertise-client-urls=" + taken,
		"--listen-peer-urls=http://127.0.0.1:0", "--initial-advertise-peer-urls=http://127.0.0.1:0",
		"--initial-cluster=default=http://127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	err = waitReady(context.Background(), p, 30*time.Second, func() error { return errors.New("not ready") })
	if err == nil || !strings.Contains(err.Error(), "etcd exited during start-up") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("error = %v, want etcd exiting with address already in use", err)
	}
}
