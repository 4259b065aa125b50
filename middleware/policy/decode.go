package policy

import (
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ratekeeper/ratekeeper/store"
)

// maxNodes bounds the values one load visits, so that a small file of
// nested YAML aliases cannot make loading expensive.
const maxNodes = 100_000

// decoder walks a parsed document, reporting every problem with its line
// and field path. It never panics on a well-formed node tree, whatever
// its shape.
type decoder struct {
	*problems
	visits int
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// deref follows aliases and counts the visit; it returns nil once the
// document has cost too much.
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	d.visits++
	if d.visits == maxNodes {
		d.add(n.Line, "", fmt.Sprintf("the document expands to more than %d values (nested aliases?)", maxNodes))
	}
	if d.visits >= maxNodes {
		return nil
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names a node's type and value for "got ..." messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return "the string " + strconv.Quote(n.Value)
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!null":
			return "null"
		}
		return strconv.Quote(n.Value)
	}
	return "an unsupported value"
}

// mapping calls each for every entry of the mapping n, reporting keys that
// are not strings, merge keys and keys defined twice.
func (d *decoder) mapping(n *yaml.Node, field string, each func(key string, k, v *yaml.Node)) bool {
	if n = d.deref(n); n == nil {
		return false
	}
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, field, "must be a mapping, got "+describe(n))
		return false
	}
	first := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			return false
		}
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			d.add(k.Line, field, "keys must be names, got "+describe(k))
			continue
		}
		if k.Tag == "!!merge" || k.Value == "<<" {
			d.add(k.Line, join(field, k.Value), "merge keys are not supported; repeat the fields or use an alias for the whole value")
			continue
		}
		if line, dup := first[k.Value]; dup {
			d.add(k.Line, join(field, k.Value), fmt.Sprintf("defined twice (first at line %d)", line))
			continue
		}
		first[k.Value] = k.Line
		each(k.Value, k, v)
	}
	return true
}

func (d *decoder) unknown(k *yaml.Node, field string, known string) {
	d.add(k.Line, field, "unknown field (known: "+known+")")
}

func (d *decoder) seq(n *yaml.Node, field string) []*yaml.Node {
	if n = d.deref(n); n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.add(n.Line, field, "must be a list, got "+describe(n))
		return nil
	}
	return n.Content
}

func (d *decoder) scalar(n *yaml.Node, field, tag, want string) (*yaml.Node, bool) {
	if n = d.deref(n); n == nil {
		return nil, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != tag {
		d.add(n.Line, field, "must be "+want+", got "+describe(n))
		return nil, false
	}
	return n, true
}

func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	n, ok := d.scalar(n, field, "!!str", "a string")
	if !ok {
		return "", false
	}
	if n.Value == "" {
		d.add(n.Line, field, "must not be empty")
		return "", false
	}
	return n.Value, true
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	n, ok := d.scalar(n, field, "!!bool", "true or false")
	if !ok {
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.add(n.Line, field, "must be true or false, got "+describe(n))
		return false, false
	}
	return b, true
}

// integer decodes an integer of at least lo.
func (d *decoder) integer(n *yaml.Node, field string, lo int64) (int64, bool) {
	n, ok := d.scalar(n, field, "!!int", "a whole number")
	if !ok {
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		d.add(n.Line, field, "must be a whole number that fits in 64 bits, got "+n.Value)
		return 0, false
	}
	if v < lo {
		d.add(n.Line, field, fmt.Sprintf("must be at least %d, got %d", lo, v))
		return 0, false
	}
	return v, true
}

// duration decodes a Go duration string of whole milliseconds; positive
// unless zero is allowed.
func (d *decoder) duration(n *yaml.Node, field string, zero bool) (time.Duration, bool) {
	if r := d.deref(n); r != nil && r.Kind == yaml.ScalarNode && (r.Tag == "!!int" || r.Tag == "!!float") {
		d.add(r.Line, field, `must be a duration with a unit, such as "1m", "24h" or "250ms", got the number `+r.Value)
		return 0, false
	}
	s, ok := d.str(n, field)
	if !ok {
		return 0, false
	}
	line := d.deref(n).Line
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.add(line, field, fmt.Sprintf(`must be a duration such as "1m", "24h" or "250ms", got %q`, s))
	case v < 0 || v == 0 && !zero:
		want := "positive"
		if zero {
			want = "zero or positive"
		}
		d.add(line, field, fmt.Sprintf("must be %s, got %s", want, s))
	case v%time.Millisecond != 0:
		d.add(line, field, "must be whole milliseconds, got "+s)
	default:
		return v, true
	}
	return 0, false
}

