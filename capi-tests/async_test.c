/* The host collectives and the non-collective async API through the public headers only:
 * nrt_build_global_comm, nrt_cc_global_comm_init, nrt_cc_create_stream,
 * nrt_barrier, nrt_all_gather (docs/contract/abi.md §3.5, §5.8) and nrta_tensor_write / copy /
 * read, nrta_is_completed, nrta_get_sequence, nrta_event_register_* (§3.6, §5.4-§5.6).
 *
 * The process owns 4 logical cores (NEURON_RT_VISIBLE_CORES=0-3); one thread per core plays a
 * rank of the barriers and all-gathers. Every expected status below comes from the spec, the
 * header comments in include/nrt/ or docs/abi-status.md, never from running the library;
 * every expected byte is computed here. Every wait is bounded (poll with a timeout, or a capped
 * loop; NEURON_RT_EXEC_TIMEOUT=10 bounds a rank that never arrives) so a bug fails, not hangs.
 *
 * NEURON_RT_ROOT_COMM_ID: spec §5.10 says the runtime reads its environment once, in nrt_init;
 * OpenNRT reads this variable when a world is joined. The malformed-value checks set it before
 * nrt_init and keep it for the calls, so they hold under either reading.
 *
 * Built with -Wall -Wextra -Werror, and again with -fsanitize=address,undefined (run.sh). */
#define _GNU_SOURCE
#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_status.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "check.h"

#define CORES 4
#define TBYTES 256                       /* size of each tensor of the tensor-op round trips */
#define AG_SIZE 37                       /* bytes per rank of nrt_all_gather */
#define SEQ_SENTINEL 0x5EC0DE5EC0DE5EC0ull /* out-parameters that must stay untouched */
#define STATUS_SENTINEL ((NRT_STATUS)4242)

/* CHECK from several threads: the condition (often a blocking collective) is evaluated before
 * taking the report lock, so ranks never wait for each other's reports. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define TCHECK(cond, ...)          \
  do {                             \
    int tcheck_ok = (cond);        \
    pthread_mutex_lock(&lock);     \
    CHECK(tcheck_ok, __VA_ARGS__); \
    pthread_mutex_unlock(&lock);   \
  } while (0)

/* spec §5.5: seq = core << 56 | queue << 52 | xu_type << 48 | counter (counter from 1). */
static nrta_seq_t seq_of(uint64_t lnc, nrta_xu_t xu, uint64_t queue, uint64_t counter) {
  return lnc << 56 | queue << 52 | (uint64_t)xu << 48 | counter;
}

/* Poll nrta_is_completed until `seq` completes, at most 25000 x 200 us: 1 done, 0 not / error. */
static int wait_seq(nrta_seq_t seq) {
  for (int i = 0; i < 25000; i++) {
    bool done = false;
    if (nrta_is_completed(seq, &done) != NRT_SUCCESS) return 0;
    if (done) return 1;
    usleep(200);
  }
  return 0;
}

/* The counter of a non-blocking eventfd if it is readable within `timeout_ms` (the read resets
 * it), else 0. */
static uint64_t fd_value(int fd, int timeout_ms) {
  struct pollfd p = {fd, POLLIN, 0};
  uint64_t v = 0;
  if (poll(&p, 1, timeout_ms) != 1 || !(p.revents & POLLIN)) return 0;
  if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) return 0;
  return v;
}

static nrt_tensor_t *alloc(nrt_tensor_placement_t p, int vnc, size_t size) {
  nrt_tensor_t *t = NULL;
  CHECK(nrt_tensor_allocate(p, vnc, size, "t", &t) == NRT_SUCCESS && t != NULL, "allocate %zu B (placement %d, vnc %d)",
        size, (int)p, vnc);
  return t;
}

static void run_ranks(void *(*f)(void *)) {
  pthread_t th[CORES];
  for (intptr_t r = 0; r < CORES; r++) pthread_create(&th[r], NULL, f, (void *)r);
  for (int r = 0; r < CORES; r++) pthread_join(th[r], NULL);
}

/* Spec §5.1: before nrt_init, and after nrt_close has returned, the guard answers
 * NRT_UNINITIALIZED (13) before looking at any argument; nothing is written or signalled. */
