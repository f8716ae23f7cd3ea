/* Host-driven collectives through the public headers only:
 * 8 threads, one per logical core (NEURON_RT_VISIBLE_CORES=0-7), each doing
 * nrt_init -> nrt_cc_global_comm_init -> nrta_cc_prepare / nrta_cc_schedule for all-reduce,
 * all-gather and reduce-scatter in bf16, fp32 and fp8_e4 -> wait (nrta_is_completed, or an
 * eventfd registered with nrta_event_register_seq_id_completion) -> nrt_tensor_read, and
 * comparing every byte with the exact result computed here. Then the error paths: bad
 * arguments, consumed / stale contexts, a rank with a different count (an error on every rank,
 * not a hang), a queue out of range, and calls after nrt_close.
 *
 * Built with -Wall -Wextra -Werror, and again with -fsanitize=address,undefined (ci/test.sh).
 * The values are small integers whose every partial sum is exact in each dtype, so results are
 * compared bit for bit. */
#define _GNU_SOURCE
#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_status.h>

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "check.h"

#define RANKS 8
#define COUNT 1000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define TCHECK(cond, ...)              \
  do {                                 \
    pthread_mutex_lock(&lock);         \
    CHECK(cond, __VA_ARGS__);          \
    pthread_mutex_unlock(&lock);       \
  } while (0)

/* ---- encodings of small non-negative integers (exact in every dtype used) ---- */
static size_t esize(nrt_dtype_t d) { return d == NRT_DTYPE_FLOAT32 ? 4 : d == NRT_DTYPE_BFLOAT16 ? 2 : 1; }

/* FP8 E4M3 (IEEE-like, bias 7, docs/contract/device.md §11): integer k in 0..16. */
static uint8_t fp8e4(int k) {
  if (k == 0) return 0;
  int e = 0;
  while ((k >> (e + 1)) != 0) e++;          /* k = 1.m * 2^e */
  int mant = ((k << 3) >> e) & 7;           /* 3 fraction bits, exact for k <= 15 */
  return (uint8_t)(((e + 7) << 3) | mant);
}

static void put(nrt_dtype_t d, uint8_t *p, int k) {
  float f = (float)k;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (d == NRT_DTYPE_FLOAT32) memcpy(p, &u, 4);
  else if (d == NRT_DTYPE_BFLOAT16) { uint16_t h = (uint16_t)(u >> 16); memcpy(p, &h, 2); }
  else *p = fp8e4(k);
}

static const char *dname(nrt_dtype_t d) { return d == NRT_DTYPE_FLOAT32 ? "fp32" : d == NRT_DTYPE_BFLOAT16 ? "bf16" : "fp8_e4"; }
static const char *oname(nrt_cc_op_type_t o) { return o == NRT_CC_ALLREDUCE ? "all-reduce" : o == NRT_CC_ALLGATHER ? "all-gather" : "reduce-scatter"; }

/* Input element j of rank r, and the exact expected output element j of rank r. */
static int in_val(nrt_cc_op_type_t o, int r, int j) { return o == NRT_CC_ALLGATHER ? (r * 3 + j) % 7 : (r + j) % 3; }
static int out_val(nrt_cc_op_type_t o, int r, int j) {
  int s, sum = 0;
  if (o == NRT_CC_ALLGATHER) return in_val(o, j / COUNT, j % COUNT);
  for (s = 0; s < RANKS; s++) sum += in_val(o, s, o == NRT_CC_ALLREDUCE ? j : r * COUNT + j);
  return sum;
}

static NRT_STATUS wait_done(nrta_seq_t seq, int use_eventfd) {
  if (use_eventfd) {
    int fd = eventfd(0, 0);
    uint64_t v = 0;
    NRT_STATUS st;
    if (fd < 0) return NRT_FAILURE;
    st = nrta_event_register_seq_id_completion(seq, fd);
    if (st == NRT_SUCCESS && read(fd, &v, sizeof v) != (ssize_t)sizeof v) st = NRT_FAILURE;
    nrta_event_register_seq_id_completion(seq, -1);
    close(fd);
    return st;
  }
  for (;;) {
    bool done = false;
    NRT_STATUS st = nrta_is_completed(seq, &done);
    if (st != NRT_SUCCESS || done) return st;
    usleep(200);
  }
}

