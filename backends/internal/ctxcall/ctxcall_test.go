package ctxcall

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGo: Go returns the call's outcome when it comes first, and ctx's error as soon as ctx
// ends first, while the call goes on.
func TestGo(t *testing.T) {
	v, err := Go(context.Background(), func() (int, error) { return 7, errors.New("e") })
	if v != 7 || err == nil || err.Error() != "e" {
		t.Fatalf("Go returned %v, %v; want the call's 7, e", v, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	v, err = Go(ctx, func() (int, error) {
		defer close(finished)
		<-release
		return 1, nil
	})
	if !errors.Is(err, context.Canceled) || v != 0 {
		t.Fatalf("Go returned %v, %v after ctx ended; want 0, context.Canceled", v, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Go returned %v after ctx ended, not at once", d)
	}
	close(release) // the call goes on in the background, and ends
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not finish once released")
	}
}
