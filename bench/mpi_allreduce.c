/* Open MPI side of bench/vs-openmpi.sh: MPI_Allreduce, fp32 sum, out of place.
 *
 *   mpirun -np R mpi_allreduce <bytes> <iters> [warmup]
 *
 * Every rank fills its input with small integers ((rank + j) % 7 + 1, so every partial sum is
 * exact in fp32), runs `warmup` untimed calls, then `iters` timed calls split into batches:
 * MPI_Barrier, then a batch of back-to-back MPI_Allreduce calls timed on rank 0 (MPI_Wtime).
 * Rank 0 prints the median over the batches of the time per call, and the mean over all timed
 * calls, as one machine-readable line on stdout:
 *
 *   RESULT lib=mpi ranks=R bytes=B iters=N time_us=<median> mean_us=<mean> busbw_gbs=<...>
 *          p99_us=<p99 of single calls>
 *
 * p99_us: rank 0 also reads MPI_Wtime after every call of a batch (one clock read per call,
 * tens of nanoseconds; the batch's time is the last read minus the first, as before), so each
 * timed call has its own time: from the return of the previous call (or the batch's start) to
 * its own return, as rank 0 sees it. p99_us is the nearest-rank 99th percentile of those N
 * single-call times (the ceil(0.99 N)-th smallest; N <= 100: the slowest), the same statistic
 * nrt_allreduce prints. Calls follow each other back to back, so a call that waits for a late
 * rank shows in its own time, and the next one may look faster; time_us stays the median over
 * batches of the mean per call.
 *
 * busbw = bytes / time * 2 (R - 1) / R (nccl-tests' all-reduce factor; GB = 1e9 bytes).
 * After the timed loop every rank checks every output element once against the exact sum;
 * a wrong element makes the exit status 1. Human-readable text goes to stderr. */
#include <mpi.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

#define MAX_BATCHES 20

static long parse_long(const char *s, const char *what) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || *end || v < 0) {
    fprintf(stderr, "mpi_allreduce: bad %s '%s'\n", what, s);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  int rank = 0, nranks = 1, bad = 0, any_bad = 0;
  long bytes, iters, warmup = 10, count, done = 0, nb, b, j, i;
  float *in, *out;
  double batch_us[MAX_BATCHES], total = 0, *call_us;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc < 3 || argc > 4) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np R %s <bytes> <iters> [warmup]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  bytes = parse_long(argv[1], "bytes");
  iters = parse_long(argv[2], "iters");
  if (argc > 3) warmup = parse_long(argv[3], "warmup");
  if (bytes <= 0 || bytes % 4 || iters <= 0 || bytes / 4 > 0x7fffffffL) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce: bytes must be a positive multiple of 4 (< 8 GiB), iters > 0\n");
    MPI_Finalize();
    return 2;
  }
  count = bytes / 4;
  in = malloc((size_t)bytes);
  out = malloc((size_t)bytes);
  call_us = malloc((size_t)iters * sizeof *call_us);
  if (!in || !out || !call_us) {
    fprintf(stderr, "mpi_allreduce: rank %d: out of memory for 2 x %ld bytes\n", rank, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (j = 0; j < count; j++) in[j] = (float)((rank + j) % 7 + 1), out[j] = -1.0f;

  for (i = 0; i < warmup; i++) MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

  /* Batches: up to MAX_BATCHES, each of at least one call. */
  nb = iters < MAX_BATCHES ? iters : MAX_BATCHES;
  for (b = 0; b < nb; b++) {
    long n = iters / nb + (b < iters % nb ? 1 : 0);
    double t0, t1, t;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = t1 = MPI_Wtime();
    for (i = 0; i < n; i++) {
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t = MPI_Wtime();
      call_us[done + i] = (t - t1) * 1e6;
      t1 = t;
    }
    batch_us[b] = (t1 - t0) * 1e6 / (double)n;
    total += (t1 - t0) * 1e6;
    done += n;
  }

  /* Exact check, once: element j is the sum over ranks s of (s + j) % 7 + 1. */
  for (j = 0; j < count && bad < 5; j++) {
    long want = 0;
    for (int s = 0; s < nranks; s++) want += (s + j) % 7 + 1;
    if (out[j] != (float)want) {
      fprintf(stderr, "mpi_allreduce: rank %d: element %ld is %g, want %ld\n", rank, j, (double)out[j], want);
      bad++;
    }
  }
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

  if (rank == 0) {
    double med, mean = total / (double)done, busbw, p99;
    qsort(batch_us, (size_t)nb, sizeof batch_us[0], cmp_double);
    med = nb % 2 ? batch_us[nb / 2] : (batch_us[nb / 2 - 1] + batch_us[nb / 2]) / 2;
    qsort(call_us, (size_t)done, sizeof call_us[0], cmp_double);
    p99 = percentile_sorted(call_us, done, 99.0);
    busbw = (double)bytes / (med * 1e-6) * 2.0 * (nranks - 1) / nranks / 1e9;
    fprintf(stderr, "mpi_allreduce: %d ranks, %ld B fp32 sum: median %.2f us (of %ld batches), mean %.2f us over %ld calls, "
                    "single calls p99 %.2f us (max %.2f), busbw %.3f GB/s, %s\n",
            nranks, bytes, med, nb, mean, done, p99, call_us[done - 1], busbw, any_bad ? "WRONG RESULT" : "result exact");
    if (!any_bad)
      printf("RESULT lib=mpi ranks=%d bytes=%ld iters=%ld time_us=%.3f mean_us=%.3f busbw_gbs=%.4f p99_us=%.3f\n", nranks,
             bytes, done, med, mean, busbw, p99);
    fflush(stdout);
  }
  free(in);
  free(out);
  free(call_us);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
