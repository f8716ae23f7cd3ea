/* OpenNRT side of bench/vs-openmpi.sh: an fp32 sum all-reduce, out of place, through the
 * public C API only (include/nrt/nrt.h, nrt_async.h, nrt_status.h), as a user's program does
 * it: every iteration is nrta_cc_prepare -> nrta_cc_schedule -> poll nrta_is_completed until
 * done, then the next iteration.
 *
 *   nrt_allreduce threads|processes <ranks> <bytes> <iters> [warmup] [--wait spin|yield|sleep|backoff|eventfd]
 *                 [--rank r]
 *
 * threads:   one process, NEURON_RT_VISIBLE_CORES=0-(R-1) set before nrt_init, one pthread per
 *            rank; rank r is logical core (vnc) r and global device r:
 *            nrt_cc_global_comm_init(r, r, R), comm {group, r, R, r, R, vnc r}.
 * processes: the parent forks R children before anything touches libnrt (the parent never
 *            calls into it); child r sets NEURON_RT_VISIBLE_CORES=r and
 *            NEURON_RT_ROOT_COMM_ID=127.0.0.1:<free port> before nrt_init, then
 *            nrt_cc_global_comm_init(0, r, R), comm {group, r, R, r, R, vnc 0}; rank 0's
 *            process hosts the job's root. Every child ends with nrt_barrier before nrt_close,
 *            so the root stays alive until all ranks are done (capi-tests/mp does the same).
 * processes --rank r: no fork; this process is rank r of an R-rank job whose other ranks a
 *            launcher starts elsewhere (other hosts: bench/vs-openmpi.sh --hosts). It reads
 *            NEURON_RT_ROOT_COMM_ID (required: the root's host:port, rank 0's process) and
 *            NEURON_RT_VISIBLE_CORES (set to r when unset) from the environment, then does
 *            what a forked child does: nrt_cc_global_comm_init(0, r, R), vnc 0, and
 *            nrt_barrier before nrt_close. Only rank 0 prints the RESULT line.
 *
 * Inputs are small integers ((rank + j) % 7 + 1) so every sum is exact in fp32. The output
 * tensor is filled with NaN bytes first; after the timed loop every rank reads its output
 * back and compares every element with the exact sum; a wrong element, a failed call, a
 * non-NRT_SUCCESS exec_ret or a wait longer than WAIT_TIMEOUT_S makes the exit status 1.
 *
 * Timing (rank 0, CLOCK_MONOTONIC): per timed iteration, from just before nrta_cc_schedule
 * to the poll that saw completion. Printed on stdout as one line:
 *
 *   RESULT lib=nrt mode=M ranks=R bytes=B iters=N time_us=<median schedule->completion>
 *          iter_us=<median prepare->completion> mean_us=<mean of the whole loop per iteration>
 *          busbw_gbs=<from time_us> wait=<strategy> minflt_per_iter=<minor page faults of rank 0's
 *          process per timed iteration (threads: every rank's; processes: rank 0's only)>
 *          p99_us=<99th percentile of the same schedule->completion times as time_us>
 *
 * p99_us is the nearest-rank percentile: the ceil(0.99 N)-th smallest of the N timed
 * iterations (N <= 100: the slowest one), so with the 2000 iterations vs-openmpi.sh runs at
 * 4 KiB it is the 1980th, with 20 slower iterations above it.
 *
 * busbw = bytes / time * 2 (R - 1) / R (nccl-tests' all-reduce factor; GB = 1e9 bytes).
 * The wait strategy between polls of nrta_is_completed: spin (nothing), yield (sched_yield,
 * the default: ranks that wait give the CPU to the ones that work when there are more ranks
 * than cores), sleep (usleep(20)), backoff (yield for the first 50 us, then usleep of 1/20 of
 * the time waited so far, 10 us to 1 ms), eventfd (block in poll(2) on an eventfd registered
 * with nrta_event_register_seq_id_completion: a caller that sleeps until the runtime wakes
 * it). Human-readable text goes to stderr. */
