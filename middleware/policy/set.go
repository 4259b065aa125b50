package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// unknownPolicy is the error of a [Set] method asked about a policy its
// running configuration does not define: it matches store.ErrNotFound, as
// every operation that finds nothing does.
type unknownPolicy string

func (e unknownPolicy) Error() string {
	return "ratekeeper: policy: unknown policy " + strconv.Quote(string(e))
}

func (e unknownPolicy) Is(target error) bool { return target == store.ErrNotFound }

// errNoFile is returned by Reload and Watch on a Set built with New.
var errNoFile = errors.New("ratekeeper: policy: the set was built from bytes (New), not loaded from a file (Load): there is nothing to reload")

// Options supplies what a policy file names but cannot hold: the
// application's key functions and classifiers, and the settings that are
// code. Every field is optional, but a file can only name the key
// functions and classifiers registered here.
type Options struct {
	// Keys are the key functions policies name with "key", such as
	// {"ip": keyfunc.RemoteIP}. A policy naming a key function missing
	// here is a validation error.
	Keys map[string]keyfunc.KeyFunc
	// Classifiers are the classifiers policies with tiers name with
	// "classifier", such as {"auth": middleware.AuthOptions{...}}. For an
	// [middleware.AuthOptions] the loader checks that the policy has a
	// tier for every name it can give a request.
	Classifiers map[string]middleware.Classifier
	// ClientIP finds the client address for "exempt: cidrs" (so trusted
	// proxies are honoured as for keys). Nil means the peer address.
	ClientIP *keyfunc.ClientIP
	// Fallback is the store of policies with "local_fallback: true",
	// typically a memory store private to the process (see
	// middleware.Options.Fallback). A file that asks for it without one
	// is invalid.
	Fallback store.Store
	// Logger receives reloads, failed reloads and mode switches, and is
	// every limiter's logger unless Middleware names one. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Middleware holds the options every limiter starts from; the file's
	// settings are applied over them, so the file wins where both say
	// something (its exemptions are added to Middleware.Exempt, its flags
	// can only turn on). Use it for what only code can say, such as
	// Observer, LogSecret or DeniedHandler. The fields the file controls
	// (Name, Limits, DryRun) are ignored.
	Middleware middleware.Options
}

func (o *Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// Set is the running set of policies built from one policy file. Routes
// pick a policy by name with [Set.Handler]; [Set.Reload], [Set.Watch] and
// [Set.SetMode] change policies while requests flow. A Set is safe for
// concurrent use.
//
// # Reloads
//
// A reload parses and validates the whole file and builds every limiter
// before anything changes; then one atomic store switches every policy at
// once, between requests. A request that started under the old policies
// finishes under them; handlers obtained from Handler before the reload
// use the new ones from their next request. Nothing is held across a
// store call: reloads never wait for requests, nor requests for reloads.
//
// Counters live in the store, under the policy name, tier and limit name
// (see [store.Limit.ID]), so a reload keeps them for every limit whose
// policy, tier and name stay the same: a raised rate applies at once to
// what clients already used, a cut one counts it (package store, "Changing
// a limit"). Renaming any of the three, or changing an unnamed limit's
// period or algorithm (its name derives from them, "gcra/1m0s"), starts it
// afresh. Circuit-breaker state starts afresh on every reload.
//
// A reload that fails (an unreadable file, a syntax error, an invalid
// value, a policy removed that a route uses) changes nothing: it returns
// the error, logs it at error level, and counts it in [Status].
type Set struct {
	st   store.Store
	opts Options
	log  *slog.Logger
	path string // the file, for Load; "" for New
	name string // path or name, for messages

	cur atomic.Pointer[generation]

	// mu serializes changes and guards the fields below; requests never
	// take it.
	mu        sync.Mutex
	slots     map[string]int  // policy name → index in generation.entries, stable across reloads
	used      map[string]bool // policies routes serve through (Handler)
	handlers  []*handler      // every handler Handler made, wrapped anew for each generation
	overrides map[string]Mode // modes set with SetMode, kept across reloads
	reloads   uint64
	failures  uint64
	lastErr   error
	tried     [sha256.Size]byte // checksum of the bytes last applied or tried
	stat      fileStat          // the file as the watcher last saw it
	statErr   string            // the watcher's last stat error, to log each once
}

// generation is one running configuration. It is never modified once
// stored: a change stores a new one.
type generation struct {
	spec     *spec
	entries  []*entry // by slot; nil for policies the file no longer defines
	bases    map[baseKey]*middleware.Limiter
	sum      [sha256.Size]byte
	loadedAt time.Time
}

// Load reads the policy file at path (YAML, or JSON when the name ends in
// ".json"), validates it and builds its policies on st. Errors are
// *[Error] values naming the file, the line and the field, joined; an
// unreadable file is reported as is. The Set remembers path for
// [Set.Reload] and [Set.Watch].
func Load(path string, st store.Store, opts Options) (*Set, error) {
	s, err := newSet(path, st, opts)
	if err != nil {
		return nil, err
	}
	s.path = path
	data, fs, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("ratekeeper: policy: %w", err)
	}
	s.stat = fs
	if err := s.apply(data, "load"); err != nil {
		return nil, err
	}
	return s, nil
}

