/* blas.c - choosing, configuring and verifying the BLAS the engine runs on.
 *
 * Three parts, in the order a program meets them:
 *   1. what the CPU supports (cpuid + xgetbv) and how OpenBLAS kernels rank;
 *   2. the re-exec that makes OpenBLAS load the kernel the CPU deserves
 *      (OPENBLAS_CORETYPE is read only when the library loads, so the only
 *      way to change the kernel of a running process is to start it again);
 *   3. attn_blas_init: one OpenBLAS thread, the facts for the log, and an
 *      sgemm self-test against plain double loops.
 */
#include "blas.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* Exported by OpenBLAS itself. cblas.h declares them too when it is
 * OpenBLAS's, but the cblas.h alternative may be netlib's, so say it here. */
char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

/* ------------------------------------------------- CPU and kernel ranking */

#if defined(__x86_64__) || defined(__i386__)
/* XCR0: which register states the OS saves on a context switch. Without
 * the OS's consent AVX/AVX-512 instructions fault even if cpuid lists them. */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

const char *attn_blas_cpu_best(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return "";
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
    if (!osxsave || !avx) return "";
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return ""; /* XMM and YMM state */
    int avx2 = 0, avx512 = 0;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        avx2 = (b >> 5) & 1;
        int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
        /* opmask, upper ZMM0-15 and ZMM16-31 state */
        avx512 = f && dq && bw && vl && (xcr0 & 0xE0) == 0xE0;
    }
    if (avx512 && avx2 && fma) return "SkylakeX";
    if (avx2 && fma) return "Haswell";
    return "Sandybridge";
#else
    return "";
#endif
}

/* Rank by the vector unit the kernel's sgemm is written for. 0 = unknown. */
static const struct {
    const char *name;
    int rank;
} kernel_ranks[] = {
    {"Katmai", 1},       {"Coppermine", 1},     {"Northwood", 1},  {"Prescott", 1},
    {"Banias", 1},       {"Atom", 1},           {"Core2", 1},      {"Penryn", 1},
    {"Dunnington", 1},   {"Nehalem", 1},        {"Athlon", 1},     {"Opteron", 1},
    {"Opteron_SSE3", 1}, {"Barcelona", 1},      {"Nano", 1},       {"Bobcat", 1},
    {"Sandybridge", 2},  {"Bulldozer", 2},      {"Piledriver", 2}, {"Steamroller", 2},
    {"Excavator", 2},    {"Haswell", 3},        {"Zen", 3},        {"SkylakeX", 4},
    {"Cooperlake", 4},   {"SapphireRapids", 4},
};

static int kernel_rank(const char *name) {
    if (!name) return 0;
    for (size_t i = 0; i < sizeof kernel_ranks / sizeof kernel_ranks[0]; i++)
        if (strcasecmp(name, kernel_ranks[i].name) == 0) return kernel_ranks[i].rank;
    return 0;
}

int attn_blas_should_switch(const char *loaded, const char *best) {
    int rl = kernel_rank(loaded), rb = kernel_rank(best);
    return rl > 0 && rb > 0 && rl < rb;
}

/* ----------------------------------------------------------------- re-exec */

/* Why a wanted re-exec did not happen, for attn_blas_init's reason. Written
 * only before threads start (the re-exec is the first thing main does). */
static char reexec_failure[160];

/* Exec this program again with argv. The path comes from readlink rather
 * than exec'ing "/proc/self/exe" itself: under valgrind the latter names
 * valgrind's tool binary, which refuses to start, while readlink is
 * answered with the program's own path. Returns only on failure. */
static void exec_self(char **argv) {
    char path[4096];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    fflush(NULL);
    if (len > 0) {
        path[len] = 0;
        if (!strstr(path, " (deleted)")) execv(path, argv);
    }
    execv("/proc/self/exe", argv);
}

