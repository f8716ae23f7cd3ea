/* The multi-process test harness; see mp_harness.h for the contract of each function. */
#define _GNU_SOURCE
#include "mp_harness.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;
static int child_ready_fd = -1, child_go_fd = -1; /* the child's ends of its two pipes */
static char log_dir[64];
static int log_seq;

double mp_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int mp_check_at(const char *file, int line, int ok, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&check_lock);
  /* check.h's CHECK, with the caller's place in a FAIL line */
  if (ok) check_passed++, printf("ok   - %s\n", msg);
  else check_failed++, printf("FAIL - %s:%d: %s\n", file, line, msg);
  fflush(stdout);
  pthread_mutex_unlock(&check_lock);
  return ok;
}

void mp_say(const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&check_lock);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  pthread_mutex_unlock(&check_lock);
}

int mp_failed_count(void) {
  pthread_mutex_lock(&check_lock);
  int n = check_failed;
  pthread_mutex_unlock(&check_lock);
  return n;
}

int mp_summary(const char *suite) {
  if (log_dir[0]) rmdir(log_dir);
  return check_summary(suite);
}

/* ---------------------------------------------------------------- child side */

void mp_ready(void) {
  char b = 'r';
  if (child_ready_fd < 0 || write(child_ready_fd, &b, 1) != 1)
    mp_check(0, "mp_ready: could not signal the parent");
}

void mp_wait_go(void) {
  struct pollfd p = {child_go_fd, POLLIN, 0};
  char b;
  if (child_go_fd < 0 || poll(&p, 1, 60000) != 1 || read(child_go_fd, &b, 1) != 1)
    mp_child_abort("no go signal from the parent within 60 s");
}

void mp_child_exit(void) {
  fflush(NULL);
  exit(check_failed == 0 ? 0 : 1); /* exit, not _exit: see mp_harness.h */
}

void mp_child_abort(const char *why) {
  mp_check(0, "%s: ending this process without nrt_close", why);
  fflush(NULL);
  _exit(1);
}

static void set_env(const char *name, const char *value) {
  if (value && *value) setenv(name, value, 1);
  else unsetenv(name);
}

/* Variables a rank must not inherit from whoever ran the test: a rank has them only when its
 * mp_proc's env sets them. The simulated instance and its logical-core size (each with the
 * vendor's older name, read when the first is unset) decide which cores exist and which NEFFs
 * load; the version override and the kill hook are fault switches of single tests; a job
 * secret set on some ranks only would refuse the others. */
static const char *const cleared_env[] = {
    "NEURON_RT_NUM_CORES",      "OPENNRT_INSTANCE_TYPE",       "NEURON_RT_FAKE_INSTANCE_TYPE",
    "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VIRTUAL_CORE_SIZE", "OPENNRT_VERSION_OVERRIDE",
    "OPENNRT_TEST_KILL_IN_RUN", "OPENNRT_JOB_SECRET",
};

static void child_main(mp_proc *procs, int n, int me, int ready_w, int go_r, pid_t parent) {
  mp_proc *p = &procs[me];
  char num[16], extra[MP_MAX_ENV * 130] = "";
  size_t used = 0;
  int i, fd;
  signal(SIGPIPE, SIG_DFL); /* the parent ignores it (mp_run); a rank gets the default */
  /* Die with the parent: a killed harness must not leave ranks behind. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(2);
  for (i = 0; i < n; i++) {
    if (procs[i].ready_fd >= 0) close(procs[i].ready_fd);
    if (procs[i].go_fd >= 0) close(procs[i].go_fd);
  }
  child_ready_fd = ready_w;
  child_go_fd = go_r;
  check_passed = check_failed = 0;
  fd = open(p->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) dup2(fd, 1), close(fd);
  fd = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) dup2(fd, 2), close(fd);
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (i = 0; i < (int)(sizeof cleared_env / sizeof cleared_env[0]); i++) unsetenv(cleared_env[i]);
  set_env("NEURON_RT_VISIBLE_CORES", p->cores);
  set_env("NEURON_RT_ROOT_COMM_ID", p->root);
  snprintf(num, sizeof num, "%d", MP_EXEC_TIMEOUT_S);
  setenv("NEURON_RT_EXEC_TIMEOUT", num, 1);
  snprintf(num, sizeof num, "%d", MP_BOOTSTRAP_TIMEOUT_S);
  setenv("OPENNRT_BOOTSTRAP_TIMEOUT", num, 1);
  for (i = 0; i < MP_MAX_ENV && p->env[i]; i++) {
    char kv[128], *eq;
    snprintf(kv, sizeof kv, "%s", p->env[i]);
    eq = strchr(kv, '=');
    if (!eq) continue;
    *eq = 0;
    setenv(kv, eq + 1, 1);
    used += (size_t)snprintf(extra + used, sizeof extra - used, " %s=%s", kv, eq + 1); /* < 130 each */
  }
  mp_say("# %s: pid %d, NEURON_RT_VISIBLE_CORES=%s NEURON_RT_ROOT_COMM_ID=%s%s", p->name, (int)getpid(), p->cores,
         p->root, extra);
  p->body(p);
  mp_child_exit();
}

