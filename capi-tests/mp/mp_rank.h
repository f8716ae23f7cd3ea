/* What one rank does in the multi-process tests, through the public headers only: host
 * collectives (nrt_barrier, nrt_all_gather; docs/contract/abi.md §3.5, §5.8) and host-driven
 * collectives (nrta_cc_prepare / nrta_cc_schedule, waited for by nrta_is_completed or an
 * eventfd; §3.6, §5.6, §5.7), with every expected byte computed here from every rank's input.
 *
 * The collectives are the three values of nrt_cc_op_type_t (all-gather, all-reduce,
 * reduce-scatter). There is no all-to-all in that enum (spec §2.2), so the host-driven API
 * cannot request one and these tests do not try. */
#ifndef OPENNRT_MP_RANK_H
#define OPENNRT_MP_RANK_H

#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_status.h>

#include <stddef.h>
#include <stdint.h>

/* One rank: its process-relative core (vnc 0 = the process's first visible core), global id
 * (= its rank in the full world, replica group 0..world-1) and the world size. */
typedef struct {
  uint32_t vnc, gid, world;
  const char *who; /* "rank 3" in messages */
} mp_rank;

/* A scheduled host-driven collective. Must stay where it is until it completed: the runtime
 * writes exec_ret at completion (spec §3.6). */
typedef struct {
  const mp_rank *r;
  nrt_cc_op_type_t op;
  nrt_dtype_t dtype;
  size_t count;  /* elements per rank's chunk (all-reduce: the whole tensor) */
  int salt;
  nrt_tensor_t *tin, *tout;
  NRT_STATUS exec_ret;
  nrta_seq_t seq;
  double started, elapsed; /* seconds (monotonic), schedule -> completion observed */
} mp_cc;

const char *mp_op_name(nrt_cc_op_type_t o);
const char *mp_dtype_name(nrt_dtype_t d);

/* nrt_barrier(vnc, gid, world) == NRT_SUCCESS, checked. */
int mp_rank_barrier(const mp_rank *r, const char *what);
/* nrt_all_gather of 37 bytes per rank into a garbage-filled buffer; checked byte for byte.
 * `size_override` > 0 makes this rank pass another size (the mismatch test): returns the
 * status then, unchecked. */
NRT_STATUS mp_rank_all_gather(const mp_rank *r, int round, uint32_t size_override, int *exact);

/* Allocate this rank's tensors on its core, write its input (integer values, exact in bf16
 * and fp32; values hashed from (salt, gid, index) so no rank's data is a shift of another's),
 * prepare and schedule on collectives queue 0. `count_override` > 0 makes this rank use
 * another count than its peers (the mismatch test). Returns the first failing status
 * (prepare's or schedule's), NRT_SUCCESS once scheduled. */
NRT_STATUS mp_cc_start(mp_cc *c, const mp_rank *r, nrt_cc_op_type_t o, nrt_dtype_t d, size_t count, int salt,
                       size_t count_override);
/* Wait for completion, by eventfd (poll with a timeout) or by polling nrta_is_completed, at
 * most `timeout_s`; sets c->elapsed. A wait that runs out ends the process (mp_child_abort):
 * the runtime may still write c->exec_ret. */
void mp_cc_wait(mp_cc *c, int use_eventfd, double timeout_s);
/* Read the output and compare every byte with the result computed here. */
int mp_cc_exact(mp_cc *c);
void mp_cc_free(mp_cc *c);
/* start + wait + exec_ret == NRT_SUCCESS + exact, each step checked and printed. */
int mp_cc_run_checked(const mp_rank *r, nrt_cc_op_type_t o, nrt_dtype_t d, size_t count, int salt, int use_eventfd);

/* The full sequence of test 1 for one rank: barrier, exact all-gather, comm init, all-reduce
 * / all-gather / reduce-scatter in bf16 and fp32 (alternating the two waits), barrier. */
void mp_rank_full(const mp_rank *r);

#endif
