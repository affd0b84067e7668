package simlua

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Engine runs EVAL and EVALSHA for one miniredis process, on Lua states that it keeps in a
// pool (see the package's documentation), and makes the checks its Options ask for at each
// of a script's redis.call and redis.pcall. Make it with New; its methods are safe for
// concurrent use, but for Running (see there).
type Engine struct {
	m      *miniredis.Miniredis
	srv    *server.Server
	opts   Options
	nested any // a nested connection context of m's (see New)

	vms sync.Pool // of *vm: the process's Lua states, each running one script at a time

	mu      sync.Mutex
	sources map[string]*compiled // by SHA-1: the scripts this process was given by EVAL

	running string // the SHA-1 of the script running; guarded by m's lock (see Running)
	info    struct {
		text  string     // the last INFO that Options.Info answered
		value lua.LValue // the same as a Lua string
	} // guarded by m's lock
}

// Options say what an Engine checks, and how a script's INFO is answered. The zero value
// checks nothing and dispatches INFO to the server.
type Options struct {
	// Checks, if non-nil, returns the checks to make of a script, read as each EVAL and
	// EVALSHA begins. Nil: none.
	Checks func() Checks
	// Info, if non-nil, answers a script's INFO (of any section) without dispatching it:
	// it returns the reply's text, or false to dispatch the command to the server after
	// all. It is called under the process's lock, so it must not call the server.
	Info func() (string, bool)
	// LastSave, if non-nil, answers a script's LASTSAVE without dispatching it (miniredis
	// has no LASTSAVE): the Unix time in seconds of the process's last save, or false to
	// dispatch the command after all. It is called under the process's lock.
	LastSave func() (int64, bool)
	// Refused, if non-nil, is called each time a check refuses a script's command, with
	// the script's SHA-1 and the error it was refused with (see Checks), under the
	// process's lock, so it must not call the server.
	Refused func(sha, msg string)
}

// Checks are the checks an Engine makes of a script's commands, before it dispatches each
// one. While either is on, a command outside the table of commands.go is refused (so that
// neither a key nor a write slips past unchecked), EVAL_RO and EVALSHA_RO sent by a client
// are refused (miniredis would run them unchecked), and EVALSHA of a script the engine was
// not given (by EVAL or SCRIPT LOAD) answers NOSCRIPT, so that the client sends EVAL.
type Checks struct {
	// StrictKeys refuses a command that names a key the script was not given in KEYS. A
	// refused redis.call raises a Lua error that ends the script, whose error reply holds
	// "ERR script tried accessing undeclared key: <key> (<COMMAND>)"; a refused
	// redis.pcall returns that message as an error table ({err = ...}).
	StrictKeys bool
	// Writes, if non-nil, is the record on which the engine notes the keys that each of
	// a script's commands writes (see Record).
	Writes *Record
}

// On reports whether c checks anything.
func (c Checks) On() bool { return c.StrictKeys || c.Writes != nil }

// ErrNoNestedContext is New's error when miniredis did not give the engine the nested
// connection context it needs: a version of miniredis that dispatches a script's commands
// otherwise.
var ErrNoNestedContext = errors.New("simlua: miniredis gave no nested context to borrow")

// New returns the engine of the process m, making its checks as o says. m must have been
// dialled once (so that m.Server is its server), and New must be called before the
// process's pre-hook is set, which it uses meanwhile; the caller then calls Hook from its
// pre-hook. It returns ErrNoNestedContext if it cannot run scripts on m.
//
// A script's commands are dispatched with a connection context marked nested, as
// miniredis's are, so that they run under the process's lock without taking it:
// miniredis's context type is unexported, so New borrows one that miniredis made for a
// script of its own (which it runs once, here).
func New(m *miniredis.Miniredis, o Options) (*Engine, error) {
	srv := m.Server()
	e := &Engine{m: m, srv: srv, opts: o, sources: map[string]*compiled{}}
	e.vms.New = func() any { return e.newVM() }
	srv.SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if cmd == "ECHO" && len(args) == 1 && args[0] == captureMark {
			e.nested = p.Ctx
		}
		return false
	})
	var out bytes.Buffer
	srv.Dispatch(server.NewPeer(bufio.NewWriter(&out)), []string{"EVAL", "return redis.call('ECHO', ARGV[1])", "0", captureMark})
	srv.SetPreHook(nil)
	if e.nested == nil {
		return nil, ErrNoNestedContext
	}
	return e, nil
}

// captureMark is what New's script echoes, to be told from any other ECHO.
const captureMark = "simlua: capture a nested context"

// Nested reports whether p is the peer of a command that a script running on the engine
// sent (redis.call, redis.pcall), rather than a client's.
func (e *Engine) Nested(p *server.Peer) bool { return p.Ctx == e.nested }

// Running returns the SHA-1 of the script whose command p carries, for a pre-hook that
// looks at a script's commands, and false if p is a client's (see Nested). It must be
// called only from the process's pre-hook, for the command the pre-hook was called with: a
// script runs under the process's lock, one at a time, and its commands are dispatched in
// the goroutine that runs it, which keeps the script's SHA-1 under that lock.
func (e *Engine) Running(p *server.Peer) (string, bool) {
	if !e.Nested(p) {
		return "", false
	}
	return e.running, true
}

