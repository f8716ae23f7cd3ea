/* One rank's side of the multi-process tests; see mp_rank.h. */
#define _GNU_SOURCE
#include "mp_rank.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "mp_harness.h"

#define AG_SIZE 37 /* bytes per rank of nrt_all_gather: odd, not a multiple of anything */
#define MP_COUNT 257

/* ---- values: small non-negative integers, exact in bf16 and fp32 ---- */

/* The encoders of capi-tests/cc_test.c (fp32 bit pattern; bf16 = its top 16 bits, exact for
 * integers below 2^8). */
static size_t esize(nrt_dtype_t d) { return d == NRT_DTYPE_FLOAT32 ? 4 : 2; }

static void put(nrt_dtype_t d, uint8_t *p, int k) {
  float f = (float)k;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (d == NRT_DTYPE_FLOAT32) memcpy(p, &u, 4);
  else {
    uint16_t h = (uint16_t)(u >> 16);
    memcpy(p, &h, 2);
  }
}

const char *mp_dtype_name(nrt_dtype_t d) { return d == NRT_DTYPE_FLOAT32 ? "fp32" : "bf16"; }
const char *mp_op_name(nrt_cc_op_type_t o) {
  return o == NRT_CC_ALLREDUCE ? "all-reduce" : o == NRT_CC_ALLGATHER ? "all-gather" : "reduce-scatter";
}

static uint32_t mix32(uint32_t x) {
  x = (x ^ (x >> 16)) * 0x45D9F3Bu;
  x = (x ^ (x >> 16)) * 0x45D9F3Bu;
  return x ^ (x >> 16);
}

/* Input element j of global rank g. Reductions: 0..3, so a sum over at most 16 ranks stays
 * below 2^8 (exact in bf16); all-gather: 0..200 (a copy, exact anyway). */
static int in_val(nrt_cc_op_type_t o, int salt, uint32_t g, size_t j) {
  uint32_t h = mix32(mix32((uint32_t)salt * 0x9E37u + g * 0x10001u + 1u) + (uint32_t)j);
  return o == NRT_CC_ALLGATHER ? (int)(h % 201u) : (int)(h % 4u);
}

/* Expected output element j of global rank g in a world of `world` with `count` per chunk. */
static int out_val(nrt_cc_op_type_t o, int salt, uint32_t g, uint32_t world, size_t count, size_t j) {
  int sum = 0;
  if (o == NRT_CC_ALLGATHER) return in_val(o, salt, (uint32_t)(j / count), j % count);
  for (uint32_t s = 0; s < world; s++) sum += in_val(o, salt, s, o == NRT_CC_ALLREDUCE ? j : g * count + j);
  return sum;
}

static size_t in_elems(nrt_cc_op_type_t o, size_t count, uint32_t world) {
  return o == NRT_CC_REDUCESCATTER ? world * count : count;
}
static size_t out_elems(nrt_cc_op_type_t o, size_t count, uint32_t world) {
  return o == NRT_CC_ALLGATHER ? world * count : count;
}

/* ---- host collectives ---- */

int mp_rank_barrier(const mp_rank *r, const char *what) {
  NRT_STATUS st = nrt_barrier((int32_t)r->vnc, r->gid, r->world);
  return mp_check(st == NRT_SUCCESS, "%s: nrt_barrier(vnc %u, gid %u, %u) %s -> NRT_SUCCESS (got %d)", r->who, r->vnc,
                  r->gid, r->world, what, st);
}

static uint8_t ag_byte(int round, uint32_t g, int i) { return (uint8_t)mix32((uint32_t)round * 7919u + g * 131u + (uint32_t)i); }

