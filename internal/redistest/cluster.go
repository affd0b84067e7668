package redistest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterReadyTimeout bounds the wait for a new cluster to agree that it is whole. A
	// node reports cluster_state:ok no sooner than 2 s after it starts (Redis's
	// CLUSTER_WRITABLE_DELAY), so a cluster takes a little over 2 s to start.
	clusterReadyTimeout = 10 * time.Second
	// movedHops bounds how many MOVED redirections Cluster.Do follows.
	movedHops = 3
)

// Cluster is a Redis Cluster of masters only, each a redis-server process on 127.0.0.1,
// started by StartCluster. Its methods are safe for concurrent use.
type Cluster struct {
	servers []*Server
}

// StartCluster starts a Redis Cluster of the given number of masters (at least 1) and no
// replicas: redis-server processes started as Start starts them (no persistence, stopped by
// PID at cleanup, dying with the test process on Linux), each with --cluster-enabled yes,
// a nodes.conf in its own temporary directory and a cluster bus port of its own (extraArgs
// are appended). It joins them with CLUSTER MEET, gives master i the i-th of equal ranges
// of the 16384 hash slots, and returns once every node reports cluster_state:ok, knows every
// other, and serves the same slot map; it calls t.Fatalf if that takes more than 10 s. It
// takes a little over 2 s: a new node does not report cluster_state:ok sooner.
//
// It needs redis-server 7 or later (CLUSTER ADDSLOTSRANGE, --cluster-port): with an older
// one, or none on PATH, it calls t.Skip saying so.
func StartCluster(t testing.TB, masters int, extraArgs ...string) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: StartCluster(%d): want at least 1 master", masters)
	}
	if !Available() {
		t.Skip(missing())
	}
	if !version7() {
		t.Skip("redistest: StartCluster needs redis-server 7 or later (CLUSTER ADDSLOTSRANGE, --cluster-port), or valkey-server; " + Binary() + " is older")
	}
	c := &Cluster{servers: startN(t, masters, true, extraArgs)}
	if err := c.form(); err != nil {
		t.Fatalf("redistest: form a Redis Cluster of %d masters: %v", masters, err)
	}
	return c
}

// Addrs returns the masters' addresses, "127.0.0.1:PORT", in the order of their slot
// ranges: Addrs()[0] serves the lowest slots.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.servers))
	for i, s := range c.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Servers returns the masters, in the order of Addrs, to Kill, Pause or Restart them. A
// restarted master keeps its nodes.conf, and so its identity and slots, but no data.
func (c *Cluster) Servers() []*Server { return slices.Clone(c.servers) }

// Do sends one command to the cluster, as Server.Do sends it to one server: first to the
// first master, then, on a MOVED reply, to the master it names (at most 3 times). A command
// on keys therefore reaches the master that serves their slot.
func (c *Cluster) Do(args ...string) (any, error) {
	return DoCluster(c.servers[0].Addr(), doDefaultTimeout, args...)
}

// DoCluster sends one command to the Redis Cluster node at addr, as DoTimeout does, and
// follows MOVED redirections to the node that serves the command's keys (at most 3). Each
// hop gets timeout. It is for clusters this package did not start.
func DoCluster(addr string, timeout time.Duration, args ...string) (any, error) {
	for hop := 0; ; hop++ {
		reply, err := DoTimeout(addr, timeout, args...)
		target, moved := movedTo(err)
		if !moved || hop == movedHops {
			return reply, err
		}
		addr = target
	}
}

// movedTo returns the address of a MOVED error ("MOVED 3999 127.0.0.1:6381").
func movedTo(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	fields := strings.Fields(err.Error())
	if len(fields) != 3 || fields[0] != "MOVED" {
		return "", false
	}
	return fields[2], true
}

// form makes one cluster of c's servers and waits until every node agrees it is whole.
func (c *Cluster) form() error {
	n := len(c.servers)
	for i, s := range c.servers {
		// Distinct epochs, as redis-cli --cluster create sets them, spare the nodes a round
		// of collision resolution.
		if _, err := s.Do("CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", s.Addr(), err)
		}
		first, last := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if _, err := s.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", s.Addr(), first, last, err)
		}
	}
	// Every pair meets directly, rather than through gossip, which takes seconds.
	for i, a := range c.servers {
		for _, b := range c.servers[i+1:] {
			if _, err := a.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(b.port), strconv.Itoa(b.busPort)); err != nil {
				return fmt.Errorf("%s: CLUSTER MEET %s: %w", a.Addr(), b.Addr(), err)
			}
		}
	}
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		err := c.whole()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not whole after %v: %w", clusterReadyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// whole returns nil if every node reports cluster_state:ok, knows all n nodes, and serves
// the slot map form assigned; otherwise an error that says what is missing.
func (c *Cluster) whole() error {
	want := c.wantSlots()
	for _, s := range c.servers {
		info, err := s.doTimeout(time.Second, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", s.Addr(), err)
		}
		str, _ := info.(string)
		for _, field := range []string{"cluster_state:ok", "cluster_known_nodes:" + strconv.Itoa(len(c.servers)),
			"cluster_slots_ok:" + strconv.Itoa(clusterSlots)} {
			if !strings.Contains(str, field+"\r\n") {
				return fmt.Errorf("%s: CLUSTER INFO lacks %s:\n%s", s.Addr(), field, str)
			}
		}
		slots, err := s.doTimeout(time.Second, "CLUSTER", "SLOTS")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", s.Addr(), err)
		}
		if got, err := slotMap(slots); err != nil || got != want {
			return fmt.Errorf("%s: CLUSTER SLOTS = %q (%v), want %q", s.Addr(), got, err, want)
		}
	}
	return nil
}

// wantSlots renders the slot map form assigns, as slotMap renders CLUSTER SLOTS.
func (c *Cluster) wantSlots() string {
	var b strings.Builder
	n := len(c.servers)
	for i, s := range c.servers {
		fmt.Fprintf(&b, "%d-%d@%s ", i*clusterSlots/n, (i+1)*clusterSlots/n-1, s.Addr())
	}
	return b.String()
}

// slotMap renders a CLUSTER SLOTS reply as "first-last@ip:port ..." in slot order, with each
// range's master only.
func slotMap(reply any) (string, error) {
	ranges, ok := reply.([]any)
	if !ok {
		return "", fmt.Errorf("reply %#v is not an array", reply)
	}
	type slotRange struct {
		first, last int64
		master      string
	}
	parsed := make([]slotRange, 0, len(ranges))
	for _, r := range ranges {
		fields, _ := r.([]any)
		if len(fields) < 3 {
			return "", fmt.Errorf("slot range %#v", r)
		}
		first, ok1 := fields[0].(int64)
		last, ok2 := fields[1].(int64)
		master, _ := fields[2].([]any)
		if !ok1 || !ok2 || len(master) < 2 {
			return "", fmt.Errorf("slot range %#v", r)
		}
		ip, _ := master[0].(string)
		port, _ := master[1].(int64)
		parsed = append(parsed, slotRange{first, last, ip + ":" + strconv.FormatInt(port, 10)})
	}
	slices.SortFunc(parsed, func(a, b slotRange) int { return int(a.first - b.first) })
	var b strings.Builder
	for _, r := range parsed {
		fmt.Fprintf(&b, "%d-%d@%s ", r.first, r.last, r.master)
	}
	if len(parsed) == 0 {
		return "", errors.New("no slot is served")
	}
	return b.String(), nil
}
