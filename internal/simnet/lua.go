package simnet

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	luajson "github.com/alicebob/miniredis/v2/gopher-json"
	"github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// A script engine for EVAL and EVALSHA that reuses its Lua states (see SetPooledScripts).
// miniredis makes a Lua state for each script call, opening its libraries each time, which
// costs most of a lock's round trip here. This engine runs the same scripts, each compiled
// once for all the servers, on states made once and kept in a pool, the process's own (a
// restart starts them afresh, and forgets the scripts it was given, as Redis forgets its
// script cache), and otherwise behaves as miniredis's
// (cmd_scripting.go and lua.go of miniredis v2.40.0, MIT licence, from which it is
// adapted): the same libraries, redis.call and redis.pcall dispatched to the
// server's own commands, the same conversions of replies both ways, globals refused.
//
// A script runs under the process's lock (Miniredis embeds its sync.Mutex), as miniredis
// runs one, so no other command interleaves. Its redis.call commands are dispatched with
// a connection context marked nested, as miniredis's are, so that they run under that lock
// without taking it: miniredis's context type is unexported, so the engine borrows one
// that miniredis made for a script of its own when the process started (see capture).
//
// What it does not do as miniredis does, none of which the library's scripts or its
// backends use: it runs EVAL and EVALSHA before miniredis's own checks, so a transaction
// (MULTI) does not queue them, and neither authentication nor pub/sub mode refuses them;
// every script runs with database 0 selected; a script that calls EVAL of a script
// miniredis runs (one that EVAL gave it while the engine was off) deadlocks instead of
// being refused; EVAL does not enter a script in miniredis's script table (SCRIPT EXISTS
// says 0 for it); and a global a script sets with rawset, or a change to a library table,
// stays on the reused Lua state for later scripts. SCRIPT LOAD gives a script to both.
//
// The engine also makes the checks of SetStrictKeys and RecordWriters (keys.go,
// writers.go), at each redis.call and redis.pcall, before the command is dispatched.

// scriptEngine is the pooled engine of one server process.
type scriptEngine struct {
	m      *miniredis.Miniredis
	srv    *server.Server
	info   *infoReply // the process's INFO, which redis.call reads without a dispatch
	nested any        // a nested connection context of m's (see capture); nil: the engine is off

	vms sync.Pool // of *vm: the process's Lua states, each running one script at a time

	mu      sync.Mutex
	sources map[string]*compiled // by SHA-1: the scripts this process was given by EVAL
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

// captureMark is what capture's script echoes, to be told from any other ECHO.
const captureMark = "simnet: capture a nested context"

// newScriptEngine returns the engine of the process m, whose server is srv and whose INFO
// reply is info, or nil if it could not borrow a nested context (it then leaves every
// script to miniredis). It must be called before the process's pre-hook is set, which it
// uses meanwhile.
func newScriptEngine(m *miniredis.Miniredis, srv *server.Server, info *infoReply) *scriptEngine {
	e := &scriptEngine{m: m, srv: srv, info: info, sources: map[string]*compiled{}}
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
		return nil
	}
	return e
}

