/*
 * A KV-cache hand-off between two processes through nrt_async_sendrecv.h, as disaggregated
 * inference does it: a prefill worker (the sender) streams N tensors of BYTES bytes each to a
 * decode worker (the receiver). Both sides check every byte. Written only against the public
 * headers (nrt/nrt.h for the runtime and tensors, nrt/nrt_async_sendrecv.h for the transfer).
 *
 *   kv_handoff send PEER_IP PEER_LNC LNC N BYTES [device|host]
 *   kv_handoff recv PEER_IP PEER_LNC LNC N BYTES [device|host]
 *
 * Both need NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1 and the same
 * NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT. LNC is this side's host logical core, PEER_LNC the
 * other side's; PEER_IP is the address of the other side's host (127.0.0.1 on one host).
 * Either side may start first.
 *
 * KV_EXPECT_FAILURE=1 (for fault tests): the transfer must fail with a status, not hang; the
 * program then closes its service and starts it again, which must work. KV_STALL_AFTER=k (for
 * fault tests): once k transfers are done, stop and sleep until killed, holding the rest back.
 *
 * Exit status: 0 every byte arrived; 1 a byte differs; 2 an API call failed; 3 with
 * KV_EXPECT_FAILURE, the transfer did not fail.
 */
#define _POSIX_C_SOURCE 200809L
#include <nrt/nrt.h>
#include <nrt/nrt_async_sendrecv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    NRT_STATUS st_ = (call);                                                          \
    if (st_ != NRT_SUCCESS) {                                                         \
      fprintf(stderr, "kv_handoff: %s failed with status %d (line %d)\n", #call, st_, \
              __LINE__);                                                              \
      exit(2);                                                                        \
    }                                                                                 \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The byte at `offset` of layer `layer`: every layer and every position differ. */
static unsigned char kv_byte(int layer, size_t offset) {
  return (unsigned char)((offset * 131u + (size_t)layer * 7919u + (offset >> 12)) & 0xff);
}