static void uninitialized(const char *when) {
  uint8_t in[4] = {1, 2, 3, 4}, out[4 * CORES], buf[4];
  nrta_seq_t seq = SEQ_SENTINEL;
  NRT_STATUS ret = STATUS_SENTINEL;
  bool done = true;
  int fd = eventfd(0, EFD_NONBLOCK);
  memset(out, 0xA5, sizeof out);
  memset(buf, 0xA5, sizeof buf);
  CHECK(nrt_build_global_comm(0, 0, CORES) == NRT_UNINITIALIZED, "%s: nrt_build_global_comm -> 13", when);
  CHECK(nrt_cc_global_comm_init(0, 0, CORES) == NRT_UNINITIALIZED, "%s: nrt_cc_global_comm_init -> 13", when);
  CHECK(nrt_cc_create_stream(0) == NRT_UNINITIALIZED, "%s: nrt_cc_create_stream -> 13", when);
  CHECK(nrt_barrier(0, 0, 1) == NRT_UNINITIALIZED, "%s: nrt_barrier -> 13", when);
  CHECK(nrt_all_gather(0, 0, 1, 4, in, out) == NRT_UNINITIALIZED && out[0] == 0xA5 && out[3] == 0xA5,
        "%s: nrt_all_gather -> 13, output untouched", when);
  CHECK(nrta_tensor_write(NULL, in, 0, 4, 0, 0, &ret, &seq) == NRT_UNINITIALIZED && seq == SEQ_SENTINEL &&
            ret == STATUS_SENTINEL,
        "%s: nrta_tensor_write -> 13, req_sequence and exec_ret untouched", when);
  CHECK(nrta_tensor_read(buf, NULL, 0, 4, 0, 0, &ret, &seq) == NRT_UNINITIALIZED && seq == SEQ_SENTINEL &&
            buf[0] == 0xA5,
        "%s: nrta_tensor_read -> 13, nothing written", when);
  CHECK(nrta_tensor_copy(NULL, 0, NULL, 0, 4, 0, 0, &ret, &seq) == NRT_UNINITIALIZED && seq == SEQ_SENTINEL,
        "%s: nrta_tensor_copy -> 13, req_sequence untouched", when);
  CHECK(nrta_is_completed(seq_of(0, NRTA_XU_TENSOR_OP, 0, 1), &done) == NRT_UNINITIALIZED && done,
        "%s: nrta_is_completed -> 13, *is_completed untouched", when);
  CHECK(nrta_get_sequence(0, NRTA_XU_TENSOR_OP, 0, &seq) == NRT_UNINITIALIZED && seq == SEQ_SENTINEL,
        "%s: nrta_get_sequence -> 13, *seq untouched", when);
  CHECK(nrta_event_register_seq_id_completion(seq_of(0, NRTA_XU_TENSOR_OP, 0, 1), fd) == NRT_UNINITIALIZED,
        "%s: nrta_event_register_seq_id_completion -> 13", when);
  CHECK(nrta_event_register_xu_completion(0, NRTA_XU_TENSOR_OP, 0, fd) == NRT_UNINITIALIZED,
        "%s: nrta_event_register_xu_completion -> 13", when);
  CHECK(fd >= 0 && fd_value(fd, 0) == 0, "%s: the eventfd was not signalled", when);
  close(fd);
}

/* spec §3.5 and include/nrt/nrt.h: a core joins each world once as one global id; the world's
 * size is immutable; bad cores, ids and sizes are NRT_INVALID. */
