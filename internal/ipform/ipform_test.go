package ipform

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		identity, want string // want "" for an identity Check accepts
	}{
		{"203.0.113.7", ""},
		{"198.51.100.0/24", ""},
		{"2001:db8:1:2::/64", ""},
		{"2001:db8::1", ""}, // one address: a key function with IPv6Prefix 128 gives it
		{"alice", ""},
		{"user@example.com", ""},
		{"/users/{id}", ""},
		{"", ""},
		{"::ffff:127.0.0.209", "127.0.0.209"},
		{"::FFFF:127.0.0.150", "127.0.0.150"},
		{"2001:DB8::1", "2001:db8::1"},
		{"2001:db8:0:0:0:0:0:1", "2001:db8::1"},
		{"fe80::1%eth0", "fe80::1"},
		{"198.51.100.7/24", "198.51.100.0/24"},
		{"2001:db8:1:2::5/64", "2001:db8:1:2::/64"},
		{"203.0.113.7/32", "203.0.113.7"},
		{"::ffff:198.51.100.0/120", "198.51.100.0/24"},
		{"203.0.113.07", "203.0.113.7"},
		{"203.000.113.7", "203.0.113.7"},
		{"198.51.100.0/024", "198.51.100.0/24"},
		{"fe80::1%eth0/64", "fe80::/64"},
		{"1.2.3", ""},
		{"1.2.3.256", ""},
		{"1.2.3.4/33", ""},
		{"1.2.3.4/x", ""},
		{"1.2.3.4/+24", ""},
		{"1.2.3.4/", ""},
	}
	for _, tt := range tests {
		err := Check(tt.identity)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Check(%q): %v, want nil", tt.identity, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), `"`+tt.want+`"`)):
			t.Errorf("Check(%q): %v, want an error naming %q", tt.identity, err, tt.want)
		}
	}
	// Prefixes no key function gives, whatever the client: refused,
	// naming no form (one would name other clients).
	for _, id := range []string{"0.0.0.0/0", "::/0", "1.2.3.4/0", "::ffff:203.0.113.0/96", "::ffff:1.2.3.4/64"} {
		err := Check(id)
		if err == nil || strings.Contains(err.Error(), "they name it") {
			t.Errorf("Check(%q): %v, want a refusal that names no form", id, err)
		}
	}
}
