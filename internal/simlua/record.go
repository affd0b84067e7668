package simlua

import (
	"slices"
	"sync"
)

// Record is a record of which scripts wrote which keys, kept by the Engines whose Checks
// name it: one Record may serve several servers, and outlive their processes. A script
// writes a key when it calls, through redis.call or redis.pcall, a command of the table in
// commands.go that may modify it (SET, DEL, PEXPIRE, INCR, ZADD, ZREM, ZREMRANGEBYSCORE,
// HSET, HDEL), naming that key, whether or not the call changes it (a SET NX of a key that
// is set, a DEL of a missing key) or fails, unless a check refused it first; a command that
// only reads (GET, EXISTS, ZRANGE, ...) is not recorded, nor are commands that clients send
// themselves. Make it with NewRecord; its methods are safe for concurrent use.
type Record struct {
	mu    sync.Mutex
	byKey map[string]map[string]struct{} // the SHA-1s of the scripts that wrote each key
}

// NewRecord returns a new, empty record.
func NewRecord() *Record { return &Record{byKey: map[string]map[string]struct{}{}} }

// note notes that the script sha called a command that writes keys.
func (r *Record) note(sha string, keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		shas := r.byKey[k]
		if shas == nil {
			shas = map[string]struct{}{}
			r.byKey[k] = shas
		}
		shas[sha] = struct{}{}
	}
}

// Writers returns, for each key a script wrote, the names of the scripts that wrote it,
// sorted, each once (two scripts of one name are one writer). name names the script of a
// SHA-1 (40 lower-case hex digits), or returns "" for a script it does not know, which is
// then named by its SHA-1; a nil name names every script so. name is called with the
// record locked, so it must not call the record. The map is the caller's: the
// record does not change it.
func (r *Record) Writers(name func(sha string) string) map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]string, len(r.byKey))
	for k, shas := range r.byKey {
		names := make([]string, 0, len(shas))
		for sha := range shas {
			n := sha
			if name != nil {
				if got := name(sha); got != "" {
					n = got
				}
			}
			names = append(names, n)
		}
		slices.Sort(names)
		out[k] = slices.Compact(names)
	}
	return out
}
