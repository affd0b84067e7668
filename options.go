package redlock

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Option configures a Client (given to New, where it sets the default of every call) or
// one call or primitive (given to Acquire, TryAcquire, Do, their All forms, NewMutex,
// NewMutexAll, NewRWMutex, NewRWMutexAll, NewSemaphore or NewElection, where it overrides the Client's
// setting for that call or primitive only). Every option takes effect wherever it is accepted; the few that cannot
// take effect somewhere are refused there with an error that matches ErrInvalid: WithRetry
// and WithLogger on TryAcquire (it makes one attempt and returns its error),
// WithErrorHandler on Acquire, TryAcquire, Do, NewSemaphore and NewElection (they return
// their errors), WithAutoExtend(false) on Do, DoAll, NewMutex, NewMutexAll, NewRWMutex,
// NewRWMutexAll and NewElection (they always extend), WithFencing on every call but New,
// NewMutex and NewMutexAll (the others' holdings always carry a fencing token), and
// WithDescription on TakeOver (the lease keeps the handle's token).
type Option func(*settings)

// The options, a bit each, to tell which ones a call was given.
const (
	optRetry uint32 = 1 << iota
	optLogger
	optErrorHandler
	optNoAutoExtend
	optFencing
	optDescription
)

// settings holds every option; defaults() is the one place their defaults live.
type settings struct {
	ttl         time.Duration
	nodeTimeout time.Duration
	driftFactor float64
	prefix      string
	retryMin    time.Duration
	retryMax    time.Duration
	guard       time.Duration
	guardSet    bool // guard was given; otherwise New picks it from N
	autoExtend  bool
	fencing     bool   // a Mutex's holdings carry a fencing token (WithFencing)
	description string // the holders' description (WithDescription); "": none
	maxHold     time.Duration
	logger      *slog.Logger
	onLost      func(error)
	onError     func(error)
	observer    Observer // nil: no events (see WithObserver, in observer.go)
	given       uint32   // the options among optRetry... that were given

	// A wait that keeps failing for reasons other than a holder is logged (WithLogger) once
	// it has lasted warnAfter, and then at most every warnEvery.
	warnAfter, warnEvery time.Duration
}

// defaultGuard is the restart guard when none is given, at every N.
const defaultGuard = 30 * time.Second

func defaults() settings {
	return settings{
		ttl:         10 * time.Second,
		nodeTimeout: 100 * time.Millisecond,
		driftFactor: 0.01,
		prefix:      "redlock:",
		retryMin:    10 * time.Millisecond,
		retryMax:    250 * time.Millisecond,
		warnAfter:   5 * time.Second,
		warnEvery:   30 * time.Second,
	}
}

// MaxNameLen is the longest lock name, in bytes; a longer one is refused with an error
// that matches ErrInvalid. Names go into Redis keys and channels.
const MaxNameLen = 1024

// maxPrefixLen is the longest key prefix, in bytes.
const maxPrefixLen = 256

// WithTTL sets how long a lock lives on each node without extension. Default 10s. It must
// be at least 1ms and leave a positive validity after the drift allowance.
func WithTTL(d time.Duration) Option { return func(s *settings) { s.ttl = d } }

// WithNodeTimeout bounds each node's answer to each request; a slower node counts as failed.
// Default 100ms. It must be positive and shorter than the TTL. Keep it a small fraction of
// the TTL, but above the worst round trip you expect to one node.
func WithNodeTimeout(d time.Duration) Option { return func(s *settings) { s.nodeTimeout = d } }

// WithDriftFactor sets the clock-drift allowance: validity = TTL - elapsed - (TTL*f + 2ms).
// Default 0.01. It must be in [0, 1).
func WithDriftFactor(f float64) Option { return func(s *settings) { s.driftFactor = f } }

// WithPrefix sets the prefix of every Redis key and channel the lock uses. Default
// "redlock:". It must be at most 256 bytes, and its first '{', if any, must not be followed
// at once by '}' (that would empty the Redis Cluster hash tag of every key; see
// core.NewKeys).
func WithPrefix(p string) Option { return func(s *settings) { s.prefix = p } }

