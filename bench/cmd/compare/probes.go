package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// infoField returns one numeric or string field of INFO section.
func infoField(ctx context.Context, rdb *redis.Client, section, field string) (string, error) {
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("INFO %s: %w", section, err)
	}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}

// redisCounters are the server's running totals a measurement reads
// before and after its window.
type redisCounters struct {
	cpu     float64 // seconds of CPU (user plus system)
	scripts float64 // microseconds spent running scripts
}

// scriptCommands are the commands whose time INFO commandstats counts as
// running a script: the whole script, the Redis calls inside it included.
var scriptCommands = []string{"cmdstat_eval", "cmdstat_evalsha", "cmdstat_eval_ro", "cmdstat_evalsha_ro"}

// readRedisCounters returns the server's used CPU (INFO cpu) and the time
// spent in scripts (INFO commandstats) from one INFO call.
func readRedisCounters(ctx context.Context, rdb *redis.Client) (redisCounters, error) {
	var c redisCounters
	s, err := rdb.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return c, fmt.Errorf("INFO cpu commandstats: %w", err)
	}
	found := 0
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch {
		case !ok:
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return c, fmt.Errorf("INFO cpu: %s: %w", k, err)
			}
			c.cpu += f
			found++
		case slices.Contains(scriptCommands, k):
			us, err := statField(v, "usec")
			if err != nil {
				return c, fmt.Errorf("INFO commandstats: %s: %w", k, err)
			}
			c.scripts += us
		}
	}
	if found != 2 {
		return c, fmt.Errorf("INFO cpu: used_cpu_sys or used_cpu_user missing")
	}
	return c, nil
}

// statField returns the field name of a commandstats value
// ("calls=3,usec=40,usec_per_call=13.33,...").
func statField(v, name string) (float64, error) {
	for f := range strings.SplitSeq(v, ",") {
		if k, x, ok := strings.Cut(f, "="); ok && k == name {
			return strconv.ParseFloat(x, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %q", name, v)
}

// usedMemory returns INFO memory's used_memory in bytes.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	v, err := infoField(ctx, rdb, "memory", "used_memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// cpuModel returns the processor's model name from /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
