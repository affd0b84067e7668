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
across machines, over Redis (the Redlock algorithm over one or several masters). It
also runs a command while leading an election, and shows who holds a lock.

Usage:
  redlock run NAME [flags] [--] COMMAND [ARG...]         run COMMAND holding lock NAME
                                                         (-name NAME: every NAME at once)
  redlock elect NAME [flags] [--] COMMAND [ARG...]       run COMMAND while leading election NAME
  redlock elect -observe NAME [flags]                    print each new leader of election NAME
  redlock status [flags] NAME                            show who holds NAME, and who waits
  redlock break [-force] [flags] NAME                    end whatever holds NAME, asking first
  redlock version                                        print redlock's version
  redlock help [run|elect|status|break]                  print this, or a command's usage

Example:
  REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 redlock run backup -- ./backup.sh

Run 'redlock help COMMAND' for a command's flags and exit statuses.
`

func main() {
	if len(os.Args) > 1 && sentinelCmd != "" && os.Args[1] == sentinelCmd {
		os.Exit(sentinelMain(os.Args[2:]))
	}
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
	case cmd == cmdRun:
		return runMain(rest, getenv, stdout, stderr)
	case cmd == cmdElect:
		return electMain(rest, getenv, stdout, stderr)
	case cmd == cmdStatus:
		return statusMain(rest, getenv, stdout, stderr)
	case cmd == cmdBreak:
		return breakMain(rest, getenv, os.Stdin, stdout, stderr)
	case cmd == "version" && len(rest) == 0:
		fmt.Fprintln(stdout, "redlock", version())
		return 0
	case (cmd == "help" || cmd == "-h" || cmd == "-help" || cmd == "--help") && len(rest) == 0:
		fmt.Fprint(stdout, usage)
		return 0
	case cmd == "help" && len(rest) == 1 && (rest[0] == cmdRun || rest[0] == cmdElect):
		fmt.Fprint(stdout, commandUsage(rest[0]))
		return 0
	case cmd == "help" && len(rest) == 1 && rest[0] == cmdStatus:
		fmt.Fprint(stdout, statusUsage())
		return 0
	case cmd == "help" && len(rest) == 1 && rest[0] == cmdBreak:
		fmt.Fprint(stdout, breakUsage())
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
