package installcheck

import (
	"bytes"
	"fmt"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// DockerIgnore holds the rules of a .dockerignore file: which paths of a build context
// the Docker client leaves out of it. Reading and matching are the Docker client's own
// (github.com/moby/patternmatcher, which both the classic builder and BuildKit use), so
// the check cannot drift from what `docker build` sends.
type DockerIgnore struct {
	patterns []string
	matcher  *patternmatcher.PatternMatcher
}

// ParseDockerIgnore reads the content of a .dockerignore file.
func ParseDockerIgnore(data []byte) (*DockerIgnore, error) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	d := &DockerIgnore{patterns: patterns}
	return d, d.compile()
}

// Add appends one pattern line, as if it were the next line of the file (so it takes
// precedence over the earlier ones). A blank line adds nothing.
func (d *DockerIgnore) Add(line string) error {
	patterns, err := ignorefile.ReadAll(bytes.NewReader([]byte(line)))
	if err != nil {
		return fmt.Errorf("pattern %q: %w", line, err)
	}
	d.patterns = append(d.patterns, patterns...)
	return d.compile()
}

func (d *DockerIgnore) compile() error {
	m, err := patternmatcher.New(d.patterns)
	if err != nil {
		return fmt.Errorf(".dockerignore: %w", err)
	}
	d.matcher = m
	return nil
}

// Excluded reports whether the context path rel (slash-separated, relative to the
// context root) is left out of the build context: as the Docker client does, a path is
// out when it or one of its parent folders matches (the last matching pattern decides).
func (d *DockerIgnore) Excluded(rel string) bool {
	if d.matcher == nil {
		return false
	}
	out, err := d.matcher.MatchesOrParentMatches(rel)
	return err == nil && out
}
