package redistest

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartCluster: three masters form one cluster that every node reports whole, with the
// slots split in Addrs order; a key is served by the master of its slot only (the others
// answer MOVED), and Cluster.Do follows MOVED to it; the processes are gone after cleanup.
func TestStartCluster(t *testing.T) {
	var pids []int
	t.Run("sub", func(t *testing.T) {
		start := time.Now()
		c := StartCluster(t, 3)
		t.Logf("a 3-master cluster started in %v", time.Since(start).Round(time.Millisecond))
		addrs := c.Addrs()
		if len(addrs) != 3 || len(c.Servers()) != 3 {
			t.Fatalf("Addrs() = %v, %d Servers(), want 3 of each", addrs, len(c.Servers()))
		}
		for i, s := range c.Servers() {
			if s.Addr() != addrs[i] {
				t.Fatalf("Servers()[%d].Addr() = %s, Addrs()[%d] = %s", i, s.Addr(), i, addrs[i])
			}
			info, err := s.Do("CLUSTER", "INFO")
			if str, _ := info.(string); err != nil || !strings.Contains(str, "cluster_state:ok\r\n") ||
				!strings.Contains(str, "cluster_known_nodes:3\r\n") || !strings.Contains(str, "cluster_size:3\r\n") {
				t.Fatalf("%s: CLUSTER INFO = %q, %v", s.Addr(), str, err)
			}
			pids = append(pids, s.pid())
		}
		// One key per master: "{a}" is in slot 15495, "{b}" in 3300, "{c}" in 7365.
		for _, key := range []string{"{b}", "{c}", "{a}"} {
			slot := KeySlot(key)
			owner := slot * 3 / clusterSlots
			for i, s := range c.Servers() {
				_, err := s.Do("SET", key, "v")
				if i == owner && err != nil {
					t.Errorf("SET %s (slot %d) on its master %s: %v", key, slot, s.Addr(), err)
				}
				if want := "MOVED " + strconv.Itoa(slot) + " " + addrs[owner]; i != owner && (err == nil || err.Error() != want) {
					t.Errorf("SET %s (slot %d) on %s, which does not serve it: %v, want %q", key, slot, s.Addr(), err, want)
				}
			}
			if got, err := c.Do("GET", key); err != nil || got != "v" {
				t.Errorf("Cluster.Do(GET %s) = %v, %v; want v", key, got, err)
			}
		}
		if _, err := c.Do("MSET", "{a}", "1", "{b}", "2"); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Errorf("MSET across slots: %v, want CROSSSLOT", err)
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("cluster node %d still exists after cleanup (kill -0: %v)", pid, err)
		}
	}
}

// TestKeySlot: KeySlot agrees with the server's CLUSTER KEYSLOT, hash tags included.
func TestKeySlot(t *testing.T) {
	s := StartCluster(t, 1).Servers()[0]
	for _, key := range []string{
		"", "a", "123456789", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}",
		"}x", "{", "}{", "a{b}c", "{}", "}", "{}}", "redlock:{}x}", "ünïcødé 锁", "\x00\xff{\x01}",
	} {
		want, err := s.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
		}
		if got := KeySlot(key); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
	if got := KeySlot("123456789"); got != 0x31C3%clusterSlots {
		t.Errorf("KeySlot(123456789) = %d: CRC16/XMODEM of it is 0x31C3", got)
	}
}

// TestHashTag: the part of a key that the slot comes from.
func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"plain": "plain", "a{b}c": "b", "{}x": "{}x", "}{x}": "x", "{{x}}": "{x", "x{": "x{", "{a}{b}": "a",
	} {
		if got := HashTag(key); got != want {
			t.Errorf("HashTag(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestStartClusterRefusesNoMasters: a cluster needs a master.
func TestStartClusterRefusesNoMasters(t *testing.T) {
	r := &fatalRecorder{T: t}
	func() {
		defer func() { _ = recover() }() // the recorder's Fatalf returns; whatever follows may panic
		StartCluster(r, 0)
	}()
	if !strings.Contains(r.msg, "at least 1 master") {
		t.Fatalf("StartCluster(0): Fatalf message %q", r.msg)
	}
}
