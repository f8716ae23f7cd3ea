/* mp_driver's "tensors" test: device tensors of a job live in shared memory, and a collective
 * writes each rank's result into its output tensor in place (issue 26; docs/design.md §2.7,
 * src/runtime/multi_process/run/outputs.rs).
 *
 * World 3, one rank per process, fp32 sum all-reduces through nrta_cc_prepare/schedule. Each
 * rank checks, through what the system shows rather than through the library:
 *  - its device tensors are objects in /dev/shm named opennrt-<job>-<its pid>-t<n>;
 *  - after its collectives, its process maps the output tensors of the two other processes
 *    (their names in /proc/self/maps): the peers' results were written into them in place;
 *  - every element of every result is the exact sum, over repeats of the same collective, a
 *    round with a new output tensor (the peers map the new one), and a 4 MiB round;
 *  - freed after its collectives, its tensors leave no name in /dev/shm while the process
 *    still runs, and after the job /dev/shm holds nothing of the job.
 * Inputs are small integers, so each sum is exact: element j of global id g is
 * (g + 1) * (j % 7 + 1) + round. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp_harness.h"
#include "mp_tests.h"

#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_status.h>

#define WORLD 3
#define ROUNDS 6

/* The pid in a tensor object's name "opennrt-<tag>-<pid>-t<n>" (the tag has dashes too: the
 * pid is the second-to-last field), or -1 when `name` is not one. */
static long tensor_owner(const char *name) {
  const char *o = strstr(name, "opennrt-");
  const char *t = o ? strrchr(o, '-') : NULL;
  if (!t || t[1] != 't' || t[2] < '0' || t[2] > '9') return -1;
  const char *p = t - 1;
  while (p > o && *p >= '0' && *p <= '9') p--;
  if (*p != '-' || p + 1 == t) return -1;
  return strtol(p + 1, NULL, 10);
}

/* Tensor objects of process `pid` in /dev/shm. */
static int own_objects(long pid) {
  DIR *d = opendir("/dev/shm");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += tensor_owner(e->d_name) == pid;
  closedir(d);
  return n;
}

/* Distinct processes other than this one whose tensor objects this process maps. */
static int peers_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  long seen[16];
  int n = 0;
  char line[512];
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    char *sp = strstr(line, " (deleted)");
    if (sp) *sp = 0;
    long pid = tensor_owner(line);
    bool known = pid < 0 || pid == (long)getpid();
    for (int i = 0; i < n && !known; i++) known = seen[i] == pid;
    if (!known && n < 16) seen[n++] = pid;
  }
  fclose(f);
  return n;
}

static float in_val(uint32_t gid, size_t j, int round) { return (float)((int)(gid + 1) * (int)(j % 7 + 1) + round); }

/* One all-reduce of `count` floats from `tin` into `tout`, waited for (bounded) and checked. */
static int all_reduce(const mp_proc *p, nrt_tensor_t *tin, nrt_tensor_t *tout, size_t count, int round) {
  size_t bytes = count * sizeof(float), wrong = 0;
  float *buf = malloc(bytes);
  uint32_t gid = (uint32_t)p->gid, group[WORLD] = {0, 1, 2};
  NRT_STATUS st, ret = (NRT_STATUS)4242;
  nrta_seq_t seq = 0;
  for (size_t j = 0; j < count; j++) buf[j] = in_val(gid, j, round);
  st = nrt_tensor_write(tin, buf, 0, bytes);
  if (st == NRT_SUCCESS) {
    nrt_cc_comm_t comm = {group, gid, WORLD, gid, WORLD, 0};
    nrt_tensor_list_t li = {&tin, 1}, lo = {&tout, 1};
    nrt_cc_context_t *ctx = NULL;
    st = nrta_cc_prepare(&comm, &li, &lo, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx);
    if (st == NRT_SUCCESS) st = nrta_cc_schedule(&ctx, 0, &ret, &seq);
  }
  if (!mp_check(st == NRT_SUCCESS, "%s: round %d: prepared and scheduled (status %d)", p->name, round, st)) {
    free(buf);
    return 0;
  }
  double end = mp_now() + MP_EXEC_TIMEOUT_S + 10;
  for (bool done = false; !done;) {
    if (nrta_is_completed(seq, &done) != NRT_SUCCESS) mp_child_abort("nrta_is_completed failed");
    if (!done && mp_now() > end) mp_child_abort("an all-reduce did not complete in time");
    if (!done) usleep(50);
  }
  int ok = mp_check(ret == NRT_SUCCESS, "%s: round %d completed with NRT_SUCCESS (got %d)", p->name, round, ret);
  if (ok && nrt_tensor_read(tout, buf, 0, bytes) == NRT_SUCCESS) {
    for (size_t j = 0; j < count; j++) {
      float want = 0;
      for (uint32_t g = 0; g < WORLD; g++) want += in_val(g, j, round);
      wrong += buf[j] != want;
    }
  } else {
    wrong = count;
  }
  free(buf);
  return mp_check(ok && wrong == 0, "%s: round %d (%zu floats): every element is the exact sum (%zu wrong)", p->name,
                  round, count, wrong) &&
         ok;
}