// New validates the policy file data, named name in messages (YAML, or
// JSON when name ends in ".json"), and builds its policies on st: use it
// for a file embedded in the binary. [Set.Reload] and [Set.Watch] return
// an error on such a Set.
func New(name string, data []byte, st store.Store, opts Options) (*Set, error) {
	s, err := newSet(name, st, opts)
	if err != nil {
		return nil, err
	}
	if err := s.apply(data, "load"); err != nil {
		return nil, err
	}
	return s, nil
}

func newSet(name string, st store.Store, opts Options) (*Set, error) {
	if st == nil {
		return nil, errors.New("ratekeeper: policy: nil store")
	}
	opts.Keys = maps.Clone(opts.Keys)
	opts.Classifiers = maps.Clone(opts.Classifiers)
	opts.Middleware.Exempt = slices.Clone(opts.Middleware.Exempt)
	return &Set{
		st: st, opts: opts, log: opts.logger(), name: name,
		slots: map[string]int{}, used: map[string]bool{}, overrides: map[string]Mode{},
	}, nil
}

// parse parses and decodes a file, reporting problems to p.
func parse(p *problems, name string, data []byte) *spec {
	root := parseDocument(p, name, data)
	if !p.ok() {
		return nil
	}
	return decode(p, root)
}

// apply validates data and, if it is valid, makes it the running
// configuration. how is "load", "reload" or "watch", for logs.
func (s *Set) apply(data []byte, how string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(data)
	s.tried = sum
	p := &problems{file: s.name}
	sp := parse(p, s.name, data)
	if p.ok() {
		checkApp(p, sp, &s.opts)
	}
	if p.ok() {
		for name := range s.used {
			if sp.byName[name] == nil {
				p.add(0, join("policies", name), "missing, but the application serves routes through it (Set.Handler): a reload cannot remove it")
			}
		}
	}
	var g *generation
	if p.ok() {
		g = s.build(p, sp)
	}
	if !p.ok() {
		return s.failed(how, p.err())
	}
	g.sum, g.loadedAt = sum, time.Now()
	prev := s.cur.Load()
	s.wrapAll(g)
	s.cur.Store(g)
	for name := range s.overrides {
		if sp.byName[name] == nil {
			delete(s.overrides, name)
			s.log.Warn("ratekeeper: mode override dropped: the policy is gone", slog.String("policy", name))
		}
	}
	if prev == nil {
		s.log.Info("ratekeeper: policies loaded", slog.String("file", s.name), slog.Int("policies", len(sp.policies)), slog.String("checksum", hex.EncodeToString(sum[:])))
		return nil
	}
	s.reloads++
	s.lastErr = nil
	s.logChanges(how, prev, g)
	return nil
}

// failed records and logs a failed reload and returns err.
func (s *Set) failed(how string, err error) error {
	if s.cur.Load() == nil {
		return err // the first load: the caller has no Set to keep
	}
	s.failures++
	s.lastErr = err
	s.log.Error("ratekeeper: policy reload failed; the running policies stay", slog.String("file", s.name), slog.String("trigger", how), slog.String("error", err.Error()))
	return err
}

// build compiles sp into a generation, with modes set by SetMode applied;
// s.mu is held.
func (s *Set) build(p *problems, sp *spec) *generation {
	for _, ps := range sp.policies {
		if _, ok := s.slots[ps.name]; !ok {
			s.slots[ps.name] = len(s.slots)
		}
	}
	g := &generation{spec: sp, entries: make([]*entry, len(s.slots)), bases: map[baseKey]*middleware.Limiter{}}
	b := &builder{st: s.st, opts: &s.opts, bases: g.bases}
	for _, ps := range sp.policies {
		m := ps.mode
		if o, ok := s.overrides[ps.name]; ok {
			m = o
		}
		e, err := b.entry(ps, m)
		if err != nil {
			p.add(ps.line, ps.path, trimPrefix(err))
			continue
		}
		g.entries[s.slots[ps.name]] = e
	}
	return g
}

// at returns the entry in slot, or nil.
func (g *generation) at(slot int) *entry {
	if slot < len(g.entries) {
		return g.entries[slot]
	}
	return nil
}

func trimPrefix(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"ratekeeper: middleware: ", "ratekeeper: "} {
		if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
			return msg[len(prefix):]
		}
	}
	return msg
}

