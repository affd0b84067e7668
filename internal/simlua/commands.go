package simlua

import (
	"fmt"
	"slices"
	"strings"
)

// The commands that scripts may call while an Engine checks them (see Checks): which of
// each one's arguments are keys, and whether it writes them. A script that calls a command
// outside this table is refused while either check is on, so that no key and no write
// slips past unchecked: a script that needs another command needs it added here.

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
	case "TIME", "INFO", "LASTSAVE", "PING", "PUBLISH", "SPUBLISH":
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

// check checks a script's command, args (its name first), under c: it returns the error
// that refuses the command, or "" if it may run, and notes the keys it writes on c.Writes,
// if one is kept. declared are the script's KEYS, sha its SHA-1.
func (c Checks) check(sha string, declared, args []string) string {
	name := upper(args[0])
	cmd, ok := commandOf(name)
	if !ok {
		return fmt.Sprintf("ERR simlua: script called %s, a command that the script checks do not know (see internal/simlua/commands.go)", name)
	}
	keys := cmd.keysIn(args[1:])
	if c.StrictKeys {
		for _, k := range keys {
			if !slices.Contains(declared, k) {
				return fmt.Sprintf("ERR script tried accessing undeclared key: %s (%s)", k, name)
			}
		}
	}
	if c.Writes != nil && cmd.write {
		c.Writes.note(sha, keys)
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
