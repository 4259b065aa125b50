package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestStatField(t *testing.T) {
	v := "calls=4,usec=50,usec_per_call=12.50,rejected_calls=0,failed_calls=0"
	if got, err := statField(v, "usec"); err != nil || got != 50 {
		t.Fatalf("usec: got %v, %v; want 50", got, err)
	}
	if got, err := statField(v, "calls"); err != nil || got != 4 {
		t.Fatalf("calls: got %v, %v; want 4", got, err)
	}
	if _, err := statField(v, "usec_total"); err == nil {
		t.Fatal("a missing field: got no error")
	}
}

// capacitySample is a sample of n decisions that cost Redis cpuUS and
// scriptUS µs in all.
func capacitySample(n uint64, cpuUS, scriptUS float64) *sample {
	return &sample{calls: n, elapsed: time.Second, redisCPU: cpuUS / 1e6, scriptUS: scriptUS}
}

// TestCapacityRows checks the per-decision medians, the ratio to
// redis_rate's script time and the memory of the capacity table, and that
// a case that did not run shows as "-".
func TestCapacityRows(t *testing.T) {
	names := []string{refRedisRate, "ratekeeper/redis/gcra", "ratekeeper/redis/gcra" + stackedSuffix, "ratekeeper/redis/gcra" + oneCallSuffix}
	gp := groupPlan{g: group{callers: 64, keys: 10000}}
	for _, n := range names {
		gp.cases = append(gp.cases, &caseDef{name: n, redis: true})
	}
	gp.cells = [][]*sample{
		{capacitySample(1000, 15000, 8000), capacitySample(2000, 30000, 20000)},  // 8 and 10 µs of script
		{capacitySample(1000, 7000, 4000), capacitySample(1000, 6000, 6000)},     // ratios 0.5 and 0.6
		{capacitySample(1000, 12000, 11000), capacitySample(1000, 14000, 13000)}, // stacked
		{capacitySample(1000, 9000, 6000), capacitySample(1000, 11000, 7000)},    // one call each
	}
	mem := []memResult{{name: "ratekeeper/redis/gcra", identities: 10, stateBytes: 1200}}
	rows := capacityRows(&gp, mem)
	var gcra, fw capacityRow
	for _, r := range rows {
		switch r.name {
		case "ratekeeper/redis/gcra":
			gcra = r
		case "ratekeeper/redis/fixed_window":
			fw = r
		}
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(gcra.script, 5) || !near(gcra.ratio, 0.55) || !near(gcra.cpu, 6.5) {
		t.Errorf("gcra plain: got script %v ratio %v cpu %v, want 5, 0.55, 6.5", gcra.script, gcra.ratio, gcra.cpu)
	}
	if !gcra.hasStacked || !near(gcra.stScript, 12) || !near(gcra.stCPU, 13) {
		t.Errorf("gcra stacked: got %v, script %v cpu %v; want 12, 13", gcra.hasStacked, gcra.stScript, gcra.stCPU)
	}
	if !gcra.hasOneCall || !near(gcra.oneCPU, 10) {
		t.Errorf("gcra one call each: got %v, cpu %v; want 10", gcra.hasOneCall, gcra.oneCPU)
	}
	if !near(gcra.memBytes, 120) {
		t.Errorf("gcra memory: got %v, want 120", gcra.memBytes)
	}
	if fw.hasPlain || fw.hasStacked || fw.hasOneCall || !math.IsNaN(fw.memBytes) {
		t.Errorf("fixed window did not run: got %+v", fw)
	}

	var out bytes.Buffer
	writeCapacity(&out, []groupPlan{gp}, mem)
	for _, want := range []string{
		"| gcra | 5.00 | 0.55 | 6.50 | 153,800 | 10.0 | 100,000 | 12.0 | 13.0 | 76,900 | 120 |",
		"| fixed_window | - | - | - | - | - | - | - | - | - | - |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
