// Package sim is a deterministic, seeded simulation of the library: Clients over simulated
// Redis servers (miniredis, with clocks of their own, crashes and the INFO that the
// restart guard reads), reached through the go-redis backend behind a fault layer, all in
// one testing/synctest bubble, so that a run takes virtual time and its faults come from
// its seed. Run checks each run's record of grants, waits and writes against the
// primitives' invariants. The servers run their scripts on internal/simlua's engine, which
// records which script wrote each key (Result.Writers) and, unless Config.LooseKeys,
// refuses a command that names a key the script was not given in KEYS. docs/design.md ("Deterministic simulation") says what it covers
// and what it cannot; `go test ./internal/sim -run Sim -seed N -v` replays a seed.
package sim
