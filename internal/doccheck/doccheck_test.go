package doccheck

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the docs' snippets from their sources")

// root is the repository's root, seen from this package's directory.
const root = "../.."

var (
	markerLine = regexp.MustCompile(`^<!--\s*snippet:\s*(\S+)\s*-->\s*$`)
	fenceLine  = regexp.MustCompile("^```([A-Za-z0-9_-]*)\\s*$")
	regionLine = regexp.MustCompile(`^\s*(?://|#)\s*snippet:\s*(\S+)\s*$`)
	endLine    = regexp.MustCompile(`^\s*(?://|#)\s*end snippet\s*$`)
)

// checked are the fence languages whose blocks need a marker.
var checked = map[string]bool{"go": true, "yaml": true, "yml": true}

// block is a fenced block of a Markdown file: lines[open] is its opening
// fence, lines[end] its closing one, and source the marker above it, if
// any.
type block struct {
	source    string
	lang      string
	open, end int
}

// body returns the block's text between its fences.
func (b block) body(lines []string) string {
	return strings.Join(lines[b.open+1:b.end], "\n")
}

// parseBlocks returns the fenced blocks of a Markdown file's lines, and a
// problem for every marker not followed by a fence, every fence left open
// and every Go or YAML block without a marker.
func parseBlocks(lines []string) ([]block, []string) {
	var blocks []block
	var problems []string
	source, sourceAt := "", -1
	for i := 0; i < len(lines); i++ {
		if m := markerLine.FindStringSubmatch(lines[i]); m != nil {
			source, sourceAt = m[1], i
			continue
		}
		m := fenceLine.FindStringSubmatch(lines[i])
		if sourceAt >= 0 && m == nil {
			problems = append(problems, fmt.Sprintf("line %d: snippet marker not followed by a fenced block", sourceAt+1))
			sourceAt = -1
		}
		if m == nil {
			continue
		}
		b := block{lang: m[1], open: i, end: closingFence(lines, i)}
		if sourceAt >= 0 {
			b.source = source
		}
		sourceAt = -1
		switch {
		case b.end < 0:
			problems = append(problems, fmt.Sprintf("line %d: fenced block never closed", i+1))
			return blocks, problems
		case b.source == "" && checked[b.lang]:
			problems = append(problems, fmt.Sprintf("line %d: ```%s block without a snippet marker", i+1, b.lang))
		}
		blocks = append(blocks, b)
		i = b.end
	}
	if sourceAt >= 0 {
		problems = append(problems, fmt.Sprintf("line %d: snippet marker not followed by a fenced block", sourceAt+1))
	}
	return blocks, problems
}

// closingFence returns the index of the fence that closes the block
// opened at lines[open], or -1.
func closingFence(lines []string, open int) int {
	for j := open + 1; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == "```" {
			return j
		}
	}
	return -1
}

// errMissingSource reports a marker whose source file does not exist.
var errMissingSource = errors.New("source file does not exist")

// snippet returns the normalised text a marker names ("path#name" or
// "path"), reading files under dir.
func snippet(dir, source string) (string, error) {
	path, name, _ := strings.Cut(source, "#")
	if err := allowedSource(path); err != nil {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", path, errMissingSource)
	}
	if err != nil {
		return "", err
	}
	if name == "" {
		return normalise(string(src)), nil
	}
	if text, ok, err := region(string(src), name); ok || err != nil {
		return text, err
	}
	if strings.HasSuffix(path, ".go") {
		if text, ok := function(src, name); ok {
			return text, nil
		}
	}
	return "", fmt.Errorf("%s: no region %q and no function of that name", path, name)
}

// allowedSource refuses a source the tests neither compile nor load.
func allowedSource(path string) error {
	switch {
	case strings.HasSuffix(path, "_test.go"),
		strings.HasPrefix(path, "examples/") && strings.HasSuffix(path, ".go"),
		strings.HasPrefix(path, "examples/") && strings.HasSuffix(path, ".yaml"):
		return nil
	}
	return fmt.Errorf("%s: a snippet must come from a _test.go file or from examples/", path)
}

// region returns the normalised lines between "snippet:name" and the
// matching "end snippet", without the markers of nested regions; ok is
// false when the source has no such region.
func region(src, name string) (text string, ok bool, err error) {
	lines := strings.Split(src, "\n")
	start := -1
	for i, l := range lines {
		if m := regionLine.FindStringSubmatch(l); m != nil && m[1] == name {
			start = i
			break
		}
	}
	if start < 0 {
		return "", false, nil
	}
	var kept []string
	depth := 1
	for _, l := range lines[start+1:] {
		switch {
		case regionLine.MatchString(l):
			depth++
		case endLine.MatchString(l):
			depth--
			if depth == 0 {
				return normalise(strings.Join(kept, "\n")), true, nil
			}
		default:
			kept = append(kept, l)
		}
	}
	return "", true, fmt.Errorf("region %q has no end snippet line", name)
}