// WithRestartGuard sets the restart guard: a node whose server has been up for less than d
// abstains from granting locks, because a server that restarted without persistence has
// forgotten the locks it granted, and its vote could let a second owner in. d must be at
// least the largest TTL that any client uses on these nodes (a TTL above it is an error),
// and is rounded up to whole seconds. 0 turns the guard off, and accepts that a server
// that restarts empty lets a second owner in while the first still holds (at N = 1 at
// once): do that only if every node persists each write before it answers (appendonly
// yes, appendfsync always). With fencing tokens (Lease.Token), make it exceed 2s plus the
// largest difference between the servers' clocks: a token can lead the slowest server's
// clock by that much, and a node that lost its data starts its counter again from its own
// clock, so the guard must outlast the lead (at the default, clocks up to 28 s apart).
//
// Default: 30s, at every N (a single node too). A node whose server has no uptime to give
// (miniredis) takes part unguarded: Client.Unguarded lists such nodes, and the logger (see
// WithLogger) says each once. A node whose server refuses INFO (an ACL user without it, such
// as +@all -@dangerous) cannot apply the guard, and does not vote: it fails each acquisition
// with an error that matches ErrInvalid, no retry fixes it, and it says how to grant the
// command or turn the guard off. Nodes abstaining under the guard fail with ErrRestarted
// inside a QuorumError, and the logger says so at a node's first abstention (see WithLogger).
func WithRestartGuard(d time.Duration) Option {
	return func(s *settings) { s.guard, s.guardSet = d, true }
}

// WithAutoExtend makes a Lease extend itself while it is held: each extension is scheduled
// when about a third of the validity is left (measured against Until, so a late wake-up
// cannot drift past it), and a failed extension is retried until the validity runs out.
// When the lock cannot be kept, the Lease ends and its Done channel closes. Default off for
// Acquire and TryAcquire; Do always extends.
func WithAutoExtend(on bool) Option {
	return func(s *settings) {
		s.autoExtend = on
		s.given &^= optNoAutoExtend
		if !on {
			s.given |= optNoAutoExtend
		}
	}
}

// WithFencing(true) gives each holding of a Mutex (NewMutex, NewMutexAll) a fencing token,
// Mutex.Token, from the same counter as the Leases of its name, so that a Mutex's holder can
// have its writes checked as a Lease's are (see Lease.Token and package fence). It costs no
// round trip at N = 1; at N > 1 a grant whose token fewer than a quorum of nodes gave raises
// it on a quorum first, one more round trip, as a Lease's does. Default off: a Mutex's Token
// is 0. Given to New, it applies to the Client's Mutexes. A Lease, an RWMutex's writer, a
// Semaphore's permit and an Election's leader always carry a token, so Acquire, TryAcquire,
// Do, their All forms, NewRWMutex, NewRWMutexAll, NewSemaphore and NewElection refuse it.
func WithFencing(on bool) Option {
	return func(s *settings) { s.fencing, s.given = on, s.given|optFencing }
}

// MaxDescriptionLen is the longest description of a holder (WithDescription), in bytes.
const MaxDescriptionLen = core.MaxDescriptionLen

// WithDescription describes the holder to whoever reads the nodes: Client.Status (its
// Holder, Leader, and each node's lock, queue, readers and permits) and redlock status show
// d beside the holder's token, so that an operator can tell which host, process or job
// holds a lock or waits for it. It costs no round trip and no key: d starts every token of
// the holding on the nodes, "<d>@<random>" (a waiter's tokens and id too: see core's
// package doc, Tokens), so each call to a node carries len(d)+1 more bytes, twice over in
// a waiting acquisition's calls and its release, and allocates nothing more. A lease
// handed off (Lease.HandOff) keeps its token, and with it d. Default "": no description,
// and tokens as before. d is at most MaxDescriptionLen (128) bytes of printable UTF-8
// without spaces or '@' ("web-3:4242", "nightly-report/7"); another is an error that
// matches ErrInvalid. Given to New, it describes every holding of the Client's; given to a
// call or primitive, that one's holdings. TakeOver refuses it.
func WithDescription(d string) Option {
	return func(s *settings) { s.description, s.given = d, s.given|optDescription }
}

// WithMaxHold bounds how long a Lease, or each holding of a Mutex, is held: when d has
// passed since its acquisition began, it ends with ErrMaxHold and releases its lock,
// whether or not it extends itself (a Mutex's Lost channel closes, and the WithLostHandler
// function is called). Default 0: no bound. It must not be negative.
func WithMaxHold(d time.Duration) Option { return func(s *settings) { s.maxHold = d } }

// WithLogger sets where the library reports, at Warn, what it cannot return as an error:
// a wait for the lock (Lock, LockContext, Acquire, Do) that has failed for other reasons
// than a holder for 5 s (nodes down or refusing, and with what, or the restart guard's
// remaining time), then at most every 30 s while it goes on; a Mutex.Unlock whose release
// failed, when no WithErrorHandler is set; and, given to New, what a node shows of itself, once
// per node: that it cannot apply the restart guard (miniredis), that it cannot be checked
// to reach a server of its own (its server refuses INFO), that it fails with an error that
// no retry can fix (a refused command, say, which the other nodes' quorum may hide), and
// that it abstains under the restart guard, with the seconds left (at its first abstention
// since it last granted: a lock over a freshly started server waits that long); and New
// warns of an even number of nodes.
// Default none, but for New's notices, which then go to slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) { s.logger, s.given = l, s.given|optLogger }
}

