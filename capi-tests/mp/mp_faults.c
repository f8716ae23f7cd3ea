/* Multi-process faults and errors: what every rank sees when a rank's
 * process dies, or when the ranks of a job disagree. Expected statuses are the
 * contract of the multi-process tests (README.md "One rank per process"; status numbers
 * docs/contract/abi.md §2.1), never taken from the library.
 *
 * kill: R = 3. Every rank joins (nrt_cc_global_comm_init, nrt_barrier); the victim then raises
 *   SIGKILL 300 ms later instead of scheduling, while the others wait in an all-reduce. The
 *   survivors' pending collective must complete with *exec_ret = NRT_EXEC_HW_ERR_COLLECTIVES
 *   (1200) within NEURON_RT_EXEC_TIMEOUT (20 s; the time is measured and printed, and only
 *   "< timeout" is asserted), with an ERROR log line naming the missing rank; they nrt_close
 *   and exit 0, and /dev/shm is clean. All jobs at once: victim rank 1; victim rank 0 (the
 *   root's process), where NRT_TIMEOUT (5) is accepted too and reported; and victim rank 2
 *   dying right after scheduling its own all-reduce (during the collective: that one may
 *   succeed, exactly, or fail with 1200; the next one must fail with 1200). Two more jobs
 *   where the survivors wait in the blocking nrt_barrier and nrt_all_gather, which must return
 *   1200 themselves. One where rank 1 dies inside the run, on the shared simulated devices:
 *   OPENNRT_TEST_KILL_IN_RUN=1 makes the library SIGKILL rank 1's process after the ranks met
 *   and before its TOP_SPs step, so the others are mid-collective, blocked on semaphores only
 *   rank 1 would raise: their all-reduce must end with 1200 within the timeout, with an ERROR
 *   line naming rank 1 and the stuck step ("waits semaphore"). One where rank 2 dies after a
 *   first all-reduce succeeded everywhere, instead of scheduling the second: the survivors
 *   then meet on the group's go board in shared memory, not at the root, and their second
 *   all-reduce must still fail with 1200 within the timeout, naming rank 2. And a live rank that never
 *   arrives: NRT_TIMEOUT (5) after NEURON_RT_EXEC_TIMEOUT (2 s for that job). And a rank that
 *   leaves with nrt_close while its peer waits in a collective on the go board (the root, then
 *   rank 1): the peer's collective fails with 1200 (NRT_TIMEOUT too when rank 1 leaves), never
 *   NRT_FAILURE (leave_body).
 * errors, all at once on their own ports and cores (each must end on every rank, none hang):
 *   - duplicate global id (world 3: ranks 0 and 1 join and wait in an all-reduce, then a third
 *     process claims global id 1): the offender's nrt_cc_global_comm_init and the others'
 *     pending collective -> NRT_INVALID;
 *   - world size mismatch (root's world 2, then a process joining as 1 of 3): same shape;
 *   - version mismatch (OPENNRT_VERSION_OVERRIDE on the second process): same shape;
 *   - version mismatch the other way round (the root announces another version), where the
 *     root's NEXT call after the offender was refused must fail (NRT_INVALID from prepare or
 *     schedule, or in *exec_ret);
 *   - count mismatch in one collective (world 3, rank 1 passes 8 more elements): *exec_ret
 *     NRT_INVALID on every rank, and likewise an nrt_all_gather with another size -> NRT_INVALID
 *     on every rank; correct collectives afterwards still give exact results (as in one
 *     process);
 *   - the root port already in use (the harness listens on it): rank 0's first world call
 *     -> NRT_FAILURE or NRT_INVALID, with an ERROR line naming the port;
 *   - no root at all (a rank 1 alone, OPENNRT_BOOTSTRAP_TIMEOUT=2): its first world call
 *     -> NRT_TIMEOUT (5) once the bootstrap timeout has passed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mp_harness.h"
#include "mp_rank.h"
#include "mp_tests.h"

#define COUNT 257
#define VERSION_OVERRIDE "0.0.0-mp-test"

enum role { PENDING, OFFENDER, NEXT_CALL, COUNT_MISMATCH, PORT_TAKEN, NO_ROOT };

static int init_or_fail(const mp_proc *p) {
  NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  return mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", p->name, st);
}

/* ---------------------------------------------------------------- kill */