static void worlds(void) {
  CHECK(nrt_build_global_comm(-1, 0, CORES) == NRT_INVALID, "build_global_comm: vnc -1 -> NRT_INVALID");
  CHECK(nrt_build_global_comm(CORES, 0, CORES) == NRT_INVALID, "build_global_comm: vnc 4 of 4 visible -> NRT_INVALID");
  CHECK(nrt_build_global_comm(0, CORES, CORES) == NRT_INVALID, "build_global_comm: id 4 of 4 -> NRT_INVALID");
  CHECK(nrt_build_global_comm(0, 0, 0) == NRT_INVALID, "build_global_comm: count 0 -> NRT_INVALID");
  CHECK(nrt_cc_global_comm_init(UINT32_MAX, 0, CORES) == NRT_INVALID, "cc_global_comm_init: vnc (uint32_t)-1 -> NRT_INVALID");
  CHECK(nrt_cc_global_comm_init(CORES, 0, CORES) == NRT_INVALID, "cc_global_comm_init: vnc 4 -> NRT_INVALID");
  CHECK(nrt_cc_global_comm_init(0, CORES + 3, CORES) == NRT_INVALID, "cc_global_comm_init: id 7 of 4 -> NRT_INVALID");
  CHECK(nrt_cc_global_comm_init(0, 0, 0) == NRT_INVALID, "cc_global_comm_init: count 0 -> NRT_INVALID");

  CHECK(nrt_build_global_comm(0, 0, CORES) == NRT_SUCCESS, "build_global_comm(vnc 0, id 0, 4)");
  CHECK(nrt_build_global_comm(0, 0, CORES) == NRT_SUCCESS, "build_global_comm again: idempotent");
  CHECK(nrt_build_global_comm(0, 0, CORES + 1) == NRT_INVALID, "build_global_comm with 5 ranks later -> NRT_INVALID");
  CHECK(nrt_build_global_comm(1, 1, 2) == NRT_INVALID, "another core, another world size -> NRT_INVALID");
  CHECK(nrt_build_global_comm(1, 0, CORES) == NRT_INVALID, "core 1 claiming core 0's id -> NRT_INVALID");

  CHECK(nrt_cc_global_comm_init(0, 0, CORES) == NRT_SUCCESS, "cc_global_comm_init(vnc 0, id 0, 4)");
  CHECK(nrt_cc_global_comm_init(0, 0, CORES) == NRT_SUCCESS, "cc_global_comm_init again: idempotent");
  CHECK(nrt_cc_global_comm_init(0, 0, 2) == NRT_INVALID, "cc_global_comm_init with 2 ranks later -> NRT_INVALID");
  CHECK(nrt_cc_global_comm_init(1, 0, CORES) == NRT_INVALID, "cc: core 1 claiming core 0's id -> NRT_INVALID");
  for (uint32_t v = 1; v < CORES; v++)
    CHECK(nrt_cc_global_comm_init(v, v, CORES) == NRT_SUCCESS, "cc_global_comm_init(vnc %u, id %u, 4)", v, v);

  for (uint32_t s = 0; s <= 3; s++) CHECK(nrt_cc_create_stream(s) == NRT_SUCCESS, "nrt_cc_create_stream(%u)", s);
  CHECK(nrt_cc_create_stream(4) == NRT_INVALID, "nrt_cc_create_stream(4) -> NRT_INVALID");
  CHECK(nrt_cc_create_stream(UINT32_MAX) == NRT_INVALID, "nrt_cc_create_stream(UINT32_MAX) -> NRT_INVALID");
}

/* Two barriers in a row per rank (spec §3.5: all g_device_count workers call it). */
static void *barrier_rank(void *arg) {
  int r = (int)(intptr_t)arg;
  for (int i = 1; i <= 2; i++) TCHECK(nrt_barrier(r, (uint32_t)r, CORES) == NRT_SUCCESS, "rank %d: barrier #%d", r, i);
  return NULL;
}

static uint8_t ag_byte(int round, int rank, int i) { return (uint8_t)(round * 101 + rank * 37 + i * 3 + 1); }

/* One all-gather round of AG_SIZE bytes into garbage-filled output; 1 if every byte is exact. */
static int gather_round(int r, int round) {
  uint8_t in[AG_SIZE], out[CORES * AG_SIZE], want[CORES * AG_SIZE];
  for (int i = 0; i < AG_SIZE; i++) in[i] = ag_byte(round, r, i);
  for (int s = 0; s < CORES; s++)
    for (int i = 0; i < AG_SIZE; i++) want[s * AG_SIZE + i] = ag_byte(round, s, i);
  memset(out, 0xA5, sizeof out);
  return nrt_all_gather(r, (uint32_t)r, CORES, AG_SIZE, in, out) == NRT_SUCCESS && memcmp(out, want, sizeof out) == 0;
}

/* spec §3.5: output = every rank's input in rank order; include/nrt/nrt.h: NULL buffers are
 * allowed with size 0, and ranks passing different sizes get NRT_INVALID on every rank. */
static void *gather_rank(void *arg) {
  int r = (int)(intptr_t)arg;
  uint8_t in[16] = {0}, out[CORES * 16];
  uint32_t size = r == 2 ? 8 : 16;
  TCHECK(gather_round(r, 0), "rank %d: all-gather #1 of %d B: every byte exact", r, AG_SIZE);
  TCHECK(gather_round(r, 1), "rank %d: all-gather #2 (other data): every byte exact", r);
  TCHECK(nrt_all_gather(r, (uint32_t)r, CORES, 0, NULL, NULL) == NRT_SUCCESS, "rank %d: all-gather of 0 B, NULL buffers", r);
  TCHECK(nrt_all_gather(r, (uint32_t)r, CORES, size, in, out) == NRT_INVALID,
         "rank %d: rank 2 passes 8 B, the others 16 B -> NRT_INVALID on every rank", r);
  TCHECK(gather_round(r, 2), "rank %d: all-gather after the failed one: every byte exact", r);
  return NULL;
}