#define _GNU_SOURCE
#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_status.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

#define MAX_RANKS 128
#define WAIT_TIMEOUT_S 240.0
#define EXEC_TIMEOUT_S "120" /* NEURON_RT_EXEC_TIMEOUT unless the caller set one */

enum wait_mode { WAIT_SPIN, WAIT_YIELD, WAIT_SLEEP, WAIT_BACKOFF, WAIT_EVENTFD };
static const char *wait_names[] = {"spin", "yield", "sleep", "backoff", "eventfd"};

typedef struct {
  int processes;            /* 0: threads mode, 1: processes mode */
  uint32_t rank, nranks;    /* global rank (= global device id) and world size */
  uint32_t vnc;             /* logical core relative to this process's visible cores */
  long bytes, iters, warmup;
  enum wait_mode wait;
} job;

static pthread_barrier_t thread_barrier; /* threads mode only */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double median(double *v, long n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A failure ends the whole process at once (no nrt_close: a pending collective may still
 * write exec_ret). In threads mode that also ends the other ranks, which would otherwise wait
 * for this one; in processes mode the parent sees the exit status and kills the others. */
static void die(const job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(const job *j, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "nrt_allreduce: %s rank %u: FAILED: %s\n", j->processes ? "processes" : "threads", j->rank, msg);
  fflush(NULL);
  _exit(1);
}

static const char *st_str(NRT_STATUS st) {
  const char *s = nrt_get_status_as_str(st);
  return s ? s : "?";
}

static void sync_ranks(const job *j, const char *what) {
  if (j->processes) {
    NRT_STATUS st = nrt_barrier((int32_t)j->vnc, j->rank, j->nranks);
    if (st != NRT_SUCCESS) die(j, "nrt_barrier (%s) returned %d (%s)", what, st, st_str(st));
  } else {
    pthread_barrier_wait(&thread_barrier);
  }
}

/* --wait eventfd: a caller that blocks. One eventfd per rank thread, registered for each
 * request (the runtime signals it at once if the request completed already), then poll(2). */
static void wait_eventfd(const job *j, nrta_seq_t seq, long iter) {
  static __thread int fd = -1;
  struct pollfd p;
  uint64_t v;
  NRT_STATUS st;
  if (fd < 0 && (fd = eventfd(0, EFD_CLOEXEC)) < 0) die(j, "eventfd: %s", strerror(errno));
  st = nrta_event_register_seq_id_completion(seq, fd);
  if (st != NRT_SUCCESS) die(j, "iteration %ld: nrta_event_register_seq_id_completion returned %d (%s)", iter, st, st_str(st));
  p = (struct pollfd){fd, POLLIN, 0};
  if (poll(&p, 1, (int)(WAIT_TIMEOUT_S * 1000)) != 1) die(j, "iteration %ld: eventfd silent after %.0f s", iter, WAIT_TIMEOUT_S);
  if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) die(j, "iteration %ld: read(eventfd): %s", iter, strerror(errno));
}

static void wait_done(const job *j, nrta_seq_t seq, long iter) {
  double started = now(), deadline = started + WAIT_TIMEOUT_S;
  unsigned polls = 0;
  if (j->wait == WAIT_EVENTFD) wait_eventfd(j, seq, iter);
  for (;;) {
    bool done = false;
    NRT_STATUS st = nrta_is_completed(seq, &done);
    if (st != NRT_SUCCESS) die(j, "iteration %ld: nrta_is_completed returned %d (%s)", iter, st, st_str(st));
    if (done) return;
    if ((++polls & 1023u) == 0 && now() > deadline)
      die(j, "iteration %ld: not completed after %.0f s", iter, WAIT_TIMEOUT_S);
    if (j->wait == WAIT_YIELD) sched_yield();
    else if (j->wait == WAIT_SLEEP) usleep(20);
    else if (j->wait == WAIT_BACKOFF) {
      double waited = now() - started;
      if (waited < 50e-6) sched_yield();
      else usleep((useconds_t)(waited * 1e6 / 20 < 10 ? 10 : waited * 1e6 / 20 > 1000 ? 1000 : waited * 1e6 / 20));
    }
  }
}