/* p->arg = victim + 10 * mode. Mode 0: the victim dies instead of scheduling (before the
 * collective). Mode 1: the victim schedules the all-reduce and dies at once, so it may or may
 * not have arrived (during the collective): that all-reduce may then succeed (exact) or fail
 * with 1200, but the next one must fail with 1200. Modes 2 and 3: the others wait in the
 * blocking nrt_barrier (2) or nrt_all_gather (3), which must return 1200 itself. Mode 4: every
 * rank schedules the all-reduce; the library kills the victim inside the run (its env has
 * OPENNRT_TEST_KILL_IN_RUN), and the all-reduce must fail with 1200 on the others. Mode 5: a
 * first all-reduce must succeed (exact) on every rank; then the victim dies 300 ms later
 * instead of scheduling the second, which must fail with 1200 on the others. */
static void kill_body(const mp_proc *p) {
  mp_rank r = {0, (uint32_t)p->gid, (uint32_t)p->world, p->name};
  int victim = p->arg % 10, mode = p->arg / 10, during = mode == 1, after_one = mode == 5, joined, exact;
  mp_cc c;
  NRT_STATUS st;
  if (!init_or_fail(p)) return;
  st = nrt_cc_global_comm_init(0, r.gid, r.world);
  mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
  joined = mp_rank_barrier(&r, "(every rank joined)");
  if (p->gid == victim && !during && mode != 4 && !after_one) {
    mp_say("%s: raising SIGKILL in 300 ms instead of %s", p->name,
           mode == 0 ? "scheduling the all-reduce" : mode == 2 ? "calling nrt_barrier" : "calling nrt_all_gather");
    usleep(300000);
    raise(SIGKILL);
  }
  if (!joined) { /* fail fast: without a world the all-reduce would only time out */
    if (p->gid == victim) raise(SIGKILL);
    nrt_close();
    return;
  }
  if (mode == 2 || mode == 3) {
    double t0 = mp_now(), dt;
    st = mode == 2 ? nrt_barrier(0, r.gid, r.world) : mp_rank_all_gather(&r, 0, 0, &exact);
    dt = mp_now() - t0;
    mp_check(st == NRT_EXEC_HW_ERR_COLLECTIVES, "%s: rank %d's death -> %s returns NRT_EXEC_HW_ERR_COLLECTIVES (1200) (got %d)",
             p->name, victim, mode == 2 ? "nrt_barrier" : "nrt_all_gather", st);
    mp_check(dt < MP_EXEC_TIMEOUT_S, "%s: ... within NEURON_RT_EXEC_TIMEOUT (%.2f s < %d s)", p->name, dt,
             MP_EXEC_TIMEOUT_S);
    nrt_close();
    mp_say("%s: nrt_close returned", p->name);
    return;
  }
  for (int round = 0; round < 1 + during + after_one; round++) {
    int may_succeed = during && round == 0;
    if (after_one && round == 1 && p->gid == victim) {
      mp_say("%s: the first all-reduce done; raising SIGKILL in 300 ms instead of scheduling the second", p->name);
      usleep(300000);
      raise(SIGKILL);
    }
    st = mp_cc_start(&c, &r, NRT_CC_ALLREDUCE, NRT_DTYPE_FLOAT32, COUNT, round, 0);
    if (p->gid == victim && mode == 1) {
      mp_say("%s: scheduled the all-reduce (status %d); raising SIGKILL now", p->name, st);
      raise(SIGKILL);
    }
    if (!mp_check(st == NRT_SUCCESS, "%s: all-reduce #%d prepared and scheduled (status %d)", p->name, round + 1, st))
      break;
    mp_cc_wait(&c, round, MP_EXEC_TIMEOUT_S + 10);
    mp_say("%s: all-reduce #%d completed %.2f s after scheduling, exec_ret %d (NEURON_RT_EXEC_TIMEOUT=%d)", p->name,
           round + 1, c.elapsed, c.exec_ret, MP_EXEC_TIMEOUT_S);
    if (after_one && round == 0) {
      mp_check(c.exec_ret == NRT_SUCCESS && mp_cc_exact(&c),
               "%s: the first all-reduce succeeded before anyone died, every byte exact (exec_ret %d)", p->name,
               c.exec_ret);
    } else if (may_succeed && c.exec_ret == NRT_SUCCESS) {
      mp_check(mp_cc_exact(&c), "%s: the victim arrived before dying: all-reduce #1 succeeded, every byte exact",
               p->name);
    } else if (victim == 0 && c.exec_ret == NRT_TIMEOUT) {
      mp_say("%s: NOTE: the root's death surfaced as NRT_TIMEOUT (5), not NRT_EXEC_HW_ERR_COLLECTIVES: the "
             "library could not tell that the root's process died",
             p->name);
      mp_check(c.elapsed < MP_EXEC_TIMEOUT_S + 5, "%s: NRT_TIMEOUT came with the exec timeout, not later", p->name);
    } else {
      mp_check(c.exec_ret == NRT_EXEC_HW_ERR_COLLECTIVES,
               "%s: rank %d's death -> *exec_ret NRT_EXEC_HW_ERR_COLLECTIVES (1200)%s (got %d)", p->name, victim,
               may_succeed ? " or NRT_SUCCESS" : "", c.exec_ret);
      mp_check(c.elapsed < MP_EXEC_TIMEOUT_S, "%s: ... within NEURON_RT_EXEC_TIMEOUT (%.2f s < %d s)", p->name,
               c.elapsed, MP_EXEC_TIMEOUT_S);
    }
    mp_cc_free(&c);
  }
  nrt_close();
  mp_say("%s: nrt_close returned", p->name);
}

