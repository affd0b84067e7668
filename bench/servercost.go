package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-redlock/redlock/core"
	goredis "github.com/redis/go-redis/v9"
)

// costRow is the server time of one kind of lock+unlock pair, from INFO commandstats: the
// time the server spent in its two commands (a script's time includes the commands it
// runs), without reading the requests and writing the replies.
type costRow struct {
	name    string
	perPair float64 // microseconds
}

// serverCost sends pairs lock+unlock pairs, pipelined, to the server at addr for each
// kind of pair an uncontended lock sends, and reads the server's own time per command.
func serverCost(ctx context.Context, addr string, pairs int) ([]costRow, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	scripts := core.Scripts() // acquire, extend, release, raise
	acquire, release := scripts[0], scripts[2]
	cad := goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	for _, s := range []*core.Script{acquire, release} {
		if err := rdb.ScriptLoad(ctx, s.Source()).Err(); err != nil {
			return nil, err
		}
	}
	if err := cad.Load(ctx, rdb).Err(); err != nil {
		return nil, err
	}
	type pair struct {
		name      string
		lock, unl func(p goredis.Pipeliner, k core.Keys, token string)
		lockCmd   string
		names     int // names per lock: 2 for a set (core.NewSetKeys)
	}
	setNX := func(p goredis.Pipeliner, k core.Keys, token string) { p.SetNX(ctx, k.Lock, token, floorTTL) }
	// acquireAs returns the acquire script's call as a Lock sends it: a waiter's first attempt
	// ("<waiter>.1"), with the restart guard in seconds ("0": off), the fence ("0": none, "1":
	// any) and the mode ("w" a writer, "r" a reader).
	acquireAs := func(guard, fence, mode string) func(p goredis.Pipeliner, k core.Keys, token string) {
		return func(p goredis.Pipeliner, k core.Keys, token string) {
			p.EvalSha(ctx, acquire.SHA1(), scriptKeys(k), token+".1", "10000", guard, fence, token,
				strconv.FormatInt(time.Now().UnixMicro(), 10), "1000", "0", mode, "-1")
		}
	}
	acquireWith := func(guard, fence string) func(p goredis.Pipeliner, k core.Keys, token string) {
		return acquireAs(guard, fence, "w")
	}
	releaseAs := func(mode string) func(p goredis.Pipeliner, k core.Keys, token string) {
		return func(p goredis.Pipeliner, k core.Keys, token string) {
			p.EvalSha(ctx, release.SHA1(), scriptKeys(k), token+".1", mode, "PUBLISH", token, "leave", "0", "0", "0")
		}
	}
	ours := releaseAs("w")
	floorUnlock := func(p goredis.Pipeliner, k core.Keys, token string) { cad.EvalSha(ctx, p, []string{k.Lock}, token) }
	kinds := []pair{
		{"floor: SET NX PX, compare-and-delete", setNX, floorUnlock, "set", 1},
		{"redlock Mutex: acquire script (restart guard 30 s, no fence), release script", acquireWith("30", "0"), ours, "evalsha", 1},
		{"acquire script (guard off, no fence), release script", acquireWith("0", "0"), ours, "evalsha", 1},
		{"acquire script (guard 30 s, fenced), release script", acquireWith("30", "1"), ours, "evalsha", 1},
		{"two names: acquire script (guard 30 s, no fence), release script", acquireWith("30", "0"), ours, "evalsha", 2},
		{"a reader's share: acquire script (guard 30 s), release script", acquireAs("30", "0", "r"), releaseAs("r"), "evalsha", 1},
	}
	var rows []costRow
	for i, kind := range kinds {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return nil, err
		}
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			return nil, err
		}
		const batch = 500
		for done := 0; done < pairs; done += batch {
			p := rdb.Pipeline()
			for j := done; j < min(done+batch, pairs); j++ {
				name := fmt.Sprintf("%d:%d", i, j)
				k := core.NewKeys("cost:", name)
				if kind.names == 2 {
					var err error
					if k, err = core.NewSetKeys("cost:", []string{name, name + "'"}); err != nil {
						return nil, err
					}
				}
				token := fmt.Sprintf("t%d", j)
				kind.lock(p, k, token)
				kind.unl(p, k, token)
			}
			if _, err := p.Exec(ctx); err != nil && err != goredis.Nil {
				return nil, err
			}
		}
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, err
		}
		usec := map[string]float64{}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok {
				continue
			}
			_, rest, _ = strings.Cut(rest, ",usec=")
			u, _, _ := strings.Cut(rest, ",")
			usec[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseFloat(u, 64)
		}
		// A script's time includes the commands it runs, which commandstats also counts on
		// their own: count SET only where it was sent by itself.
		total := usec["evalsha"]
		if kind.lockCmd == "set" {
			total += usec["set"]
		}
		rows = append(rows, costRow{name: kind.name, perPair: total / float64(pairs)})
	}
	return rows, nil
}

// scriptKeys returns the KEYS of the acquire and release scripts for k: each name's six, name
// after name, for a lock over several names (core.NewSetKeys).
func scriptKeys(k core.Keys) []string {
	if len(k.Set) == 0 {
		return k.ScriptKeys()
	}
	var keys []string
	for _, n := range k.Set {
		keys = append(keys, n.ScriptKeys()...)
	}
	return keys
}
