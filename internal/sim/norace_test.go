//go:build !race

package sim

// raceDetector reports whether the tests run under the race detector, which makes a run
// four to five times as slow.
const raceDetector = false