static void *rank_main(void *arg) {
  int r = (int)(intptr_t)arg, i, j;
  uint32_t group[RANKS];
  nrt_dtype_t dts[3] = {NRT_DTYPE_BFLOAT16, NRT_DTYPE_FLOAT32, NRT_DTYPE_FP8_E4};
  nrt_cc_op_type_t ops[3] = {NRT_CC_ALLREDUCE, NRT_CC_ALLGATHER, NRT_CC_REDUCESCATTER};
  int n = 0;
  for (i = 0; i < RANKS; i++) group[i] = (uint32_t)i;
  TCHECK(nrt_cc_global_comm_init((uint32_t)r, (uint32_t)r, RANKS) == NRT_SUCCESS, "rank %d: comm init", r);
  for (i = 0; i < 3; i++) {
    for (j = 0; j < 3; j++, n++) {
      nrt_dtype_t d = dts[i];
      nrt_cc_op_type_t o = ops[j];
      size_t es = esize(d);
      size_t in_n = o == NRT_CC_REDUCESCATTER ? RANKS * COUNT : COUNT;
      size_t out_n = o == NRT_CC_ALLGATHER ? RANKS * COUNT : COUNT;
      uint8_t *in = malloc(in_n * es), *out = malloc(out_n * es), *want = malloc(out_n * es);
      nrt_tensor_t *tin = NULL, *tout = NULL;
      nrt_cc_context_t *ctx = NULL;
      NRT_STATUS exec_ret = NRT_FAILURE, st;
      nrta_seq_t seq = 0;
      size_t k;
      for (k = 0; k < in_n; k++) put(d, in + k * es, in_val(o, r, (int)k));
      for (k = 0; k < out_n; k++) put(d, want + k * es, out_val(o, r, (int)k));
      st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, r, in_n * es, "in", &tin);
      if (st == NRT_SUCCESS) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, r, out_n * es, "out", &tout);
      if (st == NRT_SUCCESS) st = nrt_tensor_write(tin, in, 0, in_n * es);
      if (st == NRT_SUCCESS) {
        nrt_cc_comm_t comm = {group, (uint32_t)r, RANKS, (uint32_t)r, RANKS, (uint32_t)r};
        nrt_tensor_list_t li = {&tin, 1}, lo = {&tout, 1};
        st = nrta_cc_prepare(&comm, &li, &lo, d, NRT_OP_ADD, o, &ctx);
      }
      if (st == NRT_SUCCESS) st = nrta_cc_schedule(&ctx, 0, &exec_ret, &seq);
      TCHECK(st == NRT_SUCCESS && ctx == NULL, "rank %d: %s %s prepared and scheduled (status %d)", r, oname(o), dname(d), st);
      if (st == NRT_SUCCESS) {
        st = wait_done(seq, n % 2);
        TCHECK(st == NRT_SUCCESS && exec_ret == NRT_SUCCESS, "rank %d: %s %s completed (%s; exec_ret %d)", r, oname(o),
               dname(d), n % 2 ? "eventfd" : "nrta_is_completed", exec_ret);
        st = nrt_tensor_read(tout, out, 0, out_n * es);
        TCHECK(st == NRT_SUCCESS && memcmp(out, want, out_n * es) == 0, "rank %d: %s %s: every byte exact", r, oname(o),
               dname(d));
      }
      nrt_tensor_free(&tin);
      nrt_tensor_free(&tout);
      free(in);
      free(out);
      free(want);
    }
  }
  return NULL;
}

/* A rank whose count differs from its peers': every rank's exec_ret is an error. */
static void *mismatch_main(void *arg) {
  int r = (int)(intptr_t)arg;
  uint32_t group[2] = {0, 1};
  size_t bytes = r == 1 ? 32 : 64;
  nrt_tensor_t *t = NULL;
  nrt_cc_context_t *ctx = NULL;
  NRT_STATUS exec_ret = NRT_SUCCESS, st;
  nrta_seq_t seq = 0;
  nrt_cc_comm_t comm = {group, (uint32_t)r, 2, (uint32_t)r, RANKS, (uint32_t)r};
  nrt_tensor_list_t l = {&t, 1};
  st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, r, bytes, "t", &t);
  if (st == NRT_SUCCESS) st = nrta_cc_prepare(&comm, &l, &l, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx);
  if (st == NRT_SUCCESS) st = nrta_cc_schedule(&ctx, 1, &exec_ret, &seq);
  if (st == NRT_SUCCESS) st = wait_done(seq, 0);
  TCHECK(st == NRT_SUCCESS && exec_ret == NRT_INVALID,
         "rank %d: a peer with another count fails the collective on every rank (exec_ret %d)", r, exec_ret);
  nrt_tensor_free(&t);
  return NULL;
}

