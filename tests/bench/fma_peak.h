/* fma_peak.h - the physical limit of this machine's float32 arithmetic: the
 * rate of fused multiply-adds that independent vector FMA chains reach on
 * each thread of a pool, with the widest vectors the CPU has (AVX-512, else
 * AVX2+FMA, else none measured).
 *
 * Each worker runs FMA_CHAINS independent accumulator chains, enough to
 * cover the FMA latency (4 cycles) times the FMA ports (2) of the CPUs this
 * runs on, with no loads or stores in the loop: nothing a real kernel does
 * can go faster on these cores. One FMA on a vector of L floats counts as
 * 2L floating-point operations, as GEMM FLOPs count.
 *
 *     fma_peak p = fma_peak_measure(pool, 0.02, 5);
 *     printf("%s: %.0f GFLOPS\n", p.isa, p.gflops);
 *
 * Header-only, for the benchmarks (tests/bench/); static functions.
 */
#ifndef ATTN_FMA_PEAK_H
#define ATTN_FMA_PEAK_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pool.h"

#define FMA_CHAINS 12

typedef struct fma_peak {
    const char *isa; /* "AVX-512", "AVX2" or "none" */
    int lanes;       /* floats per vector: 16, 8, or 0 */
    double gflops;   /* the best rate of the pool's threads together, GFLOPS */
} fma_peak;

/* Each kernel: iters rounds of FMA_CHAINS vector FMAs on accumulators the
 * compiler keeps in registers (named variables, not an array: an array is
 * kept in memory at -O2, and the loop then measures store forwarding);
 * returns a value that depends on every chain so none is dropped. */
#define FMA_DECL(T, set1)                                                                  \
    T c0 = set1(0.f), c1 = set1(1.f), c2 = set1(2.f), c3 = set1(3.f), c4 = set1(4.f),       \
      c5 = set1(5.f), c6 = set1(6.f), c7 = set1(7.f), c8 = set1(8.f), c9 = set1(9.f),       \
      c10 = set1(10.f), c11 = set1(11.f)
#define FMA_ROUND(fma)                                                                     \
    c0 = fma(c0, a, b), c1 = fma(c1, a, b), c2 = fma(c2, a, b), c3 = fma(c3, a, b),         \
    c4 = fma(c4, a, b), c5 = fma(c5, a, b), c6 = fma(c6, a, b), c7 = fma(c7, a, b),         \
    c8 = fma(c8, a, b), c9 = fma(c9, a, b), c10 = fma(c10, a, b), c11 = fma(c11, a, b)
#define FMA_SUM(add) \
    add(add(add(add(c0, c1), add(c2, c3)), add(add(c4, c5), add(c6, c7))), add(add(c8, c9), add(c10, c11)))

__attribute__((target("avx512f"))) static float fma_kernel_avx512(long iters) {
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    FMA_DECL(__m512, _mm512_set1_ps);
    for (long i = 0; i < iters; i++) FMA_ROUND(_mm512_fmadd_ps);
    return _mm512_reduce_add_ps(FMA_SUM(_mm512_add_ps));
}

__attribute__((target("avx2,fma"))) static float fma_kernel_avx2(long iters) {
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    FMA_DECL(__m256, _mm256_set1_ps);
    for (long i = 0; i < iters; i++) FMA_ROUND(_mm256_fmadd_ps);
    float v[8];
    _mm256_storeu_ps(v, FMA_SUM(_mm256_add_ps));
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

typedef struct {
    int lanes;
    long iters;
    volatile float sink[64]; /* one slot per worker, results kept */
} fma_task_ctx;

static void fma_task(void *ctx, size_t i, int worker) {
    fma_task_ctx *f = ctx;
    (void)worker;
    float r = f->lanes == 16 ? fma_kernel_avx512(f->iters) : fma_kernel_avx2(f->iters);
    f->sink[i % 64] = r;
}

static double fma_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The widest FMA the CPU has, forced to AVX2 with isa "AVX2" (for a CPU
 * that has both, to compare with kernels that use only AVX2). */
static int fma_lanes(const char *isa) {
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa && !strcmp(isa, "AVX2")) return avx2 ? 8 : 0;
    if (__builtin_cpu_supports("avx512f")) return 16;
    return avx2 ? 8 : 0;
}

/* One task per pool thread, each about `seconds` of FMAs; the best of
 * `tries` rounds (noise on a shared machine only ever slows a round down).
 * isa NULL: the widest vectors; "AVX2": AVX2 even where AVX-512 exists. */
static fma_peak fma_peak_measure(attn_pool *pool, const char *isa, double seconds, int tries) {
    fma_peak p = {"none", 0, 0.0};
    int lanes = fma_lanes(isa);
    if (!lanes) return p;
    p.isa = lanes == 16 ? "AVX-512" : "AVX2";
    p.lanes = lanes;
    int threads = attn_pool_size(pool);
    fma_task_ctx ctx = {.lanes = lanes, .iters = 1000};
    /* size the rounds from a short calibration on the calling thread */
    double t0 = fma_now();
    ctx.sink[0] = lanes == 16 ? fma_kernel_avx512(ctx.iters) : fma_kernel_avx2(ctx.iters);
    double once = fma_now() - t0;
    if (once > 0) ctx.iters = (long)(ctx.iters * seconds / once) + 1;
    for (int t = 0; t < tries; t++) {
        t0 = fma_now();
        attn_pool_run(pool, (size_t)threads, fma_task, &ctx);
        double dt = fma_now() - t0;
        double g = 2.0 * lanes * FMA_CHAINS * (double)ctx.iters * threads / dt * 1e-9;
        if (g > p.gflops) p.gflops = g;
    }
    return p;
}

/* The CPU's model name from /proc/cpuinfo into out ("unknown" if none). */
static void fma_cpu_name(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = '\0';
        snprintf(out, n, "%s", c);
        break;
    }
    fclose(f);
}

#endif