// logChanges logs what a reload changed, and every mode switch it made.
func (s *Set) logChanges(how string, prev, g *generation) {
	var added, removed, changed []string
	for _, ps := range g.spec.policies {
		old := prev.spec.byName[ps.name]
		switch {
		case old == nil:
			added = append(added, ps.name)
		case !bytes.Equal(old.marshal(), ps.marshal()):
			changed = append(changed, ps.name)
		}
	}
	for _, ps := range prev.spec.policies {
		if g.spec.byName[ps.name] == nil {
			removed = append(removed, ps.name)
		}
	}
	s.log.Info("ratekeeper: policies reloaded", slog.String("file", s.name), slog.String("trigger", how),
		slog.Any("added", added), slog.Any("changed", changed), slog.Any("removed", removed),
		slog.String("checksum", hex.EncodeToString(g.sum[:])))
	for slot, e := range g.entries {
		if e == nil || slot >= len(prev.entries) || prev.entries[slot] == nil {
			continue
		}
		if from := prev.entries[slot].mode; from != e.mode {
			s.logSwitch(e.spec.name, from, e.mode, "file")
		}
	}
}

func (s *Set) logSwitch(name string, from, to Mode, by string) {
	s.log.Warn("ratekeeper: policy mode switched", slog.String("policy", name), slog.String("from", string(from)), slog.String("to", string(to)), slog.String("by", by))
}

// Handler returns the middleware that serves requests under the policy
// name, with the shape chi's r.Use and r.With and http.ServeMux expect:
//
//	r.With(set.Handler("api")).Get("/api/ping", ping)
//	mux.Handle("GET /api/ping", set.Handler("api")(ping))
//
// The handlers it returns follow reloads and mode switches: each request
// runs under the policy as it is when the request arrives. Once a route
// uses a policy, reloads that remove it fail. The Set keeps every handler
// the returned function makes, to wrap it for each new configuration
// before that runs: make them at setup, not per request. Handler panics
// if the running configuration has no policy name, and the returned
// function panics if next is nil: both happen at setup, never at request
// time.
func (s *Set) Handler(name string) func(http.Handler) http.Handler {
	s.mu.Lock()
	slot, ok := s.slots[name]
	ok = ok && s.cur.Load().at(slot) != nil
	if ok {
		s.used[name] = true
	}
	s.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("ratekeeper: policy: Handler(%q): %s defines no such policy", name, s.name))
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("ratekeeper: policy: Handler(" + name + ") called with nil next")
		}
		h := &handler{set: s, slot: slot, next: next}
		s.mu.Lock()
		s.handlers = append(s.handlers, h)
		h.wrap(s.cur.Load())
		s.mu.Unlock()
		return h
	}
}

// wrapAll wraps every handler for g before g runs; s.mu is held. So a
// limiter knows, from its first request, every handler that serves its
// quota: one passed twice by a request (a group and a subgroup of the
// same policy) charges it once.
func (s *Set) wrapAll(g *generation) {
	for _, h := range s.handlers {
		h.wrap(g)
	}
}

// handler serves one route under one policy of a Set.
type handler struct {
	set  *Set
	slot int
	next http.Handler
	// wrapped is the limiter's handler around next for the entry of the
	// running generation, made before it runs (Set.wrapAll), so a request
	// costs one atomic load and a comparison more than the limiter alone.
	wrapped atomic.Pointer[wrapped]
}

// wrap makes h's limiter handler for its entry in g (none in "off" mode).
func (h *handler) wrap(g *generation) {
	e := g.at(h.slot)
	if e == nil || e.mode == modeOff {
		return
	}
	if c := h.wrapped.Load(); c == nil || c.e != e {
		h.wrapped.Store(&wrapped{e: e, h: e.lim.Handler(h.next)})
	}
}

type wrapped struct {
	e *entry
	h http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := h.set.cur.Load().entries[h.slot]
	if e.mode == modeOff {
		h.next.ServeHTTP(w, r)
		return
	}
	c := h.wrapped.Load()
	if c == nil || c.e != e {
		// A request that read the generation a reload has just replaced
		// (the handlers are wrapped for the new one): served by its own.
		e.lim.Handler(h.next).ServeHTTP(w, r)
		return
	}
	c.h.ServeHTTP(w, r)
}

// Limiter returns the limiter that serves the policy name now, for
// [middleware.Limiter.Allow], Peek, Reset, SetOverride and ClearOverride
// (a policy that shares another's quota shares its counters, and charges
// its own cost). It does not follow reloads: call Limiter for each use
// rather than keeping the result. In "off" mode it returns the enforcing
// limiter, so that Peek and Reset still work. The error matches
// [store.ErrNotFound] for a name the running configuration does not
// define.
func (s *Set) Limiter(name string) (*middleware.Limiter, error) {
	e, err := s.entry(name)
	if err != nil {
		return nil, err
	}
	return e.lim, nil
}

