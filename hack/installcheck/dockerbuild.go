package installcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// DockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type DockerInstruction struct {
	Line    int      // where it starts, for messages
	Command string   // upper case: FROM, COPY, RUN, ...
	Flags   []string // leading --name=value words (COPY --from=build, ...)
	Args    string   // the rest, as written
}

// DockerStage is a build stage: a FROM and the instructions up to the next one.
type DockerStage struct {
	Name, Base string
	Steps      []DockerInstruction
	// Escape is the Dockerfile's escape character: a backslash, or what its escape parser directive sets.
	Escape rune
}

// ParseDockerfile splits a Dockerfile into stages, with BuildKit's own Dockerfile parser
// (parser directives, comments, continuations and instruction flags as docker build
// reads them).
func ParseDockerfile(data []byte) ([]DockerStage, error) {
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var stages []DockerStage
	for _, n := range res.AST.Children {
		in := DockerInstruction{Line: n.StartLine, Command: strings.ToUpper(n.Value), Flags: n.Flags}
		// Args as written: the original line without its instruction word and flags.
		_, rest, _ := strings.Cut(strings.TrimSpace(n.Original), " ")
		rest = strings.TrimSpace(rest)
		for _, f := range n.Flags {
			rest = strings.TrimSpace(strings.TrimPrefix(rest, f))
		}
		in.Args = rest
		if in.Command == "FROM" {
			st := DockerStage{Escape: res.EscapeToken}
			var words []string
			for a := n.Next; a != nil; a = a.Next {
				words = append(words, a.Value)
			}
			if len(words) > 0 {
				st.Base = words[0]
			}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				st.Name = words[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.Line, in.Command)
		}
		stages[len(stages)-1].Steps = append(stages[len(stages)-1].Steps, in)
	}
	return stages, nil
}

// BuildContextFiles lists the files a `docker build` of root would send: the tracked
// and untracked-but-not-gitignored files of the checkout (git ls-files), minus what
// ignore excludes, as slash-separated paths relative to root, sorted. Gitignored files
// (bin/, _output/) are left out although Docker would send them unless .dockerignore
// excludes them too; TestDockerContextBuilds checks that it does. Files listed by git
// but deleted in the working tree are skipped.
func BuildContextFiles(root string, ignore *DockerIgnore) ([]string, error) {
	out, err := run("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] || ignore.Excluded(f) {
			continue
		}
		seen[f] = true
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// StageReplay replays a build stage of a Dockerfile on the local machine, without a
// Docker engine: the stage's file system is the folder Root (an absolute image path /p is
// Root/p), COPY takes files from the build context, and RUN runs the Go toolchain of the
// host. It exists to check that a .dockerignore leaves the build everything it reads.
type StageReplay struct {
	Root      string   // the stage's file system
	Context   string   // the checkout the context files are read from
	Files     []string // the build context (BuildContextFiles)
	BuildArgs map[string]string

	// Ran and Skipped record the RUN commands executed and those left out, for the log.
	Ran, Skipped []string

	workdir string
	vars    map[string]string // ARG and ENV values, for $VAR expansion
	env     []string          // ENV values, for RUN
	escape  rune              // the Dockerfile's escape character
}

// Replay runs the stage's instructions. Only what a Go build stage needs is known:
// ARG, ENV, WORKDIR, COPY from the context and RUN of `go build` (and `go mod download`,
// skipped: it only fills the module cache, which go build fills from the host's cache as
// needed). Anything else is an error, so that a changed Dockerfile makes the check say
// what it cannot replay instead of passing without it.
func (r *StageReplay) Replay(st DockerStage) error {
	r.workdir, r.vars, r.env, r.escape = "/", map[string]string{}, nil, st.Escape
	for _, in := range st.Steps {
		if err := r.step(in); err != nil {
			return fmt.Errorf("Dockerfile line %d (%s %s): %w", in.Line, in.Command, in.Args, err)
		}
	}
	return nil
}

func (r *StageReplay) step(in DockerInstruction) error {
	switch in.Command {
	case "ARG":
		for _, a := range strings.Fields(in.Args) {
			name, def, _ := strings.Cut(a, "=")
			if v, ok := r.BuildArgs[name]; ok {
				def = v
			}
			r.vars[name] = def
		}
	case "ENV":
		words, err := shellWords(in.Args, r.vars, r.escape)
		if err != nil {
			return err
		}
		for _, w := range words {
			name, value, ok := strings.Cut(w, "=")
			if !ok {
				return fmt.Errorf("only the ENV name=value form is supported")
			}
			r.vars[name] = value
			r.env = append(r.env, w)
		}
	case "WORKDIR":
		words, err := shellWords(in.Args, r.vars, r.escape)
		if err != nil || len(words) != 1 {
			return fmt.Errorf("want one folder (%v)", err)
		}
		r.workdir = r.imagePath(words[0])
		return os.MkdirAll(r.local(r.workdir), 0o755)
	case "COPY":
		if len(in.Flags) > 0 {
			return fmt.Errorf("COPY flags %v are not supported in the replayed stage", in.Flags)
		}
		words, err := shellWords(in.Args, r.vars, r.escape)
		if err != nil {
			return err
		}
		if len(words) < 2 {
			return fmt.Errorf("COPY needs a source and a destination")
		}
		return r.copy(words[:len(words)-1], words[len(words)-1])
	case "RUN":
		for _, f := range in.Flags {
			// A cache mount only speeds the build up; anything else could feed it files.
			if !strings.HasPrefix(f, "--mount=type=cache,") {
				return fmt.Errorf("RUN flag %s is not supported by this check", f)
			}
		}
		return r.run(in)
	default:
		return fmt.Errorf("instruction %s is not known to this check", in.Command)
	}
	return nil
}

// imagePath resolves p against the working directory, as an absolute image path.
func (r *StageReplay) imagePath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(r.workdir, p)
}

