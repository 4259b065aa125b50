package doccheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBlocks(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		sources  []string
		problems []string
	}{
		{"marked go block", "<!-- snippet: a_test.go#x -->\n```go\nx := 1\n```", []string{"a_test.go#x"}, nil},
		{"go block without marker", "text\n```go\nx := 1\n```", []string{""}, []string{"line 2: ```go block without a snippet marker"}},
		{"yaml block without marker", "```yaml\na: 1\n```", []string{""}, []string{"line 1: ```yaml block without a snippet marker"}},
		{"shell block needs no marker", "```sh\nmake test\n```", []string{""}, nil},
		{"marker then text", "<!-- snippet: a_test.go#x -->\n\n```go\nx\n```", []string{""}, []string{
			"line 1: snippet marker not followed by a fenced block", "line 3: ```go block without a snippet marker"}},
		{"marker at the end", "text\n<!-- snippet: a_test.go#x -->", nil, []string{"line 2: snippet marker not followed by a fenced block"}},
		{"unclosed fence", "<!-- snippet: a_test.go#x -->\n```go\nx", nil, []string{"line 2: fenced block never closed"}},
		{"fence inside a block is text", "```sh\n```go\n```\n", []string{""}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			blocks, problems := parseBlocks(strings.Split(tc.doc, "\n"))
			var sources []string
			for _, b := range blocks {
				sources = append(sources, b.source)
			}
			if strings.Join(sources, "|") != strings.Join(tc.sources, "|") {
				t.Errorf("sources: got %q, want %q", sources, tc.sources)
			}
			if strings.Join(problems, "|") != strings.Join(tc.problems, "|") {
				t.Errorf("problems: got %q, want %q", problems, tc.problems)
			}
		})
	}
}

const exampleSource = `package x_test

// snippet:outer
func Example() {
	// snippet:inner
	a := 1
	// end snippet
	_ = a
}
// end snippet

// Doc comments are not part of a function's snippet.
func ExampleOther() {
	b := 2
	_ = b
}

# snippet:yaml
policies:
  api: {}
# end snippet

// snippet:open
x := 1
`

func TestRegionAndFunction(t *testing.T) {
	tests := []struct {
		name, want, err string
	}{
		{"inner", "a := 1", ""},
		{"outer", "func Example() {\n\ta := 1\n\t_ = a\n}", ""},
		{"yaml", "policies:\n  api: {}", ""},
		{"open", "", `region "open" has no end snippet line`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := region(exampleSource, tc.name)
			if !ok {
				t.Fatalf("region %q not found", tc.name)
			}
			if got != tc.want || errText(err) != tc.err {
				t.Errorf("got %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
	if _, ok, _ := region(exampleSource, "missing"); ok {
		t.Error("got a region named missing, want none")
	}
	src := strings.Split(exampleSource, "# snippet:yaml")[0]
	got, ok := function([]byte(src), "ExampleOther")
	if want := "func ExampleOther() {\n\tb := 2\n\t_ = b\n}"; !ok || got != want {
		t.Errorf("function: got %q, %t; want %q", got, ok, want)
	}
}

func TestSnippetSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte("package a\n\nfunc ExampleA() {\n\tprintln()\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := snippet(dir, "a_test.go#ExampleA"); err != nil || got != "func ExampleA() {\n\tprintln()\n}" {
		t.Errorf("ExampleA: got %q, %v", got, err)
	}
	if _, err := snippet(dir, "a_test.go#ExampleB"); errText(err) != `a_test.go: no region "ExampleB" and no function of that name` {
		t.Errorf("ExampleB: got %v, want no region", err)
	}
	if _, err := snippet(dir, "b_test.go#x"); !errors.Is(err, errMissingSource) {
		t.Errorf("missing file: got %v, want %v", err, errMissingSource)
	}
	if _, err := snippet(dir, "store/store.go#Limit"); err == nil || !strings.Contains(err.Error(), "must come from a _test.go file") {
		t.Errorf("library source: got %v, want a refusal", err)
	}
}

func TestNormalise(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\n\t\tx := 1\n\n\t\tif x > 0 {\n\t\t\tx--\n\t\t}  \n\n", "x := 1\n\nif x > 0 {\n\tx--\n}"},
		{"  a\n    b", "a\n  b"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := normalise(tc.in); got != tc.want {
			t.Errorf("normalise(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFirstDifference(t *testing.T) {
	got := firstDifference("a\nb", "a\nc\nd")
	if want := "snippet line 2:\n  got  \"b\"\n  want \"c\""; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := firstDifference("a", "a\nb"); !strings.HasPrefix(got, "snippet line 2:") {
		t.Errorf("a shorter snippet: got %q, want line 2", got)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCheckLink(t *testing.T) {
	tests := []struct{ target, err string }{
		{"docs/algorithms.md#headers-sent", ""},
		{"docs/algorithms.md#no-such-heading", "no heading for #no-such-heading"},
		{"docs/no-such-guide.md", errMissingSource.Error()},
		{"#recipes", ""},
		{"#no-such-heading", "no heading for #no-such-heading"},
		{"LICENSE", ""},
		{"https://example.com/nowhere", ""},
	}
	for _, tc := range tests {
		if err := checkLink("README.md", tc.target); errText(err) != tc.err {
			t.Errorf("%s: got %v, want %q", tc.target, err, tc.err)
		}
	}
	if got, want := slug("The API at a `glance`, 2×"), "the-api-at-a-glance-2"; got != want {
		t.Errorf("slug: got %q, want %q", got, want)
	}
}
