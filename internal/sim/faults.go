package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is a kind of fault, chosen by the seed, that the fault layer injects during a run's
// fault window.
type Kind string

// The kinds of fault. Each run injects one kind (Mix: several at once); the window ends
// before the run's healed phase.
const (
	// None injects nothing: the baseline.
	None Kind = "none"
	// Delay holds up requests and replies, each within the node timeout.
	Delay Kind = "delay"
	// Slow holds up requests and replies from 0 to twice the node timeout: a request may
	// run after its caller gave up on it, and after the release sent since.
	Slow Kind = "slow"
	// LostReply runs the script and loses its reply: the connection resets (the caller
	// sees an error at once) or the reply never comes (the caller times out).
	LostReply Kind = "lostreply"
	// Twice runs the request, loses its reply with the connection, and runs it again up
	// to a node timeout later, as a backend that resends a call on a new connection
	// does; the caller gets the second reply. Other calls are held up as by Delay, so
	// that one sent earlier can land between the two runs.
	Twice Kind = "twice"
	// Partition cuts links in both directions for a while: a minority of servers from
	// every client, or one client from every server, or one client from one server.
	Partition Kind = "partition"
	// Asym cuts links in one direction: requests arrive (and run) but replies and release
	// notifications are lost, or requests are lost while notifications still arrive.
	Asym Kind = "asym"
	// Crash stops a server, which loses its data, and starts it again empty after a
	// while: uptime 0 and a new run_id.
	Crash Kind = "crash"
	// Clock gives each server a clock offset (up to a minute) and a rate within the
	// documented drift allowance (the drift factor, 1%, less a margin).
	Clock Kind = "clock"
	// Pause pauses a holder (a GC pause, say) between its check of the validity and its
	// write, for up to twice the TTL: only the fencing token can then stop the write.
	Pause Kind = "pause"
	// Die makes a client die while it holds: it sends and receives nothing more and never
	// releases.
	Die Kind = "die"
	// Mix injects all of the above at once, each less often.
	Mix Kind = "mix"
	// ClockUnsafe gives servers clock rates beyond the drift allowance (1.2 to 2 times as
	// fast), and holdings that last long enough for it to matter: Redlock is expected to be
	// unsafe there. Never in the default set.
	ClockUnsafe Kind = "clock-unsafe"
)

// Kinds returns the fault kinds of the default set, in the order the seeds cycle through
// them.
func Kinds() []Kind {
	return []Kind{None, Delay, Slow, LostReply, Twice, Partition, Asym, Crash, Clock, Pause, Die, Mix}
}

// cut is a link cut for a while: client -1 means every client, server -1 every server.
type cut struct {
	client, server     int
	toServer, toClient bool // the directions cut
	from, to           time.Time
}

func (c cut) cuts(client, server int, toServer bool, t time.Time) bool {
	return (c.client < 0 || c.client == client) && (c.server < 0 || c.server == server) &&
		!t.Before(c.from) && t.Before(c.to) && ((toServer && c.toServer) || (!toServer && c.toClient))
}

// crash is a server crash: down at at, up again (empty) downFor later.
type crash struct {
	server  int
	at      time.Time
	downFor time.Duration
}

// plan is a run's faults, all drawn from its seed before the run starts, so that they
// depend on nothing that happens in it. Per-call faults are drawn as calls are made, from
// each link's own source (see link).
type plan struct {
	kind     Kind
	from, to time.Time // the fault window

	callP       float64       // the chance that a call in the window meets a per-call fault
	delayMax    time.Duration // Delay, Slow: the largest delay of a request or a reply
	delayWithin bool          // Delay: a request's and its reply's delays add up to at most delayMax
	lost        bool          // LostReply
	twice       bool          // Twice

	cuts    []cut
	crashes []crash
	clocks  []clock // per server
	pause   time.Duration
	// longHolds: holdings last up to 1.2 s, past the time a fast clock lets a key live
	longHolds bool
	deaths    []time.Time // per client (and the observer, last, which never dies): when it dies; zero: never
}

// in reports whether t is inside the fault window.
func (p *plan) in(t time.Time) bool { return !t.Before(p.from) && t.Before(p.to) }

// cut reports whether the link from client to server is cut at t in the given direction.
func (p *plan) cut(client, server int, toServer bool, t time.Time) bool {
	return slices.ContainsFunc(p.cuts, func(c cut) bool { return c.cuts(client, server, toServer, t) })
}

