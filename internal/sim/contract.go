package sim

import (
	"bufio"
	"bytes"
	"strconv"
	"sync"

	"github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock/core"
)

// scriptNames maps the SHA1 of each script that a Node ran to its name, for the servers'
// checks of what a script does inside (see simServer.checkSet, simServer.refused) and the
// record of writers (Result.Writers); safe for concurrent use.
type scriptNames struct{ m sync.Map }

func (n *scriptNames) note(s *core.Script) { n.m.LoadOrStore(s.SHA1(), s.Name()) }

func (n *scriptNames) name(sha string) string {
	v, _ := n.m.Load(sha)
	s, _ := v.(string)
	return s
}

// checkSet checks a SET that a script runs on a server (args: key, value, ...): an
// extension (extend, rextend) resets a lock key only while it holds the extender's token,
// or takes it where it is free (extend.lua: "{0} a name is another's"). A SET of a token
// over another token is a violation: the extension took another owner's lock. Fence
// counters, whose values are numbers, are not lock keys.
func (s *simServer) checkSet(srv *server.Server, p *server.Peer, script string, args []string) {
	if (script != "extend" && script != "rextend") || len(args) < 2 || isNumber(args[1]) {
		return
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	get := server.NewPeer(w)
	get.Ctx = p.Ctx
	srv.Dispatch(get, []string{"GET", args[0]})
	_ = w.Flush()
	old, err := server.ParseReply(bufio.NewReader(&buf))
	was, _ := old.(string)
	if err != nil || was == "" || was == args[1] || isNumber(was) {
		return
	}
	if s.report != nil {
		s.report("%s: %s set %s to %q over another owner's %q", s.name, script, args[0], args[1], was)
	}
}

func isNumber(v string) bool {
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}
