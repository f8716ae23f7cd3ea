#define _POSIX_C_SOURCE 200809L
#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static _Atomic int bad; /* an in-place fp32 all-reduce on 2 logical cores, one thread per core */
static void *rank(void *arg) {
  uint32_t r = (uint32_t)(uintptr_t)arg, group[2] = {0, 1}; float x[4] = {r + 1.0f, 2, 3, 4};
  nrt_tensor_t *t = NULL; nrt_cc_context_t *ctx = NULL; NRT_STATUS ret = NRT_FAILURE; nrta_seq_t seq = 0; bool done = false;
  nrt_cc_comm_t comm = {group, r, 2, r, 2, r}; nrt_tensor_list_t list = {&t, 1};
  nrt_cc_global_comm_init(r, r, 2);
  nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, (int)r, sizeof x, "x", &t); nrt_tensor_write(t, x, 0, sizeof x);
  if (!nrta_cc_prepare(&comm, &list, &list, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx) && !nrta_cc_schedule(&ctx, 0, &ret, &seq))
    while (!nrta_is_completed(seq, &done) && !done) {}
  nrt_tensor_read(t, x, 0, sizeof x); nrt_tensor_free(&t);
  printf("rank %u: status %d, %g %g %g %g\n", r, ret, x[0], x[1], x[2], x[3]);
  if (ret != NRT_SUCCESS || x[0] != 3 || x[3] != 8) bad = 1;
  return NULL;
}
int main(void) {
  pthread_t th[2]; setenv("NEURON_RT_VISIBLE_CORES", "0-1", 1);
  if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "")) return 1;
  for (uintptr_t r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank, (void *)r);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  nrt_close(); return bad;
}