static void errors(void) {
  uint32_t group[2] = {0, 1};
  nrt_tensor_t *a = NULL, *b = NULL, *freed = NULL;
  nrt_cc_context_t *ctx = NULL, *stale;
  nrt_cc_comm_t comm = {group, 0, 2, 0, RANKS, 0};
  nrt_tensor_list_t la, lb;
  NRT_STATUS exec_ret;
  nrta_seq_t seq;
  bool done;
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "a", &a) == NRT_SUCCESS, "allocate a");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 128, "b", &b) == NRT_SUCCESS, "allocate b");
  la.tensors = &a; la.num_tensors = 1;
  lb.tensors = &b; lb.num_tensors = 1;
  CHECK(nrta_cc_prepare(NULL, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "NULL comm: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, NULL, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "NULL input list: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, NULL) == NRT_INVALID, "NULL cc_ctx: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &la, (nrt_dtype_t)99, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "unknown dtype: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_INT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "integer reduction: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_FMA, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "FMA all-reduce: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, (nrt_cc_op_type_t)7, &ctx) == NRT_INVALID, "unknown cc_op: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &lb, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "all-reduce with input 64 B, output 128 B: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &lb, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLGATHER, &ctx) == NRT_INVALID, "all-gather output not rank_n x input: NRT_INVALID");
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_REDUCESCATTER, &ctx) == NRT_SUCCESS && ctx != NULL,
        "in-place reduce-scatter prepares (the tensor is the whole input)");
  ctx = NULL;
  comm.rank = 2;
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "rank outside the group: NRT_INVALID");
  comm.rank = 0;
  comm.vnc = 1;
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID, "tensor on another core than comm.vnc: NRT_INVALID");
  comm.vnc = 0;
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "freed", &freed) == NRT_SUCCESS, "allocate a tensor to free");
  {
    nrt_tensor_t *dangling = freed;
    nrt_tensor_list_t lf = {&dangling, 1};
    nrt_tensor_free(&freed);
    CHECK(freed == NULL, "nrt_tensor_free clears the handle");
    CHECK(nrta_cc_prepare(&comm, &lf, &lf, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_INVALID_HANDLE, "freed tensor in a list: NRT_INVALID_HANDLE");
  }
  CHECK(ctx == NULL, "no context written on failure");
  /* A context for a 2-rank group: schedule errors, then consume it. */
  CHECK(nrta_cc_prepare(&comm, &la, &la, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) == NRT_SUCCESS && ctx != NULL, "prepare in place");
  stale = ctx;
  CHECK(nrta_cc_schedule(&ctx, 3, &exec_ret, &seq) == NRT_INVALID && ctx == stale, "queue 3: NRT_INVALID, context kept");
  CHECK(nrta_cc_schedule(NULL, 0, &exec_ret, &seq) == NRT_INVALID, "NULL cc_ctx: NRT_INVALID");
  CHECK(nrta_cc_schedule(&ctx, 0, NULL, &seq) == NRT_INVALID && ctx == stale,
        "NULL exec_ret (nrt_async.h: writable until completion): NRT_INVALID, context kept");
  CHECK(nrta_is_completed(0, &done) == NRT_INVALID || nrta_is_completed(0, &done) == NRT_SUCCESS, "nrta_is_completed(0) does not crash");
  CHECK(nrta_is_completed(1, NULL) == NRT_INVALID, "NULL is_completed: NRT_INVALID");
  nrt_tensor_free(&a);
  nrt_tensor_free(&b);
  /* The context holds its own reference to the storage; drop it by closing. */
  (void)stale;
}

int main(void) {
  pthread_t th[RANKS];
  int i;
  nrt_tensor_t *t = NULL;
  setenv("NEURON_RT_VISIBLE_CORES", "0-7", 1);
  setenv("NEURON_RT_EXEC_TIMEOUT", "20", 1);
  CHECK(nrt_cc_global_comm_init(0, 0, RANKS) == NRT_UNINITIALIZED, "before nrt_init: NRT_UNINITIALIZED (13)");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 8, "x", &t) == NRT_UNINITIALIZED && t == NULL, "tensor before nrt_init: 13, nothing written");
  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "nrt_init with 8 visible cores");
  for (i = 0; i < RANKS; i++) pthread_create(&th[i], NULL, rank_main, (void *)(intptr_t)i);
  for (i = 0; i < RANKS; i++) pthread_join(th[i], NULL);
  for (i = 0; i < 2; i++) pthread_create(&th[i], NULL, mismatch_main, (void *)(intptr_t)i);
  for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
  errors();
  nrt_close();
  CHECK(nrt_cc_global_comm_init(0, 0, RANKS) == NRT_UNINITIALIZED,
        "after nrt_close returned: NRT_UNINITIALIZED (13; 14 only during teardown, docs/contract/abi.md §5.1)");
  return check_summary("cc_test");
}
