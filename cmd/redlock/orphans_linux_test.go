package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOrphansReapedWhileCommandRuns: the orphans that redlock adopts as the command's
// subreaper are reaped as they exit, while the command still runs, whether they stayed in
// its process group or left it (setsid): none stays a zombie child of redlock, as none
// would under an init that reaps.
func TestOrphansReapedWhileCommandRuns(t *testing.T) {
	s := newSetup(t, 1)
	dir := t.TempDir()
	script := `(sh -c ': > "$1/in-group"' sh "$1" &)
(setsid sh -c ': > "$1/left-group"' sh "$1" &)
` + holdScript
	tl := startTool(t, nil, "", s.args("orphans", sh(script, dir)...)...)
	tl.awaitFile(t, filepath.Join(dir, "started"))
	tl.awaitFile(t, filepath.Join(dir, "in-group"))
	tl.awaitFile(t, filepath.Join(dir, "left-group"))
	var zombies []int
	tl.await(t, "reaping of the orphans redlock adopted", func() bool {
		zombies = zombieChildren(t, tl.cmd.Process.Pid)
		return len(zombies) == 0
	})
	touch(t, filepath.Join(dir, "release"))
	wantCode(t, tl.wait(t), tl.stderr.String(), 0)
	s.assertReleased(t, "orphans")
}

// zombieChildren returns the processes whose parent is pid and that have exited without
// being reaped, from /proc.
func zombieChildren(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var zombies []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil { // it exited and was reaped meanwhile
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid && fields[0] == "Z" {
			zombies = append(zombies, child)
		}
	}
	return zombies
}
