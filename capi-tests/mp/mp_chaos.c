/* chaos: rounds of multi-process collectives while ranks are killed, stopped and delayed at
 * random (issue 28, "Chaos"). Expected statuses are the contract of the multi-process tests
 * (README.md "One rank per process", "Faults"; mp_faults.c's header; status numbers
 * docs/contract/abi.md §2.1), never taken from the library.
 *
 * A round is one job of R = 2..4 processes (one rank each) running 5..10 collectives drawn at
 * random: all-reduce, all-gather and reduce-scatter through nrta_cc_prepare / nrta_cc_schedule
 * (bf16 or fp32, 1..600 elements per chunk) and the blocking nrt_barrier and nrt_all_gather.
 * Every rank computes every expected byte from every rank's input (mp_rank.c). Each round
 * injects one fault, drawn with a victim rank and a collective index k:
 *   none;
 *   kill    SIGKILL of the victim at k: raised by itself right before it calls collective k,
 *           or ("async") sent by the harness 0-40 ms after the victim said it reached k, so
 *           it lands anywhere in k or after it (the ranks pause 0-15 ms before each
 *           collective: skewed arrivals, and a sequence an async fault can land inside);
 *   kill2   the same for two different victims (R >= 3), each with its own k and way;
 *   stop    SIGSTOP sent by the harness 0-40 ms after the victim reached k, held past
 *           NEURON_RT_EXEC_TIMEOUT (T + 1.5 s), then SIGKILL: a live rank that stops answering;
 *   delay   SIGSTOP as for stop, then SIGCONT after 100 ms .. T/4: only slow, never lost.
 * Rounds run CHAOS_BATCH at a time (their own ports and cores), so the waits of stopped ranks
 * overlap, and of every CHAOS_WINDOW rounds drawn the stop rounds run first, together
 * (draw_window); NEURON_RT_EXEC_TIMEOUT = T = 4 s in every rank.
 *
 * Asserted, for every rank that is not a victim (and for a victim until its fault):
 *   - no wrong result, ever: a collective that reports NRT_SUCCESS has every byte exact;
 *   - collectives before the fault (every one in none and delay rounds) succeed, except that
 *     an nrt_all_gather right before it may fail as a pending one does (the victim may have
 *     returned from that host exchange before the others got their copy: chaos_body);
 *   - from k on, a failure has an allowed status: kill and kill2 NRT_EXEC_HW_ERR_COLLECTIVES
 *     (1200), and NRT_TIMEOUT (5) too when the root's process (global id 0) is a victim
 *     (mp_faults.c: the survivors cannot always tell the root died from a root that went
 *     silent); stop: NRT_TIMEOUT (the live rank never arrives) or 1200 (the harness killed it
 *     before the survivor's own timeout ran out). It ends within T + 3 s of its start;
 *   - once a collective failed, no later one succeeds: after a kill the survivor runs one more
 *     collective, which must fail too (every later collective fails, README "Faults"); after
 *     a stop it stops there (each further one would only wait out T again);
 * and for the round: every survivor's process exits 0 within T + 5 s of the fault (the
 *   deadline of the whole batch is only a backstop); a victim died of SIGKILL or, when the
 *   fault came after its last collective or a failure ended its sequence first, exited 0;
 *   /dev/shm holds nothing of the round's job afterwards (mp_check_shm_clean). One case goes
 *   through the contract's way back first: a victim killed when no process of its job able
 *   to remove its names is alive (every survivor ended its sequence, or the root died first)
 *   leaves its own objects' names; then a new root on the round's address must remove them
 *   (check_shm).
 *
 * Replay: the seed is printed first; OPENNRT_CHAOS_SEED=<seed> draws the same rounds (the
 * timing of an async fault is drawn too, but where it lands depends on the machine), and
 * OPENNRT_CHAOS_ROUNDS sets the number of rounds (default CHAOS_DEFAULT_ROUNDS, sized for CI).
 * Every message names the seed, the round, the fault and the rank. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp_harness.h"
#include "mp_rank.h"
#include "mp_tests.h"

#define CHAOS_T_S 4                /* NEURON_RT_EXEC_TIMEOUT of every rank */
#define CHAOS_STOP_HOLD_MS (CHAOS_T_S * 1000 + 1500) /* a stop is held T + 1.5 s, then SIGKILL */
#define CHAOS_FAIL_SLACK_S 3.0     /* a failing collective ends within T + this */
#define CHAOS_END_SLACK_S 5.0      /* a survivor's process ends within T + this of the fault */
#define CHAOS_DEFAULT_ROUNDS 60
#define CHAOS_BATCH 4              /* rounds at once */
#define CHAOS_WINDOW (4 * CHAOS_BATCH) /* rounds drawn together, stop rounds batched first */
#define CHAOS_MAX_COLL 10
#define CHAOS_MAX_RANKS 4
/* A collective takes about a millisecond here, so the ranks pause 0..CHAOS_MAX_GAP_MS before
 * each one (skewed arrivals, and a sequence long enough for an async fault to land inside
 * it); the harness acts 0..CHAOS_MAX_LAG_MS after the victim reached its collective k. */
