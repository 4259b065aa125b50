package keyfunc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// forwardedElements reads every element of one Forwarded line the way a
// walk does, right to left, without a bound on the number of elements, and
// returns their "for" values left to right.
func forwardedElements(line string) ([]string, error) {
	w := chain{lines: []string{line}, header: "Forwarded", forwarded: true, end: len(line), budget: len(line) + 1}
	var out []string
	for {
		v, ok, err := w.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			slices.Reverse(out)
			return out, nil
		}
		out = append(out, v)
	}
}

func TestForwardedElements(t *testing.T) {
	tests := []struct {
		line    string
		want    []string
		wantErr bool
	}{
		{"for=192.0.2.1", []string{"192.0.2.1"}, false},
		{`for="[2001:db8::1]:80";proto=https;by=_x, for=10.0.0.1`, []string{"[2001:db8::1]:80", "10.0.0.1"}, false},
		{"proto=https", []string{""}, false},
		{" , for=a ,, ;for=b; ", []string{"a", "b"}, false},
		{`FOR="a\"b"`, []string{`a"b`}, false},
		{`for="a\\"`, []string{`a\`}, false},
		{`for="a\\\"b"`, []string{`a\"b`}, false},
		{`for="a,b;c=d", for=e`, []string{"a,b;c=d", "e"}, false},
		{`for="a\", for=b"`, []string{`a", for=b`}, false},
		{`host="x\"";for=a`, []string{"a"}, false},
		{"for=a=b", []string{"a=b"}, false},
		{"x==y;for=a", []string{"a"}, false},
		{";", []string{""}, false},
		{"", nil, false},
		{" \t", nil, false},
		{"for", nil, true},
		{"for=", nil, true},
		{`for="a`, nil, true},
		{`for="a\`, nil, true},
		{`for="a\"`, nil, true},
		{`for=a"`, nil, true},
		{`for="a"b`, nil, true},
		{"for=a;for=b", nil, true},
		{`for="a" b`, nil, true},
		{`for="a" proto=b`, nil, true},
		{"=a", nil, true},
		{"for=a b", nil, true},
		{"for =a", nil, true},
		{"for= a", nil, true},
		{"a/b=c", nil, true},
		{`a/b="c"`, nil, true},
		{`x=y="c"`, nil, true},
		{"for=\"a\x00\"", nil, true},
		{"for=a\x00", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			ref, refErr := parseForwardedFromLeft(tt.line)
			if (refErr != nil) != tt.wantErr || !slices.Equal(ref, tt.want) {
				t.Fatalf("reference: got %q, %v; the case is wrong", ref, refErr)
			}
			got, err := forwardedElements(tt.line)
			if tt.wantErr {
				if err == nil {
					t.Errorf("got %q, nil; want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %q", err, tt.want)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// Read right to left, a line gives exactly what it gives read left to
// right, and both refuse the same lines.
func FuzzForwardedElements(f *testing.F) {
	for _, s := range forwardingSeeds {
		f.Add(s)
	}
	for _, s := range []string{`for="a\\"`, `for="a\", for=b"`, `host="x\"";for=a`, "for=a=b", `x=y="c"`, `a="\\\"\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > maxElementBytes {
			return // the walk refuses longer elements; the reference has no bound
		}
		want, wantErr := parseForwardedFromLeft(line)
		got, err := forwardedElements(line)
		switch {
		case wantErr != nil && err == nil:
			t.Fatalf("%q: got %q, nil; the reference refuses it: %v", line, got, wantErr)
		case wantErr == nil && err != nil:
			t.Fatalf("%q: got error %v; the reference reads %q", line, err, want)
		case !slices.Equal(got, want):
			t.Fatalf("%q: got %q, the reference reads %q", line, got, want)
		}
	})
}

// parseForwardedFromLeft is the reference for the right-to-left reader: it
// parses a whole Forwarded line from the left,
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// with the same leniency (optional whitespace around ',' and ';', unquoted
// values of any visible characters but ',', ';' and '"'), and returns the
// "for" value of each non-empty element, "" for an element without one.
func parseForwardedFromLeft(s string) ([]string, error) {
	var out []string
	i := 0
	skipOWS := func() {
		for i < len(s) && isOWS(s[i]) {
			i++
		}
	}
	for {
		skipOWS()
		if i == len(s) {
			return out, nil
		}
		if s[i] == ',' {
			i++
			continue
		}
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
				return nil, fmt.Errorf("expected a parameter name at byte %d", i)
			}
			name := s[start:i]
			if i == len(s) || s[i] != '=' {
				return nil, fmt.Errorf("expected '=' at byte %d", i)
			}
			i++
			var val string
			if i < len(s) && s[i] == '"' {
				v, n, err := unquoteFromLeft(s[i:])
				if err != nil {
					return nil, fmt.Errorf("%v at byte %d", err, i)
				}
				val = v
				i += n
			} else {
				start := i
				for i < len(s) && isValueChar(s[i]) {
					i++
				}
				if i == start {
					return nil, fmt.Errorf("empty value at byte %d", i)
				}
				val = s[start:i]
			}
			if strings.EqualFold(name, "for") {
				if hasFor {
					return nil, fmt.Errorf("repeated \"for\" at byte %d", start)
				}
				hasFor, forVal = true, val
			}
			skipOWS()
			if i < len(s) && s[i] != ';' && s[i] != ',' {
				return nil, fmt.Errorf("unexpected character at byte %d", i)
			}
		}
		out = append(out, forVal)
		if i < len(s) {
			i++
		}
	}
}

// unquoteFromLeft reads an RFC 9110 quoted-string at the start of s and
// returns its content and the number of bytes read.
func unquoteFromLeft(s string) (string, int, error) {
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