int main(int argc, char **argv) {
  if (argc < 7 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv"))) {
    fprintf(stderr, "usage: %s send|recv PEER_IP PEER_LNC LNC N BYTES [device|host]\n", argv[0]);
    return 2;
  }
  int sender = !strcmp(argv[1], "send");
  const char *peer_ip = argv[2];
  int peer_lnc = atoi(argv[3]), lnc = atoi(argv[4]), n = atoi(argv[5]);
  size_t bytes = strtoull(argv[6], NULL, 0);
  int device = argc < 8 || strcmp(argv[7], "host");
  const char *expect_failure = getenv("KV_EXPECT_FAILURE");
  int must_fail = expect_failure && !strcmp(expect_failure, "1");
  const char *stall = getenv("KV_STALL_AFTER");
  int stall_after = stall ? atoi(stall) : -1;
  int max_pending = 0;

  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
  CHECK(nrt_async_sendrecv_get_max_num_pending_request(&max_pending));
  CHECK(nrt_async_sendrecv_init(lnc));

  /* Connect (sender) or accept (receiver); neither blocks, test_comm says when it is done. */
  nrt_async_sendrecv_comm_t *comm = NULL;
  if (sender)
    CHECK(nrt_async_sendrecv_connect(peer_ip, peer_lnc, lnc, &comm));
  else
    CHECK(nrt_async_sendrecv_accept(peer_ip, peer_lnc, lnc, &comm));
  bool done = false;
  while (!done) CHECK(nrt_async_sendrecv_test_comm(comm, &done));

  /* The KV cache: one tensor per layer. */
  nrt_tensor_t **layers = calloc((size_t)n, sizeof *layers);
  unsigned char *host = malloc(bytes ? bytes : 1);
  if (!layers || !host) return 2;
  for (int i = 0; i < n; i++) {
    CHECK(nrt_tensor_allocate(device ? NRT_TENSOR_PLACEMENT_DEVICE : NRT_TENSOR_PLACEMENT_HOST, 0,
                              bytes, "kv", &layers[i]));
    if (sender) {
      for (size_t b = 0; b < bytes; b++) host[b] = kv_byte(i, b);
      CHECK(nrt_tensor_write(layers[i], host, 0, bytes));
    }
  }

  /* Stream every layer, at most max_pending requests in flight (the per-comm limit). */
  nrt_async_sendrecv_request_t **req = calloc((size_t)n, sizeof *req);
  int posted = 0, finished = 0, failed = 0;
  NRT_STATUS first_failure = NRT_SUCCESS;
  double t0 = now();
  while (finished < n) {
    while (posted < n && posted - finished < max_pending && (stall_after < 0 || posted < stall_after)) {
      NRT_STATUS st = sender ? nrt_async_sendrecv_send_tensor(layers[posted], 0, bytes, comm, &req[posted])
                             : nrt_async_sendrecv_recv_tensor(layers[posted], 0, bytes, comm, &req[posted]);
      if (st != NRT_SUCCESS) {
        if (!must_fail) CHECK(st);
        if (first_failure == NRT_SUCCESS) first_failure = st;
        failed++, req[posted] = NULL; /* counted as finished by the scan below */
      }
      posted++;
    }
    for (int i = finished; i < posted; i++) {
      if (!req[i]) continue;
      size_t size = 0;
      bool req_done = false;
      NRT_STATUS st = nrt_async_sendrecv_test_request(req[i], &req_done, &size);
      if (st != NRT_SUCCESS) {
        if (!must_fail) CHECK(st);
        if (first_failure == NRT_SUCCESS) first_failure = st;
        failed++, req_done = true;
      } else if (req_done && size != bytes) {
        fprintf(stderr, "kv_handoff: layer %d moved %zu bytes, not %zu\n", i, size, bytes);
        return 1;
      }
      if (req_done) req[i] = NULL; /* reported done: recycled, never tested again */
    }
    while (finished < posted && !req[finished]) finished++;
    if (stall_after >= 0 && finished >= stall_after) {
      printf("kv_handoff %s: %d transfers done; stalling until killed\n", argv[1], finished);
      fflush(stdout);
      for (;;) nanosleep(&(struct timespec){1, 0}, NULL);
    }
  }
  double secs = now() - t0;

  if (must_fail) {
    if (!failed) {
      fprintf(stderr, "kv_handoff: the transfer was expected to fail, and it did not\n");
      return 3;
    }
    printf("kv_handoff %s: %d of %d transfers failed as expected (first status %d)\n", argv[1],
           failed, n, first_failure);
    /* The survivor closes its service and starts it again. */
    CHECK(nrt_async_sendrecv_close(lnc));
    CHECK(nrt_async_sendrecv_init(lnc));
    CHECK(nrt_async_sendrecv_close(lnc));
    printf("kv_handoff %s: closed and started lnc %d again\n", argv[1], lnc);
    nrt_close();
    return 0;
  }

  if (!sender) {
    CHECK(nrt_async_sendrecv_flush(lnc));
    for (int i = 0; i < n; i++) {
      CHECK(nrt_tensor_read(layers[i], host, 0, bytes));
      for (size_t b = 0; b < bytes; b++)
        if (host[b] != kv_byte(i, b)) {
          fprintf(stderr, "kv_handoff: layer %d byte %zu is %u, not %u\n", i, b, host[b],
                  kv_byte(i, b));
          return 1;
        }
    }
  }
  printf("kv_handoff %s: %d x %zu bytes (%s tensors) in %.3f s, %.1f MB/s%s\n", argv[1], n,
         bytes, device ? "device" : "host", secs, secs > 0 ? (double)n * bytes / secs / 1e6 : 0.0,
         sender ? "" : ", every byte checked");
  for (int i = 0; i < n; i++) nrt_tensor_free(&layers[i]);
  free(layers), free(req), free(host);
  CHECK(nrt_async_sendrecv_close(lnc));
  nrt_close();
  return 0;
}