int attn_blas_reexec_as(char **argv, const char *loaded, const char *best) {
    if (getenv("OPENBLAS_CORETYPE")) return 0; /* the user wins, or we already did */
    if (getenv("ATTN_BLAS_REEXEC")) return 0;  /* never loop */
    if (!argv || !argv[0] || !attn_blas_should_switch(loaded, best)) return 0;
    const char *config = openblas_get_config();
    if (!config || !strstr(config, "DYNAMIC_ARCH")) return 0; /* one kernel built in */

    char note[96];
    snprintf(note, sizeof note, "%s -> %s", loaded, best);
    if (setenv("OPENBLAS_CORETYPE", best, 1) || setenv("ATTN_BLAS_REEXEC", note, 1)) {
        int e = errno;
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv("ATTN_BLAS_REEXEC");
        snprintf(reexec_failure, sizeof reexec_failure,
                 "chosen by OpenBLAS; switching to %s failed: setenv: %s", best, strerror(e));
        return -1;
    }
    exec_self(argv);
    int e = errno;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("ATTN_BLAS_REEXEC");
    snprintf(reexec_failure, sizeof reexec_failure,
             "chosen by OpenBLAS; re-exec to switch to %s failed: %s", best, strerror(e));
    return -1;
}

void attn_blas_reexec_if_needed(char **argv) {
    /* OpenBLAS starts its own thread team when it loads, sized by
     * OPENBLAS_NUM_THREADS; the engine's pool owns the cores, so ask for one
     * thread before the (re-)exec: the team is then never created. A user's
     * explicit setting is left alone (attn_blas_init still sets 1). */
    bool pin_threads = !getenv("OPENBLAS_NUM_THREADS") && argv && argv[0];
    if (pin_threads) setenv("OPENBLAS_NUM_THREADS", "1", 1);
    if (!getenv("OPENBLAS_CORETYPE") && !getenv("ATTN_BLAS_REEXEC") &&
        attn_blas_reexec_as(argv, openblas_get_corename(), attn_blas_cpu_best()) != 0)
        return;        /* tried to switch kernels and failed: run as we are */
    if (pin_threads) { /* no kernel switch needed: exec once for the thread setting */
        exec_self(argv);
        unsetenv("OPENBLAS_NUM_THREADS"); /* exec failed: the pool still sets 1 at init */
    }
}

/* --------------------------------------------------------------- self-test */

/* One sgemm call as the engine makes them, row-major throughout:
 *   C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C
 * pad_* widen the leading dimensions beyond the logical width, as the
 * engine's head slices of a [n,3E] QKV buffer do. */
typedef struct {
    const char *what;
    int ta, tb; /* 1 = Trans */
    int M, N, K;
    int pad_a, pad_b, pad_c;
    float alpha, beta;
} selftest_case;

static const selftest_case selftest_cases[] = {
    {"1x1x1", 0, 0, 1, 1, 1, 0, 0, 0, 1.0f, 0.0f},
    {"1x1x1 strided", 0, 1, 1, 1, 1, 3, 2, 5, -0.5f, 2.0f},
    {"projection x W^T + bias", 0, 1, 5, 192, 64, 0, 0, 0, 1.0f, 1.0f},
    {"odd", 0, 0, 17, 33, 65, 5, 7, 3, 1.25f, 0.5f},
    {"odd", 0, 1, 17, 33, 65, 1, 0, 2, 1.0f, 0.0f},
    {"odd", 1, 0, 17, 33, 65, 4, 1, 0, -1.0f, 1.0f},
    {"odd", 1, 1, 17, 33, 65, 0, 3, 1, 0.75f, -0.25f},
    {"scores Q K^T / sqrt(d), head slices", 0, 1, 64, 64, 64, 128, 128, 0, 0.125f, 0.0f},
    {"P V accumulate, head slices", 0, 0, 64, 64, 64, 0, 128, 192, 1.0f, 1.0f},
    {"large odd", 0, 0, 130, 70, 97, 3, 9, 11, 1.0f, 1.0f},
    {"large odd", 0, 1, 130, 70, 97, 0, 1, 0, 1.0f, 0.0f},
    {"large odd", 1, 0, 130, 70, 97, 2, 0, 6, 0.5f, 1.5f},
    {"large odd", 1, 1, 130, 70, 97, 1, 2, 3, 2.0f, 0.0f},
    {"deep K (several k-panels)", 0, 1, 96, 200, 600, 8, 0, 0, 1.0f, 0.0f},
};

#define SELFTEST_TOL 1e-4
#define PAD_SENTINEL 12345.0f

/* Deterministic values in [-1, 1). */
static float selftest_rand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((double)(*s >> 8) / (double)(1u << 23)) - 1.0f;
}

/* Run one case; 0 when C matches the double reference within tolerance and
 * nothing outside C's window changed. *max_rel collects the worst error. */
