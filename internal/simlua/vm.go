package simlua

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	luajson "github.com/alicebob/miniredis/v2/gopher-json"
	"github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
)

// vm is a Lua state with miniredis's libraries, its redis module, and globals refused,
// ready to run a script; cur is the call it runs, for the redis module's functions.
type vm struct {
	l   *lua.LState
	cur struct {
		e      *Engine
		p      *server.Peer
		sha    string
		keys   []string // the call's KEYS
		checks Checks   // what is checked of its commands
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
func (e *Engine) newVM() *vm {
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

// run runs the script c with keys and args for the peer p, making checks of its commands,
// and writes its reply to p. e.m's lock is held.
func (v *vm) run(e *Engine, p *server.Peer, c *compiled, keys, args []string, checks Checks) {
	l := v.l
	proto := c.proto
	v.cur.e, v.cur.p, v.cur.sha, v.cur.keys, v.cur.checks = e, p, c.sha, keys, checks
	defer func() { v.cur.e, v.cur.p, v.cur.keys, v.cur.checks = nil, nil, nil, Checks{} }()
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
	e := v.cur.e
	if v.cur.checks.On() {
		if msg := v.cur.checks.check(sha, v.cur.keys, args); msg != "" {
			clear(args)
			if e.opts.Refused != nil {
				e.opts.Refused(sha, msg)
			}
			return fail(l, failFast, msg)
		}
	}
	if strings.EqualFold(args[0], "INFO") {
		// As Options.Info answers it, without the dispatch, the reply's encoding and its
		// reading back.
		if info, ok := e.infoValue(); ok {
			clear(args)
			l.Push(info)
			return 1
		}
	}
	if e.opts.LastSave != nil && strings.EqualFold(args[0], "LASTSAVE") {
		if t, ok := e.opts.LastSave(); ok {
			clear(args)
			l.Push(lua.LNumber(t))
			return 1
		}
	}
	v.out.Reset()
	v.peer.Resp3, v.peer.SwitchResp3 = false, nil // as a new peer's
	e.srv.Dispatch(v.peer, args)
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
		c.WriteError(fmt.Sprintf("ERR simlua: script returned a %s", value.Type()))
	}
}