// WithLostHandler sets a function called, in a goroutine of its own, when a Mutex's holding
// or a Lease ends otherwise than by Unlock, Release or Lease.HandOff: err matches
// ErrNotHeld and the reason (ErrLost, ErrExpired, ErrMaxHold, ErrClosed). Default none: watch Mutex.Lost or Lease.Done.
func WithLostHandler(f func(err error)) Option { return func(s *settings) { s.onLost = f } }

// WithErrorHandler sets the function that receives Mutex.Unlock's release errors, which
// Unlock cannot return. Default: the WithLogger logger, or nowhere. It applies to New,
// NewMutex, NewMutexAll, NewRWMutex and NewRWMutexAll only.
func WithErrorHandler(f func(err error)) Option {
	return func(s *settings) { s.onError, s.given = f, s.given|optErrorHandler }
}

// WithRetry sets the wait between attempts of a lock that waits (Lock, LockContext,
// Acquire, Do): it starts at min and doubles up to max, jittered, and never exceeds the
// holder's remaining TTL. Defaults 10ms and 250ms.
func WithRetry(min, max time.Duration) Option {
	return func(s *settings) { s.retryMin, s.retryMax, s.given = min, max, s.given|optRetry }
}

func (s settings) with(opts []Option) settings {
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

// refused names the options that do not apply to a call.
var refused = []struct {
	opt    uint32
	name   string
	reason string
}{
	{optRetry, "WithRetry", "it makes one attempt"},
	{optLogger, "WithLogger", "it makes one attempt and returns its error"},
	{optErrorHandler, "WithErrorHandler", "it returns its errors"},
	{optNoAutoExtend, "WithAutoExtend(false)", "it always extends its lock"},
	{optFencing, "WithFencing", "only a Mutex's holdings may go without a fencing token"},
	{optDescription, "WithDescription", "the lease keeps the handle's token, which carries its first holder's description"},
}

// forCall returns s with opts applied for the call named call, checked: an error that
// matches ErrInvalid if an option among not (optRetry...) was given, or if the settings
// are out of range.
func (s settings) forCall(call string, not uint32, opts []Option) (settings, error) {
	if len(opts) == 0 {
		return s, nil
	}
	var given settings
	given = given.with(opts)
	for _, r := range refused {
		if given.given&not&r.opt != 0 {
			return s, fmt.Errorf("%w: %s does not apply to %s: %s", ErrInvalid, r.name, call, r.reason)
		}
	}
	s = s.with(opts)
	return s, s.validate()
}

func (s settings) validate() error {
	drift := time.Duration(float64(s.ttl)*s.driftFactor) + 2*time.Millisecond
	switch {
	case s.ttl < time.Millisecond:
		return fmt.Errorf("%w: TTL must be at least 1ms, got %v", ErrInvalid, s.ttl)
	case s.driftFactor < 0 || s.driftFactor >= 1 || s.driftFactor != s.driftFactor:
		return fmt.Errorf("%w: drift factor must be in [0, 1), got %v", ErrInvalid, s.driftFactor)
	case s.ttl <= drift:
		return fmt.Errorf("%w: TTL %v leaves no validity after the drift allowance %v", ErrInvalid, s.ttl, drift)
	case s.nodeTimeout <= 0 || s.nodeTimeout >= s.ttl:
		return fmt.Errorf("%w: node timeout must be positive and shorter than the TTL %v, got %v", ErrInvalid, s.ttl, s.nodeTimeout)
	case s.retryMin <= 0 || s.retryMax < s.retryMin:
		return fmt.Errorf("%w: retry delays must satisfy 0 < min <= max, got %v and %v", ErrInvalid, s.retryMin, s.retryMax)
	case s.guard < 0:
		return fmt.Errorf("%w: restart guard must not be negative, got %v", ErrInvalid, s.guard)
	case s.guard > 0 && s.ttl > s.guard:
		return fmt.Errorf("%w: TTL %v is above the restart guard %v: the guard must cover the longest TTL (raise it with WithRestartGuard)", ErrInvalid, s.ttl, s.guard)
	case s.maxHold < 0:
		return fmt.Errorf("%w: maximum hold time must not be negative, got %v", ErrInvalid, s.maxHold)
	case len(s.prefix) > maxPrefixLen:
		return fmt.Errorf("%w: key prefix of %d bytes: at most %d", ErrInvalid, len(s.prefix), maxPrefixLen)
	}
	return cmp.Or(core.CheckPrefix(s.prefix), core.CheckDescription(s.description))
}

// checkName returns an error that matches ErrInvalid if name cannot name a lock.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: lock name of %d bytes: at most %d", ErrInvalid, len(name), MaxNameLen)
	}
	return nil
}
