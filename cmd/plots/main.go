// Command plots draws how each rate-limiting algorithm admits the same
// traffic, as one SVG: `make plots` writes docs/algorithms.svg, which the
// README shows in its algorithms section.
//
//	go run ./cmd/plots -o docs/algorithms.svg
//
// Every algorithm of store.Algorithms, and the suppressed strategy, runs
// on its own in-memory store with a simulated clock, under one limit (10
// per second, burst 10; for the suppressed strategy soft limit 10 and hard
// limit 20, its default, with random draws from a fixed seed) and one
// traffic pattern: a burst of 30 requests at 0.5 s, then a steady 20
// requests per second (twice the rate) until 6 s. Each panel plots the
// requests admitted so far against time, with a tick under the curve for
// every request offered (grey) and admitted (coloured). The output
// depends on nothing but this program, so it is the same on every run and
// a test keeps the committed file current.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// The scenario every algorithm runs.
const (
	rate       = 10 // units per period, and the burst of gcra and token_bucket
	period     = time.Second
	burstAt    = 500 * time.Millisecond // when the burst arrives
	burstSize  = 30                     // requests in the burst, 1ms apart
	steadyFrom = time.Second            // steady load from here...
	horizon    = 6 * time.Second        // ...until here
	steadyGap  = period / (2 * rate)    // 2× the rate: one request every 50ms
)

// epoch is the simulated clock's start: a whole second, so that window
// algorithms' windows (aligned to multiples of the period since the Unix
// epoch) start at 0 s, 1 s, 2 s...
var epoch = time.Unix(1_767_225_600, 0)

func main() {
	out := flag.String("o", "docs/algorithms.svg", "the SVG file to write")
	flag.Parse()
	svg, err := render()
	if err == nil {
		err = os.WriteFile(*out, svg, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "plots:", err)
		os.Exit(1)
	}
}

// arrivals returns the offsets from the epoch at which requests arrive.
func arrivals() []time.Duration {
	var ts []time.Duration
	for i := range burstSize {
		ts = append(ts, burstAt+time.Duration(i)*time.Millisecond)
	}
	for t := steadyFrom; t < horizon; t += steadyGap {
		ts = append(ts, t)
	}
	return ts
}

// result is one request of a run.
type result struct {
	at       time.Duration
	admitted bool
}

// simulate runs the scenario for alg on a fresh memory store whose clock
// is moved to each arrival.
func simulate(alg string) ([]result, error) {
	var now atomic.Int64 // nanoseconds since the epoch
	st, err := memstore.New(memstore.Options{
		Clock: func() time.Time { return epoch.Add(time.Duration(now.Load())) },
		Rand:  rand.New(rand.NewPCG(1, 2)).Float64, // a fixed seed: the same picture every run
	})
	if err != nil {
		return nil, err
	}
	var limit store.Limit
	if alg == shedding {
		// Soft limit 10 (half the hard one) over a sliding window
		// counter of 20.
		if st, err = suppressed.New(st, suppressed.Options{}); err != nil {
			return nil, err
		}
		limit = store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 2 * rate, Period: period}
	} else {
		a, err := store.ParseAlgorithm(alg)
		if err != nil {
			return nil, err
		}
		limit = store.Limit{Algorithm: a, Rate: rate, Period: period}
	}
	var out []result
	for _, t := range arrivals() {
		now.Store(int64(t))
		d, err := st.Take(context.Background(), store.Request{Key: "client", Limits: []store.Limit{limit}})
		if err != nil {
			return nil, fmt.Errorf("%s at %s: %w", alg, t, err)
		}
		out = append(out, result{at: t, admitted: d.Allowed})
	}
	return out, nil
}

// Layout of the SVG, in pixels.
const (
	width    = 760
	left     = 56  // plot area's left edge
	right    = 200 // space right of the plot, for the legend
	panelH   = 132 // one panel, gaps included
	plotH    = 96  // one panel's plot area
	top      = 58  // space above the first panel
	bottom   = 34  // space below the last panel
	yMax     = 80  // admitted requests at the top of every panel
	rugH     = 5   // height of a tick
	plotW    = width - left - right
	fontSize = 12
)

// shedding names the last panel: load shedding (package store/suppressed)
// over a sliding window counter.
const shedding = "suppressed"

var colors = map[string]string{
	store.GCRA.String():                 "#1b6ca8",
	store.TokenBucket.String():          "#2a9d8f",
	store.SlidingWindowLog.String():     "#e76f51",
	store.SlidingWindowCounter.String(): "#8e5ea2",
	store.FixedWindow.String():          "#c0392b",
	shedding:                            "#b8860b",
}

