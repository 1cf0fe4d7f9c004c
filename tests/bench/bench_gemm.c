/* bench_gemm.c - the engine's matrix kernel alone (core/gemm.c), one
 * thread, against OpenBLAS's sgemm on the same shapes and against the
 * thread's FMA peak, measured in the same run: where a forward pass stays
 * under its target, this says whether the kernel itself is the limit on
 * this CPU, or what surrounds it.
 *
 *   bench_gemm [--rounds R] [--min-time S] [M,K,N ...]   (make bench-gemm)
 *
 * Each shape is C [M, N] = A [M, K] times a torch Linear weight W [N, K]
 * (C = A Wᵀ), as the projections multiply: ours on W packed once
 * (attn_gemm_pack_linear), OpenBLAS's cblas_sgemm with W transposed, one
 * OpenBLAS thread. Every kernel the CPU can run is measured (AVX-512 and
 * AVX2 where it has both), each against the FMA peak of its own vector
 * width. A round measures the peak, then each kernel and OpenBLAS, each
 * repeated for at least S seconds; figures are medians over R rounds and
 * ratios the medians of the rounds' own ratios (a shared machine's noise
 * moves whole rounds). Before timing, each kernel's C is compared with
 * OpenBLAS's (the largest difference relative to max |C| is printed).
 * Like make bench, the process re-executes itself once so that OpenBLAS
 * loads the kernel the CPU supports (OpenBLAS 0.3.21 falls back to
 * Prescott on CPUs newer than it knows).
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "fma_peak.h"
#include "gemm.h"
#include "pool.h"
#include "stats.h"

#define MAX_ROUNDS 31
#define MAX_SHAPES 16

typedef struct {
    int M, K, N;
    const char *what;
} shape;

/* The engine's products, per forward pass: the projections ([n, E] x [E,
 * 3E], the out-projection), the attention products of one head (d = 64),
 * and a 5-token request's. */
static const shape default_shapes[] = {
    {12, 128, 32, "all in L1 (22 KiB): the tile loop alone"},
    {5, 64, 192, "projections, n=5 E=64"},
    {128, 256, 768, "projections, n=128 E=256"},
    {128, 768, 2304, "projections, 128 rows of n=512 E=768"},
    {512, 768, 2304, "projections, n=512 E=768"},
    {512, 768, 768, "out-projection, n=512 E=768"},
    {2048, 1024, 3072, "projections, n=2048 E=1024"},
    {512, 64, 512, "scores Q_h K_h^T, n=512 d=64"},
    {512, 512, 64, "P V_h, n=512 d=64"},
};

static float *alloc_floats(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        exit(1);
    }
    return p;
}

static void fill(float *p, size_t n, unsigned *seed) {
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

typedef struct {
    const shape *s;
    const float *A, *W, *Wp;
    float *C;
} job;

static void run_ours(const job *j) {
    attn_gemm(j->s->M, j->s->N, j->s->K, j->A, j->s->K, j->Wp, j->C, j->s->N);
}

static void run_blas(const job *j) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->s->M, j->s->N, j->s->K, 1.0f, j->A,
                j->s->K, j->W, j->s->K, 0.0f, j->C, j->s->N);
}

/* GFLOPS of fn repeated for at least min_s seconds (at least 3 calls; the
 * first call, which brings the operands into cache, is not timed). */
static double rate(void (*fn)(const job *), const job *j, double min_s) {
    const double flops = 2.0 * j->s->M * (double)j->s->N * j->s->K;
    fn(j);
    long calls = 0;
    double t0 = bench_now_s(), t;
    do {
        fn(j);
        calls++;
        t = bench_now_s() - t0;
    } while (t < min_s || calls < 3);
    return flops * (double)calls / t * 1e-9;
}

static int parse_shape(const char *a, shape *s) {
    char tail;
    if (sscanf(a, "%d,%d,%d%c", &s->M, &s->K, &s->N, &tail) != 3) return -1;
    if (s->M < 1 || s->K < 1 || s->N < 1 || s->M > 65536 || s->K > 65536 || s->N > 65536) return -1;
    s->what = "given";
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench_gemm [--rounds R] [--min-time S] [M,K,N ...]\n"
               "  C [M,N] = A [M,K] x W[N,K]^T, one thread: the engine's kernels against\n"
               "  OpenBLAS's sgemm and the thread's FMA peak (defaults: 7 rounds, 0.05 s)\n");
}