// hook runs EVAL and EVALSHA for the peer p, and reports whether it did: it leaves to
// miniredis the calls from scripts, EVALSHA of a script it was not given (which, while
// scripts are checked, it answers NOSCRIPT itself), and calls with bad arguments or a
// script that does not compile, whose errors miniredis writes.
func (e *scriptEngine) hook(p *server.Peer, cmd string, args []string) bool {
	if e == nil || p.Ctx == e.nested {
		return false
	}
	switch cmd {
	case "EVAL", "EVALSHA":
	case "SCRIPT":
		e.script(args)
		return false
	default:
		return false
	}
	if len(args) < 2 {
		return false
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > len(args)-2 {
		return false
	}
	var c *compiled
	if cmd == "EVAL" {
		if c, err = compile(args[0]); err != nil {
			return false
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
		if c == nil && e.info.s.checked() {
			// miniredis may hold it (given by EVAL before the checks began) and would run
			// it unchecked: the client gives it again by EVAL.
			p.WriteError("NOSCRIPT No matching script. Please use EVAL.")
			return true
		}
		if c == nil {
			return false
		}
	}
	v := e.vms.Get().(*vm)
	defer e.vms.Put(v)
	e.m.Lock()
	defer e.m.Unlock()
	v.run(e, p, c.sha, c.proto, args[2:2+n], args[2+n:])
	return true
}

// script follows SCRIPT FLUSH, which makes the engine forget its scripts, and SCRIPT LOAD,
// which gives it the script (if it compiles), as they reach miniredis, which does the same
// and replies.
func (e *scriptEngine) script(args []string) {
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

// vm is a Lua state with miniredis's libraries, its redis module, and globals refused,
// ready to run a script; cur is the call it runs, for the redis module's functions.
type vm struct {
	l   *lua.LState
	cur struct {
		e      *scriptEngine
		p      *server.Peer
		sha    string
		keys   []string     // the call's KEYS
		strict bool         // its commands' keys are checked against keys (see SetStrictKeys)
		rec    *writeRecord // the record of its writes (see RecordWriters); nil: none kept
	}
	// For redis.call: a command's arguments, and the nested peer that the command
	// replies to, into out; reused from call to call.
	args []string
	peer *server.Peer
	out  bytes.Buffer

	elems []lua.LValue // the elements of the tables that reply writes

	calls map[*lua.FunctionProto]*lastCall // by script: what run keeps from its last call
}

// lastCall is what run keeps of a script's last call on a vm, to reuse in the next: the
// script's function, and its KEYS and ARGV as Lua values. A string made a Lua value is
// allocated, and most arguments (the keys, a TTL) are those of the call before.
type lastCall struct {
	fn         *lua.LFunction
	keys, args []lua.LValue
}

// luaStrings returns strs as Lua strings, in last (reused), taking each from last where it
// holds that string already.
func luaStrings(last []lua.LValue, strs []string) []lua.LValue {
	last = last[:min(len(last), len(strs))]
	for i, s := range strs {
		if i < len(last) {
			if old, ok := last[i].(lua.LString); ok && string(old) == s {
				continue
			}
			last[i] = lua.LString(s)
		} else {
			last = append(last, lua.LString(s))
		}
	}
	return last
}

// newVM returns a new Lua state for e's scripts.
func (e *scriptEngine) newVM() *vm {
	v := &vm{l: lua.NewState(lua.Options{SkipOpenLibs: true}), calls: map[*lua.FunctionProto]*lastCall{}}
	v.peer = server.NewPeer(bufio.NewWriter(&v.out))
	v.peer.Ctx = e.nested
	l := v.l
	for _, lib := range []struct {
		n string
		f lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.CoroutineLibName, lua.OpenCoroutine},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
		{lua.DebugLibName, lua.OpenDebug},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.f), NRet: 0, Protect: true}, lua.LString(lib.n)); err != nil {
			panic(err)
		}
	}
	luajson.Preload(l)
	if err := l.CallByParam(lua.P{Fn: l.GetGlobal("require"), NRet: 1, Protect: true}, lua.LString("json")); err != nil {
		panic(err)
	}
	l.SetGlobal("cjson", l.Get(-1))
	l.Pop(1)
	l.SetGlobal("KEYS", l.NewTable())
	l.SetGlobal("ARGV", l.NewTable())
	mod := l.CreateTable(0, 16)
	for name, f := range v.funcs() {
		mod.RawSetString(name, l.NewFunction(f))
	}
	for k, c := range map[string]lua.LValue{"LOG_DEBUG": lua.LNumber(0), "LOG_VERBOSE": lua.LNumber(1), "LOG_NOTICE": lua.LNumber(2), "LOG_WARNING": lua.LNumber(3)} {
		mod.RawSetString(k, c)
	}
	l.SetGlobal("redis", mod)
	l.SetGlobal("server", mod)
	l.RegisterModule("os", map[string]lua.LGFunction{"clock": func(l *lua.LState) int { l.Push(lua.LNumber(42)); return 1 }})
	strs := l.GetGlobal("string").(*lua.LTable)
	strs.RawSetString("match", l.NewFunction(fastMatch(strs.RawGetString("match").(*lua.LFunction))))
	c, err := compile(protectGlobals) // as miniredis compiles it: its errors name no chunk
	if err != nil {
		panic(err)
	}
	l.Push(l.NewFunctionFromProto(c.proto))
	if err := l.PCall(0, 0, nil); err != nil {
		panic(err)
	}
	l.SetTop(0)
	return v
}

