package rueidis

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/go-redlock/redlock/backends/internal/rueidisfamily"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/rueidis"
)

// node is the shared Node over rueidis's types, which Node and Lazy wrap.
type node = rueidisfamily.Node[rueidis.RedisMessage, *rueidis.RedisMessage]

// newNode returns the shared Node over c.
func newNode(c rueidis.Client) *node {
	return rueidisfamily.NewNode[rueidis.RedisMessage](client{c: c}, c)
}

// scripts holds one rueidis.Lua per core script, made once: rueidis.Lua.Exec sends EVALSHA
// and falls back to EVAL on NOSCRIPT, through the client's auto-pipelining.
var scripts = rueidisfamily.NewScripts(func(src string) *rueidis.Lua { return rueidis.NewLuaScript(src) })

// driver is rueidis as the shared code knows it (rueidisfamily.Driver).
type driver struct{}

func (driver) Names() rueidisfamily.Names {
	return rueidisfamily.Names{Driver: "rueidis", Option: "rueidis.ClientOption", Backend: "rlrueidis"}
}

func (driver) Closing(err error) bool { return errors.Is(err, rueidis.ErrClosing) }

func (driver) Nil(err error) bool { return rueidis.IsRedisNil(err) }

func (driver) Reply(err error) (string, bool) {
	var re *rueidis.RedisError
	if !errors.As(err, &re) || re.IsNil() {
		return "", false
	}
	return re.Error(), true
}

// client is a rueidis client as a shared Node drives it (rueidisfamily.Client).
type client struct {
	driver
	c rueidis.Client
}

var _ rueidisfamily.Client[rueidis.RedisMessage] = client{}

func (c client) Addrs() []string { return slices.Collect(maps.Keys(c.c.Nodes())) }

func (c client) Cluster() bool { return c.c.Mode() == rueidis.ClientModeCluster }

func (c client) Close() { c.c.Close() }

func (c client) Eval(ctx context.Context, s *core.Script, keys, args []string) (rueidis.RedisMessage, error) {
	return scripts.Get(s).Exec(ctx, c.c, keys, args).ToMessage()
}

func (c client) Receive(ctx context.Context, channel string, sharded bool, onSubscription func(kind, channel string), onMessage func(string)) error {
	ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) { onSubscription(s.Kind, s.Channel) })
	cmd := c.c.B().Subscribe().Channel(channel).Build()
	if sharded {
		cmd = c.c.B().Ssubscribe().Channel(channel).Build()
	}
	return c.c.Receive(ctx, cmd, func(m rueidis.PubSubMessage) { onMessage(m.Message) })
}

func (c client) Unsubscribe(ctx context.Context, channel string, sharded bool) error {
	cmd := c.c.B().Unsubscribe().Channel(channel).Build()
	if sharded {
		cmd = c.c.B().Sunsubscribe().Channel(channel).Build()
	}
	return c.c.Do(ctx, cmd).Error()
}
