//go:build !linux

package main

// adoptOrphans does nothing outside Linux: the command's orphaned descendants go to the
// system's first process (init, launchd), which reaps them.
func adoptOrphans() {}