// decode turns the document root into a spec, validating everything that
// does not depend on the application (key functions, classifiers, the
// fallback store).
func decode(p *problems, root *yaml.Node) *spec {
	d := &decoder{problems: p}
	s := &spec{byName: map[string]*policySpec{}}
	if root == nil {
		p.add(0, "policies", "required: the file defines no policies")
		return s
	}
	seen := false
	d.mapping(root, "", func(key string, k, v *yaml.Node) {
		switch key {
		case "version":
			if n, ok := d.integer(v, "version", 0); ok && n != 1 {
				d.add(d.deref(v).Line, "version", fmt.Sprintf("must be 1, got %d", n))
			}
		case "policies":
			seen = true
			d.policies(s, v)
		default:
			d.unknown(k, key, "version, policies")
		}
	})
	if !seen && p.ok() {
		p.add(root.Line, "policies", "required: the file defines no policies")
	}
	if p.ok() {
		d.resolveShares(s)
	}
	return s
}

func (d *decoder) policies(s *spec, n *yaml.Node) {
	ok := d.mapping(n, "policies", func(name string, k, v *yaml.Node) {
		ps := d.policy(name, k, v)
		s.policies = append(s.policies, ps)
		s.byName[name] = ps
	})
	if ok && len(s.policies) == 0 {
		d.add(d.deref(n).Line, "policies", "must define at least one policy")
	}
}

const policyFields = "key, classifier, share, cost, mode, limits, tiers, in_flight, failure, local_fallback, breaker, headers, problem_details, count_denied, overrides, max_wait, exempt"

func (d *decoder) policy(name string, k, v *yaml.Node) *policySpec {
	path := join("policies", name)
	ps := &policySpec{name: name, line: k.Line, path: path, at: map[string]int{}, mode: modeEnforce}
	before := d.count()
	if err := validName(name); err != "" {
		d.add(k.Line, path, "policy name "+err)
	}
	d.mapping(v, path, func(key string, kk, vv *yaml.Node) {
		ps.at[key] = kk.Line
		d.policyField(ps, key, kk, vv)
	})
	if d.count() == before {
		d.checkPolicy(ps)
	}
	return ps
}

// policyField decodes the field key of a policy.
func (d *decoder) policyField(ps *policySpec, key string, kk, vv *yaml.Node) {
	f := join(ps.path, key)
	if dst := ps.stringField(key); dst != nil {
		*dst, _ = d.str(vv, f)
		return
	}
	if dst := ps.boolField(key); dst != nil {
		*dst, _ = d.boolean(vv, f)
		return
	}
	switch key {
	case "cost":
		ps.cost, _ = d.integer(vv, f, 1)
	case "mode":
		if s, ok := d.str(vv, f); ok {
			if ps.mode = Mode(s); !ps.mode.valid() {
				d.add(kk.Line, f, fmt.Sprintf("unknown mode %q (want enforce, dry_run or off)", s))
			}
		}
	case "limits":
		ps.limits = d.limits(vv, f)
	case "tiers":
		d.mapping(vv, f, func(tier string, tk, tv *yaml.Node) {
			ps.tiers = append(ps.tiers, d.tier(tier, join(f, tier), tk, tv))
		})
	case "failure":
		ps.failure = d.failure(kk, vv, f)
	case "breaker":
		ps.breaker = d.breaker(vv, f)
	case "in_flight":
		ps.inFlight = d.inFlight(vv, f)
	case "headers":
		ps.headers = d.headers(vv, f)
	case "exempt":
		ps.exempt = d.exempt(vv, f)
	case "max_wait":
		ps.maxWait, _ = d.duration(vv, f, true)
	default:
		d.unknown(kk, f, policyFields)
	}
}

// stringField returns the policy's string field named key, or nil.
func (ps *policySpec) stringField(key string) *string {
	switch key {
	case "key":
		return &ps.key
	case "classifier":
		return &ps.classifier
	case "share":
		return &ps.share
	}
	return nil
}

