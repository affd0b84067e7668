package core

import "context"

// Subscriber is an optional capability of a Node: it delivers the release notifications that
// the release script publishes, so that waiters wake as soon as a lock is let go instead of
// polling. Core discovers it with a type assertion.
//
// Contract:
//   - Subscribe returns only once the subscription is active on the server: a PUBLISH on
//     channel that the server handles after Subscribe returned is delivered.
//   - onMessage is called with the payload of every message on channel, unchanged, from a
//     goroutine of the backend's; it must not block (core's callbacks never do). It may also
//     be called with an empty payload when no message arrived: a spurious call only makes a
//     waiter check the lock once more. A payload must never be made up or altered: it can
//     tell a waiter that a release handed it the lock.
//   - After the connection drops, the backend reconnects and re-subscribes by itself, and then
//     calls onMessage("") once for every subscribed channel, because messages may have been
//     lost in between: the waiter re-checks instead of sleeping through a release.
//   - onMessage receives the messages of its own channel only.
//   - unsubscribe stops delivery to this onMessage and is idempotent: once it returns, no new
//     call starts (one already under way may still be running, which is why callbacks
//     must be harmless when late). Other subscriptions to the same channel stay active.
//     Once no subscription to a channel is left, the backend unsubscribes on the server
//     (UNSUBSCRIBE, or SUNSUBSCRIBE), so that channels do not pile up there.
//   - A backend shares one pub/sub connection per node (at most one per master of a Redis
//     Cluster) among all channels it is asked for, and may be asked for the same channel
//     more than once.
//   - Subscribe honours ctx while it waits for the subscription to become active.
type Subscriber interface {
	Subscribe(ctx context.Context, channel string, onMessage func(payload string)) (unsubscribe func(), err error)
}