// dead reports whether client has died by t.
func (p *plan) dead(client int, t time.Time) bool {
	d := p.deaths[client]
	return !d.IsZero() && !t.Before(d)
}

// newPlan draws the faults of kind for a run of n servers and the given clients, starting
// at start, with its fault window [from, to).
//
// Unless skewAcrossRestarts, a Mix that crashes servers gives them no clock offsets (see
// Config.SkewAcrossRestarts).
func newPlan(kind Kind, rng *rand.Rand, start, from, to time.Time, n, clients int, ttl, nodeTimeout time.Duration, skewAcrossRestarts bool) *plan {
	p := &plan{kind: kind, from: from, to: to, deaths: make([]time.Time, clients+1), clocks: make([]clock, n)}
	for i := range p.clocks {
		p.clocks[i] = clock{start: start, rate: 1}
	}
	window := to.Sub(from)
	at := func() time.Time { return from.Add(time.Duration(rng.Int64N(int64(window)))) }
	draw := func(k Kind) {
		switch k {
		case Delay:
			p.callP, p.delayMax, p.delayWithin = 0.1+0.4*rng.Float64(), nodeTimeout*9/10, true
		case Slow:
			p.callP, p.delayMax = 0.05+0.3*rng.Float64(), 2*nodeTimeout
		case LostReply:
			p.callP, p.lost = 0.05+0.25*rng.Float64(), true
		case Twice:
			p.callP, p.twice = 0.1+0.5*rng.Float64(), true
			p.delayMax, p.delayWithin = nodeTimeout*9/10, true // so that a late call can land between the runs
		case Partition, Asym:
			for range 1 + rng.IntN(3) {
				c := cut{client: -1, server: -1, toServer: true, toClient: true}
				switch rng.IntN(3) {
				case 0: // a minority of servers from everyone
					c.server = rng.IntN(n)
				case 1: // one client from everyone
					c.client = rng.IntN(clients)
				default: // one link
					c.client, c.server = rng.IntN(clients), rng.IntN(n)
				}
				if k == Asym {
					c.toServer = rng.IntN(2) == 0
					c.toClient = !c.toServer
				}
				c.from = at()
				c.to = c.from.Add(time.Duration(rng.Int64N(int64(window))) / 2)
				p.cuts = append(p.cuts, c)
			}
		case Crash:
			for range 1 + rng.IntN(2) {
				c := crash{server: rng.IntN(n), at: at()}
				c.downFor = time.Duration(rng.Int64N(int64(2 * ttl)))
				if rng.IntN(2) == 0 { // back before its holders' time is up
					c.downFor /= 10
				}
				p.crashes = append(p.crashes, c)
			}
		case Clock, ClockUnsafe:
			for i := range p.clocks {
				p.clocks[i].offset = time.Duration(rng.Int64N(int64(2*time.Minute))) - time.Minute
				if k == Clock {
					p.clocks[i].rate = 1 + (rng.Float64()*2-1)*0.008
				} else {
					p.clocks[i].rate = 1.2 + rng.Float64()*0.8
					p.longHolds = true
				}
			}
		case Pause:
			p.pause = 2 * ttl
		case Die:
			c := rng.IntN(clients)
			p.deaths[c] = at()
		}
	}
	if kind == Mix {
		for _, k := range Kinds() {
			if k != None && k != Mix && rng.IntN(2) == 0 {
				draw(k)
			}
		}
		p.callP /= 2
		if len(p.crashes) > 0 && !skewAcrossRestarts {
			for i := range p.clocks { // beyond the guard's contract (see Config.SkewAcrossRestarts)
				p.clocks[i].offset = 0
			}
		}
	} else {
		draw(kind)
	}
	return p
}

// String describes the plan's scheduled faults, for the trace.
func (p *plan) String() string {
	s := fmt.Sprintf("faults %s", p.kind)
	if p.callP > 0 {
		s += fmt.Sprintf(" p=%.2f", p.callP)
	}
	if p.delayMax > 0 {
		s += fmt.Sprintf(" delay<=%v", p.delayMax)
	}
	if p.lost {
		s += " lost-replies"
	}
	if p.twice {
		s += " run-twice"
	}
	if p.pause > 0 {
		s += fmt.Sprintf(" pauses<=%v", p.pause)
	}
	for i, c := range p.clocks {
		if c.offset != 0 || c.rate != 1 {
			s += fmt.Sprintf(" s%d-clock(%+v,x%.4f)", i, c.offset, c.rate)
		}
	}
	return s
}
