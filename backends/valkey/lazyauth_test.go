package valkey_test

import (
	"context"
	"testing"
	"time"

	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/valkey-io/valkey-go"
)

// TestLazyWrongPassword: a Lazy whose server refuses its password fails with an error that
// core.Permanent knows, as the Node of New over a client with that password does.
func TestLazyWrongPassword(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	s := redistest.Start(t)
	if _, err := redistest.DoTimeout(s.Addr(), 5*time.Second, "CONFIG", "SET", "requirepass", "right"); err != nil {
		t.Fatal(err)
	}
	l := rlvalkey.NewLazy(valkey.ClientOption{InitAddress: []string{s.Addr()}, Password: "wrong", DisableCache: true})
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := l.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	if err == nil || !core.Permanent(err) {
		t.Errorf("Eval of a Lazy whose server refuses its password returned %v, which core.Permanent does not know (WRONGPASS)", err)
	}
}
