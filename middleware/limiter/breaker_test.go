package limiter

import (
	"strconv"
	"testing"
	"time"
)

// The per-node breakers are bounded: beyond maxNodeBreakers nodes in use,
// requests share the limiter-wide breaker; an idle node's breaker is
// forgotten to make room.
func TestNodeBreakersBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	bs := &breakers{breaker: breaker{threshold: 1, cooldown: time.Hour}}
	if got := bs.of(""); got != &bs.breaker {
		t.Fatalf("node \"\": got %p, want the limiter-wide breaker %p", got, &bs.breaker)
	}
	for i := range maxNodeBreakers {
		b := bs.of("n" + strconv.Itoa(i))
		if b == &bs.breaker {
			t.Fatalf("node %d: got the limiter-wide breaker, want one of its own", i)
		}
		b.failure(now, false) // open: in use
	}
	if got := bs.of("extra"); got != &bs.breaker {
		t.Fatalf("node beyond %d open ones: got its own breaker, want the limiter-wide one", maxNodeBreakers)
	}
	bs.of("n0").success(false) // closed and idle: may be forgotten
	got := bs.of("extra")
	if got == &bs.breaker {
		t.Fatal("with an idle node's breaker to forget: got the limiter-wide breaker, want one of its own")
	}
	if again := bs.of("extra"); again != got {
		t.Fatalf("second lookup: got %p, want the same breaker %p", again, got)
	}
	if m := bs.nodes.Load(); len(*m) != maxNodeBreakers {
		t.Fatalf("node breakers: got %d, want %d", len(*m), maxNodeBreakers)
	}
	if !bs.down() {
		t.Fatal("down: got false with open node breakers, want true")
	}
}
