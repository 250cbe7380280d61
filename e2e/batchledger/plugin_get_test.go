package batchledger

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// lockedBuffer is a buffer the plugin writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPluginGetScripting: get's selectors and printers against a real API server (which
// selects custom resources by label and by metadata.name), and get -w following a change.
func TestPluginGetScripting(t *testing.T) {
	f := framework.New(t)
	f.Create(wrappers.MakeBatchAccount("alpha", f.Namespace).Label("team", "nlp").Shards("A").AssignJob("a", "0", "A").Obj())
	f.Create(wrappers.MakeBatchAccount("beta", f.Namespace).Label("team", "vision").Shards("A").AssignJob("b", "0", "A").Obj())

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get", "-o", "name"}, "batchaccount.batchledger.dev/alpha\nbatchaccount.batchledger.dev/beta\n"},
		{[]string{"get", "-l", "team=vision", "-o", "jsonpath={.items[*].metadata.name}"}, "beta"},
		{[]string{"get", "--field-selector", "metadata.name!=alpha", "-o", "name"}, "batchaccount.batchledger.dev/beta\n"},
		{[]string{"get", "alpha", "-o", "jsonpath={.kind}/{.metadata.name} {.spec.inputRevision}"}, "BatchAccount/alpha D"},
		{[]string{"get", "-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team", "--no-headers"}, "alpha   nlp\nbeta    vision\n"},
	}
	for _, tc := range cases {
		out, errOut, code := plugin(t, append(tc.args, "-n", f.Namespace)...)
		if code != options.ExitOK || out != tc.want {
			t.Errorf("%v: exit %d, stderr %q\n%q\nwant %q", tc.args, code, errOut, out, tc.want)
		}
	}

	// get -w: the list, then the changed account, through the API server's watch.
	ctx, cancel := context.WithTimeout(f.Ctx, framework.DefaultTimeout)
	defer cancel()
	var out, errOut lockedBuffer
	args := []string{"get", "-n", f.Namespace, "-w", "-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team", "--no-headers"}
	if c := framework.Cluster(); c != nil {
		args = append(args, "--kubeconfig", c.Kubeconfig)
	}
	done := make(chan int)
	go func() {
		done <- cli.Execute(ctx, args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	}()
	waitForOutput := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(framework.DefaultTimeout); !strings.Contains(out.String(), want); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("get -w printed %q (stderr %q), want it to contain %q", out.String(), errOut.String(), want)
			}
		}
	}
	waitForOutput("alpha   nlp\nbeta    vision\n")
	// The watch starts from the list's resourceVersion: a change made now is seen even if
	// it lands before the watch request.
	ba := &v1alpha1.BatchAccount{}
	if err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "alpha"}, ba); err != nil {
		t.Fatal(err)
	}
	ba.Labels["team"] = "speech"
	if err := f.Client.Update(f.Ctx, ba); err != nil {
		t.Fatal(err)
	}
	waitForOutput("alpha   speech\n")
	cancel()
	if code := <-done; code != options.ExitOK {
		t.Errorf("get -w ended with %d (stderr %q)", code, errOut.String())
	}
}