// local maps an absolute image path into Root.
func (r *StageReplay) local(imagePath string) string {
	return filepath.Join(r.Root, filepath.FromSlash(imagePath))
}

// copy copies context sources to dst as COPY does: a source folder's content (. for
// the whole context) into dst, a file into dst/ if dst is a folder (it ends with / or
// there are several sources) or onto dst. A source that matches no context file is an
// error, as in Docker ("not found"), which is how an excluded go.sum shows.
func (r *StageReplay) copy(srcs []string, dst string) error {
	dstDir := strings.HasSuffix(dst, "/") || len(srcs) > 1
	dst = r.imagePath(dst)
	for _, src := range srcs {
		if strings.ContainsAny(src, "*?[") {
			return fmt.Errorf("COPY wildcards are not supported by this check")
		}
		src = path.Clean(strings.TrimPrefix(src, "/"))
		n := 0
		for _, f := range r.Files {
			var to string
			switch {
			case src == ".":
				to = path.Join(dst, f)
			case f == src && dstDir:
				to = path.Join(dst, path.Base(f))
			case f == src:
				to = dst
			case strings.HasPrefix(f, src+"/"):
				to = path.Join(dst, strings.TrimPrefix(f, src+"/"))
			default:
				continue
			}
			if err := copyFile(filepath.Join(r.Context, filepath.FromSlash(f)), r.local(to)); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			return fmt.Errorf("%s: not found in the build context", src)
		}
	}
	return nil
}

// copyFile copies a regular file with its mode, or recreates a symbolic link; what was
// at to (an earlier COPY of the same file) is replaced.
func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, fi.Mode().Perm())
}

// run replays a RUN instruction: leading NAME=value words become the environment, an
// absolute path argument (the -o /out/batchledger of the build) is taken inside Root.
func (r *StageReplay) run(in DockerInstruction) error {
	var words []string
	if strings.HasPrefix(in.Args, "[") {
		if err := json.Unmarshal([]byte(in.Args), &words); err != nil {
			return fmt.Errorf("exec form: %w", err)
		}
	} else {
		var err error
		if words, err = shellWords(in.Args, r.vars, r.escape); err != nil {
			return err
		}
	}
	var env []string
	for len(words) > 0 && isAssignment(words[0]) {
		env = append(env, words[0])
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "mod" && words[2] == "download":
		r.Skipped = append(r.Skipped, in.Args)
		return nil
	case len(words) >= 2 && words[0] == "go" && words[1] == "build":
	default:
		return fmt.Errorf("only `go build` and `go mod download` can be replayed")
	}
	for i, w := range words {
		var p string
		if name, value, ok := strings.Cut(w, "="); ok && strings.HasPrefix(name, "-") && path.IsAbs(value) {
			p = r.local(value)
			words[i] = name + "=" + p
		} else if path.IsAbs(w) {
			p = r.local(w)
			words[i] = p
		} else {
			continue
		}
		// The image has / and whatever folder go build writes into; a fresh Root has not.
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Dir = r.local(r.workdir)
	// The host's environment (its Go caches make the build link-only), then the stage's
	// ENV and the command's own assignments, as the shell would apply them. GOWORK=off:
	// no go.work file above the build folder may change what is built.
	cmd.Env = append(append(append(os.Environ(), "GOWORK=off"), r.env...), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(words, " "), err, out.String())
	}
	r.Ran = append(r.Ran, strings.Join(append(env, words...), " "))
	return nil
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellWords splits a shell-form command into words with BuildKit's shell lexer (the
// one docker build uses for ARG and ENV expansion): quotes, escapes, $NAME and ${NAME}
// from vars. The replay runs one command without a shell, so shell operators, command
// substitution and variables no ARG or ENV sets are errors rather than guesses.
func shellWords(s string, vars map[string]string, escape rune) ([]string, error) {
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	if escape == 0 {
		escape = '\\'
	}
	// A backtick is command substitution, unless it is the Dockerfile's escape character.
	if strings.Contains(s, "$(") || (escape != '`' && strings.Contains(s, "`")) {
		return nil, errors.New("command substitution is not supported")
	}
	lex := shell.NewLex(escape)
	got, err := lex.ProcessWordWithMatches(s, shell.EnvsFromSlice(env))
	if err != nil {
		return nil, err
	}
	for name := range got.Unmatched {
		return nil, fmt.Errorf("$%s is not set by an ARG or ENV of the stage", name)
	}
	words, err := lex.ProcessWords(s, shell.EnvsFromSlice(env))
	if err != nil {
		return nil, err
	}
	for _, w := range words {
		if w == "&&" || w == "||" || w == "|" || w == ";" || strings.HasSuffix(w, ";") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, ">") {
			return nil, fmt.Errorf("shell operator %q: only a single command can be replayed", w)
		}
	}
	return words, nil
}