static void host_collectives(void) {
  uint8_t in[8] = {0}, out[8 * CORES];
  CHECK(nrt_barrier(300, 0, CORES) == NRT_INVALID, "nrt_barrier(vnc 300) -> NRT_INVALID (spec §5.8: vnc < 256)");
  CHECK(nrt_barrier(CORES, 0, CORES) == NRT_INVALID, "nrt_barrier(vnc 4 of 4 visible) -> NRT_INVALID");
  CHECK(nrt_barrier(0, CORES, CORES) == NRT_INVALID, "nrt_barrier(id 4 of 4) -> NRT_INVALID");
  CHECK(nrt_barrier(0, 0, 2) == NRT_INVALID, "nrt_barrier with another world size -> NRT_INVALID");
  run_ranks(barrier_rank);
  CHECK(nrt_all_gather(0, 0, CORES, 8, NULL, out) == NRT_INVALID, "nrt_all_gather: NULL input, 8 B -> NRT_INVALID");
  CHECK(nrt_all_gather(0, 0, CORES, 8, in, NULL) == NRT_INVALID, "nrt_all_gather: NULL output, 8 B -> NRT_INVALID");
  CHECK(nrt_all_gather(-1, 0, CORES, 8, in, out) == NRT_INVALID, "nrt_all_gather: vnc -1 -> NRT_INVALID");
  CHECK(nrt_all_gather(0, CORES, CORES, 8, in, out) == NRT_INVALID, "nrt_all_gather: id 4 of 4 -> NRT_INVALID");
  run_ranks(gather_rank);
}

/* One tensor-op execution unit's round trip: write src into a, copy 200 bytes a+16 -> b+32,
 * read them back; three requests in submission order (spec §5.4). */
struct xu_trip {
  nrt_tensor_t *a, *b;
  uint8_t src[TBYTES], back[TBYTES];
  NRT_STATUS ret[3];
  nrta_seq_t seq[3];
  int fd;
};
static struct xu_trip trips[CORES][2];

static void tensor_ops(void) {
  nrta_seq_t s;
  for (int l = 0; l < CORES; l++)
    for (int q = 0; q < 2; q++) {
      struct xu_trip *t = &trips[l][q];
      t->a = alloc(NRT_TENSOR_PLACEMENT_DEVICE, l, TBYTES);
      t->b = alloc(NRT_TENSOR_PLACEMENT_DEVICE, l, TBYTES);
      s = SEQ_SENTINEL;
      CHECK(nrta_get_sequence((uint32_t)l, NRTA_XU_TENSOR_OP, q, &s) == NRT_SUCCESS &&
                s == seq_of((uint64_t)l, NRTA_XU_TENSOR_OP, (uint64_t)q, 0),
            "lnc %d queue %d: nrta_get_sequence before any request = XU id, counter 0 (%#llx)", l, q,
            (unsigned long long)s);
      t->fd = eventfd(0, EFD_NONBLOCK);
      CHECK(t->fd >= 0 && nrta_event_register_xu_completion(l, NRTA_XU_TENSOR_OP, q, t->fd) == NRT_SUCCESS,
            "lnc %d queue %d: register an eventfd for every completion of the XU", l, q);
    }
  /* Submit all eight execution units' requests before waiting for any. */
  for (int l = 0; l < CORES; l++)
    for (int q = 0; q < 2; q++) {
      struct xu_trip *t = &trips[l][q];
      for (int i = 0; i < TBYTES; i++) t->src[i] = (uint8_t)(i * 7 + l * 31 + q * 5 + 3);
      memset(t->back, 0xA5, TBYTES);
      for (int k = 0; k < 3; k++) t->ret[k] = STATUS_SENTINEL, t->seq[k] = SEQ_SENTINEL;
      CHECK(nrta_tensor_write(t->a, t->src, 0, TBYTES, l, q, &t->ret[0], &t->seq[0]) == NRT_SUCCESS,
            "lnc %d queue %d: nrta_tensor_write queued", l, q);
      CHECK(nrta_tensor_copy(t->a, 16, t->b, 32, 200, l, q, &t->ret[1], &t->seq[1]) == NRT_SUCCESS,
            "lnc %d queue %d: nrta_tensor_copy queued", l, q);
      CHECK(nrta_tensor_read(t->back, t->b, 32, 200, l, q, &t->ret[2], &t->seq[2]) == NRT_SUCCESS,
            "lnc %d queue %d: nrta_tensor_read queued", l, q);
      for (int k = 0; k < 3; k++)
        CHECK(t->seq[k] == seq_of((uint64_t)l, NRTA_XU_TENSOR_OP, (uint64_t)q, (uint64_t)k + 1),
              "lnc %d queue %d: request %d has id %#llx (spec §5.5: lnc<<56 | queue<<52 | TENSOR_OP<<48 | %d)", l, q,
              k + 1, (unsigned long long)t->seq[k], k + 1);
      CHECK(t->seq[0] < t->seq[1] && t->seq[1] < t->seq[2], "lnc %d queue %d: ids strictly increasing", l, q);
    }
  for (int l = 0; l < CORES; l++)
    for (int q = 0; q < 2; q++) {
      struct xu_trip *t = &trips[l][q];
      bool done[3] = {false, false, false};
      uint64_t signals;
      CHECK(wait_seq(t->seq[2]), "lnc %d queue %d: the read completed", l, q);
      for (int k = 0; k < 3; k++) nrta_is_completed(t->seq[k], &done[k]);
      CHECK(done[0] && done[1] && done[2], "lnc %d queue %d: nrta_is_completed true for all three", l, q);
      CHECK(t->ret[0] == NRT_SUCCESS && t->ret[1] == NRT_SUCCESS && t->ret[2] == NRT_SUCCESS,
            "lnc %d queue %d: exec_ret written NRT_SUCCESS (%d %d %d)", l, q, t->ret[0], t->ret[1], t->ret[2]);
      CHECK(memcmp(t->back, t->src + 16, 200) == 0 && t->back[200] == 0xA5 && t->back[TBYTES - 1] == 0xA5,
            "lnc %d queue %d: write -> copy -> read round-trips exactly, nothing beyond the 200 bytes", l, q);
      s = SEQ_SENTINEL;
      CHECK(nrta_get_sequence((uint32_t)l, NRTA_XU_TENSOR_OP, q, &s) == NRT_SUCCESS && s == t->seq[2],
            "lnc %d queue %d: nrta_get_sequence = the read's id", l, q);
      signals = fd_value(t->fd, 5000);
      CHECK(signals >= 1 && signals <= 3, "lnc %d queue %d: the XU eventfd counted %llu completion(s) of 3", l, q,
            (unsigned long long)signals);
    }
}

