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
}
