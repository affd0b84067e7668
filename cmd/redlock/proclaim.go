package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strconv"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
)

// proclaimEnv names, in an elected command's environment, the file descriptor on which
// each line the command writes becomes the leader's value (Election.Proclaim).
const proclaimEnv = "REDLOCK_PROCLAIM_FD"

// proclaimer reads the lines an elected command writes on the pipe it is given, and
// proclaims each as the leader's value.
type proclaimer struct {
	w    *os.File // the command's end, closed in redlock once the command started
	done chan struct{}
}

// proclaimPipe gives cmd's command (of r, which leads election e as leader) a pipe,
// named in its environment by proclaimEnv, and returns what reads it. Call started once
// the command started, or failed to.
func (r *runner) proclaimPipe(e *redlock.Election, leader *redlock.Lease) (*proclaimer, error) {
	rd, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r.cmd.ExtraFiles = append(r.cmd.ExtraFiles, w)
	fd := 2 + len(r.cmd.ExtraFiles) // ExtraFiles[i] is descriptor 3 + i
	r.cmd.Env = append(r.cmd.Env, proclaimEnv+"="+strconv.Itoa(fd))
	p := &proclaimer{w: w, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer rd.Close()
		lines := bufio.NewScanner(rd)
		lines.Buffer(make([]byte, 0, 4096), core.MaxValueLen+1)
		for lines.Scan() {
			value := lines.Text()
			if err := e.Proclaim(context.Background(), leader, value); err != nil {
				r.say("could not proclaim %s: %v", strconv.Quote(value), err)
				if errors.Is(err, redlock.ErrNotHeld) {
					return
				}
			}
		}
		if err := lines.Err(); err != nil {
			r.say("could not read the values the command proclaims: %v", err)
		}
	}()
	return p, nil
}

// started closes redlock's copy of the command's end of the pipe, so that the reader ends
// when the command (and whatever it shares the descriptor with) closes it.
func (p *proclaimer) started() { _ = p.w.Close() }
