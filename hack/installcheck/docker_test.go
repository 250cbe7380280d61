package installcheck

import (
	"debug/elf"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDockerIgnorePatterns pins the .dockerignore semantics DockerIgnore implements to
// the examples of Docker's documentation and to patternmatcher's behaviour.
func TestDockerIgnorePatterns(t *testing.T) {
	for _, c := range []struct {
		name     string
		lines    []string
		excluded []string
		included []string
	}{
		{
			name:     "a name is anchored at the root and excludes what is below it",
			lines:    []string{"docs"},
			excluded: []string{"docs", "docs/a.md", "docs/x/y/z.md"},
			included: []string{"pkg/docs/a.md", "docsx", "README.md"},
		},
		{
			name:     "leading and trailing slashes, ./ and surrounding blanks are cleaned away",
			lines:    []string{"/bin/", "  ./_output  ", "hack//tools/"},
			excluded: []string{"bin", "bin/helm", "_output/install/x.yaml", "hack/tools/helm/go.mod"},
			included: []string{"pkg/bin/x.go", "hack/cluster/main.go"},
		},
		{
			name:     "* and ? stop at a slash",
			lines:    []string{"*/temp*", "temp?"},
			excluded: []string{"somedir/temporary.txt", "somedir/temp", "somedir/temp/x", "tempa"},
			included: []string{"temp", "temporary.txt", "a/b/temp", "tempab"},
		},
		{
			name:     "*/*/ is two levels down",
			lines:    []string{"*/*/temp*"},
			excluded: []string{"a/b/temporary.txt"},
			included: []string{"a/temporary.txt", "a/b/c/temp"},
		},
		{
			name:     "** matches any number of folders, none included",
			lines:    []string{"**/*.go", "a/**/b"},
			excluded: []string{"main.go", "pkg/x/y.go", "a/b", "a/x/y/b", "a/b/c"},
			included: []string{"main.go.txt", "a/xb", "x/a/b"},
		},
		{
			name:     "a trailing ** is everything below",
			lines:    []string{"hack/**"},
			excluded: []string{"hack/x", "hack/a/b"},
			included: []string{"hacks/x"},
		},
		{
			name:     "the last matching pattern decides",
			lines:    []string{"*.md", "!README*.md", "README-secret.md"},
			excluded: []string{"a.md", "README-secret.md"},
			included: []string{"README.md", "README-x.md", "docs/a.md"},
		},
		{
			name:     "an exception re-includes a folder under an exclude-all",
			lines:    []string{"*", "!pkg/", "! cmd", "**/*_test.go"},
			excluded: []string{"Dockerfile", ".git/HEAD", "e2e/x.go", "pkg/a/b_test.go", "cmd/c_test.go"},
			included: []string{"pkg/a/b.go", "cmd/batchledger/main.go"},
		},
		{
			name:     "comments, classes and escapes",
			lines:    []string{"# bin", " #x", "[ab]c", `d\*`, "f[^0-9]"},
			excluded: []string{"#x", "ac", "bc", "d*", "fa"},
			included: []string{"bin", "# bin", "cc", "dd", "f1"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDockerIgnore([]byte(strings.Join(c.lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range c.excluded {
				if !d.Excluded(p) {
					t.Errorf("%q is not excluded by %q", p, c.lines)
				}
			}
			for _, p := range c.included {
				if d.Excluded(p) {
					t.Errorf("%q is excluded by %q", p, c.lines)
				}
			}
		})
	}
	// What the Docker client refuses is refused here too, not silently matched.
	for _, bad := range []string{"[a", "!"} {
		if _, err := ParseDockerIgnore([]byte(bad)); err == nil {
			t.Errorf("pattern %q is accepted; docker build refuses it", bad)
		}
	}
}

// TestDockerContextBuilds builds the manager the way `docker build` would, without a
// Docker engine: the build context is the checkout's files (git ls-files, tracked and
// untracked-not-ignored) minus what .dockerignore excludes, and the Dockerfile's build
// stage is replayed on it in a temporary folder (its COPY instructions, then its own
// `go build` line, parsed from the Dockerfile). The build must produce every file the
// final stage copies from it, statically linked for the distroless/static base. Further
// cases show that the replay does catch a .dockerignore that leaves out what the build
// needs. It also checks that the context leaves out what the build does not need: the
// local build output git ignores, and the install, docs, e2e and hack trees.
func TestDockerContextBuilds(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil || !fileExists(filepath.Join(root, ".git")) {
		msg := "needs git and a git checkout to list the build context"
		if os.Getenv(requireToolsEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ignoreFile, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages, err := ParseDockerfile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	build, final, products := buildStage(t, stages)

	t.Run("context", func(t *testing.T) {
		ignore, err := ParseDockerIgnore(ignoreFile)
		if err != nil {
			t.Fatal(err)
		}
		// What git ignores is local output (bin/'s links to cached binaries, _output/'s
		// cluster state): a real build would send it unless .dockerignore excludes it.
		out, err := run("git", "-C", root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range strings.Split(string(out), "\x00") {
			if p != "" && !ignore.Excluded(strings.TrimSuffix(p, "/")) {
				t.Errorf("%s is ignored by git but would be sent in the docker build context", p)
			}
		}
		for _, p := range []string{
			".git/HEAD", "bin/helm", "_output/install/helm-self.yaml", "docs/benchmarks.md",
			"internal/testsupport/localcluster/cluster.go", "hack/installcheck/installcheck.go",
			"charts/batchledger/values.yaml", "config/default/kustomization.yaml", "Makefile",
			"README.md", "Dockerfile", ".dockerignore", "batchledger.test",
			"pkg/account/account.test", "pkg/account/account_test.go", "pkg/result/testdata/x.json",
			"cpu.prof", "pkg/controller/cover.out",
		} {
			if !ignore.Excluded(p) {
				t.Errorf("%s would be sent in the docker build context; the build does not read it", p)
			}
		}
		for _, p := range []string{"go.mod", "go.sum", "cmd/batchledger/main.go", "pkg/certs/certs.go"} {
			if ignore.Excluded(p) {
				t.Errorf("%s is excluded from the docker build context", p)
			}
		}
	})

	for _, c := range []struct {
		name    string
		exclude []string // further .dockerignore lines
		wantErr string   // "" for a build that must succeed
	}{
		{name: "as-committed"},
		{name: "without-a-package", exclude: []string{"pkg/certs"}, wantErr: "pkg/certs"},
		{name: "without-go.sum", exclude: []string{"go.sum"}, wantErr: "go.sum: not found in the build context"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ignore, err := ParseDockerIgnore(ignoreFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range c.exclude {
				if err := ignore.Add(l); err != nil {
					t.Fatal(err)
				}
			}
			files, err := BuildContextFiles(root, ignore)
			if err != nil {
				t.Fatal(err)
			}
			r := &StageReplay{Root: t.TempDir(), Context: root, Files: files}
			start := time.Now()
			err = r.Replay(build)
			t.Logf("%d context files; ran %q, skipped %q (%v)", len(files), r.Ran, r.Skipped, time.Since(start).Round(time.Millisecond))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("the build stage replayed without %v: got error %v, want one naming %q", c.exclude, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Ran) == 0 {
				t.Fatalf("stage %q has no go build to replay", build.Name)
			}
			for _, p := range products {
				checkStatic(t, r.local(p), final.Base)
			}
		})
	}
}

// buildStage returns the stage the final stage copies its files from, the final stage,
// and the paths it copies (COPY --from=STAGE SRC... DST).
func buildStage(t *testing.T, stages []DockerStage) (build, final DockerStage, products []string) {
	t.Helper()
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	final = stages[len(stages)-1]
	from := ""
	for _, in := range final.Steps {
		for _, f := range in.Flags {
			if name, ok := strings.CutPrefix(f, "--from="); ok && in.Command == "COPY" {
				if from != "" && from != name {
					t.Fatalf("the final stage copies from %s and %s; the check replays one build stage", from, name)
				}
				from = name
				words := strings.Fields(in.Args)
				for _, w := range words[:len(words)-1] {
					products = append(products, path.Clean(w))
				}
			}
		}
	}
	for _, st := range stages[:len(stages)-1] {
		if st.Name == from {
			return st, final, products
		}
	}
	t.Fatalf("the final stage copies from %q, which is no earlier stage of the Dockerfile", from)
	return
}

// checkStatic checks that the build produced p, an executable with no ELF interpreter:
// the final stage's distroless/static (or scratch) base has no dynamic loader or libc.
func checkStatic(t *testing.T, p, base string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("the final stage copies %s from the build stage, which did not produce it: %v", filepath.Base(p), err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable", p)
	}
	if !strings.Contains(base, "distroless/static") && base != "scratch" {
		return
	}
	f, err := elf.Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked; it cannot run on %s", filepath.Base(p), base)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestDockerfileReplayParsing pins the Dockerfile and shell syntax the replay reads:
// continuation lines (with a comment between them), instruction flags, stage names, and
// shell words with quotes, escapes and ARG expansion; and that it refuses what it cannot
// replay faithfully.
func TestDockerfileReplayParsing(t *testing.T) {
	stages, err := ParseDockerfile([]byte(`# syntax=docker/dockerfile:1
FROM golang:1.26 AS build
ARG VERSION=dev
RUN CGO_ENABLED=0 go build \
# a comment inside the continuation
    -ldflags "-X main.version=${VERSION}" -o /out/x ./cmd/x
FROM --platform=linux/amd64 scratch
COPY --from=build /out/x /x
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) != 2 || stages[0].Name != "build" || stages[0].Base != "golang:1.26" || stages[1].Base != "scratch" {
		t.Fatalf("stages %+v", stages)
	}
	run := stages[0].Steps[1]
	if run.Command != "RUN" || run.Line != 4 || !strings.HasSuffix(run.Args, "-o /out/x ./cmd/x") {
		t.Errorf("continued RUN parsed as %+v", run)
	}
	if c := stages[1].Steps[0]; c.Command != "COPY" || len(c.Flags) != 1 || c.Flags[0] != "--from=build" || c.Args != "/out/x /x" {
		t.Errorf("COPY --from parsed as %+v", c)
	}
	words, err := shellWords(run.Args, map[string]string{"VERSION": "v1"}, stages[0].Escape)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CGO_ENABLED=0", "go", "build", "-ldflags", "-X main.version=v1", "-o", "/out/x", "./cmd/x"}
	if strings.Join(words, "|") != strings.Join(want, "|") {
		t.Errorf("shell words %q, want %q", words, want)
	}
	if w, err := shellWords(`a 'b $X' "c\"d" e\ f $X`, map[string]string{"X": "x"}, '\\'); err != nil || strings.Join(w, "|") != `a|b $X|c"d|e f|x` {
		t.Errorf("quoting: %q, %v", w, err)
	}
	for _, bad := range []string{"go build && rm -rf /", "go build $(pwd)", "go build $UNSET", `go build "x`} {
		if w, err := shellWords(bad, nil, '\\'); err == nil {
			t.Errorf("%q is split into %q; the replay cannot run it faithfully", bad, w)
		}
	}
	// A parser directive changes the escape character for continuations and quoting.
	backtick, err := ParseDockerfile([]byte("# escape=`\nFROM x\nRUN go build `\n  -o C:\\out\\x \"a`\"b\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if backtick[0].Escape != '`' {
		t.Fatalf("escape character %q, want a backtick", backtick[0].Escape)
	}
	if w, err := shellWords(backtick[0].Steps[0].Args, nil, backtick[0].Escape); err != nil || strings.Join(w, "|") != `go|build|-o|C:\out\x|a"b` {
		t.Errorf("backtick-escaped RUN split into %q, %v", w, err)
	}
}