#define CHAOS_MAX_GAP_MS 15
#define CHAOS_MAX_LAG_MS 40
#define CHAOS_STR_(x) #x
#define CHAOS_STR(x) CHAOS_STR_(x)

enum fault { F_NONE, F_KILL, F_KILL2, F_STOP, F_DELAY, F_KINDS };
static const char *const fault_name[F_KINDS] = {"none", "kill", "kill2", "stop", "delay"};
enum op { OP_AR, OP_AG, OP_RS, OP_BARRIER, OP_HOST_AG };
static const char *const op_name[] = {"all-reduce", "all-gather", "reduce-scatter", "nrt_barrier", "nrt_all_gather"};

/* One round: drawn by the parent before the fork (the children read their copy), and the
 * parent's record of what it did to the victims. */
typedef struct {
  int round, ranks, ncoll, port, first_proc;
  int op[CHAOS_MAX_COLL], dtype[CHAOS_MAX_COLL], count[CHAOS_MAX_COLL];
  int gap_ms[CHAOS_MAX_RANKS][CHAOS_MAX_COLL]; /* each rank's pause before each collective */
  int fault, nvictims;
  int victim[2], at[2], async[2], lag_ms[2]; /* async 0: the victim raises SIGKILL itself */
  int delay_ms;
  /* parent side */
  int stage[2];
  double acted_at[2];  /* when the fault was injected (0: not yet, or never) */
  double killed_at[2]; /* when the harness sent the victim SIGKILL (async kill, or after a stop) */
  char root[64];
  char what[160];     /* "seed S round N: fault kill (rank 1 at #3, async +40 ms)" */
} chaos_round;

static unsigned long long chaos_seed;
static uint64_t rng_state;
static chaos_round batch[CHAOS_BATCH];
static chaos_round window[CHAOS_WINDOW];

/* splitmix64: one 64-bit state, every value from the seed alone. */
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int rng_below(int n) { return (int)(rng_next() % (uint64_t)n); }

static int victim_index(const chaos_round *c, int gid) {
  for (int j = 0; j < c->nvictims; j++)
    if (c->victim[j] == gid) return j;
  return -1;
}

static int root_is_victim(const chaos_round *c) { return victim_index(c, 0) >= 0; }