/* ---------------------------------------------------------------- parent side */

static int all_ready(const mp_proc *procs, unsigned mask) {
  for (int i = 0; i < MP_MAX_PROCS; i++)
    if ((mask >> i & 1u) && !procs[i].ready) return 0;
  return 1;
}

/* A proc in `mask` that ended without signalling ready: what waits for it never can. */
static int lost_dependency(const mp_proc *procs, unsigned mask) {
  for (int i = 0; i < MP_MAX_PROCS; i++)
    if ((mask >> i & 1u) && !procs[i].ready && procs[i].exited) return 1;
  return 0;
}

static int fork_proc(mp_proc *procs, int n, int i) {
  int rp[2], gp[2];
  pid_t parent = getpid(), pid;
  mp_proc *p = &procs[i];
  if (!log_dir[0]) {
    snprintf(log_dir, sizeof log_dir, "/tmp/opennrt-mp.XXXXXX");
    if (!mkdtemp(log_dir)) return 0;
  }
  log_seq++;
  snprintf(p->out_path, sizeof p->out_path, "%s/%d.out", log_dir, log_seq);
  snprintf(p->err_path, sizeof p->err_path, "%s/%d.err", log_dir, log_seq);
  if (pipe2(rp, O_CLOEXEC) != 0) return 0;
  if (pipe2(gp, O_CLOEXEC) != 0) return close(rp[0]), close(rp[1]), 0;
  fflush(NULL); /* nothing buffered here may be printed twice */
  pid = fork();
  if (pid < 0) return close(rp[0]), close(rp[1]), close(gp[0]), close(gp[1]), 0;
  if (pid == 0) {
    close(rp[0]);
    close(gp[1]);
    child_main(procs, n, i, rp[1], gp[0], parent);
  }
  close(rp[1]);
  close(gp[0]);
  p->pid = pid;
  p->started = 1;
  p->ready_fd = rp[0];
  p->go_fd = gp[1];
  return 1;
}

static void print_lines(const char *path, const char *prefix) {
  FILE *f = fopen(path, "r");
  char line[1024];
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    size_t l = strlen(line);
    if (l && line[l - 1] == '\n') line[--l] = 0;
    printf("    [%s] %s\n", prefix, line);
  }
  fclose(f);
}

int mp_run(mp_proc *procs, int n, int deadline_s) { return mp_run_ticking(procs, n, deadline_s, NULL, NULL); }