// boolField returns the policy's true-or-false field named key, or nil.
func (ps *policySpec) boolField(key string) *bool {
	switch key {
	case "local_fallback":
		return &ps.fallback
	case "problem_details":
		return &ps.problem
	case "count_denied":
		return &ps.countDenied
	case "overrides":
		return &ps.overrides
	}
	return nil
}

func (d *decoder) failure(k, v *yaml.Node, f string) limiter.FailureMode {
	s, ok := d.str(v, f)
	switch {
	case !ok, s == "open":
		return limiter.FailOpen
	case s == "closed":
		return limiter.FailClosed
	}
	d.add(k.Line, f, fmt.Sprintf("unknown failure mode %q (want open or closed)", s))
	return limiter.FailOpen
}

// checkPolicy checks the fields of a policy without problems of its own
// against each other.
func (d *decoder) checkPolicy(ps *policySpec) {
	before := d.count()
	if ps.maxWait > 0 && ps.overrides {
		d.add(ps.at["max_wait"], join(ps.path, "max_wait"), "cannot be combined with overrides")
	}
	has := func(f string) bool { _, ok := ps.at[f]; return ok }
	kinds := 0
	for _, f := range []string{"key", "classifier", "share"} {
		if has(f) {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		d.add(ps.line, ps.path, "needs one of key (with limits), classifier (with tiers) or share")
		return
	case kinds > 1:
		d.add(ps.line, ps.path, "key, classifier and share exclude each other: give exactly one")
		return
	}
	switch {
	case has("share"):
		for f := range ps.at {
			if f != "share" && f != "cost" && f != "mode" {
				d.add(ps.at[f], join(ps.path, f), "not allowed with share: a policy that shares another's quota takes its settings and only has its own cost and mode")
			}
		}
	case has("key"):
		if has("tiers") {
			d.add(ps.at["tiers"], join(ps.path, "tiers"), "needs classifier instead of key: a key function gives no tier")
		}
		if !has("limits") && !has("in_flight") {
			d.add(ps.line, join(ps.path, "limits"), "required with key (unless the policy has in_flight)")
		}
	case has("classifier"):
		if has("limits") {
			d.add(ps.at["limits"], join(ps.path, "limits"), "not allowed with classifier: put the limits in the tiers")
		}
		if !has("tiers") {
			d.add(ps.line, join(ps.path, "tiers"), "required with classifier")
		} else if len(ps.tiers) == 0 {
			d.add(ps.at["tiers"], join(ps.path, "tiers"), "must define at least one tier")
		}
	}
	if d.count() > before {
		return
	}
	if has("key") && has("limits") {
		d.checkLimits(ps, ps.limits, join(ps.path, "limits"), ps.at["limits"])
	}
	d.checkTierLimits(ps)
}

// checkTierLimits checks the limits of each tier of a policy, and that
// its tiers all shed load (algorithm suppressed) or none does.
func (d *decoder) checkTierLimits(ps *policySpec) {
	var first *tierSpec
	for i := range ps.tiers {
		t := &ps.tiers[i]
		if t.limits == nil {
			continue
		}
		d.checkLimits(ps, t.limits, join(t.path, "limits"), t.line)
		if first == nil {
			first = t
		} else if (t.limits[0].soft > 0) != (first.limits[0].soft > 0) {
			// One limiter, one store: shedding load is the store's way.
			d.add(t.line, join(t.path, "limits"), fmt.Sprintf("use %s but the tier %q uses %s: the tiers of a policy all use suppressed or none does", t.limits[0].algorithm(), first.name, first.limits[0].algorithm()))
		}
	}
}

// soft returns the soft limits of a policy that sheds load (algorithm
// suppressed), by limit ID, as package store/suppressed takes them; nil
// for other policies.
func (ps *policySpec) soft() func(store.Limit) int64 {
	softs := map[string]int64{}
	add := func(limits []limitSpec) {
		for _, l := range limits {
			if l.soft > 0 {
				softs[softKey(l.limit)] = l.soft
			}
		}
	}
	add(ps.limits)
	for _, t := range ps.tiers {
		add(t.limits)
	}
	if len(softs) == 0 {
		return nil
	}
	return func(l store.Limit) int64 { return softs[softKey(l)] }
}

// softKey tells apart the counting limits of a policy's tiers.
func softKey(l store.Limit) string {
	return l.ID() + "\x00" + strconv.FormatInt(l.Rate, 10) + "\x00" + l.Period.String()
}

// checkLimits checks a policy's (or tier's) limits together: one
// algorithm, distinct IDs, counted refusals only for window algorithms,
// and the policy's cost within every capacity.
func (d *decoder) checkLimits(ps *policySpec, limits []limitSpec, path string, line int) {
	if len(limits) == 0 {
		d.add(line, path, "must hold at least one limit")
		return
	}
	if len(limits) > store.MaxLimits {
		d.add(line, path, fmt.Sprintf("holds %d limits, at most %d", len(limits), store.MaxLimits))
		return
	}
	alg := limits[0].limit.Algorithm
	for i, l := range limits {
		f := index(path, i)
		if l.limit.Algorithm != alg || (l.soft > 0) != (limits[0].soft > 0) {
			d.add(l.line, join(f, "algorithm"), fmt.Sprintf("is %s but %s[0] is %s: the limits of one policy or tier use one algorithm", l.algorithm(), path, limits[0].algorithm()))
		}
		for j := range i {
			if limits[j].limit.ID() == l.limit.ID() {
				d.add(l.line, f, fmt.Sprintf("has the same name %q as %s[%d]; give each limit a distinct name", l.limit.ID(), path, j))
			}
		}
		if ps.cost > l.limit.Capacity() {
			d.add(ps.at["cost"], join(ps.path, "cost"), fmt.Sprintf("%d exceeds the capacity %d of %s: no request could ever be admitted", ps.cost, l.limit.Capacity(), f))
		}
	}
	if ps.countDenied && (!window(alg) || limits[0].soft > 0) {
		d.add(ps.at["count_denied"], join(ps.path, "count_denied"), fmt.Sprintf("needs a window algorithm (sliding_window_log, sliding_window_counter or fixed_window), not %s", limits[0].algorithm()))
	}
	if ps.maxWait > 0 && (window(alg) || limits[0].soft > 0) {
		d.add(ps.at["max_wait"], join(ps.path, "max_wait"), fmt.Sprintf("needs gcra or token_bucket limits, not %s", limits[0].algorithm()))
	}
}

func window(a store.Algorithm) bool {
	return a == store.SlidingWindowLog || a == store.SlidingWindowCounter || a == store.FixedWindow
}

// resolveShares links every sharing policy to the policy it shares and
// checks its cost against that policy's limits.
func (d *decoder) resolveShares(s *spec) {
	for _, ps := range s.policies {
		if ps.share == "" {
			continue
		}
		f := join(ps.path, "share")
		owner := s.byName[ps.share]
		switch {
		case owner == nil:
			d.add(ps.at["share"], f, fmt.Sprintf("names the unknown policy %q", ps.share))
			continue
		case owner == ps:
			d.add(ps.at["share"], f, "names the policy itself")
			continue
		case owner.share != "":
			d.add(ps.at["share"], f, fmt.Sprintf("names %q, which shares %q itself: share %q directly", ps.share, owner.share, owner.share))
			continue
		}
		ps.owner = owner
		lists := [][]limitSpec{owner.limits}
		for _, t := range owner.tiers {
			lists = append(lists, t.limits)
		}
		for _, list := range lists {
			for _, l := range list {
				if ps.cost > l.limit.Capacity() {
					d.add(ps.at["cost"], join(ps.path, "cost"), fmt.Sprintf("%d exceeds the capacity %d of a limit of %q (line %d): no request could ever be admitted", ps.cost, l.limit.Capacity(), owner.name, l.line))
				}
			}
		}
	}
}

const tierFields = "limits, unlimited, suspended"

func (d *decoder) tier(name, path string, k, v *yaml.Node) tierSpec {
	t := tierSpec{name: name, path: path, line: k.Line}
	if err := validName(name); err != "" {
		d.add(k.Line, path, "tier name "+err)
	}
	d.mapping(v, path, func(key string, kk, vv *yaml.Node) {
		f := join(path, key)
		switch key {
		case "limits":
			t.limits = d.limits(vv, f)
			if t.limits == nil {
				t.limits = []limitSpec{}
			}
		case "unlimited":
			t.unlimited, _ = d.boolean(vv, f)
		case "suspended":
			t.suspended, _ = d.boolean(vv, f)
		default:
			d.unknown(kk, f, tierFields)
		}
	})
	n := 0
	for _, b := range []bool{t.limits != nil, t.unlimited, t.suspended} {
		if b {
			n++
		}
	}
	if n != 1 {
		d.add(k.Line, path, "needs exactly one of limits, unlimited: true or suspended: true")
	}
	return t
}

func (d *decoder) limits(n *yaml.Node, path string) []limitSpec {
	items := d.seq(n, path)
	out := make([]limitSpec, 0, len(items))
	for i, item := range items {
		if l, ok := d.limit(item, index(path, i)); ok {
			out = append(out, l)
		}
	}
	return out
}

const limitFields = "name, algorithm, rate, threshold, period, calendar, timezone, burst, block, block_max"

func (d *decoder) limit(n *yaml.Node, path string) (limitSpec, bool) {
	ls := limitSpec{line: n.Line}
	at := map[string]int{}
	before := d.count()
	ok := d.mapping(n, path, func(key string, k, v *yaml.Node) {
		at[key] = k.Line
		d.limitField(&ls, join(path, key), key, k, v)
	})
	if !ok {
		return ls, false
	}
	if n := d.deref(n); n != nil {
		ls.line = n.Line
	}
	_, rate := at["rate"]
	_, threshold := at["threshold"]
	switch {
	case rate && threshold:
		d.add(at["threshold"], join(path, "threshold"), "excludes rate: threshold N is rate N-1")
	case !rate && !threshold:
		d.add(ls.line, join(path, "rate"), "required (or threshold)")
	}
	_, period := at["period"]
	_, calendar := at["calendar"]
	switch {
	case calendar && period:
		d.add(at["period"], join(path, "period"), "excludes calendar: the calendar sets the window")
	case !calendar && !period:
		d.add(ls.line, join(path, "period"), "required (or calendar)")
	}
	if _, ok := at["timezone"]; ok && !calendar {
		d.add(at["timezone"], join(path, "timezone"), "needs calendar: it places calendar windows")
	}
	if _, ok := at["algorithm"]; calendar && !ok {
		ls.limit.Algorithm = store.FixedWindow // the one algorithm a calendar counts with
	}
	if d.count() > before {
		return ls, false
	}
	if ls.soft < 0 {
		d.suppressed(&ls, path)
		return ls, d.count() == before
	}
	d.checkLimit(&ls, path, at)
	return ls, d.count() == before
}

// algorithm returns the limit's algorithm as the file names it.
func (ls *limitSpec) algorithm() string {
	if ls.soft > 0 {
		return suppressedName
	}
	return ls.limit.Algorithm.String()
}

// suppressedName is the algorithm of the file that sheds load above a
// soft limit (package store/suppressed): rate is the soft limit, burst
// the hard one (0: twice the rate).
const suppressedName = "suppressed"

// suppressed turns a limit of algorithm suppressed into its soft limit and
// its counting limit, and checks them.
func (d *decoder) suppressed(ls *limitSpec, path string) {
	l := &ls.limit
	ls.soft = l.Rate
	hard := l.Burst
	if hard == 0 {
		hard = 2 * l.Rate
	}
	switch {
	case hard < l.Rate:
		d.add(ls.line, path, fmt.Sprintf("Burst (the hard limit of suppressed) must be 0 or >= Rate %d, got %d", l.Rate, l.Burst))
		return
	case l.Block != 0 || l.BlockMax != 0:
		d.add(ls.line, path, "Block is not supported by suppressed, which sheds load rather than punish it")
		return
	}
	l.Rate, l.Burst = hard, 0
	if err := l.Validate(); err != nil {
		d.add(ls.line, path, strings.TrimPrefix(err.Error(), store.ErrInvalidLimit.Error()+": "))
	}
}

// limitField decodes the field key of a limit, at f.
func (d *decoder) limitField(ls *limitSpec, f, key string, k, v *yaml.Node) {
	l := &ls.limit
	switch key {
	case "name":
		if s, ok := d.str(v, f); ok {
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) || len(s) > 64 {
				d.add(k.Line, f, fmt.Sprintf("must be 1 to 64 characters without control characters, got %q", s))
			}
			l.Name = s
		}
	case "algorithm":
		if s, ok := d.str(v, f); ok {
			if s == suppressedName {
				// Marked until the rate is known (see limit).
				ls.soft, l.Algorithm = -1, store.SlidingWindowCounter
				return
			}
			a, err := store.ParseAlgorithm(s)
			if err != nil {
				d.add(k.Line, f, fmt.Sprintf("unknown algorithm %q (want %s)", s, algorithmNames()))
			}
			l.Algorithm = a
		}
	case "rate":
		l.Rate, _ = d.integer(v, f, 1)
	case "threshold":
		// The one place where a threshold becomes a rate: threshold N
		// refuses the request that would bring the count to N.
		if t, ok := d.integer(v, f, 2); ok {
			ls.threshold = t
			l.Rate = t - 1
		}
	case "period":
		l.Period, _ = d.duration(v, f, false)
	case "calendar":
		if s, ok := d.str(v, f); ok {
			if s != "day" && s != "week" && s != "month" {
				d.add(k.Line, f, fmt.Sprintf("unknown calendar %q (want day, week or month)", s))
			}
			l.Calendar = s
		}
	case "timezone":
		if s, ok := d.str(v, f); ok {
			loc, err := time.LoadLocation(s)
			if err != nil || s == "" || s == "Local" {
				d.add(k.Line, f, fmt.Sprintf("unknown time zone %q (want an IANA name such as Europe/Berlin, or UTC)", s))
			}
			l.Location = loc
		}
	case "burst":
		l.Burst, _ = d.integer(v, f, 0)
	case "block":
		l.Block, _ = d.duration(v, f, true)
	case "block_max":
		l.BlockMax, _ = d.duration(v, f, true)
	default:
		d.unknown(k, f, limitFields)
	}
}