static void draw_round(chaos_round *c, int round) {
  static const int weights[F_KINDS] = {15, 30, 15, 15, 25}; /* percent */
  int w = rng_below(100), f = 0;
  memset(c, 0, sizeof *c);
  c->round = round;
  c->ranks = 2 + rng_below(3);
  c->ncoll = 5 + rng_below(CHAOS_MAX_COLL - 4);
  for (int i = 0; i < c->ncoll; i++) {
    int x = rng_below(10);
    c->op[i] = x < 3 ? OP_AR : x < 5 ? OP_AG : x < 7 ? OP_RS : x < 8 ? OP_BARRIER : OP_HOST_AG;
    c->dtype[i] = rng_below(2) ? NRT_DTYPE_FLOAT32 : NRT_DTYPE_BFLOAT16;
    c->count[i] = 1 + rng_below(600);
    for (int g = 0; g < CHAOS_MAX_RANKS; g++) c->gap_ms[g][i] = rng_below(CHAOS_MAX_GAP_MS + 1);
  }
  while (w >= weights[f]) w -= weights[f++];
  if (f == F_KILL2 && c->ranks < 3) f = F_KILL;
  c->fault = f;
  c->nvictims = f == F_NONE ? 0 : f == F_KILL2 ? 2 : 1;
  for (int j = 0; j < c->nvictims; j++) {
    do c->victim[j] = rng_below(c->ranks);
    while (j == 1 && c->victim[1] == c->victim[0]);
    c->at[j] = rng_below(c->ncoll);
    c->async[j] = f == F_STOP || f == F_DELAY || rng_below(2);
    c->lag_ms[j] = rng_below(CHAOS_MAX_LAG_MS + 1);
  }
  c->delay_ms = 100 + rng_below(CHAOS_T_S * 1000 / 4 - 100 + 1);
  int n = snprintf(c->what, sizeof c->what, "seed %llu round %d: fault %s", chaos_seed, round, fault_name[f]);
  for (int j = 0; j < c->nvictims; j++) {
    n += snprintf(c->what + n, sizeof c->what - (size_t)n, "%srank %d at #%d ", j ? ", " : " (", c->victim[j],
                  c->at[j]);
    if (c->async[j]) n += snprintf(c->what + n, sizeof c->what - (size_t)n, "async +%d ms", c->lag_ms[j]);
    else n += snprintf(c->what + n, sizeof c->what - (size_t)n, "self");
  }
  if (f == F_DELAY) n += snprintf(c->what + n, sizeof c->what - (size_t)n, ", held %d ms", c->delay_ms);
  if (c->nvictims) snprintf(c->what + n, sizeof c->what - (size_t)n, ")");
}

/* ---------------------------------------------------------------- child side */

/* One collective of the round: its status, whether its output is exact, its duration. */
static NRT_STATUS run_one(const chaos_round *c, const mp_rank *r, int i, int *exact, double *elapsed) {
  NRT_STATUS st;
  double t0 = mp_now();
  int salt = c->round * 16 + i;
  *exact = 0;
  if (c->op[i] == OP_BARRIER) {
    st = nrt_barrier((int32_t)r->vnc, r->gid, r->world);
    *exact = 1; /* nothing to compare */
  } else if (c->op[i] == OP_HOST_AG) {
    st = mp_rank_all_gather(r, salt, 0, exact);
  } else {
    static const nrt_cc_op_type_t cc[3] = {NRT_CC_ALLREDUCE, NRT_CC_ALLGATHER, NRT_CC_REDUCESCATTER};
    mp_cc m;
    st = mp_cc_start(&m, r, cc[c->op[i]], (nrt_dtype_t)c->dtype[i], (size_t)c->count[i], salt, 0);
    if (st == NRT_SUCCESS) {
      bool done = false;
      for (;;) {
        if (nrta_is_completed(m.seq, &done) != NRT_SUCCESS) {
          mp_check(0, "[%s] %s: collective #%d (%s): nrta_is_completed failed", c->what, r->who, i, op_name[c->op[i]]);
          mp_child_abort("nrta_is_completed failed");
        }
        if (done) break;
        if (mp_now() - t0 > CHAOS_T_S + 10) {
          mp_check(0, "[%s] %s: collective #%d (%s) still not completed %d s after scheduling: a hang", c->what,
                   r->who, i, op_name[c->op[i]], CHAOS_T_S + 10);
          mp_child_abort("a hang");
        }
        usleep(500);
      }
      st = m.exec_ret;
      *exact = st == NRT_SUCCESS && mp_cc_exact(&m);
    }
    if (m.tin || m.tout) mp_cc_free(&m);
  }
  *elapsed = mp_now() - t0;
  return st;
}

static int allowed_failure(const chaos_round *c, NRT_STATUS st) {
  switch (c->fault) {
  case F_KILL:
  case F_KILL2: return st == NRT_EXEC_HW_ERR_COLLECTIVES || (root_is_victim(c) && st == NRT_TIMEOUT);
  case F_STOP: return st == NRT_EXEC_HW_ERR_COLLECTIVES || st == NRT_TIMEOUT;
  default: return 0;
  }
}