// protectGlobals refuses new globals, as miniredis's and Redis's script states do.
const protectGlobals = `
local dbg=debug
local mt = {}
setmetatable(_G, mt)
mt.__newindex = function (t, n, v)
  if dbg.getinfo(2) then
    local w = dbg.getinfo(2, "S").what
    if w ~= "C" then
      error("Script attempted to create global variable '"..tostring(n).."'", 2)
    end
  end
  rawset(t, n, v)
end
mt.__index = function (t, n)
  if dbg.getinfo(2) and dbg.getinfo(2, "S").what ~= "C" then
    error("Script attempted to access nonexistent global variable '"..tostring(n).."'", 2)
  end
  return rawget(t, n)
end
debug = nil
`

// run runs the script proto (whose SHA-1 is sha) with keys and args for the peer p, and
// writes its reply to p. e.m's lock is held.
func (v *vm) run(e *scriptEngine, p *server.Peer, sha string, proto *lua.FunctionProto, keys, args []string) {
	l := v.l
	v.cur.e, v.cur.p, v.cur.sha, v.cur.keys = e, p, sha, keys
	v.cur.strict, v.cur.rec = e.info.s.strict.Load(), e.info.s.writers.Load()
	defer func() { v.cur.e, v.cur.p, v.cur.keys, v.cur.rec = nil, nil, nil, nil }()
	globals := l.Get(lua.GlobalsIndex).(*lua.LTable)
	last := v.calls[proto]
	if last == nil {
		if len(v.calls) >= maxCached { // scripts past the cache's room are compiled anew
			clear(v.calls)
		}
		last = &lastCall{fn: l.NewFunctionFromProto(proto)}
		v.calls[proto] = last
	}
	last.fn.Env = l.Env // as a new function's, whatever a setfenv of the last call did
	last.keys, last.args = luaStrings(last.keys, keys), luaStrings(last.args, args)
	kt := l.CreateTable(len(keys), 0)
	for i, k := range last.keys {
		kt.RawSetInt(i+1, k)
	}
	at := l.CreateTable(len(args), 0)
	for i, a := range last.args {
		at.RawSetInt(i+1, a)
	}
	globals.RawSetString("KEYS", kt)
	globals.RawSetString("ARGV", at)
	l.SetTop(0)
	resp3 := p.Resp3
	l.Push(last.fn)
	if err := l.PCall(0, lua.MultRet, nil); err != nil {
		l.SetTop(0)
		p.WriteError(errLuaParse(err))
		return
	}
	v.reply(p, l.Get(1))
	l.SetTop(0)
	p.Resp3 = resp3
	p.SwitchResp3 = nil
}

// errLuaParse formats a script's error as miniredis does.
func errLuaParse(err error) string {
	return fmt.Sprintf("ERR Error compiling script (new function): %s", err.Error())
}

// funcs returns the redis module's functions, as miniredis's mkLua makes them.
func (v *vm) funcs() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"call":  func(l *lua.LState) int { return v.call(l, true) },
		"pcall": func(l *lua.LState) int { return v.call(l, false) },
		"error_reply": func(l *lua.LState) int {
			msg, ok := l.Get(1).(lua.LString)
			if !ok {
				l.Error(lua.LString("wrong number or type of arguments"), 1)
				return 0
			}
			parts := strings.SplitN(msg.String(), " ", 2)
			if parts[0] != "" && parts[0][0] == '-' {
				parts[0] = parts[0][1:]
			}
			final := "ERR " + parts[0]
			if len(parts) == 2 {
				final = parts[0] + " " + parts[1]
			}
			l.Push(field(l, "err", final))
			return 1
		},
		"log": func(l *lua.LState) int {
			l.CheckInt(1)
			l.CheckString(2)
			return 0
		},
		"status_reply": func(l *lua.LState) int {
			msg, ok := l.Get(1).(lua.LString)
			if !ok {
				l.Error(lua.LString("wrong number or type of arguments"), 1)
				return 0
			}
			l.Push(field(l, "ok", string(msg)))
			return 1
		},
		"sha1hex": func(l *lua.LState) int {
			if l.GetTop() != 1 {
				l.Error(lua.LString("wrong number of arguments"), 1)
				return 0
			}
			sum := sha1.Sum([]byte(lua.LVAsString(l.Get(1))))
			l.Push(lua.LString(hex.EncodeToString(sum[:])))
			return 1
		},
		"replicate_commands": func(l *lua.LState) int {
			l.Push(lua.LTrue)
			return 1
		},
		"set_repl": func(l *lua.LState) int {
			if l.GetTop() != 1 {
				l.Error(lua.LString("wrong number of arguments"), 1)
				return 0
			}
			return 1
		},
		"setresp": func(l *lua.LState) int {
			var resp3 bool
			switch l.CheckInt(1) {
			case 2:
			case 3:
				resp3 = true
			default:
				l.Error(lua.LString("RESP version must be 2 or 3"), 1)
				return 0
			}
			v.cur.p.SwitchResp3 = &resp3
			return 0
		},
	}
}