/* One rank's whole benchmark; returns only on success. */
static void run_rank(const job *j) {
  long count = j->bytes / 4, total = j->warmup + j->iters, i, k, wrong = 0;
  uint32_t group[MAX_RANKS];
  float *host = malloc((size_t)j->bytes), want[7];
  double *sched_us = calloc((size_t)j->iters, sizeof(double)), *iter_us = calloc((size_t)j->iters, sizeof(double));
  double loop_t0 = 0, loop_t1;
  struct rusage ru0 = {0}, ru1 = {0};
  nrt_tensor_t *tin = NULL, *tout = NULL;
  NRT_STATUS st;
  if (!host || !sched_us || !iter_us) die(j, "out of host memory");
  for (uint32_t s = 0; s < j->nranks; s++) group[s] = s;

  st = nrt_cc_global_comm_init(j->vnc, j->rank, j->nranks);
  if (st != NRT_SUCCESS)
    die(j, "nrt_cc_global_comm_init(%u, %u, %u) returned %d (%s)", j->vnc, j->rank, j->nranks, st, st_str(st));
  st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, (int)j->vnc, (size_t)j->bytes, "bench_in", &tin);
  if (st != NRT_SUCCESS) die(j, "nrt_tensor_allocate(input, %ld B) returned %d (%s)", j->bytes, st, st_str(st));
  st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, (int)j->vnc, (size_t)j->bytes, "bench_out", &tout);
  if (st != NRT_SUCCESS) die(j, "nrt_tensor_allocate(output, %ld B) returned %d (%s)", j->bytes, st, st_str(st));
  for (k = 0; k < count; k++) host[k] = (float)((j->rank + k) % 7 + 1);
  st = nrt_tensor_write(tin, host, 0, (size_t)j->bytes);
  if (st != NRT_SUCCESS) die(j, "nrt_tensor_write(input) returned %d (%s)", st, st_str(st));
  memset(host, 0xFF, (size_t)j->bytes); /* NaN: an output never written cannot pass */
  st = nrt_tensor_write(tout, host, 0, (size_t)j->bytes);
  if (st != NRT_SUCCESS) die(j, "nrt_tensor_write(output) returned %d (%s)", st, st_str(st));

  sync_ranks(j, "before the loop");
  for (i = 0; i < total; i++) {
    nrt_cc_comm_t comm = {group, j->rank, j->nranks, j->rank, j->nranks, j->vnc};
    nrt_tensor_list_t li = {&tin, 1}, lo = {&tout, 1};
    nrt_cc_context_t *ctx = NULL;
    NRT_STATUS exec_ret = (NRT_STATUS)4242; /* written by the runtime at completion */
    nrta_seq_t seq = 0;
    double t_prep, t_sched, t_done;
    if (i == j->warmup) {
      loop_t0 = now();
      getrusage(RUSAGE_SELF, &ru0);
    }
    t_prep = now();
    st = nrta_cc_prepare(&comm, &li, &lo, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx);
    if (st != NRT_SUCCESS) die(j, "iteration %ld: nrta_cc_prepare returned %d (%s)", i, st, st_str(st));
    t_sched = now();
    st = nrta_cc_schedule(&ctx, 0, &exec_ret, &seq);
    if (st != NRT_SUCCESS) die(j, "iteration %ld: nrta_cc_schedule returned %d (%s)", i, st, st_str(st));
    wait_done(j, seq, i);
    t_done = now();
    if (exec_ret != NRT_SUCCESS) die(j, "iteration %ld: exec_ret %d (%s)", i, exec_ret, st_str(exec_ret));
    if (i >= j->warmup) {
      sched_us[i - j->warmup] = (t_done - t_sched) * 1e6;
      iter_us[i - j->warmup] = (t_done - t_prep) * 1e6;
    }
  }
  loop_t1 = now();
  getrusage(RUSAGE_SELF, &ru1);

  /* Exact check, once: element k is the sum over ranks s of (s + k) % 7 + 1. */
  for (k = 0; k < 7; k++) {
    long w = 0;
    for (uint32_t s = 0; s < j->nranks; s++) w += (s + k) % 7 + 1;
    want[k] = (float)w;
  }
  st = nrt_tensor_read(tout, host, 0, (size_t)j->bytes);
  if (st != NRT_SUCCESS) die(j, "nrt_tensor_read(output) returned %d (%s)", st, st_str(st));
  for (k = 0; k < count; k++) {
    if (host[k] != want[k % 7]) {
      if (wrong < 5)
        fprintf(stderr, "nrt_allreduce: rank %u: element %ld is %g, want %g\n", j->rank, k, (double)host[k],
                (double)want[k % 7]);
      wrong++;
    }
  }
  if (wrong) die(j, "%ld of %ld output elements wrong", wrong, count);

  if (j->rank == 0) {
    double mean = (loop_t1 - loop_t0) * 1e6 / (double)j->iters;
    double t = median(sched_us, j->iters), it = median(iter_us, j->iters); /* both sort */
    double p99 = percentile_sorted(sched_us, j->iters, 99.0);
    double busbw = (double)j->bytes / (t * 1e-6) * 2.0 * (j->nranks - 1) / j->nranks / 1e9;
    const char *mode = j->processes ? "processes" : "threads";
    fprintf(stderr,
            "nrt_allreduce: %s, %u ranks, %ld B fp32 sum, %ld iterations (+%ld warm-up), wait=%s: schedule->completion "
            "median %.2f us (min %.2f, p99 %.2f, max %.2f), prepare->completion median %.2f us, loop mean %.2f us, busbw %.3f "
            "GB/s, every element exact on every rank\n",
            mode, j->nranks, j->bytes, j->iters, j->warmup, wait_names[j->wait], t, sched_us[0], p99,
            sched_us[j->iters - 1], it, mean, busbw);
    double flt = (double)(ru1.ru_minflt - ru0.ru_minflt) / (double)j->iters;
    printf("RESULT lib=nrt mode=%s ranks=%u bytes=%ld iters=%ld time_us=%.3f iter_us=%.3f mean_us=%.3f busbw_gbs=%.4f "
           "wait=%s minflt_per_iter=%.2f p99_us=%.3f\n",
           mode, j->nranks, j->bytes, j->iters, t, it, mean, busbw, wait_names[j->wait], flt, p99);
    fflush(stdout);
  }
  /* Every rank is done before any leaves (processes: the root must outlive the others). */
  sync_ranks(j, "after the loop");
  nrt_tensor_free(&tin);
  nrt_tensor_free(&tout);
  free(host);
  free(sched_us);
  free(iter_us);
}

