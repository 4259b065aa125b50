package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

func TestEncodeKey(t *testing.T) {
	long := strings.Repeat("a", maxEncodedLen)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain", "user-42", "user-42"},
		{"ipv4", "192.0.2.1", "192.0.2.1"},
		{"ipv6", "2001:db8::1", "2001%3Adb8%3A%3A1"},
		{"braces", "{tag}", "%7Btag%7D"},
		{"closing brace first", "}x{", "%7Dx%7B"},
		{"percent", "100%", "100%25"},
		{"percent escape lookalike", "%3A", "%253A"},
		{"tilde", "~abc", "%7Eabc"},
		{"nul", "a\x00b", "a%00b"},
		{"control and space", "a \t\n", "a%20%09%0A"},
		{"del", "\x7f", "%7F"},
		{"high bytes", "\xff\x80", "%FF%80"},
		{"utf-8", "é", "%C3%A9"},
		{"glob characters", `*?[]\`, "%2A%3F%5B%5D%5C"},
		{"safe punctuation", "a/b.c_d-e@f+g=h,i;j!k$l&m'n(o)p#q\"r<s>t|u^v`w", "a/b.c_d-e@f+g=h,i;j!k$l&m'n(o)p#q\"r<s>t|u^v`w"},
		{"longest kept", long, long},
		{"one byte too long", long + "a", hashKey(long + "a")},
		{"escapes push over the limit", strings.Repeat(":", 43), hashKey(strings.Repeat(":", 43))},
		{"escapes just fit", strings.Repeat(":", 42) + "ab", strings.Repeat("%3A", 42) + "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeKey(tt.in)
			if got != tt.want {
				t.Fatalf("encodeKey(%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEncodeKeyHashedForm(t *testing.T) {
	got := encodeKey(strings.Repeat("x", 1000))
	if len(got) != hashedLen || got[0] != '~' {
		t.Fatalf("got %q (%d bytes), want '~' and 43 base64url bytes", got, len(got))
	}
	for i := 1; i < len(got); i++ {
		c := got[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			t.Fatalf("byte %d of %q is %q, want base64url", i, got, c)
		}
	}
}

// hostileKeys are keys that try to break the key layout.
var hostileKeys = []string{
	"k", "{", "}", "{}", "}{", "a}b{c", "{a}:{b}", ":", "::", "%", "%7B", "%7b", "~", "~x",
	"\x00", "\x00\x00", "\xff", "é", "e\u0301", " ", "\t", "\r\n", "*", "user:1", "user%3A1",
	"ratekeeper:{x}:gcra:y", strings.Repeat("{", 200), strings.Repeat("a", 128),
	strings.Repeat("a", 129), strings.Repeat("a", 130), hashKey("collide"), "%7E" + hashKey("collide")[1:],
}

func TestEncodeKeyInjective(t *testing.T) {
	seen := make(map[string]string)
	for _, k := range hostileKeys {
		enc := encodeKey(k)
		if prev, dup := seen[enc]; dup {
			t.Fatalf("encodeKey(%q) and encodeKey(%q): both %q", prev, k, enc)
		}
		seen[enc] = k
	}
}

// hashTag returns the part of key that Redis Cluster hashes.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// crc16 is the CRC-16/XMODEM checksum Redis Cluster uses for slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func keySlot(key string) uint16 { return crc16(hashTag(key)) % 16384 }

func TestKeySlotReference(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	tests := []struct {
		key  string
		want uint16
	}{
		{"123456789", 0x31c3 % 16384},
		{"foo", 12182},
		{"{user1000}.following", keySlot("user1000")},
		{"foo{}{bar}", crc16("foo{}{bar}") % 16384},
		{"foo{{bar}}zap", keySlot("{bar")},
	}
	for _, tt := range tests {
		if got := keySlot(tt.key); got != tt.want {
			t.Errorf("keySlot(%q): got %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestDecisionKeysShareOneSlot(t *testing.T) {
	s, err := newRedis(nilClient(), Options{Prefix: "rk"})
	if err != nil {
		t.Fatal(err)
	}
	limits := []store.Limit{
		{Name: "a:{b}", Rate: 10, Period: time.Second},
		{Name: strings.Repeat("}", 300), Rate: 100, Period: time.Minute},
		{Rate: 1000, Period: time.Hour},
	}
	for _, alg := range store.Algorithms {
		for _, key := range hostileKeys {
			ls := make([]store.Limit, len(limits))
			copy(ls, limits)
			for i := range ls {
				ls[i].Algorithm = alg
			}
			ls[1].Block, ls[1].BlockMax = time.Minute, time.Hour
			plain := store.Request{Key: key, Limits: ls[:1]}
			full := store.Request{Key: key, Limits: ls, DedupID: key}
			for _, mode := range []string{"take", "peek"} {
				for _, req := range []store.Request{plain, full} {
					if err := req.Validate(); err != nil {
						t.Fatal(err)
					}
					cmd := s.command(mode, &req, 1)
					keys := cmd.keys()
					want := encodeKey(key)
					for _, k := range keys {
						if tag := hashTag(k); tag != want {
							t.Fatalf("%s %s key %q: hash tag %q, want %q", alg, mode, k, tag, want)
						}
						if keySlot(k) != keySlot(keys[0]) {
							t.Fatalf("%s %s: %q and %q in different slots", alg, mode, k, keys[0])
						}
					}
				}
			}
		}
	}
}

func TestStateKeys(t *testing.T) {
	s, err := newRedis(nilClient(), Options{Prefix: "rk"})
	if err != nil {
		t.Fatal(err)
	}
	sec := store.Limit{Rate: 1, Period: time.Second}
	named := store.Limit{Name: "api:v1", Rate: 1, Period: time.Second}
	tests := []struct {
		name string
		alg  store.Algorithm
		ls   []store.Limit
		want []string
	}{
		{"gcra", store.GCRA, []store.Limit{sec}, []string{"rk:{k%3A1}:g:~1s"}},
		{"token bucket", store.TokenBucket, []store.Limit{sec}, []string{"rk:{k%3A1}:t:~1s"}},
		{"counter", store.SlidingWindowCounter, []store.Limit{sec}, []string{"rk:{k%3A1}:c:~1s"}},
		{"fixed", store.FixedWindow, []store.Limit{named, sec}, []string{"rk:{k%3A1}:f:api%3Av1", "rk:{k%3A1}:f:~1s"}},
		{"log one limit", store.SlidingWindowLog, []store.Limit{named}, []string{"rk:{k%3A1}:l:api%3Av1"}},
		{"log sorted ids", store.SlidingWindowLog, []store.Limit{sec, named}, []string{"rk:{k%3A1}:l:api%3Av1:~1s"}},
		{"default name spelled out", store.GCRA, []store.Limit{{Name: "gcra/1s", Rate: 1, Period: time.Second}}, []string{"rk:{k%3A1}:g:~1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := make([]store.Limit, len(tt.ls))
			copy(ls, tt.ls)
			for i := range ls {
				ls[i].Algorithm = tt.alg
			}
			got, err := s.StateKeys(store.Request{Key: "k:1", Limits: ls})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := s.StateKeys(store.Request{Limits: []store.Limit{sec}}); err == nil {
		t.Fatal("StateKeys with an empty key: got nil error, want one")
	}
}

func TestLogSuffixInjective(t *testing.T) {
	lim := func(names ...string) []store.Limit {
		out := make([]store.Limit, len(names))
		for i, n := range names {
			out[i] = store.Limit{Name: n, Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Second}
		}
		return out
	}
	long := strings.Repeat("n", 100)
	sets := [][]store.Limit{
		lim("a"), lim("b"), lim("a", "b"), lim("a:b"), lim("a", "b", "c"), lim("a:b", "c"),
		lim(long), lim(long, long+"x"), lim(long + ":" + long + "x"), lim(long+"x", long+"y"),
		lim(strings.Repeat("z", 200)),
		// A limit with the default ID and one named like its key part.
		{{Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Second}}, lim("~1s"), lim("sliding_window_log/2s"),
	}
	seen := make(map[string]int)
	for i, ls := range sets {
		s := logSuffix(ls)
		if strings.ContainsAny(s, "{}") || len(s) > maxEncodedLen+1 {
			t.Fatalf("set %d: suffix %q has a brace or is too long", i, s)
		}
		if j, dup := seen[s]; dup {
			t.Fatalf("sets %d and %d share the suffix %q", j, i, s)
		}
		seen[s] = i
	}
	if logSuffix(lim("b", "a")) != logSuffix(lim("a", "b")) {
		t.Fatal("limit order changed the log key, want the same log for the same set")
	}
}

// decodeEscaped reverses the escaped (not hashed) form of encodeKey.
func decodeEscaped(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func FuzzEncodeKey(f *testing.F) {
	for _, k := range hostileKeys {
		f.Add(k, "k")
	}
	f.Add("a", "a")
	f.Add(strings.Repeat("%", 43), strings.Repeat("%", 42))
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := encodeKey(a), encodeKey(b)
		if (a == b) != (ea == eb) {
			t.Fatalf("encodeKey(%q) = %q, encodeKey(%q) = %q: injectivity broken", a, ea, b, eb)
		}
		if strings.ContainsAny(ea, "{}:") {
			t.Fatalf("encodeKey(%q) = %q contains a brace or colon", a, ea)
		}
		if len(ea) > maxEncodedLen {
			t.Fatalf("encodeKey(%q) is %d bytes, want at most %d", a, len(ea), maxEncodedLen)
		}
		for i := 0; i < len(ea); i++ {
			if ea[i] <= ' ' || ea[i] >= 0x7f {
				t.Fatalf("encodeKey(%q) = %q has byte %#x, want printable ASCII", a, ea, ea[i])
			}
		}
		if ea != "" && ea[0] == '~' {
			if len(ea) != hashedLen {
				t.Fatalf("hashed encodeKey(%q) = %q has %d bytes, want %d", a, ea, len(ea), hashedLen)
			}
			return
		}
		back, ok := decodeEscaped(ea)
		if !ok || back != a {
			t.Fatalf("encodeKey(%q) = %q decodes to %q (ok %v)", a, ea, back, ok)
		}
	})
}

// TestKeyOf checks that keyOf builds the key keyBase and encodeKey build,
// for plain, escaped and hashed keys, in one allocation when not hashed.
func TestKeyOf(t *testing.T) {
	long := strings.Repeat("a", maxEncodedLen)
	for _, key := range []string{"", "user-42", "ip:10.0.0.1", "2001:db8::1", "{tag}", "a\x00é", long, long + "a", strings.Repeat(":", 43), strings.Repeat(":", 42) + "ab"} {
		for _, suffix := range []string{"", "g:~3600000000", tagOverride} {
			want := keyBase("rk", encodeKey(key)) + suffix
			if got := keyOf("rk", key, suffix); got != want {
				t.Fatalf("keyOf(rk, %q, %q): got %q, want %q", key, suffix, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = keyOf("rk", "ip:10.0.0.1", "g:p") }); n != 1 {
		t.Fatalf("keyOf of an escaped key: %v allocations, want 1", n)
	}
}

// TestLimitCacheLast: the limit added last answers from its own slot, and
// a limit that differs from it in any field gets its own info, once.
func TestLimitCacheLast(t *testing.T) {
	var c limitCache
	a := store.Limit{Name: "a", Algorithm: store.GCRA, Rate: 5, Period: time.Second}
	b := a
	b.Rate = 6
	d := a
	d.Block = time.Minute
	ia, ib, id := c.get(a), c.get(b), c.get(d)
	if ia == ib || ib == id || ia == id || ia.l != a || ib.l != b || id.l != d {
		t.Fatalf("distinct limits share info: %p %p %p", ia, ib, id)
	}
	for range 3 {
		if c.get(a) != ia || c.get(b) != ib || c.get(d) != id {
			t.Fatal("a cached limit got new info")
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.get(d) }); n != 0 {
		t.Fatalf("a cached limit: %v allocations", n)
	}
}
