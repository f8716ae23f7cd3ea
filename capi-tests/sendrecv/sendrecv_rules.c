/*
 * The rules of nrt_async_sendrecv.h, through the C ABI, in one process: a sender on host core
 * 0 and a receiver on host core 1 (two services, two endpoints, over the loopback). Every
 * refusal must come with its status and leave everything else working. Needs
 * NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT; sets the feature gate itself.
 */
#define _POSIX_C_SOURCE 200809L
#include <nrt/nrt.h>
#include <nrt/nrt_async_sendrecv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;
#define EXPECT(call, want)                                                              \
  do {                                                                                  \
    NRT_STATUS got_ = (call);                                                           \
    if (got_ != (want)) {                                                               \
      fprintf(stderr, "sendrecv_rules: line %d: %s returned %d, expected %d (%s)\n",    \
              __LINE__, #call, got_, (want), #want);                                    \
      failures++;                                                                       \
    }                                                                                   \
  } while (0)
#define OK(call) EXPECT(call, NRT_SUCCESS)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Poll test_comm until done or an error; returns the last status. */
static NRT_STATUS connected(nrt_async_sendrecv_comm_t *c) {
  bool done = false;
  double until = now() + 60;
  while (now() < until) {
    NRT_STATUS st = nrt_async_sendrecv_test_comm(c, &done);
    if (st != NRT_SUCCESS || done) return st;
  }
  return NRT_FAILURE;
}

/* Poll a request until done; returns the status, the size through *size. */
static NRT_STATUS finished(nrt_async_sendrecv_request_t *r, size_t *size) {
  bool done = false;
  double until = now() + 60;
  while (now() < until) {
    NRT_STATUS st = nrt_async_sendrecv_test_request(r, &done, size);
    if (st != NRT_SUCCESS || done) return st;
  }
  return NRT_FAILURE;
}

int main(void) {
  /* The gate: without the variable, init fails even in an initialized runtime. */
  unsetenv("NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED");
  OK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
  EXPECT(nrt_async_sendrecv_init(0), NRT_FAILURE);
  nrt_close();
  /* Before nrt_init: no guard of its own, NRT_FAILURE. */
  setenv("NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED", "1", 1);
  setenv("OPENNRT_SENDRECV_CONNECT_TIMEOUT", "2", 1);
  EXPECT(nrt_async_sendrecv_init(0), NRT_FAILURE);
  OK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));

  int limit = 0;
  OK(nrt_async_sendrecv_get_max_num_pending_request(&limit));
  EXPECT(nrt_async_sendrecv_init(-1), NRT_INVALID);
  EXPECT(nrt_async_sendrecv_init(128), NRT_INVALID);
  OK(nrt_async_sendrecv_init(0));
  OK(nrt_async_sendrecv_init(1));
  EXPECT(nrt_async_sendrecv_init(1), NRT_FAILURE); /* already running */

  nrt_async_sendrecv_comm_t *tx = NULL, *rx = NULL, *none = NULL;
  EXPECT(nrt_async_sendrecv_connect("not-an-ip", 1, 0, &none), NRT_INVALID);
  EXPECT(nrt_async_sendrecv_connect(NULL, 1, 0, &none), NRT_INVALID);
  EXPECT(nrt_async_sendrecv_connect("127.0.0.1", 1, 0, NULL), NRT_INVALID);
  EXPECT(nrt_async_sendrecv_connect("127.0.0.1", 1, 7, &none), NRT_FAILURE); /* 7 not started */
  if (none) fprintf(stderr, "sendrecv_rules: a failed connect wrote its out-parameter\n"), failures++;
  OK(nrt_async_sendrecv_accept("127.0.0.1", 0, 1, &rx));
  OK(nrt_async_sendrecv_connect("127.0.0.1", 1, 0, &tx));
  OK(connected(tx));
  OK(connected(rx));

  /* A peer that never comes: NRT_TIMEOUT after OPENNRT_SENDRECV_CONNECT_TIMEOUT. */
  nrt_async_sendrecv_comm_t *lonely = NULL;
  OK(nrt_async_sendrecv_connect("127.0.0.1", 9, 0, &lonely));
  EXPECT(connected(lonely), NRT_TIMEOUT);

  nrt_tensor_t *t = NULL, *big = NULL;
  OK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, 0, 4096, "t", &t));
  OK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, (size_t)limit * 64, "big", &big));
  nrt_async_sendrecv_request_t *r = NULL, *reqs[256] = {0};
  EXPECT(nrt_async_sendrecv_send_tensor(t, 4000, 97, tx, &r), NRT_INVALID); /* out of bounds */
  EXPECT(nrt_async_sendrecv_send_tensor(t, (size_t)-1, 2, tx, &r), NRT_INVALID); /* overflow */
  EXPECT(nrt_async_sendrecv_recv_tensor(t, 0, 8, tx, &r), NRT_INVALID); /* a send comm */
  EXPECT(nrt_async_sendrecv_send_tensor(NULL, 0, 8, tx, &r), NRT_INVALID);
  EXPECT(nrt_async_sendrecv_send_tensor(t, 0, 8, NULL, &r), NRT_INVALID);
  EXPECT(nrt_async_sendrecv_send_tensor(t, 0, 8, (nrt_async_sendrecv_comm_t *)t, &r),
         NRT_INVALID_HANDLE); /* another kind of handle */
  if (r) fprintf(stderr, "sendrecv_rules: a refused send wrote its request\n"), failures++;

  /* The 129th pending request is refused; a close with work in flight fails, and so does the
     next init of that core, until a close succeeds. (Receives, which stay in flight until their
     send comes: a small send completes once the provider has taken its bytes.) */
  for (int i = 0; i < limit; i++) OK(nrt_async_sendrecv_recv_tensor(big, (size_t)i * 64, 64, rx, &reqs[i]));
  EXPECT(nrt_async_sendrecv_recv_tensor(big, 0, 64, rx, &r), NRT_RESOURCE);
  EXPECT(nrt_async_sendrecv_close(1), NRT_FAILURE);
  EXPECT(nrt_async_sendrecv_init(1), NRT_FAILURE);
  for (int i = 0; i < limit; i++) OK(nrt_async_sendrecv_send_tensor(big, (size_t)i * 64, 64, tx, &reqs[limit + i]));
  for (int i = 0; i < 2 * limit; i++) {
    size_t size = 0;
    OK(finished(reqs[i], &size));
    if (size != 64) fprintf(stderr, "sendrecv_rules: request %d moved %zu bytes\n", i, size), failures++;
  }
  /* Reported done: recycled; testing it again is refused. */
  bool done = false;
  EXPECT(nrt_async_sendrecv_test_request(reqs[0], &done, NULL), NRT_INVALID_HANDLE);

  /* A receive larger than the send reports the size sent. */
  OK(nrt_async_sendrecv_recv_tensor(t, 0, 4096, rx, &r));
  nrt_async_sendrecv_request_t *s = NULL;
  OK(nrt_async_sendrecv_send_tensor(t, 0, 100, tx, &s));
  size_t size = 0;
  OK(finished(s, &size));
  OK(finished(r, &size));
  if (size != 100) fprintf(stderr, "sendrecv_rules: received %zu bytes, not 100\n", size), failures++;
  OK(nrt_async_sendrecv_flush(1));
  EXPECT(nrt_async_sendrecv_flush(5), NRT_FAILURE);

  OK(nrt_async_sendrecv_close(0));
  EXPECT(nrt_async_sendrecv_test_comm(tx, &done), NRT_INVALID_HANDLE); /* gone with its core */
  OK(nrt_async_sendrecv_init(0));
  OK(nrt_async_sendrecv_close(0));
  OK(nrt_async_sendrecv_close(1));
  EXPECT(nrt_async_sendrecv_close(1), NRT_FAILURE);
  nrt_tensor_free(&t);
  nrt_tensor_free(&big);
  nrt_close();
  if (failures) {
    fprintf(stderr, "sendrecv_rules: %d check(s) failed\n", failures);
    return 1;
  }
  printf("sendrecv_rules: every rule held\n");
  return 0;
}
