// Redlock runs a command while holding a lock shared by many machines: a flock(1) across
// machines, for cron jobs and scripts, over Redis (the Redlock algorithm of the
// github.com/go-redlock/redlock library, over one Redis master or several independent ones).
// It also runs a command while leading an election, and shows who holds a name.
//
// Install it with
//
//	go install github.com/go-redlock/redlock/cmd/redlock@latest
//
// Usage:
//
//	redlock run NAME [-name NAME...] [flags] [--] COMMAND [ARG...]
//	redlock elect NAME [flags] [--] COMMAND [ARG...]
//	redlock elect -observe NAME [flags]
//	redlock status [flags] [--] NAME
//	redlock break [-force] [flags] [--] NAME
//	redlock version
//	redlock help [run|elect|status|break]
//
// `redlock run` takes the lock NAME over the Redis masters of -addrs (default:
// $REDIS_ADDRS, comma-separated host:port, or redis://, rediss://, valkey:// and valkeys://
// URLs, the last two read as the first two are). For secured servers every command takes
// -tls (TLS to host:port addresses), -cacert FILE (the CA the servers' certificates must
// chain to), -cert FILE and -key FILE (a client certificate and its key), -user NAME (an
// ACL user) and -password-file FILE (its password, the file's first line), each also from
// the environment when its flag is not given: $REDIS_CACERT, $REDIS_CERT, $REDIS_KEY,
// $REDIS_USER and $REDIS_PASSWORD (the password itself); a URL's own user and password
// come first. One address
// makes a single-instance lock; several make a Redlock over independent masters, a majority
// of which must grant it. It connects to every node at once and goes on as soon as a
// majority has connected, or every node has connected or failed, giving each at most 2s. It
// waits while another owner holds the lock as long as it takes (as flock(1) does), or up to
// -wait, or makes one attempt with -nonblock: -wait bounds everything before COMMAND starts,
// connecting included, and with -nonblock connecting takes up to 2s before the attempt
// while no majority of the nodes answers. Then it runs COMMAND with its standard input,
// output and error, and the lock's fencing token in the environment variable REDLOCK_TOKEN
// (a decimal number that grows from one holder of NAME to the next), extends the lock while
// COMMAND runs, releases it when COMMAND (and every other process of its process group, see
// Signals) has exited, and exits with COMMAND's status. Its other
// flags set the library's options (-ttl, -restart-guard, -node-timeout, -drift-factor,
// -prefix, -retry-min, -retry-max, -description) and what happens around COMMAND (-timeout,
// -grace, -conflict-exit-code, -quiet); `redlock run -h` describes each, with an example.
// -description TEXT describes this holder, and this waiter, where `redlock status` shows
// them (the library's WithDescription, which the lock's token carries: it costs no round
// trip); by default "HOST:PID", this machine's host name and redlock's process ID, and ""
// for none. It is at most 128 bytes, printable, without spaces or '@'.
//
// NAME comes first in every command; without "--", COMMAND begins at the next argument that
// is not a flag. run's older form, -name NAME given before COMMAND's first argument, still
// works; -name NAME after NAME, once per NAME, takes one lock over every NAME at once (the library's
// Client.AcquireAll, or TryAcquireAll with -nonblock): all of them or none, never one after
// another, so two runs that share names cannot deadlock whatever their order. Each NAME is
// held as its own lock would be, so the names' holders exclude it, and its token is above
// every token the names had; losing any one name loses the lock. A NAME given twice counts
// once; a comma is part of a NAME, not a separator. Everything else (the flags, exit
// statuses, extension, loss and signals) is as for one name: "the lock" is the lock over
// every NAME, and it is held elsewhere when any one of them is.
//
// -shared holds the lock's read side, as flock -s does (the library's RWMutex, RLock and
// RLockContext, or TryRLock with -nonblock; NewRWMutexAll over several names): any number
// of -shared runs hold it together, and a run without -shared excludes them all, each
// waiting for the other in turn (a reader does not go past a writer that waits). A reader
// has no fencing token: COMMAND gets no REDLOCK_TOKEN. A reader's release is tried once:
// one that too few nodes answered expires after -ttl.
//
// `redlock elect` campaigns to lead the election NAME (the library's Client.NewElection,
// whose leader holds the lock NAME) and runs COMMAND once this process leads, as `redlock
// run` runs it holding a lock: the leader's fencing token in REDLOCK_TOKEN (a number that
// grows from one leader to the next), leadership extended while COMMAND runs, COMMAND
// stopped (SIGTERM, then SIGKILL after -grace) and exit status 75 if leadership is lost,
// and resignation when COMMAND exits, which lets the next candidate lead. Candidates lead
// in the order they began to campaign. NAME comes first, and must not begin with '-'. The
// leader records -value (default "HOST:PID": this machine's host name and redlock's process
// ID, at most 4096 bytes) on the nodes, where `redlock status` and Election.Leader read it;
// each line COMMAND writes on the file descriptor REDLOCK_PROCLAIM_FD names becomes the
// value (Election.Proclaim), without a new election.
// Its flags are run's but -name and -nonblock (-description included), plus -value, and its exit statuses and
// signals are run's (below), about leadership instead of the lock. `redlock elect -observe
// NAME` campaigns for nothing and runs no COMMAND (as etcdctl elect -l): it prints the
// value of NAME's leader, then that of each new leader as it changes (a new leader's
// too when its value is the last one's), one line each, and an empty line whenever no
// candidate leads, until SIGINT, SIGTERM or SIGHUP (exit status 0); 69 if reading the
// leader fails for good (Election.Observe). `redlock elect -h` describes each flag, with an example.
//
// `redlock status NAME` reads every key that a lock, RWMutex, Election or Semaphore called
// NAME has on each node of -addrs (under -prefix), as Client.Status does: in one read-only
// script per node, which also reads the server's run_id (INFO server), and again with a
// Semaphore's permits on a node that records their number; and shows those that exist:
// the lock's holder (its owner token, its description, fencing token and time left), the waiters queued
// for it and the first of them, an RWMutex's readers and their time left, an Election's
// leader record, and a Semaphore's number of permits, its permits in use, its one fence
// counter and the waiters queued for a permit; a node that does not answer within
// -node-timeout (2s, connecting included) is shown with why. A summary first says what a
// quorum of the nodes agree on: the holder, readers, leader and permits in use (unknown
// while fewer than a quorum answer). It only reads: it writes nothing and takes no lock.
// -json prints one JSON object instead of the text, version 1 of a format that later
// versions only add fields to; `redlock status -h` describes each field. It exits 0 when
// at least one node answered (whatever NAME's state, free included), 69 when none did,
// and 2 after a usage error, two addresses that reach one server (by its run_id)
// included.
//
// `redlock break NAME` ends whatever holds NAME, for a holder known to be dead: it shows
// the holder, asks for confirmation on standard input unless -force, raises the lock's
// fence counter above the holder's token on a majority and releases each holding under its
// own token on every node (the library's Client.Break). A holder that still runs is not
// stopped; only storage that checks fencing tokens refuses its late writes. `redlock break
// -h` describes its flags and exit statuses.
//
// # Exit status
//
// The exit statuses of `redlock run` and `redlock elect` (for elect, read "leadership"
// for "the lock", and "another candidate leads" for "the lock is held elsewhere"; -nonblock
// is run's only). When COMMAND ran and exited, redlock exits with its status, or with 128+N if signal N
// killed it, as shells report it. Otherwise:
//
//	1    the lock is held elsewhere (-nonblock), or still was when -wait ran out; COMMAND
//	     did not run. -conflict-exit-code sets this status (0-255), as flock's -E does.
//	2    usage error: a bad flag or argument, or addresses that reach one server twice
//	     (found at the first attempt)
//	69   the lock was not obtained for another reason: nodes unreachable or failing, too
//	     few for a majority, or abstaining under the restart guard; COMMAND did not run
//	     (EX_UNAVAILABLE)
//	75   the lock was lost while COMMAND ran: its keys vanished from the nodes, or it could
//	     not be extended in time. COMMAND got SIGTERM, and SIGKILL after -grace; redlock
//	     says why on standard error (EX_TEMPFAIL)
//	124  -timeout ran out: COMMAND got SIGTERM, and SIGKILL after -grace (as timeout(1))
//	126  COMMAND was found but could not be started
//	127  COMMAND was not found; redlock says so before it takes the lock
//	128+N  signal N interrupted the wait for the lock; COMMAND did not run
//
// A COMMAND can exit with one of these statuses too; -conflict-exit-code helps to tell the
// most common case apart.
//
// # Signals
//
// COMMAND runs in a process group of its own. Each SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
// and SIGUSR2 that redlock gets goes to that whole group, once, followed by SIGCONT so that
// a stopped COMMAND acts on it, and redlock waits for COMMAND to exit before it releases
// the lock. On a terminal, Ctrl-C sends SIGINT to the foreground job, which is redlock's
// group and not COMMAND's: COMMAND gets it once, from redlock, rather than once from the
// terminal and once more from redlock (a second SIGINT makes many programs skip their
// cleanup). The price: COMMAND is not the terminal's foreground job, so a COMMAND that
// reads from the terminal is stopped (SIGTTIN); give it its input from a file or a pipe.
//
// The lock covers the whole group: when COMMAND exits while other processes of its group
// run on (a job it put in the background, which has not left the group with setsid),
// redlock keeps the lock, extended, and COMMAND's exit status until they exit too (on Linux
// a stopped one counts: the lock stays held until it is continued and exits). A loss
// and -timeout stop them as they stop COMMAND (SIGTERM to the group, then SIGKILL after
// -grace), and the signals redlock gets still go to the group. On Linux redlock adopts the
// orphans of COMMAND's descendants, in its group or not (PR_SET_CHILD_SUBREAPER), and reaps
// each as it exits, as a container's first process may not.
//
// redlock ignores SIGTSTP (Ctrl-Z): a stopped redlock could not extend the lock while
// COMMAND runs on. If redlock is stopped anyway (SIGSTOP) past the lock's validity, it finds
// the lock expired when it resumes and stops COMMAND (status 75). If redlock is killed
// (SIGKILL, the OOM killer), on Linux COMMAND gets SIGKILL too (a parent-death signal,
// PR_SET_PDEATHSIG), and a small sentinel process that redlock starts beside it (a copy of
// redlock, in a process group of its own) kills COMMAND's whole process group with
// SIGKILL and says so; the lock expires after -ttl. What can still outlive a killed
// redlock: a process that left COMMAND's group (setsid, or a shell's job control), a
// setuid COMMAND (the kernel drops its parent-death signal), everything if the sentinel is
// killed with redlock (a kill of every process of the machine's user, say, or of the
// cgroup, which kills the command's group too), and, outside Linux, COMMAND and its group:
// there they run on after a SIGKILL of redlock. Otherwise redlock never exits
// with the lock held: it releases it on every path once it was taken, trying a release that
// too few nodes answered again for up to 5s (pausing between tries as between attempts to
// take the lock), and saying so if it could not: the lock then expires after -ttl.
//
// # Restart guard
//
// A node whose server has been up for less than -restart-guard (default 30s, and at least
// -ttl) abstains, with one address as with several, because a restart without persistence
// makes a server forget the locks it granted. So the first lock on freshly started servers
// waits for them to be up that long (and fails with status 69 if -wait is shorter), and
// redlock says so on standard error at once: the first time each node abstains, with the
// time it has left. Turn
// the guard off (-restart-guard 0) only if every node persists each write before it
// answers (appendonly yes, appendfsync always). See the library's WithRestartGuard.
package main