// checkLimit checks a limit whose fields decoded without problems against
// each other; at holds the line of each field present.
func (d *decoder) checkLimit(ls *limitSpec, path string, at map[string]int) {
	l := &ls.limit
	switch {
	case l.Burst != 0 && l.Burst != l.Rate && window(l.Algorithm):
		d.add(at["burst"], join(path, "burst"), fmt.Sprintf("only gcra, token_bucket and suppressed have a burst; the capacity of %s is its rate", l.Algorithm))
	case l.BlockMax != 0 && l.Block == 0:
		d.add(at["block_max"], join(path, "block_max"), "needs block: it caps how far repeated blocks escalate")
	case l.BlockMax != 0 && l.BlockMax < l.Block:
		d.add(at["block_max"], join(path, "block_max"), fmt.Sprintf("must be at least block (%s), got %s", fmtDuration(l.Block), fmtDuration(l.BlockMax)))
	default:
		if err := l.Validate(); err != nil {
			d.add(ls.line, path, strings.TrimPrefix(err.Error(), store.ErrInvalidLimit.Error()+": "))
		}
	}
}

func algorithmNames() string {
	names := make([]string, 0, len(store.Algorithms)+1)
	for _, a := range store.Algorithms {
		names = append(names, a.String())
	}
	names = append(names, suppressedName)
	return strings.Join(names, ", ")
}