static void chaos_body(const mp_proc *p) {
  const chaos_round *c = &batch[p->arg];
  char who[48];
  mp_rank r = {0, (uint32_t)p->gid, (uint32_t)p->world, who};
  int me = victim_index(c, p->gid), first_fault = CHAOS_MAX_COLL, failed_at = -1, wrong = 0, bad = 0, ok_runs = 0,
      failed_runs = 0, extra = c->fault == F_KILL || c->fault == F_KILL2;
  NRT_STATUS st;
  snprintf(who, sizeof who, "rank %d", p->gid);
  for (int j = 0; j < c->nvictims; j++)
    if (c->at[j] < first_fault) first_fault = c->at[j];
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "[%s] rank %d: nrt_init -> NRT_SUCCESS (got %d)", c->what, p->gid, st)) return;
  st = nrt_cc_global_comm_init(0, r.gid, r.world);
  mp_check(st == NRT_SUCCESS, "[%s] rank %d: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", c->what, p->gid, st);
  st = nrt_barrier(0, r.gid, r.world);
  if (!mp_check(st == NRT_SUCCESS, "[%s] rank %d: joining nrt_barrier -> NRT_SUCCESS (got %d)", c->what, p->gid, st)) {
    if (me >= 0) raise(SIGKILL); /* its fault would never come: end as a victim does */
    nrt_close();
    return;
  }
  for (int i = 0; i < c->ncoll; i++) {
    int exact;
    double dt;
    usleep((useconds_t)c->gap_ms[p->gid][i] * 1000u);
    if (me >= 0 && i == c->at[me]) {
      mp_ready(); /* the harness times its fault from here */
      if (!c->async[me]) {
        mp_say("[%s] rank %d: raising SIGKILL instead of calling collective #%d", c->what, p->gid, i);
        raise(SIGKILL);
      }
    }
    st = run_one(c, &r, i, &exact, &dt);
    if (st == NRT_SUCCESS) {
      ok_runs++;
      if (!exact) {
        wrong++;
        mp_check(0, "[%s] rank %d: collective #%d (%s %s x %d) reported NRT_SUCCESS with a WRONG result", c->what,
                 p->gid, i, op_name[c->op[i]], mp_dtype_name((nrt_dtype_t)c->dtype[i]), c->count[i]);
      }
      if (failed_at >= 0) {
        bad++;
        mp_check(0, "[%s] rank %d: collective #%d succeeded after #%d failed (a lost rank cannot contribute)", c->what,
                 p->gid, i, failed_at);
      }
      continue;
    }
    failed_runs++;
    mp_say("[%s] rank %d: collective #%d (%s) failed with %d after %.2f s", c->what, p->gid, i, op_name[c->op[i]], st,
           dt);
    /* nrt_all_gather is a host exchange at the root: a rank returns from it once the root
     * holds every input, before every member has its copy. A victim that returned from it
     * and died at once leaves the others' copy of that one collective still pending, which
     * the contract fails like any pending collective; a device collective has no such window
     * (every rank waits until the others are done, README "Shared simulated devices"). */
    int pending_at_death = i == first_fault - 1 && c->op[i] == OP_HOST_AG;
    if ((i < first_fault && !pending_at_death) || c->fault == F_NONE || c->fault == F_DELAY) {
      bad++;
      mp_check(0, "[%s] rank %d: collective #%d (%s) must succeed (%s) but failed with %d after %.2f s", c->what,
               p->gid, i, op_name[c->op[i]],
               c->fault == F_NONE ? "no fault" : c->fault == F_DELAY ? "a delay only" : "before the fault", st, dt);
      mp_print_stderr(p);
    } else {
      if (!allowed_failure(c, st)) {
        bad++;
        mp_check(0, "[%s] rank %d: collective #%d (%s) failed with %d, which the contract does not allow for %s%s",
                 c->what, p->gid, i, op_name[c->op[i]], st, fault_name[c->fault],
                 c->fault == F_STOP ? " (NRT_TIMEOUT or 1200)" : root_is_victim(c) ? " (1200 or NRT_TIMEOUT)" : " (1200)");
      }
      if (dt >= CHAOS_T_S + CHAOS_FAIL_SLACK_S) {
        bad++;
        mp_check(0, "[%s] rank %d: collective #%d failed only after %.2f s (NEURON_RT_EXEC_TIMEOUT %d s + %.0f s)",
                 c->what, p->gid, i, dt, CHAOS_T_S, CHAOS_FAIL_SLACK_S);
      }
    }
    if (failed_at >= 0 || !extra) break;
    failed_at = i;
  }
  mp_check(wrong == 0 && bad == 0, "[%s] rank %d: %d succeeded (all exact: %s), %d failed (all as allowed: %s)", c->what,
           p->gid, ok_runs, wrong ? "NO" : "yes", failed_runs, bad ? "NO" : "yes");
  if (me < 0) mp_ready(); /* its sequence is over: the harness's check_shm needs the time */
  nrt_close();
}

