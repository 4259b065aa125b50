package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// The committed picture is what the program draws now: a change to the
// algorithms or to this program that changes it needs `make plots`.
func TestCommittedPlotIsCurrent(t *testing.T) {
	got, err := render()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/algorithms.svg")
	if err != nil {
		t.Fatalf("%v: run make plots", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/algorithms.svg is stale: run make plots and commit the result")
	}
}

func TestSVGIsWellFormed(t *testing.T) {
	svg, err := render()
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// The runs are what the store package specifies for this traffic.
func TestSimulation(t *testing.T) {
	count := func(res []result, from, to time.Duration) int {
		n := 0
		for _, r := range res {
			if r.admitted && r.at >= from && r.at < to {
				n++
			}
		}
		return n
	}
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			res, err := simulate(alg.String())
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != burstSize+int((horizon-steadyFrom)/steadyGap) {
				t.Fatalf("got %d requests", len(res))
			}
			if n := count(res, burstAt, steadyFrom); n != rate {
				t.Errorf("burst: got %d admitted, want %d", n, rate)
			}
			// Nothing admits more than twice the rate in any second (a
			// window's capacity plus what the one before lends), nor
			// more in all than the burst and the rate allow.
			for _, r := range res {
				if n := count(res, r.at, r.at+period); n > 2*rate {
					t.Errorf("%d admitted in [%s, %s)", n, r.at, r.at+period)
				}
			}
			if n, most := count(res, 0, horizon), rate+int((horizon-burstAt)*rate/period)+1; n > most {
				t.Errorf("got %d admitted in all, want at most %d", n, most)
			}
			if alg != store.SlidingWindowLog {
				return
			}
			for _, r := range res {
				if n := count(res, r.at, r.at+period); n > rate {
					t.Errorf("sliding window log: %d admitted in [%s, %s), want at most %d", n, r.at, r.at+period, rate)
				}
			}
		})
	}
	// The suppressed strategy: the soft limit's 10 pass at once, never
	// more than the hard limit in a window, and about the rate in the
	// steady seconds.
	res, err := simulate(shedding)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(res, burstAt, burstAt+burstSize*time.Millisecond); n < rate || n > 2*rate {
		t.Errorf("suppressed: burst: got %d admitted, want %d to %d", n, rate, 2*rate)
	}
	for s := time.Duration(0); s < horizon; s += period {
		if n := count(res, s, s+period); n > 2*rate {
			t.Errorf("suppressed: %d admitted in [%s, %s), want at most the hard limit %d", n, s, s+period, 2*rate)
		}
	}
	if n := count(res, 2*time.Second, horizon); n < 3*rate || n > 5*rate {
		t.Errorf("suppressed: got %d admitted in [2s, 6s), want about %d", n, 4*rate)
	}
	gcra, _ := simulate(store.GCRA.String())
	bucket, _ := simulate(store.TokenBucket.String())
	for i := range gcra {
		if gcra[i] != bucket[i] {
			t.Fatalf("request %d: gcra %v, token bucket %v; the store specifies one arithmetic", i, gcra[i], bucket[i])
		}
	}
}
