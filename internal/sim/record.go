package sim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// role is what a holding lets its holder do.
type role string

const (
	writer role = "writer" // a Mutex, a Lease, a write lock, Do
	reader role = "reader" // a read lock
	permit role = "permit" // one of a Semaphore's K
	leader role = "leader" // an Election's leader
)

// holding is one grant, from the moment its call returned to the moment its holder let it
// go or could no longer count on it: its release began, the library said it was lost, or
// its validity (its last Until) ended, whichever came first.
type holding struct {
	client int
	role   role
	k      int    // permit: the number of permits the holder counts
	token  uint64 // fenced holdings: the fencing token
	fenced bool
	value  string // leader: its value
	from   time.Time
	to     time.Time // zero while held
}

// wait is one call that waits for a lock: from its start to its grant or its end.
type wait struct {
	client int
	from   time.Time
	to     time.Time // zero while it waits
	keeps  bool      // it asks until granted (no deadline of its own, no refusal expected)
	got    bool
}

// write is a write to the fenced resource.
type write struct {
	at       time.Time
	holding  int // index in recorder.holdings
	token    uint64
	accepted bool
}

// event is a line of the trace.
type event struct {
	at   time.Time
	text string
}

// recorder keeps a run's record, on the bubble's clock: every grant, wait and write, and
// the trace of faults and grants. It is the fenced resource too: a write is accepted if
// its token is at least the largest accepted so far.
type recorder struct {
	start time.Time

	mu       sync.Mutex
	holdings []holding
	waits    []wait
	writes   []write
	maxToken uint64
	events   []event
	observed []event        // Election: the leaders' values an observer saw
	calls    map[string]int // calls sent, per script (or "setnx")
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, calls: make(map[string]int)}
}

// called counts a call of what.
func (r *recorder) called(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[what]++
}

// note adds a line to the trace.
func (r *recorder) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{time.Now(), fmt.Sprintf(format, args...)})
}

// noteAt adds a line to the trace at t (a scheduled fault).
func (r *recorder) noteAt(t time.Time, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{t, fmt.Sprintf(format, args...)})
}

// asking records that client begins to wait, and returns the wait's index.
func (r *recorder) asking(client int, keeps bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, wait{client: client, from: time.Now(), keeps: keeps})
	return len(r.waits) - 1
}

// answered ends wait w, granted or not.
func (r *recorder) answered(w int, got bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits[w].to, r.waits[w].got = time.Now(), got
}

// granted records a holding h that begins now, and returns its index.
func (r *recorder) granted(h holding) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.from = time.Now()
	r.holdings = append(r.holdings, h)
	desc := fmt.Sprintf("c%d granted %s", h.client, h.role)
	if h.fenced {
		desc += fmt.Sprintf(" token=%d", h.token)
	}
	if h.role == permit {
		desc += fmt.Sprintf(" K=%d", h.k)
	}
	if h.value != "" {
		desc += " value=" + h.value
	}
	r.events = append(r.events, event{h.from, desc})
	return len(r.holdings) - 1
}

// ended ends holding i at t (no later than now), for the reason why.
func (r *recorder) ended(i int, t time.Time, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &r.holdings[i]
	if !h.to.IsZero() {
		return
	}
	h.to = t
	r.events = append(r.events, event{t, fmt.Sprintf("c%d ends %s (%s)", h.client, h.role, why)})
}

// write records a write of holding i with token, and reports whether the resource
// accepted it.
func (r *recorder) write(i int, token uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := token >= r.maxToken
	if ok {
		r.maxToken = token
	}
	r.writes = append(r.writes, write{time.Now(), i, token, ok})
	if !ok {
		r.events = append(r.events, event{time.Now(), fmt.Sprintf("c%d write token=%d rejected", r.holdings[i].client, token)})
	}
	return ok
}

// observe records that an observer saw value as the leader's.
func (r *recorder) observe(value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observed = append(r.observed, event{time.Now(), value})
	r.events = append(r.events, event{time.Now(), "observer sees " + fmt.Sprintf("%q", value)})
}

// since formats t as the time since the run's start.
func (r *recorder) since(t time.Time) string {
	return fmt.Sprintf("%9.3fs", t.Sub(r.start).Seconds())
}

// trace returns the record's lines in time order up to until, at most max of them (the
// last ones).
func (r *recorder) trace(until time.Time, max int) string {
	r.mu.Lock()
	evs := slices.Clone(r.events)
	r.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	var lines []string
	for _, e := range evs {
		if !until.IsZero() && e.at.After(until) {
			break
		}
		lines = append(lines, r.since(e.at)+" "+e.text)
	}
	if len(lines) > max {
		lines = append([]string{fmt.Sprintf("... %d earlier lines", len(lines)-max)}, lines[len(lines)-max:]...)
	}
	return strings.Join(lines, "\n")
}
