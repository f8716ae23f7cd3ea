/* Multi-process collectives, through the public headers only.
 *
 *   mp_driver [collectives] [mixed] [two-jobs] [groups] [tensors] [kill] [errors] [chaos]
 *   (no argument: all but chaos, which ci/test.sh runs as a step of its own)
 *
 * The launcher is the forked plain-C driver of docs/contract/abi.md §8 (sample-spectral-dns): the
 * parent forks one process per rank BEFORE nrt_init; each child sets
 * NEURON_RT_VISIBLE_CORES=<its core>, NEURON_RT_ROOT_COMM_ID=<host>:<port> and
 * NEURON_RT_EXEC_TIMEOUT (spec §5.10, read once by nrt_init), then calls nrt_init. The global id
 * is the rank; vnc arguments are relative to the process's visible cores (spec §5.11: with one
 * core per process, vnc 0). The process owning global id 0 binds the root port.
 *
 * collectives: R = 2, 3, 4, 8 processes, one run each. Every rank: nrt_init -> nrt_barrier ->
 *   nrt_all_gather (exact) -> nrt_cc_global_comm_init -> all-reduce, all-gather, reduce-scatter
 *   in bf16 and fp32 through nrta_cc_prepare / nrta_cc_schedule, waited for by
 *   nrta_is_completed and by an eventfd, every byte checked -> nrt_barrier -> nrt_close ->
 *   exit. The root id is spelled 127.0.0.1:<port>, localhost:<port> and [::1]:<port> across
 *   the runs; in the R = 3 run rank 0's process starts 300 ms late, so the others' first
 *   connection attempts find nobody listening and must retry.
 * mixed: 2 processes x 4 cores (process p: NEURON_RT_VISIBLE_CORES=4p-4p+3, one thread per
 *   core with vnc 0..3 and global id 4p + vnc, world 8), the same sequence on every thread.
 * two-jobs: three R = 2 jobs at the same time (disjoint cores): A and B on two ports, and C on
 *   A's port but another address ([::1] vs 127.0.0.1: shared-memory names carry a tag of the
 *   root's whole address, so A and C never touch each other's objects); all pass.
 * groups: mp_groups.c (two groups scheduled before either is waited on).
 * tensors: mp_tensors.c (device tensors in shared memory, results written in place, freed clean).
 * kill, errors: mp_faults.c.
 * chaos: mp_chaos.c (rounds of jobs whose ranks are killed, stopped and delayed at random;
 *   OPENNRT_CHAOS_SEED and OPENNRT_CHAOS_ROUNDS replay and size it).
 *
 * After every job: every process ended as planned (the parent waits with a deadline and
 * SIGKILLs what is left), and /dev/shm holds nothing named opennrt-<port>-*. Ports come from
 * mp_free_port (never one used before in this run, so no TIME_WAIT reuse); a job whose logs
 * say the port was "in use" (someone else took it between the probe and the bind) is retried
 * once on another port. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp_harness.h"
#include "mp_rank.h"
#include "mp_tests.h"

/* Deadline of one job (seconds): generous for 8 processes on 2 shared cores, and still
 * bounded so that a hang fails instead of stalling CI. */
#define JOB_DEADLINE_S 60

/* ---------------------------------------------------------------- child bodies */

struct thread_arg {
  mp_rank r;
  char who[32];
};

static void *rank_thread(void *arg) {
  mp_rank_full(&((struct thread_arg *)arg)->r);
  return NULL;
}

/* nrt_init, then the full rank sequence on each of the process's p->threads cores (one thread
 * per core when there are several), then nrt_close. */
static void ranks_body(const mp_proc *p) {
  struct thread_arg ta[8];
  pthread_t th[8];
  uint32_t visible = 0;
  NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", p->name, st)) return;
  st = nrt_get_visible_vnc_count(&visible);
  mp_check(st == NRT_SUCCESS && visible == (uint32_t)p->threads,
           "%s: %u visible logical core(s), as NEURON_RT_VISIBLE_CORES=%s says (status %d)", p->name, visible,
           p->cores, st);
  for (int t = 0; t < p->threads; t++) {
    snprintf(ta[t].who, sizeof ta[t].who, "gid %d (vnc %d)", p->gid + t, t);
    ta[t].r = (mp_rank){(uint32_t)t, (uint32_t)(p->gid + t), (uint32_t)p->world, ta[t].who};
  }
  if (p->threads == 1) {
    rank_thread(&ta[0]);
  } else {
    for (int t = 0; t < p->threads; t++) pthread_create(&th[t], NULL, rank_thread, &ta[t]);
    for (int t = 0; t < p->threads; t++) pthread_join(th[t], NULL);
  }
  nrt_close();
  mp_say("%s: nrt_close returned", p->name);
}

/* ---------------------------------------------------------------- parent side */

static void fill(mp_proc *p, const char *name, int core_lo, int cores, const char *root, int gid, int world) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  if (cores == 1) snprintf(p->cores, sizeof p->cores, "%d", core_lo);
  else snprintf(p->cores, sizeof p->cores, "%d-%d", core_lo, core_lo + cores - 1);
  snprintf(p->root, sizeof p->root, "%s", root);
  p->body = ranks_body;
  p->gid = gid, p->world = world, p->threads = cores;
}

