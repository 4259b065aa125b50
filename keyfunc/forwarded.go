package keyfunc

import "strings"

// prevForwarded reads the element of the Forwarded (RFC 7239) line s that
// ends at byte end, from right to left, reading no byte left of lo:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// It returns the unquoted "for" value, or "" for an element without one;
// whether the element is empty (only whitespace, a list element to skip);
// and the index of the ',' before the element, or -1 when the element
// starts the line. Parameter names are case-insensitive; a repeated "for"
// in one element is an error. Optional whitespace is accepted around ','
// and ';'. An unquoted value may be any run of visible characters other
// than ',', ';' and '"', so that "for=1.2.3.4:80" and "for=[::1]", which
// RFC 7239 wants quoted, are still read.
//
// Reading from the right gives the reading from the left, element for
// element (FuzzForwardedElements checks it): a quoted string is recognised
// by its closing quote, and a quote inside it is escaped exactly when an
// odd run of backslashes precedes it. Nothing left of the element is
// looked at, so a client's text on the left cannot change how its proxies'
// elements read. When the element does not parse, msg says why and pos is
// the byte where; msg is errTooLong when the element reaches lo and lo is
// not the start of the line.
func prevForwarded(s string, lo, end int) (forVal string, empty bool, sep int, msg string, pos int) {
	i := end
	hasFor := false
	empty = true
	for {
		for i > lo && isOWS(s[i-1]) {
			i--
		}
		switch {
		case i == lo && lo > 0:
			return "", false, 0, errTooLong, i
		case i == lo:
			return forVal, empty, -1, "", 0
		case s[i-1] == ',':
			return forVal, empty, i - 1, "", 0
		case s[i-1] == ';':
			empty = false
			i--
			continue
		}
		empty = false
		name, val, at, msg := prevPair(s, lo, i)
		if msg != "" {
			return "", false, 0, msg, at
		}
		i = at
		if strings.EqualFold(name, "for") {
			if hasFor {
				return "", false, 0, `repeated "for" parameter`, i
			}
			hasFor, forVal = true, val
		}
		// Left of a pair: whitespace, then ';', ',' or the start.
		k := i
		for k > lo && isOWS(s[k-1]) {
			k--
		}
		if k > lo && s[k-1] != ';' && s[k-1] != ',' {
			return "", false, 0, "unexpected character", k - 1
		}
	}
}

// prevPair reads the forwarded-pair of s whose value ends at byte end,
// from its value back to its name, reading no byte left of lo. It returns
// the pair's name, its unquoted value and at, the index of the pair's
// first byte; when the pair does not parse, msg says why and at is the
// byte where.
func prevPair(s string, lo, end int) (name, val string, at int, msg string) {
	if s[end-1] == '"' {
		return prevQuotedPair(s, lo, end)
	}
	return prevTokenPair(s, lo, end)
}

// prevQuotedPair is [prevPair] for a pair whose value is a quoted string.
func prevQuotedPair(s string, lo, end int) (name, val string, at int, msg string) {
	v, i, m := unquoteBackward(s, lo, end)
	switch {
	case m != "":
		return "", "", i, m
	case i == lo && lo > 0:
		return "", "", i, errTooLong
	case i == lo || s[i-1] != '=':
		return "", "", i, "expected '=' before a quoted value"
	}
	j := i - 1
	for j > lo && isTchar(s[j-1]) {
		j--
	}
	switch {
	case j == lo && lo > 0:
		return "", "", j, errTooLong
	case j == i-1:
		return "", "", j, "expected a parameter name"
	}
	return s[j : i-1], v, j, ""
}

// prevTokenPair is [prevPair] for a pair whose value is unquoted.
func prevTokenPair(s string, lo, end int) (name, val string, at int, msg string) {
	j := end
	for j > lo && isValueChar(s[j-1]) {
		j--
	}
	switch {
	case j == lo && lo > 0:
		return "", "", j, errTooLong
	case j == end:
		return "", "", end - 1, "unexpected character"
	}
	pair := s[j:end]
	eq := strings.IndexByte(pair, '=')
	switch {
	case eq < 0:
		return "", "", end, "expected '='"
	case eq == 0 || !isToken(pair[:eq]):
		return "", "", j, "expected a parameter name"
	case eq == len(pair)-1:
		return "", "", end, "empty value"
	}
	return pair[:eq], pair[eq+1:], j, ""
}

// errTooLong is the message of an element longer than maxElementBytes.
const errTooLong = "element too long"

// unquoteBackward reads the RFC 9110 quoted-string that ends with the quote
// at s[end-1], reading no byte left of lo, and returns its content and the
// index of its opening quote.
func unquoteBackward(s string, lo, end int) (content string, open int, msg string) {
	closing := end - 1
	if backslashesBefore(s, lo, closing)%2 == 1 {
		return "", closing, "unterminated quoted string"
	}
	escaped := false
	for j := closing - 1; j >= lo; j-- {
		switch c := s[j]; {
		case c == '"':
			n := backslashesBefore(s, lo, j)
			if j-n == lo && lo > 0 {
				return "", j, errTooLong
			}
			if n%2 == 0 {
				content = s[j+1 : closing]
				if escaped {
					content = unescape(content)
				}
				return content, j, ""
			}
			escaped = true
		case c == '\\':
			escaped = true
		case c != '\t' && (c < 0x20 || c == 0x7f):
			return "", j, "control character in quoted string"
		}
	}
	if lo > 0 {
		return "", lo, errTooLong
	}
	return "", 0, "unterminated quoted string"
}

// backslashesBefore counts the backslashes that immediately precede s[i],
// no further left than lo.
func backslashesBefore(s string, lo, i int) int {
	n := 0
	for i-n > lo && s[i-n-1] == '\\' {
		n++
	}
	return n
}

// unescape removes the backslash of each quoted-pair of a quoted string's
// content, which holds only complete pairs.
func unescape(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b = append(b, s[i])
	}
	return string(b)
}

// isValueChar reports whether c may appear in an unquoted Forwarded value
// as read here: a visible character other than ',', ';' and '"'.
func isValueChar(c byte) bool {
	return c > 0x20 && c < 0x7f && c != ',' && c != ';' && c != '"'
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }
