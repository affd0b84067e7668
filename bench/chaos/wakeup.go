package main

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"time"
)

// roundTrips measures PING's round trip to the server at addr over one connection, with no
// proxy and no driver: n calls back to back, then n calls each after idle of sleep, and
// returns the medians. On a virtual machine whose idle vCPUs halt, the second is many times
// the first: a lock call made after its process slept (a holder's release, after a holding
// of 1-50 ms) pays that wake-up, which bounds the held share with no fault.
func roundTrips(addr string, n int, idle time.Duration) (busy, rested time.Duration, err error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	ping := func() (time.Duration, error) {
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		start := time.Now()
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			return 0, err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if line != "+PONG\r\n" {
			return 0, fmt.Errorf("PING replied %q", line)
		}
		return time.Since(start), nil
	}
	median := func(sleep time.Duration) (time.Duration, error) {
		ds := make([]time.Duration, 0, n)
		for range n {
			time.Sleep(sleep)
			d, err := ping()
			if err != nil {
				return 0, err
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)/2], nil
	}
	if busy, err = median(0); err != nil {
		return 0, 0, err
	}
	rested, err = median(idle)
	return busy, rested, err
}