/* A participant that leaves with nrt_close while its peer waits for it in a collective (spec
 * §5.8: a missing participant surfaces as NRT_TIMEOUT or an NRT_EXEC_HW_ERR_COLLECTIVES-class
 * error; README "Faults"). World 2; NEURON_RT_EXEC_TIMEOUT=4 for these jobs. Both ranks run a
 * first all-reduce (exact), so the second meets on the group's go board. p->arg 0: the waiter,
 * which schedules the second all-reduce and says ready; 1: the leaver, which calls nrt_close
 * once the waiter is pending. The waiter's all-reduce must fail with 1200 or NRT_TIMEOUT, never
 * NRT_FAILURE (the chaos group found a root that timed out and closed failing its peer with
 * NRT_FAILURE); when the root leaves, 1200 at once. */
static void leave_body(const mp_proc *p) {
  mp_rank r = {0, (uint32_t)p->gid, (uint32_t)p->world, p->name};
  mp_cc c;
  NRT_STATUS st;
  if (!init_or_fail(p)) return;
  st = nrt_cc_global_comm_init(0, r.gid, r.world);
  mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
  if (!mp_cc_run_checked(&r, NRT_CC_ALLREDUCE, NRT_DTYPE_FLOAT32, COUNT, 0, 0)) {
    mp_ready();
    nrt_close();
    return;
  }
  if (p->arg == 1) {
    mp_wait_go();
    mp_say("%s: the other rank waits in its second all-reduce; calling nrt_close instead", p->name);
    nrt_close();
    mp_say("%s: nrt_close returned", p->name);
    return;
  }
  st = mp_cc_start(&c, &r, NRT_CC_ALLREDUCE, NRT_DTYPE_FLOAT32, COUNT, 1, 0);
  mp_ready();
  if (mp_check(st == NRT_SUCCESS, "%s: second all-reduce prepared and scheduled (status %d)", p->name, st)) {
    mp_cc_wait(&c, 0, 4 + 10);
    mp_say("%s: second all-reduce ended %.2f s after scheduling, exec_ret %d (NEURON_RT_EXEC_TIMEOUT=4)", p->name,
           c.elapsed, c.exec_ret);
    if (p->gid == 1)
      mp_check(c.exec_ret == NRT_EXEC_HW_ERR_COLLECTIVES,
               "%s: the root left with nrt_close -> *exec_ret NRT_EXEC_HW_ERR_COLLECTIVES (1200) (got %d)", p->name,
               c.exec_ret);
    else
      mp_check(c.exec_ret == NRT_EXEC_HW_ERR_COLLECTIVES || c.exec_ret == NRT_TIMEOUT,
               "%s: rank 1 left with nrt_close -> *exec_ret 1200 or NRT_TIMEOUT (5) (got %d)", p->name, c.exec_ret);
    mp_check(c.elapsed < 4 + 3, "%s: ... within NEURON_RT_EXEC_TIMEOUT + 3 s (%.2f s)", p->name, c.elapsed);
  }
  mp_cc_free(&c);
  nrt_close();
  mp_say("%s: nrt_close returned", p->name);
}

