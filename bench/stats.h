/* The statistics the bench programs share (bench/nrt_allreduce.c, bench/mpi_allreduce.c):
 * sorting doubles and the nearest-rank percentile. Header-only, so each program stays one
 * compiler invocation. */
#ifndef OPENNRT_BENCH_STATS_H
#define OPENNRT_BENCH_STATS_H

#include <stdlib.h>

/* qsort comparator for doubles, ascending. */
static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile (0 < pct <= 100) of v, sorted ascending: the ceil(pct N / 100)-th
 * smallest value. */
static inline double percentile_sorted(const double *v, long n, double pct) {
  long k = (long)((double)n * pct / 100.0);
  if ((double)k < (double)n * pct / 100.0) k++; /* ceil without libm */
  if (k < 1) k = 1;
  if (k > n) k = n;
  return v[k - 1];
}

#endif