const breakerFields = "threshold, cooldown"

func (d *decoder) breaker(n *yaml.Node, path string) *breakerSpec {
	b := &breakerSpec{line: n.Line}
	at := map[string]bool{}
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		f := join(path, key)
		at[key] = true
		switch key {
		case "threshold":
			if t, ok := d.integer(v, f, 0); ok {
				if t > maxBreakerThreshold {
					d.add(k.Line, f, fmt.Sprintf("must be at most %d, got %d", maxBreakerThreshold, t))
				}
				b.threshold = int(min(t, maxBreakerThreshold))
			}
		case "cooldown":
			b.cooldown, _ = d.duration(v, f, false)
		default:
			d.unknown(k, f, breakerFields)
		}
	})
	if !at["threshold"] || (b.threshold > 0 && !at["cooldown"]) {
		d.add(n.Line, path, "needs threshold (0 turns the breaker off) and, unless it is 0, cooldown")
	}
	return b
}

const inFlightFields = "max, lease, status"

// inFlight decodes an in_flight block: max (required), lease (1s to 24h,
// default 30s) and status (429 or 503).
func (d *decoder) inFlight(n *yaml.Node, path string) *inFlightSpec {
	c := &inFlightSpec{}
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		f := join(path, key)
		c.at = append(c.at, key)
		switch key {
		case "max":
			if m, ok := d.integer(v, f, 1); ok {
				if m > store.MaxSlots {
					d.add(k.Line, f, fmt.Sprintf("must be at most %d, got %d", int64(store.MaxSlots), m))
				}
				c.max = m
			}
		case "lease":
			if l, ok := d.duration(v, f, false); ok {
				if l < time.Second || l > 24*time.Hour {
					d.add(k.Line, f, "must be 1s to 24h, got "+fmtDuration(l))
				}
				c.lease = l
			}
		case "status":
			if st, ok := d.integer(v, f, 0); ok {
				if st != 429 && st != 503 {
					d.add(k.Line, f, fmt.Sprintf("must be 429 or 503, got %d", st))
				}
				c.status = int(st)
			}
		default:
			d.unknown(k, f, inFlightFields)
		}
	})
	if !slices.Contains(c.at, "max") {
		d.add(d.deref(n).Line, path, "needs max, the most requests of one key that run at once")
	}
	return c
}