NRT_STATUS mp_rank_all_gather(const mp_rank *r, int round, uint32_t size_override, int *exact) {
  uint32_t size = size_override ? size_override : AG_SIZE;
  uint8_t in[AG_SIZE * 2], *out = malloc((size_t)r->world * AG_SIZE * 2), *want = malloc((size_t)r->world * AG_SIZE);
  NRT_STATUS st;
  for (int i = 0; i < (int)sizeof in; i++) in[i] = ag_byte(round, r->gid, i);
  for (uint32_t s = 0; s < r->world; s++)
    for (int i = 0; i < AG_SIZE; i++) want[s * AG_SIZE + i] = ag_byte(round, s, i);
  memset(out, 0xA5, (size_t)r->world * AG_SIZE * 2);
  st = nrt_all_gather((int32_t)r->vnc, r->gid, r->world, size, in, out);
  *exact = st == NRT_SUCCESS && memcmp(out, want, (size_t)r->world * AG_SIZE) == 0;
  free(out);
  free(want);
  return st;
}

/* ---- host-driven collectives ---- */

NRT_STATUS mp_cc_start(mp_cc *c, const mp_rank *r, nrt_cc_op_type_t o, nrt_dtype_t d, size_t count, int salt,
                       size_t count_override) {
  size_t es = esize(d), my_count = count_override ? count_override : count;
  size_t in_n = in_elems(o, my_count, r->world), out_n = out_elems(o, my_count, r->world), k;
  uint32_t *group = malloc(r->world * sizeof *group);
  uint8_t *in = malloc(in_n * es);
  NRT_STATUS st;
  memset(c, 0, sizeof *c);
  c->r = r, c->op = o, c->dtype = d, c->count = my_count, c->salt = salt;
  c->exec_ret = (NRT_STATUS)4242; /* no status: proves the runtime wrote it */
  for (uint32_t s = 0; s < r->world; s++) group[s] = s;
  for (k = 0; k < in_n; k++) put(d, in + k * es, in_val(o, salt, r->gid, k));
  st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, (int)r->vnc, in_n * es, "in", &c->tin);
  if (st == NRT_SUCCESS) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, (int)r->vnc, out_n * es, "out", &c->tout);
  if (st == NRT_SUCCESS) st = nrt_tensor_write(c->tin, in, 0, in_n * es);
  if (st == NRT_SUCCESS) {
    /* spec §5.7: replica_group = the participants' global ids in rank order; rank = index in
     * it; ctx_device_id / count = what nrt_cc_global_comm_init got; vnc = the local core. */
    nrt_cc_comm_t comm = {group, r->gid, r->world, r->gid, r->world, r->vnc};
    nrt_tensor_list_t li = {&c->tin, 1}, lo = {&c->tout, 1};
    nrt_cc_context_t *ctx = NULL;
    st = nrta_cc_prepare(&comm, &li, &lo, d, NRT_OP_ADD, o, &ctx);
    c->started = mp_now();
    if (st == NRT_SUCCESS) st = nrta_cc_schedule(&ctx, 0, &c->exec_ret, &c->seq);
    if (st == NRT_SUCCESS && ctx != NULL) mp_check(0, "%s: nrta_cc_schedule left *cc_ctx non-NULL", r->who);
  }
  free(group);
  free(in);
  return st;
}

void mp_cc_wait(mp_cc *c, int use_eventfd, double timeout_s) {
  double end = c->started + timeout_s;
  if (use_eventfd) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct pollfd p = {fd, POLLIN, 0};
    uint64_t v = 0;
    bool done = false;
    if (fd < 0 || nrta_event_register_seq_id_completion(c->seq, fd) != NRT_SUCCESS)
      mp_child_abort("eventfd registration failed");
    if (poll(&p, 1, (int)(timeout_s * 1000)) != 1 || read(fd, &v, sizeof v) != (ssize_t)sizeof v || v < 1)
      mp_child_abort("the collective's eventfd stayed silent");
    nrta_event_register_seq_id_completion(c->seq, -1); /* deregister before close (spec §5.6) */
    close(fd);
    c->elapsed = mp_now() - c->started;
    mp_check(nrta_is_completed(c->seq, &done) == NRT_SUCCESS && done, "%s: %s %s: eventfd signalled, seq %#llx completed",
             c->r->who, mp_op_name(c->op), mp_dtype_name(c->dtype), (unsigned long long)c->seq);
    return;
  }
  for (;;) {
    bool done = false;
    if (nrta_is_completed(c->seq, &done) != NRT_SUCCESS) mp_child_abort("nrta_is_completed failed");
    if (done) break;
    if (mp_now() > end) mp_child_abort("the collective did not complete in time");
    usleep(500);
  }
  c->elapsed = mp_now() - c->started;
}