/* ---------------------------------------------------------------- threads mode */

static void *thread_main(void *arg) {
  run_rank((const job *)arg);
  return NULL;
}

static int run_threads(const job *base) {
  job jobs[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  char cores[32];
  NRT_STATUS st;
  snprintf(cores, sizeof cores, "0-%u", base->nranks - 1);
  setenv("NEURON_RT_VISIBLE_CORES", cores, 1);
  setenv("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S, 0);
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "nrt_allreduce: threads: nrt_init with NEURON_RT_VISIBLE_CORES=%s returned %d (%s)\n", cores, st,
            st_str(st));
    return 1;
  }
  pthread_barrier_init(&thread_barrier, NULL, base->nranks);
  for (uint32_t r = 0; r < base->nranks; r++) {
    jobs[r] = *base;
    jobs[r].rank = r, jobs[r].vnc = r;
    if (pthread_create(&th[r], NULL, thread_main, &jobs[r]) != 0) {
      fprintf(stderr, "nrt_allreduce: pthread_create failed\n");
      _exit(1);
    }
  }
  for (uint32_t r = 0; r < base->nranks; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&thread_barrier);
  nrt_close();
  return 0;
}

/* ---------------------------------------------------------------- processes mode */

/* A port in [20000, 32000) (below Linux's default ephemeral range) that binds on 127.0.0.1
 * without SO_REUSEADDR (so not one in TIME_WAIT either) and names no /dev/shm object of an
 * earlier job (OpenNRT names its segments opennrt-<port>-*). */
