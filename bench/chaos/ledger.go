package main

import (
	"sync"
	"time"
)

// ledger is the shared resource the workers write with their fencing tokens: it accepts a
// write whose token is at least the newest it accepted (a holder writes several times with
// one token) and rejects an older one, as a store that checks fencing tokens does. It
// stamps every write on the clock under its lock, so the stamps order the writes as the
// ledger saw them.
type ledger struct {
	clk clock

	mu     sync.Mutex
	newest uint64
	writes []write
}

// write is one write the ledger saw.
type write struct {
	lease    int64         // the lease it was made under (grant.id)
	token    uint64        // its fencing token
	at       time.Duration // the ledger's stamp
	accepted bool
	late     bool // the writer had paused past its validity (client-pause)
}

// maxWrites bounds the ledger's record; later writes are still checked against newest.
const maxWrites = 1 << 21

func newLedger(clk clock) *ledger { return &ledger{clk: clk} }

// write records a write of lease with token, and reports whether it was accepted.
func (l *ledger) write(lease int64, token uint64, late bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := token >= l.newest
	if ok {
		l.newest = token
	}
	if len(l.writes) < maxWrites {
		l.writes = append(l.writes, write{lease: lease, token: token, at: l.clk.now(), accepted: ok, late: late})
	}
	return ok
}

// record returns the writes in stamp order.
func (l *ledger) record() []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]write(nil), l.writes...)
}
