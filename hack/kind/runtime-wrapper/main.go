// Command runtime-wrapper is the OCI runtime dockerd uses on machines whose capability
// bounding set lacks some capabilities (CAP_SYS_RESOURCE on this kind of machine): a
// privileged container — every kind node is one — asks runc for every capability, and runc
// fails with "unable to apply caps: operation not permitted".
//
// It removes from the container's process spec every capability not in its own bounding
// set, then execs runc with the same arguments. For `create` and `run` the spec is the
// bundle's config.json; for `exec` it is the --process file. Nothing else is changed, so
// on a machine with a full bounding set it is a no-op.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// capNames are the Linux capabilities by number, as named in OCI specs.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// runcCommands are runc's subcommands; only create, run and exec read a spec.
var runcCommands = map[string]bool{
	"checkpoint": true, "create": true, "delete": true, "events": true, "exec": true, "kill": true,
	"list": true, "pause": true, "ps": true, "restore": true, "resume": true, "run": true,
	"spec": true, "start": true, "state": true, "update": true, "features": true,
}

// runcPaths are where Debian and upstream install runc.
var runcPaths = []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"}

func main() {
	if err := run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "runtime-wrapper: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	allowed, err := boundingSet()
	if err != nil {
		return err
	}
	if spec, isProcess := specFile(args[1:]); spec != "" {
		if err := filterFile(spec, isProcess, allowed); err != nil {
			return err
		}
	}
	runc := ""
	for _, p := range runcPaths {
		if _, err := os.Stat(p); err == nil {
			runc = p
			break
		}
	}
	if runc == "" {
		return fmt.Errorf("runc not found in %v", runcPaths)
	}
	return syscall.Exec(runc, append([]string{"runc"}, args[1:]...), os.Environ())
}

// boundingSet reads this process's capability bounding set (CapBnd in /proc/self/status).
func boundingSet() (map[string]bool, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		hex, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("parse CapBnd %q: %w", hex, err)
		}
		allowed := map[string]bool{}
		for i, name := range capNames {
			if mask&(1<<uint(i)) != 0 {
				allowed[name] = true
			}
		}
		return allowed, nil
	}
	return nil, fmt.Errorf("no CapBnd in /proc/self/status")
}

// specFile finds the spec the runc command line will read: the --process file of exec,
// or config.json in the --bundle folder (default: the working folder) of create and run.
func specFile(args []string) (path string, isProcess bool) {
	command, bundle, process := "", "", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func(name string) (string, bool) {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, true
			}
			if a == name && i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		if v, ok := value("--bundle"); ok {
			bundle = v
		} else if v, ok := value("-b"); ok {
			bundle = v
		} else if v, ok := value("--process"); ok {
			process = v
		} else if v, ok := value("-p"); ok {
			process = v
		} else if command == "" && runcCommands[a] {
			// Global flags come first and some take a separate value (--root DIR), so
			// the command is the first argument that names one.
			command = a
		}
	}
	switch command {
	case "exec":
		return process, true
	case "create", "run":
		if bundle == "" {
			bundle = "."
		}
		return filepath.Join(bundle, "config.json"), false
	}
	return "", false
}

// filterFile rewrites the capability lists of a spec (or of an exec process file),
// keeping only allowed capabilities; every other field is carried over untouched.
func filterFile(path string, isProcess bool, allowed map[string]bool) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	if isProcess {
		changed, err := filterProcess(doc, allowed)
		if err != nil || !changed {
			return err
		}
	} else {
		var process map[string]json.RawMessage
		if err := json.Unmarshal(doc["process"], &process); err != nil || process == nil {
			return nil
		}
		changed, err := filterProcess(process, allowed)
		if err != nil || !changed {
			return err
		}
		if doc["process"], err = json.Marshal(process); err != nil {
			return err
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

func filterProcess(process map[string]json.RawMessage, allowed map[string]bool) (bool, error) {
	var caps map[string][]string
	if raw, ok := process["capabilities"]; !ok || json.Unmarshal(raw, &caps) != nil || caps == nil {
		return false, nil
	}
	changed := false
	for set, names := range caps {
		kept := names[:0:0]
		for _, n := range names {
			if allowed[n] {
				kept = append(kept, n)
			}
		}
		if len(kept) != len(names) {
			caps[set], changed = kept, true
		}
	}
	if !changed {
		return false, nil
	}
	raw, err := json.Marshal(caps)
	process["capabilities"] = raw
	return true, err
}
