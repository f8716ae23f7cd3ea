/* OpenNRT side of bench/sendrecv.sh: point-to-point tensors between two processes through
 * nrt_async_sendrecv.h, written only against the public headers (nrt/nrt.h for the runtime
 * and tensors, nrt/nrt_async_sendrecv.h for the transfers), as a user's program does it.
 *
 *   nrt_sendrecv a|b PEER_IP BYTES LAT_ITERS LAT_WARMUP BW_BATCHES BW_WINDOW [device|host]
 *                [spin|yield]
 *
 * Two processes, side a (host logical core 0) and side b (core 1), started with the same
 * arguments but the side, and the same NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1 and
 * NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT. PEER_IP is the other side's address (127.0.0.1 on
 * one host). A communicator moves data one way (connect makes a send comm, accept a receive
 * comm), so each side opens both: a: connect(peer, 1, 0) + accept(peer, 1, 0); b:
 * accept(peer, 0, 1) + connect(peer, 0, 1); then polls test_comm until both are done.
 *
 * Latency: LAT_WARMUP + LAT_ITERS ping-pongs of BYTES bytes (a sends, b sends the same size
 * back). Each side posts its next receive before it sends, and polls
 * nrt_async_sendrecv_test_request in a tight loop, as a user's program does. a times every
 * round trip (CLOCK_MONOTONIC); one-way latency = round trip / 2, the median over the timed
 * iterations. The last argument says what a poll loop does between two polls: nothing (spin,
 * the default: a tight loop) or sched_yield() (yield; for comparison only).
 *
 * Bandwidth: one direction, a -> b. b posts BW_WINDOW receives (each into its own slot of its
 * receive tensor), then a posts BW_WINDOW sends back to back (from the slots of its send
 * tensor), polls them all done and waits for b's 64-byte acknowledgement, which b sends once
 * all BW_WINDOW receives are done (b posts the next batch's receives before it sends the
 * acknowledgement). One untimed batch, then BW_BATCHES timed ones; MB/s = bytes moved /
 * a's time from the first send of the first timed batch to the last acknowledgement
 * (MB = 1e6 bytes).
 *
 * Check: after the timed loops, the receiving side sets its receive tensor to zero, one more
 * ping-pong and one more batch move, and every byte that arrived is compared with the
 * sender's pattern (each slot its own); a wrong byte fails the run (exit status 1). Every
 * request must report BYTES moved.
 *
 * a prints, on stdout:
 *   RESULT lib=nrt bytes=B lat_us=<median one-way> lat_mean_us=<mean one-way> lat_p90_us=<90th
 *          percentile> lat_p99_us=<99th> lat_iters=N
 *          bw_mbs=<MB/s> bw_batch_mbs=<median of the batches> bw_window=W bw_batches=M
 *          wait=spin|yield check=ok
 * Human-readable text goes to stderr. Exit status: 0 fine; 1 a byte or size differs; 2 an API
 * call failed or a wait took longer than WAIT_TIMEOUT_S. */
#define _GNU_SOURCE
#include <nrt/nrt.h>
#include <nrt/nrt_async_sendrecv.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#define WAIT_TIMEOUT_S 240.0
#define ACK_BYTES 64
#define STAGE_BYTES (16u << 20) /* host staging buffer for filling and checking tensors */

static const char *side_name = "?";
static int wait_yield; /* sched_yield() between polls */

#define CHECK(call)                                                                            \
  do {                                                                                         \
    NRT_STATUS st_ = (call);                                                                   \
    if (st_ != NRT_SUCCESS) {                                                                  \
      fprintf(stderr, "nrt_sendrecv %s: %s failed with status %d (line %d)\n", side_name, #call, \
              (int)st_, __LINE__);                                                             \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n sorted values, nearest rank. */
static double quantile(const double *sorted, long n, double q) {
  long i = (long)(q * (double)n + 0.999999) - 1;
  if (i < 0) i = 0;
  if (i >= n) i = n - 1;
  return sorted[i];
}

static long parse_long(const char *s, const char *what) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || *end || v < 0) {
    fprintf(stderr, "nrt_sendrecv: bad %s '%s'\n", what, s);
    exit(2);
  }
  return v;
}

