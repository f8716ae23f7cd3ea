/* Open MPI side of bench/sendrecv.sh: the measurements of bench/nrt_sendrecv.c with MPI
 * point-to-point calls between ranks 0 and 1.
 *
 *   mpirun -np 2 mpi_pingpong BYTES LAT_ITERS LAT_WARMUP BW_BATCHES BW_WINDOW
 *
 * Latency: LAT_WARMUP + LAT_ITERS ping-pongs of BYTES bytes with MPI_Send / MPI_Recv (rank 0
 * sends, rank 1 receives and sends the same size back; osu_latency's loop). Rank 0 times
 * every round trip (MPI_Wtime); one-way latency = round trip / 2, the median over the timed
 * iterations.
 *
 * Bandwidth: one direction, rank 0 -> rank 1. Per batch rank 1 has BW_WINDOW MPI_Irecv posted
 * (each into its own slot), rank 0 posts BW_WINDOW MPI_Isend back to back, MPI_Waitall, then
 * waits for rank 1's 64-byte acknowledgement (MPI_Recv), which rank 1 sends after its
 * MPI_Waitall and after posting the next batch's receives (osu_bw's loop, with the
 * acknowledgement every window). One untimed batch, then BW_BATCHES timed ones; MB/s = bytes
 * moved / rank 0's time from the first timed batch to the last acknowledgement (MB = 1e6).
 *
 * Check: after the timed loops the receiving side zeroes its buffer, one more ping-pong and
 * one more batch move, and every byte that arrived is compared with the sender's pattern (the
 * pattern of bench/nrt_sendrecv.c); a wrong byte or count fails the run (exit status 1).
 *
 * Rank 0 prints, on stdout:
 *   RESULT lib=mpi bytes=B lat_us=<median one-way> lat_mean_us=<mean one-way> lat_p90_us=<90th
 *          percentile> lat_p99_us=<99th> lat_iters=N
 *          bw_mbs=<MB/s> bw_batch_mbs=<median of the batches> bw_window=W bw_batches=M
 *          check=ok
 * Human-readable text goes to stderr. */
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACK_BYTES 64

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
    fprintf(stderr, "mpi_pingpong: bad %s '%s'\n", what, s);
    exit(2);
  }
  return v;
}

/* bench/nrt_sendrecv.c's pattern: word i of slot `seed` is a hash of (seed, i). */
static uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  return x;
}
static unsigned char pattern_byte(uint64_t seed, uint64_t k) {
  return (unsigned char)(pattern_word(seed, k / 8) >> (8 * (k % 8)));
}
static void fill_slot(unsigned char *buf, uint64_t seed, size_t n) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    uint64_t w = pattern_word(seed, j / 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(buf + j, &w, 8);
#else
    for (int b = 0; b < 8; b++) buf[j + b] = (unsigned char)(w >> (8 * b));
#endif
  }
  for (; j < n; j++) buf[j] = pattern_byte(seed, j);
}
static int check_slot(const unsigned char *buf, uint64_t seed, size_t n, int rank, const char *what, int slot) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8) { /* fast path: a word at a time */
    uint64_t w = pattern_word(seed, j / 8), got = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&got, buf + j, 8);
#else
    for (int b = 0; b < 8; b++) got |= (uint64_t)buf[j + b] << (8 * b);
#endif
    if (got != w) break;
  }
  for (; j < n; j++)
    if (buf[j] != pattern_byte(seed, j)) {
      fprintf(stderr, "mpi_pingpong: rank %d: WRONG DATA: %s, slot %d byte %zu is %u, not %u\n", rank, what, slot, j,
              buf[j], pattern_byte(seed, j));
      return 1;
    }
  return 0;
}