/* ---------------------------------------------------------------- parent side */

/* The harness's side of the faults, once per turn of mp_run's loop. Stage 0: wait for the
 * victim's ready byte (it reached its collective k); 1: after its lag, SIGKILL (async kill) or
 * SIGSTOP; 2: after the hold, SIGCONT (delay) or SIGKILL (stop); 3: done. */
static void chaos_tick(mp_proc *procs, int n, void *arg) {
  int nb = *(int *)arg;
  double now = mp_now();
  (void)n;
  for (int b = 0; b < nb; b++) {
    chaos_round *c = &batch[b];
    for (int j = 0; j < c->nvictims; j++) {
      mp_proc *v = &procs[c->first_proc + c->victim[j]];
      if (!v->started || v->exited || c->stage[j] == 3) continue;
      if (c->stage[j] == 0 && v->ready) {
        c->stage[j] = 1;
        if (!c->async[j]) c->acted_at[j] = v->ready_at, c->stage[j] = 3; /* it kills itself */
      } else if (c->stage[j] == 1 && now >= v->ready_at + c->lag_ms[j] / 1000.0) {
        kill(v->pid, c->fault == F_STOP || c->fault == F_DELAY ? SIGSTOP : SIGKILL);
        c->acted_at[j] = now;
        if (c->fault == F_KILL || c->fault == F_KILL2) c->killed_at[j] = now;
        c->stage[j] = c->fault == F_STOP || c->fault == F_DELAY ? 2 : 3;
      } else if (c->stage[j] == 2 && c->fault == F_DELAY && now >= c->acted_at[j] + c->delay_ms / 1000.0) {
        kill(v->pid, SIGCONT);
        c->stage[j] = 3;
      } else if (c->stage[j] == 2 && c->fault == F_STOP && now >= c->acted_at[j] + CHAOS_STOP_HOLD_MS / 1000.0) {
        kill(v->pid, SIGKILL);
        c->killed_at[j] = now;
        c->stage[j] = 3;
      }
    }
  }
}

/* Joins a world of 2 on a round's root address and leaves: the root's start removes what an
 * earlier job on that address left (README "Faults"). */
static void sweep_body(const mp_proc *p) {
  NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", p->name, st)) return;
  st = nrt_barrier(0, (uint32_t)p->gid, (uint32_t)p->world);
  mp_check(st == NRT_SUCCESS, "%s: nrt_barrier -> NRT_SUCCESS (got %d)", p->name, st);
  nrt_close();
}

/* The /dev/shm objects of a round's job (opennrt-<port>-*), and how many of them belong to
 * process `pid` (its names carry -<pid>-). */
static int shm_left(int port, pid_t pid, int *of_pid) {
  char prefix[32], mark[24];
  DIR *d = opendir("/dev/shm");
  struct dirent *e;
  int n = 0;
  *of_pid = 0;
  if (!d) return 0;
  snprintf(prefix, sizeof prefix, "opennrt-%d-", port);
  snprintf(mark, sizeof mark, "-%d-", (int)pid);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    n++;
    if (strstr(e->d_name + strlen(prefix), mark)) (*of_pid)++;
  }
  closedir(d);
  return n;
}

/* /dev/shm after a round. The names a process leaves when it dies are removed by the job's
 * root, and a member whose job failed removes the whole job's (README "Faults"). Nobody is
 * left to do it when a victim dies after every survivor ended its sequence (a stop held past
 * them, or an async kill that landed late), or when the root itself is a victim and another
 * victim outlives it: then the names of the victims' live objects stay. The contract's way
 * back is the next root on the address, which removes what a killed earlier job there left:
 * in those cases, and only for objects of the victims, the round starts one (sweep_body) and
 * then requires /dev/shm clean. Anything else left is a leak, reported by
 * mp_check_shm_clean. */
