package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServerPath is the redis-server binary the cluster tests run as
// processes of their own (a cluster needs several nodes that announce
// addresses the test can reach, which plain processes on loopback give
// without any port mapping).
const redisServerPath = "/usr/bin/redis-server"

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterSpec describes a testCluster.
type clusterSpec struct {
	masters  int // masters, each serving an equal share of the slots
	replicas int // replicas of each master
	// nodeTimeout is cluster-node-timeout, after which an unreachable node
	// is considered failing (and its replica may take over); zero keeps
	// Redis's default of 15 s.
	nodeTimeout time.Duration
}

// testCluster is a Redis Cluster, one redis-server process per node on a
// loopback port, started for one test.
type testCluster struct {
	addrs    []string         // host:port of every master, in start order
	nodes    []*clusterProc   // the masters, in start order
	replicas [][]*clusterProc // replicas[i] replicate nodes[i]
}

// clusterProc is one redis-server process of a testCluster.
type clusterProc struct {
	addr    string
	port    int
	cmd     *exec.Cmd
	logPath string        // the process's stdout and stderr
	exited  chan struct{} // closed once the process has exited
	waitErr error         // cmd.Wait's result; read only after exited is closed
}

// startCluster starts a Redis Cluster of spec.masters masters and
// spec.replicas replicas of each, every node a redis-server process in a
// temporary directory of its own on a free loopback port. It gives each
// master an equal share of the hash slots, joins all nodes, attaches the
// replicas, and waits (30 s at most) until every node reports
// cluster_state:ok, knows all nodes in their roles, and every replica's
// link to its master is up. The processes are killed, by their process
// handles, when the test ends.
//
// Without redis-server the test is skipped, or fails when
// RATEKEEPER_REQUIRE_REDIS=1.
func startCluster(t *testing.T, spec clusterSpec) *testCluster {
	t.Helper()
	if _, err := exec.LookPath(redisServerPath); err != nil {
		if requireRedis() {
			t.Fatalf("Redis Cluster test needs %s (%s=1): %v", redisServerPath, envRequire, err)
		}
		t.Skipf("Redis Cluster test needs %s: %v (set %s=1 to make this a failure)", redisServerPath, err, envRequire)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var args []string
	if spec.nodeTimeout > 0 {
		args = append(args, "--cluster-node-timeout", strconv.FormatInt(spec.nodeTimeout.Milliseconds(), 10))
	}
	if spec.replicas > 0 {
		// Full synchronisation starts at once instead of waiting 5 s for
		// more replicas to share the transfer.
		args = append(args, "--repl-diskless-sync-delay", "0")
	}
	tc := &testCluster{}
	taken := map[int]bool{}
	for range spec.masters {
		p := startClusterProc(ctx, t, taken, args)
		tc.nodes = append(tc.nodes, p)
		tc.addrs = append(tc.addrs, p.addr)
	}
	for range spec.masters {
		var rs []*clusterProc
		for range spec.replicas {
			rs = append(rs, startClusterProc(ctx, t, taken, args))
		}
		tc.replicas = append(tc.replicas, rs)
	}
	if err := tc.join(ctx); err != nil {
		t.Fatalf("form a cluster of %s: %v\n%s", strings.Join(tc.addrs, ", "), err, tc.logs())
	}
	if spec.replicas > 0 {
		if err := tc.replicate(ctx); err != nil {
			t.Fatalf("attach replicas to %s: %v\n%s", strings.Join(tc.addrs, ", "), err, tc.logs())
		}
	}
	return tc
}

// all returns every node: the masters, then the replicas.
func (tc *testCluster) all() []*clusterProc {
	all := append([]*clusterProc(nil), tc.nodes...)
	for _, rs := range tc.replicas {
		all = append(all, rs...)
	}
	return all
}

// startClusterProc starts one cluster-enabled redis-server on a free port
// with extra arguments args and waits until it answers PING. A port can be
// taken by someone else between the check and the server's bind, so a
// server that exits during start-up is tried again on another port, a few
// times.
func startClusterProc(ctx context.Context, t *testing.T, taken map[int]bool, args []string) *clusterProc {
	t.Helper()
	var failures []string
	for range 5 {
		port, err := freeClusterPort(taken)
		if err != nil {
			t.Fatal(err)
		}
		taken[port] = true
		p := launchClusterProc(t, port, args)
		err = p.waitReady(ctx)
		if err == nil {
			return p
		}
		failures = append(failures, fmt.Sprintf("port %d: %v\n%s", port, err, p.logTail()))
		if ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("start %s in cluster mode:\n%s", redisServerPath, strings.Join(failures, "\n"))
	return nil
}

// freeClusterPort returns a port in 20000-39999 that is free on 127.0.0.1
// together with its cluster bus port (port + 10000) and is not in taken.
func freeClusterPort(taken map[int]bool) (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(20000)
		if taken[p] || taken[p+10000] || taken[p-10000] {
			continue
		}
		if clusterPortFree(p) && clusterPortFree(p+10000) {
			return p, nil
		}
	}
	return 0, errors.New("no free port pair (p, p+10000) found in 20000-39999 on 127.0.0.1")
}

// clusterPortFree reports whether a TCP listener can bind 127.0.0.1:p
// right now.
func clusterPortFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// launchClusterProc starts redis-server in cluster mode on port, with
// extra arguments args, in a fresh temporary directory, and registers a
// cleanup that kills exactly this process and waits for it to exit (before
// the directory is removed: cleanups run last registered first).
func launchClusterProc(t *testing.T, port int, args []string) *clusterProc {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create %s: %v", logPath, err)
	}
	procCtx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(procCtx, redisServerPath, append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes-"+strconv.Itoa(port)+".conf"),
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
	}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		stop()
		_ = logFile.Close()
		t.Fatalf("start %s: %v", redisServerPath, err)
	}
	p := &clusterProc{
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		port:    port,
		cmd:     cmd,
		logPath: logPath,
		exited:  make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		defer stop()
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill redis-server pid %d: %v", cmd.Process.Pid, err)
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("redis-server pid %d still running 10 s after SIGKILL", cmd.Process.Pid)
		}
	})
	return p
}

