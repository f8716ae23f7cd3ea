/* mp_driver's "groups" test: a program that schedules collectives on two groups before it
 * waits on either, one rank per process (issue 26, docs/design.md §2.10).
 *
 * World 3, one rank per process. Group A is {0, 1, 2} on collectives queue 0, group B is
 * {0, 1} on queue 1. Every round, global id 0 schedules A then B, global id 1 schedules B then
 * A, global id 2 schedules A; then each waits on what it scheduled. A runtime that let the
 * caller's thread wait inside nrta_cc_schedule for the group's other ranks would deadlock here:
 * id 0 would wait in A for id 1, which waits in B for id 0. Both are 4 KiB fp32 all-reduces (the
 * size that starts on the caller's thread), repeated for several rounds so that the later
 * ones are repeats of the same collective; a last round uses 4 MiB (the worker's path).
 *
 * Inputs are small integers, so each sum is exact: A's element j is sum over g of
 * (g + 1) * (j % 5 + 1), B's is sum over g in {0, 1} of 10 (g + 1) * (j % 3 + 1). */
#define _GNU_SOURCE
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

#define ROUNDS 12

typedef struct {
  const char *name;
  uint32_t queue, rank_n, group[3];
  int scale, period;
  nrt_tensor_t *tin, *tout;
  NRT_STATUS exec_ret;
  nrta_seq_t seq;
} group_cc;

static float in_val(const group_cc *c, uint32_t gid, size_t j) {
  return (float)(c->scale * (int)(gid + 1) * (int)(j % (size_t)c->period + 1));
}

/* Allocate, write the input, prepare and schedule; 0 on a failed step (checked). */
static int start(group_cc *c, uint32_t gid, size_t count, const char *who) {
  size_t bytes = count * sizeof(float);
  float *in = malloc(bytes);
  uint32_t rank = gid; /* both groups list the ids in order from 0 */
  NRT_STATUS st;
  for (size_t j = 0; j < count; j++) in[j] = in_val(c, gid, j);
  c->exec_ret = (NRT_STATUS)4242;
  st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, bytes, "in", &c->tin);
  if (st == NRT_SUCCESS) st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, bytes, "out", &c->tout);
  if (st == NRT_SUCCESS) st = nrt_tensor_write(c->tin, in, 0, bytes);
  if (st == NRT_SUCCESS) {
    nrt_cc_comm_t comm = {c->group, rank, c->rank_n, gid, 3, 0};
    nrt_tensor_list_t li = {&c->tin, 1}, lo = {&c->tout, 1};
    nrt_cc_context_t *ctx = NULL;
    st = nrta_cc_prepare(&comm, &li, &lo, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx);
    if (st == NRT_SUCCESS) st = nrta_cc_schedule(&ctx, c->queue, &c->exec_ret, &c->seq);
  }
  free(in);
  return mp_check(st == NRT_SUCCESS, "%s: group %s (queue %u) prepared and scheduled (status %d)", who, c->name,
                  c->queue, st);
}

/* Wait (bounded), then check exec_ret and every output element; frees the tensors. */
static int finish(group_cc *c, size_t count, const char *who) {
  size_t bytes = count * sizeof(float), wrong = 0;
  float *out = malloc(bytes);
  double end = mp_now() + MP_EXEC_TIMEOUT_S + 10;
  bool done = false;
  while (!done) {
    if (nrta_is_completed(c->seq, &done) != NRT_SUCCESS) mp_child_abort("nrta_is_completed failed");
    if (!done && mp_now() > end) mp_child_abort("a collective of the two groups did not complete in time");
    if (!done) usleep(100);
  }
  int ok = mp_check(c->exec_ret == NRT_SUCCESS, "%s: group %s completed with NRT_SUCCESS (got %d)", who, c->name,
                    c->exec_ret);
  if (ok && nrt_tensor_read(c->tout, out, 0, bytes) == NRT_SUCCESS) {
    for (size_t j = 0; j < count; j++) {
      float want = 0;
      for (uint32_t g = 0; g < c->rank_n; g++) want += in_val(c, c->group[g], j);
      wrong += out[j] != want;
    }
  } else {
    wrong = count;
  }
  ok = mp_check(ok && wrong == 0, "%s: group %s: every element is the exact sum (%zu wrong)", who, c->name, wrong) && ok;
  nrt_tensor_free(&c->tin);
  nrt_tensor_free(&c->tout);
  free(out);
  return ok;
}

static void groups_body(const mp_proc *p) {
  uint32_t gid = (uint32_t)p->gid;
  NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", p->name, st)) return;
  st = nrt_cc_global_comm_init(0, gid, 3);
  int ok = mp_check(st == NRT_SUCCESS, "%s: nrt_cc_global_comm_init -> NRT_SUCCESS (got %d)", p->name, st);
  for (int round = 0; ok && round <= ROUNDS; round++) {
    size_t count = round < ROUNDS ? 1024 : 1024 * 1024; /* 4 KiB, then 4 MiB */
    group_cc a = {"A {0,1,2}", 0, 3, {0, 1, 2}, 1, 5, NULL, NULL, 0, 0};
    group_cc b = {"B {0,1}", 1, 2, {0, 1, 0}, 10, 3, NULL, NULL, 0, 0};
    group_cc *order[2];
    int n = 0;
    switch (gid) {
      case 0: order[n++] = &a, order[n++] = &b; break;
      case 1: order[n++] = &b, order[n++] = &a; break;
      default: order[n++] = &a; break;
    }
    for (int i = 0; i < n && ok; i++) ok = start(order[i], gid, count, p->name);
    /* Both are scheduled before either is waited on. */
    for (int i = 0; i < n && ok; i++) ok = finish(order[i], count, p->name);
  }
  mp_check(ok, "%s: %d rounds of two groups scheduled before either was waited on", p->name, ROUNDS + 1);
  st = nrt_barrier(0, gid, 3);
  mp_check(st == NRT_SUCCESS, "%s: nrt_barrier at the end -> NRT_SUCCESS (got %d)", p->name, st);
  nrt_close();
}

void mp_test_groups(void) {
  mp_proc procs[3];
  int port = mp_free_port();
  char root[64];
  mp_root_id(root, sizeof root, 0, port);
  mp_say("\n== two groups scheduled before either is waited on: world 3, A = {0,1,2} on queue 0, B = {0,1} "
         "on queue 1; id 0 schedules A then B, id 1 B then A (NEURON_RT_ROOT_COMM_ID=%s)",
         root);
  for (int g = 0; g < 3; g++) {
    mp_proc *p = &procs[g];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "groups rank %d", g);
    snprintf(p->cores, sizeof p->cores, "%d", g);
    snprintf(p->root, sizeof p->root, "%s", root);
    p->body = groups_body, p->gid = g, p->world = 3, p->threads = 1;
  }
  mp_run(procs, 3, 60);
  mp_check_ends(procs, 3);
  mp_check_shm_clean(port, "two groups");
  mp_cleanup_logs(procs, 3);
}
