package batchledger

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// terminal is a pseudo-terminal whose output is captured from its master side.
type terminal struct {
	master, tty *os.File
	mu          sync.Mutex
	out         bytes.Buffer
	done        chan struct{}
}

func openTerminal(t *testing.T, cols, rows uint16) *terminal {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	term := &terminal{master: master, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil { // EIO once the terminal side is closed
				return
			}
		}
	}()
	t.Cleanup(func() { master.Close(); tty.Close() })
	return term
}

// output closes the terminal side and returns everything written to it, with the line
// discipline's carriage returns taken out.
func (term *terminal) output() string {
	term.tty.Close()
	<-term.done
	term.mu.Lock()
	defer term.mu.Unlock()
	return strings.ReplaceAll(term.out.String(), "\r\n", "\n")
}

// redraw is cupwriter's "cursor up N lines, erase below" that starts every redrawn frame.
var redraw = regexp.MustCompile("\x1b\\[(\\d+)A\x1b\\[J")

// frames splits a terminal output into the frames drawn, checking that each redraw moves
// up exactly over the frame before it: the frame is redrawn in place.
func frames(t *testing.T, out string) []string {
	t.Helper()
	var frames []string
	last := 0
	for _, m := range redraw.FindAllStringSubmatchIndex(out, -1) {
		frame := out[last:m[0]]
		n, _ := strconv.Atoi(out[m[2]:m[3]])
		if lines := strings.Count(frame, "\n"); lines != n {
			t.Errorf("a redraw moves up %d lines over a frame of %d:\n%s", n, lines, frame)
		}
		frames = append(frames, frame)
		last = m[1]
	}
	return append(frames, out[last:])
}

// TestWatchIJ245InTerminal runs `kubectl batchledger watch` in a pseudo-terminal while
// IJ245 moves on the real control plane: no status yet, five attempts over indexes 0-2
// (D missing), all four covered, Complete. The frames are redrawn in place, show the
// shards bar moving from 0/4 through 3/4 to 4/4, and the last one, left on the screen,
// says ACCEPTED; watch exits 0.
func TestWatchIJ245InTerminal(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	f.Create(job)
	f.Create(wrappers.MakeBatchAccount("ij245", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj())

	term := openTerminal(t, 100, 40)
	args := []string{"watch", "account", "ij245", "-n", f.Namespace, "--timeout", "3m"}
	if c := framework.Cluster(); c != nil {
		args = append(args, "--kubeconfig", c.Kubeconfig)
	}
	code := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		code <- cli.Execute(t.Context(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: term.tty, ErrOut: &errOut})
	}()

	framework.RunningPods(t, job, 4)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.FinishIndexPod(t, job, 1, 0, "")
	framework.CopyIndexPodAsSucceeded(t, job, 1, "")
	framework.FinishIndexPod(t, job, 2, 0, "")
	framework.CopyIndexPodAsSucceeded(t, job, 2, "")
	// Every change the watch delivers draws a frame: the one with 3/4 covered is drawn
	// before index 3 finishes.
	waitAccount(t, f, "ij245", "indexes 0-2 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 3 })
	framework.FinishIndexPod(t, job, 3, 0, "")

	var exit int
	select {
	case exit = <-code:
	case <-time.After(4 * time.Minute):
		t.Fatalf("watch did not end; it drew:\n%s", term.output())
	}
	out := term.output()
	if exit != options.ExitOK {
		t.Errorf("watch exited %d, want %d; stderr: %s", exit, options.ExitOK, errOut.String())
	}
	drawn := frames(t, out)
	t.Logf("watch drew %d frames; the first, one with D missing, and the last:\n%s\n%s\n%s", len(drawn), drawn[0], frameWith(drawn, "3/4 covered"), drawn[len(drawn)-1])
	for _, want := range []string{"3/4 covered 75%", "4/4 covered 100%"} {
		if frameWith(drawn, want) == "" {
			t.Errorf("no frame shows %q; frames:\n%s", want, strings.Join(drawn, "\n-----\n"))
		}
	}
	if fw := frameWith(drawn, "3/4 covered 75%"); !strings.Contains(fw, "missing D = job j index 3") || !strings.Contains(fw, "needed: ") {
		t.Errorf("the frame with D missing does not say what is missing and needed:\n%s", fw)
	}
	lastFrame := drawn[len(drawn)-1]
	if !strings.Contains(lastFrame, "verdict: ACCEPTED (Accepted)") || !strings.Contains(lastFrame, "job j  ") || strings.Contains(lastFrame, "\x1b[J") {
		t.Errorf("the last frame, left on the screen, must say ACCEPTED:\n%q", lastFrame)
	}
}

// frameWith is the first frame containing s, or "".
func frameWith(frames []string, s string) string {
	for _, f := range frames {
		if strings.Contains(f, s) {
			return f
		}
	}
	return ""
}

// TestWatchFailedJobPlain: without a terminal, watch prints one line per change while
// Job j fails on index 3 (backoffLimit 0), and exits 2 once shard D can no longer be
// covered, saying what is needed: a repair.
func TestWatchFailedJobPlain(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).BackoffLimit(0).Obj()
	f.Create(job)
	f.Create(wrappers.MakeBatchAccount("ij245", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj())

	pr, pw := io.Pipe()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		buf := make([]byte, 4096)
		var pending string
		for {
			n, err := pr.Read(buf)
			pending += string(buf[:n])
			for {
				i := strings.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				lines <- pending[:i]
				pending = pending[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	args := []string{"watch", "job", "j", "-n", f.Namespace, "--timeout", "3m"}
	if c := framework.Cluster(); c != nil {
		args = append(args, "--kubeconfig", c.Kubeconfig)
	}
	code := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		code <- cli.Execute(t.Context(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: pw, ErrOut: &errOut})
		pw.Close()
	}()

	framework.RunningPods(t, job, 4)
	for i := range 3 {
		framework.FinishIndexPod(t, job, i, 0, "")
	}
	framework.FinishIndexPod(t, job, 3, 1, "")

	var exit int
	select {
	case exit = <-code:
	case <-time.After(4 * time.Minute):
		t.Fatal("watch did not end")
	}
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	t.Logf("watch printed:\n%s", strings.Join(got, "\n"))
	if exit != options.ExitNotAccepted {
		t.Errorf("watch exited %d, want %d; stderr: %s", exit, options.ExitNotAccepted, errOut.String())
	}
	if !strings.Contains(errOut.String(), "cannot be Accepted without repair: shard D can no longer be covered") {
		t.Errorf("stderr: %s", errOut.String())
	}
	text := strings.Join(got, "\n")
	for _, want := range []string{" covered 3/4 (75%) job j 3/4 Failed | ShardsMissing: ", "  needed: 3/4 shards covered: shard D can no longer be covered by job j index 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// One line per change: no line repeats the one before it, time aside.
	for i := 1; i < len(got); i++ {
		_, prev, _ := strings.Cut(got[i-1], " ")
		_, cur, _ := strings.Cut(got[i], " ")
		if cur == prev {
			t.Errorf("line %d repeats the line before it: %s", i, got[i])
		}
	}
}
