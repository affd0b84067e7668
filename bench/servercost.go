package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
	script := func(p goredis.Pipeliner, k core.Keys, token string) {
		p.EvalSha(ctx, acquire.SHA1(), k.ScriptKeys(), token, "10000", "0", "0", "w", "1", "1000")
	}
	fenced := func(p goredis.Pipeliner, k core.Keys, token string) {
		p.EvalSha(ctx, acquire.SHA1(), k.ScriptKeys(), token, "10000", "0", "1", "w", "1", "1000")
	}
	ours := func(p goredis.Pipeliner, k core.Keys, token string) {
		p.EvalSha(ctx, release.SHA1(), k.ScriptKeys(), token, k.Channel, "PUBLISH", "w", "leave")
	}
	floorUnlock := func(p goredis.Pipeliner, k core.Keys, token string) { cad.EvalSha(ctx, p, []string{k.Lock}, token) }
	kinds := []pair{
		{"floor: SET NX PX, compare-and-delete", setNX, floorUnlock, "set", 1},
		{"redlock Mutex: SET NX PX, release script", setNX, ours, "set", 1},
		{"acquire script (guard off, no fence), release script", script, ours, "evalsha", 1},
		{"acquire script (fenced), release script", fenced, ours, "evalsha", 1},
		{"two names: acquire script (guard off, no fence), release script", script, ours, "evalsha", 2},
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
