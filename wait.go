package redlock

import (
	"errors"
	"time"
)

// waitLog returns what a wait for the lock called name calls after each failed attempt
// (see core.Lock.Failed): with a logger in s, it logs at Warn once the wait has lasted
// s.warnAfter and an attempt failed for another reason than a holder (nodes down or
// refusing, the restart guard...), and then at most every s.warnEvery, with the attempt's
// error, which names each failing node and its error. Without a logger it returns nil.
func waitLog(s settings, name string) func(error) {
	if s.logger == nil {
		return nil
	}
	// The function keeps only what it needs of s: a closure holds a large struct by
	// reference, which would move s to the heap on every call, logger or not.
	logger, every := s.logger, s.warnEvery
	start := time.Now()
	next := start.Add(s.warnAfter)
	return func(err error) {
		if errors.Is(err, ErrHeld) {
			return // another owner holds it: waiting is what a lock does
		}
		now := time.Now()
		if now.Before(next) {
			return
		}
		next = now.Add(every)
		logger.Warn("redlock: still waiting for the lock", "name", name,
			"waited", now.Sub(start).Round(time.Millisecond), "error", err)
	}
}
