package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSpecFile(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantPath    string
		wantProcess bool
	}{
		{"create as containerd's shim calls it", []string{"--root", "/run/docker/runtime-runc/moby", "--log", "/x/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/pid", "id"}, "/b/config.json", false},
		{"run with = flags", []string{"--root=/r", "run", "--bundle=/b2", "id"}, "/b2/config.json", false},
		{"create in the working folder", []string{"create", "id"}, "config.json", false},
		{"exec", []string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, "/tmp/p.json", true},
		{"start reads no spec", []string{"--root", "/r", "start", "id"}, "", false},
		{"a root folder named like a command", []string{"--root", "/run", "delete", "id"}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, isProcess := specFile(tc.args)
			if path != tc.wantPath || isProcess != tc.wantProcess {
				t.Fatalf("specFile = %q, %v; want %q, %v", path, isProcess, tc.wantPath, tc.wantProcess)
			}
		})
	}
}

func TestFilterFileKeepsOnlyAllowedCapabilities(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	spec := `{"ociVersion":"1.0.2","process":{"args":["/pause"],"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"],"permitted":["CAP_CHOWN"]}},"root":{"path":"rootfs"}}`
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := filterFile(path, false, map[string]bool{"CAP_CHOWN": true}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var got struct {
		Process struct {
			Args         []string            `json:"args"`
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"process"`
		Root map[string]string `json:"root"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Process.Capabilities["bounding"], []string{"CAP_CHOWN"}) || len(got.Process.Capabilities["effective"]) != 0 ||
		!slices.Equal(got.Process.Capabilities["permitted"], []string{"CAP_CHOWN"}) {
		t.Errorf("capabilities = %v", got.Process.Capabilities)
	}
	if got.Root["path"] != "rootfs" || !slices.Equal(got.Process.Args, []string{"/pause"}) {
		t.Errorf("other fields changed: %s", raw)
	}
}