static attn_status selftest_one(const selftest_case *tc, const char *kernel, double *max_rel,
                                char *err, size_t errlen) {
    int M = tc->M, N = tc->N, K = tc->K;
    int a_rows = tc->ta ? K : M, a_cols = tc->ta ? M : K;
    int b_rows = tc->tb ? N : K, b_cols = tc->tb ? K : N;
    int lda = a_cols + tc->pad_a, ldb = b_cols + tc->pad_b, ldc = N + tc->pad_c;
    size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B);
    float *C = malloc(nc * sizeof *C), *C0 = malloc(nc * sizeof *C0);
    attn_status st = ATTN_OK;
    if (!A || !B || !C || !C0) {
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM, "BLAS self-test: out of memory");
        goto out;
    }

    /* Padding of A and B is NaN: a kernel that reads outside the window
     * poisons its result. With beta == 0 C's window is NaN too, since BLAS
     * must not read C then (the engine hands it uninitialised buffers). */
    uint32_t seed = (uint32_t)(M * 7919 + N * 131 + K * 17 + tc->ta * 2 + tc->tb);
    for (int r = 0; r < a_rows; r++)
        for (int c = 0; c < lda; c++)
            A[(size_t)r * lda + c] = c < a_cols ? selftest_rand(&seed) : NAN;
    for (int r = 0; r < b_rows; r++)
        for (int c = 0; c < ldb; c++)
            B[(size_t)r * ldb + c] = c < b_cols ? selftest_rand(&seed) : NAN;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < ldc; c++)
            C0[(size_t)r * ldc + c] = c >= N             ? PAD_SENTINEL
                                      : tc->beta == 0.0f ? NAN
                                                         : selftest_rand(&seed);
    memcpy(C, C0, nc * sizeof *C);

    cblas_sgemm(CblasRowMajor, tc->ta ? CblasTrans : CblasNoTrans,
                tc->tb ? CblasTrans : CblasNoTrans, M, N, K, tc->alpha, A, lda, B, ldb, tc->beta, C,
                ldc);

    for (int i = 0; i < M; i++) {
        for (int j = 0; j < ldc; j++) {
            float got = C[(size_t)i * ldc + j];
            if (j >= N) {
                if (got != PAD_SENTINEL) {
                    st = attn_fail(err, errlen, ATTN_ERR_BLAS,
                                   "sgemm self-test on kernel %s: %s (M=%d N=%d K=%d, ldc=%d) "
                                   "wrote outside C at [%d,%d]",
                                   kernel, tc->what, M, N, K, ldc, i, j);
                    goto out;
                }
                continue;
            }
            /* Error relative to the sum of the terms' magnitudes: the bound
             * float rounding obeys, immune to cancellation in the sum. */
            double acc = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double a = tc->ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tc->tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                acc += a * b;
                mag += fabs(a * b);
            }
            double want = (double)tc->alpha * acc, scale = fabs((double)tc->alpha) * mag;
            if (tc->beta != 0.0f) {
                double c0 = C0[(size_t)i * ldc + j];
                want += (double)tc->beta * c0;
                scale += fabs((double)tc->beta * c0);
            }
            double rel = fabs((double)got - want) / (scale > 0.0 ? scale : 1.0);
            if (!(rel <= SELFTEST_TOL)) { /* also catches NaN */
                st = attn_fail(err, errlen, ATTN_ERR_BLAS,
                               "sgemm self-test on kernel %s: %s (M=%d N=%d K=%d, %s/%s, "
                               "lda=%d ldb=%d ldc=%d, alpha=%g beta=%g): C[%d,%d] is %.9g, "
                               "expected %.9g (relative error %.3g > %g)",
                               kernel, tc->what, M, N, K, tc->ta ? "Trans" : "NoTrans",
                               tc->tb ? "Trans" : "NoTrans", lda, ldb, ldc, (double)tc->alpha,
                               (double)tc->beta, i, j, (double)got, want, rel, SELFTEST_TOL);
                goto out;
            }
            if (rel > *max_rel) *max_rel = rel;
        }
    }
out:
    free(A);
    free(B);
    free(C);
    free(C0);
    return st;
}

/* ------------------------------------------------------------------- init */

