package installcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// DockerIgnore holds the rules of a .dockerignore file: which paths of a build context
// the Docker client leaves out of it.
//
// No Docker pattern library is in batchledger's module graph (and this package must not
// grow the main module's dependencies for one test), so the rules are re-implemented
// here after github.com/moby/patternmatcher, which both the classic builder and BuildKit
// use, for the documented syntax:
//
//   - a line starting with # is a comment; blank lines are ignored; each line is
//     trimmed, cleaned (path.Clean) and a leading / is dropped: patterns are relative to
//     the context root, never matched at any depth unless they say so with **;
//   - * matches any run of characters but /, ? one character but /, [...] a character
//     class, \ escapes the next character, ** matches any number of directories (zero
//     included) and must be a whole path element;
//   - a pattern excludes the paths it matches and everything below them;
//   - a pattern starting with ! re-includes what it matches; the last matching pattern
//     decides.
//
// A pattern outside that syntax (a ** inside a path element, a malformed class) is an
// error rather than a guess, since a guess would make the check disagree with Docker.
type DockerIgnore struct {
	patterns []ignorePattern
}

type ignorePattern struct {
	text      string // the cleaned pattern, without its !
	exception bool   // a ! pattern: matching paths are re-included
	re        *regexp.Regexp
}

// ParseDockerIgnore reads the content of a .dockerignore file.
func ParseDockerIgnore(data []byte) (*DockerIgnore, error) {
	d := &DockerIgnore{}
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		// As Docker: a comment is a # in the first column, before trimming.
		if strings.HasPrefix(line, "#") {
			continue
		}
		if err := d.Add(line); err != nil {
			return nil, fmt.Errorf(".dockerignore line %d: %w", n, err)
		}
	}
	return d, sc.Err()
}

// Add appends one pattern line, as if it were the next line of the file (so it takes
// precedence over the earlier ones). A blank line adds nothing.
func (d *DockerIgnore) Add(line string) error {
	p := strings.TrimSpace(line)
	if p == "" {
		return nil
	}
	exception := strings.HasPrefix(p, "!")
	if exception {
		p = strings.TrimSpace(p[1:])
		if p == "" {
			return fmt.Errorf("illegal exclusion pattern %q", line)
		}
	}
	p = path.Clean(p)
	if len(p) > 1 && p[0] == '/' {
		p = p[1:]
	}
	re, err := compileIgnorePattern(p)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", line, err)
	}
	d.patterns = append(d.patterns, ignorePattern{text: p, exception: exception, re: re})
	return nil
}

// compileIgnorePattern turns a cleaned pattern into an anchored regular expression over
// slash-separated context paths, as patternmatcher does.
func compileIgnorePattern(p string) (*regexp.Regexp, error) {
	if _, err := path.Match(p, "."); err != nil {
		return nil, err // the syntax check Docker makes, e.g. an unclosed [
	}
	var re strings.Builder
	re.WriteString("^")
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case inClass:
			// Inside [...] the class is handed to the regexp as written (path.Match and
			// RE2 agree on ranges and on ^ for negation), except an escape.
			if c == '\\' && i+1 < len(p) {
				i++
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
				continue
			}
			if c == ']' {
				inClass = false
			}
			re.WriteByte(c)
		case c == '*' && i+1 < len(p) && p[i+1] == '*':
			start := i == 0 || p[i-1] == '/'
			i++ // the second *
			switch {
			case start && i+1 == len(p):
				re.WriteString(".*") // a trailing **: everything below
			case start && p[i+1] == '/':
				i++ // **/ matches zero or more whole directories
				re.WriteString("(.*/)?")
			default:
				return nil, fmt.Errorf("** must be a whole path element")
			}
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		case c == '[':
			inClass = true
			re.WriteByte(c)
		case c == '\\':
			if i+1 < len(p) {
				i++
			}
			re.WriteString(regexp.QuoteMeta(p[i : i+1]))
		default:
			re.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	re.WriteString("$")
	return regexp.Compile(re.String())
}

// Excluded reports whether the context path rel (slash-separated, relative to the
// context root) is left out of the build context.
func (d *DockerIgnore) Excluded(rel string) bool {
	rel = path.Clean(strings.TrimPrefix(rel, "/"))
	// The path itself and each of its parent folders: a pattern that matches a folder
	// excludes (or re-includes) everything in it.
	candidates := []string{rel}
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			candidates = append(candidates, rel[:i])
		}
	}
	excluded := false
	for _, p := range d.patterns {
		if p.exception != excluded {
			continue // it could not change the verdict
		}
		for _, c := range candidates {
			if p.re.MatchString(c) {
				excluded = !p.exception
				break
			}
		}
	}
	return excluded
}
