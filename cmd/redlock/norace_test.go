//go:build !race

package main

// raceEnabled is whether the tests run with the race detector; TestMain then builds the
// redlock binary with it too.
const raceEnabled = false