static void check_shm(chaos_round *c, mp_proc *procs) {
  char job[200];
  double last_survivor = 0, death[2] = {0, 0};
  int left = 0, of_victims = 0, orphaned = 0;
  snprintf(job, sizeof job, "[%s]", c->what);
  for (int g = 0; g < c->ranks; g++) {
    const mp_proc *q = &procs[c->first_proc + g];
    double done = q->ready ? q->ready_at : q->ended_at; /* ready: its sequence ended */
    if (victim_index(c, g) < 0 && done > last_survivor) last_survivor = done;
  }
  for (int j = 0; j < c->nvictims; j++) /* SIGKILL from the harness, or raised by the victim */
    death[j] = c->killed_at[j] ? c->killed_at[j] : c->fault != F_DELAY && !c->async[j] ? c->acted_at[j] : 0;
  for (int j = 0; j < c->nvictims; j++) {
    int of;
    left = shm_left(c->port, procs[c->first_proc + c->victim[j]].pid, &of);
    of_victims += of;
    if (death[j] && of && (death[j] >= last_survivor || (root_is_victim(c) && c->victim[j] != 0)))
      orphaned = 1;
  }
  if (left > 0 && left == of_victims && orphaned) {
    mp_say("   %s: %d object(s) of killed victims left, with no process of the job alive to remove them; a new root "
           "on %s must remove them",
           job, left, c->root);
    mp_proc sweep[2];
    for (int g = 0; g < 2; g++) {
      memset(&sweep[g], 0, sizeof sweep[g]);
      snprintf(sweep[g].name, sizeof sweep[g].name, "sweep round %d rank %d", c->round, g);
      snprintf(sweep[g].cores, sizeof sweep[g].cores, "%d", g);
      snprintf(sweep[g].root, sizeof sweep[g].root, "%s", c->root);
      sweep[g].body = sweep_body, sweep[g].gid = g, sweep[g].world = 2, sweep[g].threads = 1;
    }
    mp_run(sweep, 2, 30);
    mp_check_ends(sweep, 2);
    mp_cleanup_logs(sweep, 2);
  }
  mp_check_shm_clean(c->port, job);
}

/* Draw the next `n` rounds (at most CHAOS_WINDOW), numbered from `first`, into `window`,
 * stop rounds first: a batch lasts as long as its longest round, and a stop round lasts T +
 * 1.5 s while the others take well under a second, so grouping the stops keeps the run's
 * length close to its expectation (and the CI step within its budget). */
static void draw_window(int first, int n) {
  chaos_round drawn[CHAOS_WINDOW];
  int k = 0;
  for (int i = 0; i < n; i++) draw_round(&drawn[i], first + i);
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++)
      if ((drawn[i].fault == F_STOP) == (pass == 0)) window[k++] = drawn[i];
}

static int env_number(const char *name, unsigned long long dflt, unsigned long long *out) {
  const char *s = getenv(name);
  char *end;
  if (!s || !*s) return *out = dflt, 1;
  *out = strtoull(s, &end, 0);
  return *end == 0;
}

