package simnet

import (
	"fmt"
	"slices"
	"strings"
)

// The commands that scripts may call while a server checks them (see SetStrictKeys and
// RecordWriters): which of each one's arguments are keys, and whether it writes them. A
// script that calls a command outside this table is refused while either check is on, so
// that no key and no write slips past unchecked: a script that needs another command needs
// it added here.

// keySpan says which of a command's arguments are keys.
type keySpan uint8

const (
	noKeys   keySpan = iota // TIME, INFO, PUBLISH: no argument is a key (a channel is not)
	firstKey                // GET k, ZADD k score member: the first argument only
	allKeys                 // DEL k1 k2, EXISTS, MGET: every argument
)

// command is what the checks know of one command.
type command struct {
	keys  keySpan
	write bool // it may modify its keys
}

// commandOf returns what the checks know of the command name (upper case), and false if
// they know nothing of it.
func commandOf(name string) (command, bool) {
	switch name {
	case "GET", "PTTL", "TYPE", "ZRANGE", "ZSCORE", "ZCARD", "HGET", "HGETALL":
		return command{keys: firstKey}, true
	case "SET", "PEXPIRE", "INCR", "ZADD", "ZREM", "ZREMRANGEBYSCORE", "HSET", "HDEL":
		return command{keys: firstKey, write: true}, true
	case "EXISTS", "MGET":
		return command{keys: allKeys}, true
	case "DEL":
		return command{keys: allKeys, write: true}, true
	case "TIME", "INFO", "PING", "PUBLISH", "SPUBLISH":
		return command{keys: noKeys}, true
	}
	return command{}, false
}

// keysIn returns the keys among args, the command's arguments after its name.
func (c command) keysIn(args []string) []string {
	switch {
	case c.keys == firstKey && len(args) > 0:
		return args[:1]
	case c.keys == allKeys:
		return args
	}
	return nil
}

// SetStrictKeys sets whether the server refuses a script's command that names a key the
// script was not given in KEYS (true), or runs it (false, the default). A refused
// redis.call raises a Lua error that ends the script, whose error reply holds "ERR script
// tried accessing undeclared key: <key> (<COMMAND>)"; a refused redis.pcall returns that
// message as an error table ({err = ...}). While it is on, a script's command that the
// table of keys.go does not know is refused the same ways, with an error that names it,
// and EVAL and EVALSHA run on the pooled engine (see SetPooledScripts), which makes the
// checks: so EVAL_RO and EVALSHA_RO, which miniredis would run unchecked, are refused, and
// EVALSHA of a script the engine was not given (by EVAL or SCRIPT LOAD) since the process
// started answers NOSCRIPT. The setting holds across restarts; it is safe for concurrent
// use.
func (s *Server) SetStrictKeys(on bool) { s.strict.Store(on) }

// checkCall checks a script's command, args (its name first), under the server's checks:
// it returns the error that refuses the command, or "" if it may run, and notes the keys
// it writes on the writer record, if one is kept. declared are the script's KEYS, sha its
// SHA-1.
func checkCall(strict bool, rec *writeRecord, sha string, declared, args []string) string {
	name := upper(args[0])
	c, ok := commandOf(name)
	if !ok {
		return fmt.Sprintf("ERR simnet: script called %s, a command that simnet's checks do not know (see internal/simnet/keys.go)", name)
	}
	keys := c.keysIn(args[1:])
	if strict {
		for _, k := range keys {
			if !slices.Contains(declared, k) {
				return fmt.Sprintf("ERR script tried accessing undeclared key: %s (%s)", k, name)
			}
		}
	}
	if rec != nil && c.write {
		rec.note(sha, keys)
	}
	return ""
}

// upper returns s in upper case, without allocating if it is already (as a script's
// commands mostly are).
func upper(s string) string {
	for i := range len(s) {
		if c := s[i]; c >= 'a' && c <= 'z' {
			return strings.ToUpper(s)
		}
	}
	return s
}