static void describe_choice(attn_blas_info *info) {
    const char *user = getenv("OPENBLAS_CORETYPE");
    const char *rx = getenv("ATTN_BLAS_REEXEC");
    const char *arrow = rx ? strstr(rx, " -> ") : NULL;
    if (arrow) {
        int from_len = (int)(arrow - rx);
        const char *to = arrow + 4;
        if (strcasecmp(to, info->corename) == 0)
            snprintf(info->reason, sizeof info->reason, "switched from %.*s: CPU supports %s",
                     from_len, rx, to);
        else
            snprintf(info->reason, sizeof info->reason,
                     "asked OpenBLAS for %s instead of %.*s, but it runs %s", to, from_len, rx,
                     info->corename);
    } else if (user) {
        if (strcasecmp(user, info->corename) == 0)
            snprintf(info->reason, sizeof info->reason, "OPENBLAS_CORETYPE=%s set by the user",
                     user);
        else
            snprintf(info->reason, sizeof info->reason,
                     "OPENBLAS_CORETYPE=%s set by the user; OpenBLAS runs %s", user,
                     info->corename);
    } else if (reexec_failure[0]) {
        snprintf(info->reason, sizeof info->reason, "%s", reexec_failure);
    } else if (attn_blas_should_switch(info->corename, info->cpu_best)) {
        snprintf(info->reason, sizeof info->reason,
                 "chosen by OpenBLAS, weaker than the CPU supports: set OPENBLAS_CORETYPE=%s",
                 info->cpu_best);
    } else if (info->cpu_best[0]) {
        snprintf(info->reason, sizeof info->reason, "chosen by OpenBLAS; CPU supports %s",
                 info->cpu_best);
    } else {
        snprintf(info->reason, sizeof info->reason, "chosen by OpenBLAS; CPU has no AVX");
    }
}

static int rows_invariant; /* set once by attn_blas_init, before any threads */

int attn_blas_rows_invariant(void) {
    return rows_invariant;
}

/* Rows [off, off+m) of A [mt, K] times B [K, N], computed in one call with
 * all mt rows and in a call of their own: the same bits? 1 yes, 0 no, -1
 * out of memory. */
static float probe_value(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return (float)(*x >> 8) * 0x1p-24f - 0.5f;
}

static int rows_probe(int K, int N, int m, int off, int mt) {
    float *A = malloc((size_t)mt * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C1 = malloc((size_t)m * N * sizeof *C1), *C2 = malloc((size_t)mt * N * sizeof *C2);
    int same = -1;
    if (A && B && C1 && C2) {
        uint32_t x = 12345;
        for (size_t i = 0; i < (size_t)mt * K; i++) A[i] = probe_value(&x);
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = probe_value(&x);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, N, K, 1.0f, A + (size_t)off * K,
                    K, B, N, 0.0f, C1, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mt, N, K, 1.0f, A, K, B, N, 0.0f, C2,
                    N);
        same = memcmp(C1, C2 + (size_t)off * N, (size_t)m * N * sizeof *C1) == 0;
    }
    free(A);
    free(B);
    free(C1);
    free(C2);
    return same;
}

/* A few shapes like the projections' (N = 3K and N = K), rows alone and
 * at odd places in taller calls. */
static int probe_rows_invariant(void) {
    static const int shapes[][5] = {/* K, N, m, off, mt */
                                    {64, 192, 1, 37, 80},   {64, 192, 5, 3, 80},
                                    {64, 192, 16, 37, 80},  {256, 768, 37, 5, 130},
                                    {256, 256, 3, 64, 200}, {768, 2304, 7, 33, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        if (rows_probe(s[0], s[1], s[2], s[3], s[4]) != 1) return 0;
    }
    return 1;
}

attn_status attn_blas_init(attn_blas_info *info, char *err, size_t errlen) {
    if (!info) return attn_fail(err, errlen, ATTN_ERR_INVALID, "attn_blas_init: info is NULL");
    memset(info, 0, sizeof *info);
    openblas_set_num_threads(1);

    const char *config = openblas_get_config(), *core = openblas_get_corename();
    snprintf(info->config, sizeof info->config, "%s", config ? config : "unknown");
    snprintf(info->corename, sizeof info->corename, "%s", core ? core : "unknown");
    snprintf(info->cpu_best, sizeof info->cpu_best, "%s", attn_blas_cpu_best());
    info->threads = openblas_get_num_threads();
    describe_choice(info);

    for (size_t i = 0; i < sizeof selftest_cases / sizeof selftest_cases[0]; i++) {
        attn_status st = selftest_one(&selftest_cases[i], info->corename,
                                      &info->selftest_max_rel_err, err, errlen);
        if (st) return st;
    }
    rows_invariant = probe_rows_invariant();
    info->rows_invariant = rows_invariant != 0;
    return ATTN_OK;
}
