package main

import "time"

// clock is the one monotonic clock every record is stamped on: the time since its origin,
// read from Go's monotonic clock (time.Since), so that wall-clock steps cannot reorder
// events. A lease's Until (a time.Time with a monotonic reading) is put on it with at.
type clock struct{ origin time.Time }

func newClock() clock { return clock{origin: time.Now()} }

// now returns the current time on the clock.
func (c clock) now() time.Duration { return time.Since(c.origin) }

// at returns t on the clock.
func (c clock) at(t time.Time) time.Duration { return t.Sub(c.origin) }