// waitReady polls PING until the server answers, the process exits or ctx
// ends.
func (p *clusterProc) waitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("redis-server exited during start-up: %v", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING before the deadline: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the end of the process's log, for failure messages.
func (p *clusterProc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log of %s unreadable: %v)", p.addr, err)
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return fmt.Sprintf("--- log of %s ---\n%s", p.addr, b)
}

// logs returns the end of every node's log.
func (tc *testCluster) logs() string {
	var b strings.Builder
	for _, p := range tc.all() {
		b.WriteString(p.logTail())
		b.WriteByte('\n')
	}
	return b.String()
}

// join assigns master i the i-th of n equal slot ranges, introduces every
// node (replicas too, still without slots) to the first master with
// CLUSTER MEET and waits until every node reports a healthy cluster of n
// masters covering all slots and knows every node.
func (tc *testCluster) join(ctx context.Context) error {
	n := len(tc.addrs)
	nodes := tc.all()
	admins := make([]*redis.Client, len(nodes))
	for i, p := range nodes {
		admins[i] = redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
		defer admins[i].Close()
	}
	for i, c := range admins {
		// Distinct config epochs from the start, as redis-cli --cluster
		// create sets them, so that no epoch collision has to be resolved.
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", nodes[i].addr, err)
		}
		if i >= n {
			continue // a replica-to-be serves no slots
		}
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := c.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", nodes[i].addr, lo, hi, err)
		}
	}
	for _, p := range nodes[1:] {
		if err := admins[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(p.port)).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER MEET %s: %w", nodes[0].addr, p.addr, err)
		}
	}
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
		"cluster_slots_ok":       strconv.Itoa(clusterSlots),
		"cluster_known_nodes":    strconv.Itoa(len(nodes)),
		"cluster_size":           strconv.Itoa(n),
	}
	return poll(ctx, func() string {
		for i, c := range admins {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Sprintf("%s: CLUSTER INFO: %v", nodes[i].addr, err)
			}
			fields := parseClusterInfo(info)
			for k, v := range want {
				if fields[k] != v {
					return fmt.Sprintf("%s: got %s:%s, want %s", nodes[i].addr, k, fields[k], v)
				}
			}
		}
		return ""
	})
}

// replicate makes every replica replicate its master with CLUSTER
// REPLICATE and waits until each replica's link to its master is up and
// every node's CLUSTER NODES shows every replica as a replica of its
// master and no node as failing, with cluster_state:ok everywhere.
func (tc *testCluster) replicate(ctx context.Context) error {
	nodes := tc.all()
	admins := map[*clusterProc]*redis.Client{}
	for _, p := range nodes {
		c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
		defer c.Close()
		admins[p] = c
	}
	ids := map[*clusterProc]string{}
	for _, p := range nodes {
		id, err := admins[p].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER MYID: %w", p.addr, err)
		}
		ids[p] = id
	}
	for i, rs := range tc.replicas {
		for _, r := range rs {
			if err := admins[r].ClusterReplicate(ctx, ids[tc.nodes[i]]).Err(); err != nil {
				return fmt.Errorf("%s: CLUSTER REPLICATE %s (%s): %w", r.addr, ids[tc.nodes[i]], tc.nodes[i].addr, err)
			}
		}
	}
	// wantMaster is the master id every node must show for each replica.
	wantMaster := map[string]string{}
	for i, rs := range tc.replicas {
		for _, r := range rs {
			wantMaster[ids[r]] = ids[tc.nodes[i]]
		}
	}
	return poll(ctx, func() string {
		for i, rs := range tc.replicas {
			for _, r := range rs {
				info, err := admins[r].Info(ctx, "replication").Result()
				if err != nil {
					return fmt.Sprintf("%s: INFO replication: %v", r.addr, err)
				}
				f := parseClusterInfo(info)
				if f["role"] != "slave" || f["master_port"] != strconv.Itoa(tc.nodes[i].port) || f["master_link_status"] != "up" {
					return fmt.Sprintf("%s: got role:%s master_port:%s master_link_status:%s, want slave of %s with the link up",
						r.addr, f["role"], f["master_port"], f["master_link_status"], tc.nodes[i].addr)
				}
			}
		}
		for _, p := range nodes {
			info, err := admins[p].ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Sprintf("%s: CLUSTER INFO: %v", p.addr, err)
			}
			if st := parseClusterInfo(info)["cluster_state"]; st != "ok" {
				return fmt.Sprintf("%s: got cluster_state:%s, want ok", p.addr, st)
			}
			text, err := admins[p].ClusterNodes(ctx).Result()
			if err != nil {
				return fmt.Sprintf("%s: CLUSTER NODES: %v", p.addr, err)
			}
			view := parseClusterNodes(text)
			if len(view) != len(nodes) {
				return fmt.Sprintf("%s: got %d nodes in CLUSTER NODES, want %d", p.addr, len(view), len(nodes))
			}
			for _, v := range view {
				if v.flags["fail"] || v.flags["fail?"] {
					return fmt.Sprintf("%s: node %s is flagged failing", p.addr, v.addr)
				}
				if m, ok := wantMaster[v.id]; ok && (!v.flags["slave"] || v.master != m) {
					return fmt.Sprintf("%s: node %s: got flags %v and master %q, want a replica of %s", p.addr, v.addr, v.flags, v.master, m)
				}
			}
		}
		return ""
	})
}

