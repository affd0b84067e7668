package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// The hand-over floor: the least a lock that hands itself to the next waiter can do on one
// node, to set the handoff gaps against. A waiter subscribes to a channel of its own, then
// one script sets the lock or puts the waiter in a list; the holder's release script gives
// the lock to the list's first waiter (SET with its token) and publishes on its channel,
// and the waiter's Lock returns on that message. So a gap is one release round trip plus
// one message, as in our Mutex's hand-over, without anything else: no liveness of waiters,
// no tickets, no fencing, no restart guard, no deadlines, and a waiter that gives up is
// never taken out of the list (fine for a measurement, not for a lock).
var (
	handoffFloorAcquire = rueidis.NewLuaScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 0`)
	handoffFloorRelease = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local next = redis.call('LPOP', KEYS[2])
if next then
  redis.call('SET', KEYS[1], next, 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3] .. next, '1')
else
  redis.call('DEL', KEYS[1])
end
return 1`)
)

// handoffFloor is one client of the hand-over floor: one rueidis client (defaults) to one
// node.
type handoffFloor struct{ c rueidis.Client }

func newHandoffFloor(addrs []string, _ bool) (client, error) {
	if len(addrs) != 1 {
		return nil, errors.New("the hand-over floor runs on one node")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		return nil, err
	}
	return &handoffFloor{c: c}, nil
}

func (f *handoffFloor) Close() { f.c.Close() }

func (f *handoffFloor) Locker(name string) locker {
	return &handoffFloorLock{c: f.c, keys: []string{name, name + ":q"}, channel: name + ":w:", token: newToken()}
}

type handoffFloorLock struct {
	c       rueidis.Client
	keys    []string // the lock, the waiters' list
	channel string   // a waiter's channel is channel + its token
	token   string   // also the waiter's id: one goroutine uses a lock
	once    sync.Once
	woken   chan struct{}
	subErr  error
}

const handoffFloorTTL = "10000"

// subscribe subscribes to the lock's channel once, and returns once the server confirmed.
func (l *handoffFloorLock) subscribe(ctx context.Context) error {
	l.once.Do(func() {
		l.woken = make(chan struct{}, 1)
		active := make(chan struct{})
		var confirmed sync.Once
		hctx := rueidis.WithOnSubscriptionHook(context.WithoutCancel(ctx), func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" {
				confirmed.Do(func() { close(active) })
			}
		})
		failed := make(chan error, 1)
		go func() {
			failed <- l.c.Receive(hctx, l.c.B().Subscribe().Channel(l.channel+l.token).Build(), func(rueidis.PubSubMessage) {
				select {
				case l.woken <- struct{}{}:
				default:
				}
			})
		}()
		select {
		case <-active:
		case err := <-failed:
			l.subErr = fmt.Errorf("subscribe: %w", err)
		case <-time.After(5 * time.Second):
			l.subErr = errors.New("subscribe: no confirmation in 5s")
		}
	})
	return l.subErr
}

func (l *handoffFloorLock) Lock(ctx context.Context) error {
	if err := l.subscribe(ctx); err != nil {
		return err
	}
	select { // a message from an earlier wait that ended without it
	case <-l.woken:
	default:
	}
	got, err := handoffFloorAcquire.Exec(ctx, l.c, l.keys, []string{l.token, handoffFloorTTL}).AsInt64()
	if err != nil || got == 1 {
		return err
	}
	select {
	case <-l.woken:
		return nil // the release gave us the lock
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *handoffFloorLock) Unlock(ctx context.Context) error {
	ok, err := handoffFloorRelease.Exec(ctx, l.c, l.keys, []string{l.token, handoffFloorTTL, l.channel}).AsInt64()
	if err == nil && ok != 1 {
		err = errors.New("hand-over floor: not held")
	}
	return err
}