/* A live rank that never arrives (spec §5.8: a missing participant surfaces as a timeout):
 * NEURON_RT_EXEC_TIMEOUT=2 for this job. p->arg 0: the straggler (global id 0, the root),
 * which joins and then waits for the go the harness sends once the other is done; 1: the
 * other, whose all-reduce must end with *exec_ret NRT_TIMEOUT (5). */
static void straggler_body(const mp_proc *p) {
  mp_rank r = {0, (uint32_t)p->gid, (uint32_t)p->world, p->name};
  mp_cc c;
  NRT_STATUS st;
  if (!init_or_fail(p)) return;
  st = nrt_cc_global_comm_init(0, r.gid, r.world);
  mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
  if (p->arg == 0) {
    mp_say("%s: alive, but calls nothing until the other rank's all-reduce has ended", p->name);
    mp_wait_go();
  } else {
    st = mp_cc_start(&c, &r, NRT_CC_ALLREDUCE, NRT_DTYPE_BFLOAT16, COUNT, 0, 0);
    if (mp_check(st == NRT_SUCCESS, "%s: all-reduce prepared and scheduled (status %d)", p->name, st)) {
      mp_cc_wait(&c, 1, 2 + 10);
      mp_say("%s: all-reduce ended %.2f s after scheduling, exec_ret %d (NEURON_RT_EXEC_TIMEOUT=2)", p->name,
             c.elapsed, c.exec_ret);
      mp_check(c.exec_ret == NRT_TIMEOUT, "%s: rank 0 alive but never arriving -> *exec_ret NRT_TIMEOUT (5) (got %d)",
               p->name, c.exec_ret);
      mp_cc_free(&c);
    }
    mp_ready();
  }
  nrt_close();
  mp_say("%s: nrt_close returned", p->name);
}

/* ---------------------------------------------------------------- errors */

