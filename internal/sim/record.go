package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
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
	// names are the names it holds (sorted): a lock over several names at once holds each
	// of them, for its validity, under its one token. nil: the run's one lock, lockName.
	names []string
	from  time.Time
	to    time.Time // zero while held
	// busyTo, if after to, is when the lock stopped being taken for the holding: a Do whose
	// context ended before its function returned keeps its lease until then.
	busyTo time.Time
}

// busyUntil returns when the lock stopped being taken for h (see busyTo).
func (h holding) busyUntil() time.Time {
	if h.busyTo.After(h.to) {
		return h.busyTo
	}
	return h.to
}

// wait is one call that waits for a lock: from its start to its grant or its end.
type wait struct {
	client int
	from   time.Time
	to     time.Time // zero while it waits
	keeps  bool      // it asks until granted (no deadline of its own, no refusal expected)
	got    bool
	err    string // why it ended without a grant
	// invalid: err matches redlock.ErrInvalid, a refusal of the configuration (twoaddrs,
	// and a Semaphore's holders that count different Ks)
	invalid bool
	// documented: err is one the acquisition's contract gives a wait that keeps asking (see
	// documented)
	documented bool
}

// on returns the names that h holds.
func (h *holding) on() []string {
	if h.names == nil {
		return []string{lockName}
	}
	return h.names
}

// shares reports whether h and b hold a name in common.
func (h *holding) shares(b *holding) bool {
	return slices.ContainsFunc(h.on(), func(n string) bool { return slices.Contains(b.on(), n) })
}

// write is a write to a name's fenced resource.
type write struct {
	at       time.Time
	holding  int    // index in recorder.holdings
	name     string // the resource written: each name has its own
	token    uint64
	accepted bool
}

// event is a line of the trace.
type event struct {
	at   time.Time
	text string
}

// recorder keeps a run's record, on the bubble's clock: every grant, wait and write, and
// the trace of faults and grants. It is the fenced resources too, one per name: a write is
// accepted if its token is at least the largest that name's resource accepted so far.
type recorder struct {
	start time.Time

	mu       sync.Mutex
	holdings []holding
	waits    []wait
	writes   []write
	maxToken map[string]uint64 // per name
	events   []event
	observed []event        // Election: the leaders' values an observer saw
	reads    []leaderRead   // Election: the observer's calls of Leader
	standing []int          // Election: the observed values seen while a lock stood (see observe)
	calls    map[string]int // calls sent, per script (or "setnx")
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, calls: make(map[string]int), maxToken: make(map[string]uint64)}
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

// answered ends wait w: granted if err is nil, else refused with err.
func (r *recorder) answered(w int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits[w].to, r.waits[w].got = time.Now(), err == nil
	if err != nil {
		r.waits[w].err, r.waits[w].invalid = err.Error(), errors.Is(err, redlock.ErrInvalid)
		r.waits[w].documented = errors.As(err, new(documented))
	}
}

// granted records a holding h that begins now, and returns its index.
func (r *recorder) granted(h holding) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.from = time.Now()
	r.holdings = append(r.holdings, h)
	desc := fmt.Sprintf("c%d granted %s", h.client, h.role)
	if h.names != nil {
		desc += " of " + strings.Join(h.names, ",")
	}
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
// returned records that holding i's function returned at t: its end, unless it ended
// already (then the lock stayed taken until t: see busyTo).
func (r *recorder) returned(i int, t time.Time) {
	r.mu.Lock()
	if h := &r.holdings[i]; !h.to.IsZero() {
		h.busyTo = t
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.ended(i, t, "returns")
}

// busy records that holding i's lock may stay taken until t (see busyTo).
func (r *recorder) busy(i int, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := &r.holdings[i]; t.After(h.busyTo) {
		h.busyTo = t
	}
}

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

// write records a write of holding i with token to the resource of each name it holds
// (each accepts or rejects it on its own).
func (r *recorder) write(i int, token uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &r.holdings[i]
	for _, name := range h.on() {
		ok := token >= r.maxToken[name]
		if ok {
			r.maxToken[name] = token
		}
		r.writes = append(r.writes, write{time.Now(), i, name, token, ok})
		if !ok {
			r.events = append(r.events, event{time.Now(), fmt.Sprintf("c%d write token=%d to %s rejected", h.client, token, name)})
		}
	}
}

// leaderRead is a call of Election.Leader: when it began and returned, and what it said.
type leaderRead struct {
	from, to time.Time
	value    string
	err      error
	standing bool // a quorum of the servers held one owner's lock key as it returned
}

// read records a call of Leader, begun at from, that returned value and err now; standing
// says whether a quorum of the servers held one owner's lock key then.
func (r *recorder) read(from time.Time, value string, err error, standing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, leaderRead{from, time.Now(), value, err, standing})
	if err != nil {
		r.events = append(r.events, event{time.Now(), fmt.Sprintf("Leader says %v", err)})
	}
}

// observe records that an observer saw value as the leader's; standing, that a quorum of
// the servers held one owner's lock key then (see read).
func (r *recorder) observe(value string, standing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observed = append(r.observed, event{time.Now(), value})
	if standing {
		r.standing = append(r.standing, len(r.observed)-1)
	}
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
