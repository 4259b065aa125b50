package policy

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// spec is a decoded and validated policy file.
type spec struct {
	policies []*policySpec // in file order
	byName   map[string]*policySpec
}

// policySpec is one policy as the file describes it.
type policySpec struct {
	name  string
	path  string         // "policies.<name>"
	line  int            // line of the policy's name
	at    map[string]int // line of each field present
	owner *policySpec    // the policy shared, for share

	key, classifier, share string
	cost                   int64 // 0 means 1
	mode                   Mode
	limits                 []limitSpec
	tiers                  []tierSpec
	failure                middleware.FailureMode
	fallback               bool
	breaker                *breakerSpec
	headers                *headersSpec
	problem                bool
	countDenied            bool
	overrides              bool
	exempt                 *exemptSpec
}

func (ps *policySpec) has(field string) bool { _, ok := ps.at[field]; return ok }

type tierSpec struct {
	name, path string
	line       int
	limits     []limitSpec // nil unless the tier has limits
	unlimited  bool
	suspended  bool
}

type limitSpec struct {
	limit     store.Limit
	threshold int64 // as written, when the file used threshold
	line      int
}

type breakerSpec struct {
	threshold int
	cooldown  time.Duration
	line      int
}

type headersSpec struct {
	w              headers.Options
	dialect, reset string
}

type exemptSpec struct {
	paths, cidrs, methods []string
}

// marshal returns the policy as JSON in the file's schema, fields in a
// fixed order, durations as the file writes them ("1m"): what Status
// reports and what a change is detected by.
func (ps *policySpec) marshal() json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	o.str("key", ps.key)
	o.str("classifier", ps.classifier)
	o.str("share", ps.share)
	if ps.cost > 0 {
		o.val("cost", ps.cost)
	}
	o.str("mode", ps.mode.String())
	if ps.has("limits") {
		o.raw("limits", marshalLimits(ps.limits))
	}
	if len(ps.tiers) > 0 {
		var tb bytes.Buffer
		to := object{b: &tb}
		for _, t := range ps.tiers {
			var one bytes.Buffer
			oo := object{b: &one}
			switch {
			case t.unlimited:
				oo.val("unlimited", true)
			case t.suspended:
				oo.val("suspended", true)
			default:
				oo.raw("limits", marshalLimits(t.limits))
			}
			to.raw(t.name, oo.close())
		}
		o.raw("tiers", to.close())
	}
	if ps.has("failure") {
		f := "open"
		if ps.failure == middleware.FailClosed {
			f = "closed"
		}
		o.str("failure", f)
	}
	if ps.fallback {
		o.val("local_fallback", true)
	}
	if ps.breaker != nil {
		var bb bytes.Buffer
		bo := object{b: &bb}
		bo.val("threshold", ps.breaker.threshold)
		if ps.breaker.cooldown > 0 {
			bo.str("cooldown", fmtDuration(ps.breaker.cooldown))
		}
		o.raw("breaker", bo.close())
	}
	if h := ps.headers; h != nil {
		var hb bytes.Buffer
		ho := object{b: &hb}
		ho.str("dialect", h.dialect)
		ho.str("reset", h.reset)
		if h.w.Bucket {
			ho.val("bucket", true)
		}
		o.raw("headers", ho.close())
	}
	if ps.problem {
		o.val("problem_details", true)
	}
	if ps.countDenied {
		o.val("count_denied", true)
	}
	if ps.overrides {
		o.val("overrides", true)
	}
	if e := ps.exempt; e != nil {
		var eb bytes.Buffer
		eo := object{b: &eb}
		if len(e.paths) > 0 {
			eo.val("paths", e.paths)
		}
		if len(e.cidrs) > 0 {
			eo.val("cidrs", e.cidrs)
		}
		if len(e.methods) > 0 {
			eo.val("methods", e.methods)
		}
		o.raw("exempt", eo.close())
	}
	return o.close()
}

func marshalLimits(limits []limitSpec) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, ls := range limits {
		if i > 0 {
			b.WriteByte(',')
		}
		l := ls.limit
		o := object{b: &b}
		o.str("name", l.Name)
		o.str("algorithm", l.Algorithm.String())
		if ls.threshold > 0 {
			o.val("threshold", ls.threshold)
		} else {
			o.val("rate", l.Rate)
		}
		o.str("period", fmtDuration(l.Period))
		if l.Burst > 0 {
			o.val("burst", l.Burst)
		}
		if l.Block > 0 {
			o.str("block", fmtDuration(l.Block))
		}
		if l.BlockMax > 0 {
			o.str("block_max", fmtDuration(l.BlockMax))
		}
		o.close()
	}
	b.WriteByte(']')
	return b.Bytes()
}

// object writes a JSON object with its members in call order.
type object struct {
	b *bytes.Buffer
	n int
}

func (o *object) key(k string) {
	if o.n == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	o.n++
	kb, _ := json.Marshal(k)
	o.b.Write(kb)
	o.b.WriteByte(':')
}

// str writes a string member unless v is empty.
func (o *object) str(k, v string) {
	if v != "" {
		o.val(k, v)
	}
}

func (o *object) val(k string, v any) {
	vb, _ := json.Marshal(v) // strings, numbers, booleans and string slices cannot fail
	o.raw(k, vb)
}

func (o *object) raw(k string, v []byte) {
	o.key(k)
	o.b.Write(v)
}

func (o *object) close() json.RawMessage {
	if o.n == 0 {
		o.b.WriteByte('{')
	}
	o.b.WriteByte('}')
	return o.b.Bytes()
}