static void errors_body(const mp_proc *p) {
  mp_rank r = {0, (uint32_t)p->gid, (uint32_t)p->world, p->name};
  double t0;
  mp_cc c;
  NRT_STATUS st = NRT_FAILURE;
  int exact;
  memset(&c, 0, sizeof c);
  if (!init_or_fail(p)) return;
  t0 = mp_now();
  if (p->arg != COUNT_MISMATCH) st = nrt_cc_global_comm_init(0, r.gid, r.world);
  switch (p->arg) {
  case PENDING: /* join, wait in a collective that the offender's arrival must fail */
    mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
    st = mp_cc_start(&c, &r, NRT_CC_ALLREDUCE, NRT_DTYPE_FLOAT32, COUNT, 0, 0);
    mp_check(st == NRT_SUCCESS, "%s: all-reduce prepared and scheduled, pending (status %d)", p->name, st);
    mp_ready();
    if (st != NRT_SUCCESS) break;
    mp_cc_wait(&c, 1, MP_EXEC_TIMEOUT_S + 10);
    mp_check(c.exec_ret == NRT_INVALID, "%s: the pending all-reduce failed with *exec_ret NRT_INVALID (got %d, after %.2f s)",
             p->name, c.exec_ret, c.elapsed);
    mp_cc_free(&c);
    break;
  case OFFENDER:
    mp_check(st == NRT_INVALID, "%s: the offender's nrt_cc_global_comm_init -> NRT_INVALID (got %d)", p->name, st);
    mp_ready();
    break;
  case NEXT_CALL: /* join, then (after the offender was refused) make the next call */
    mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
    mp_ready();
    mp_wait_go();
    st = mp_cc_start(&c, &r, NRT_CC_ALLREDUCE, NRT_DTYPE_FLOAT32, COUNT, 0, 0);
    if (st == NRT_SUCCESS) {
      mp_cc_wait(&c, 0, MP_EXEC_TIMEOUT_S + 10);
      st = c.exec_ret;
    }
    mp_check(st == NRT_INVALID, "%s: the next collective after the refused peer -> NRT_INVALID (got %d)", p->name, st);
    if (c.tin || c.tout) mp_cc_free(&c);
    break;
  case COUNT_MISMATCH:
    st = nrt_build_global_comm(0, r.gid, r.world);
    mp_check(st == NRT_SUCCESS, "%s: nrt_build_global_comm -> NRT_SUCCESS (got %d)", p->name, st);
    if (!mp_rank_barrier(&r, "(every rank joined)")) break; /* fail fast: no world */
    st = mp_rank_all_gather(&r, 1, r.gid == 2 ? 20 : 0, &exact);
    mp_check(st == NRT_INVALID, "%s: nrt_all_gather where rank 2 passes 20 B, the others 37 B -> NRT_INVALID (got %d)",
             p->name, st);
    st = mp_rank_all_gather(&r, 2, 0, &exact);
    mp_check(st == NRT_SUCCESS && exact, "%s: the next nrt_all_gather: every byte exact (status %d)", p->name, st);
    st = nrt_cc_global_comm_init(0, r.gid, r.world);
    mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
    st = mp_cc_start(&c, &r, NRT_CC_ALLREDUCE, NRT_DTYPE_BFLOAT16, COUNT, 0, r.gid == 1 ? COUNT + 8 : 0);
    if (mp_check(st == NRT_SUCCESS, "%s: all-reduce with rank 1's count %d, the others' %d, scheduled (status %d)",
                 p->name, COUNT + 8, COUNT, st)) {
      mp_cc_wait(&c, 0, MP_EXEC_TIMEOUT_S + 10);
      mp_check(c.exec_ret == NRT_INVALID, "%s: count mismatch -> *exec_ret NRT_INVALID on every rank (got %d)", p->name,
               c.exec_ret);
    }
    mp_cc_free(&c);
    mp_cc_run_checked(&r, NRT_CC_ALLREDUCE, NRT_DTYPE_BFLOAT16, COUNT, 1, 1);
    mp_rank_barrier(&r, "(the world still works)");
    break;
  case PORT_TAKEN:
    mp_check(st == NRT_FAILURE || st == NRT_INVALID,
             "%s: rank 0 finds the root port in use -> NRT_FAILURE or NRT_INVALID from its first world call (got %d, "
             "after %.2f s)",
             p->name, st, mp_now() - t0);
    break;
  case NO_ROOT:
    mp_check(st == NRT_TIMEOUT, "%s: nobody listens at the root -> NRT_TIMEOUT (got %d, after %.2f s)", p->name, st,
             mp_now() - t0);
    break;
  }
  nrt_close();
  mp_say("%s: nrt_close returned", p->name);
}

/* ---------------------------------------------------------------- parent side */

static int next_core;