// maxBreakerThreshold is the middleware's bound on Options.BreakerThreshold.
const maxBreakerThreshold = 1 << 20

const headerFields = "dialect, reset, bucket"

func (d *decoder) headers(n *yaml.Node, path string) *headersSpec {
	h := &headersSpec{dialect: "x-ratelimit", reset: "epoch"}
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		f := join(path, key)
		switch key {
		case "dialect":
			if s, ok := d.str(v, f); ok {
				h.dialect = s
				switch s {
				case "x-ratelimit":
				case "ietf":
					h.w.IETF, h.w.NoLegacy = true, true
				case "both":
					h.w.IETF = true
				case "omit":
					h.w.Omit = true
				default:
					d.add(k.Line, f, fmt.Sprintf("unknown dialect %q (want x-ratelimit, ietf, both or omit)", s))
				}
			}
		case "reset":
			if s, ok := d.str(v, f); ok {
				h.reset = s
				switch s {
				case "epoch":
				case "delta":
					h.w.ResetDelta = true
				default:
					d.add(k.Line, f, fmt.Sprintf("unknown reset format %q (want epoch or delta)", s))
				}
			}
		case "bucket":
			h.w.Bucket, _ = d.boolean(v, f)
		default:
			d.unknown(k, f, headerFields)
		}
	})
	return h
}

