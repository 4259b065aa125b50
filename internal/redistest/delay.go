package redistest

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DelayProxy forwards TCP to a Redis server and holds every chunk of
// reply for a fixed delay after it left the server: a server whose every
// answer takes that much longer, as one far away or overloaded. Replies
// keep their order, and a pipeline's replies are held once, not once
// each. It counts the connections it accepted and the EVAL commands (a
// script sent with its source) it forwarded.
type DelayProxy struct {
	l      net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup
	conns  atomic.Int32
	evals  atomic.Int32
}

// NewDelayProxy starts a proxy to target on a free loopback port, closed
// when the test ends.
func NewDelayProxy(t testing.TB, target string, delay time.Duration) *DelayProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &DelayProxy{l: l, target: target, delay: delay}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.wg.Wait()
	})
	return p
}

// Addr returns the address clients connect to.
func (p *DelayProxy) Addr() string { return p.l.Addr().String() }

// Conns returns how many connections the proxy accepted.
func (p *DelayProxy) Conns() int { return int(p.conns.Load()) }

// Evals returns how many EVAL commands the proxy forwarded.
func (p *DelayProxy) Evals() int { return int(p.evals.Load()) }

func (p *DelayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		go p.handle(c)
	}
}

// chunk is a piece of reply and when it left the server.
type chunk struct {
	b  []byte
	at time.Time
}

func (p *DelayProxy) handle(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	closeBoth := func() { c.Close(); s.Close() }
	go func() { // requests pass at once
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				p.evals.Add(int32(bytes.Count(bytes.ToLower(buf[:n]), []byte("$4\r\neval\r\n"))))
				if _, werr := s.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				closeBoth()
				return
			}
		}
	}()
	replies := make(chan chunk, 1024)
	go func() { // replies wait out the delay, in order
		for r := range replies {
			time.Sleep(time.Until(r.at.Add(p.delay)))
			if _, err := c.Write(r.b); err != nil {
				closeBoth()
			}
		}
	}()
	defer close(replies)
	for {
		buf := make([]byte, 64<<10)
		n, err := s.Read(buf)
		if n > 0 {
			replies <- chunk{b: buf[:n], at: time.Now()}
		}
		if err != nil {
			closeBoth()
			return
		}
	}
}

// OpenLoop calls f(i) for i in [0, n), one call every gap, each in its own
// goroutine whatever the earlier calls wait for (an open loop), and waits
// for them all. It returns how many calls returned an error and the first
// error they returned, and late, the 99th percentile of how late the
// calls started against their schedule: how loaded the machine was.
func OpenLoop(n int, gap time.Duration, f func(i int) error) (failed int, late time.Duration, first error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	lateness := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * gap)
		time.Sleep(time.Until(due))
		lateness[i] = time.Since(due)
		wg.Go(func() {
			if err := f(i); err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lateness)
	return failed, lateness[n*99/100], first
}

// Bound returns how many of all calls an open loop whose calls started up
// to late (OpenLoop's p99) may see degraded, for a test whose calls have
// about 10 ms of slack in their budget: quiet when they started within
// 2 ms of their schedule, loaded when within 10 ms, and all beyond, when
// how many degrade says more of the machine than of the code.
func Bound(late time.Duration, quiet, loaded, all int) int {
	switch {
	case late < 2*time.Millisecond:
		return quiet
	case late <= 10*time.Millisecond:
		return loaded
	}
	return all
}
