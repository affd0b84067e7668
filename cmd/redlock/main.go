package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// usage is redlock's top-level usage text.
const usage = `redlock runs a command while holding a lock shared by many machines: a flock(1)
across machines, over Redis (the Redlock algorithm over one or several masters).

Usage:
  redlock run -name NAME [flags] [--] COMMAND [ARG...]   run COMMAND holding lock NAME
  redlock version                                        print redlock's version
  redlock help [run]                                     print this, or run's usage

Example:
  REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 redlock run -name backup -- ./backup.sh

Run 'redlock run -h' for its flags, exit statuses and signals.
`

func main() {
	os.Exit(redlockMain(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// redlockMain runs the subcommand that args name and returns the exit status. getenv reads
// the environment; usage goes to stdout when asked for, to stderr after a mistake.
func redlockMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "run":
		return runMain(rest, getenv, stdout, stderr)
	case cmd == "version" && len(rest) == 0:
		fmt.Fprintln(stdout, "redlock", version())
		return 0
	case (cmd == "help" || cmd == "-h" || cmd == "-help" || cmd == "--help") && len(rest) == 0:
		fmt.Fprint(stdout, usage)
		return 0
	case cmd == "help" && len(rest) == 1 && rest[0] == "run":
		fmt.Fprint(stdout, runUsage())
		return 0
	}
	fmt.Fprintf(stderr, "redlock: unknown command or arguments: %s\n\n%s", strings.Join(args, " "), usage)
	return exitUsage
}

// version returns the module version redlock was built from ("(devel)" for a build from a
// working tree).
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(unknown)"
}