static int shm_objects(int port, int remove_them) {
  char prefix[32];
  DIR *d = opendir("/dev/shm");
  struct dirent *e;
  int n = 0;
  if (!d) return 0;
  snprintf(prefix, sizeof prefix, "opennrt-%d-", port);
  while ((e = readdir(d)) != NULL) {
    char path[300];
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    n++;
    if (!remove_them) continue;
    fprintf(stderr, "nrt_allreduce: warning: the job left /dev/shm/%s behind; removing it\n", e->d_name);
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    unlink(path);
  }
  closedir(d);
  return n;
}

static int free_port(void) {
  int port = 20000 + (int)((getpid() * 37) % 12000);
  for (int tries = 0; tries < 12000; tries++, port = port + 1 >= 32000 ? 20000 : port + 1) {
    struct sockaddr_in a;
    int s = socket(AF_INET, SOCK_STREAM, 0), ok;
    if (s < 0) continue;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    if (ok && shm_objects(port, 0) == 0) return port;
  }
  return -1;
}

static int run_processes(const job *base) {
  pid_t pids[MAX_RANKS], parent = getpid();
  int port = free_port(), failed = 0, left = (int)base->nranks;
  char root[64];
  if (port < 0) {
    fprintf(stderr, "nrt_allreduce: no free port on 127.0.0.1 in [20000, 32000)\n");
    return 1;
  }
  snprintf(root, sizeof root, "127.0.0.1:%d", port);
  fflush(NULL);
  for (uint32_t r = 0; r < base->nranks; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("nrt_allreduce: fork");
      for (uint32_t q = 0; q < r; q++) kill(pids[q], SIGKILL);
      while (wait(NULL) > 0) {}
      return 1;
    }
    if (pid == 0) {
      job j = *base;
      char cores[16];
      NRT_STATUS st;
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed parent (timeout) takes its ranks along */
      if (getppid() != parent) _exit(1);
      j.rank = r, j.vnc = 0;
      snprintf(cores, sizeof cores, "%u", r);
      unsetenv("NEURON_RT_NUM_CORES");
      setenv("NEURON_RT_VISIBLE_CORES", cores, 1);
      setenv("NEURON_RT_ROOT_COMM_ID", root, 1);
      setenv("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S, 0);
      st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
      if (st != NRT_SUCCESS)
        die(&j, "nrt_init (NEURON_RT_VISIBLE_CORES=%s NEURON_RT_ROOT_COMM_ID=%s) returned %d (%s)", cores, root, st,
            st_str(st));
      run_rank(&j);
      nrt_close();
      fflush(NULL);
      _exit(0);
    }
    pids[r] = pid;
  }
  /* The first rank to fail takes the others down: they would wait for it until a timeout. */
  while (left > 0) {
    int status;
    pid_t pid = wait(&status);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    left--;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      uint32_t r = 0;
      while (r < base->nranks && pids[r] != pid) r++;
      if (WIFSIGNALED(status))
        fprintf(stderr, "nrt_allreduce: processes: rank %u (pid %d) died of signal %d\n", r, (int)pid, WTERMSIG(status));
      else
        fprintf(stderr, "nrt_allreduce: processes: rank %u (pid %d) exited with status %d\n", r, (int)pid,
                WEXITSTATUS(status));
      if (!failed)
        for (uint32_t q = 0; q < base->nranks; q++)
          if (pids[q] != pid) kill(pids[q], SIGKILL);
      failed = 1;
    }
  }
  shm_objects(port, 1);
  return failed;
}