int mp_run_ticking(mp_proc *procs, int n, int deadline_s, mp_tick tick, void *arg) {
  double t0 = mp_now(), end = t0 + deadline_s, cond_since[MP_MAX_PROCS];
  int i, left = n, ok = 1;
  /* A go byte for a child that already ended must be an EPIPE, not the harness's death. */
  signal(SIGPIPE, SIG_IGN);
  for (i = 0; i < n; i++) {
    procs[i].pid = 0;
    procs[i].started = procs[i].ready = procs[i].go_sent = procs[i].exited = procs[i].timed_out = 0;
    procs[i].wstatus = 0;
    procs[i].ready_at = procs[i].ended_at = 0;
    procs[i].ready_fd = procs[i].go_fd = -1;
    cond_since[i] = -1;
  }
  while (left > 0 && mp_now() < end) {
    struct pollfd pf[MP_MAX_PROCS];
    int np = 0, idx[MP_MAX_PROCS];
    for (i = 0; i < n; i++) {
      mp_proc *p = &procs[i];
      if (!p->started && !p->exited) {
        if (lost_dependency(procs, p->start_after)) {
          p->exited = 1, left--;
          continue;
        }
        if (!all_ready(procs, p->start_after)) continue;
        if (cond_since[i] < 0) cond_since[i] = mp_now();
        if (mp_now() - cond_since[i] < p->start_delay_ms / 1000.0) continue;
        if (!fork_proc(procs, n, i)) {
          perror("mp_run: fork");
          p->exited = 1, left--;
        }
      }
      if (p->started && !p->go_sent && !p->exited && all_ready(procs, p->go_after)) {
        char b = 'g';
        if (write(p->go_fd, &b, 1) == 1) p->go_sent = 1;
      }
      if (p->ready_fd >= 0) pf[np].fd = p->ready_fd, pf[np].events = POLLIN, pf[np].revents = 0, idx[np++] = i;
    }
    if (np > 0) poll(pf, (nfds_t)np, 10);
    else usleep(10000);
    for (int k = 0; k < np; k++) {
      mp_proc *p = &procs[idx[k]];
      char b;
      if (!(pf[k].revents & (POLLIN | POLLHUP))) continue;
      if (read(p->ready_fd, &b, 1) == 1) p->ready = 1, p->ready_at = p->ready_at ? p->ready_at : mp_now();
      else close(p->ready_fd), p->ready_fd = -1;
    }
    for (i = 0; i < n; i++) {
      mp_proc *p = &procs[i];
      if (p->started && !p->exited && waitpid(p->pid, &p->wstatus, WNOHANG) == p->pid)
        p->exited = 1, p->ended_at = mp_now(), left--;
    }
    if (tick) tick(procs, n, arg);
  }
  for (i = 0; i < n; i++) {
    mp_proc *p = &procs[i];
    if (p->started && !p->exited) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &p->wstatus, 0);
      p->exited = p->timed_out = 1;
      p->ended_at = mp_now();
    }
    if (p->ready_fd >= 0) close(p->ready_fd);
    if (p->go_fd >= 0) close(p->go_fd);
    p->ready_fd = p->go_fd = -1;
  }
  for (i = 0; i < n; i++) {
    mp_proc *p = &procs[i];
    int good = p->started && !p->timed_out &&
               (p->expect_signal ? WIFSIGNALED(p->wstatus) && WTERMSIG(p->wstatus) == p->expect_signal
                                 : WIFEXITED(p->wstatus) && WEXITSTATUS(p->wstatus) == 0);
    if (!good) ok = 0;
    if (p->started) print_lines(p->out_path, p->name);
    else printf("    [%s] never started: a process it waits for ended without reaching its sync point\n", p->name);
  }
  printf("    (job of %d process%s took %.2f s)\n", n, n == 1 ? "" : "es", mp_now() - t0);
  fflush(stdout);
  return ok;
}