// call is redis.call (failFast) or redis.pcall: it runs a command on the server, nested,
// and pushes its reply.
func (v *vm) call(l *lua.LState, failFast bool) int {
	sha := v.cur.sha
	top := l.GetTop()
	if top == 0 {
		l.Error(lua.LString(fmt.Sprintf("Please specify at least one argument for this redis lib call script: %s, &c.", sha)), 1)
		return 0
	}
	args := v.args[:0]
	for i := 1; i <= top; i++ {
		switch a := l.Get(i).(type) {
		case lua.LNumber:
			args = append(args, a.String())
		case lua.LString:
			args = append(args, string(a))
		default:
			l.Error(lua.LString(fmt.Sprintf("Lua redis lib command arguments must be strings or integers script: %s, &c.", sha)), 1)
			return 0
		}
	}
	v.args = args[:0]
	if v.cur.strict || v.cur.rec != nil {
		if msg := checkCall(v.cur.strict, v.cur.rec, sha, v.cur.keys, args); msg != "" {
			clear(args)
			return fail(l, failFast, msg)
		}
	}
	if e := v.cur.e; strings.EqualFold(args[0], "INFO") && e.info.s.info() {
		// As the process's pre-hook answers it, without the dispatch, the reply's
		// encoding and its reading back.
		clear(args)
		l.Push(e.info.get().value)
		return 1
	}
	v.out.Reset()
	v.peer.Resp3, v.peer.SwitchResp3 = false, nil // as a new peer's
	v.cur.e.srv.Dispatch(v.peer, args)
	v.peer.Flush()
	clear(args) // keep no argument past the call
	res, _, err := readReply(l, v.out.Bytes(), true)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "ERR unknown command") {
			msg = "ERR Unknown Redis command called from script"
			if failFast {
				msg = fmt.Sprintf("Unknown Redis command called from script script: %s, &c.", sha)
			}
		}
		return fail(l, failFast, msg)
	}
	l.Push(res)
	return 1
}

// fail ends a redis.call (failFast) with the error msg, raised, or a redis.pcall with msg
// pushed as an error table, and returns what the call returns.
func fail(l *lua.LState, failFast bool, msg string) int {
	if failFast {
		l.Error(lua.LString(msg), 1)
		return 0
	}
	l.Push(field(l, "err", msg))
	return 1
}

// field returns a table whose only field is k, set to v: a status reply ("ok") or an error
// reply ("err"). The table is made for one field (a table made empty makes room for 32).
func field(l *lua.LState, k, v string) *lua.LTable {
	t := l.CreateTable(0, 1)
	t.RawSetString(k, lua.LString(v))
	return t
}