/* One given rank of a job started by someone else (--rank r). */
static int run_one_rank(const job *base, uint32_t r) {
  job j = *base;
  const char *root = getenv("NEURON_RT_ROOT_COMM_ID"), *cores;
  char buf[16];
  NRT_STATUS st;
  j.rank = r, j.vnc = 0;
  if (!root || !*root) {
    fprintf(stderr, "nrt_allreduce: --rank %u needs NEURON_RT_ROOT_COMM_ID=<host of rank 0>:<port>\n", r);
    return 2;
  }
  if (!getenv("NEURON_RT_VISIBLE_CORES")) {
    snprintf(buf, sizeof buf, "%u", r);
    setenv("NEURON_RT_VISIBLE_CORES", buf, 1);
  }
  cores = getenv("NEURON_RT_VISIBLE_CORES");
  setenv("NEURON_RT_EXEC_TIMEOUT", EXEC_TIMEOUT_S, 0);
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (st != NRT_SUCCESS)
    die(&j, "nrt_init (NEURON_RT_VISIBLE_CORES=%s NEURON_RT_ROOT_COMM_ID=%s) returned %d (%s)", cores, root, st,
        st_str(st));
  run_rank(&j);
  nrt_close();
  fflush(NULL);
  return 0;
}

/* ---------------------------------------------------------------- main */

static long parse_long(const char *s, const char *what) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || *end || v < 0) {
    fprintf(stderr, "nrt_allreduce: bad %s '%s'\n", what, s);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  job base;
  const char *pos[5];
  int npos = 0;
  long one_rank = -1;
  memset(&base, 0, sizeof base);
  base.warmup = 10;
  base.wait = WAIT_YIELD;
  for (int a = 1; a < argc; a++) {
    if (strcmp(argv[a], "--wait") == 0 && a + 1 < argc) {
      const char *w = argv[++a];
      if (strcmp(w, "spin") == 0) base.wait = WAIT_SPIN;
      else if (strcmp(w, "yield") == 0) base.wait = WAIT_YIELD;
      else if (strcmp(w, "sleep") == 0) base.wait = WAIT_SLEEP;
      else if (strcmp(w, "backoff") == 0) base.wait = WAIT_BACKOFF;
      else if (strcmp(w, "eventfd") == 0) base.wait = WAIT_EVENTFD;
      else npos = 99;
    } else if (strcmp(argv[a], "--rank") == 0 && a + 1 < argc) {
      one_rank = parse_long(argv[++a], "rank");
    } else if (npos < 5) {
      pos[npos++] = argv[a];
    } else {
      npos = 99;
    }
  }
  if (npos < 4 || npos > 5 || (strcmp(pos[0], "threads") != 0 && strcmp(pos[0], "processes") != 0)) {
    fprintf(stderr,
            "usage: %s threads|processes <ranks> <bytes> <iters> [warmup] [--wait spin|yield|sleep|backoff|eventfd] [--rank r]\n",
            argv[0]);
    return 2;
  }
  base.processes = strcmp(pos[0], "processes") == 0;
  base.nranks = (uint32_t)parse_long(pos[1], "ranks");
  base.bytes = parse_long(pos[2], "bytes");
  base.iters = parse_long(pos[3], "iters");
  if (npos > 4) base.warmup = parse_long(pos[4], "warmup");
  if (base.nranks < 2 || base.nranks > MAX_RANKS || base.bytes <= 0 || base.bytes % 4 || base.iters <= 0) {
    fprintf(stderr, "nrt_allreduce: need 2 <= ranks <= %d, bytes a positive multiple of 4, iters > 0\n", MAX_RANKS);
    return 2;
  }
  if (one_rank >= 0 && (!base.processes || one_rank >= (long)base.nranks)) {
    fprintf(stderr, "nrt_allreduce: --rank r needs processes mode and 0 <= r < ranks\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (one_rank >= 0) return run_one_rank(&base, (uint32_t)one_rank);
  return base.processes ? run_processes(&base) : run_threads(&base);
}
