package policy

import (
	"errors"
	"slices"
	"strconv"
)

// Error is one problem found in a policy file: where it is and which field
// it concerns. Loading reports every problem it finds (up to 20), joined
// with [errors.Join] and sorted by line; use [errors.As] to get the first
// one as an *Error.
type Error struct {
	// File is the file's path (for [Load]) or the name given to [New] or
	// [Parse].
	File string
	// Line is the 1-based line of the offending field or value; 0 when
	// the problem concerns the whole file.
	Line int
	// Field is the path of the field in the document, such as
	// "policies.api.tiers.anonymous.limits[0].period"; empty for syntax
	// errors.
	Field string
	// Msg says what is wrong, such as "must be positive, got -1m".
	Msg string
}

// Error formats the problem as "file:line: field: message", leaving out
// what is unknown.
func (e *Error) Error() string {
	b := make([]byte, 0, len(e.File)+len(e.Field)+len(e.Msg)+16)
	if e.File != "" {
		b = append(b, e.File...)
		b = append(b, ':')
	}
	if e.Line > 0 {
		b = strconv.AppendInt(b, int64(e.Line), 10)
		b = append(b, ':')
	}
	if len(b) > 0 {
		b = append(b, ' ')
	}
	if e.Field != "" {
		b = append(b, e.Field...)
		b = append(b, ": "...)
	}
	b = append(b, e.Msg...)
	return string(b)
}

// maxErrors bounds the problems one load reports.
const maxErrors = 20

// problems collects the errors of one load.
type problems struct {
	file string
	list []*Error
}

func (p *problems) add(line int, field, msg string) {
	p.list = append(p.list, &Error{File: p.file, Line: line, Field: field, Msg: msg})
}

func (p *problems) ok() bool { return len(p.list) == 0 }

func (p *problems) count() int { return len(p.list) }

// err returns the problems joined, sorted by line, or nil.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := slices.Clone(p.list)
	slices.SortStableFunc(list, func(a, b *Error) int { return a.Line - b.Line })
	if len(list) > maxErrors {
		list = list[:maxErrors]
	}
	errs := make([]error, len(list))
	for i, e := range list {
		errs[i] = e
	}
	return errors.Join(errs...)
}
