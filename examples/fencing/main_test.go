package main

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redlock/redlock"
)

// TestRun runs the demo over embedded servers: A's late write must be rejected and B's value
// must be the one stored (run checks both, and fails otherwise).
func TestRun(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{"A's late write was rejected", `The store holds "written by B"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStoreRejectsOlderTokens checks the store's comparison itself, including tokens whose
// decimal lengths differ and tokens above 2^53, where comparing doubles would fail.
func TestStoreRejectsOlderTokens(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	store := &Store{rdb: rdb, key: "test:storage"}
	ctx := context.Background()

	steps := []struct {
		token uint64
		value string
		want  bool
	}{
		{999, "first", true},            // empty store: any token
		{1000, "longer token", true},    // 4 digits > 3 digits
		{999, "older", false},           // older than the highest
		{1000, "same token", true},      // the same holder writes again
		{1795305105661725, "now", true}, // a token of today
		{1795305105661724, "one less", false},
		{math.MaxUint64 - 1, "huge", true},
		{math.MaxUint64 - 2, "huge - 1", false}, // both round to the same double
		{math.MaxUint64, "max", true},
	}
	for _, s := range steps {
		ok, err := store.Write(ctx, s.token, s.value)
		if err != nil {
			t.Fatal(err)
		}
		if ok != s.want {
			t.Errorf("Write(%d, %q) = %v, want %v", s.token, s.value, ok, s.want)
		}
	}
	// Token 0 is the zero Lease's, which holds no lock: an error, not a write.
	if ok, err := store.Write(ctx, 0, "zero"); ok || !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Write(0) = %v, %v; want false and ErrInvalid", ok, err)
	}
	// The record has a TTL: it does not outlive its last write forever.
	if ttl := rdb.PTTL(ctx, store.key).Val(); ttl <= 0 || ttl > recordTTL {
		t.Errorf("the record's TTL is %v, want up to %v", ttl, recordTTL)
	}
	value, token, err := store.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if value != "max" || token != math.MaxUint64 {
		t.Errorf("the store holds %q with token %d, want %q with token %d", value, token, "max", uint64(math.MaxUint64))
	}
}