/* The pattern of slot `seed`: 64-bit word i is a hash of (seed, i); byte k is byte k % 8 of
 * word k / 8 (little end first), so every slot and every position differ. */
static uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  return x;
}
static unsigned char pattern_byte(uint64_t seed, uint64_t k) {
  return (unsigned char)(pattern_word(seed, k / 8) >> (8 * (k % 8)));
}
static void fill_piece(unsigned char *buf, uint64_t seed, uint64_t from, size_t n) {
  size_t j = 0;
  for (; j < n && (from + j) % 8; j++) buf[j] = pattern_byte(seed, from + j);
  for (; j + 8 <= n; j += 8) {
    uint64_t w = pattern_word(seed, (from + j) / 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(buf + j, &w, 8);
#else
    for (int b = 0; b < 8; b++) buf[j + b] = (unsigned char)(w >> (8 * b));
#endif
  }
  for (; j < n; j++) buf[j] = pattern_byte(seed, from + j);
}

/* Write slot s's pattern into bytes [s * bytes, (s + 1) * bytes) of `t`, for s < slots. */
static void fill_tensor(nrt_tensor_t *t, int slots, size_t bytes, uint64_t seed0, unsigned char *stage) {
  for (int s = 0; s < slots; s++)
    for (size_t at = 0; at < bytes; at += STAGE_BYTES) {
      size_t n = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
      fill_piece(stage, seed0 + (uint64_t)s, at, n);
      CHECK(nrt_tensor_write(t, stage, (size_t)s * bytes + at, n));
    }
}

/* Compare slot s (s < slots) of `t` with slot s's pattern; exit 1 at the first wrong byte. */
static void check_tensor(nrt_tensor_t *t, int slots, size_t bytes, uint64_t seed0, unsigned char *stage,
                         unsigned char *want, const char *what) {
  for (int s = 0; s < slots; s++)
    for (size_t at = 0; at < bytes; at += STAGE_BYTES) {
      size_t n = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
      CHECK(nrt_tensor_read(t, stage, (size_t)s * bytes + at, n));
      fill_piece(want, seed0 + (uint64_t)s, at, n);
      if (memcmp(stage, want, n)) {
        size_t j = 0;
        while (stage[j] == want[j]) j++;
        fprintf(stderr, "nrt_sendrecv %s: WRONG DATA: %s, slot %d byte %zu is %u, not %u\n", side_name, what, s,
                at + j, stage[j], want[j]);
        exit(1);
      }
    }
}

/* Poll one request until done (a tight loop on test_request); it must have moved `bytes`. */
static void wait_req(nrt_async_sendrecv_request_t *r, size_t bytes, const char *what) {
  bool done = false;
  size_t size = 0;
  double t0 = 0;
  unsigned long polls = 0;
  for (;;) {
    CHECK(nrt_async_sendrecv_test_request(r, &done, &size));
    if (done) break;
    if (wait_yield) sched_yield();
    if ((++polls & 0xfffff) == 0) {
      if (t0 == 0) t0 = now();
      else if (now() - t0 > WAIT_TIMEOUT_S) {
        fprintf(stderr, "nrt_sendrecv %s: %s: not done after %.0f s\n", side_name, what, WAIT_TIMEOUT_S);
        exit(2);
      }
    }
  }
  if (size != bytes) {
    fprintf(stderr, "nrt_sendrecv %s: %s moved %zu bytes, not %zu\n", side_name, what, size, bytes);
    exit(1);
  }
}

/* Poll n requests until all are done. */
static void wait_all(nrt_async_sendrecv_request_t **r, int n, size_t bytes, const char *what) {
  int left = n;
  double t0 = 0;
  unsigned long polls = 0;
  while (left > 0) {
    for (int i = 0; i < n; i++) {
      if (!r[i]) continue;
      bool done = false;
      size_t size = 0;
      CHECK(nrt_async_sendrecv_test_request(r[i], &done, &size));
      if (!done) continue;
      if (size != bytes) {
        fprintf(stderr, "nrt_sendrecv %s: %s %d moved %zu bytes, not %zu\n", side_name, what, i, size, bytes);
        exit(1);
      }
      r[i] = NULL, left--;
    }
    if (wait_yield && left > 0) sched_yield();
    if ((++polls & 0xfffff) == 0) {
      if (t0 == 0) t0 = now();
      else if (now() - t0 > WAIT_TIMEOUT_S) {
        fprintf(stderr, "nrt_sendrecv %s: %s: not done after %.0f s\n", side_name, what, WAIT_TIMEOUT_S);
        exit(2);
      }
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 8 || argc > 10 || (strcmp(argv[1], "a") && strcmp(argv[1], "b")) ||
      (argc > 8 && strcmp(argv[8], "device") && strcmp(argv[8], "host")) ||
      (argc > 9 && strcmp(argv[9], "spin") && strcmp(argv[9], "yield"))) {
    fprintf(stderr, "usage: %s a|b PEER_IP BYTES LAT_ITERS LAT_WARMUP BW_BATCHES BW_WINDOW [device|host] [spin|yield]\n",
            argv[0]);
    return 2;
  }
  wait_yield = argc > 9 && !strcmp(argv[9], "yield");
  int is_a = !strcmp(argv[1], "a");
  side_name = argv[1];
  const char *peer = argv[2];
  size_t bytes = (size_t)parse_long(argv[3], "BYTES");
  long lat_iters = parse_long(argv[4], "LAT_ITERS"), lat_warmup = parse_long(argv[5], "LAT_WARMUP");
  long bw_batches = parse_long(argv[6], "BW_BATCHES");
  int window = (int)parse_long(argv[7], "BW_WINDOW");
  int device = argc < 9 || strcmp(argv[8], "host");
  int lnc = is_a ? 0 : 1, peer_lnc = is_a ? 1 : 0;
  int max_pending = 0;
  if (bytes == 0 || lat_iters < 1 || bw_batches < 1 || window < 1) {
    fprintf(stderr, "nrt_sendrecv: BYTES, LAT_ITERS, BW_BATCHES and BW_WINDOW must be positive\n");
    return 2;
  }

  double t_start = now();
  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
  CHECK(nrt_async_sendrecv_get_max_num_pending_request(&max_pending));
  if (window + 1 > max_pending) {
    fprintf(stderr, "nrt_sendrecv: BW_WINDOW %d: at most %d requests may be pending per communicator\n", window,
            max_pending - 1);
    return 2;
  }
  CHECK(nrt_async_sendrecv_init(lnc));

  /* Both directions: a send comm to the peer and a receive comm from it. */
  nrt_async_sendrecv_comm_t *tx = NULL, *rx = NULL;
  if (is_a) {
    CHECK(nrt_async_sendrecv_connect(peer, peer_lnc, lnc, &tx));
    CHECK(nrt_async_sendrecv_accept(peer, peer_lnc, lnc, &rx));
  } else {
    CHECK(nrt_async_sendrecv_accept(peer, peer_lnc, lnc, &rx));
    CHECK(nrt_async_sendrecv_connect(peer, peer_lnc, lnc, &tx));
  }
  bool tx_done = false, rx_done = false;
  while (!tx_done || !rx_done) {
    if (!tx_done) CHECK(nrt_async_sendrecv_test_comm(tx, &tx_done));
    if (!rx_done) CHECK(nrt_async_sendrecv_test_comm(rx, &rx_done));
  }
  double t_connected = now();

  /* Tensors: a send tensor and a receive tensor of `window` slots each (the latency loop uses
   * slot 0), and two small ones for the acknowledgement. */
  nrt_tensor_placement_t where = device ? NRT_TENSOR_PLACEMENT_DEVICE : NRT_TENSOR_PLACEMENT_HOST;
  size_t total = bytes * (size_t)window;
  nrt_tensor_t *send_t = NULL, *recv_t = NULL, *ack_s = NULL, *ack_r = NULL;
  CHECK(nrt_tensor_allocate(where, 0, total, "sr_send", &send_t));
  CHECK(nrt_tensor_allocate(where, 0, total, "sr_recv", &recv_t));
  CHECK(nrt_tensor_allocate(where, 0, ACK_BYTES, "sr_ack_s", &ack_s));
  CHECK(nrt_tensor_allocate(where, 0, ACK_BYTES, "sr_ack_r", &ack_r));
  unsigned char *stage = malloc(STAGE_BYTES), *want = malloc(STAGE_BYTES);
  double *rtt = calloc((size_t)lat_iters, sizeof *rtt);
  double *batch = calloc((size_t)bw_batches, sizeof *batch);
  nrt_async_sendrecv_request_t **reqs = calloc((size_t)window, sizeof *reqs);
  if (!stage || !want || !rtt || !batch || !reqs) {
    fprintf(stderr, "nrt_sendrecv %s: out of host memory\n", side_name);
    return 2;
  }
  /* a's slots carry seeds 0..W-1, b's 1000..: an echo is told from the original. */
  uint64_t my_seed = is_a ? 0 : 1000, peer_seed = is_a ? 1000 : 0;
  fill_tensor(send_t, window, bytes, my_seed, stage);
  CHECK(nrt_tensor_memset(recv_t, 0, 0, total));
  CHECK(nrt_tensor_memset(ack_s, 0, 0x5a, ACK_BYTES));
  double t_ready = now();

  /* ---- latency: ping-pong of slot 0 */
  nrt_async_sendrecv_request_t *rreq = NULL, *sreq = NULL;
  long total_pp = lat_warmup + lat_iters + 1; /* the last one is the checked one */
  if (is_a) {
    for (long i = 0; i < total_pp; i++) {
      if (i == total_pp - 1) CHECK(nrt_tensor_memset(recv_t, 0, 0, bytes));
      double t0 = now();
      CHECK(nrt_async_sendrecv_recv_tensor(recv_t, 0, bytes, rx, &rreq));
      CHECK(nrt_async_sendrecv_send_tensor(send_t, 0, bytes, tx, &sreq));
      wait_req(sreq, bytes, "ping send");
      wait_req(rreq, bytes, "pong receive");
      double t1 = now();
      if (i >= lat_warmup && i < lat_warmup + lat_iters) rtt[i - lat_warmup] = t1 - t0;
    }
  } else {
    CHECK(nrt_async_sendrecv_recv_tensor(recv_t, 0, bytes, rx, &rreq));
    for (long i = 0; i < total_pp; i++) {
      wait_req(rreq, bytes, "ping receive");
      if (i + 1 < total_pp) {
        if (i + 1 == total_pp - 1) CHECK(nrt_tensor_memset(recv_t, 0, 0, bytes)); /* not read again until then */
        CHECK(nrt_async_sendrecv_recv_tensor(recv_t, 0, bytes, rx, &rreq));
      }
      CHECK(nrt_async_sendrecv_send_tensor(send_t, 0, bytes, tx, &sreq));
      wait_req(sreq, bytes, "pong send");
    }
  }
  /* The checked ping-pong: a's receive tensor holds b's slot 0, b's holds a's slot 0. */
  CHECK(nrt_async_sendrecv_flush(lnc));
  check_tensor(recv_t, 1, bytes, peer_seed, stage, want, is_a ? "the last pong" : "the last ping");
  double t_lat = now();

  /* ---- bandwidth: a -> b, windows of `window` messages, each batch acknowledged */
  long total_b = 1 + bw_batches + 1; /* warm-up, timed, checked */
  double bw_t0 = 0, bw_t1 = 0;
  if (is_a) {
    for (long k = 0; k < total_b; k++) {
      CHECK(nrt_async_sendrecv_recv_tensor(ack_r, 0, ACK_BYTES, rx, &rreq));
      double t0 = now();
      if (k == 1) bw_t0 = t0;
      for (int w = 0; w < window; w++)
        CHECK(nrt_async_sendrecv_send_tensor(send_t, (size_t)w * bytes, bytes, tx, &reqs[w]));
      wait_all(reqs, window, bytes, "window send");
      wait_req(rreq, ACK_BYTES, "acknowledgement receive");
      double t1 = now();
      if (k >= 1 && k <= bw_batches) batch[k - 1] = t1 - t0, bw_t1 = t1;
    }
  } else {
    for (long k = 0; k < total_b; k++) {
      if (k == total_b - 1) CHECK(nrt_tensor_memset(recv_t, 0, 0, total));
      if (k == 0 || k == total_b - 1) /* else posted before the previous acknowledgement */
        for (int w = 0; w < window; w++)
          CHECK(nrt_async_sendrecv_recv_tensor(recv_t, (size_t)w * bytes, bytes, rx, &reqs[w]));
      wait_all(reqs, window, bytes, "window receive");
      if (k + 1 < total_b - 1)
        for (int w = 0; w < window; w++)
          CHECK(nrt_async_sendrecv_recv_tensor(recv_t, (size_t)w * bytes, bytes, rx, &reqs[w]));
      CHECK(nrt_async_sendrecv_send_tensor(ack_s, 0, ACK_BYTES, tx, &sreq));
      wait_req(sreq, ACK_BYTES, "acknowledgement send");
    }
    CHECK(nrt_async_sendrecv_flush(lnc));
    check_tensor(recv_t, window, bytes, peer_seed, stage, want, "the last window");
  }
  double t_bw = now();

  if (is_a) {
    qsort(rtt, (size_t)lat_iters, sizeof *rtt, cmp_double);
    double med = lat_iters % 2 ? rtt[lat_iters / 2] : (rtt[lat_iters / 2 - 1] + rtt[lat_iters / 2]) / 2;
    double sum = 0;
    for (long i = 0; i < lat_iters; i++) sum += rtt[i];
    double moved = (double)bytes * (double)window * (double)bw_batches;
    double mbs = moved / (bw_t1 - bw_t0) / 1e6;
    qsort(batch, (size_t)bw_batches, sizeof *batch, cmp_double);
    double bmed = bw_batches % 2 ? batch[bw_batches / 2] : (batch[bw_batches / 2 - 1] + batch[bw_batches / 2]) / 2;
    double bmbs = (double)bytes * window / bmed / 1e6;
    fprintf(stderr,
            "nrt_sendrecv a: %zu B (%s tensors): one-way median %.2f us (min %.2f, p90 %.2f, p99 %.2f, max %.2f, %ld iterations); "
            "a -> b %.1f MB/s (median batch %.1f MB/s; %ld batches of %d); data checked\n"
            "nrt_sendrecv a: init+connect %.3f s, fill %.3f s, latency loop %.3f s, bandwidth loop %.3f s\n",
            bytes, device ? "device" : "host", med / 2 * 1e6, rtt[0] / 2 * 1e6, quantile(rtt, lat_iters, 0.9) / 2 * 1e6,
            quantile(rtt, lat_iters, 0.99) / 2 * 1e6, rtt[lat_iters - 1] / 2 * 1e6,
            lat_iters, mbs, bmbs, bw_batches, window, t_connected - t_start, t_ready - t_connected,
            t_lat - t_ready, t_bw - t_lat);
    printf("RESULT lib=nrt bytes=%zu lat_us=%.3f lat_mean_us=%.3f lat_p90_us=%.3f lat_p99_us=%.3f lat_iters=%ld bw_mbs=%.2f bw_batch_mbs=%.2f "
           "bw_window=%d bw_batches=%ld wait=%s check=ok\n",
           bytes, med / 2 * 1e6, sum / lat_iters / 2 * 1e6, quantile(rtt, lat_iters, 0.9) / 2 * 1e6,
             quantile(rtt, lat_iters, 0.99) / 2 * 1e6, lat_iters, mbs, bmbs, window, bw_batches,
           wait_yield ? "yield" : "spin");
    fflush(stdout);
  } else {
    fprintf(stderr, "nrt_sendrecv b: %zu B: every byte of the last ping and the last window checked\n", bytes);
  }

  nrt_tensor_free(&send_t), nrt_tensor_free(&recv_t), nrt_tensor_free(&ack_s), nrt_tensor_free(&ack_r);
  free(stage), free(want), free(rtt), free(batch), free(reqs);
  CHECK(nrt_async_sendrecv_close(lnc));
  nrt_close();
  return 0;
}