static int any_log_says_in_use(const mp_proc *procs, int n) {
  for (int i = 0; i < n; i++)
    if (mp_log_contains(&procs[i], "in use")) return 1;
  return 0;
}

/* One job of `nproc` processes with `per` cores each; retried once on another port if the
 * port was taken from under it. */
static void run_job(const char *title, int nproc, int per, int form, int root_delay_ms) {
  mp_proc procs[MP_MAX_PROCS];
  int world = nproc * per;
  for (int attempt = 0; attempt < 2; attempt++) {
    int port = mp_free_port(), ok;
    char root[64], name[48];
    mp_root_id(root, sizeof root, form, port);
    mp_say("\n== %s: %d process%s x %d core%s, world %d, NEURON_RT_ROOT_COMM_ID=%s%s", title, nproc,
           nproc == 1 ? "" : "es", per, per == 1 ? "" : "s", world, root,
           root_delay_ms ? " (rank 0's process starts late: the others must retry their connection)" : "");
    for (int i = 0; i < nproc; i++) {
      if (per == 1) snprintf(name, sizeof name, "R=%d rank %d", world, i);
      else snprintf(name, sizeof name, "process %d (gids %d-%d)", i, i * per, i * per + per - 1);
      fill(&procs[i], name, i * per, per, root, i * per, world);
    }
    procs[0].start_delay_ms = root_delay_ms;
    ok = mp_run(procs, nproc, JOB_DEADLINE_S);
    if (!ok && attempt == 0 && any_log_says_in_use(procs, nproc)) {
      mp_say("   port %d was taken by someone else (a log says \"in use\"): retrying on another port", port);
      mp_check_shm_clean(port, title);
      mp_cleanup_logs(procs, nproc);
      continue;
    }
    mp_check_ends(procs, nproc);
    mp_check_shm_clean(port, title);
    mp_cleanup_logs(procs, nproc);
    return;
  }
}

/* Test 1: one rank per process, R = 2, 3, 4, 8; the root id in its three spellings. */
static void test_collectives(void) {
  run_job("R=2 (127.0.0.1)", 2, 1, 0, 0);
  run_job("R=3 (localhost, root late)", 3, 1, 1, 300);
  run_job("R=4 ([::1])", 4, 1, 2, 0);
  run_job("R=8 (127.0.0.1)", 8, 1, 0, 0);
}

/* Test 2: 2 processes x 4 cores, one thread per core. */
static void test_mixed(void) { run_job("mixed mode", 2, 4, 1, 0); }

/* Test 4: three R = 2 jobs at the same time on disjoint cores: A and B on two ports, C on A's
 * port at another address. */
static void test_two_jobs(void) {
  mp_proc procs[6];
  int port_a = mp_free_port(), port_b = mp_free_port();
  char root_a[64], root_b[64], root_c[64];
  mp_root_id(root_a, sizeof root_a, 0, port_a);
  mp_root_id(root_b, sizeof root_b, 2, port_b);
  mp_root_id(root_c, sizeof root_c, 2, port_a);
  mp_say("\n== jobs at once: job A (NEURON_RT_ROOT_COMM_ID=%s, cores 0-1), job B (%s, cores 2-3), job C (%s, "
         "A's port on another address, cores 4-5)",
         root_a, root_b, root_c);
  fill(&procs[0], "job A rank 0", 0, 1, root_a, 0, 2);
  fill(&procs[1], "job B rank 0", 2, 1, root_b, 0, 2);
  fill(&procs[2], "job C rank 0", 4, 1, root_c, 0, 2);
  fill(&procs[3], "job A rank 1", 1, 1, root_a, 1, 2);
  fill(&procs[4], "job B rank 1", 3, 1, root_b, 1, 2);
  fill(&procs[5], "job C rank 1", 5, 1, root_c, 1, 2);
  mp_run(procs, 6, JOB_DEADLINE_S);
  mp_check_ends(procs, 6);
  mp_check_shm_clean(port_a, "jobs A and C");
  mp_check_shm_clean(port_b, "job B");
  mp_cleanup_logs(procs, 6);
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    void (*run)(void);
    int in_all; /* run when no group is named (chaos is a CI step of its own: ci/test.sh) */
  } groups[] = {{"collectives", test_collectives, 1},
                {"mixed", test_mixed, 1},
                {"two-jobs", test_two_jobs, 1},
                {"groups", mp_test_groups, 1},
                {"tensors", mp_test_tensors, 1},
                {"kill", mp_test_kill, 1},
                {"errors", mp_test_errors, 1},
                {"chaos", mp_test_chaos, 0}};
  const int ngroups = (int)(sizeof groups / sizeof groups[0]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int a = 1; a < argc; a++) {
    int known = 0;
    for (int g = 0; g < ngroups; g++) known |= strcmp(argv[a], groups[g].name) == 0;
    if (!known) {
      fprintf(stderr, "usage: %s [collectives] [mixed] [two-jobs] [groups] [tensors] [kill] [errors] [chaos]\n", argv[0]);
      return 2;
    }
  }
  for (int g = 0; g < ngroups; g++) {
    int wanted = argc == 1 && groups[g].in_all;
    for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], groups[g].name) == 0;
    if (wanted) groups[g].run();
  }
  return mp_summary("mp_driver");
}