// Hook runs a client's EVAL and EVALSHA (cmd, in upper case, and args, as a pre-hook gets
// them) and reports whether it did, or refused the command: then it has written the
// reply to p. It leaves to miniredis the commands that scripts send, EVALSHA of a script
// it was not given (which, while scripts are checked, it answers NOSCRIPT itself), and
// calls with bad arguments or a script that does not compile, whose errors miniredis
// writes. It follows SCRIPT LOAD and SCRIPT FLUSH, which it leaves to miniredis too.
// While scripts are checked (see Checks), it refuses EVAL_RO and EVALSHA_RO.
func (e *Engine) Hook(p *server.Peer, cmd string, args []string) bool {
	if p.Ctx == e.nested {
		return false
	}
	switch cmd {
	case "EVAL", "EVALSHA":
	case "EVAL_RO", "EVALSHA_RO":
		if e.checks().On() {
			p.WriteError("ERR simlua: " + cmd + " cannot run while scripts are checked (strict keys, or a record of writes)")
			return true
		}
		return false
	case "SCRIPT":
		e.script(args)
		return false
	default:
		return false
	}
	checks := e.checks()
	c, keys, argv, ok := e.lookup(cmd, args)
	if c == nil {
		if ok && checks.On() {
			// miniredis may hold it (given by EVAL before the checks began) and would run
			// it unchecked: the client gives it again by EVAL.
			p.WriteError("NOSCRIPT No matching script. Please use EVAL.")
			return true
		}
		return false
	}
	v := e.vms.Get().(*vm)
	defer e.vms.Put(v)
	e.m.Lock()
	defer e.m.Unlock()
	e.running = c.sha
	defer func() { e.running = "" }()
	v.run(e, p, c, keys, argv, checks)
	return true
}

// checks returns the checks that Options.Checks asks for now.
func (e *Engine) checks() Checks {
	if e.opts.Checks == nil {
		return Checks{}
	}
	return e.opts.Checks()
}

// lookup returns the script that EVAL or EVALSHA (cmd) with args runs, and its KEYS and
// ARGV, or a nil script: with ok, EVALSHA of a script the engine was not given; without,
// arguments it leaves to miniredis (bad ones, a script that does not compile).
func (e *Engine) lookup(cmd string, args []string) (c *compiled, keys, argv []string, ok bool) {
	if len(args) < 2 {
		return nil, nil, nil, false
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > len(args)-2 {
		return nil, nil, nil, false
	}
	if cmd == "EVAL" {
		if c, err = compile(args[0]); err != nil {
			return nil, nil, nil, false
		}
		e.mu.Lock()
		e.sources[c.sha] = c
		e.mu.Unlock()
	} else {
		sha := args[0]
		if !isLowerHex(sha) {
			sha = strings.ToLower(sha)
		}
		e.mu.Lock()
		c = e.sources[sha]
		e.mu.Unlock()
		if c == nil {
			return nil, nil, nil, true
		}
	}
	return c, args[2 : 2+n], args[2+n:], true
}

// infoValue returns Options.Info's reply as a Lua string, and false if there is none.
// Called under the process's lock.
func (e *Engine) infoValue() (lua.LValue, bool) {
	if e.opts.Info == nil {
		return nil, false
	}
	text, ok := e.opts.Info()
	if !ok {
		return nil, false
	}
	if e.info.value == nil || e.info.text != text {
		e.info.text, e.info.value = text, lua.LString(text)
	}
	return e.info.value, true
}

// compiled is a script compiled, with its SHA-1 (40 lowercase hex digits).
type compiled struct {
	sha   string
	proto *lua.FunctionProto
}

// scripts is the cache of compiled scripts, shared by every process: a compiled script is
// only read when it runs, and what a process was given (which a restart forgets) is its
// engine's sources.
var scripts struct {
	sync.Mutex
	bySrc map[string]*compiled
}

// maxCached is the most scripts that the cache of compiled scripts keeps.
const maxCached = 1024

// script follows SCRIPT FLUSH, which makes the engine forget its scripts, and SCRIPT LOAD,
// which gives it the script (if it compiles), as they reach miniredis, which does the same
// and replies.
func (e *Engine) script(args []string) {
	switch {
	case len(args) > 0 && strings.EqualFold(args[0], "FLUSH"):
		e.mu.Lock()
		clear(e.sources)
		e.mu.Unlock()
	case len(args) == 2 && strings.EqualFold(args[0], "LOAD"):
		if c, err := compile(args[1]); err == nil {
			e.mu.Lock()
			e.sources[c.sha] = c
			e.mu.Unlock()
		}
	}
}

// isLowerHex reports whether s has no upper-case letters, as a SHA-1 that needs no
// strings.ToLower.
func isLowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// compile returns the script src compiled, compiling it the first time.
func compile(src string) (*compiled, error) {
	scripts.Lock()
	c, ok := scripts.bySrc[src]
	scripts.Unlock()
	if ok {
		return c, nil
	}
	chunk, err := parse.Parse(strings.NewReader(src), "<string>")
	if err != nil {
		return nil, err
	}
	proto, err := lua.Compile(chunk, "")
	if err != nil {
		return nil, err
	}
	// The chunk is a vararg function that cannot name the table arg of Lua 5.0's
	// varargs (only a nested function declared with ... can): gopher-lua would make that
	// table, which nothing reads, at each call.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	sum := sha1.Sum([]byte(src))
	c = &compiled{sha: hex.EncodeToString(sum[:]), proto: proto}
	scripts.Lock()
	if scripts.bySrc == nil {
		scripts.bySrc = map[string]*compiled{}
	}
	if old, ok := scripts.bySrc[src]; ok {
		c = old // compiled meanwhile by another call
	} else if len(scripts.bySrc) < maxCached {
		scripts.bySrc[src] = c
	}
	scripts.Unlock()
	return c, nil
}