// function returns the normalised source of the top-level function name,
// without its doc comment.
func function(src []byte, name string) (string, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		return "", false
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name != name {
			continue
		}
		from, to := fset.Position(fn.Type.Func).Offset, fset.Position(fn.End()).Offset
		return normalise(string(src[from:to])), true
	}
	return "", false
}

// normalise drops trailing blanks, blank lines at either end and the
// indentation every non-blank line shares.
func normalise(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	prefix, first := "", true
	for _, l := range lines {
		if l == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = indent, false
		}
		prefix = commonPrefix(prefix, indent)
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "\n")
}

// commonPrefix returns the longest common prefix of a and b.
func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// docFiles returns README.md and every docs/*.md, relative to the root.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(root, g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// TestSnippets fails when a snippet of README.md or docs/*.md differs from
// its source, or a Go or YAML block has none. With -update it rewrites the
// snippets from their sources instead.
func TestSnippets(t *testing.T) {
	for _, doc := range docFiles(t) {
		t.Run(doc, func(t *testing.T) { checkDoc(t, doc) })
	}
}

// checkDoc checks, or with -update rewrites, the snippets of one file.
func checkDoc(t *testing.T, doc string) {
	path := filepath.Join(root, filepath.FromSlash(doc))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	blocks, problems := parseBlocks(lines)
	for _, p := range problems {
		t.Errorf("%s:%s", doc, strings.TrimPrefix(p, "line "))
	}
	wants := make([]string, len(blocks))
	for i, b := range blocks {
		if b.source != "" {
			wants[i] = wantedBody(t, doc, lines, b)
		}
	}
	changed := false
	for i := len(blocks) - 1; i >= 0; i-- { // from the end: a rewrite moves the lines after it
		b := blocks[i]
		if *update && b.source != "" && wants[i] != "" && wants[i] != normalise(b.body(lines)) {
			lines = append(lines[:b.open+1], append(strings.Split(wants[i], "\n"), lines[b.end:]...)...)
			changed = true
		}
	}
	if changed {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: snippets rewritten from their sources", doc)
	}
}

// wantedBody returns the text block b should hold, reporting (in a
// subtest named after its source) a source that cannot be read, or, without
// -update, a block that differs from it; it returns "" when there is
// nothing to write.
func wantedBody(t *testing.T, doc string, lines []string, b block) (want string) {
	t.Run(b.source, func(t *testing.T) {
		text, err := snippet(root, b.source)
		if err != nil {
			t.Errorf("%s:%d: %v", doc, b.open+1, err)
			return
		}
		if lang := langOf(b.source); checked[b.lang] && lang != b.lang {
			t.Errorf("%s:%d: a ```%s block from a %s source", doc, b.open+1, b.lang, lang)
			return
		}
		want = text
		if got := normalise(b.body(lines)); !*update && got != want {
			t.Errorf("%s:%d: snippet differs from %s (run make docs to copy the source):\n%s", doc, b.open+1, b.source, firstDifference(got, want))
		}
	})
	return want
}

// langOf returns the fence language a source's snippets take.
func langOf(source string) string {
	path, _, _ := strings.Cut(source, "#")
	switch filepath.Ext(path) {
	case ".go":
		return "go"
	case ".yaml", ".yml":
		return "yaml"
	}
	return ""
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("snippet line %d:\n  got  %q\n  want %q", i+1, gl, wl)
		}
	}
	return "(no difference)"
}

var (
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe  = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*$`)
	slugDrop   = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// TestLinks fails when README.md or a guide links to a file of the
// repository that does not exist, or to a heading the target lacks.
func TestLinks(t *testing.T) {
	for _, doc := range docFiles(t) {
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range links(strings.Split(string(raw), "\n")) {
			if err := checkLink(doc, target); err != nil {
				t.Errorf("%s: link %s: %v", doc, target, err)
			}
		}
	}
}

// links returns the targets of the Markdown links outside fenced blocks.
func links(lines []string) []string {
	var targets []string
	inFence := false
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range linkTarget.FindAllStringSubmatch(l, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// checkLink checks one link of doc: a file of the repository, and the
// heading its fragment names in a Markdown target. Links with a scheme are
// not followed.
func checkLink(doc, target string) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, fragment, _ := strings.Cut(target, "#")
	file := filepath.Join(root, filepath.FromSlash(doc))
	if path != "" {
		file = filepath.Join(root, filepath.Dir(filepath.FromSlash(doc)), filepath.FromSlash(path))
	}
	raw, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(file); statErr == nil {
			return nil // a directory
		}
		return errMissingSource
	}
	if err != nil || fragment == "" || !strings.HasSuffix(file, ".md") {
		return nil
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if m := headingRe.FindStringSubmatch(l); m != nil && slug(m[1]) == fragment {
			return nil
		}
	}
	return fmt.Errorf("no heading for #%s", fragment)
}

// slug returns the anchor GitHub gives a heading.
func slug(heading string) string {
	s := slugDrop.ReplaceAllString(strings.ToLower(heading), "")
	return strings.ReplaceAll(s, " ", "-")
}