const exemptFields = "paths, cidrs, methods"

func (d *decoder) exempt(n *yaml.Node, path string) *exemptSpec {
	e := &exemptSpec{}
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		f := join(path, key)
		var check func(string) string
		var dst *[]string
		switch key {
		case "paths":
			dst, check = &e.paths, func(s string) string {
				if !strings.HasPrefix(s, "/") {
					return "must start with /"
				}
				return ""
			}
		case "cidrs":
			dst, check = &e.cidrs, func(s string) string {
				if _, err := netip.ParsePrefix(s); err == nil {
					return ""
				}
				if _, err := netip.ParseAddr(s); err == nil {
					return ""
				}
				return "must be a CIDR prefix such as 10.0.0.0/8 or an address"
			}
		case "methods":
			dst, check = &e.methods, func(s string) string {
				for i := 0; i < len(s); i++ {
					if c := s[i]; !('A' <= c && c <= 'Z' || c == '-' || c == '_') {
						return "must be an upper-case HTTP method such as OPTIONS"
					}
				}
				return ""
			}
		default:
			d.unknown(k, f, exemptFields)
			return
		}
		for i, item := range d.seq(v, f) {
			fi := index(f, i)
			if s, ok := d.str(item, fi); ok {
				if msg := check(s); msg != "" {
					d.add(d.deref(item).Line, fi, fmt.Sprintf("%s, got %q", msg, s))
					continue
				}
				*dst = append(*dst, s)
			}
		}
	})
	return e
}

// validName checks a policy or tier name as the middleware does
// (Options.Name, Tier.Name) and returns what is wrong, or "".
func validName(n string) string {
	if n == "" || len(n) > 64 {
		return fmt.Sprintf("must be 1 to 64 characters, got %q", n)
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Sprintf("%q: only A-Z, a-z, 0-9, '_', '-' and '.' are allowed", n)
		}
	}
	return ""
}

// fmtDuration formats d without the zero units Duration.String adds:
// "1m", "24h", "1h30m", "250ms".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
