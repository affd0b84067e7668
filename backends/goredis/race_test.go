//go:build race

package goredis_test

// raceEnabled: the race detector is on, and sync.Pool drops a share of what it is given.
const raceEnabled = true