// poll calls check every 50 ms until it returns "" (done) or ctx ends; the
// error then carries check's last answer, which says what is pending.
func poll(ctx context.Context, check func() string) error {
	for {
		pending := check()
		if pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready before the deadline: %s", pending)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterNodeLine is one line of a CLUSTER NODES reply.
type clusterNodeLine struct {
	id     string
	addr   string          // host:port, without the bus port
	flags  map[string]bool // myself, master, slave, fail?, fail, ...
	master string          // the master's id for a replica, else "-"
}

// parseClusterNodes parses a CLUSTER NODES reply, skipping malformed lines.
func parseClusterNodes(text string) []clusterNodeLine {
	var nodes []clusterNodeLine
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		n := clusterNodeLine{id: f[0], addr: addr, flags: map[string]bool{}, master: f[3]}
		for _, fl := range strings.Split(f[2], ",") {
			n.flags[fl] = true
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// parseClusterInfo splits a CLUSTER INFO (or INFO) reply into its fields.
func parseClusterInfo(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// client returns a ClusterClient seeded with every master, with go-redis's
// default options (what a user most likely passes), closed when the test
// ends. It fails the test unless the client sees every master.
//
// With default options the client reloads the cluster's topology only on
// MOVED/ASK replies, when asked (ReloadState) and every 60 s
// (ClusterStateReloadInterval); see TestRedisClusterFailover for what that
// means after a failover.
func (tc *testCluster) client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	return tc.clientWith(t, redis.ClusterOptions{})
}

// clientWith is client with options opt, seeded with every master
// (opt.Addrs is replaced).
func (tc *testCluster) clientWith(t testing.TB, opt redis.ClusterOptions) *redis.ClusterClient {
	t.Helper()
	opt.Addrs = tc.addrs
	cc := redis.NewClusterClient(&opt)
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var seen []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("ping %s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		seen = append(seen, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("cluster client: %v", err)
	}
	if len(seen) != len(tc.addrs) {
		t.Fatalf("cluster client sees masters %v, want all of %v", seen, tc.addrs)
	}
	return cc
}

// clusterKeys returns the PTTL of every key under prefix on every master,
// by master address (masters without such keys are left out). Like
// scanTTLs, a key without a TTL shows as -1ms and keys that expire during
// the scan are left out.
func clusterKeys(ctx context.Context, cc *redis.ClusterClient, prefix string) (map[string]map[string]time.Duration, error) {
	var mu sync.Mutex
	byMaster := map[string]map[string]time.Duration{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		ttls, err := scanTTLs(ctx, c, prefix)
		if err != nil {
			return fmt.Errorf("master %s: %w", c.Options().Addr, err)
		}
		if len(ttls) > 0 {
			mu.Lock()
			byMaster[c.Options().Addr] = ttls
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return byMaster, nil
}

// clusterTTLs is clusterKeys merged over all masters: the KeyTTLs of a
// conformance harness on a cluster.
func clusterTTLs(ctx context.Context, cc *redis.ClusterClient, prefix string) (map[string]time.Duration, error) {
	byMaster, err := clusterKeys(ctx, cc, prefix)
	if err != nil {
		return nil, err
	}
	all := map[string]time.Duration{}
	for addr, ttls := range byMaster {
		for k, d := range ttls {
			if _, dup := all[k]; dup {
				return nil, fmt.Errorf("key %q found on two masters (the second: %s)", k, addr)
			}
			all[k] = d
		}
	}
	return all, nil
}
