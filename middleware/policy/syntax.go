package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxDepth bounds the nesting of a policy document; the format needs 6.
const maxDepth = 32

// parseDocument parses data, YAML or (for a name ending in ".json") JSON,
// into the root node of its one document, or returns a syntax error with
// its line. An empty document gives a nil node.
func parseDocument(p *problems, name string, data []byte) *yaml.Node {
	if strings.EqualFold(filepath.Ext(name), ".json") {
		n, line, err := parseJSON(data)
		if err != nil {
			p.add(line, "", "invalid JSON: "+err.Error())
			return nil
		}
		return n
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, msg := yamlErrorLine(err)
		p.add(line, "", "invalid YAML: "+msg)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line, _ = yamlErrorLine(err)
		}
		p.add(line, "", "a policy file holds one YAML document, found another")
		return nil
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}
	return nil
}

// yamlErrorLine splits a yaml.v3 error such as "yaml: line 3: did not find
// expected key" into its line and the rest of the message. yaml.v3 gives
// the exact line of a bad token; for an unclosed bracket the line it names
// can be one off.
func yamlErrorLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				return n, tail
			}
		}
	}
	return 0, msg
}

// parseJSON turns a JSON document into the yaml.Node tree the YAML parser
// would build for it, with the line and column of every value and key, so
// that both formats share one decoder (and JSON files get exact line
// numbers without relying on YAML's partial JSON compatibility: YAML
// rejects "\/" and tabs in some places). Duplicate keys are kept for the
// decoder to report. On a syntax error it returns the line of the error.
func parseJSON(data []byte) (*yaml.Node, int, error) {
	jp := &jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	jp.dec.UseNumber()
	for i, b := range data {
		if b == '\n' {
			jp.newlines = append(jp.newlines, i)
		}
	}
	n, err := jp.value(0)
	if err == nil {
		if _, err = jp.dec.Token(); err == io.EOF {
			return n, 0, nil
		} else if err == nil {
			err = errors.New("unexpected data after the top-level value")
		}
	}
	off := jp.dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	line, _ := jp.position(off)
	return nil, line, err
}

type jsonParser struct {
	data     []byte
	dec      *json.Decoder
	newlines []int // offsets of '\n'
}

// position returns the 1-based line and column of byte offset off.
func (jp *jsonParser) position(off int64) (line, col int) {
	i := sort.SearchInts(jp.newlines, int(off))
	start := 0
	if i > 0 {
		start = jp.newlines[i-1] + 1
	}
	return i + 1, int(off) - start + 1
}

// next returns the position where the next token starts.
func (jp *jsonParser) next() (line, col int) {
	off := jp.dec.InputOffset()
	for off < int64(len(jp.data)) {
		switch jp.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return jp.position(off)
}

func (jp *jsonParser) value(depth int) (*yaml.Node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	line, col := jp.next()
	tok, err := jp.dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Line: line, Column: col}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			n.Kind, n.Tag, n.Style = yaml.MappingNode, "!!map", yaml.FlowStyle
		} else {
			n.Kind, n.Tag, n.Style = yaml.SequenceNode, "!!seq", yaml.FlowStyle
		}
		for jp.dec.More() {
			if n.Kind == yaml.MappingNode {
				kl, kc := jp.next()
				k, err := jp.dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string) // the decoder only returns strings as keys
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: kl, Column: kc, Style: yaml.DoubleQuotedStyle})
			}
			v, err := jp.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := jp.dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.Tag, n.Value, n.Style = "!!str", t, yaml.DoubleQuotedStyle
	case json.Number:
		n.Tag, n.Value = "!!int", t.String()
		if strings.ContainsAny(n.Value, ".eE") {
			n.Tag = "!!float"
		}
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(t)
	case nil:
		n.Tag, n.Value = "!!null", "null"
	}
	return n, nil
}
