// Package simlua runs the Lua scripts of simulated Redis servers (miniredis processes) on
// Lua states that it keeps in a pool, and checks what the scripts do: that every key a
// script's command names was given to it in KEYS (Checks.StrictKeys), and which scripts
// wrote which keys (Record). internal/simnet's Server and internal/sim's servers both run
// their scripts here.
//
// miniredis makes a Lua state for each script call, opening its libraries each time, which
// costs most of a lock's round trip. An Engine runs the same scripts, each compiled once
// for all the processes, on states made once and kept in a pool, the process's own (a
// process that restarts is a new one, with a new Engine: it forgets the scripts it was
// given, as Redis forgets its script cache), and otherwise behaves as miniredis's
// (cmd_scripting.go and lua.go of miniredis v2.40.0, MIT licence, from which it is
// adapted): the same libraries, redis.call and redis.pcall dispatched to the server's own
// commands, the same conversions of replies both ways, globals refused.
//
// A script runs under the process's lock (Miniredis embeds its sync.Mutex), as miniredis
// runs one, so no other command interleaves. Its commands are dispatched with a connection
// context marked nested, as miniredis's are, so that they run under that lock without
// taking it (see New).
//
// What it does not do as miniredis does, none of which the library's scripts or its
// backends use: it runs EVAL and EVALSHA before miniredis's own checks, so a transaction
// (MULTI) does not queue them, and neither authentication nor pub/sub mode refuses them;
// every script runs with database 0 selected; a script that calls EVAL of a script
// miniredis runs (one that EVAL gave it while the engine was off) deadlocks instead of
// being refused; EVAL does not enter a script in miniredis's script table (SCRIPT EXISTS
// says 0 for it); and a global a script sets with rawset, or a change to a library table,
// stays on the reused Lua state for later scripts. SCRIPT LOAD gives a script to both.
//
// The checks (Checks) are made at each redis.call and redis.pcall, before the command is
// dispatched, against the table of commands in commands.go.
package simlua
