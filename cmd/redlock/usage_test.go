package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUsageErrors: a mistake on the command line exits 2 with a message that names it, and
// runs nothing. None of these reaches Redis (the address is a closed port).
func TestUsageErrors(t *testing.T) {
	t.Parallel() // see main_test.go
	const addrs = "-addrs=127.0.0.1:1"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		msg  string
	}{
		{"no arguments", nil, nil, "Usage:"},
		{"unknown subcommand", nil, []string{"lock", "x"}, "unknown command or arguments: lock x"},
		{"version with arguments", nil, []string{"version", "x"}, "unknown command or arguments"},
		{"no -name", nil, []string{"run", addrs, "--", "echo", "ran"}, "no lock name"},
		{"empty NAME", nil, []string{"run", addrs, "", "echo", "ran"}, "an empty NAME"},
		{"NAME, no command", nil, []string{"run", "x", addrs}, "no command to run: give it after the flags, as in redlock run x --"},
		{"NAME and -name, no command", nil, []string{"run", "x", addrs, "-name", "y"}, "as in redlock run x -name y -- COMMAND"},
		{"no command", nil, []string{"run", addrs, "-name", "x"}, "no command to run"},
		{"bad -ttl", nil, []string{"run", addrs, "-name", "x", "-ttl", "ten", "echo", "ran"}, `invalid value "ten" for flag -ttl`},
		{"zero -ttl", nil, []string{"run", addrs, "-name", "x", "-ttl", "0", "echo", "ran"}, "-ttl must be at least 1ms, got 0s"},
		{"-ttl within the drift allowance", nil, []string{"run", addrs, "-name", "x", "-ttl", "2ms", "-node-timeout", "1ms", "echo", "ran"}, "-ttl 2ms leaves no validity"},
		{"-node-timeout not below -ttl", nil, []string{"run", addrs, "-name", "x", "-ttl", "1s", "-node-timeout", "1s", "echo", "ran"}, "-node-timeout must be positive and shorter than -ttl 1s, got 1s"},
		{"zero -node-timeout", nil, []string{"run", addrs, "-name", "x", "-node-timeout", "0", "echo", "ran"}, "-node-timeout must be positive"},
		{"-drift-factor 1", nil, []string{"run", addrs, "-name", "x", "-drift-factor", "1", "echo", "ran"}, "-drift-factor must be in [0, 1), got 1"},
		{"-retry-max below -retry-min", nil, []string{"run", addrs, "-name", "x", "-retry-min", "1s", "-retry-max", "10ms", "echo", "ran"}, "-retry-max 10ms is below -retry-min 1s"},
		{"zero -retry-min", nil, []string{"run", addrs, "-name", "x", "-retry-min", "0", "echo", "ran"}, "-retry-min must be positive"},
		{"negative -restart-guard", nil, []string{"run", addrs, "-name", "x", "-restart-guard", "-1s", "echo", "ran"}, "-restart-guard must not be negative"},
		{"no addresses", nil, []string{"run", "-name", "x", "echo", "ran"}, "no Redis address"},
		{"empty REDIS_ADDRS", []string{"REDIS_ADDRS= , "}, []string{"run", "-name", "x", "echo", "ran"}, "no Redis address"},
		{"address without a port", nil, []string{"run", "-addrs", "foo", "-name", "x", "-nonblock", "echo", "ran"}, `-addrs: bad address "foo": want host:port`},
		{"address without a host", nil, []string{"run", "-addrs", "127.0.0.1:1,:6379", "-name", "x", "-nonblock", "echo", "ran"}, `-addrs: bad address ":6379"`},
		{"REDIS_ADDRS without a port", []string{"REDIS_ADDRS=foo"}, []string{"run", "-name", "x", "-nonblock", "echo", "ran"}, `$REDIS_ADDRS: bad address "foo"`},
		{"address twice", nil, []string{"run", "-addrs", "127.0.0.1:1,127.0.0.1:1", "-name", "x", "echo", "ran"}, "given twice"},
		{"bad URL", []string{"REDIS_ADDRS=redis://127.0.0.1:1/notadb"}, []string{"run", "-name", "x", "echo", "ran"}, "$REDIS_ADDRS: bad Redis URL"},
		{"-cert without -key", nil, []string{"run", addrs, "-name", "x", "-cert", "usage_test.go", "echo", "ran"}, "-cert needs its private key: give -key"},
		{"$REDIS_KEY without a certificate", []string{"REDIS_KEY=usage_test.go"}, []string{"run", addrs, "-name", "x", "echo", "ran"}, "$REDIS_KEY is the key of a client certificate"},
		{"-cacert not PEM", nil, []string{"run", addrs, "-name", "x", "-cacert", "usage_test.go", "echo", "ran"}, "-cacert: no PEM certificate in usage_test.go"},
		{"-cacert missing", nil, []string{"run", addrs, "-name", "x", "-cacert", "no-such-file", "echo", "ran"}, "-cacert: open no-such-file"},
		{"-tls with a redis:// URL", nil, []string{"run", "-addrs", "redis://127.0.0.1:1", "-name", "x", "-tls", "echo", "ran"}, "-tls applies to TLS, but 127.0.0.1:1 is a URL without TLS"},
		{"-password-file missing", nil, []string{"status", addrs, "-password-file", "no-such-file", "x"}, "-password-file: open no-such-file"},
		{"bad valkey URL", nil, []string{"status", "-addrs", "valkey://127.0.0.1:1/notadb", "x"}, `bad Redis URL "valkey://127.0.0.1:1/notadb"`},
		{"unknown flag", nil, []string{"run", addrs, "-name", "x", "-ttI", "1s", "echo", "ran"}, "flag provided but not defined: -ttI"},
		{"-nonblock with -wait", nil, []string{"run", addrs, "-name", "x", "-nonblock", "-wait", "1s", "echo", "ran"}, "exclude each other"},
		{"-nonblock with -retry-min", nil, []string{"run", addrs, "-name", "x", "-nonblock", "-retry-min", "1s", "echo", "ran"}, "not with -nonblock"},
		{"negative -wait", nil, []string{"run", addrs, "-name", "x", "-wait", "-1s", "echo", "ran"}, "-wait must not be negative"},
		{"-conflict-exit-code 256", nil, []string{"run", addrs, "-name", "x", "-conflict-exit-code", "256", "echo", "ran"}, "0-255"},
		{"TTL above the default restart guard", nil, []string{"run", "-addrs", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "-name", "x", "-ttl", "40s", "echo", "ran"}, "-ttl 40s is above -restart-guard 30s"},
		{"TTL above the default restart guard, one address", nil, []string{"run", addrs, "-name", "x", "-ttl", "40s", "echo", "ran"}, "-ttl 40s is above -restart-guard 30s"},
		{"TTL above the restart guard", nil, []string{"run", addrs, "-name", "x", "-ttl", "2s", "-restart-guard", "1s", "echo", "ran"}, "-ttl 2s is above -restart-guard 1s"},
		{"prefix too long", nil, []string{"run", addrs, "-name", "x", "-prefix", strings.Repeat("p", 300), "echo", "ran"}, "-prefix of 300 bytes: at most 256"},
		{"bad prefix", nil, []string{"run", addrs, "-name", "x", "-prefix", "a{}", "echo", "ran"}, "-prefix: key prefix"},
		{"name too long", nil, []string{"run", addrs, "-name", strings.Repeat("n", 2000), "-nonblock", "echo", "ran"}, "-name of 2000 bytes: at most 1024"},
		{"second name too long", nil, []string{"run", addrs, "-name", "x", "-name", strings.Repeat("n", 2000), "-nonblock", "echo", "ran"}, "-name of 2000 bytes: at most 1024"},
		{"empty second name", nil, []string{"run", addrs, "-name", "x", "-name", "", "echo", "ran"}, "an empty NAME"},
		{"two names, no command", nil, []string{"run", addrs, "-name", "x", "-name", "y"}, "as in redlock run x -name y -- COMMAND"},
		{"elect without a name", nil, []string{"elect", addrs, "--", "echo", "ran"}, "no election name"},
		{"elect without a command", nil, []string{"elect", "x", addrs}, "no command to run: give it after the flags, as in redlock elect x --"},
		{"elect -nonblock", nil, []string{"elect", "x", addrs, "-nonblock", "echo", "ran"}, "flag provided but not defined: -nonblock"},
		{"elect -value too long", nil, []string{"elect", "x", addrs, "-value", strings.Repeat("v", 5000), "echo", "ran"}, "-value of 5000 bytes: at most 4096"},
		{"elect -observe with a command", nil, []string{"elect", "-observe", "x", addrs, "--", "echo", "ran"}, `-observe runs no command: unexpected "echo ran"`},
		{"bad -description", nil, []string{"run", addrs, "-name", "x", "-description", "web 3", "echo", "ran"}, `-description: description "web 3" has ' '`},
		{"-description with an '@'", nil, []string{"elect", "x", addrs, "-description", "a@b", "echo", "ran"}, `-description: description "a@b" has '@'`},
		{"-description too long", nil, []string{"run", addrs, "-name", "x", "-description", strings.Repeat("d", 129), "echo", "ran"}, "-description: a description of 129 bytes: at most 128"},
		{"elect -observe -description", nil, []string{"elect", "-observe", "x", addrs, "-description", "d"}, "-observe campaigns for nothing: -description does not apply"},
		{"elect -observe -value", nil, []string{"elect", "-observe", "x", addrs, "-value", "v"}, "-observe campaigns for nothing: -value does not apply"},
		{"elect name too long", nil, []string{"elect", strings.Repeat("n", 2000), addrs, "echo", "ran"}, "NAME of 2000 bytes: at most 1024"},
		{"status without a name", nil, []string{"status", addrs}, "no name"},
		{"status with two names", nil, []string{"status", addrs, "x", "y"}, `one name only: unexpected "y"`},
		{"status without addresses", nil, []string{"status", "x"}, "no Redis address"},
		{"status zero -node-timeout", nil, []string{"status", addrs, "-node-timeout", "0", "x"}, "-node-timeout must be positive"},
		{"status bad prefix", nil, []string{"status", addrs, "-prefix", "a{}", "x"}, "-prefix: key prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runTool(t, tc.env, tc.args...)
			wantCode(t, code, stderr, exitUsage, tc.msg)
			if goName.MatchString(stderr) {
				t.Errorf("the message names a Go option, not a flag:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q: the command ran, or usage went to stdout", stdout)
			}
		})
	}
}

