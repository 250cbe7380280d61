package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is the repository, seen from this package's folder.
const repoRoot = "../.."

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReleaseConfigMatchesTheRepository: what the release builds from is what the rest
// of the repository uses, so that a rename there fails here instead of shipping a release
// that renders another install than `make kustomize-build`, leaves the manager image
// unreplaced, or stamps a variable that no longer exists.
func TestReleaseConfigMatchesTheRepository(t *testing.T) {
	makefile := readRepoFile(t, "Makefile")
	cases := []struct {
		name, file, content, want string
	}{
		{"install.yaml renders what make kustomize-build renders", "Makefile", makefile, "$(KUSTOMIZE) build " + kustomizeDir + " "},
		{"make build stamps the same variable", "Makefile", makefile, "-X " + versionVar + "=$(VERSION)"},
		{"the Dockerfile stamps the same variable", "Dockerfile", readRepoFile(t, "Dockerfile"), "-X " + versionVar + "=${VERSION}"},
		{"the version variable exists", "pkg/version/version.go", readRepoFile(t, "pkg/version/version.go"), "var " + versionVar[strings.LastIndex(versionVar, ".")+1:] + " = "},
		{"config/manager names the image the overlay replaces", "config/manager/manager.yaml", readRepoFile(t, "config/manager/manager.yaml"), "image: " + managerImageName + ":"},
		{"the chart defaults to that image repository", chartDir + "/values.yaml", readRepoFile(t, chartDir+"/values.yaml"), chartImageLine},
		{"the chart's image tag defaults to its appVersion", chartDir + "/templates/deployment.yaml", readRepoFile(t, chartDir+"/templates/deployment.yaml"), `:{{ .Values.image.tag | default .Chart.AppVersion }}"`},
		{"make release builds the plugin and manager packages", "Makefile", makefile, "./hack/release --version=$(VERSION)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.content, tc.want) {
				t.Errorf("%s does not contain %q", tc.file, tc.want)
			}
		})
	}
	for _, pkg := range []string{pluginPackage, managerPackage} {
		if _, err := os.Stat(filepath.Join(repoRoot, pkg, "main.go")); err != nil {
			t.Errorf("released package %s: %v", pkg, err)
		}
	}
}

// TestChartVersionIsTheRelease: the repository carries the latest release: the chart's
// appVersion is a release version, the chart's version is it without the v, config/manager
// runs that release's image (as the chart does by default: `make verify-install` compares
// the two), and CHANGELOG.md has its section.
func TestChartVersionIsTheRelease(t *testing.T) {
	var chart struct {
		Version     string `json:"version"`
		AppVersion  string `json:"appVersion"`
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal([]byte(readRepoFile(t, chartDir+"/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	if err := checkVersion(chart.AppVersion); err != nil {
		t.Errorf("Chart.yaml appVersion: %v", err)
	}
	if chart.Version != chartVersion(chart.AppVersion) {
		t.Errorf("Chart.yaml version %q, want appVersion %q without the v", chart.Version, chart.AppVersion)
	}
	if chart.KubeVersion == "" {
		t.Error("Chart.yaml has no kubeVersion")
	}
	if want := "- name: " + managerImageName + "\n  newTag: " + chart.AppVersion + "\n"; !strings.Contains(readRepoFile(t, "config/manager/kustomization.yaml"), want) {
		t.Errorf("config/manager/kustomization.yaml does not set the image tag %s:\n%s", chart.AppVersion, want)
	}
	heading := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(chart.AppVersion) + `\] - \d{4}-\d{2}-\d{2}$`)
	if !heading.MatchString(readRepoFile(t, "CHANGELOG.md")) {
		t.Errorf("CHANGELOG.md has no section %q", "## ["+chart.AppVersion+"] - YYYY-MM-DD")
	}
}

func TestCheckVersion(t *testing.T) {
	cases := []struct {
		version string
		ok      bool
	}{
		{"v0.1.0", true},
		{"v1.2.3-rc.1", true},
		{"v0.1.0-3-g486f0b7-dirty", true}, // git describe between tags
		{"0.1.0", false},
		{"v0.1", false},
		{"486f0b7-dirty", false}, // git describe without a tag
		{"dev", false},
		{"", false},
	}
	for _, tc := range cases {
		if err := checkVersion(tc.version); (err == nil) != tc.ok {
			t.Errorf("checkVersion(%q) = %v, want ok %v", tc.version, err, tc.ok)
		}
	}
}

func TestCheckImages(t *testing.T) {
	const ref = "registry.example/batchledger:v0.1.0"
	cases := []struct {
		name, manifests string
		ok              bool
	}{
		{"the release image", "spec:\n  containers:\n  - image: registry.example/batchledger:v0.1.0\n", true},
		{"quoted", "    image: \"registry.example/batchledger:v0.1.0\"\n", true},
		{"left unreplaced", "  - image: batchledger:latest\n", false},
		{"one of two unreplaced", "  - image: registry.example/batchledger:v0.1.0\n  - image: batchledger:latest\n", false},
		{"no image at all", "kind: Namespace\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkImages([]byte(tc.manifests), ref); (err == nil) != tc.ok {
				t.Errorf("checkImages = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestSetChartImage(t *testing.T) {
	values := "image:\n  # -- Image repository of the manager.\n" + chartImageLine + "  tag: \"\"\n"
	got, err := setChartImage([]byte(values), "registry.example/team/batchledger")
	if err != nil {
		t.Fatal(err)
	}
	if want := "image:\n  # -- Image repository of the manager.\n  repository: registry.example/team/batchledger\n  tag: \"\"\n"; string(got) != want {
		t.Errorf("setChartImage =\n%s\nwant\n%s", got, want)
	}
	if _, err := setChartImage([]byte("image:\n  repository: other\n"), "x"); err == nil {
		t.Error("setChartImage on values without the default repository succeeded")
	}
}