var notes = map[string][2]string{
	store.GCRA.String():                 {"bursts up to 10, then an", "even 1 per 100 ms"},
	store.TokenBucket.String():          {"the same arithmetic as GCRA", "(see package store)"},
	store.SlidingWindowLog.String():     {"exact: at most 10 in any", "1 s; admits in clumps"},
	store.SlidingWindowCounter.String(): {"approximate: the previous", "window weighs in"},
	store.FixedWindow.String():          {"10 at each window start:", "20 within 1 s at 0.5–1.5 s"},
	shedding:                            {"soft 10, hard 20: sheds a", "share; ~10 per s at 2×"},
}

func x(t time.Duration) float64 { return left + float64(t)/float64(horizon)*plotW }

func y(n int) float64 { return plotH - float64(n)/yMax*plotH }

func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// render simulates every algorithm and returns the SVG.
func render() ([]byte, error) {
	var algs []string
	for _, a := range store.Algorithms {
		algs = append(algs, a.String())
	}
	algs = append(algs, shedding)
	height := top + len(algs)*panelH + bottom
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="%d">`+"\n", width, height, width, height, fontSize)
	b.WriteString("<title>Requests admitted over time by each algorithm: limit 10/s, burst 10; 30 requests at 0.5 s, then 20/s</title>\n")
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">Requests admitted over time, per algorithm</text>`+"\n", left)
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555555">Limit 10 per second (burst 10; suppressed: hard limit 20). Traffic: 30 requests at 0.5 s, then 20 per second (2× the rate).</text>`+"\n", left)
	for i, alg := range algs {
		res, err := simulate(alg)
		if err != nil {
			return nil, err
		}
		panel(&b, top+i*panelH, alg, res, i == len(algs)-1)
	}
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// panel draws one algorithm's run with its top edge at y0.
func panel(b *bytes.Buffer, y0 int, alg string, res []result, last bool) {
	color := colors[alg]
	fmt.Fprintf(b, `<g transform="translate(0,%d)">`+"\n", y0)
	// Grid and axes.
	for n := 0; n <= yMax; n += 20 {
		stroke := "#e5e5e5"
		if n == 0 {
			stroke = "#999999"
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s"/>`+"\n", left, f(y(n)), left+plotW, f(y(n)), stroke)
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" fill="#777777" font-size="10">%d</text>`+"\n", left-6, f(y(n)+3.5), n)
	}
	for t := time.Duration(0); t <= horizon; t += time.Second {
		fmt.Fprintf(b, `<line x1="%s" y1="0" x2="%s" y2="%d" stroke="#e5e5e5"/>`+"\n", f(x(t)), f(x(t)), plotH+2*rugH+4)
		if last {
			fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle" fill="#777777" font-size="10">%d s</text>`+"\n", f(x(t)), plotH+2*rugH+18, int(t/time.Second))
		}
	}
	// The admitted count as a step line.
	admitted := 0
	fmt.Fprintf(b, `<path fill="none" stroke="%s" stroke-width="2" d="M%s %s`, color, f(x(0)), f(y(0)))
	for _, r := range res {
		if r.admitted {
			admitted++
			fmt.Fprintf(b, "H%sV%s", f(x(r.at)), f(y(admitted)))
		}
	}
	fmt.Fprintf(b, `H%s"/>`+"\n", f(x(horizon)))
	// Ticks: offered (grey), admitted (colour).
	var offered, taken bytes.Buffer
	for _, r := range res {
		fmt.Fprintf(&offered, "M%s %dv%d", f(x(r.at)), plotH+2, rugH)
		if r.admitted {
			fmt.Fprintf(&taken, "M%s %dv%d", f(x(r.at)), plotH+rugH+4, rugH)
		}
	}
	fmt.Fprintf(b, `<path stroke="#aaaaaa" d="%s"/>`+"\n", offered.String())
	fmt.Fprintf(b, `<path stroke="%s" d="%s"/>`+"\n", color, taken.String())
	// Legend.
	lx := left + plotW + 14
	fmt.Fprintf(b, `<text x="%d" y="14" font-weight="bold" fill="%s">%s</text>`+"\n", lx, color, alg)
	fmt.Fprintf(b, `<text x="%d" y="32">admitted %d of %d</text>`+"\n", lx, admitted, len(res))
	note := notes[alg]
	fmt.Fprintf(b, `<text x="%d" y="50" fill="#555555" font-size="11">%s</text>`+"\n", lx, note[0])
	fmt.Fprintf(b, `<text x="%d" y="64" fill="#555555" font-size="11">%s</text>`+"\n", lx, note[1])
	b.WriteString("</g>\n")
}