int main(int argc, char **argv) {
    attn_blas_reexec_if_needed(argv);
    int rounds = 7;
    double min_s = 0.05;
    shape shapes[MAX_SHAPES];
    int nshapes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) {
            min_s = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (nshapes < MAX_SHAPES && parse_shape(argv[i], &shapes[nshapes]) == 0) {
            nshapes++;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || !(min_s > 0 && min_s < 60)) {
        fprintf(stderr, "bench_gemm: --rounds 1..%d, --min-time over 0 and under 60\n", MAX_ROUNDS);
        return 2;
    }
    if (!nshapes) {
        nshapes = (int)(sizeof default_shapes / sizeof *default_shapes);
        memcpy(shapes, default_shapes, sizeof default_shapes);
    }

    char err[ATTN_ERRLEN];
    attn_blas_info info;
    if (attn_blas_init(&info, err, sizeof err)) {
        fprintf(stderr, "bench_gemm: BLAS: %s\n", err);
        return 1;
    }
    attn_pool *pool;
    if (attn_pool_create(1, &pool, err, sizeof err)) {
        fprintf(stderr, "bench_gemm: %s\n", err);
        return 1;
    }
    /* the kernels this CPU runs, widest first, each with its peak's ISA */
    const char *kernels[2], *isas[2];
    int nk = 0;
    const char *chosen = attn_gemm_kernel();
    if (attn_gemm_use("avx512")) kernels[nk] = "avx512", isas[nk++] = NULL;
    if (attn_gemm_use("avx2")) kernels[nk] = "avx2", isas[nk++] = "AVX2";
    if (!nk) {
        printf("bench_gemm: this CPU has neither AVX-512 nor AVX2+FMA: the engine multiplies on "
               "OpenBLAS alone, nothing to compare\n");
        attn_pool_destroy(pool);
        return 0;
    }

    /* OpenBLAS's rate against the peak of its kernel's vector width: AVX2
     * for its Haswell and Zen kernels, else the widest the CPU has */
    const char *blas_isa = attn_blas_should_switch(info.corename, "SkylakeX") &&
                                   !attn_blas_should_switch(info.corename, "Haswell")
                               ? "AVX2"
                               : NULL;
    char cpu[128];
    fma_cpu_name(cpu, sizeof cpu);
    printf("## The engine's matrix kernel alone, one thread\n\n");
    printf("CPU: %s; OpenBLAS %s kernel (%s), 1 thread; the engine's kernel by default: %s.\n", cpu,
           info.corename, info.reason, chosen);
    printf("C [M,N] = A [M,K] x W [N,K]^T. Each round: the thread's FMA peak (independent FMA "
           "chains, no memory), then each side repeated for >= %g s; %d rounds, medians; ratios "
           "are medians of the rounds' own.\n\n",
           min_s, rounds);
    printf("| M | K | N | product | kernel | ours GFLOPS | %% of peak | OpenBLAS GFLOPS | %% of "
           "peak | ours / OpenBLAS | FMA peak GFLOPS | max rel diff |\n");
    printf("|---:|---:|---:|:---|:---|---:|---:|---:|---:|---:|---:|---:|\n");

    unsigned seed = 12345;
    for (int si = 0; si < nshapes; si++) {
        const shape *s = &shapes[si];
        size_t na = (size_t)s->M * (size_t)s->K, nw = (size_t)s->N * (size_t)s->K,
               nc = (size_t)s->M * (size_t)s->N;
        float *A = alloc_floats(na), *W = alloc_floats(nw), *C = alloc_floats(nc),
              *Cref = alloc_floats(nc);
        fill(A, na, &seed);
        fill(W, nw, &seed);
        job jb = {s, A, W, NULL, Cref};
        run_blas(&jb);
        double cmax = 0;
        for (size_t i = 0; i < nc; i++) cmax = fmax(cmax, fabs(Cref[i]));
        for (int k = 0; k < nk; k++) {
            attn_gemm_use(kernels[k]);
            size_t nf = attn_gemm_packed_floats(s->K, s->N);
            float *Wp = alloc_floats(nf);
            attn_gemm_pack_linear(Wp, s->K, s->N, 0, W, s->N);
            job j = {s, A, W, Wp, C};
            run_ours(&j);
            double diff = 0;
            for (size_t i = 0; i < nc; i++) diff = fmax(diff, fabs((double)C[i] - Cref[i]));
            double ours[MAX_ROUNDS], blas[MAX_ROUNDS], peak[MAX_ROUNDS], ratio[MAX_ROUNDS];
            double po[MAX_ROUNDS], pb[MAX_ROUNDS];
            for (int r = 0; r < rounds; r++) {
                /* OpenBLAS's kernel may be wider or narrower than this one */
                peak[r] = fma_peak_measure(pool, isas[k], 0.02, 3).gflops;
                const double bpeak = (blas_isa != NULL) == (isas[k] != NULL)
                                         ? peak[r]
                                         : fma_peak_measure(pool, blas_isa, 0.02, 3).gflops;
                ours[r] = rate(run_ours, &j, min_s);
                blas[r] = rate(run_blas, &j, min_s);
                ratio[r] = ours[r] / blas[r];
                po[r] = 100.0 * ours[r] / peak[r];
                pb[r] = 100.0 * blas[r] / bpeak;
            }
            printf("| %d | %d | %d | %s | %s | %.1f | %.0f%% | %.1f | %.0f%% | %.2fx | %.0f | "
                   "%.1e |\n",
                   s->M, s->K, s->N, s->what, kernels[k], bench_median(ours, rounds),
                   bench_median(po, rounds), bench_median(blas, rounds), bench_median(pb, rounds),
                   bench_median(ratio, rounds), bench_median(peak, rounds),
                   cmax > 0 ? diff / cmax : diff);
            fflush(stdout);
            free(Wp);
        }
        free(A);
        free(W);
        free(C);
        free(Cref);
    }
    attn_gemm_use(chosen);
    printf("\n%% of peak: each side's rate over the FMA peak of its round, median over the "
           "rounds: ours against the peak of its kernel's vector width (the column FMA peak; "
           "AVX2 rows: the AVX2 peak), OpenBLAS against the peak of its kernel's width (AVX2 for "
           "Haswell and Zen). What an AVX2-only CPU runs: `OPENBLAS_CORETYPE=Haswell make "
           "bench-gemm`, AVX2 rows.\n");
    attn_pool_destroy(pool);
    return 0;
}