static mp_proc *add(mp_proc *procs, int *n, const char *name, const char *root, mp_body body, int gid, int world,
                    int arg) {
  mp_proc *p = &procs[(*n)++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  snprintf(p->cores, sizeof p->cores, "%d", next_core++ % 32);
  snprintf(p->root, sizeof p->root, "%s", root);
  p->body = body, p->gid = gid, p->world = world, p->threads = 1, p->arg = arg;
  return p;
}

/* Check an ERROR line in p's log that names `number` (and contains `word`); print it. */
static void check_error_line(const mp_proc *p, long number, int as_rank, const char *word, const char *what) {
  char line[600] = "";
  int found = mp_error_line(p, number, as_rank, word, line, sizeof line);
  mp_check(found, "%s: an ERROR log line %s", p->name, what);
  if (found) mp_say("      %s", line);
  else mp_print_stderr(p);
}

void mp_test_kill(void) {
  static const struct {
    int victim, mode;
    const char *what;
  } runs[7] = {{1, 0, "rank 1 dies before an all-reduce"},
               {0, 0, "rank 0 (the root) dies before an all-reduce"},
               {2, 1, "rank 2 dies during an all-reduce"},
               {1, 2, "rank 1 dies before nrt_barrier"},
               {2, 3, "rank 2 dies before nrt_all_gather"},
               {1, 4, "rank 1 dies inside the run"},
               {2, 5, "rank 2 dies after a first all-reduce (the others meet on the go board)"}};
  mp_proc procs[MP_MAX_PROCS];
  int n = 0, port[10], first_straggler, first_leave, first_in_run = 0;
  char root[64], name[48];
  for (int v = 0; v < 10; v++) port[v] = mp_free_port();
  for (int v = 0; v < 7; v++) {
    mp_root_id(root, sizeof root, v % 3, port[v]);
    if (runs[v].mode == 4) first_in_run = n;
    for (int g = 0; g < 3; g++) {
      mp_proc *q;
      snprintf(name, sizeof name, "kill-%d-%s: rank %d", runs[v].victim,
               (const char *[]){"before", "during", "barrier", "all_gather", "in-run", "after-one"}[runs[v].mode], g);
      q = add(procs, &n, name, root, kill_body, g, 3, runs[v].victim + 10 * runs[v].mode);
      q->expect_signal = g == runs[v].victim ? SIGKILL : 0;
      if (runs[v].mode == 4 && g == runs[v].victim) q->env[0] = "OPENNRT_TEST_KILL_IN_RUN=1";
    }
  }
  mp_root_id(root, sizeof root, 0, port[7]);
  first_straggler = n;
  add(procs, &n, "straggler: rank 0", root, straggler_body, 0, 2, 0)->env[0] = "NEURON_RT_EXEC_TIMEOUT=2";
  add(procs, &n, "straggler: rank 1", root, straggler_body, 1, 2, 1)->env[0] = "NEURON_RT_EXEC_TIMEOUT=2";
  procs[first_straggler].go_after = 1u << (first_straggler + 1);
  /* a participant leaves with nrt_close: the root (port 8), then rank 1 (port 9) */
  first_leave = n;
  for (int v = 0; v < 2; v++) {
    mp_root_id(root, sizeof root, v, port[8 + v]);
    for (int g = 0; g < 2; g++) {
      int leaver = g == (v == 0 ? 0 : 1);
      snprintf(name, sizeof name, "leave-%s: rank %d%s", v == 0 ? "root" : "rank1", g, leaver ? " (leaves)" : "");
      add(procs, &n, name, root, leave_body, g, 2, leaver)->env[0] = "NEURON_RT_EXEC_TIMEOUT=4";
    }
    procs[first_leave + 2 * v + (v == 0 ? 0 : 1)].go_after = 1u << (first_leave + 2 * v + (v == 0 ? 1 : 0));
  }
  mp_say("\n== kill, seven R=3 jobs at once (ports %d-%d): SIGKILL of rank 1 instead of scheduling an all-reduce; of "
         "rank 0, the root; of rank 2 right after it scheduled; of rank 1 while the others wait in nrt_barrier; of "
         "rank 2 while they wait in nrt_all_gather; of rank 1 inside the run; of rank 2 after a first all-reduce. "
         "And a live rank 0 that never arrives (port %d); the root, then rank 1, leaving with nrt_close while the other "
         "waits (ports %d, %d)",
         port[0], port[6], port[7], port[8], port[9]);
  mp_run(procs, n, 2 * MP_EXEC_TIMEOUT_S + 20);
  mp_check_ends(procs, n);
  for (int i = 0; i < first_straggler; i++)
    if (!procs[i].expect_signal) check_error_line(&procs[i], procs[i].arg % 10, 1, NULL, "names the missing rank");
  for (int g = 0; g < 3; g += 2)
    check_error_line(&procs[first_in_run + g], 1, 1, "waits semaphore", "names rank 1 and the step it is stuck in");
  check_error_line(&procs[first_straggler + 1], 0, 1, NULL, "names the rank that never arrived");
  for (int v = 0; v < 7; v++) mp_check_shm_clean(port[v], runs[v].what);
  mp_check_shm_clean(port[7], "straggler");
  mp_check_shm_clean(port[8], "the root leaves");
  mp_check_shm_clean(port[9], "rank 1 leaves");
  mp_cleanup_logs(procs, n);
}

void mp_test_errors(void) {
  mp_proc procs[MP_MAX_PROCS];
  int n = 0, port[7], lsock, first[7];
  char root[7][64];
  struct sockaddr_in a = {0};
  for (int j = 0; j < 7; j++) port[j] = mp_free_port(), mp_root_id(root[j], sizeof root[j], j % 3, port[j]);
  mp_root_id(root[5], sizeof root[5], 0, port[5]); /* the address the harness listens on */
  /* 0: duplicate global id */
  first[0] = n;
  add(procs, &n, "dup-id: rank 0", root[0], errors_body, 0, 3, PENDING);
  add(procs, &n, "dup-id: rank 1", root[0], errors_body, 1, 3, PENDING);
  add(procs, &n, "dup-id: 2nd rank 1", root[0], errors_body, 1, 3, OFFENDER)->start_after = 3u << first[0];
  /* 1: world size mismatch */
  first[1] = n;
  add(procs, &n, "size: rank 0 of 2", root[1], errors_body, 0, 2, PENDING);
  add(procs, &n, "size: rank 1 of 3", root[1], errors_body, 1, 3, OFFENDER)->start_after = 1u << first[1];
  /* 2: version mismatch, the joining process announces another version */
  first[2] = n;
  add(procs, &n, "version: rank 0", root[2], errors_body, 0, 2, PENDING);
  add(procs, &n, "version: rank 1 (other)", root[2], errors_body, 1, 2, OFFENDER)->start_after = 1u << first[2];
  procs[n - 1].env[0] = "OPENNRT_VERSION_OVERRIDE=" VERSION_OVERRIDE;
  /* 3: version mismatch, the root announces another version; the root's next call fails */
  first[3] = n;
  add(procs, &n, "version2: rank 0 (other)", root[3], errors_body, 0, 2, NEXT_CALL)->env[0] =
      "OPENNRT_VERSION_OVERRIDE=" VERSION_OVERRIDE;
  add(procs, &n, "version2: rank 1", root[3], errors_body, 1, 2, OFFENDER)->start_after = 1u << first[3];
  procs[first[3]].go_after = 1u << (n - 1);
  /* 4: count mismatch in one collective, world 3 */
  first[4] = n;
  for (int g = 0; g < 3; g++) {
    char name[48];
    snprintf(name, sizeof name, "count: rank %d", g);
    add(procs, &n, name, root[4], errors_body, g, 3, COUNT_MISMATCH);
  }
  /* 5: the root port is in use (this process listens on it) */
  first[5] = n;
  add(procs, &n, "port-taken: rank 0", root[5], errors_body, 0, 2, PORT_TAKEN);
  /* 6: nobody at the root; a short bootstrap timeout */
  first[6] = n;
  add(procs, &n, "no-root: rank 1", root[6], errors_body, 1, 2, NO_ROOT)->env[0] = "OPENNRT_BOOTSTRAP_TIMEOUT=2";

  lsock = socket(AF_INET, SOCK_STREAM, 0);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port[5]);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  mp_check(lsock >= 0 && bind(lsock, (struct sockaddr *)&a, sizeof a) == 0 && listen(lsock, 4) == 0,
           "harness: listening on 127.0.0.1:%d to make it a port in use", port[5]);
  mp_say("\n== errors: duplicate id (%s), world size (%s), version (%s and %s), count (%s), port in use (%s), no "
         "root (%s), all at once",
         root[0], root[1], root[2], root[3], root[4], root[5], root[6]);
  mp_run(procs, n, MP_EXEC_TIMEOUT_S + 40);
  if (lsock >= 0) close(lsock);
  mp_check_ends(procs, n);
  /* The log lines: each refused or failed rank says what happened. */
  check_error_line(&procs[first[0] + 2], 1, 1, NULL, "names the duplicated global id 1");
  check_error_line(&procs[first[0]], -1, 0, NULL, "explains the failed collective");
  check_error_line(&procs[first[1] + 1], 3, 0, NULL, "names the offending world size 3");
  check_error_line(&procs[first[1]], -1, 0, NULL, "explains the failed collective");
  check_error_line(&procs[first[2] + 1], -1, 0, VERSION_OVERRIDE, "names the announced version " VERSION_OVERRIDE);
  check_error_line(&procs[first[3] + 1], -1, 0, "version", "says the versions differ");
  check_error_line(&procs[first[4]], -1, 0, NULL, "explains the count mismatch");
  check_error_line(&procs[first[5]], port[5], 0, NULL, "names the port in use");
  check_error_line(&procs[first[6]], -1, 0, NULL, "explains the bootstrap timeout");
  for (int j = 0; j < 7; j++) {
    char job[32];
    snprintf(job, sizeof job, "errors job %d", j);
    mp_check_shm_clean(port[j], job);
  }
  mp_cleanup_logs(procs, n);
}
