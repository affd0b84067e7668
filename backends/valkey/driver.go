package valkey

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/go-redlock/redlock/backends/internal/rueidisfamily"
	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

// node is the shared Node over valkey-go's types, which Node and Lazy wrap.
type node = rueidisfamily.Node[valkey.ValkeyMessage, *valkey.ValkeyMessage]

// newNode returns the shared Node over c.
func newNode(c valkey.Client) *node {
	return rueidisfamily.NewNode[valkey.ValkeyMessage](client{c: c}, c)
}

// scripts holds one valkey.Lua per core script, made once: valkey.Lua.Exec sends EVALSHA
// and falls back to EVAL on NOSCRIPT, through the client's auto-pipelining.
var scripts = rueidisfamily.NewScripts(func(src string) *valkey.Lua { return valkey.NewLuaScript(src) })

// driver is valkey-go as the shared code knows it (rueidisfamily.Driver).
type driver struct{}

func (driver) Names() rueidisfamily.Names {
	return rueidisfamily.Names{Driver: "valkey-go", Option: "valkey.ClientOption", Backend: "rlvalkey"}
}

func (driver) Closing(err error) bool { return errors.Is(err, valkey.ErrClosing) }

func (driver) Nil(err error) bool { return valkey.IsValkeyNil(err) }

func (driver) Reply(err error) (string, bool) {
	var re *valkey.ValkeyError
	if !errors.As(err, &re) || re.IsNil() {
		return "", false
	}
	return re.Error(), true
}

// client is a valkey-go client as a shared Node drives it (rueidisfamily.Client).
type client struct {
	driver
	c valkey.Client
}

var _ rueidisfamily.Client[valkey.ValkeyMessage] = client{}

func (c client) Addrs() []string { return slices.Collect(maps.Keys(c.c.Nodes())) }

func (c client) Cluster() bool { return c.c.Mode() == valkey.ClientModeCluster }

func (c client) Close() { c.c.Close() }

func (c client) Eval(ctx context.Context, s *core.Script, keys, args []string) (valkey.ValkeyMessage, error) {
	return scripts.Get(s).Exec(ctx, c.c, keys, args).ToMessage()
}

func (c client) Receive(ctx context.Context, channel string, sharded bool, onSubscription func(kind, channel string), onMessage func(string)) error {
	ctx = valkey.WithOnSubscriptionHook(ctx, func(s valkey.PubSubSubscription) { onSubscription(s.Kind, s.Channel) })
	cmd := c.c.B().Subscribe().Channel(channel).Build()
	if sharded {
		cmd = c.c.B().Ssubscribe().Channel(channel).Build()
	}
	return c.c.Receive(ctx, cmd, func(m valkey.PubSubMessage) { onMessage(m.Message) })
}

func (c client) Unsubscribe(ctx context.Context, channel string, sharded bool) error {
	cmd := c.c.B().Unsubscribe().Channel(channel).Build()
	if sharded {
		cmd = c.c.B().Sunsubscribe().Channel(channel).Build()
	}
	return c.c.Do(ctx, cmd).Error()
}
