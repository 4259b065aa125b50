package limiter

import (
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

func TestCompileRejectsUnprintableIETFNames(t *testing.T) {
	_, err := compileLimits(headers.Options{IETF: true}, "api", "", []store.Limit{{Name: "é", Rate: 1, Period: time.Second}, {Rate: 2, Period: time.Minute}}, false)
	if err == nil || !strings.Contains(err.Error(), "printable ASCII") {
		t.Fatalf("got %v, want a printable-ASCII error", err)
	}
	if _, err := compileLimits(headers.Options{}, "api", "", nil, false); err == nil {
		t.Fatal("got nil error for no limits, want one")
	}
}