// goName matches the name of one of the library's Go options, such as WithRestartGuard.
var goName = regexp.MustCompile(`With[A-Z]`)

// TestHelp: -h and help print the usage to stdout and exit 0; run's usage has an example,
// every flag, every exit status, and what connecting to the nodes costs; version prints
// one.
func TestHelp(t *testing.T) {
	t.Parallel() // see main_test.go
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, stdout, stderr := runTool(t, nil, args...)
		if code != 0 || !strings.Contains(stdout, "redlock run NAME") || stderr != "" {
			t.Errorf("redlock %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"run", "-h"}, {"help", "run"}, {"run", "-name", "x", "-help"}} {
		code, stdout, stderr := runTool(t, nil, args...)
		if code != 0 || stderr != "" {
			t.Errorf("redlock %q: exit %d, stderr %q", args, code, stderr)
		}
		for _, want := range []string{
			"Example", "REDIS_ADDRS=", "-addrs host:port", "-name NAME", "-nonblock", "-wait", "-ttl", "-grace", "-timeout",
			"-restart-guard", "-node-timeout", "-drift-factor", "-prefix", "-retry-min", "-retry-max", "-conflict-exit-code", "-quiet",
			"REDLOCK_TOKEN", "Exit status", "\n  1 ", "\n  2 ", "\n  69 ", "\n  75 ", "\n  124 ", "\n  126, 127 ", "\n  128+N ",
			"process group", "SIGTSTP", "connects to every node", "at most 2s", "connecting to the nodes included",
			"-description", "HOST:PID", "[-name NAME...]", "-name NAME after NAME", "all of them or none", "counts once", "a comma is part of a NAME",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("redlock %q: the usage lacks %q", args, want)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"help", "elect"}, []string{"redlock elect NAME", "Example", "-value", "-description", "-wait", "-ttl", "-grace", "-timeout", "-conflict-exit-code",
			"REDLOCK_TOKEN", "Exit status", "\n  1 ", "\n  69 ", "\n  75 ", "\n  124 ", "\n  128+N ", "process group", "resigns"}},
		{[]string{"elect", "-h"}, []string{"redlock elect NAME"}},
		{[]string{"help", "status"}, []string{"redlock status [flags] NAME", "-json", "-addrs", "-prefix", "-node-timeout",
			"schema", "holder", "description", "ttl_ms", "fence", "queue", "readers", "leader", "semaphore", "in_use", "Exit status", "\n  0 ", "\n  2 ", "\n  69 "}},
		{[]string{"status", "-h"}, []string{"redlock status [flags] NAME"}},
		{[]string{"help"}, []string{"redlock elect NAME", "redlock status [flags] NAME"}},
	} {
		code, stdout, stderr := runTool(t, nil, tc.args...)
		if code != 0 || stderr != "" {
			t.Errorf("redlock %q: exit %d, stderr %q", tc.args, code, stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(stdout, want) {
				t.Errorf("redlock %q: the usage lacks %q", tc.args, want)
			}
		}
	}
	code, stdout, _ := runTool(t, nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "redlock ") {
		t.Errorf("redlock version: exit %d, %q", code, stdout)
	}
}

// TestCommandCannotStart: a command that does not exist exits 127, and one that is not
// executable 126, both found before the lock is attempted (the address is a closed port,
// which would exit 69).
func TestCommandCannotStart(t *testing.T) {
	t.Parallel() // see main_test.go
	code, _, stderr := runTool(t, nil, "run", "-addrs", "127.0.0.1:1", "-name", "x", "--", "redlock-test-no-such-command")
	wantCode(t, code, stderr, exitNotFound, "redlock-test-no-such-command", "not found")

	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runTool(t, nil, "run", "-addrs", "127.0.0.1:1", "-name", "x", "--", script)
	wantCode(t, code, stderr, exitCannotRun, "permission denied")
}
