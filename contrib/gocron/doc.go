// Package redlockgocron runs the jobs of gocron v2 schedulers (github.com/go-co-op/gocron/v2)
// in many processes under the locks of github.com/go-redlock/redlock: a Locker, for
// gocron.WithDistributedLocker and gocron.WithDistributedJobLocker, and an Elector, for
// gocron.WithDistributedElector.
//
// The Locker takes one lock per job run, named after the job (gocron passes the job's name
// as the key: set it with gocron.WithName, the same in every process). Lock makes one
// attempt (Client.TryAcquire), so a scheduler that finds the run's lock held skips the run
// instead of waiting for it; the lock extends itself while the job runs, and Unlock, which
// gocron calls when the job returns, releases it (after WithMinHold, if set).
//
// The Elector campaigns in the background (Election.Campaign) for as long as it lives, and
// again whenever it loses leadership; IsLeader, which gocron calls before each run, returns
// nil only while its candidate leads, and an error matching ErrNotLeader otherwise.
//
// # Losing the lock while a job runs
//
// gocron (v2.21) gives a locker no hold on the running job. The context it passes to a job
// function is the job's context, made once per job (not per run) with
// context.WithCancel from the scheduler's shutdown context or from gocron.WithContext's;
// gocron keeps its cancel function, and cancels it only when it stops the job (its
// removal or last run, StopJobs, Shutdown). Lock gets that same context, but nothing it
// returns can cancel it: gocron checks Lock's error only before the run (an error skips
// it), ignores Unlock's error, and has no way for a Lock to say it was lost. Cancelling a parent given to
// gocron.WithContext would end the job's schedule as well, not one run.
//
// So, to have a job stop when its lock is lost, wrap the job function with Locker.Job (or
// Elector.Job). As gocron passes the same context to Lock and to the job function, the
// wrapper finds the run's lock, and gives the function a context of its own that is
// cancelled, with a cause matching ErrLockLost and the lease's reason (redlock.ErrLost,
// say), as soon as the lock's lease ends; the wrapper returns that cause as the run's
// error, which gocron counts as a failure and hands to gocron.AfterJobRunsWithError.
// LeaseFromContext returns the run's Lease, whose Token fences the job's writes.
// WithLockLostHandler reports losses of unwrapped jobs too.
//
// A short example (the scheduler runs in every process; only one of them runs each tick):
//
//	client, _ := redlock.New(nodes)
//	locker, _ := redlockgocron.NewLocker(client, redlockgocron.WithMinHold(30*time.Second))
//	defer locker.Close()
//	s, _ := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//	_, _ = s.NewJob(
//		gocron.DurationJob(time.Minute),
//		gocron.NewTask(locker.Job(func(ctx context.Context) error {
//			return report(ctx) // ctx ends if the lock is lost
//		})),
//		gocron.WithName("report"),
//	)
//	s.Start()
package redlockgocron
