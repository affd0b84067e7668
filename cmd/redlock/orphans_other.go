//go:build !linux

package main

import "os"

// adoptOrphans does nothing outside Linux: the command's orphaned descendants go to the
// system's first process (init, launchd), which reaps them. Its channel never gets a
// signal.
func adoptOrphans() (<-chan os.Signal, func()) { return nil, func() {} }

// exitedChild returns 0: outside Linux, redlock adopts no child to reap.
func exitedChild() int { return 0 }
