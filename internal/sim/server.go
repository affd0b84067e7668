package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock/internal/simlua"
	"github.com/go-redlock/redlock/internal/simnet"
)

// errDown is what a dial to a crashed server returns: its process is gone.
var errDown = errors.New("sim: connection refused (server down)")

// clock is a server's clock as a function of the bubble's: it reads at+offset at the run's
// start and then runs rate times as fast.
type clock struct {
	start  time.Time // the bubble's time when the run began
	offset time.Duration
	rate   float64
}

// at returns the server's time when the bubble's is t.
func (c clock) at(t time.Time) time.Time {
	return c.start.Add(c.offset + time.Duration(float64(t.Sub(c.start))*c.rate))
}

// simServer is one Redis server: a miniredis that answers INFO server as redis-server does
// (uptime_in_seconds and run_id, read by the restart guard and the identity check), on a
// clock of its own, and that can crash (losing its data and closing its connections) and
// start again empty, with uptime 0 and a new run_id. Its scripts run on simlua's engine,
// under the checks of its scripting.
type simServer struct {
	name  string
	clock clock
	scripting

	mu      sync.Mutex
	rng     *rand.Rand           // the run_ids; guarded by mu
	m       *miniredis.Miniredis // nil while down
	started time.Time            // the server clock's time at the process's start
	runID   string
}

// scripting is what a run's servers share about the scripts they run: their names, the
// checks they are under, and where a script's violation is reported.
type scripting struct {
	scripts *scriptNames // names the scripts run here (see node.Eval)
	strict  bool         // a script's commands may name only its KEYS (unless Config.LooseKeys)
	writes  *simlua.Record
	// report records a violation: an extension's SET over another's token (see checkSet),
	// a command that the checks refused (see refused); nil: none is recorded
	report func(format string, args ...any)
}

// newServer returns a running server called name, up for an hour, whose scripts run under
// sc (sc.scripts and sc.writes must be set).
func newServer(name string, c clock, rng *rand.Rand, sc scripting) *simServer {
	s := &simServer{name: name, clock: c, rng: rng, scripting: sc}
	s.boot(time.Hour)
	return s
}

// boot starts a new, empty server process that reports it has been up for up. Called with
// s.mu held, or before s is shared.
func (s *simServer) boot(up time.Duration) {
	m := miniredis.NewMiniRedis()
	now := s.clock.at(time.Now())
	m.SetTime(now)
	m.ClockTTL(true)
	s.m, s.started = m, now.Add(-up)
	s.runID = fmt.Sprintf("%016x%016x%08x", s.rng.Uint64(), s.rng.Uint64(), s.rng.Uint32())
	id, started := s.runID, s.started
	if c, err := m.Dial(); err == nil { // the first Dial starts the server that Server returns
		_ = c.Close()
	}
	info := func() string {
		up := int64(s.clock.at(time.Now()).Sub(started) / time.Second)
		return fmt.Sprintf("# Server\r\nredis_version:7.4.0\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\n", id, up)
	}
	eng, err := simlua.New(m, simlua.Options{
		Checks: func() simlua.Checks { return simlua.Checks{StrictKeys: s.strict, Writes: s.writes} },
		Info:   func() (string, bool) { return info(), true },
		// As redis-server: the process counts as saved when it started, by its clock (it
		// never saves), so TIME - LASTSAVE is the uptime that INFO reports.
		LastSave: func() (int64, bool) { return started.Unix(), true },
		Refused:  s.refused,
	})
	if err != nil {
		panic(err) // the simulation cannot check its scripts: miniredis no longer runs them as simlua expects
	}
	m.Server().SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if eng.Hook(p, cmd, args) {
			return true
		}
		if cmd == "SET" {
			if sha, ok := eng.Running(p); ok {
				s.checkSet(m.Server(), p, s.scripts.name(sha), args)
			}
		}
		if cmd == "SPUBLISH" && len(args) == 2 { // a shard channel's subscribers only (see cluster.go)
			m.Server().Dispatch(p, []string{"PUBLISH", shardChannel(args[0]), args[1]})
			return true
		}
		if cmd != "INFO" {
			return false
		}
		p.WriteBulk(info())
		return true
	})
}

// refused reports a violation: the checks refused a command of the script sha, with msg.
func (s *simServer) refused(sha, msg string) {
	if s.report != nil {
		s.report("%s: the checks refused a command of script %s: %s", s.name, cmp.Or(s.scripts.name(sha), sha), msg)
	}
}

// uptime returns the server's uptime in the whole seconds that INFO reports, and false if
// it is down.
func (s *simServer) uptime() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return 0, false
	}
	return int64(s.clock.at(time.Now()).Sub(s.started) / time.Second), true
}

// dial returns a new connection to the server (see simnet.Pipe), or errDown.
func (s *simServer) dial() (net.Conn, error) {
	s.mu.Lock()
	m := s.m
	s.mu.Unlock()
	if m == nil {
		return nil, errDown
	}
	client, server := simnet.Pipe()
	m.Server().ServeConn(server)
	return client, nil
}

// sync sets the server's clock to its time now and returns the server, or nil if it is
// down. Every command is sent right after it: the bubble's clock does not move while a
// goroutine is running, so the command runs at that time.
func (s *simServer) sync() *miniredis.Miniredis {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m != nil {
		s.m.SetTime(s.clock.at(time.Now()))
	}
	return s.m
}

// crash stops the server: its connections close and its data is lost.
func (s *simServer) crash() {
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.mu.Unlock()
	if m != nil {
		m.Close()
	}
}

// restart starts the server again, empty.
func (s *simServer) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.boot(0)
	}
}

// keyTTL is a key and its TTL (0: none).
type keyTTL struct {
	key string
	ttl time.Duration
}

// keys returns the server's keys in order, with their TTLs; none if it is down.
func (s *simServer) keys() []keyTTL {
	m := s.sync()
	if m == nil {
		return nil
	}
	var out []keyTTL
	for _, k := range m.Keys() {
		out = append(out, keyTTL{k, m.TTL(k)})
	}
	return out
}