func (s *Set) entry(name string) (*entry, error) {
	s.mu.Lock()
	slot, ok := s.slots[name]
	s.mu.Unlock()
	if ok {
		if e := s.cur.Load().at(slot); e != nil {
			return e, nil
		}
	}
	return nil, unknownPolicy(name)
}

// Reload reads the file again and, if it is valid, switches to it (see
// [Set] for what a reload keeps). It returns the problems found, as [Load]
// does, and then keeps the running policies; on a Set built with [New] it
// returns an error and changes nothing.
func (s *Set) Reload() error {
	if s.path == "" {
		return errNoFile
	}
	data, fs, err := readFile(s.path)
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.failed("reload", fmt.Errorf("ratekeeper: policy: %w", err))
	}
	s.mu.Lock()
	s.stat = fs
	s.mu.Unlock()
	return s.apply(data, "reload")
}

// SetMode switches the policy name to mode m at once (the next request
// runs under it) and logs the switch at warn level. The mode overrides the
// file's: it is kept across reloads until SetMode is called with the
// empty Mode, which returns the policy to the mode its file gives it (and
// does nothing for a policy without an override). A policy that shares
// another's quota has a mode of its own. The error matches
// [store.ErrNotFound] for an unknown name; an unknown mode is an error.
func (s *Set) SetMode(name string, m Mode) error {
	by := "SetMode"
	if m != "" {
		if err := checkMode(m); err != nil {
			return err
		}
	} else {
		by = "SetMode(clear)"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.slots[name]
	if !ok || s.cur.Load().at(slot) == nil {
		return unknownPolicy(name)
	}
	if m == "" {
		delete(s.overrides, name)
		m = s.cur.Load().at(slot).spec.mode
	} else {
		s.overrides[name] = m
	}
	return s.switchMode(name, m, by)
}

// switchMode stores a generation in which name runs in mode m; s.mu is
// held.
func (s *Set) switchMode(name string, m Mode, by string) error {
	g := s.cur.Load()
	slot, ok := s.slots[name]
	old := g.at(slot)
	if !ok || old == nil {
		return unknownPolicy(name)
	}
	if old.mode == m {
		return nil
	}
	ng := &generation{spec: g.spec, entries: slices.Clone(g.entries), bases: maps.Clone(g.bases), sum: g.sum, loadedAt: g.loadedAt}
	b := &builder{st: s.st, opts: &s.opts, bases: ng.bases}
	e, err := b.entry(old.spec, m)
	if err != nil {
		return fmt.Errorf("ratekeeper: policy: %s: %w", name, err)
	}
	ng.entries[slot] = e
	s.wrapAll(ng)
	s.cur.Store(ng)
	s.logSwitch(name, old.mode, m, by)
	return nil
}

// Status describes a [Set]: its running configuration and the history of
// its reloads. It is a snapshot; it does not change afterwards.
type Status struct {
	// Source is the file's path, or the name given to [New].
	Source string
	// Checksum is the hex SHA-256 of the running configuration's bytes,
	// as sha256sum prints it for the file.
	Checksum string
	// LoadedAt is when the running configuration was applied.
	LoadedAt time.Time
	// Reloads counts successful reloads since the Set was built.
	Reloads uint64
	// Failures counts failed reloads: an unreadable file or an invalid
	// configuration, which left the running one in place.
	Failures uint64
	// LastError is why the latest reload failed; nil when the latest
	// reload succeeded or none failed.
	LastError error
	// Policies lists the running policies in file order.
	Policies []Policy
}

// Status returns a snapshot of the Set's state. It is safe for concurrent
// use and cheap enough for every metrics scrape.
func (s *Set) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.cur.Load()
	st := Status{
		Source: s.name, Checksum: hex.EncodeToString(g.sum[:]), LoadedAt: g.loadedAt,
		Reloads: s.reloads, Failures: s.failures, LastError: s.lastErr,
	}
	for _, ps := range g.spec.policies {
		e := g.at(s.slots[ps.name])
		_, over := s.overrides[ps.name]
		st.Policies = append(st.Policies, ps.public(e.mode, over))
	}
	return st
}

// fileStat is what the watcher compares between polls.
type fileStat struct {
	mod  time.Time
	size int64
}

// readFile reads path and returns its content and stat.
func readFile(path string) ([]byte, fileStat, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStat{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStat{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fileStat{}, fmt.Errorf("%s is not a regular file", path)
	}
	const maxSize = 16 << 20
	if fi.Size() > maxSize {
		return nil, fileStat{}, fmt.Errorf("%s is larger than %d bytes", path, maxSize)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fileStat{}, err
	}
	return buf.Bytes(), fileStat{mod: fi.ModTime(), size: fi.Size()}, nil
}