int mp_cc_exact(mp_cc *c) {
  const mp_rank *r = c->r;
  size_t es = esize(c->dtype), out_n = out_elems(c->op, c->count, r->world), k;
  uint8_t *out = malloc(out_n * es), *want = malloc(out_n * es);
  int ok;
  for (k = 0; k < out_n; k++) put(c->dtype, want + k * es, out_val(c->op, c->salt, r->gid, r->world, c->count, k));
  memset(out, 0xA5, out_n * es);
  ok = nrt_tensor_read(c->tout, out, 0, out_n * es) == NRT_SUCCESS && memcmp(out, want, out_n * es) == 0;
  free(out);
  free(want);
  return ok;
}

void mp_cc_free(mp_cc *c) {
  nrt_tensor_free(&c->tin);
  nrt_tensor_free(&c->tout);
}

int mp_cc_run_checked(const mp_rank *r, nrt_cc_op_type_t o, nrt_dtype_t d, size_t count, int salt, int use_eventfd) {
  mp_cc c;
  NRT_STATUS st = mp_cc_start(&c, r, o, d, count, salt, 0);
  int ok = mp_check(st == NRT_SUCCESS, "%s: %s %s x %zu prepared and scheduled (status %d)", r->who, mp_op_name(o),
                    mp_dtype_name(d), count, st);
  if (ok) {
    mp_cc_wait(&c, use_eventfd, MP_EXEC_TIMEOUT_S + 10);
    ok = mp_check(c.exec_ret == NRT_SUCCESS, "%s: %s %s completed (%s), exec_ret NRT_SUCCESS (got %d)", r->who,
                  mp_op_name(o), mp_dtype_name(d), use_eventfd ? "eventfd" : "nrta_is_completed", c.exec_ret);
    ok = mp_check(ok && mp_cc_exact(&c), "%s: %s %s: every output byte exact", r->who, mp_op_name(o),
                  mp_dtype_name(d)) && ok;
  }
  mp_cc_free(&c);
  return ok;
}

void mp_rank_full(const mp_rank *r) {
  nrt_dtype_t dts[2] = {NRT_DTYPE_BFLOAT16, NRT_DTYPE_FLOAT32};
  nrt_cc_op_type_t ops[3] = {NRT_CC_ALLREDUCE, NRT_CC_ALLGATHER, NRT_CC_REDUCESCATTER};
  int exact = 0, n = 0;
  NRT_STATUS st;
  if (!mp_rank_barrier(r, "#1 (joins the world)")) {
    /* Fail fast: without a world every later step would wait for its own timeout. */
    mp_say("%s: the world did not form; skipping the rest of the sequence", r->who);
    return;
  }
  st = mp_rank_all_gather(r, 0, 0, &exact);
  mp_check(st == NRT_SUCCESS && exact, "%s: nrt_all_gather of %d B per rank over %u ranks: every byte exact (status %d)",
           r->who, AG_SIZE, r->world, st);
  st = nrt_cc_global_comm_init(r->vnc, r->gid, r->world);
  mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init(vnc %u, gid %u, %u) -> NRT_SUCCESS (got %d)", r->who,
           r->vnc, r->gid, r->world, st);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++, n++) mp_cc_run_checked(r, ops[j], dts[i], MP_COUNT, n, n % 2);
  mp_rank_barrier(r, "#2 (after the collectives)");
}
