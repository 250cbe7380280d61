package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// Some managers read files from fixed absolute paths (Kueue v0.17 reads its metrics serving
// certificate from /etc/kueue/metrics/certs whenever its internal cert management is off).
// Rather than writing into the machine's /etc, such a process runs in a private mount
// namespace where an overlay on the top-level directory (/etc) adds the files; the machine
// never sees them.
//
// The namespace is created by the kernel when the child is cloned (SysProcAttr.Unshareflags),
// and the mounts are done by this very binary re-executed as a small helper before it
// execs the real manager: the helper runs from this package's init, so every binary that
// links localcluster (test binaries, hack/cluster) can serve as its own helper.

// helperEnv carries the helper's instructions (JSON) to the re-executed binary.
const helperEnv = "BATCHLEDGER_LOCALCLUSTER_MOUNT_HELPER"

type helperSpec struct {
	Scratch string            `json:"scratch"` // a directory for the overlay's tmpfs
	Files   map[string]string `json:"files"`   // absolute target path → source file
	Args    []string          `json:"args"`    // the command to exec afterwards
}

func init() {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		return
	}
	_ = os.Unsetenv(helperEnv)
	var spec helperSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster mount helper: bad spec: %v\n", err)
		os.Exit(127)
	}
	if err := runMountHelper(spec); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster mount helper: %v\n", err)
		os.Exit(127)
	}
}

// privateMounts reports whether this process may give a child a private mount namespace with
// an overlay (root with CAP_SYS_ADMIN; not, say, root in an unprivileged container). It is
// probed once by running the helper on a throw-away file.
var privateMounts = sync.OnceValue(func() bool {
	if os.Geteuid() != 0 {
		return false
	}
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return false
	}
	dir, err := os.MkdirTemp("", "localcluster-mount-probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "probe")
	if os.WriteFile(src, nil, 0o600) != nil {
		return false
	}
	args, env, err := privateFilesCommand([]string{trueBin},
		map[string]string{"/etc/batchledger-localcluster-probe/probe": src}, filepath.Join(dir, "scratch"))
	if err != nil {
		return false
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return cmd.Run() == nil
})

// exposeFiles makes files visible at their target paths. With private mounts it returns the
// argv, environment and clone flags that show them to the started process only; otherwise
// it copies them onto the machine (the fallback the managers' fixed paths leave), which only
// works where those paths are writable.
func exposeFiles(args []string, files map[string]string, scratch string) ([]string, []string, uintptr, error) {
	if privateMounts() {
		a, e, err := privateFilesCommand(args, files, scratch)
		return a, e, syscall.CLONE_NEWNS, err
	}
	for target, src := range files {
		data, err := os.ReadFile(src)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(target), 0o755)
		}
		if err == nil {
			err = os.WriteFile(target, data, 0o600)
		}
		if err != nil {
			return nil, nil, 0, fmt.Errorf("needs %s: no private mount namespace here (not root with CAP_SYS_ADMIN) and writing the file failed: %w",
				strings.Join(sortedKeys(files), ", "), err)
		}
	}
	return args, nil, 0, nil
}

// privateFilesCommand returns the argv and environment that run args, in a new mount
// namespace, with files visible at their target paths only to that process.
func privateFilesCommand(args []string, files map[string]string, scratch string) ([]string, []string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	for target := range files {
		if !filepath.IsAbs(target) || topDir(target) == "/" {
			return nil, nil, fmt.Errorf("private file %q must be an absolute path below a top-level directory", target)
		}
		if st, err := os.Stat(topDir(target)); err != nil || !st.IsDir() {
			return nil, nil, fmt.Errorf("private file %q: %s must be an existing directory", target, topDir(target))
		}
	}
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, nil, err
	}
	spec, err := json.Marshal(helperSpec{Scratch: scratch, Files: files, Args: args})
	if err != nil {
		return nil, nil, err
	}
	// argv keeps the real command line after a marker so `ps` and pid-file checks read well.
	argv := append([]string{self, "localcluster-mount-helper"}, args...)
	return argv, []string{helperEnv + "=" + string(spec)}, nil
}

func runMountHelper(spec helperSpec) error {
	// The namespace is already private (Go remounts / MS_PRIVATE|MS_REC for CLONE_NEWNS).
	if err := syscall.Mount("tmpfs", spec.Scratch, "tmpfs", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", spec.Scratch, err)
	}
	tops := map[string]bool{}
	for target := range spec.Files {
		tops[topDir(target)] = true
	}
	i := 0
	for _, top := range sortedKeys(tops) {
		upper := filepath.Join(spec.Scratch, fmt.Sprint(i), "upper")
		work := filepath.Join(spec.Scratch, fmt.Sprint(i), "work")
		i++
		if err := os.MkdirAll(upper, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", top, upper, work)
		if err := syscall.Mount("overlay", top, "overlay", 0, opts); err != nil {
			return fmt.Errorf("mount overlay on %s: %w", top, err)
		}
	}
	for target, src := range spec.Files {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o600); err != nil {
			return err
		}
	}
	return syscall.Exec(spec.Args[0], spec.Args, os.Environ())
}

// topDir returns the first path element of an absolute path ("/etc" for "/etc/a/b").
func topDir(p string) string {
	p = filepath.Clean(p)
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)
	return "/" + parts[0]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
