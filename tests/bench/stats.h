/* stats.h - the benchmarks' wall clock and median, header-only.
 *
 *     double t0 = bench_now_s();           monotonic, seconds
 *     double m = bench_median(v, n);       sorts v[0..n) in place
 */
#ifndef ATTN_BENCH_STATS_H
#define ATTN_BENCH_STATS_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (n >= 1), sorting v. */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