// reply writes value, a script's result, to c as Redis converts it: nil and false are a nil
// reply, true is 1, a number an integer, a string a bulk string, a table with an err or ok
// field an error or status reply, and any other table an array of its elements 1, 2, ...
// up to the first nil.
func (v *vm) reply(c *server.Peer, value lua.LValue) {
	l := v.l
	switch t := value.(type) {
	case nil, *lua.LNilType:
		c.WriteNull()
	case lua.LBool:
		if t {
			c.WriteInt(1)
		} else {
			c.WriteNull()
		}
	case lua.LNumber:
		c.WriteInt(int(t))
	case lua.LString:
		c.WriteBulk(string(t))
	case *lua.LTable:
		if s := t.RawGetString("err"); s.Type() != lua.LTNil {
			c.WriteError(s.String())
			return
		}
		if s := t.RawGetString("ok"); s.Type() != lua.LTNil {
			c.WriteInline(s.String())
			return
		}
		// The elements go on v.elems, above those of the tables that hold this one.
		base := len(v.elems)
		raw := l.GetMetatable(t) == lua.LNil // no __index: no need for GetTable
		for j := 1; ; j++ {
			var e lua.LValue
			if raw {
				e = t.RawGetInt(j)
			} else {
				e = l.GetTable(t, lua.LNumber(j))
			}
			if e.Type() == lua.LTNil {
				break
			}
			v.elems = append(v.elems, e)
		}
		n := len(v.elems) - base
		c.WriteLen(n)
		for i := range n {
			v.reply(c, v.elems[base+i])
		}
		clear(v.elems[base:])
		v.elems = v.elems[:base]
	default:
		c.WriteError(fmt.Sprintf("ERR simnet: script returned a %s", value.Type()))
	}
}

// fastMatch returns string.match that finds the patterns "<literal>(%d+)",
// "<literal>(%x+)" and the same ending in "$" (literal without magic characters, but for
// escaped punctuation such as "%."), which the lock scripts read INFO and tokens with, in
// Go, and leaves every other call to match, Lua's own. gopher-lua compiles a pattern at
// each call, a large part of the scripts' time. Its result is Lua's: the first place where
// the literal is followed by one such character or more (up to the end, with "$"), and the
// longest run of them from there.
func fastMatch(match *lua.LFunction) lua.LGFunction {
	return func(l *lua.LState) int {
		src, ok1 := l.Get(1).(lua.LString)
		pat, ok2 := l.Get(2).(lua.LString)
		if ok1 && ok2 && l.GetTop() == 2 {
			if p, ok := simplePattern(string(pat)); ok {
				l.Push(p.find(string(src)))
				return 1
			}
		}
		top := l.GetTop()
		l.Push(match)
		for i := 1; i <= top; i++ {
			l.Push(l.Get(i))
		}
		l.Call(top, lua.MultRet)
		return l.GetTop() - top
	}
}

// pattern is a pattern that fastMatch finds itself: a literal, then a run of digits
// (class 'd') or of hex digits ('x'), captured, then the end of the subject if anchored.
type pattern struct {
	lit      string
	class    byte
	anchored bool
}

// simplePattern returns the pattern p, if it is one that fastMatch finds itself.
func simplePattern(p string) (pattern, bool) {
	var out pattern
	p, out.anchored = strings.CutSuffix(p, "$")
	if out.anchored && strings.HasSuffix(p, "%") { // "%$": a literal '$'
		return pattern{}, false
	}
	for _, suffix := range []string{"(%d+)", "(%x+)"} {
		lit, found := strings.CutSuffix(p, suffix)
		if !found {
			continue
		}
		// The literal: plain characters, and '%' before a punctuation character, which
		// stands for that character.
		var b []byte
		for i := 0; i < len(lit); i++ {
			c := lit[i]
			if c == '%' {
				i++
				if i == len(lit) || !isPunct(lit[i]) {
					return pattern{}, false
				}
				c = lit[i]
			} else if strings.IndexByte("^$*+?.([-])", c) >= 0 {
				return pattern{}, false
			}
			b = append(b, c)
		}
		out.lit, out.class = string(b), suffix[2]
		return out, true
	}
	return pattern{}, false
}

// isPunct reports whether '%' followed by c stands for c in a Lua pattern: c is neither a
// letter nor a digit (those make classes and back references) and is printable ASCII.
func isPunct(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return false
	}
	return c > ' ' && c < 0x7f
}

// find returns the capture of the first match of p in src, or nil if there is none.
func (p pattern) find(src string) lua.LValue {
	in := func(c byte) bool {
		switch {
		case c >= '0' && c <= '9':
			return true
		case p.class == 'x':
			return c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		}
		return false
	}
	for from := 0; from <= len(src); {
		i := strings.Index(src[from:], p.lit)
		if i < 0 {
			break
		}
		start := from + i + len(p.lit)
		end := start
		for end < len(src) && in(src[end]) {
			end++
		}
		if end > start && (!p.anchored || end == len(src)) {
			return lua.LString(src[start:end])
		}
		from += i + 1
	}
	return lua.LNil
}