void mp_test_chaos(void) {
  static const char *timeout_env = "NEURON_RT_EXEC_TIMEOUT=" CHAOS_STR(CHAOS_T_S);
  unsigned long long rounds;
  int kinds[F_KINDS] = {0}, landed[F_KINDS] = {0}, collectives = 0, injected = 0, failed_rounds = 0;
  double t0 = mp_now();
  if (!env_number("OPENNRT_CHAOS_SEED", (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 16),
                  &chaos_seed) ||
      !env_number("OPENNRT_CHAOS_ROUNDS", CHAOS_DEFAULT_ROUNDS, &rounds) || rounds == 0 || rounds > 100000) {
    mp_check(0, "chaos: OPENNRT_CHAOS_SEED must be a number, OPENNRT_CHAOS_ROUNDS a number in 1..100000");
    return;
  }
  rng_state = chaos_seed;
  mp_say("\n== chaos: seed %llu (OPENNRT_CHAOS_SEED=%llu replays it), %llu rounds, %d at once, "
         "NEURON_RT_EXEC_TIMEOUT=%d",
         chaos_seed, chaos_seed, rounds, CHAOS_BATCH, CHAOS_T_S);
  for (unsigned long long first = 0; first < rounds; first += CHAOS_BATCH) {
    mp_proc procs[CHAOS_BATCH * CHAOS_MAX_RANKS];
    int nb = (int)(rounds - first < CHAOS_BATCH ? rounds - first : CHAOS_BATCH), n = 0;
    if (first % CHAOS_WINDOW == 0) draw_window((int)first, (int)(rounds - first < CHAOS_WINDOW ? rounds - first : CHAOS_WINDOW));
    for (int b = 0; b < nb; b++) {
      chaos_round *c = &batch[b];
      char root[64];
      *c = window[first % CHAOS_WINDOW + (unsigned long long)b];
      c->port = mp_free_port();
      c->first_proc = n;
      mp_root_id(root, sizeof root, c->round % 3, c->port);
      snprintf(c->root, sizeof c->root, "%s", root);
      mp_say("-- %s; R=%d, %d collectives, root %s", c->what, c->ranks, c->ncoll, root);
      for (int g = 0; g < c->ranks; g++) {
        mp_proc *q = &procs[n++];
        memset(q, 0, sizeof *q);
        snprintf(q->name, sizeof q->name, "chaos round %d rank %d", c->round, g);
        snprintf(q->cores, sizeof q->cores, "%d", n - 1);
        snprintf(q->root, sizeof q->root, "%s", root);
        q->env[0] = timeout_env;
        q->body = chaos_body, q->gid = g, q->world = c->ranks, q->threads = 1, q->arg = b;
      }
      kinds[c->fault]++;
      collectives += c->ncoll;
      injected += c->nvictims;
    }
    mp_run_ticking(procs, n, 3 * CHAOS_T_S + 30, chaos_tick, &nb);
    for (int b = 0; b < nb; b++) {
      chaos_round *c = &batch[b];
      double fault_at = 0;
      int failed_before = mp_failed_count();
      for (int j = 0; j < c->nvictims; j++)
        if (c->acted_at[j] && (!fault_at || c->acted_at[j] < fault_at)) fault_at = c->acted_at[j];
      /* The fault landed if the harness acted while the victim was still running (it skips a
       * victim that ended: its fault came after its last collective). */
      if (fault_at) landed[c->fault]++;
      for (int g = 0; g < c->ranks; g++) {
        mp_proc *q = &procs[c->first_proc + g];
        int st = q->wstatus, j = victim_index(c, g), exited0 = WIFEXITED(st) && WEXITSTATUS(st) == 0,
            killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        int good = q->started && !q->timed_out &&
                   (j < 0 || c->fault == F_DELAY ? exited0 : exited0 || killed);
        mp_check(good, "[%s] rank %d: %s (%s %d)", c->what, g,
                 j < 0 || c->fault == F_DELAY ? "exited with status 0"
                                             : "died of SIGKILL, or exited 0 (its fault came after its sequence ended)",
                 q->timed_out ? "killed at the deadline, signal" : WIFEXITED(st) ? "exit status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        if (!good) mp_print_stderr(q);
        if (j < 0 && fault_at && c->fault != F_DELAY)
          mp_check(q->ended_at - fault_at < CHAOS_T_S + CHAOS_END_SLACK_S,
                   "[%s] rank %d: its process ended %.2f s after the fault (< NEURON_RT_EXEC_TIMEOUT %d s + %.0f s)",
                   c->what, g, q->ended_at - fault_at, CHAOS_T_S, CHAOS_END_SLACK_S);
      }
      check_shm(c, procs);
      if (mp_failed_count() != failed_before) failed_rounds++;
    }
    mp_cleanup_logs(procs, n);
  }
  mp_say("== chaos: seed %llu, %llu rounds (%d failed), %d collectives drawn; rounds per fault (landed before the "
         "victim's sequence ended): none %d, kill %d (%d), kill2 %d (%d), stop %d (%d), delay %d (%d); %d victims; %.1f s",
         chaos_seed, rounds, failed_rounds, collectives, kinds[F_NONE], kinds[F_KILL], landed[F_KILL], kinds[F_KILL2],
         landed[F_KILL2], kinds[F_STOP], landed[F_STOP], kinds[F_DELAY], landed[F_DELAY], injected, mp_now() - t0);
}