/* spec §3.6 / §5.4 and docs/abi-status.md: failed enqueues are the call's own status, write no
 * req_sequence and take no sequence number. */
static void tensor_op_errors(void) {
  struct xu_trip *t = &trips[0][0];
  nrt_tensor_t *other = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 1, TBYTES);
  nrt_tensor_t *host = alloc(NRT_TENSOR_PLACEMENT_HOST, -1, TBYTES);
  nrt_tensor_t *freed = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 0, TBYTES), *stale = freed;
  NRT_STATUS ret = STATUS_SENTINEL;
  nrta_seq_t s = SEQ_SENTINEL;
  bool done = true;
  uint8_t *buf = t->back, *src = t->src;
  nrt_tensor_free(&freed);
#define ENQ_FAILS(call, want, what)                                                                              \
  do {                                                                                                          \
    s = SEQ_SENTINEL;                                                                                           \
    CHECK((call) == (want) && s == SEQ_SENTINEL, "%s -> %s, req_sequence untouched", what, #want);               \
  } while (0)
  ENQ_FAILS(nrta_tensor_write(NULL, src, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "write to a NULL tensor");
  ENQ_FAILS(nrta_tensor_read(buf, NULL, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "read of a NULL tensor");
  ENQ_FAILS(nrta_tensor_copy(NULL, 0, t->b, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "copy from a NULL tensor");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, NULL, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "copy to a NULL tensor");
  ENQ_FAILS(nrta_tensor_write(t->a, NULL, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "write from a NULL buffer");
  ENQ_FAILS(nrta_tensor_write(stale, src, 0, 4, 0, 0, &ret, &s), NRT_INVALID_HANDLE, "write to a freed tensor");
  ENQ_FAILS(nrta_tensor_read(buf, stale, 0, 4, 0, 0, &ret, &s), NRT_INVALID_HANDLE, "read of a freed tensor");
  ENQ_FAILS(nrta_tensor_copy(stale, 0, t->a, 0, 4, 0, 0, &ret, &s), NRT_INVALID_HANDLE, "copy from a freed tensor");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, stale, 0, 4, 0, 0, &ret, &s), NRT_INVALID_HANDLE, "copy to a freed tensor");
  ENQ_FAILS(nrta_tensor_write(t->a, src, 250, 7, 0, 0, &ret, &s), NRT_INVALID, "write of 7 B at 250 of 256");
  ENQ_FAILS(nrta_tensor_write(t->a, src, UINT64_MAX, 2, 0, 0, &ret, &s), NRT_INVALID, "write at offset UINT64_MAX");
  ENQ_FAILS(nrta_tensor_read(buf, t->a, TBYTES, 1, 0, 0, &ret, &s), NRT_INVALID, "read of 1 B at 256 of 256");
  ENQ_FAILS(nrta_tensor_copy(t->a, 200, t->b, 0, 57, 0, 0, &ret, &s), NRT_INVALID, "copy: source out of bounds");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, t->b, 200, 57, 0, 0, &ret, &s), NRT_INVALID, "copy: destination out of bounds");
  ENQ_FAILS(nrta_tensor_write(t->a, src, 0, 4, 0, 2, &ret, &s), NRT_INVALID, "write on tensor-op queue 2");
  ENQ_FAILS(nrta_tensor_read(buf, t->a, 0, 4, 0, 2, &ret, &s), NRT_INVALID, "read on tensor-op queue 2");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, t->b, 0, 4, 0, 2, &ret, &s), NRT_INVALID, "copy on tensor-op queue 2");
  ENQ_FAILS(nrta_tensor_write(t->a, src, 0, 4, 0, -1, &ret, &s), NRT_INVALID, "write on queue -1");
  ENQ_FAILS(nrta_tensor_write(t->a, src, 0, 4, -1, 0, &ret, &s), NRT_INVALID, "write on lnc -1");
  ENQ_FAILS(nrta_tensor_read(buf, t->a, 0, 4, -1, 0, &ret, &s), NRT_INVALID, "read on lnc -1");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, t->b, 0, 4, CORES, 0, &ret, &s), NRT_INVALID, "copy on lnc 4 of 4 visible");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, other, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "copy between cores 0 and 1");
  ENQ_FAILS(nrta_tensor_copy(host, 0, t->a, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "copy from a host tensor");
  ENQ_FAILS(nrta_tensor_copy(t->a, 0, host, 0, 4, 0, 0, &ret, &s), NRT_INVALID, "copy to a host tensor");
#undef ENQ_FAILS
  s = SEQ_SENTINEL;
  CHECK(nrta_get_sequence(0, (nrta_xu_t)3, 0, &s) == NRT_INVALID, "nrta_get_sequence: xu type 3 -> NRT_INVALID");
  CHECK(nrta_get_sequence(0, NRTA_XU_TENSOR_OP, 2, &s) == NRT_INVALID, "nrta_get_sequence: tensor-op queue 2 -> NRT_INVALID");
  CHECK(nrta_get_sequence(0, NRTA_XU_COMPUTE, 1, &s) == NRT_INVALID, "nrta_get_sequence: compute queue 1 -> NRT_INVALID");
  CHECK(nrta_get_sequence(CORES, NRTA_XU_TENSOR_OP, 0, &s) == NRT_INVALID, "nrta_get_sequence: lnc 4 -> NRT_INVALID");
  CHECK(s == SEQ_SENTINEL, "nrta_get_sequence wrote nothing on failure");
  CHECK(nrta_get_sequence(0, NRTA_XU_TENSOR_OP, 0, NULL) == NRT_INVALID, "nrta_get_sequence: NULL -> NRT_INVALID");
  CHECK(nrta_is_completed(t->seq[0], NULL) == NRT_INVALID, "nrta_is_completed: NULL -> NRT_INVALID");
  CHECK(nrta_is_completed(3ull << 48 | 1, &done) == NRT_INVALID && done,
        "nrta_is_completed: xu type 3 in the id -> NRT_INVALID, nothing written");
  CHECK(nrta_is_completed(seq_of(CORES, NRTA_XU_TENSOR_OP, 0, 1), &done) == NRT_INVALID,
        "nrta_is_completed: an id naming lnc 4 -> NRT_INVALID");
  done = true;
  CHECK(nrta_is_completed(seq_of(0, NRTA_XU_TENSOR_OP, 0, 4), &done) == NRT_INVALID && done,
        "nrta_is_completed: the next, never-submitted id of the XU -> NRT_INVALID (a poller would wait "
        "forever), nothing written");

  /* Deregistered XU eventfds hear nothing more; the next id is contiguous (spec §5.5). */
  for (int l = 0; l < CORES; l++)
    for (int q = 0; q < 2; q++)
      CHECK(nrta_event_register_xu_completion(l, NRTA_XU_TENSOR_OP, q, -1) == NRT_SUCCESS,
            "lnc %d queue %d: fd -1 deregisters the XU eventfd", l, q);
  ret = STATUS_SENTINEL;
  CHECK(nrta_tensor_write(t->a, src, 0, 4, 0, 0, &ret, &s) == NRT_SUCCESS && s == seq_of(0, NRTA_XU_TENSOR_OP, 0, 4),
        "after the failed enqueues the next id is counter 4 (%#llx)", (unsigned long long)s);
  CHECK(wait_seq(s) && ret == NRT_SUCCESS, "that write completed with NRT_SUCCESS");
  CHECK(fd_value(t->fd, 0) == 0, "the deregistered XU eventfd was not signalled");
  nrt_tensor_free(&other);
  nrt_tensor_free(&host);
}

