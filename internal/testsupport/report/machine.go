package report

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MachineFacts are what a benchmark or soak report states about the machine it ran on:
// nproc, the CPU model, Go, and the component versions (the names of the cache folders
// the binaries in root/bin resolve to).
func MachineFacts(root string) [][2]string {
	model := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	nproc := "?"
	if out, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(out))
	}
	goVersion := "?"
	if out, err := exec.Command("go", "version").Output(); err == nil {
		goVersion = strings.TrimSpace(string(out))
	}
	var comps []string
	for _, bin := range []string{"etcd", "kube-apiserver", "kueue", "jobset", "kwok"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(root, "bin", bin)); err == nil {
			comps = append(comps, filepath.Base(filepath.Dir(p)))
		}
	}
	return [][2]string{{"nproc", nproc}, {"CPU", model}, {"Go", goVersion}, {"components", strings.Join(comps, ", ")}}
}
