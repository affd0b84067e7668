package simnet

// keptStack is how much stack a process's goroutine keeps in use while the process runs
// (see keepStack).
//
// The runtime starts each new goroutine with a stack the size of the average that
// goroutines had in use at the last garbage collection, plus a guard, rounded up to a
// power of two (GODEBUG's adaptivestackstart): in a test's process, of a few goroutines
// parked in shallow frames, the smallest, 2 KiB. A client of the kit calls each server
// from a new goroutine (core's fan-out, one per node call) whose stack then grows twice, to
// 4 and to 8 KiB, to fit go-redis's frames and the script engine's, each time copying
// itself frame by frame: a fifth of the CPU time of a lock and unlock at the kit's
// default. Each process keeps a goroutine parked with keptStack in use, which raises that
// average, so that, with 3 servers and few other goroutines, new goroutines start at
// 8 KiB and make no copies. The cost is bounded: with G goroutines, the kept stacks raise
// the average by their total over G, and so the stacks of all G together by about twice
// the kept stacks at most (the rounding); in a process of many goroutines they raise it
// by little, and change nothing.
const keptStack = 16 << 10

// keepStack keeps n bytes of the calling goroutine's stack in use, in frames of 1 KiB,
// until done is closed.
func keepStack(n int, done <-chan struct{}) byte {
	var frame [1 << 10]byte
	frame[n%len(frame)] = byte(n) // frame is used: the compiler keeps it on the stack
	if n > len(frame) {
		return keepStack(n-len(frame), done) + frame[n/2%len(frame)]
	}
	<-done
	return frame[0]
}
