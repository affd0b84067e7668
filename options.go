package redlock

import (
	"fmt"
	"time"
)

// Option configures a Client (given to New) or one call (given to Acquire or TryAcquire,
// where it overrides the Client's setting for that call only).
type Option func(*settings)

// settings holds every option; defaults() is the one place their defaults live.
type settings struct {
	ttl         time.Duration
	nodeTimeout time.Duration
	driftFactor float64
	prefix      string
	retryMin    time.Duration
	retryMax    time.Duration
}

func defaults() settings {
	return settings{
		ttl:         10 * time.Second,
		nodeTimeout: 100 * time.Millisecond,
		driftFactor: 0.01,
		prefix:      "redlock:",
		retryMin:    10 * time.Millisecond,
		retryMax:    250 * time.Millisecond,
	}
}

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

// WithPrefix sets the prefix of every Redis key and channel the lock uses. Default "redlock:".
func WithPrefix(p string) Option { return func(s *settings) { s.prefix = p } }

// WithRetry sets the wait between attempts of Acquire: it starts at min and doubles up to
// max, jittered, and never exceeds the holder's remaining TTL. Defaults 10ms and 250ms.
func WithRetry(min, max time.Duration) Option {
	return func(s *settings) { s.retryMin, s.retryMax = min, max }
}

func (s settings) with(opts []Option) settings {
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
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
	}
	return nil
}