static void tensors_body(const mp_proc *p) {
  uint32_t gid = (uint32_t)p->gid;
  long pid = (long)getpid();
  NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", p->name, st)) return;
  st = nrt_cc_global_comm_init(0, gid, WORLD);
  int ok = mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
  size_t small = 1024, large = 1024 * 1024;
  nrt_tensor_t *tin = NULL, *tout = NULL, *tout2 = NULL, *bin = NULL, *bout = NULL;
  if (ok) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, small * 4, "in", &tin);
  if (ok && st == NRT_SUCCESS) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, small * 4, "out", &tout);
  ok = ok && mp_check(st == NRT_SUCCESS, "%s: two device tensors allocated (status %d)", p->name, st);
  ok = ok && mp_check(own_objects(pid) == 2, "%s: they are 2 objects in /dev/shm named after pid %ld (found %d)",
                      p->name, pid, own_objects(pid));
  for (int round = 0; ok && round < ROUNDS; round++) ok = all_reduce(p, tin, tout, small, round);
  ok = ok && mp_check(peers_mapped() == WORLD - 1,
                      "%s: this process maps the output tensors of the %d other processes (found %d)", p->name,
                      WORLD - 1, peers_mapped());
  /* Another output tensor for the same collective: the peers must map the new one. */
  if (ok) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, small * 4, "out2", &tout2);
  ok = ok && mp_check(st == NRT_SUCCESS, "%s: a second output tensor (status %d)", p->name, st);
  for (int round = ROUNDS; ok && round < ROUNDS + 3; round++) ok = all_reduce(p, tin, round % 2 ? tout2 : tout, small, round);
  /* 4 MiB: the XU worker's path. */
  if (ok) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, large * 4, "big in", &bin);
  if (ok && st == NRT_SUCCESS) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, large * 4, "big out", &bout);
  ok = ok && mp_check(st == NRT_SUCCESS, "%s: two 4 MiB device tensors (status %d)", p->name, st);
  ok = ok && all_reduce(p, bin, bout, large, 99);
  nrt_tensor_free(&tin);
  nrt_tensor_free(&tout);
  nrt_tensor_free(&tout2);
  nrt_tensor_free(&bin);
  nrt_tensor_free(&bout);
  mp_check(own_objects(pid) == 0, "%s: freed, its tensors left nothing in /dev/shm (found %d)", p->name,
           own_objects(pid));
  st = nrt_barrier(0, gid, WORLD);
  mp_check(st == NRT_SUCCESS, "%s: nrt_barrier at the end -> NRT_SUCCESS (got %d)", p->name, st);
  nrt_close();
}

void mp_test_tensors(void) {
  mp_proc procs[WORLD];
  int port = mp_free_port();
  char root[64];
  mp_root_id(root, sizeof root, 0, port);
  mp_say("\n== device tensors in shared memory, results written in place: world %d, one rank per process "
         "(NEURON_RT_ROOT_COMM_ID=%s)",
         WORLD, root);
  for (int g = 0; g < WORLD; g++) {
    mp_proc *p = &procs[g];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "tensors rank %d", g);
    snprintf(p->cores, sizeof p->cores, "%d", g);
    snprintf(p->root, sizeof p->root, "%s", root);
    p->body = tensors_body, p->gid = g, p->world = WORLD, p->threads = 1;
  }
  mp_run(procs, WORLD, 60);
  mp_check_ends(procs, WORLD);
  mp_check_shm_clean(port, "tensors");
  mp_cleanup_logs(procs, WORLD);
}
