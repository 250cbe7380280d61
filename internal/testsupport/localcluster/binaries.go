package localcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Binary names of the components, as hack/build-binaries.sh produces them.
const (
	binEtcd       = "etcd"
	binAPIServer  = "kube-apiserver"
	binKCM        = "kube-controller-manager"
	binScheduler  = "kube-scheduler"
	binKwok       = "kwok"
	binKueue      = "kueue"
	binJobSet     = "jobset"
	binTrainer    = "trainer-controller-manager"
	buildBinaries = "hack/build-binaries.sh"
)

// componentOf maps a binary to its cache entry name and the hack/lib.sh variable holding its
// version, so binaries are found in the cache even when bin/ of a fresh clone is empty.
var componentOf = map[string][2]string{
	binEtcd:      {"etcd", "ETCD_VERSION"},
	binAPIServer: {"kubernetes", "KUBE_VERSION"},
	binKCM:       {"kubernetes", "KUBE_VERSION"},
	binScheduler: {"kubernetes", "KUBE_VERSION"},
	"kubectl":    {"kubectl", "KUBE_VERSION"},
	binKwok:      {"kwok", "KWOK_VERSION"},
	binKueue:     {"kueue", "KUEUE_VERSION"},
	binJobSet:    {"jobset", "JOBSET_VERSION"},
	binTrainer:   {"trainer", "TRAINER_VERSION"},
}

// RepoRoot returns the root of the batchledger checkout containing the working directory
// (the directory of the go.mod that declares batchledger.dev/batchledger).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module batchledger.dev/batchledger\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the batchledger repository (no go.mod for batchledger.dev/batchledger above the working directory)")
		}
		dir = parent
	}
}

// CacheDir is where hack/build-binaries.sh caches binaries and where `hack/cluster` keeps its
// state: $BATCHLEDGER_CACHE_DIR, else $XDG_CACHE_HOME/batchledger, else ~/.cache/batchledger.
func CacheDir() string {
	if d := os.Getenv("BATCHLEDGER_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "batchledger")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "batchledger-cache")
	}
	return filepath.Join(home, ".cache", "batchledger")
}

// binaryFinder resolves component binaries: an explicit directory, then $BATCHLEDGER_BIN_DIR,
// then <repo>/bin, then the version-keyed cache entries named in hack/lib.sh.
type binaryFinder struct {
	dirs []string
}

func newBinaryFinder(explicit string) *binaryFinder {
	var dirs []string
	for _, d := range []string{explicit, os.Getenv("BATCHLEDGER_BIN_DIR")} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	root, err := RepoRoot()
	if err == nil {
		dirs = append(dirs, filepath.Join(root, "bin"))
		versions := readVersions(filepath.Join(root, "hack", "lib.sh"))
		seen := map[string]bool{}
		for _, c := range componentOf {
			if v := versions[c[1]]; v != "" && !seen[c[0]] {
				seen[c[0]] = true
				dirs = append(dirs, filepath.Join(CacheDir(), c[0]+"-"+v))
			}
		}
	}
	return &binaryFinder{dirs: dirs}
}

// find returns the path of an executable binary, or an error that says how to build it.
func (f *binaryFinder) find(name string) (string, error) {
	for _, d := range f.dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("binary %q not found (looked in %s): run %s to build it", name, strings.Join(f.dirs, ", "), buildBinaries)
}

var versionLine = regexp.MustCompile(`^([A-Z_]+_VERSION)=(v[0-9][^\s#]*)`)

// readVersions parses the pinned versions out of hack/lib.sh, the single place they live.
func readVersions(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := versionLine.FindStringSubmatch(s.Text()); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}

// ModuleDir returns the directory of a module of the build list (downloading it if needed),
// so CRDs and webhook manifests are read from the exact Kueue and JobSet versions go.mod pins
// instead of copies in the repository.
func ModuleDir(module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v: %s", module, err, stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %v", module, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory (%s)", module, info.Error)
	}
	return info.Dir, nil
}