void mp_check_ends(mp_proc *procs, int n) {
  for (int i = 0; i < n; i++) {
    mp_proc *p = &procs[i];
    int st = p->wstatus;
    if (!p->started) {
      mp_check(0, "%s: started", p->name);
    } else if (p->timed_out) {
      mp_check(0, "%s: ended before the job's deadline (killed by the harness)", p->name);
      mp_print_stderr(p);
    } else if (p->expect_signal) {
      mp_check(WIFSIGNALED(st) && WTERMSIG(st) == p->expect_signal, "%s: died of signal %d as planned (%s %d)",
               p->name, p->expect_signal, WIFSIGNALED(st) ? "signal" : "exit status",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    } else {
      int good = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      mp_check(good, "%s: exited with status 0 (%s %d)", p->name, WIFEXITED(st) ? "exit status" : "signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      if (!good) mp_print_stderr(p);
    }
  }
}

void mp_print_stderr(const mp_proc *p) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s stderr", p->name);
  if (p->started) print_lines(p->err_path, prefix);
  fflush(stdout);
}

int mp_log_contains(const mp_proc *p, const char *needle) {
  FILE *f = p->started ? fopen(p->err_path, "r") : NULL;
  char line[2048];
  int found = 0;
  if (!f) return 0;
  while (!found && fgets(line, sizeof line, f)) found = strcasestr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* 1 if `s` contains `number` as a whole decimal number (not part of a longer digit run). */
static int names_number(const char *s, long number) {
  for (const char *c = s; *c; c++) {
    if (!isdigit((unsigned char)*c) || (c > s && isdigit((unsigned char)c[-1]))) continue;
    char *end;
    long v = strtol(c, &end, 10);
    if (v == number) return 1;
    c = end - 1;
  }
  return 0;
}

/* 1 if `s` names rank `number`: "rank", "ranks", "id", "ids" or "gid" (any case), then
 * spaces or one of =:[( and a comma-separated list of numbers containing it ("rank 1",
 * "global id 1", "gid=1", "ranks [0, 1]"). */
static int names_rank(const char *s, long number) {
  static const char *words[] = {"ranks", "rank", "ids", "gid", "id"};
  for (const char *c = s; *c; c++) {
    if (c > s && isalnum((unsigned char)c[-1])) continue;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
      size_t l = strlen(words[w]);
      const char *q = c + l;
      if (strncasecmp(c, words[w], l) != 0 || isalnum((unsigned char)*q)) continue;
      while (*q == ' ' || *q == '=' || *q == ':' || *q == '[' || *q == '(') q++;
      while (isdigit((unsigned char)*q)) {
        char *end;
        if (strtol(q, &end, 10) == number) return 1;
        q = end;
        if (*q != ',') break;
        q++;
        while (*q == ' ') q++;
      }
      break;
    }
  }
  return 0;
}

int mp_error_line(const mp_proc *p, long number, int as_rank, const char *word, char *out, size_t n) {
  FILE *f = p->started ? fopen(p->err_path, "r") : NULL;
  char line[2048];
  int found = 0;
  if (!f) return 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *msg = strstr(line, "OPENNRT:"), *lvl = strstr(line, " ERROR ");
    if (!msg || !lvl || lvl > msg) continue;
    msg = strchr(msg, ' '); /* skip the target */
    if (!msg) continue;
    if (number >= 0 && !(as_rank ? names_rank(msg, number) : names_number(msg, number))) continue;
    if (word && !strcasestr(msg, word)) continue;
    line[strcspn(line, "\n")] = 0;
    snprintf(out, n, "%s", line);
    found = 1;
  }
  fclose(f);
  return found;
}

void mp_cleanup_logs(mp_proc *procs, int n) {
  for (int i = 0; i < n; i++)
    if (procs[i].started) unlink(procs[i].out_path), unlink(procs[i].err_path);
}

/* ---------------------------------------------------------------- ports and /dev/shm */

static int shm_objects(int port, int remove_them, int print_them) {
  char prefix[32];
  DIR *d = opendir("/dev/shm");
  struct dirent *e;
  int count = 0;
  if (!d) return 0;
  snprintf(prefix, sizeof prefix, "opennrt-%d-", port);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    count++;
    if (print_them) printf("    left in /dev/shm: %s\n", e->d_name);
    if (remove_them) {
      char path[300];
      snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
      unlink(path);
    }
  }
  closedir(d);
  return count;
}

void mp_check_shm_clean(int port, const char *job) {
  int left = shm_objects(port, 1, 1);
  mp_check(left == 0, "%s: /dev/shm holds nothing named opennrt-%d-* after the job (%d left)", job, port, left);
}

/* 1 if nothing is bound to `port` on this loopback address family (no SO_REUSEADDR, so a
 * port with a connection in TIME_WAIT counts as taken). */
static int bindable(int family, int port) {
  int s = socket(family, SOCK_STREAM, 0), ok;
  if (s < 0) return family == AF_INET6; /* no IPv6 at all: nothing can be bound there */
  if (family == AF_INET) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
  } else {
    struct sockaddr_in6 a = {0};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    a.sin6_addr = in6addr_loopback;
    ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0 || errno == EADDRNOTAVAIL;
  }
  close(s);
  return ok;
}

int mp_free_port(void) {
  static int next;
  if (!next) next = 20000 + (int)(getpid() % 1000) * 12;
  for (int tries = 0; tries < 12000; tries++) {
    int port = next++;
    if (next >= 32000) next = 20000;
    if (bindable(AF_INET, port) && bindable(AF_INET6, port) && shm_objects(port, 0, 0) == 0) return port;
  }
  fprintf(stderr, "mp_free_port: no free port in [20000, 32000)\n");
  exit(1);
}

void mp_root_id(char *buf, size_t n, int form, int port) {
  const char *fmt = form == 1 ? "localhost:%d" : form == 2 ? "[::1]:%d" : "127.0.0.1:%d";
  snprintf(buf, n, fmt, port);
}
