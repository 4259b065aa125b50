package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/ratekeeper/ratekeeper/internal/clientstate"
	"github.com/ratekeeper/ratekeeper/internal/ipform"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

const usage = `usage: ratekeeper <command> [flags] [arguments]

Commands:
  inspect IDENTITY   show a client's state under a policy (reads, records nothing)
  reset IDENTITY     forget a client's counters, block and strikes
  override set IDENTITY    give a client an override for a while
  override clear IDENTITY  remove a client's override
  blocks             list blocked clients
  check FILE...      validate policy files
  version            print the command's version
  COMMAND --help     one command's flags

Connection flags (inspect, reset, override, blocks):
  --redis-url URL    Redis to use (default $RATEKEEPER_REDIS_URL, else redis://127.0.0.1:6379/0)
  --cluster          the URL names a Redis Cluster (redis://host:port?addr=host2:port2)
  --prefix P         the store's key prefix (default "rk")
  --timeout D        budget of each Redis call (default 5s)
  --output F         table (default) or json

Limits (inspect, reset): --policy NAME [--tier T] and either
  --policy-file F    read the policy's limits from a policy file, or
  --rate N --period D [--algorithm A] [--burst N] [--name N] [--block D] [--block-max D]

Override: --policy NAME [--tier T] [--policy-file F] and, for set,
  --kind raise|cut|scale --scale S, or --kind exempt|suspend, and --ttl D

Blocks: [--policy NAME [--tier T]] [--count N] [--cursor C]

Exit status: 0 on success, 1 when the command fails, 2 for a wrong command line.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed: Redis, nothing to reset, an invalid file
	exitUsage   = 2 // the command line is wrong
)

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	inv, err := parse(args, os.Getenv)
	var ch *commandHelp
	switch {
	case errors.As(err, &ch):
		ch.write(stdout)
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "ratekeeper: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(stderr, "\n"+usage)
		}
		return exitUsage
	}
	if err := inv.run(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "ratekeeper %s: %v\n", inv.command, err)
		return exitFailure
	}
	return exitOK
}

var errUsage = errors.New("usage")

// commands describes each command for its own --help: its arguments and
// what it does.
var commands = map[string][2]string{
	"inspect":        {"[flags] IDENTITY", "show a client's state under a policy (reads, records nothing)"},
	"reset":          {"[flags] IDENTITY", "forget a client's counters, block and strikes"},
	"override set":   {"[flags] IDENTITY", "give a client an override for a while"},
	"override clear": {"[flags] IDENTITY", "remove a client's override"},
	"blocks":         {"[flags]", "list blocked clients"},
	"check":          {"[flags] FILE...", "validate policy files"},
	"version":        {"", "print the command's version"},
}

// commandHelp is the answer to one command's --help: its synopsis and its
// flags. It matches flag.ErrHelp with errors.Is.
type commandHelp struct {
	command string
	fs      *flag.FlagSet
}

func (h *commandHelp) Error() string { return "help for " + h.command }
func (h *commandHelp) Unwrap() error { return flag.ErrHelp }

// write prints the command's synopsis and flags to w.
func (h *commandHelp) write(w io.Writer) {
	c := commands[h.command]
	fmt.Fprintf(w, "usage: ratekeeper %s\n\n%s.\n", strings.TrimSpace(h.command+" "+c[0]), c[1])
	if c[0] == "" {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	h.fs.SetOutput(w)
	h.fs.PrintDefaults()
	h.fs.SetOutput(io.Discard)
}

// version returns the command's version as the build recorded it: the
// module version (or the VCS revision of a build from a checkout) and
// the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "ratekeeper (version unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && (v == "" || v == "(devel)"):
			v = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			v += "+dirty"
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return "ratekeeper " + v + " " + bi.GoVersion
}

// invocation is a parsed command line.
type invocation struct {
	command string

	redisURL string
	cluster  bool
	prefix   string
	timeout  time.Duration
	json     bool

	policy, tier, policyFile string
	limit                    store.Limit
	algorithm                string
	identity                 string

	count  int
	cursor string

	// override set
	kind  string
	scale float64
	ttl   time.Duration

	files []string
}

// parse parses args (without the program name); getenv reads the
// environment.
func parse(args []string, getenv func(string) string) (*invocation, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: no command", errUsage)
	}
	inv := &invocation{command: args[0]}
	if inv.command == "override" {
		if len(args) < 2 || (args[1] != "set" && args[1] != "clear") {
			return nil, fmt.Errorf("%w: override takes set or clear", errUsage)
		}
		inv.command = "override " + args[1]
		args = args[1:]
	}
	if inv.command == "help" || inv.command == "-h" || inv.command == "--help" {
		return nil, flag.ErrHelp
	}
	fs := flag.NewFlagSet("ratekeeper "+inv.command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	output := "table"
	if err := inv.defineFlags(fs, &output, getenv); err != nil {
		return nil, err
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &commandHelp{command: inv.command, fs: fs}
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch output {
	case "table":
	case "json":
		inv.json = true
	default:
		return nil, fmt.Errorf("%w: --output must be table or json, got %q", errUsage, output)
	}
	if err := inv.checkArgs(fs.Args()); err != nil {
		return nil, err
	}
	return inv, nil
}

// defineFlags defines the flags of inv's command on fs.
func (inv *invocation) defineFlags(fs *flag.FlagSet, output *string, getenv func(string) string) error {
	switch inv.command {
	case "inspect", "reset":
		inv.connectionFlags(fs, output, getenv)
		inv.clientFlags(fs, "policy file to read the limits from")
		fs.Int64Var(&inv.limit.Rate, "rate", 0, "units per period")
		fs.DurationVar(&inv.limit.Period, "period", 0, "period")
		fs.StringVar(&inv.algorithm, "algorithm", "", "algorithm (default gcra)")
		fs.Int64Var(&inv.limit.Burst, "burst", 0, "burst")
		fs.StringVar(&inv.limit.Name, "name", "", "limit name")
		fs.DurationVar(&inv.limit.Block, "block", 0, "block duration")
		fs.DurationVar(&inv.limit.BlockMax, "block-max", 0, "longest escalated block")
	case "override set", "override clear":
		inv.connectionFlags(fs, output, getenv)
		inv.clientFlags(fs, "policy file, to check the policy and follow share")
		if inv.command == "override set" {
			fs.StringVar(&inv.kind, "kind", "", "raise, cut, scale, exempt or suspend (required)")
			fs.Float64Var(&inv.scale, "scale", 0, "factor of raise, cut and scale")
			fs.DurationVar(&inv.ttl, "ttl", 0, "how long the override lasts (required)")
		}
	case "blocks":
		inv.connectionFlags(fs, output, getenv)
		fs.StringVar(&inv.policy, "policy", "", "list only this policy's blocks")
		fs.StringVar(&inv.tier, "tier", "", "with --policy, list only this tier's blocks")
		fs.IntVar(&inv.count, "count", 100, "most blocks to list (1 to 10000)")
		fs.StringVar(&inv.cursor, "cursor", "", "continue a listing where it stopped")
	case "check":
		fs.StringVar(output, "output", *output, "table or json")
	case "version":
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, inv.command)
	}
	return nil
}

// connectionFlags defines the flags of the commands that use Redis.
func (inv *invocation) connectionFlags(fs *flag.FlagSet, output *string, getenv func(string) string) {
	def := getenv("RATEKEEPER_REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379/0"
	}
	fs.StringVar(&inv.redisURL, "redis-url", def, "Redis URL")
	fs.BoolVar(&inv.cluster, "cluster", false, "the URL names a Redis Cluster")
	fs.StringVar(&inv.prefix, "prefix", "rk", "the Redis store's key prefix")
	fs.DurationVar(&inv.timeout, "timeout", 5*time.Second, "budget of each Redis call")
	fs.StringVar(output, "output", *output, "table or json")
}

// clientFlags defines the flags that name one client's policy and tier.
func (inv *invocation) clientFlags(fs *flag.FlagSet, fileUsage string) {
	fs.StringVar(&inv.policy, "policy", "", "policy name (required)")
	fs.StringVar(&inv.tier, "tier", "", "tier, for a policy with tiers")
	fs.StringVar(&inv.policyFile, "policy-file", "", fileUsage)
}

// checkArgs checks the arguments after the flags and the flags against
// each other.
func (inv *invocation) checkArgs(rest []string) error {
	if inv.command != "check" && inv.command != "version" {
		if err := inv.checkConnection(); err != nil {
			return err
		}
	}
	switch inv.command {
	case "inspect", "reset", "override set", "override clear":
		if len(rest) != 1 || rest[0] == "" {
			return fmt.Errorf("%w: %s takes one identity after the flags", errUsage, inv.command)
		}
		inv.identity = rest[0]
		if err := ipform.Check(inv.identity); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if inv.policy == "" {
			return fmt.Errorf("%w: --policy is required", errUsage)
		}
		if err := inv.checkNames(); err != nil {
			return err
		}
		return inv.checkClientFlags()
	case "blocks":
		switch {
		case len(rest) != 0:
			return fmt.Errorf("%w: blocks takes no arguments", errUsage)
		case inv.tier != "" && inv.policy == "":
			return fmt.Errorf("%w: --tier needs --policy", errUsage)
		case inv.count < 1 || inv.count > 10000:
			return fmt.Errorf("%w: --count must be from 1 to 10000, got %d", errUsage, inv.count)
		}
		return inv.checkNames()
	case "check":
		if len(rest) == 0 {
			return fmt.Errorf("%w: check takes one or more files", errUsage)
		}
		inv.files = rest
	case "version":
		if len(rest) != 0 {
			return fmt.Errorf("%w: version takes no arguments", errUsage)
		}
	}
	return nil
}

// checkClientFlags checks the limit flags of inspect and reset and the
// override flags of override set.
// checkNames checks --policy and --tier (when given) as the limiter checks
// the names it keys by (1 to 64 of [A-Za-z0-9_.-]): a ':' or '/' in either
// would name another policy's or client's key, and the command would act
// on that.
func (inv *invocation) checkNames() error {
	for _, f := range []struct{ flag, v string }{{"--policy", inv.policy}, {"--tier", inv.tier}} {
		if f.v == "" {
			continue
		}
		ok := len(f.v) <= 64
		for i := 0; ok && i < len(f.v); i++ {
			b := f.v[i]
			ok = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-' || b == '.'
		}
		if !ok {
			return fmt.Errorf("%w: %s %q: a policy or tier name is 1 to 64 of [A-Za-z0-9_.-]", errUsage, f.flag, f.v)
		}
	}
	return nil
}

func (inv *invocation) checkClientFlags() error {
	switch inv.command {
	case "override set":
		if _, err := inv.override(); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	case "inspect", "reset":
		limitFlags := inv.limit != (store.Limit{}) || inv.algorithm != ""
		switch {
		case inv.policyFile != "" && limitFlags:
			return fmt.Errorf("%w: give --policy-file or limit flags (--rate, --period, ...), not both", errUsage)
		case inv.policyFile != "":
			return nil
		}
		if inv.algorithm != "" {
			a, err := store.ParseAlgorithm(inv.algorithm)
			if err != nil {
				return fmt.Errorf("%w: --algorithm: %v", errUsage, err)
			}
			inv.limit.Algorithm = a
		}
		if err := inv.limit.Validate(); err != nil {
			return fmt.Errorf("%w: limit flags: %v (give --rate and --period, or --policy-file)", errUsage, err)
		}
	}
	return nil
}

// run carries out the parsed command.
func (inv *invocation) run(ctx context.Context, out io.Writer) error {
	switch inv.command {
	case "check":
		return inv.check(out)
	case "version":
		_, err := fmt.Fprintln(out, version())
		return err
	}
	redis.SetLogger(quietRedis{})
	c, err := inv.client()
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := inv.open(c)
	if err != nil {
		return err
	}
	if inv.command == "blocks" {
		return inv.blocks(ctx, st, out)
	}
	if strings.HasPrefix(inv.command, "override ") {
		return inv.setOrClear(ctx, st, out)
	}
	req, q, err := inv.request()
	if err != nil {
		return err
	}
	if q.soft != nil {
		// A policy that sheds load keeps its state as the suppressed
		// store does.
		sup, err := suppressed.New(st, suppressed.Options{Soft: q.soft})
		if err != nil {
			return err
		}
		st = sup.(redisStore)
	}
	overrides := q.overrides
	if inv.command == "reset" {
		return inv.reset(ctx, st, req, out)
	}
	return inv.inspect(ctx, st, req, overrides, out)
}

// redisStore is what the commands use of the Redis store: decisions,
// overrides and the list of blocks.
type redisStore interface {
	store.Store
	store.OverrideStore
	store.BlockLister
}

// open returns the Redis store on c with --prefix and --timeout. It skips
// the store's warm-up, which would add up to a second before a command
// against a Redis that does not answer: a command's few calls each have
// the budget of --timeout to open their connection (see client).
func (inv *invocation) open(c redis.UniversalClient) (redisStore, error) {
	st, err := redisstore.New(c, redisstore.Options{Prefix: inv.prefix, Timeout: inv.timeout, WarmUp: -1})
	if err != nil {
		return nil, err
	}
	return st.(redisStore), nil
}

// checkConnection checks the connection flags of a command that uses
// Redis: a URL the client can parse and a budget above zero.
func (inv *invocation) checkConnection() error {
	parse := func(u string) error { _, err := redis.ParseURL(u); return err }
	if inv.cluster {
		parse = func(u string) error { _, err := redis.ParseClusterURL(u); return err }
	}
	if err := parse(inv.redisURL); err != nil {
		return fmt.Errorf("%w: --redis-url (or $RATEKEEPER_REDIS_URL) %q: %v", errUsage, inv.redisURL, err)
	}
	if inv.timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be above 0, got %s", errUsage, inv.timeout)
	}
	return nil
}

// quietRedis drops go-redis's own log lines (each failed dial, each
// connection it closes): the command reports the error it ends with.
type quietRedis struct{}

// Printf implements go-redis's logger.
func (quietRedis) Printf(context.Context, string, ...any) {}

// client connects to --redis-url. Its connections do not ask for
// maintenance notifications, which a command does not live long enough to
// use: go-redis settles in a connection's first handshake whether the
// server takes them, and without the store's warm-up several first
// handshakes would settle it at once, which go-redis does without a lock
// (see redisstore.Options.WarmUp).
func (inv *invocation) client() (redis.UniversalClient, error) {
	noMaint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if inv.cluster {
		o, err := redis.ParseClusterURL(inv.redisURL)
		if err != nil {
			return nil, fmt.Errorf("--redis-url: %w", err)
		}
		o.MaintNotificationsConfig = noMaint
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(inv.redisURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	o.MaintNotificationsConfig = noMaint
	return redis.NewClient(o), nil
}

// quota is where the client's state lives: the policy whose counters
// serve it (the shared one, for a policy with share), the limits, and
// whether the policy applies overrides (as far as the command knows).
type quota struct {
	owner     string
	limits    []store.Limit
	overrides bool
	soft      func(store.Limit) int64 // the soft limits of a policy that sheds load
}

// storeKey returns the key the middleware gives identity in the store
// under --policy and --tier.
func (inv *invocation) storeKey() string {
	return limiter.StoreKey(inv.policy, inv.tier, inv.identity)
}

// quota returns the client's quota: from the policy file when there is
// one, else under --policy with the limit of the flags, which may apply
// overrides.
func (inv *invocation) quota() (quota, error) {
	if inv.policyFile == "" {
		return quota{owner: inv.policy, limits: []store.Limit{inv.limit}, overrides: true}, nil
	}
	return fileQuota(inv.policyFile, inv.policy, inv.tier)
}

// request returns the store request for the identity under the limits
// of the flags or of the policy file, and whether the policy applies
// overrides.
func (inv *invocation) request() (store.Request, quota, error) {
	q, err := inv.quota()
	if err != nil {
		return store.Request{}, quota{}, err
	}
	return store.Request{Key: limiter.StoreKey(q.owner, inv.tier, inv.identity), Limits: q.limits}, q, nil
}

// clientState is what inspect prints.
type clientState struct {
	Key          string     `json:"key"`
	Limit        string     `json:"limit"`
	Capacity     int64      `json:"capacity"`
	Remaining    int64      `json:"remaining"`
	Reset        time.Time  `json:"reset"`
	Blocked      bool       `json:"blocked"`
	BlockedUntil *time.Time `json:"blocked_until,omitempty"`
	RetryAfter   string     `json:"retry_after,omitempty"`
	Override     string     `json:"override,omitempty"`
	OverrideEnds *time.Time `json:"override_expires,omitempty"`
}

func (inv *invocation) inspect(ctx context.Context, st redisStore, req store.Request, overrides bool, out io.Writer) error {
	now := time.Now()
	// A client's override, when it has one, is shown, and the state read
	// under it, as a policy with overrides: true reads it (one without
	// does not, when the policy file says so).
	o, err := st.GetOverride(ctx, req.Key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	req.ApplyOverride = err == nil && overrides
	d, err := clientstate.Read(ctx, st, req)
	if err != nil {
		return err
	}
	s := clientState{Key: req.Key, Limit: d.LimitID, Capacity: d.Capacity, Remaining: d.Remaining, Reset: now.Add(d.ResetAfter).UTC().Truncate(time.Millisecond), Blocked: d.Blocked}
	if !d.Allowed {
		s.RetryAfter = d.RetryAfter.String()
	}
	if d.Blocked {
		until := now.Add(d.RetryAfter).UTC().Truncate(time.Millisecond)
		s.BlockedUntil = &until
	}
	overrideCol := "-"
	if req.ApplyOverride {
		s.Override = overrideText(o)
		ends := now.Add(o.TTL).UTC().Truncate(time.Millisecond)
		s.OverrideEnds = &ends
		overrideCol = s.Override + " until " + ends.Format(time.RFC3339)
	}
	if inv.json {
		return writeJSON(out, s)
	}
	blockedUntil := "-"
	if s.BlockedUntil != nil {
		blockedUntil = s.BlockedUntil.Format(time.RFC3339)
	}
	return writeTable(out, []string{"KEY", "LIMIT", "CAPACITY", "REMAINING", "RESET", "BLOCKED", "BLOCKED UNTIL", "OVERRIDE"},
		[][]string{{s.Key, s.Limit, strconv.FormatInt(s.Capacity, 10), strconv.FormatInt(s.Remaining, 10),
			s.Reset.Format(time.RFC3339), strconv.FormatBool(s.Blocked), blockedUntil, overrideCol}})
}

func (inv *invocation) reset(ctx context.Context, st redisStore, req store.Request, out io.Writer) error {
	err := st.Reset(ctx, req)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("nothing stored for %q under these limits (check the identity, --policy, --tier and --prefix)", req.Key)
	}
	if err != nil {
		return err
	}
	if inv.json {
		return writeJSON(out, map[string]any{"key": req.Key, "reset": true})
	}
	_, err = fmt.Fprintf(out, "reset %s\n", req.Key)
	return err
}

// blockedClient is one line of blocks.
type blockedClient struct {
	Policy    string `json:"policy"`
	Tier      string `json:"tier,omitempty"`
	Identity  string `json:"identity"`
	Scope     string `json:"scope"`
	Remaining string `json:"remaining"`
}

func (inv *invocation) blocks(ctx context.Context, lister store.BlockLister, out io.Writer) error {
	// "api" matches "api:..." and every tier "api/<tier>:...", and also
	// other policies whose names start with "api": those are dropped.
	ns := inv.policy
	if inv.tier != "" {
		ns += "/" + inv.tier + ":"
	}
	found := []blockedClient{}
	cursor := inv.cursor
	for {
		page, next, err := lister.Blocks(ctx, ns, cursor, inv.count-len(found))
		if err != nil {
			return err
		}
		for _, b := range page {
			if bc := splitBlock(b); inv.policy == "" || bc.Policy == inv.policy {
				found = append(found, bc)
			}
		}
		cursor = next
		if cursor == "" || len(found) >= inv.count {
			break
		}
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.Policy != b.Policy {
			return a.Policy < b.Policy
		}
		if a.Tier != b.Tier {
			return a.Tier < b.Tier
		}
		return a.Identity < b.Identity
	})
	if inv.json {
		return writeJSON(out, struct {
			Clients []blockedClient `json:"clients"`
			Cursor  string          `json:"cursor"`
		}{found, cursor})
	}
	rows := make([][]string, 0, len(found))
	for _, b := range found {
		tier := b.Tier
		if tier == "" {
			tier = "-"
		}
		rows = append(rows, []string{b.Policy, tier, b.Identity, b.Scope, b.Remaining})
	}
	if err := writeTable(out, []string{"POLICY", "TIER", "IDENTITY", "SCOPE", "REMAINING"}, rows); err != nil {
		return err
	}
	if cursor != "" {
		_, err := fmt.Fprintf(out, "more: --cursor %s\n", cursor)
		return err
	}
	return nil
}

// splitBlock splits a block's store key "<policy>[/<tier>]:<identity>".
func splitBlock(b store.Block) blockedClient {
	pol, tier, identity, _ := limiter.SplitStoreKey(b.Key)
	return blockedClient{Policy: pol, Tier: tier, Identity: identity, Scope: b.Scope, Remaining: b.Remaining.Round(time.Millisecond).String()}
}

// fileProblem is one problem of a checked file, for JSON output.
type fileProblem struct {
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

type fileResult struct {
	File     string        `json:"file"`
	Valid    bool          `json:"valid"`
	Problems []fileProblem `json:"problems,omitempty"`
}

// check validates each file with policy.Parse and reports every problem;
// it fails when a file is invalid or unreadable.
func (inv *invocation) check(out io.Writer) error {
	results := make([]fileResult, 0, len(inv.files))
	bad := 0
	for _, f := range inv.files {
		r := fileResult{File: f, Valid: true}
		data, err := os.ReadFile(f)
		if err == nil {
			_, err = policy.Parse(f, data)
		}
		if err != nil {
			r.Valid = false
			bad++
			r.Problems = problems(err)
		}
		results = append(results, r)
	}
	var err error
	if inv.json {
		err = writeJSON(out, results)
	} else {
		for _, r := range results {
			if r.Valid {
				if _, err = fmt.Fprintf(out, "%s: ok\n", r.File); err != nil {
					return err
				}
				continue
			}
			for _, p := range r.Problems {
				if _, err = fmt.Fprintln(out, formatProblem(r.File, p)); err != nil {
					return err
				}
			}
		}
	}
	if err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d files invalid", bad, len(inv.files))
	}
	return nil
}

// problems splits a load error into its problems.
func problems(err error) []fileProblem {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]fileProblem, 0, len(errs))
	for _, e := range errs {
		var pe *policy.Error
		if errors.As(e, &pe) {
			out = append(out, fileProblem{Line: pe.Line, Field: pe.Field, Message: pe.Msg})
			continue
		}
		out = append(out, fileProblem{Message: e.Error()})
	}
	return out
}

// formatProblem writes a problem as policy.Error does: "file:line: field: message".
func formatProblem(file string, p fileProblem) string {
	if p.Line == 0 && p.Field == "" {
		return p.Message // an unreadable file: the error names it
	}
	return (&policy.Error{File: file, Line: p.Line, Field: p.Field, Msg: p.Message}).Error()
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeTable(out io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fileQuota returns the quota of the policy name (in tier) of a policy
// file, decoded and checked by policy.Parse: for a policy with share, the
// shared policy's.
func fileQuota(path, name, tier string) (quota, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return quota{}, err
	}
	policies, err := policy.Parse(path, data)
	if err != nil {
		return quota{}, err
	}
	i := slices.IndexFunc(policies, func(p policy.Policy) bool { return p.Name == name })
	if i < 0 {
		return quota{}, fmt.Errorf("%s: no policy %q", path, name)
	}
	p := policies[i]
	q := quota{owner: cmp.Or(p.Share, p.Name), limits: p.Limits, overrides: p.Overrides, soft: p.Soft}
	if p.Tiers == nil {
		if tier != "" {
			return quota{}, fmt.Errorf("%s: policy %q has no tiers; leave --tier out", path, q.owner)
		}
		if len(q.limits) == 0 {
			return quota{}, fmt.Errorf("%s: policy %q has no rate limits (only an in_flight cap, whose slots the command does not read or reset)", path, q.owner)
		}
		return q, nil
	}
	j := slices.IndexFunc(p.Tiers, func(t limiter.Tier) bool { return t.Name == tier })
	if j < 0 {
		names := make([]string, len(p.Tiers))
		for k, t := range p.Tiers {
			names[k] = t.Name
		}
		slices.Sort(names)
		return quota{}, fmt.Errorf("%s: policy %q has tiers: --tier must be one of %s", path, q.owner, strings.Join(names, ", "))
	}
	if q.limits = p.Tiers[j].Limits; q.limits == nil {
		return quota{}, fmt.Errorf("%s: tier %q of policy %q stores nothing (unlimited or suspended)", path, tier, q.owner)
	}
	return q, nil
}

// override returns the override of the set command's flags.
func (inv *invocation) override() (store.Override, error) {
	o := store.Override{TTL: inv.ttl}
	switch inv.kind {
	case "raise", "cut", "scale":
		o.Kind, o.Scale = store.OverrideScale, inv.scale
		if inv.kind == "raise" && !(inv.scale > 1) || inv.kind == "cut" && !(inv.scale > 0 && inv.scale < 1) {
			return o, fmt.Errorf("--scale must be above 1 to raise and between 0 and 1 to cut, got %v", inv.scale)
		}
	case "exempt", "suspend":
		o.Kind, _ = store.ParseOverrideKind(inv.kind)
		if inv.scale != 0 {
			return o, fmt.Errorf("--scale is only for raise, cut and scale, not %s", inv.kind)
		}
	case "":
		return o, errors.New("--kind is required")
	default:
		return o, fmt.Errorf("--kind must be raise, cut, scale, exempt or suspend, got %q", inv.kind)
	}
	if inv.ttl == 0 {
		return o, errors.New("--ttl is required")
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// overrideKey returns the store key the override applies to: the
// identity's under the policy, or under the policy it shares when
// --policy-file says so (checked as check does).
func (inv *invocation) overrideKey() (string, error) {
	q, err := inv.quota()
	if err != nil {
		return "", err
	}
	if !q.overrides && inv.command == "override set" {
		return "", fmt.Errorf("%s: policy %q does not apply overrides (set overrides: true), so this one would change nothing", inv.policyFile, q.owner)
	}
	return limiter.StoreKey(q.owner, inv.tier, inv.identity), nil
}

// overrideLine is what override set and clear print.
type overrideLine struct {
	Key     string     `json:"key"`
	Action  string     `json:"action"`
	Kind    string     `json:"kind,omitempty"`
	Scale   float64    `json:"scale,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
}