/* spec §5.6: an already completed id signals at once; a pending one at completion; -1
 * deregisters. A 2-rank all-reduce keeps rank 0's request pending, deterministically, until
 * rank 1 schedules its part (spec §5.8: a collective needs all its participants). */
static void eventfds(void) {
  uint32_t group[2] = {0, 1};
  float x[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}}, back[2][4];
  const float want[4] = {11, 22, 33, 44};
  nrt_tensor_t *t[2];
  nrt_cc_context_t *ctx[2] = {NULL, NULL};
  NRT_STATUS ret[2] = {STATUS_SENTINEL, STATUS_SENTINEL};
  nrta_seq_t seq[2] = {SEQ_SENTINEL, SEQ_SENTINEL}, s;
  bool done = true;
  int fd = eventfd(0, EFD_NONBLOCK), dfd = eventfd(0, EFD_NONBLOCK), xfd = eventfd(0, EFD_NONBLOCK);
  nrta_seq_t done_id = trips[0][0].seq[0];
  CHECK(fcntl(9999, F_GETFD) == -1, "fd 9999 is not open in this process");
  CHECK(nrta_event_register_seq_id_completion(done_id, 9999) == NRT_INVALID, "seq registration: fd 9999 -> NRT_INVALID");
  CHECK(nrta_event_register_seq_id_completion(done_id, -2) == NRT_INVALID, "seq registration: fd -2 -> NRT_INVALID");
  CHECK(nrta_event_register_seq_id_completion(3ull << 48 | 1, fd) == NRT_INVALID,
        "seq registration: an id of xu type 3 -> NRT_INVALID");
  CHECK(nrta_event_register_xu_completion(0, (nrta_xu_t)3, 0, fd) == NRT_INVALID, "xu registration: type 3 -> NRT_INVALID");
  CHECK(nrta_event_register_xu_completion(0, NRTA_XU_TENSOR_OP, 0, 9999) == NRT_INVALID,
        "xu registration: fd 9999 -> NRT_INVALID");
  CHECK(nrta_event_register_xu_completion(0, NRTA_XU_TENSOR_OP, 2, fd) == NRT_INVALID,
        "xu registration: queue 2 -> NRT_INVALID");
  CHECK(nrta_event_register_xu_completion(-1, NRTA_XU_TENSOR_OP, 0, fd) == NRT_INVALID,
        "xu registration: lnc -1 -> NRT_INVALID");
  CHECK(fd_value(fd, 0) == 0, "nothing was signalled by the failed registrations");

  CHECK(nrta_event_register_seq_id_completion(trips[1][1].seq[2], fd) == NRT_SUCCESS && fd_value(fd, 2000) == 1,
        "registering a completed id signals the eventfd once, at once");
  CHECK(nrta_event_register_seq_id_completion(trips[1][1].seq[2], -1) == NRT_SUCCESS, "fd -1 deregisters it");

  for (int r = 0; r < 2; r++) {
    nrt_cc_comm_t comm = {group, (uint32_t)r, 2, (uint32_t)r, CORES, (uint32_t)r};
    nrt_tensor_list_t list;
    t[r] = alloc(NRT_TENSOR_PLACEMENT_DEVICE, r, sizeof x[r]);
    list.tensors = &t[r];
    list.num_tensors = 1;
    CHECK(nrt_tensor_write(t[r], x[r], 0, sizeof x[r]) == NRT_SUCCESS &&
              nrta_cc_prepare(&comm, &list, &list, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx[r]) == NRT_SUCCESS,
          "rank %d: in-place fp32 all-reduce prepared", r);
  }
  s = SEQ_SENTINEL;
  CHECK(nrta_get_sequence(0, NRTA_XU_COLLECTIVES, 1, &s) == NRT_SUCCESS && s == seq_of(0, NRTA_XU_COLLECTIVES, 1, 0),
        "collectives XU (lnc 0, queue 1) before any request: counter 0");
  CHECK(xfd >= 0 && nrta_event_register_xu_completion(1, NRTA_XU_COLLECTIVES, 1, xfd) == NRT_SUCCESS,
        "register an eventfd on collectives XU (lnc 1, queue 1)");
  CHECK(nrta_cc_schedule(&ctx[0], 1, &ret[0], &seq[0]) == NRT_SUCCESS && seq[0] == seq_of(0, NRTA_XU_COLLECTIVES, 1, 1),
        "rank 0 scheduled on collectives queue 1: id %#llx", (unsigned long long)seq[0]);
  CHECK(nrta_is_completed(seq[0], &done) == NRT_SUCCESS && !done, "rank 0 pending while rank 1 has not scheduled");
  CHECK(nrta_event_register_seq_id_completion(seq[0], dfd) == NRT_SUCCESS &&
            nrta_event_register_seq_id_completion(seq[0], -1) == NRT_SUCCESS &&
            nrta_event_register_seq_id_completion(seq[0], fd) == NRT_SUCCESS,
        "pending id: register an eventfd, deregister it (-1), register another");
  CHECK(fd_value(fd, 0) == 0, "not signalled while pending");
  CHECK(nrta_cc_schedule(&ctx[1], 1, &ret[1], &seq[1]) == NRT_SUCCESS && seq[1] == seq_of(1, NRTA_XU_COLLECTIVES, 1, 1),
        "rank 1 scheduled: id %#llx", (unsigned long long)seq[1]);
  CHECK(fd_value(fd, 5000) == 1, "the eventfd registered while pending is signalled once at completion");
  CHECK(wait_seq(seq[0]) && wait_seq(seq[1]) && ret[0] == NRT_SUCCESS && ret[1] == NRT_SUCCESS,
        "both ranks completed with NRT_SUCCESS (%d, %d)", ret[0], ret[1]);
  CHECK(fd_value(dfd, 0) == 0, "the deregistered eventfd was not signalled");
  CHECK(fd_value(xfd, 2000) >= 1, "the XU eventfd of (lnc 1, COLLECTIVES, 1) was signalled");
  s = SEQ_SENTINEL;
  CHECK(nrta_get_sequence(1, NRTA_XU_COLLECTIVES, 1, &s) == NRT_SUCCESS && s == seq[1], "nrta_get_sequence = rank 1's id");
  for (int r = 0; r < 2; r++)
    CHECK(nrt_tensor_read(t[r], back[r], 0, sizeof back[r]) == NRT_SUCCESS && memcmp(back[r], want, sizeof want) == 0,
          "rank %d: all-reduce result 11 22 33 44", r);
  CHECK(nrta_event_register_seq_id_completion(seq[0], -1) == NRT_SUCCESS &&
            nrta_event_register_xu_completion(1, NRTA_XU_COLLECTIVES, 1, -1) == NRT_SUCCESS,
        "deregister both before closing the fds");
  for (int r = 0; r < 2; r++) nrt_tensor_free(&t[r]);
  close(fd);
  close(dfd);
  close(xfd);
}

