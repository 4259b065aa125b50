package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStartAndStop(t *testing.T) {
	s := Require(t)
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < firstPort || p >= firstPort+ports || p+10000 >= 32768 {
		t.Fatalf("port %s: want one in [%d, %d) whose cluster bus port lies below 32768", port, firstPort, firstPort+ports)
	}
	if err := s.ping(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	s.Stop()
	if err := s.ping(); err == nil {
		t.Fatal("the server answers PING after Stop")
	}
	done := make(chan struct{})
	go func() {
		s.Stop() // a second Stop returns at once
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("a second Stop did not return")
	}
}

// TestStartAtTakenPort: a server whose port is taken exits at once, and
// StartAt says so without waiting out its readiness timeout, so that Start
// moves on to another port quickly.
func TestStartAtTakenPort(t *testing.T) {
	if _, err := binary(); err != nil {
		Unavailable(t, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	start := time.Now()
	s, err := StartAt(port)
	if err == nil {
		s.Stop()
		t.Fatalf("StartAt(%s) on a taken port: got a server", port)
	}
	if !strings.Contains(err.Error(), "exited") {
		t.Fatalf("StartAt(%s) on a taken port: got %v, want that the server exited", port, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("StartAt on a taken port took %s, want well under the 3 s readiness timeout", took)
	}
}
