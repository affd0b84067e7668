package simnet

import (
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/simlua"
)

// writerRecord is a server's record of which scripts wrote which keys (see
// RecordWriters): the record the engines keep, and the names of the scripts it was given.
type writerRecord struct {
	rec   *simlua.Record
	names map[string]string // script names by SHA-1; read-only
}

// RecordWriters starts a new, empty record of the scripts that write each key on the
// server, which Writers returns; it is off until RecordWriters is called, and a server
// keeps no record then. A script is named by its Name if it is one of scripts (matched by
// SHA-1, so a script run by EVAL of the same source is it), or by its SHA-1 (40 lower-case
// hex digits) otherwise: RecordWriters(core.Scripts()...) names the library's own.
//
// A script writes a key when it calls, through redis.call or redis.pcall, a command of the
// table in simlua's commands.go that may modify it (SET, DEL, PEXPIRE, INCR, ZADD, ZREM,
// ZREMRANGEBYSCORE, HSET, HDEL), naming that key, whether or not the call changes it (a
// SET NX of a key that is set, a DEL of a missing key) or fails; a command that only reads
// (GET, EXISTS, ZRANGE, ...) is not recorded. While the record is kept, a script's command
// outside that table is refused, and scripts run on the pooled engine, as under
// SetStrictKeys (see there). Commands sent by clients, not by a script, are not recorded.
// The record holds across restarts, and is safe for concurrent use.
func (s *Server) RecordWriters(scripts ...*core.Script) {
	names := make(map[string]string, len(scripts))
	for _, sc := range scripts {
		names[sc.SHA1()] = sc.Name()
	}
	s.writers.Store(&writerRecord{rec: simlua.NewRecord(), names: names})
}

// Writers returns the record that RecordWriters started: for each key a script wrote, the
// names of the scripts that wrote it, sorted, each once. It returns nil if RecordWriters
// was never called. The map is the caller's: the server does not change it.
func (s *Server) Writers() map[string][]string {
	w := s.writers.Load()
	if w == nil {
		return nil
	}
	return w.rec.Writers(func(sha string) string { return w.names[sha] })
}