func (inv *invocation) setOrClear(ctx context.Context, st redisStore, out io.Writer) error {
	key, err := inv.overrideKey()
	if err != nil {
		return err
	}
	line := overrideLine{Key: key}
	if inv.command == "override clear" {
		err := st.ClearOverride(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no override stored for %q (check the identity, --policy, --tier and --prefix)", key)
		}
		if err != nil {
			return err
		}
		line.Action = "cleared"
	} else {
		o, _ := inv.override() // validated by parse
		if err := st.SetOverride(ctx, key, o); err != nil {
			return err
		}
		exp := time.Now().Add(o.TTL).UTC().Truncate(time.Millisecond)
		line.Action, line.Kind, line.Scale, line.Expires = "set", o.Kind.String(), o.Scale, &exp
	}
	if inv.json {
		return writeJSON(out, line)
	}
	if line.Expires == nil {
		_, err = fmt.Fprintf(out, "cleared the override of %s\n", key)
		return err
	}
	what := line.Kind
	if o := line.Scale; o != 0 {
		what += " " + strconv.FormatFloat(o, 'g', -1, 64)
	}
	_, err = fmt.Fprintf(out, "override of %s: %s until %s\n", key, what, line.Expires.Format(time.RFC3339))
	return err
}

// overrideText returns an override as the client command prints it:
// "exempt", "suspend" or "scale:<factor>".
func overrideText(o store.Override) string {
	if o.Kind == store.OverrideScale {
		return "scale:" + strconv.FormatFloat(o.Scale, 'g', -1, 64)
	}
	return o.Kind.String()
}
