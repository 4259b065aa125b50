package policy

import (
	"bytes"
	"encoding/json"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
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
	failure                limiter.FailureMode
	fallback               bool
	breaker                *breakerSpec
	headers                *headersSpec
	problem                bool
	countDenied            bool
	overrides              bool
	maxWait                time.Duration // 0: refuse at once
	exempt                 *exemptSpec
	inFlight               *inFlightSpec
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
	// soft is the soft limit of algorithm: suppressed (the rate as
	// written), whose limit is then the counting limit under it: a
	// sliding window counter of the hard limit (burst, or twice the rate).
	// Zero for other algorithms.
	soft int64
	line int
}

type breakerSpec struct {
	threshold int
	cooldown  time.Duration
	line      int
}

// inFlightSpec is a policy's in_flight block.
type inFlightSpec struct {
	max    int64
	lease  time.Duration // 0: the default
	status int           // 0: the default, 429
	at     []string      // the fields present
}

func (c *inFlightSpec) marshal() json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	o.val("max", c.max)
	if c.lease > 0 {
		o.str("lease", fmtDuration(c.lease))
	}
	if c.status > 0 {
		o.val("status", c.status)
	}
	return o.close()
}

type headersSpec struct {
	w              headers.Options
	dialect, reset string
}

type exemptSpec struct {
	paths, cidrs, methods []string
}

// marshal returns the policy as JSON in the file's schema, fields in a
// fixed order, durations as the file writes them ("1m"): what
// [Policy].Config holds and what a change is detected by.
func (ps *policySpec) marshal() json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	o.str("key", ps.key)
	o.str("classifier", ps.classifier)
	o.str("share", ps.share)
	if ps.cost > 0 {
		o.val("cost", ps.cost)
	}
	o.str("mode", string(ps.mode))
	if ps.has("limits") {
		o.raw("limits", marshalLimits(ps.limits))
	}
	if len(ps.tiers) > 0 {
		o.raw("tiers", marshalTiers(ps.tiers))
	}
	if ps.inFlight != nil {
		o.raw("in_flight", ps.inFlight.marshal())
	}
	if ps.has("failure") {
		f := "open"
		if ps.failure == limiter.FailClosed {
			f = "closed"
		}
		o.str("failure", f)
	}
	o.flag("local_fallback", ps.fallback)
	if ps.breaker != nil {
		o.raw("breaker", ps.breaker.marshal())
	}
	if ps.headers != nil {
		o.raw("headers", ps.headers.marshal())
	}
	o.flag("problem_details", ps.problem)
	o.flag("count_denied", ps.countDenied)
	o.flag("overrides", ps.overrides)
	if ps.maxWait > 0 {
		o.str("max_wait", fmtDuration(ps.maxWait))
	}
	if ps.exempt != nil {
		o.raw("exempt", ps.exempt.marshal())
	}
	return o.close()
}

func marshalTiers(tiers []tierSpec) json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	for _, t := range tiers {
		var one bytes.Buffer
		to := object{b: &one}
		switch {
		case t.unlimited:
			to.val("unlimited", true)
		case t.suspended:
			to.val("suspended", true)
		default:
			to.raw("limits", marshalLimits(t.limits))
		}
		o.raw(t.name, to.close())
	}
	return o.close()
}

func (bs *breakerSpec) marshal() json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	o.val("threshold", bs.threshold)
	if bs.cooldown > 0 {
		o.str("cooldown", fmtDuration(bs.cooldown))
	}
	return o.close()
}

func (h *headersSpec) marshal() json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	o.str("dialect", h.dialect)
	o.str("reset", h.reset)
	o.flag("bucket", h.w.Bucket)
	return o.close()
}

func (e *exemptSpec) marshal() json.RawMessage {
	var b bytes.Buffer
	o := object{b: &b}
	for _, f := range []struct {
		name string
		list []string
	}{{"paths", e.paths}, {"cidrs", e.cidrs}, {"methods", e.methods}} {
		if len(f.list) > 0 {
			o.val(f.name, f.list)
		}
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
		if ls.soft > 0 {
			// As written: the soft limit as the rate, the hard one as the
			// burst.
			o.str("algorithm", suppressedName)
			l.Rate, l.Burst = ls.soft, l.Rate
		} else {
			o.str("algorithm", l.Algorithm.String())
		}
		if ls.threshold > 0 {
			o.val("threshold", ls.threshold)
		} else {
			o.val("rate", l.Rate)
		}
		if l.Calendar != "" {
			o.str("calendar", l.Calendar)
			if l.Location != nil {
				o.str("timezone", l.Location.String())
			}
		} else {
			o.str("period", fmtDuration(l.Period))
		}
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

// flag writes the member k: true when v is set.
func (o *object) flag(k string, v bool) {
	if v {
		o.val(k, true)
	}
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
