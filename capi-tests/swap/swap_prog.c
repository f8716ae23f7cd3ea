/* The library swap: a client built against "the vendor's" libnrt.so.1 — here
 * the aborting stand-in, linked with -lnrt — that runs unchanged on OpenNRT once
 * shim/opennrt-run puts OpenNRT's libnrt.so.1 in front (LD_LIBRARY_PATH, or LD_PRELOAD).
 *
 * What it does, through the public headers only (include/nrt/):
 *   nrt_init with NEURON_RT_VISIBLE_CORES=0-1 → two threads, one per logical core, each:
 *   nrt_cc_global_comm_init(i, i, 2) → a device tensor on core i holding rank i's floats →
 *   nrta_cc_prepare (all-reduce, add) → nrta_cc_schedule on collectives queue 0 → poll
 *   nrta_is_completed → exec_ret must be NRT_SUCCESS → read back, compare with the sum
 *   computed here → nrt_close; then print nrt_get_version's rt_detail (OpenNRT names itself
 *   there) and exit 0 only if every element of both ranks is right.
 * The flow is docs/contract/abi.md §5.7; the struct layouts are §2.4. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt_version.h"

#define RANKS 2
#define COUNT 1000

/* Integer-valued and small, so the float sum is exact whatever the reduction order. */
static float input_of(int rank, int j) { return (float)((rank + 1) * (j % 17) - 8); }

struct rank_result {
  int rank;
  NRT_STATUS failed_status; /* first failing status, NRT_SUCCESS if none */
  const char *failed_call;
  int wrong;                /* elements that differ from the expected sum */
};

#define TRY(call, expr)                        \
  do {                                         \
    NRT_STATUS s_ = (expr);                    \
    if (s_ != NRT_SUCCESS) {                   \
      r->failed_status = s_;                   \
      r->failed_call = (call);                 \
      goto out;                                \
    }                                          \
  } while (0)

static void *rank_main(void *arg) {
  struct rank_result *r = arg;
  const int i = r->rank;
  float host[COUNT];
  nrt_tensor_t *t = NULL;
  for (int j = 0; j < COUNT; j++) host[j] = input_of(i, j);

  TRY("nrt_cc_global_comm_init", nrt_cc_global_comm_init((uint32_t)i, (uint32_t)i, RANKS));
  TRY("nrt_tensor_allocate",
      nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, i, sizeof host, "swap", &t));
  TRY("nrt_tensor_write", nrt_tensor_write(t, host, 0, sizeof host));

  uint32_t group[RANKS] = {0, 1};
  nrt_cc_comm_t comm = {.replica_group = group,
                        .rank = (uint32_t)i,
                        .rank_n = RANKS,
                        .ctx_device_id = (uint32_t)i,
                        .ctx_device_count = RANKS,
                        .vnc = (uint32_t)i};
  nrt_tensor_list_t list = {.tensors = &t, .num_tensors = 1}; /* in place: same tensor */
  nrt_cc_context_t *ctx = NULL;
  TRY("nrta_cc_prepare", nrta_cc_prepare(&comm, &list, &list, NRT_DTYPE_FLOAT32, NRT_OP_ADD,
                                         NRT_CC_ALLREDUCE, &ctx));
  NRT_STATUS exec_ret = (NRT_STATUS)-1;
  nrta_seq_t seq = 0;
  TRY("nrta_cc_schedule", nrta_cc_schedule(&ctx, 0, &exec_ret, &seq));
  for (bool done = false; !done;) {
    TRY("nrta_is_completed", nrta_is_completed(seq, &done));
    if (!done) nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
  }
  TRY("exec_ret of the all-reduce", exec_ret);

  memset(host, 0, sizeof host);
  TRY("nrt_tensor_read", nrt_tensor_read(t, host, 0, sizeof host));
  for (int j = 0; j < COUNT; j++) {
    float want = 0;
    for (int k = 0; k < RANKS; k++) want += input_of(k, j);
    if (host[j] != want) {
      if (r->wrong++ == 0)
        fprintf(stderr, "rank %d: element %d is %g, expected %g\n", i, j, host[j], want);
    }
  }
out:
  nrt_tensor_free(&t);
  return NULL;
}

int main(void) {
  setenv("NEURON_RT_VISIBLE_CORES", "0-1", 1); /* read by nrt_init (spec §5.10) */
  NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (s != NRT_SUCCESS) {
    fprintf(stderr, "nrt_init failed: %d\n", (int)s);
    return 1;
  }
  pthread_t th[RANKS];
  struct rank_result res[RANKS];
  for (int i = 0; i < RANKS; i++) {
    res[i] = (struct rank_result){.rank = i, .failed_status = NRT_SUCCESS};
    if (pthread_create(&th[i], NULL, rank_main, &res[i]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  int bad = 0;
  for (int i = 0; i < RANKS; i++) {
    pthread_join(th[i], NULL);
    if (res[i].failed_status != NRT_SUCCESS) {
      fprintf(stderr, "rank %d: %s returned %d\n", i, res[i].failed_call,
              (int)res[i].failed_status);
      bad = 1;
    }
    if (res[i].wrong) {
      fprintf(stderr, "rank %d: %d of %d elements wrong\n", i, res[i].wrong, COUNT);
      bad = 1;
    }
  }
  nrt_close();

  nrt_version_t v;
  memset(&v, 0, sizeof v);
  s = nrt_get_version(&v, sizeof v);
  if (s != NRT_SUCCESS) {
    fprintf(stderr, "nrt_get_version failed: %d\n", (int)s);
    return 1;
  }
  printf("runtime: %.*s\n", (int)sizeof v.rt_detail, v.rt_detail);
  if (bad) return 1;
  printf("all-reduce of %d floats on %d ranks: every element right\n", COUNT, RANKS);
  return 0;
}