/* A malformed NEURON_RT_ROOT_COMM_ID (spec §5.10: "host:port") makes joining a world
 * NRT_INVALID (include/nrt/nrt.h); nrt_init itself does not read it. */
static void malformed_root_comm_ids(void) {
  const char *bad[] = {"nohost", "localhost:0", "10.0.0.1:70000", "[::1:5000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("NEURON_RT_ROOT_COMM_ID", bad[i], 1);
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "nrt_init with NEURON_RT_ROOT_COMM_ID=%s", bad[i]);
    CHECK(nrt_build_global_comm(0, 0, 1) == NRT_INVALID, "%s: nrt_build_global_comm -> NRT_INVALID", bad[i]);
    CHECK(nrt_cc_global_comm_init(0, 0, 1) == NRT_INVALID, "%s: nrt_cc_global_comm_init -> NRT_INVALID", bad[i]);
    CHECK(nrt_barrier(0, 0, 1) == NRT_INVALID, "%s: nrt_barrier (creates the world) -> NRT_INVALID", bad[i]);
    nrt_close();
  }
  unsetenv("NEURON_RT_ROOT_COMM_ID");
}

int main(void) {
  setenv("NEURON_RT_VISIBLE_CORES", "0-3", 1);
  setenv("NEURON_RT_EXEC_TIMEOUT", "10", 1);
  unsetenv("NEURON_RT_ROOT_COMM_ID");
  uninitialized("before nrt_init");
  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "nrt_init with 4 visible cores");
  worlds();
  host_collectives();
  tensor_ops();
  tensor_op_errors();
  eventfds();
  for (int l = 0; l < CORES; l++)
    for (int q = 0; q < 2; q++) {
      nrt_tensor_free(&trips[l][q].a);
      nrt_tensor_free(&trips[l][q].b);
      close(trips[l][q].fd);
    }
  nrt_close();
  uninitialized("after nrt_close");
  malformed_root_comm_ids();
  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "nrt_init again (re-init)");
  run_ranks(barrier_rank);
  nrt_close();
  return check_summary("async_test");
}
