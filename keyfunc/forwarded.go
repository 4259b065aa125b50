package keyfunc

import (
	"fmt"
	"iter"
	"strings"
)

// forwardedHops yields the "for" values of the elements of the Forwarded
// (RFC 7239) lines from right to left, last line first. An element without
// "for" yields "". Each line is parsed on its own and only when the walk
// reaches it, so a line that the client wrote, to the left of the lines its
// proxies appended, cannot spoil the walk before the client is found.
func forwardedHops(lines []string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for i := len(lines) - 1; i >= 0; i-- {
			elems, err := parseForwardedLine(lines[i])
			if err != nil {
				yield("", fmt.Errorf("keyfunc: Forwarded line %s: %w: %w", quoteShort(lines[i]), err, ErrMalformedForwarding))
				return
			}
			for j := len(elems) - 1; j >= 0; j-- {
				if !yield(elems[j], nil) {
					return
				}
			}
		}
	}
}

// forwardedSyntaxError describes why a Forwarded line does not parse.
type forwardedSyntaxError struct {
	pos int
	msg string
}

func (e *forwardedSyntaxError) Error() string {
	return fmt.Sprintf("%s at byte %d", e.msg, e.pos)
}

// parseForwardedLine parses one Forwarded field line:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// and returns the unquoted "for" value of each non-empty element, or "" for
// an element without one. Parameter names are case-insensitive; a repeated
// "for" in one element is an error. Optional whitespace is accepted around
// ',' and ';'. An unquoted value may be any run of visible characters other
// than ',', ';' and '"', so that "for=1.2.3.4:80" and "for=[::1]", which
// RFC 7239 wants quoted, are still read.
func parseForwardedLine(s string) ([]string, error) {
	var out []string
	i := 0
	skipOWS := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		skipOWS()
		if i == len(s) {
			return out, nil
		}
		if s[i] == ',' { // empty list element
			i++
			continue
		}
		// One element: pairs separated by ';', ended by ',' or the end.
		var forVal string
		hasFor := false
		for {
			skipOWS()
			if i == len(s) || s[i] == ',' {
				break
			}
			if s[i] == ';' {
				i++
				continue
			}
			start := i
			for i < len(s) && isTchar(s[i]) {
				i++
			}
			if i == start {
				return nil, &forwardedSyntaxError{i, "expected a parameter name"}
			}
			name := s[start:i]
			if i == len(s) || s[i] != '=' {
				return nil, &forwardedSyntaxError{i, "expected '='"}
			}
			i++
			var val string
			if i < len(s) && s[i] == '"' {
				v, n, err := unquote(s[i:])
				if err != nil {
					return nil, &forwardedSyntaxError{i, err.Error()}
				}
				val = v
				i += n
			} else {
				start := i
				for i < len(s) && s[i] > 0x20 && s[i] < 0x7f && s[i] != ',' && s[i] != ';' && s[i] != '"' {
					i++
				}
				if i == start {
					return nil, &forwardedSyntaxError{i, "empty value"}
				}
				val = s[start:i]
			}
			if strings.EqualFold(name, "for") {
				if hasFor {
					return nil, &forwardedSyntaxError{start, "repeated \"for\" parameter"}
				}
				hasFor, forVal = true, val
			}
			skipOWS()
			if i < len(s) && s[i] != ';' && s[i] != ',' {
				return nil, &forwardedSyntaxError{i, "unexpected character"}
			}
		}
		out = append(out, forVal)
		if i < len(s) { // at ','
			i++
		}
	}
}

// unquote reads an RFC 9110 quoted-string at the start of s and returns its
// content and the number of bytes read.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), i + 1, nil
		case c == '\\':
			i++
			if i == len(s) {
				return "", 0, fmt.Errorf("unterminated quoted string")
			}
			if c2 := s[i]; c2 != '\t' && (c2 < 0x20 || c2 == 0x7f) {
				return "", 0, fmt.Errorf("control character in quoted string")
			}
			b.WriteByte(s[i])
		case c != '\t' && (c < 0x20 || c == 0x7f):
			return "", 0, fmt.Errorf("control character in quoted string")
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated quoted string")
}
