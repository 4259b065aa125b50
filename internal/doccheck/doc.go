// Package doccheck keeps the documentation true: its test fails when a Go
// or YAML snippet in README.md or docs/*.md differs from the compiled or
// loaded source it was copied from, or has no source at all.
//
// # Markers
//
// Every ```go and ```yaml block is preceded, on the line right above its
// opening fence, by a marker naming its source, relative to the
// repository's root:
//
//	<!-- snippet: middleware/example_readme_test.go#quickstart-stdlib -->
//
// The part after # names a region of the source, written as
//
//	// snippet:quickstart-stdlib
//	...
//	// end snippet
//
// in Go files and with # instead of // in YAML files; the marker and end
// lines are not part of the snippet, nor are the markers of regions nested
// inside it. When a Go file has no such region, the name may be a
// top-level function's (an Example's): the snippet is then the whole
// function. Without #, the snippet is the whole file (the example
// services' policies.yaml). Go snippets come from _test.go files or from
// the example services under examples/, so that `go test` or `go vet`
// compiles every one of them.
//
// Snippets are compared with leading indentation common to all their lines
// removed, trailing blanks dropped and blank lines at either end ignored.
// Blocks of other languages (```sh, ```json, plain ```) need no marker.
//
// # Rewriting the docs
//
// After a source changes, `make docs` (go test ./internal/doccheck -update)
// copies every marked region into the docs; review the diff.
package doccheck
