// Package rueidisfamily is the redlock backend of the rueidis family of drivers, written
// once: rueidis (github.com/redis/rueidis) and valkey-go (github.com/valkey-io/valkey-go), its
// fork, whose types differ in their names only. It holds the Node (scripts, SET NX, replies
// and errors), the Lazy (a node whose client is made on first use) and the pub/sub, so that
// a fix lands in both backends. backends/rueidis and backends/valkey keep the public API and
// its doc comments, and wrap this package over a Client: a few lines per method, in the
// driver's own types.
package rueidisfamily

import (
	"context"

	"github.com/go-redlock/redlock/core"
)

// Driver is what the shared code knows of a driver without a client: its names in errors
// and how its errors read. A backend's Driver is a value without state.
type Driver interface {
	// Names returns the driver's names, as errors give them.
	Names() Names
	// Closing reports whether err says that the client was closed (rueidis.ErrClosing).
	Closing(err error) bool
	// Nil reports whether err is a nil reply (rueidis.IsRedisNil).
	Nil(err error) bool
	// Reply returns the message of the server's error reply that err is or wraps, as the
	// driver gives it (the driver drops a leading "ERR "), and true; false for any other
	// error and for a nil reply.
	Reply(err error) (msg string, ok bool)
}

// Names are a driver's names in its backend's errors.
type Names struct {
	Driver  string // the driver: "rueidis", "valkey-go"
	Option  string // its client option type: "rueidis.ClientOption"
	Backend string // the backend's package as its docs import it: "rlrueidis"
}

// Client is one client of a Driver as a Node drives it. M is the driver's reply message
// (rueidis.RedisMessage, valkey.ValkeyMessage). Its methods are safe for concurrent use and
// honour ctx as the driver does: a deadline throughout, a cancellation once connected.
type Client[M any] interface {
	Driver
	// Eval runs s with keys and args, by EVALSHA and then EVAL on NOSCRIPT, and returns its
	// reply and the reply's error (the driver's Result.ToMessage). A cluster client panics,
	// before it sends anything, on keys of different slots.
	Eval(ctx context.Context, s *core.Script, keys, args []string) (M, error)
	// Receive subscribes to channel, with SSUBSCRIBE if sharded, and calls onMessage with
	// each of its messages' payload until ctx ends or the connection fails, as the driver's
	// Client.Receive does; onSubscription is called with the kind ("subscribe",
	// "ssubscribe", "unsubscribe"...) and the channel of each change the server confirms.
	Receive(ctx context.Context, channel string, sharded bool, onSubscription func(kind, channel string), onMessage func(payload string)) error
	// Unsubscribe sends UNSUBSCRIBE, or SUNSUBSCRIBE if sharded, for channel.
	Unsubscribe(ctx context.Context, channel string, sharded bool) error
	// Addrs returns the addresses of the servers the client knows (its Nodes), in any order.
	Addrs() []string
	// Cluster reports whether the client is a cluster client.
	Cluster() bool
	// Close closes the client.
	Close()
}

// Message is a pointer to a driver's reply message M (*rueidis.RedisMessage,
// *valkey.ValkeyMessage), with the methods a Node reads a script's reply with.
type Message[M any] interface {
	*M
	ToArray() ([]M, error)
	IsString() bool
	ToString() (string, error)
	IsInt64() bool
	ToInt64() (int64, error)
	IsNil() bool
}

// Scripts holds a driver's Lua script object L (*rueidis.Lua) for each core script, made
// once. It is safe for concurrent use.
type Scripts[L any] struct {
	newLua func(src string) L
	lua    map[*core.Script]L
}

// NewScripts returns the Scripts whose objects newLua makes from a script's source:
// rueidis.NewLuaScript, whose Exec sends EVALSHA and falls back to EVAL on NOSCRIPT.
func NewScripts[L any](newLua func(src string) L) *Scripts[L] {
	m := make(map[*core.Script]L, len(core.Scripts()))
	for _, s := range core.Scripts() {
		m[s] = newLua(s.Source())
	}
	return &Scripts[L]{newLua: newLua, lua: m}
}

// Get returns s's object; for a script that is not one of core's, one made for this call.
func (ss *Scripts[L]) Get(s *core.Script) L {
	if lua, ok := ss.lua[s]; ok {
		return lua
	}
	return ss.newLua(s.Source())
}
