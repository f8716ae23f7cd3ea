/* The multi-process test harness: fork rank processes with the environment a
 * launcher gives them, order their starts, bound every wait, collect exit statuses and logs,
 * and check that a job leaves nothing in /dev/shm.
 *
 * The environment contract is docs/contract/abi.md §5.10-§5.11 (NEURON_RT_VISIBLE_CORES,
 * NEURON_RT_ROOT_COMM_ID, NEURON_RT_EXEC_TIMEOUT, read once by nrt_init), and the launcher is
 * the forked plain-C driver of spec §8 (aws-samples/sample-spectral-dns-on-aws-neuron): the
 * parent forks R ranks BEFORE nrt_init (spec §5.1: a child forked after nrt_init can never
 * initialise), each child sets its environment and calls nrt_init.
 *
 * Every check goes through mp_check (check.h's CHECK, one counter for the whole program and
 * thread-safe); in a child the counters restart at zero, and the child's exit status is 0 iff
 * none of its own checks failed. The parent never calls into libnrt.
 *
 * Users: mp_driver (this directory) and capi-tests/neff_test.c. */
#ifndef OPENNRT_MP_HARNESS_H
#define OPENNRT_MP_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#define MP_MAX_PROCS 32 /* start_after / go_after are bit masks of an unsigned */
#define MP_MAX_ENV 4

/* NEURON_RT_EXEC_TIMEOUT given to every rank (seconds). */
#define MP_EXEC_TIMEOUT_S 20
/* OPENNRT_BOOTSTRAP_TIMEOUT given to every rank unless a test sets its own (seconds). */
#define MP_BOOTSTRAP_TIMEOUT_S 15

struct mp_proc;
/* What a child runs after its environment is set; its checks decide its exit status. */
typedef void (*mp_body)(const struct mp_proc *p);

/* One rank process of a job. The test fills the first block; mp_run fills the second. */
typedef struct mp_proc {
  char name[48];                /* "R=3 rank 1": prefixes everything printed about it */
  char cores[24];               /* NEURON_RT_VISIBLE_CORES */
  char root[64];                /* NEURON_RT_ROOT_COMM_ID ("" = unset) */
  const char *env[MP_MAX_ENV];  /* extra "NAME=value" settings (NULL-terminated if < 4); the
                                 * child sets them last, after clearing what a rank must not
                                 * inherit (cleared_env in mp_harness.c) */
  mp_body body;
  int gid, world, threads;      /* first global id, world size, ranks (threads) in the process */
  int arg;                      /* body-specific parameter */
  unsigned start_after;         /* bit i: fork only once proc i called mp_ready() */
  unsigned go_after;            /* bit i: mp_wait_go() returns once proc i called mp_ready() */
  int start_delay_ms;           /* sleep before forking (after start_after holds) */
  int expect_signal;            /* 0: must exit with status 0; else: must die of this signal */

  pid_t pid;
  int started, ready, go_sent, exited, wstatus, timed_out;
  double ready_at, ended_at;    /* mp_now() when its ready byte was read / it was reaped */
  int ready_fd, go_fd;          /* parent's ends of the two pipes (-1 when closed) */
  char out_path[96], err_path[96];
} mp_proc;

/* check.h's CHECK for the whole program (thread-safe). Returns `ok`. */
int mp_check_at(const char *file, int line, int ok, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A FAIL line names the caller's file and line, not the harness's. */
#define mp_check(ok, ...) mp_check_at(__FILE__, __LINE__, (ok), __VA_ARGS__)
/* Print a line (flushed; a child's goes to its log, which the parent prints). */
void mp_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* How many checks failed so far in this process (a caller's count before and after a step). */
int mp_failed_count(void);
/* The closing summary line; 0 iff no check failed. */
int mp_summary(const char *suite);

/* --- child side --- */
/* Tell the parent this rank reached its synchronisation point. */
void mp_ready(void);
/* Block until the parent says go (bounded: a missing go is a failed check and exit). */
void mp_wait_go(void);
/* End the child now: exit(1) if any of its checks failed, else 0. exit, not _exit, so that
 * the exit handlers run in the child too: in a program built with -fsanitize=address
 * (capi-tests/run.sh builds neff_test so) LeakSanitizer checks the child's leaks there, and a
 * leak fails it. A child that may still have a collective pending (the runtime could write
 * into its memory while exit runs) ends with mp_child_abort instead. */
void mp_child_exit(void) __attribute__((noreturn));
/* End the child at once with status 1 after a failed wait: nothing may be freed that the
 * runtime could still write (exec_ret of a pending collective), so no nrt_close either. */
void mp_child_abort(const char *why) __attribute__((noreturn));

/* --- parent side --- */
/* A root port nobody uses: not bindable-in-use on 127.0.0.1 nor ::1 (a port in TIME_WAIT
 * fails that probe too), not handed out before in this run, and no /dev/shm object of a
 * previous run named after it. Ports are taken from [20000, 32000), below Linux's default
 * ephemeral range, starting at a point derived from the PID. */
int mp_free_port(void);
/* NEURON_RT_ROOT_COMM_ID for `port` in one of the three spellings the contract names:
 * 0 "127.0.0.1:p", 1 "localhost:p", 2 "[::1]:p". */
void mp_root_id(char *buf, size_t n, int form, int port);
/* Fork every proc (in order, honouring start_after / start_delay_ms), send go signals, wait
 * for all of them at most `deadline_s` seconds, SIGKILL whatever is left (reported).
 * Prints each child's stdout log, prefixed with its name. Returns 1 if every proc ended as
 * expected (exit 0 or expect_signal), else 0. Does not check anything itself. */
int mp_run(mp_proc *procs, int n, int deadline_s);
/* mp_run that calls tick(procs, n, arg) once per turn of its loop (about every 10 ms), after
 * it read the ready bytes and reaped the ended children: the chaos group (mp_chaos.c) stops,
 * continues and kills ranks from there on a schedule. A stopped child is not ended (the loop
 * reaps with WNOHANG only, never WUNTRACED). */
typedef void (*mp_tick)(mp_proc *procs, int n, void *arg);
int mp_run_ticking(mp_proc *procs, int n, int deadline_s, mp_tick tick, void *arg);
/* mp_check that each proc ended as expected (one check per proc). */
void mp_check_ends(mp_proc *procs, int n);
/* 1 if proc p's stderr log contains `needle` (case-insensitive). */
int mp_log_contains(const mp_proc *p, const char *needle);
/* Copy into `line` the first ERROR log line of proc p whose message names `number` and, if
 * `word` is not NULL, contains `word` (case-insensitive). as_rank 0: `number` anywhere as a
 * whole decimal number; 1: as a rank or id ("rank 1", "global id 1", "gid=1", "ranks [0, 1]").
 * number < 0: any ERROR line. Returns 1 if found. */
int mp_error_line(const mp_proc *p, long number, int as_rank, const char *word, char *line, size_t n);
/* Print proc p's stderr log (indented), for diagnosis of a failure. */
void mp_print_stderr(const mp_proc *p);
/* mp_check that /dev/shm holds no object named opennrt-<port>-*; removes any it finds (so a
 * failure does not leak into later runs) after listing them. */
void mp_check_shm_clean(int port, const char *job);
/* Remove the per-job log files of the procs. */
void mp_cleanup_logs(mp_proc *procs, int n);
/* Seconds on the monotonic clock. */
double mp_now(void);

#endif