static void expect_count(MPI_Status *st, long bytes, const char *what) {
  int n = -1;
  MPI_Get_count(st, MPI_BYTE, &n);
  if (n != bytes) {
    fprintf(stderr, "mpi_pingpong: %s moved %d bytes, not %ld\n", what, n, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int main(int argc, char **argv) {
  int rank = 0, nranks = 0, bad = 0, any_bad = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc != 6 || nranks != 2) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 %s BYTES LAT_ITERS LAT_WARMUP BW_BATCHES BW_WINDOW\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  long bytes = parse_long(argv[1], "BYTES"), lat_iters = parse_long(argv[2], "LAT_ITERS");
  long lat_warmup = parse_long(argv[3], "LAT_WARMUP"), bw_batches = parse_long(argv[4], "BW_BATCHES");
  int window = (int)parse_long(argv[5], "BW_WINDOW");
  if (bytes <= 0 || bytes > 0x7fffffffL || lat_iters < 1 || bw_batches < 1 || window < 1) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: BYTES (< 2 GiB), LAT_ITERS, BW_BATCHES and BW_WINDOW must be positive\n");
    MPI_Finalize();
    return 2;
  }
  int peer = 1 - rank;
  size_t total = (size_t)bytes * (size_t)window;
  unsigned char *sbuf = malloc(total), *rbuf = malloc(total);
  unsigned char ack_s[ACK_BYTES], ack_r[ACK_BYTES];
  double *rtt = calloc((size_t)lat_iters, sizeof *rtt), *batch = calloc((size_t)bw_batches, sizeof *batch);
  MPI_Request *reqs = calloc((size_t)window, sizeof *reqs);
  MPI_Status *sts = calloc((size_t)window, sizeof *sts);
  if (!sbuf || !rbuf || !rtt || !batch || !reqs || !sts) {
    fprintf(stderr, "mpi_pingpong: rank %d: out of memory for 2 x %zu bytes\n", rank, total);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  uint64_t my_seed = rank == 0 ? 0 : 1000, peer_seed = rank == 0 ? 1000 : 0;
  for (int w = 0; w < window; w++) fill_slot(sbuf + (size_t)w * bytes, my_seed + (uint64_t)w, (size_t)bytes);
  memset(rbuf, 0, total);
  memset(ack_s, 0x5a, sizeof ack_s);
  MPI_Status st;
  MPI_Barrier(MPI_COMM_WORLD);

  /* ---- latency */
  long total_pp = lat_warmup + lat_iters + 1; /* the last one is the checked one */
  for (long i = 0; i < total_pp; i++) {
    if (i == total_pp - 1) memset(rbuf, 0, (size_t)bytes);
    if (rank == 0) {
      double t0 = MPI_Wtime();
      MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
      double t1 = MPI_Wtime();
      if (i >= lat_warmup && i < lat_warmup + lat_iters) rtt[i - lat_warmup] = t1 - t0;
    } else {
      MPI_Recv(rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
      MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    }
    expect_count(&st, bytes, "a ping-pong receive");
  }
  bad |= check_slot(rbuf, peer_seed, (size_t)bytes, rank, rank == 0 ? "the last pong" : "the last ping", 0);

  /* ---- bandwidth: rank 0 -> rank 1 */
  long total_b = 1 + bw_batches + 1; /* warm-up, timed, checked */
  double bw_t0 = 0, bw_t1 = 0;
  if (rank == 0) {
    for (long k = 0; k < total_b; k++) {
      double t0 = MPI_Wtime();
      if (k == 1) bw_t0 = t0;
      for (int w = 0; w < window; w++)
        MPI_Isend(sbuf + (size_t)w * bytes, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
      MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
      MPI_Recv(ack_r, ACK_BYTES, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &st);
      double t1 = MPI_Wtime();
      if (k >= 1 && k <= bw_batches) batch[k - 1] = t1 - t0, bw_t1 = t1;
    }
  } else {
    for (long k = 0; k < total_b; k++) {
      if (k == total_b - 1) memset(rbuf, 0, total);
      if (k == 0 || k == total_b - 1)
        for (int w = 0; w < window; w++)
          MPI_Irecv(rbuf + (size_t)w * bytes, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
      MPI_Waitall(window, reqs, sts);
      for (int w = 0; w < window; w++) expect_count(&sts[w], bytes, "a window receive");
      if (k + 1 < total_b - 1)
        for (int w = 0; w < window; w++)
          MPI_Irecv(rbuf + (size_t)w * bytes, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
      MPI_Send(ack_s, ACK_BYTES, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
    }
    for (int w = 0; w < window && !bad; w++)
      bad |= check_slot(rbuf + (size_t)w * bytes, peer_seed + (uint64_t)w, (size_t)bytes, rank, "the last window", w);
  }
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

  if (rank == 0) {
    qsort(rtt, (size_t)lat_iters, sizeof *rtt, cmp_double);
    double med = lat_iters % 2 ? rtt[lat_iters / 2] : (rtt[lat_iters / 2 - 1] + rtt[lat_iters / 2]) / 2;
    double sum = 0;
    for (long i = 0; i < lat_iters; i++) sum += rtt[i];
    double mbs = (double)bytes * window * (double)bw_batches / (bw_t1 - bw_t0) / 1e6;
    qsort(batch, (size_t)bw_batches, sizeof *batch, cmp_double);
    double bmed = bw_batches % 2 ? batch[bw_batches / 2] : (batch[bw_batches / 2 - 1] + batch[bw_batches / 2]) / 2;
    double bmbs = (double)bytes * window / bmed / 1e6;
    fprintf(stderr,
            "mpi_pingpong: %ld B: one-way median %.2f us (min %.2f, p90 %.2f, p99 %.2f, max %.2f, %ld iterations); 0 -> 1 %.1f MB/s "
            "(median batch %.1f MB/s; %ld batches of %d); %s\n",
            bytes, med / 2 * 1e6, rtt[0] / 2 * 1e6, quantile(rtt, lat_iters, 0.9) / 2 * 1e6,
            quantile(rtt, lat_iters, 0.99) / 2 * 1e6, rtt[lat_iters - 1] / 2 * 1e6, lat_iters, mbs, bmbs, bw_batches,
            window, any_bad ? "WRONG DATA" : "data checked");
    if (!any_bad)
      printf("RESULT lib=mpi bytes=%ld lat_us=%.3f lat_mean_us=%.3f lat_p90_us=%.3f lat_p99_us=%.3f lat_iters=%ld bw_mbs=%.2f bw_batch_mbs=%.2f "
             "bw_window=%d bw_batches=%ld check=ok\n",
             bytes, med / 2 * 1e6, sum / lat_iters / 2 * 1e6, quantile(rtt, lat_iters, 0.9) / 2 * 1e6,
             quantile(rtt, lat_iters, 0.99) / 2 * 1e6, lat_iters, mbs, bmbs, window, bw_batches);
    fflush(stdout);
  }
  free(sbuf), free(rbuf), free(rtt), free(batch), free(reqs), free(sts);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
