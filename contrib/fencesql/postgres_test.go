package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

const (
	pgStartTimeout = 60 * time.Second // initdb and a first answer, on a loaded machine
	pgStopTimeout  = 30 * time.Second // for a fast shutdown, before SIGKILL
	pgInstallHint  = "install PostgreSQL (apt-get install -y postgresql; .ci/run does), or put initdb and postgres on PATH"
)

// pg is the package's one PostgreSQL server, started by the first test that asks for it
// and stopped by TestMain.
var pg struct {
	once sync.Once
	srv  *pgServer
	err  error // why there is none
	skip bool  // err says the binaries are missing: skip, unless CI=true
}

// TestMain stops the PostgreSQL server, if a test started it.
func TestMain(m *testing.M) {
	code := m.Run()
	if pg.srv != nil {
		if err := pg.srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "fencesql: stop postgres:", err)
		}
	}
	os.Exit(code)
}

// postgresDB returns a database of the package's PostgreSQL server, started at the first
// call. If initdb or postgres is not installed, it skips the test, or fails it under
// CI=true; if the server does not start, it fails the test.
func postgresDB(t *testing.T) *sql.DB {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.skip, pg.err = startPostgres() })
	switch {
	case pg.err != nil && pg.skip && os.Getenv("CI") == "true":
		t.Fatalf("PostgreSQL is required under CI=true: %v", pg.err)
	case pg.err != nil && pg.skip:
		t.Skipf("PostgreSQL tests skipped: %v", pg.err)
	case pg.err != nil:
		t.Fatalf("start PostgreSQL: %v", pg.err)
	}
	db, err := sql.Open("pgx", pg.srv.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// pgServer is a postgres process on 127.0.0.1, in a temporary directory of its own.
type pgServer struct {
	dir    string
	dsn    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been reaped
	log    string        // the server's log file
}

// pgBinaries finds initdb and postgres: on PATH, or else in the newest
// /usr/lib/postgresql/*/bin (Debian's packages put them there).
func pgBinaries() (initdb, postgres string, err error) {
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return initdb, postgres, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if isExec(i) && isExec(p) {
			return i, p, nil
		}
	}
	return "", "", fmt.Errorf("initdb and postgres are not on PATH nor in /usr/lib/postgresql/*/bin: %s", pgInstallHint)
}

// version is the major version in a path /usr/lib/postgresql/N/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// unprivileged returns the user to run PostgreSQL as when this process is root (initdb
// and postgres refuse root): "postgres" if it exists, else "nobody". It returns nil when
// this process is not root.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
		}
	}
	return nil, errors.New("running as root, and there is no user postgres or nobody to run PostgreSQL as")
}

// startPostgres runs initdb into a new temporary directory and starts postgres on a free
// 127.0.0.1 port, trying up to 5 ports, and waits until it answers. skip is true when the
// binaries are missing.
func startPostgres() (srv *pgServer, skip bool, err error) {
	initdb, postgres, err := pgBinaries()
	if err != nil {
		return nil, true, err
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, false, err
	}
	dir, err := os.MkdirTemp("", "fencesql-pg-")
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if cred != nil { // the directory is the server's user's
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, false, err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	cmd.Dir = dir
	cmd.SysProcAttr = childAttr(cred)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, false, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	deadline := time.Now().Add(pgStartTimeout)
	for attempt := 1; ; attempt++ {
		srv, err = launchPostgres(postgres, dir, data, cred, deadline)
		if err == nil || attempt == 5 || time.Now().After(deadline) {
			return srv, false, err
		}
	}
}

// launchPostgres starts postgres on a free port and waits until it answers, or exits (its
// port was taken, say), or the deadline passes.
func launchPostgres(bin, dir, data string, cred *syscall.Credential, deadline time.Time) (*pgServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &pgServer{dir: dir, exited: make(chan struct{}), log: filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port)),
		dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=40", "-c", "dynamic_shared_memory_type=mmap")
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = childAttr(cred)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	db, err := sql.Open("pgx", s.dsn)
	if err != nil {
		_ = s.stop()
		return nil, err
	}
	defer db.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres exited during startup: %v; log:\n%s", err, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.stop()
			return nil, fmt.Errorf("postgres did not answer within %v: %v; log:\n%s", pgStartTimeout, err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond) // polls the server's start; orders nothing
	}
}

// stop asks postgres for a fast shutdown (SIGINT), kills it by PID with SIGKILL if it has not
// exited within 30 s, and removes its directory.
func (s *pgServer) stop() error {
	defer os.RemoveAll(s.dir)
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
		return nil
	case <-time.After(pgStopTimeout):
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	return fmt.Errorf("postgres (pid %d) ignored a fast shutdown for %v: killed", s.cmd.Process.Pid, pgStopTimeout)
}

// logTail returns the end of the server's log.
func (s *pgServer) logTail() string {
	b, _ := os.ReadFile(s.log)
	const most = 2048
	if len(b) > most {
		b = b[len(b)-most:]
	}
	return strings.TrimSpace(string(b))
}
