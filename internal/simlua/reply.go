package simlua

import (
	"errors"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// errProtocol is the error of a reply that readReply cannot read, miniredis's
// server.ErrProtocol text.
var errProtocol = errors.New("invalid request")

// readReply reads the RESP2 reply at the start of b, as a command dispatched from a script
// wrote it, and returns it as the Lua value that redis.call gives the script, and the rest
// of b. It converts as miniredis's server.ParseReply followed by its conversion to Lua
// does, in one pass and without building the Go values in between: a nil bulk string or
// array is false, an integer a number, a bulk string a string, a status reply at the top the
// table {ok = status} (a string within an array), an array a table (of those, recursively).
// An error reply, anywhere in the reply, is returned as an error with its message.
func readReply(l *lua.LState, b []byte, top bool) (lua.LValue, []byte, error) {
	line, rest, ok := cutLine(b)
	if !ok || len(line) < 1 {
		return nil, nil, errProtocol
	}
	switch line[0] {
	case '+':
		if top {
			return field(l, "ok", string(line[1:])), rest, nil
		}
		return lua.LString(line[1:]), rest, nil
	case '-':
		return nil, nil, errors.New(string(line[1:]))
	case ':':
		if len(line) == 1 {
			return lua.LNumber(0), rest, nil
		}
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return nil, nil, errProtocol
		}
		return lua.LNumber(n), rest, nil
	case '$':
		n, err := strconv.Atoi(string(line[1:]))
		switch {
		case err != nil:
			return nil, nil, err
		case n < 0:
			return lua.LFalse, rest, nil
		case len(rest) < n+2:
			return nil, nil, errProtocol
		}
		return lua.LString(rest[:n]), rest[n+2:], nil
	case '*':
		n, err := strconv.Atoi(string(line[1:]))
		switch {
		case err != nil:
			return nil, nil, errProtocol
		case n < 0:
			return lua.LFalse, rest, nil
		}
		t := l.CreateTable(n, 0)
		for i := 1; i <= n; i++ {
			var v lua.LValue
			if v, rest, err = readReply(l, rest, false); err != nil {
				return nil, nil, err
			}
			t.RawSetInt(i, v)
		}
		return t, rest, nil
	}
	return nil, nil, errProtocol
}

// cutLine returns the line at the start of b, without its CRLF, and what follows it.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[:i], b[i+2:], true
		}
	}
	return nil, nil, false
}
