package simlua

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

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
