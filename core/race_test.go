//go:build race

package core

// raceEnabled: the race detector is on, and sync.Pool drops a share of what it is given.
const raceEnabled = true
