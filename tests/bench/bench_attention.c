/* bench_attention.c - the engine's forward pass against this machine's sgemm
 * rate and against PyTorch, all measured in one run.
 *
 * For each case (n tokens, E embed dim, H heads, attention weights on/off;
 * self-attention, one batch entry) it reports our median time and GFLOPS,
 * that as a share of the sgemm rate the pool reaches in the same moments
 * (a 2048^3 sgemm timed in alternation with ours, case by case: on a shared
 * machine whose speed drifts by 20% within a run, a reference taken at the
 * start and the end only would compare different machines),
 * PyTorch's median time on the same layer and input (tests/bench/torch_mha.py
 * as a coprocess, its output compared with ours first), and, for the
 * 8192-token case, the peak RSS of a child process that runs only that case.
 * For n >= PEAK_N also ours back to back for a second against the FMA peak
 * of the same minute (back_to_back): the rate while requests queue.
 * Then the long-context forms of weights (top-k per head and of the head
 * average, weight rows) side by side with the pass without weights on the
 * same input, each timed in alternation with it; the peak RSS of top-k at
 * 8192 tokens in a child of its own; and the answer a client receives over
 * HTTP for top-k against the dense weights at 2048 tokens, from the real
 * daemon (--server) on the same layer written as a safetensors file.
 * Then batching across requests in-process: BATCH_K inputs of make
 * bench-http's medium shape, one attn_forward each against one
 * attn_forward_ragged pass over them all (what --batch-max-requests does),
 * timed in alternation: the most the server's batching can gain from the
 * engine; and the same passes on the calling thread without the pool, whose
 * rate times the workers bounds what any batching could reach with these
 * kernels.
 * The result is a markdown table on stdout followed by the targets, each
 * PASS or FAIL as measured; progress goes to stderr.
 *
 * The file is divided into: the seeded inputs shared with torch_mha.py,
 * timing, the sgemm reference, the PyTorch coprocess, the RSS child, the
 * long-context forms, batching, the answer sizes over HTTP, main.
 *
 *     build/release/bench/bench_attention [--quick] [--threads N] [--no-torch]
 *         [--python /usr/bin/python3] [--torch-script tests/bench/torch_mha.py]
 *         [--min-time S] [--strict] [--server bin/attention-server]
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <curl/curl.h>

#include "attention.h"
#include "blas.h"
#include "gemm.h"
#include "buf.h"
#include "hugemem.h"
#include "fma_peak.h"
#include "numfmt.h"
#include "pool.h"
#include "stats.h"
#include "status.h"
#include "weights.h"

#include "../integration/harness.h" /* daemon_start/daemon_stop for the HTTP sizes */

typedef struct {
    int n, E, H;
    bool need_weights;
    bool big;    /* skipped in --quick mode */
    bool causal; /* the causal mask (PyTorch: the same as a boolean attn_mask) */
} bench_case;

static const bench_case bench_cases[] = {
    {5, 64, 4, true, false, false},       {5, 64, 4, false, false, false},
    {128, 256, 8, true, false, false},    {128, 256, 8, false, false, false},
    {512, 768, 12, true, false, false},   {512, 768, 12, false, false, false},
    {2048, 1024, 16, true, false, false}, {2048, 1024, 16, false, false, false},
    {8192, 1024, 16, false, true, false}, {2048, 1024, 16, true, false, true},
    {2048, 1024, 16, false, false, true},
};
#define NCASES (sizeof bench_cases / sizeof bench_cases[0])

#define TARGET_SPEEDUP   1.5  /* torch time / ours, every case */
#define TARGET_SGEMM_PCT 70.0 /* % of the sgemm rate, cases with n >= 2048 */
#define TARGET_PEAK_PCT  80.0 /* % of the pool's FMA peak, cases with n >= PEAK_N */
#define PEAK_N           512
#define TARGET_RSS_MIB   512.0 /* peak RSS of the 8192-token case */
#define MATCH_TOL        1e-3  /* max |ours - torch| before the run is void */
#define LARGE_N          2048  /* the two largest shapes: n = 2048 and 8192 */

/* The long-context forms of weights, each against the pass without
 * weights on the same input (self-attention, batch 1). */
typedef struct {
    int n, E, H;
    int topk;     /* > 0: weights_topk */
    bool average; /* of the head average */
    int nrows;    /* > 0: weight rows (spread over the sequence) */
    bool big;     /* skipped in --quick mode */
} form_case;

static const form_case form_cases[] = {
    {2048, 1024, 16, 16, false, 0, false}, {2048, 1024, 16, 16, true, 0, false},
    {2048, 1024, 16, 0, false, 4, false},  {8192, 1024, 16, 16, false, 0, true},
    {8192, 1024, 16, 16, true, 0, true},
};
#define NFORMS (sizeof form_cases / sizeof form_cases[0])

#define TARGET_TOPK_RATIO 1.3  /* top-k per head / no weights, at n = 8192 */
#define TARGET_ANSWER_PCT 1.0  /* top-k answer / dense answer over HTTP, n = 2048, in % */
#define ANSWER_N          2048 /* the answer-size case: n, E, H, k */
#define ANSWER_E          1024
#define ANSWER_H          16
#define ANSWER_K          16

typedef struct {
    int threads;
    bool quick, torch, strict;
    double min_time;
    int min_runs;
    const char *python, *script;
    const char *server; /* the daemon, for the answer sizes over HTTP */
} bench_opts;

/* ------------------------------------------- seeded inputs (see torch_mha.py) */

enum { SEED_X = 1, SEED_IN_W, SEED_IN_B, SEED_OUT_W, SEED_OUT_B };

/* Value i (0-based) of stream seed, in [-scale, scale): splitmix64 of the
 * counter, top 24 bits as u in [0,1), then 2u-1 (exact) times scale (one
 * float rounding), so numpy reproduces it bit for bit. */
static void bench_fill(float *dst, size_t count, uint64_t seed, float scale) {
    uint64_t base = seed * 0xD1B54A32D192ED03ull;
    for (size_t i = 0; i < count; i++) {
        uint64_t z = base + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * 0x1p-24f;
        dst[i] = (u * 2.0f - 1.0f) * scale;
    }
}

/* The layer torch_mha.py builds: in_proj [3E,E] and out_proj [E,E] uniform in
 * +-1/sqrt(E), biases in +-0.1. */
static attn_status bench_make_weights(int E, int H, attn_weights **out, char *err, size_t errlen) {
    attn_weights *w;
    attn_status st = attn_weights_alloc(E, H, E, E, true, false, false, &w, err, errlen);
    if (st) return st;
    size_t EE = (size_t)E * E;
    float *in_w = malloc(3 * EE * sizeof *in_w), *in_b = malloc(3 * (size_t)E * sizeof *in_b);
    if (!in_w || !in_b) {
        free(in_w);
        free(in_b);
        attn_weights_destroy(w);
        return attn_fail(err, errlen, ATTN_ERR_NOMEM, "bench: out of memory for weights");
    }
    float ws = (float)(1.0 / sqrt((double)E));
    bench_fill(in_w, 3 * EE, SEED_IN_W, ws);
    bench_fill(in_b, 3 * (size_t)E, SEED_IN_B, 0.1f);
    memcpy(w->wq, in_w, EE * sizeof *in_w);
    memcpy(w->wk, in_w + EE, EE * sizeof *in_w);
    memcpy(w->wv, in_w + 2 * EE, EE * sizeof *in_w);
    memcpy(w->bq, in_b, (size_t)E * sizeof *in_b);
    memcpy(w->bk, in_b + E, (size_t)E * sizeof *in_b);
    memcpy(w->bv, in_b + 2 * (size_t)E, (size_t)E * sizeof *in_b);
    bench_fill(w->wo, EE, SEED_OUT_W, ws);
    bench_fill(w->bo, (size_t)E, SEED_OUT_B, 0.1f);
    free(in_w);
    free(in_b);
    attn_weights_finish(w);
    *out = w;
    return ATTN_OK;
}

/* The FLOPs of a phase of a case's pass: projections 2nE*3E, attention
 * (scores and P.V) 2n*n*d per head each, out-projection 2nE*E; softmax,
 * biases and averaging are not counted, and the other phases do none.
 * Causal, attention counts the keys the mask leaves (query i sees i + 1
 * of them): the work a pass must do, whatever its kernel computes and
 * throws away on the way. */
static double phase_flops(const bench_case *c, attn_phase_id ph) {
    const double n = c->n, E = c->E, keys = c->causal ? (n + 1.0) / 2.0 : n;
    switch (ph) {
    case ATTN_PH_PROJ: return 6.0 * n * E * E;
    case ATTN_PH_ATTN: return 4.0 * n * keys * E;
    case ATTN_PH_OUT: return 2.0 * n * E * E;
    default: return 0.0;
    }
}

/* The case's weights column: whether weights are asked for, and the mask. */
static const char *weights_label(const bench_case *c) {
    if (c->causal) return c->need_weights ? "on, causal" : "off, causal";
    return c->need_weights ? "on" : "off";
}

static double bench_flops(const bench_case *c) {
    return phase_flops(c, ATTN_PH_PROJ) + phase_flops(c, ATTN_PH_ATTN) +
           phase_flops(c, ATTN_PH_OUT);
}

/* ------------------------------------------------------------------ timing */

#define MAX_RUNS   1000
#define MAX_ROUNDS 3 /* rounds of ours-then-PyTorch per case (quick mode: 2) */

/* Time fa against fb in alternating turns: a turn runs fa `reps` times in
 * a row (enough for about BATCH_S, judged from one untimed warm-up run) and
 * then fb once (after its own untimed run). Until fa has had min_runs turns
 * and min_time seconds: the median of fa's turns (each turn's time over its
 * calls) in *ta and of fb's calls in *tb, 0 on success. Both sides see the
 * same moments of a shared, noisy machine, so their ratio holds even when
 * the machine's speed drifts. With ta_call, also the median of fa's single
 * calls, each timed on its own, as torch_mha.py times PyTorch's: the first
 * call of each turn comes after fb (a 2048^3 sgemm: 48 MB through the
 * caches), and for a 10 ms pass that is one call in six of a turn's mean.
 * Calls under CALL_MIN_S keep the turn's mean (a clock read per call would
 * weigh on them). */
#define BATCH_S    0.05
#define CALL_MIN_S 1e-4
#define MAX_CALLS  100000
static int time_paired(int (*fa)(void *), void *ca, int (*fb)(void *), void *cb, int min_runs,
                       double min_time, double *ta, double *tb, double *ta_call, int *runs) {
    static double times_a[MAX_RUNS], times_b[MAX_RUNS];
    static double calls[MAX_CALLS];
    double t0 = bench_now_s();
    if (fa(ca)) return -1;
    double once = bench_now_s() - t0;
    if (fb(cb)) return -1;
    int reps = once >= BATCH_S ? 1 : once * 10000 < BATCH_S ? 10000 : (int)(BATCH_S / once) + 1;
    const int per_call = ta_call && once >= CALL_MIN_S;
    int k = 0, ncalls = 0;
    double spent_a = 0.0;
    while (k < MAX_RUNS && (k < min_runs || spent_a < min_time)) {
        t0 = bench_now_s();
        for (int i = 0; i < reps; i++) {
            double c0 = per_call ? bench_now_s() : 0.0;
            if (fa(ca)) return -1;
            if (per_call && ncalls < MAX_CALLS) calls[ncalls++] = bench_now_s() - c0;
        }
        double t1 = bench_now_s();
        if (fb(cb)) return -1;
        times_a[k] = (t1 - t0) / reps;
        times_b[k++] = bench_now_s() - t1;
        spent_a += t1 - t0;
    }
    *runs = k;
    *ta = bench_median(times_a, k);
    *tb = bench_median(times_b, k);
    if (ta_call) *ta_call = per_call ? bench_median(calls, ncalls) : *ta;
    return 0;
}

/* Other processes' spinning threads (torch's OpenMP and OpenBLAS workers
 * spin a little after each call) must not land in our timings. */
static void settle(void) {
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------ the sgemm reference */

/* C[N,N] = A[N,N] B[N,N], rows split over the pool the way the engine splits
 * its GEMMs: one task per worker, OpenBLAS single-threaded inside each. */
typedef struct {
    attn_pool *pool;
    int N, tasks;
    const float *A, *B;
    float *C;
} sgemm_ctx;

static void sgemm_task(void *ctx, size_t i, int worker) {
    (void)worker;
    sgemm_ctx *s = ctx;
    int r0 = (int)((size_t)s->N * i / (size_t)s->tasks);
    int r1 = (int)((size_t)s->N * (i + 1) / (size_t)s->tasks);
    if (r1 > r0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, s->N, s->N, 1.0f,
                    s->A + (size_t)r0 * s->N, s->N, s->B, s->N, 0.0f, s->C + (size_t)r0 * s->N,
                    s->N);
}

static int sgemm_run(void *ctx) {
    sgemm_ctx *s = ctx;
    attn_pool_run(s->pool, (size_t)s->tasks, sgemm_task, s);
    return 0;
}

#define SGEMM_N     2048
#define SGEMM_FLOPS (2.0 * SGEMM_N * (double)SGEMM_N * SGEMM_N)

/* The 2048^3 operands, or 0 on allocation failure. */
static int sgemm_setup(sgemm_ctx *s, attn_pool *pool) {
    size_t NN = (size_t)SGEMM_N * SGEMM_N;
    *s = (sgemm_ctx){pool,
                     SGEMM_N,
                     attn_pool_size(pool),
                     malloc(NN * sizeof(float)),
                     malloc(NN * sizeof(float)),
                     malloc(NN * sizeof(float))};
    if (!s->A || !s->B || !s->C) return 0;
    bench_fill((float *)s->A, NN, 11, 1.0f);
    bench_fill((float *)s->B, NN, 12, 1.0f);
    return 1;
}

static void sgemm_teardown(sgemm_ctx *s) {
    free((void *)s->A);
    free((void *)s->B);
    free(s->C);
}

/* ------------------------------------------------------- PyTorch coprocess */

typedef struct {
    pid_t pid;
    FILE *to, *from;
    char banner[256]; /* its "ready ..." line, minus the word */
} torch_proc;

/* Start torch_mha.py --serve. Called before the pool starts; OpenBLAS's own
 * threads may exist, so the child only dups and execs (async-signal-safe). */
static int torch_start(torch_proc *t, const bench_opts *o) {
    int in[2], out[2];
    memset(t, 0, sizeof *t);
    if (pipe(in) || pipe(out)) return -1;
    char threads[16];
    snprintf(threads, sizeof threads, "%d", o->threads);
    /* The same thread count for torch's OpenMP pool (set_num_threads) and
     * for the OpenBLAS that libblas.so.3 resolves to inside torch, which
     * ignores set_num_threads. And passive OpenMP waiting: with libgomp's
     * default spin, torch's OpenMP threads hold the cores its OpenBLAS
     * thread needs, and whole stretches of calls take 16 ms instead of
     * 1.2-1.4 ms (n=128, measured here); passive keeps it at 1.31-1.36 ms,
     * PyTorch's best steady figure. Read only at load, so harmless for us. */
    static const char *vars[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY"};
    const char *values[] = {threads, threads, "PASSIVE"};
    char *saved[3];
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        setenv(vars[i], values[i], 1);
    }
    char *argv[] = {(char *)o->python, "-u", (char *)o->script, "--serve", "--threads",
                    threads,           NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) { /* our own environment as it was, for the RSS child */
        for (int i = 0; i < 3; i++) {
            if (saved[i])
                setenv(vars[i], saved[i], 1);
            else
                unsetenv(vars[i]);
            free(saved[i]);
        }
    }
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execv(o->python, argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    t->pid = pid;
    t->to = fdopen(in[1], "w");
    t->from = fdopen(out[0], "r");
    char line[512] = "";
    if (!t->to || !t->from || !fgets(line, sizeof line, t->from) ||
        strncmp(line, "ready ", 6) != 0) {
        fprintf(stderr, "bench: %s %s did not start: %s", o->python, o->script,
                t->from && line[0] ? line : "no answer\n");
        return -1;
    }
    line[strcspn(line, "\n")] = 0;
    snprintf(t->banner, sizeof t->banner, "%.250s", line + 6);
    return 0;
}

static void torch_stop(torch_proc *t) {
    if (t->to) fclose(t->to); /* EOF ends its loop */
    if (t->from) fclose(t->from);
    if (t->pid > 0) waitpid(t->pid, NULL, 0);
    memset(t, 0, sizeof *t);
}

/* One case: torch's median ms (or -1), its run count and peak RSS so far. */
static double torch_case(torch_proc *t, const bench_case *c, int min_runs, double min_time,
                         const char *out_path, int *runs, long *rss_kib) {
    if (!t->to) return -1.0;
    fprintf(t->to, "case %d %d %d %d %d %d %g %s\n", c->n, c->E, c->H, c->need_weights ? 1 : 0,
            c->causal ? 1 : 0, min_runs, min_time, out_path);
    if (fflush(t->to)) return -1.0;
    char line[512];
    if (!fgets(line, sizeof line, t->from)) return -1.0;
    double ms;
    if (sscanf(line, "result %lf %d %ld", &ms, runs, rss_kib) != 3) {
        fprintf(stderr, "bench: torch: %s", line);
        return -1.0;
    }
    return ms;
}

/* Largest |a - b| over count floats read from path, or -1 if unreadable. */
static double compare_file(const char *path, const float *ours, size_t count) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1.0;
    double maxd = -1.0;
    float chunk[4096];
    size_t done = 0, got;
    while (done < count && (got = fread(chunk, sizeof *chunk, 4096, f)) > 0) {
        for (size_t i = 0; i < got && done + i < count; i++) {
            double d = fabs((double)chunk[i] - (double)ours[done + i]);
            if (!(d <= maxd)) maxd = isnan(d) ? INFINITY : d;
        }
        done += got;
    }
    fclose(f);
    return done == count ? maxd : -1.0;
}

/* --------------------------------------------------------------- one case */

typedef struct {
    const attn_weights *w;
    attn_input in;
    float *out, *weights;
    int32_t *indices; /* top-k */
    int *rows;        /* weight rows */
    attn_pool *pool;
    char err[ATTN_ERRLEN];
} forward_ctx;

/* One pass of f; with times (not NULL), its phases' times too
 * (attn_run_timed, the same pass). */
static int forward_run_timed(forward_ctx *f, attn_phase_times *times) {
    const attn_result res = {f->out, f->weights, f->indices};
    attn_status st = attn_run_timed(f->w, &f->in, &res, f->pool, times, f->err, sizeof f->err);
    if (st) fprintf(stderr, "bench: attn_forward: %s: %s\n", attn_status_name(st), f->err);
    return st != ATTN_OK;
}

static int forward_run(void *ctx) {
    return forward_run_timed(ctx, NULL);
}

/* Set up a case: weights, input, output buffers. */
static attn_status case_setup(forward_ctx *f, const bench_case *c, attn_pool *pool) {
    memset(f, 0, sizeof *f);
    attn_weights *w = NULL;
    attn_status st = bench_make_weights(c->E, c->H, &w, f->err, sizeof f->err);
    if (st) return st;
    f->w = w;
    f->pool = pool;
    size_t nx = (size_t)c->n * c->E, out_floats = 0, weight_floats = 0;
    float *x = malloc(nx * sizeof *x);
    f->in = (attn_input){.B = 1,
                         .n = c->n,
                         .m = c->n,
                         .query = x,
                         .key = x,
                         .value = x,
                         .need_weights = c->need_weights,
                         .average_heads = c->need_weights,
                         .causal = c->causal};
    if (!x || !attn_output_sizes(w, &f->in, &out_floats, &weight_floats))
        return attn_fail(f->err, sizeof f->err, ATTN_ERR_NOMEM, "bench: input");
    bench_fill(x, nx, SEED_X, 1.0f);
    /* the answer's arrays as the daemon allocates them (attend.c:
     * mem_reuse_alloc), in huge pages where they are large, so that the
     * pass writes them as it does there */
    f->out = mem_alloc(out_floats * sizeof *f->out);
    if (c->need_weights) f->weights = mem_alloc(weight_floats * sizeof *f->weights);
    if (!f->out || (c->need_weights && !f->weights))
        return attn_fail(f->err, sizeof f->err, ATTN_ERR_NOMEM, "bench: output");
    return ATTN_OK;
}

static void case_teardown(forward_ctx *f) {
    attn_weights_destroy((attn_weights *)f->w);
    free((void *)f->in.query);
    free(f->out);
    free(f->weights);
}

/* ------------------------------------------------------------ the RSS child */

/* --rss-case n E H threads [topk average]: run that case once, without
 * weights or with top-k, print this process's peak RSS in KiB (VmHWM) on
 * stdout and exit. Nothing else lives in this process. Not wait4's
 * ru_maxrss: a forked child counts the parent's resident pages as its own
 * until exec, and Linux keeps that peak across exec, so the figure was the
 * parent's whenever the parent was larger (the parent runs the 8192-token
 * case itself: 423 MiB both with and without top-k on 2026-12-06, where
 * the child alone peaks at 269 and 285 MiB). */
static attn_status forms_setup(forward_ctx *f, const forward_ctx *base, const form_case *fc);
static void forms_teardown(forward_ctx *f);

static int rss_child(int argc, char **argv) {
    bench_case c = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), false, true, false};
    int threads = atoi(argv[5]);
    form_case fc = {c.n, c.E, c.H, argc == 8 ? atoi(argv[6]) : 0, argc == 8 && atoi(argv[7]),
                    0,   true};
    attn_blas_info info;
    char err[ATTN_ERRLEN];
    attn_pool *pool;
    if (attn_blas_init(&info, err, sizeof err) ||
        attn_pool_create(threads, &pool, err, sizeof err)) {
        fprintf(stderr, "bench rss child: %s\n", err);
        return 1;
    }
    forward_ctx f, g;
    int rc = case_setup(&f, &c, pool) != ATTN_OK;
    if (!rc && fc.topk > 0) { /* the outputs of the case without weights are not kept */
        rc = forms_setup(&g, &f, &fc) != ATTN_OK || forward_run(&g);
        if (rc) fprintf(stderr, "bench rss child: %s\n", g.err);
        forms_teardown(&g);
    } else if (!rc) {
        rc = forward_run(&f);
    }
    if (rc) fprintf(stderr, "bench rss child: %s\n", f.err);
    case_teardown(&f);
    attn_pool_destroy(pool);
    long hwm = -1;
    FILE *st = fopen("/proc/self/status", "r");
    char line[256];
    while (st && fgets(line, sizeof line, st))
        if (sscanf(line, "VmHWM: %ld", &hwm) == 1) break;
    if (st) fclose(st);
    if (hwm < 0) {
        fprintf(stderr, "bench rss child: no VmHWM in /proc/self/status\n");
        return 1;
    }
    printf("%ld\n", hwm);
    return rc;
}

/* Peak RSS in KiB of a fresh process running case c (with top-k k of the
 * head average or not, when k > 0), as it reports it (rss_child), or -1. */
static long rss_measure(const bench_case *c, int threads, int k, bool average) {
    char sn[16], se[16], sh[16], st[16], sk[16], sa[4];
    snprintf(sn, sizeof sn, "%d", c->n);
    snprintf(se, sizeof se, "%d", c->E);
    snprintf(sh, sizeof sh, "%d", c->H);
    snprintf(st, sizeof st, "%d", threads);
    snprintf(sk, sizeof sk, "%d", k);
    snprintf(sa, sizeof sa, "%d", average ? 1 : 0);
    char *argv[] = {"bench_attention", "--rss-case", sn, se, sh, st, sk, sa, NULL};
    if (k <= 0) argv[6] = NULL;
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]), close(fds[1]);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[1]);
    char out[64];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof out - 1 &&
           ((got = read(fds[0], out + len, sizeof out - 1 - len)) > 0 || (got < 0 && errno == EINTR)))
        if (got > 0) len += (size_t)got;
    out[len] = '\0';
    close(fds[0]);
    int status;
    long kib = -1;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(out, "%ld", &kib) != 1)
        return -1;
    return kib;
}

/* ------------------------------------------- the long-context forms of weights */

/* A form case on base's layer and input (shared, not freed here): the
 * input asks for top-k or weight rows, with outputs of its own. */
static attn_status forms_setup(forward_ctx *f, const forward_ctx *base, const form_case *fc) {
    *f = *base;
    f->out = NULL, f->weights = NULL, f->indices = NULL, f->rows = NULL;
    f->in.need_weights = false;
    f->in.average_heads = fc->average;
    f->in.topk = fc->topk;
    if (fc->nrows > 0) { /* spread over the sequence: 0, ..., n-1 */
        f->rows = malloc((size_t)fc->nrows * sizeof *f->rows);
        if (!f->rows) return attn_fail(f->err, sizeof f->err, ATTN_ERR_NOMEM, "bench: rows");
        for (int i = 0; i < fc->nrows; i++)
            f->rows[i] = fc->nrows > 1 ? (int)((long)i * (fc->n - 1) / (fc->nrows - 1)) : 0;
        f->in.rows = f->rows;
        f->in.nrows = fc->nrows;
    }
    size_t out_floats = 0, weight_floats = 0;
    if (!attn_output_sizes(f->w, &f->in, &out_floats, &weight_floats))
        return attn_fail(f->err, sizeof f->err, ATTN_ERR_LIMIT, "bench: sizes");
    f->out = mem_alloc(out_floats * sizeof *f->out); /* as case_setup's */
    f->weights = mem_alloc(weight_floats * sizeof *f->weights);
    if (fc->topk > 0) f->indices = mem_alloc(weight_floats * sizeof *f->indices);
    if (!f->out || !f->weights || (fc->topk > 0 && !f->indices))
        return attn_fail(f->err, sizeof f->err, ATTN_ERR_NOMEM, "bench: form outputs");
    return ATTN_OK;
}

static void forms_teardown(forward_ctx *f) {
    free(f->out);
    free(f->weights);
    free(f->indices);
    free(f->rows);
}

typedef struct {
    double ms, base_ms, ratio; /* the form, the pass without weights, their ratio */
    int runs;
    bool ran;
} form_result;

static const char *form_name(const form_case *fc, char *out, size_t len) {
    if (fc->topk > 0)
        snprintf(out, len, "top-%d%s", fc->topk,
                 fc->average ? " of the head average" : " per head");
    else
        snprintf(out, len, "%d weight rows", fc->nrows);
    return out;
}

/* Time every form case against the pass without weights on the same input,
 * in alternation (time_paired), medians of each side and their ratio. */
static void forms_run(const bench_opts *o, attn_pool *pool, form_result *res) {
    forward_ctx base;
    bool have_base = false;
    int base_n = 0;
    for (size_t k = 0; k < NFORMS; k++) {
        const form_case *fc = &form_cases[k];
        if (o->quick && fc->big) continue;
        char name[64];
        fprintf(stderr, "bench: n=%d E=%d H=%d %s against no weights...\n", fc->n, fc->E, fc->H,
                form_name(fc, name, sizeof name));
        if (!have_base || base_n != fc->n) {
            if (have_base) case_teardown(&base);
            bench_case c = {fc->n, fc->E, fc->H, false, fc->big, false};
            have_base = case_setup(&base, &c, pool) == ATTN_OK;
            base_n = fc->n;
            if (!have_base) {
                fprintf(stderr, "bench: %s\n", base.err);
                case_teardown(&base);
                continue;
            }
        }
        forward_ctx f;
        if (forms_setup(&f, &base, fc) == ATTN_OK) {
            settle();
            double ta, tb;
            if (time_paired(forward_run, &f, forward_run, &base, o->min_runs, o->min_time, &ta, &tb,
                            NULL, &res[k].runs) == 0) {
                res[k] = (form_result){ta * 1e3, tb * 1e3, ta / tb, res[k].runs, true};
            }
        } else {
            fprintf(stderr, "bench: %s\n", f.err);
        }
        forms_teardown(&f);
    }
    if (have_base) case_teardown(&base);
}

/* ----------------------------------------------------------------- batching */

/* make bench-http's medium requests (128 x 256, 8 heads, no weights), and
 * as many as its batching daemon takes in one pass at 64 connections. */
#define BATCH_K 15
#define BATCH_N 128
#define BATCH_E 256
#define BATCH_H 8

typedef struct {
    const attn_weights *w;
    attn_input in[BATCH_K];
    const attn_input *ins[BATCH_K];
    float *outs[BATCH_K];
    attn_pool *pool;
    char err[ATTN_ERRLEN];
} batch_ctx;

typedef struct {
    double one_ms, batch_ms;   /* medians: BATCH_K passes one by one, one ragged pass */
    double alone_ms, pass2_ms; /* the same BATCH_K passes on the calling thread, no pool,
                                  and the ragged pass timed in alternation with them */
    int runs, workers;
    bool ran;
} batch_result;

static int batch_one_by_one(void *ctx) {
    batch_ctx *b = ctx;
    for (int i = 0; i < BATCH_K; i++) {
        attn_status st =
            attn_forward(b->w, &b->in[i], b->outs[i], NULL, b->pool, b->err, sizeof b->err);
        if (st) {
            fprintf(stderr, "bench: attn_forward: %s: %s\n", attn_status_name(st), b->err);
            return 1;
        }
    }
    return 0;
}

/* one by one on the calling thread alone: each pass at one thread's rate,
 * with no hand-over, barrier or shared cache line */
static int batch_alone(void *ctx) {
    batch_ctx *b = ctx;
    for (int i = 0; i < BATCH_K; i++) {
        attn_status st =
            attn_forward(b->w, &b->in[i], b->outs[i], NULL, NULL, b->err, sizeof b->err);
        if (st) {
            fprintf(stderr, "bench: attn_forward: %s: %s\n", attn_status_name(st), b->err);
            return 1;
        }
    }
    return 0;
}

static int batch_ragged(void *ctx) {
    batch_ctx *b = ctx;
    attn_status st = attn_forward_ragged(b->w, b->ins, BATCH_K, b->outs, ATTN_RAGGED_AUTO, b->pool,
                                         b->err, sizeof b->err);
    if (st) fprintf(stderr, "bench: attn_forward_ragged: %s: %s\n", attn_status_name(st), b->err);
    return st != ATTN_OK;
}

static void batch_run(const bench_opts *o, attn_pool *pool, batch_result *r) {
    memset(r, 0, sizeof *r);
    batch_ctx b = {.pool = pool};
    attn_weights *w = NULL;
    fprintf(stderr, "bench: %d inputs of n=%d E=%d H=%d one by one against one ragged pass...\n",
            BATCH_K, BATCH_N, BATCH_E, BATCH_H);
    bool ok = bench_make_weights(BATCH_E, BATCH_H, &w, b.err, sizeof b.err) == ATTN_OK;
    b.w = w;
    const size_t nx = (size_t)BATCH_N * BATCH_E;
    for (int i = 0; i < BATCH_K; i++) {
        float *x = malloc(nx * sizeof *x);
        b.outs[i] = malloc(nx * sizeof *b.outs[i]);
        ok = ok && x && b.outs[i];
        if (x) bench_fill(x, nx, SEED_X + (uint64_t)i, 1.0f);
        b.in[i] =
            (attn_input){.B = 1, .n = BATCH_N, .m = BATCH_N, .query = x, .key = x, .value = x};
        b.ins[i] = &b.in[i];
    }
    if (ok && w && attn_ragged_ok(w, &b.in[0])) {
        settle();
        double ta, tb, tc, td;
        int runs2;
        if (time_paired(batch_one_by_one, &b, batch_ragged, &b, o->min_runs, o->min_time, &ta, &tb,
                        NULL, &r->runs) == 0 &&
            time_paired(batch_alone, &b, batch_ragged, &b, o->min_runs, o->min_time, &tc, &td, NULL,
                        &runs2) == 0)
            *r = (batch_result){
                ta * 1e3, tb * 1e3, tc * 1e3, td * 1e3, r->runs, attn_pool_size(pool), true};
    } else {
        fprintf(stderr, "bench: batching: could not set up (%s)\n", b.err);
    }
    for (int i = 0; i < BATCH_K; i++) {
        free((void *)b.in[i].query);
        free(b.outs[i]);
    }
    attn_weights_destroy(w);
}

/* ---------------------------------------------- the answer sizes over HTTP */

/* The bench layer (bench_make_weights' numbers) as a safetensors file in
 * PyTorch's naming, with num_heads in the metadata. 0 on success. */
static int write_layer(const char *path, int E, int H) {
    const size_t EE = (size_t)E * E;
    const struct {
        const char *name;
        size_t rows, cols; /* cols 0: a vector of rows */
        uint64_t seed;
        float scale;
    } t[4] = {{"in_proj_weight", 3 * (size_t)E, (size_t)E, SEED_IN_W, (float)(1.0 / sqrt(E))},
              {"in_proj_bias", 3 * (size_t)E, 0, SEED_IN_B, 0.1f},
              {"out_proj.weight", (size_t)E, (size_t)E, SEED_OUT_W, (float)(1.0 / sqrt(E))},
              {"out_proj.bias", (size_t)E, 0, SEED_OUT_B, 0.1f}};
    char head[1024];
    size_t off = 0,
           len = (size_t)snprintf(head, sizeof head, "{\"__metadata__\":{\"num_heads\":\"%d\"}", H);
    for (int i = 0; i < 4; i++) {
        size_t count = t[i].cols ? t[i].rows * t[i].cols : t[i].rows;
        if (t[i].cols)
            len += (size_t)snprintf(head + len, sizeof head - len,
                                    ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],"
                                    "\"data_offsets\":[%zu,%zu]}",
                                    t[i].name, t[i].rows, t[i].cols, off, off + 4 * count);
        else
            len += (size_t)snprintf(head + len, sizeof head - len,
                                    ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                                    "\"data_offsets\":[%zu,%zu]}",
                                    t[i].name, t[i].rows, off, off + 4 * count);
        off += 4 * count;
    }
    len += (size_t)snprintf(head + len, sizeof head - len, "}");
    while (len % 8) head[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t hl = len; /* little-endian host (the tensors are too) */
    int bad = fwrite(&hl, 8, 1, f) != 1 || fwrite(head, 1, len, f) != len;
    float *vals = malloc(3 * EE * sizeof *vals);
    bad = bad || !vals;
    for (int i = 0; i < 4 && !bad; i++) {
        size_t count = t[i].cols ? t[i].rows * t[i].cols : t[i].rows;
        bench_fill(vals, count, t[i].seed, t[i].scale);
        bad = fwrite(vals, sizeof *vals, count, f) != count;
    }
    free(vals);
    return fclose(f) || bad ? -1 : 0;
}

static size_t count_bytes(char *p, size_t size, size_t n, void *ud) {
    (void)p;
    *(size_t *)ud += size * n;
    return size * n;
}

/* POST body to path; the answer's body bytes (identity encoding), or 0. */
static size_t answer_bytes(const daemon_proc *d, const char *path, const char *ctype,
                           const char *hdr2, const char *body, size_t len) {
    CURL *c = curl_easy_init();
    char url[256], ct[128];
    size_t got = 0;
    long status = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", d->port, path);
    snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
    struct curl_slist *h = curl_slist_append(NULL, ct);
    if (hdr2) h = curl_slist_append(h, hdr2);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, count_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK || status != 200) {
        fprintf(stderr, "bench: POST %s: %s, status %ld\n", path, curl_easy_strerror(rc), status);
        return 0;
    }
    return got;
}

enum { ANS_FLOAT, ANS_BASE64, ANS_V2_JSON, ANS_V2_BINARY, ANS_COUNT };
static const char *const answer_names[ANS_COUNT] = {
    "/attend, float JSON (output and weights)", "/attend, base64 (output and weights)",
    "v2, JSON, the weights outputs only", "v2, binary, the weights outputs only"};

/* Dense and top-k answers of ANSWER_N tokens from the daemon, in bytes:
 * dense[i], topk[i] for each way i (0 when not measured). */
static void answer_sizes(const bench_opts *o, size_t *dense, size_t *topk) {
    const int n = ANSWER_N, E = ANSWER_E;
    char dir[] = "/tmp/attn-bench-http-XXXXXX", path[96], threads[16];
    memset(dense, 0, ANS_COUNT * sizeof *dense);
    memset(topk, 0, ANS_COUNT * sizeof *topk);
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/bench.safetensors", dir);
    snprintf(threads, sizeof threads, "%d", o->threads);
    const size_t nx = (size_t)n * E, raw_len = nx * sizeof(float);
    float *x = malloc(raw_len);
    char *b64 = malloc(base64_encoded_len(raw_len) + 1);
    buf att, v2j, v2b;
    buf_init(&att, (size_t)1 << 30), buf_init(&v2j, (size_t)1 << 30),
        buf_init(&v2b, (size_t)1 << 30);
    daemon_proc d = {0};
    char model[128];
    snprintf(model, sizeof model, "bench=%s", path);
    const char *args[] = {"--model",    model,     "--threads", threads, "--max-response-bytes",
                          "4294967296", "--no-ui", NULL};
    if (!x || !b64 || write_layer(path, E, ANSWER_H)) {
        fprintf(stderr, "bench: cannot write the layer for the HTTP sizes\n");
        goto out;
    }
    setenv("ATTN_SERVER_BIN", o->server, 1);
    if (daemon_start(&d, args)) {
        fprintf(stderr, "bench: %s did not start (--server)\n", o->server);
        goto out;
    }
    bench_fill(x, nx, SEED_X, 1.0f);
    b64[base64_encode(b64, x, raw_len)] = '\0';
    for (int form = 0; form < 2; form++) { /* dense, then top-k */
        size_t *into = form ? topk : dense;
        for (int enc = 0; enc < 2; enc++) { /* /attend, float then base64 */
            att.len = 0;
            buf_printf(
                &att,
                "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[%d,%d],\"base64\":\"%s\"},"
                "\"encoding_format\":\"%s\"",
                n, E, b64, enc ? "base64" : "float");
            if (form) buf_printf(&att, ",\"weights_topk\":%d", ANSWER_K);
            buf_puts(&att, "}");
            fprintf(stderr, "bench: answer of /attend %s, %s...\n", enc ? "base64" : "float",
                    form ? "top-k" : "dense");
            into[enc ? ANS_BASE64 : ANS_FLOAT] =
                answer_bytes(&d, "/attend", "application/json", NULL, att.data, att.len);
        }
        const char *outs = form ? "[{\"name\":\"attention_topk_indices\"},"
                                  "{\"name\":\"attention_topk_values\"}]"
                                : "[{\"name\":\"attention_weights\"}]";
        char params[96];
        snprintf(params, sizeof params, form ? "\"weights_topk\":%d" : "\"causal\":false",
                 ANSWER_K);
        for (int bin = 0; bin < 2; bin++) { /* v2: JSON data, then binary both ways */
            buf *b = bin ? &v2b : &v2j;
            b->len = 0;
            buf_printf(b,
                       "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":"
                       "\"FP32\",\"parameters\":{\"binary_data_size\":%zu}}],"
                       "\"parameters\":{%s%s},\"outputs\":%s}",
                       n, E, raw_len, params, bin ? ",\"binary_data_output\":true" : "", outs);
            char hl[80];
            snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", b->len);
            buf_append(b, x, raw_len);
            fprintf(stderr, "bench: answer of v2 %s, %s...\n", bin ? "binary" : "JSON",
                    form ? "top-k" : "dense");
            into[bin ? ANS_V2_BINARY : ANS_V2_JSON] = answer_bytes(
                &d, "/v2/models/bench/infer", "application/octet-stream", hl, b->data, b->len);
        }
    }
out:
    if (d.pid) daemon_stop(&d, SIGTERM, 60);
    buf_free(&att), buf_free(&v2j), buf_free(&v2b);
    free(x);
    free(b64);
    unlink(path);
    rmdir(dir);
}

/* Ours alone, call after call, for at least B2B_S (and 5 calls), with the
 * FMA peak measured just before and just after: the rate a server keeps
 * while requests queue, which the alternation above (a 48 MB sgemm between
 * turns, PyTorch between rounds) does not show. The median of single calls
 * in *ms and the higher of the two peaks in *peak; 0 on success. */
#define B2B_S 1.0
/* The vectors the FMA peak is measured with: the widest the CPU has (NULL),
 * except under the engine's AVX2 kernel or row passes on a CPU that also
 * has AVX-512 (ATTN_ISA=avx2, what an AVX2-only CPU runs), whose limit is
 * the AVX2 peak. */
static const char *peak_isa(void) {
    return strcmp(attn_gemm_kernel(), "avx2") == 0 || attn_isa_now() == ATTN_ISA_AVX2 ? "AVX2"
                                                                                     : NULL;
}

/* Each call also reports its phases' times (attn_run_timed, the same
 * pass): ph_ms[k], the median of phase k's over the calls; ph_ms[ATTN_PH_COUNT],
 * of the rest of each call (outside the projections, attention and the
 * out-projection). */
static int back_to_back(forward_ctx *f, attn_pool *pool, double *ms, double *peak, int *calls,
                        double ph_ms[ATTN_PH_COUNT + 1]) {
    static double t[MAX_RUNS], ph[ATTN_PH_COUNT + 1][MAX_RUNS];
    fma_peak p0 = fma_peak_measure(pool, peak_isa(), 0.02, 5);
    if (forward_run(f)) return -1; /* warm */
    int k = 0;
    double start = bench_now_s();
    while (k < MAX_RUNS && (k < 5 || bench_now_s() - start < B2B_S)) {
        attn_phase_times pt;
        double t0 = bench_now_s();
        if (forward_run_timed(f, &pt)) return -1;
        t[k] = bench_now_s() - t0;
        for (int p = 0; p < ATTN_PH_COUNT; p++) ph[p][k] = pt.s[p];
        ph[ATTN_PH_COUNT][k] = t[k] - pt.s[ATTN_PH_PROJ] - pt.s[ATTN_PH_ATTN] - pt.s[ATTN_PH_OUT];
        k++;
    }
    fma_peak p1 = fma_peak_measure(pool, peak_isa(), 0.02, 5);
    *ms = bench_median(t, k) * 1e3;
    for (int p = 0; p <= ATTN_PH_COUNT; p++) ph_ms[p] = bench_median(ph[p], k) * 1e3;
    *peak = p0.gflops > p1.gflops ? p0.gflops : p1.gflops;
    *calls = k;
    return 0;
}

/* -------------------------------------------------------------------- main */

typedef struct {
    double ours_ms, torch_ms, gflops, maxdiff;
    double turn_ms;      /* ours, the median of the turns' means (time_paired) */
    double sgemm_gflops; /* the pool's 2048^3 sgemm, timed alternately with ours */
    double pct, ratio;   /* medians over the rounds of % of sgemm and PyTorch/ours */
    double ceiling;      /* PyTorch's time over our FLOPs' time at the sgemm rate (median) */
    double peak_gflops;  /* the pool's FMA peak, measured just before the case */
    double peak_pct;     /* our GFLOPS as % of that */
    double b2b_ms;       /* n >= PEAK_N: ours back to back, the median of single calls */
    double b2b_peak;     /* the FMA peak just before and after those calls, the higher */
    double b2b_ph_ms[ATTN_PH_COUNT + 1]; /* those calls' phases and rest (back_to_back) */
    int b2b_calls;
    int ours_runs, torch_runs;
    long torch_rss_kib;
    bool ran;
} case_result;

/* Where the back-to-back calls' time went, phase by phase: each phase's
 * median, its share of the call, and the rate of the phases that do the
 * FLOPs (phase_flops) against the same FMA peak. The rest of a call
 * (packing K and V, the pass's setup) is what the three leave. */
static void phases_table(const bench_opts *o, const case_result *res) {
    printf("Where the back-to-back calls' time goes, phase by phase (each phase's median over "
           "the same calls, from the end of the one before to its slowest worker's last task; "
           "the rest: packing K and V and the pass's setup; share: of the calls' median):\n\n");
    printf("| n | E | H | weights | phase | ms | share | GFLOPS | %% of FMA peak |\n");
    printf("|---:|---:|---:|:---:|:---|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < NCASES; k++) {
        const bench_case *c = &bench_cases[k];
        const case_result *r = &res[k];
        if ((o->quick && c->big) || c->n < PEAK_N || !r->ran || !(r->b2b_ms > 0)) continue;
        static const attn_phase_id main_ph[3] = {ATTN_PH_PROJ, ATTN_PH_ATTN, ATTN_PH_OUT};
        const double rest = r->b2b_ph_ms[ATTN_PH_COUNT];
        for (int i = 0; i < 3; i++) {
            const double ms = r->b2b_ph_ms[main_ph[i]],
                         gf = ms > 0 ? phase_flops(c, main_ph[i]) / (ms * 1e-3) * 1e-9 : 0.0;
            printf("| %d | %d | %d | %s | %s | %.3f | %.0f%% | %.1f | %.0f%% |\n", c->n, c->E, c->H,
                   weights_label(c), attn_phase_name(main_ph[i]), ms,
                   100.0 * ms / r->b2b_ms, gf, 100.0 * gf / r->b2b_peak);
        }
        printf("| %d | %d | %d | %s | the rest | %.3f | %.0f%% | | |\n", c->n, c->E, c->H,
               weights_label(c), rest, 100.0 * rest / r->b2b_ms);
    }
    printf("\n");
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_attention [--quick] [--threads N] [--no-torch] [--strict]\n"
            "         [--min-time S] [--python PATH] [--torch-script PATH] [--server PATH]\n"
            "  --quick         fewer repeats, no 8192-token case (while others use the machine)\n"
            "  --threads N     pool threads, and torch's (default: online CPUs)\n"
            "  --no-torch      skip the PyTorch comparison\n"
            "  --strict        exit 1 when a target is missed\n"
            "  --min-time S    time each side at least S seconds per case (default 1, quick 0.2)\n"
            "  --python PATH   interpreter with torch (default /usr/bin/python3)\n"
            "  --torch-script  default tests/bench/torch_mha.py\n"
            "  --server PATH   the daemon for the answer sizes over HTTP (bin/attention-server)\n");
}

static const char *pass_fail(int ok) {
    return ok < 0 ? "NOT MEASURED" : ok ? "PASS" : "FAIL";
}

int main(int argc, char **argv) {
    if ((argc == 6 || argc == 8) && strcmp(argv[1], "--rss-case") == 0)
        return rss_child(argc, argv);
    attn_blas_reexec_if_needed(argv);

    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    bench_opts o = {.threads = ncpu > 0 ? (int)ncpu : 1,
                    .torch = true,
                    .min_time = -1,
                    .python = "/usr/bin/python3",
                    .script = "tests/bench/torch_mha.py",
                    .server = "bin/attention-server"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0)
            o.quick = true;
        else if (strcmp(a, "--no-torch") == 0)
            o.torch = false;
        else if (strcmp(a, "--strict") == 0)
            o.strict = true;
        else if (strcmp(a, "--threads") == 0 && v)
            o.threads = atoi(argv[++i]);
        else if (strcmp(a, "--min-time") == 0 && v)
            o.min_time = atof(argv[++i]);
        else if (strcmp(a, "--python") == 0 && v)
            o.python = argv[++i];
        else if (strcmp(a, "--torch-script") == 0 && v)
            o.script = argv[++i];
        else if (strcmp(a, "--server") == 0 && v)
            o.server = argv[++i];
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (o.threads < 1 || o.threads > 1024) {
        fprintf(stderr, "bench: --threads must be 1..1024\n");
        return 2;
    }
    if (o.min_time < 0) o.min_time = o.quick ? 0.2 : 1.0;
    o.min_runs = o.quick ? 3 : 5;
    signal(SIGPIPE, SIG_IGN); /* a dead torch shows as a failed write */

    char err[ATTN_ERRLEN];
    attn_blas_info info;
    attn_status st = attn_blas_init(&info, err, sizeof err);
    if (st) {
        fprintf(stderr, "bench: BLAS: %s: %s\n", attn_status_name(st), err);
        return 1;
    }
    double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
    getloadavg(load0, 3);

    torch_proc torch = {0};
    char tmpdir[] = "/tmp/attn-bench-XXXXXX", out_path[64], torch_banner[256] = "";
    bool made_tmpdir = false;
    if (o.torch) {
        if (!mkdtemp(tmpdir)) {
            perror("bench: mkdtemp");
            return 1;
        }
        made_tmpdir = true;
        snprintf(out_path, sizeof out_path, "%s/out.f32", tmpdir);
        if (torch_start(&torch, &o)) {
            torch_stop(&torch);
            o.torch = false;
        } else {
            snprintf(torch_banner, sizeof torch_banner, "%s", torch.banner);
            fprintf(stderr, "bench: PyTorch: %s\n", torch_banner);
        }
    }

    attn_pool *pool;
    if ((st = attn_pool_create(o.threads, &pool, err, sizeof err))) {
        fprintf(stderr, "bench: pool: %s\n", err);
        return 1;
    }

    sgemm_ctx sg;
    if (!sgemm_setup(&sg, pool)) {
        fprintf(stderr, "bench: out of memory for the sgemm reference\n");
        return 1;
    }

    char cpu_name[128];
    fma_cpu_name(cpu_name, sizeof cpu_name);
    fma_peak peak0 = fma_peak_measure(pool, peak_isa(), 0.05, 5);
    fma_peak peak_avx2 = fma_peak_measure(pool, "AVX2", 0.05, 5);
    fprintf(stderr, "bench: %s; the engine's kernel %s, row passes %s; FMA peak %s %.0f GFLOPS",
            cpu_name, attn_gemm_kernel(), attn_isa_name(attn_isa_now()), peak0.isa, peak0.gflops);
    if (peak_avx2.lanes && peak0.lanes != peak_avx2.lanes)
        fprintf(stderr, ", AVX2 %.0f GFLOPS", peak_avx2.gflops);
    fprintf(stderr, "\n");

    const int rounds = o.quick ? 2 : MAX_ROUNDS;
    const int round_runs = (o.min_runs + rounds - 1) / rounds;
    const double round_time = o.min_time / rounds;
    case_result res[NCASES];
    memset(res, 0, sizeof res);
    int failed_match = 0;
    for (size_t k = 0; k < NCASES; k++) {
        const bench_case *c = &bench_cases[k];
        case_result *r = &res[k];
        if (o.quick && c->big) continue;
        fprintf(stderr, "bench: n=%d E=%d H=%d weights=%s...\n", c->n, c->E, c->H,
                weights_label(c));
        forward_ctx f;
        if ((st = case_setup(&f, c, pool))) {
            fprintf(stderr, "bench: %s\n", f.err);
            case_teardown(&f);
            continue;
        }
        /* the physical limit, in the same moments as the case: noise only
         * ever lowers a measurement of it, so the best of the run's
         * measurements so far is the limit */
        fma_peak pk = fma_peak_measure(pool, peak_isa(), 0.02, 5);
        if (pk.gflops > peak0.gflops) peak0.gflops = pk.gflops;
        r->peak_gflops = pk.gflops;
        /* Rounds of ours (alternating with the sgemm) then PyTorch, so drift
         * of the machine's speed hits both sides alike; each figure is the
         * median over the rounds, each ratio the median of the rounds'. */
        double t_q[MAX_ROUNDS], tm_q[MAX_ROUNDS], ts_q[MAX_ROUNDS], tt_q[MAX_ROUNDS],
            ratio_q[MAX_ROUNDS], pct_q[MAX_ROUNDS], ceil_q[MAX_ROUNDS];
        int nq = 0, torch_ok = o.torch;
        r->torch_ms = r->maxdiff = -1.0;
        for (int q = 0; q < rounds; q++) {
            settle();
            int runs = 0;
            if (time_paired(forward_run, &f, sgemm_run, &sg, round_runs, round_time, &tm_q[q],
                            &ts_q[q], &t_q[q], &runs))
                break;
            r->ours_runs += runs;
            pct_q[q] = 100.0 * (bench_flops(c) / t_q[q]) / (SGEMM_FLOPS / ts_q[q]);
            nq = q + 1;
            if (!torch_ok) continue;
            settle();
            tt_q[q] = torch_case(&torch, c, round_runs, round_time, q == 0 ? out_path : "-", &runs,
                                 &r->torch_rss_kib);
            r->torch_runs += runs;
            if (q == 0) { /* the output of the first round is compared with ours */
                if (tt_q[q] > 0) {
                    r->maxdiff = compare_file(out_path, f.out, (size_t)c->n * c->E);
                    if (!(r->maxdiff >= 0 && r->maxdiff <= MATCH_TOL)) failed_match = 1;
                }
                unlink(out_path);
            }
            if (!(tt_q[q] > 0)) {
                torch_ok = 0;
                continue;
            }
            ratio_q[q] = tt_q[q] / (t_q[q] * 1e3);
            /* what a forward pass running wholly at the sgemm rate would get */
            ceil_q[q] = tt_q[q] * 1e-3 / (bench_flops(c) * ts_q[q] / SGEMM_FLOPS);
        }
        if (nq == rounds) {
            r->ran = true;
            double t = bench_median(t_q, nq);
            r->ours_ms = t * 1e3;
            r->turn_ms = bench_median(tm_q, nq) * 1e3;
            r->gflops = bench_flops(c) / t * 1e-9;
            r->sgemm_gflops = SGEMM_FLOPS / bench_median(ts_q, nq) * 1e-9;
            r->pct = bench_median(pct_q, nq);
            r->peak_pct = -1; /* against the run's best peak, once all are measured */
            if (torch_ok) {
                r->torch_ms = bench_median(tt_q, nq);
                r->ratio = bench_median(ratio_q, nq);
                r->ceiling = bench_median(ceil_q, nq);
            }
        }
        settle();
        if (r->ran && c->n >= PEAK_N &&
            back_to_back(&f, pool, &r->b2b_ms, &r->b2b_peak, &r->b2b_calls, r->b2b_ph_ms))
            r->b2b_ms = 0;
        settle();
        case_teardown(&f);
    }

    /* the long-context forms, against the pass without weights */
    form_result forms[NFORMS];
    memset(forms, 0, sizeof forms);
    forms_run(&o, pool, forms);

    /* batching across requests, in-process */
    batch_result batch;
    batch_run(&o, pool, &batch);

    sgemm_teardown(&sg);
    attn_pool_destroy(pool);
    torch_stop(&torch);
    if (made_tmpdir) rmdir(tmpdir);

    long rss_kib = -1;
    const bench_case *big = NULL;
    for (size_t k = 0; k < NCASES; k++)
        if (bench_cases[k].big) big = &bench_cases[k];
    if (!o.quick && big) {
        fprintf(stderr, "bench: peak RSS of n=%d E=%d H=%d in a child...\n", big->n, big->E,
                big->H);
        rss_kib = rss_measure(big, o.threads, 0, false);
    }
    long rss_topk_kib = -1;
    const form_case *big_topk = NULL;
    for (size_t k = 0; k < NFORMS; k++)
        if (form_cases[k].big && form_cases[k].topk > 0 && !form_cases[k].average)
            big_topk = &form_cases[k];
    if (!o.quick && big_topk) {
        fprintf(stderr, "bench: peak RSS of n=%d E=%d H=%d top-%d in a child...\n", big_topk->n,
                big_topk->E, big_topk->H, big_topk->topk);
        bench_case c = {big_topk->n, big_topk->E, big_topk->H, false, true, false};
        rss_topk_kib = rss_measure(&c, o.threads, big_topk->topk, false);
    }
    /* the answers a client receives, from the daemon */
    size_t ans_dense[ANS_COUNT], ans_topk[ANS_COUNT];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    answer_sizes(&o, ans_dense, ans_topk);
    curl_global_cleanup();
    getloadavg(load1, 3);
    for (size_t k = 0; k < NCASES; k++)
        if (res[k].ran && peak0.gflops > 0) res[k].peak_pct = 100.0 * res[k].gflops / peak0.gflops;

    /* ----------------------------------------------------------- report */
    printf("## attention-server forward pass%s\n\n", o.quick ? " (quick mode)" : "");
    printf("CPU: %s, %d pool threads; FMA peak measured with %s (%d floats per vector): "
           "%.0f GFLOPS for the pool (%.0f per thread)",
           cpu_name, o.threads, peak0.isa, peak0.lanes, peak0.gflops, peak0.gflops / o.threads);
    if (peak_avx2.lanes && peak0.lanes != peak_avx2.lanes)
        printf("; with AVX2 only: %.0f GFLOPS", peak_avx2.gflops);
    printf(".\n");
    if (attn_gemm_nr() > 0)
        printf("Self-attention, batch 1, %d pool threads; ours: the matrix products on the "
               "engine's own %s kernel (core/gemm.c), except the attention products of inputs "
               "too small for its panels (the 5-token case), on OpenBLAS's %s kernel (%s).\n",
               o.threads, attn_gemm_kernel(), info.corename, info.reason);
    else
        printf("Self-attention, batch 1, %d pool threads; ours: OpenBLAS %s kernel (%s), "
               "1 BLAS thread per worker.\n",
               o.threads, info.corename, info.reason);
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && *forced && info.cpu_best[0] && strcasecmp(forced, info.cpu_best) != 0)
        printf("Note: OPENBLAS_CORETYPE=%s is set in this environment, so OpenBLAS uses that "
               "kernel; by cpuid this CPU supports %s (run with `env -u OPENBLAS_CORETYPE` to "
               "measure OpenBLAS's own choice).\n",
               forced, info.cpu_best);
    if (torch_banner[0])
        printf("PyTorch: %s (tests/bench/torch_mha.py: nn.MultiheadAttention, eval, "
               "inference_mode, same seeded weights and input; outputs compared).\n",
               torch_banner);
    else
        printf("PyTorch: not measured.\n");
    printf("%% of sgemm: our GFLOPS over those of a 2048^3 sgemm split over the same pool, "
           "timed in alternation with ours in each case (the sgemm column): turns of ours "
           "repeated for about %g s, then one sgemm.\n",
           BATCH_S);
    printf("ceiling: PyTorch's time over the time our FLOPs take at the sgemm rate, i.e. the "
           "largest PyTorch/ours any forward pass built on this sgemm could reach%s.\n",
           attn_gemm_nr() > 0 ? " (ours runs on the engine's own kernel, not on this sgemm, "
                                "so it can pass it)"
                              : "");
    printf("Each case: %d rounds of ours (alternating with the sgemm) then PyTorch, each side "
           ">= %d runs and >= %g s per round; times are medians over all rounds, %% of sgemm "
           "and PyTorch/ours the medians of the rounds' own ratios. Load average: %.2f at "
           "start, %.2f at end.\n",
           rounds, round_runs, round_time, load0[0], load1[0]);
    printf("ours ms: the median of our single calls, each timed on its own, as PyTorch's are "
           "(calls under %g ms: of the turns' means); turns ms: the median of the turns' means, "
           "each turn's first call coming just after the sgemm has been through the caches.\n\n",
           CALL_MIN_S * 1e3);

    printf("%% of peak: our GFLOPS over the pool's FMA peak (independent vector FMA chains on "
           "every pool thread, the widest vectors the CPU has, or AVX2 under the engine's AVX2 "
           "kernel): the best of its measurements "
           "in this run, at the start and just before each case (the FMA peak column: that "
           "case's own measurement, lower when the machine was busy). The causal cases "
           "count the FLOPs of the keys the mask leaves (query i sees i + 1 keys: attention "
           "(n + 1) / 2n of the unmasked case's); they are judged against PyTorch only, which "
           "is given the same mask as a boolean attn_mask.\n\n");
    printf("| n | E | H | weights | ours ms | turns ms | ours GFLOPS | FMA peak GFLOPS | "
           "%% of peak | sgemm GFLOPS | %% of sgemm | PyTorch ms | PyTorch/ours | ceiling | "
           "max abs diff |\n");
    printf("|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int speed_ok = 1, sgemm_ok = 1, speed_measured = 1, sgemm_measured = 0;
    int peak_ok = 1, peak_measured = 0;
    double worst_peak = INFINITY;
    double worst_ratio = INFINITY, worst_pct = INFINITY;
    char beyond[512] = ""; /* cases whose ceiling is under the speed-up target */
    for (size_t k = 0; k < NCASES; k++) {
        const bench_case *c = &bench_cases[k];
        case_result *r = &res[k];
        if (o.quick && c->big) continue;
        printf("| %d | %d | %d | %s ", c->n, c->E, c->H, weights_label(c));
        if (!r->ran) {
            printf("| failed | | | | | | | | | | |\n");
            speed_ok = sgemm_ok = 0;
            continue;
        }
        double pct = r->pct;
        printf("| %.3f | %.3f | %.1f | %.0f | %.0f%% | %.1f | %.0f%% ", r->ours_ms, r->turn_ms,
               r->gflops, r->peak_gflops, r->peak_pct, r->sgemm_gflops, pct);
        if (c->n >= PEAK_N && !c->causal && r->peak_pct >= 0) {
            peak_measured = 1;
            if (r->peak_pct < worst_peak) worst_peak = r->peak_pct;
            if (r->peak_pct < TARGET_PEAK_PCT) peak_ok = 0;
        }
        if (r->torch_ms > 0) {
            double ratio = r->ratio;
            printf("| %.3f | %.2fx | %.2fx | %.2g |\n", r->torch_ms, ratio, r->ceiling, r->maxdiff);
            if (ratio < worst_ratio) worst_ratio = ratio;
            if (ratio < TARGET_SPEEDUP) speed_ok = 0;
            if (r->ceiling < TARGET_SPEEDUP) {
                size_t l = strlen(beyond);
                snprintf(beyond + l, sizeof beyond - l, "%s(%d, %d, %d, weights %s) %.2fx",
                         l ? ", " : "", c->n, c->E, c->H, weights_label(c), r->ceiling);
            }
        } else {
            printf("| n/a | n/a | n/a | n/a |\n");
            speed_measured = 0;
        }
        if (c->n >= LARGE_N && !c->causal) {
            sgemm_measured = 1;
            if (pct < worst_pct) worst_pct = pct;
            if (pct < TARGET_SGEMM_PCT) sgemm_ok = 0;
        }
    }
    printf("\n");
    int b2b_ok = 1, b2b_measured = 0;
    double worst_b2b = INFINITY;
    printf("Back to back, n >= %d: ours alone, call after call for >= %g s (the median of "
           "single calls), against the FMA peak measured just before and just after (the "
           "higher): the rate while requests queue.\n\n",
           PEAK_N, B2B_S);
    printf("| n | E | H | weights | ms | GFLOPS | FMA peak GFLOPS | %% of peak | calls |\n");
    printf("|---:|---:|---:|:---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < NCASES; k++) {
        const bench_case *c = &bench_cases[k];
        const case_result *r = &res[k];
        if ((o.quick && c->big) || c->n < PEAK_N || !r->ran) continue;
        if (!(r->b2b_ms > 0 && r->b2b_peak > 0)) {
            printf("| %d | %d | %d | %s | failed | | | | |\n", c->n, c->E, c->H,
                   weights_label(c));
            if (!c->causal) b2b_ok = 0;
            continue;
        }
        const double gf = bench_flops(c) / (r->b2b_ms * 1e-3) * 1e-9,
                     pct = 100.0 * gf / r->b2b_peak;
        printf("| %d | %d | %d | %s | %.3f | %.1f | %.0f | %.0f%% | %d |\n", c->n, c->E, c->H,
               weights_label(c), r->b2b_ms, gf, r->b2b_peak, pct, r->b2b_calls);
        if (c->causal) continue; /* reported, not judged (the targets' cases have no mask) */
        b2b_measured = 1;
        if (pct < worst_b2b) worst_b2b = pct;
        if (pct < TARGET_PEAK_PCT) b2b_ok = 0;
    }
    printf("\n");
    phases_table(&o, res);
    if (rss_kib > 0)
        printf("Peak RSS, n=%d E=%d H=%d without weights, alone in a child process: %.1f MiB "
               "(input and output alone are %.0f MiB).\n",
               big->n, big->E, big->H, rss_kib / 1024.0,
               2.0 * big->n * big->E * sizeof(float) / (1024.0 * 1024.0));
    for (size_t k = 0; k < NCASES; k++)
        if (bench_cases[k].big && res[k].torch_rss_kib > 0)
            printf("PyTorch's process peaked at %.1f MiB after the same case.\n",
                   res[k].torch_rss_kib / 1024.0);

    /* the long-context forms */
    printf("\n## Attention weights at long context\n\n");
    printf("Each form against the pass without weights on the same input and pool, timed in "
           "alternation (medians of >= %d turns each, >= %g s); same layer and seeded input as "
           "above.\n\n",
           o.min_runs, o.min_time);
    printf("| n | E | H | weights | ms | no weights ms | ratio | turns |\n");
    printf("|---:|---:|---:|:---|---:|---:|---:|---:|\n");
    double topk_ratio = -1.0;
    for (size_t k = 0; k < NFORMS; k++) {
        const form_case *fc = &form_cases[k];
        if (o.quick && fc->big) continue;
        char name[64];
        printf("| %d | %d | %d | %s ", fc->n, fc->E, fc->H, form_name(fc, name, sizeof name));
        if (!forms[k].ran) {
            printf("| failed | | | |\n");
            continue;
        }
        printf("| %.1f | %.1f | %.2f | %d |\n", forms[k].ms, forms[k].base_ms, forms[k].ratio,
               forms[k].runs);
        if (fc == big_topk) topk_ratio = forms[k].ratio;
    }
    printf("\n");
    if (rss_kib > 0 && rss_topk_kib > 0)
        printf("Peak RSS, n=%d E=%d H=%d, alone in a child process: top-%d per head %.1f MiB, "
               "without weights %.1f MiB (its dense weights alone would be %.0f MiB).\n",
               big_topk->n, big_topk->E, big_topk->H, big_topk->topk, rss_topk_kib / 1024.0,
               rss_kib / 1024.0,
               (double)big_topk->H * big_topk->n * big_topk->n * 4 / (1024.0 * 1024.0));
    printf("\nAnswer bytes over HTTP (the daemon at --server on the same layer, n=%d E=%d H=%d, "
           "no compression): top-%d against dense weights. /attend answers carry the output "
           "[n,E] in both; the v2 requests ask for the weights outputs only.\n\n",
           ANSWER_N, ANSWER_E, ANSWER_H, ANSWER_K);
    printf("| answer | dense bytes | top-k bytes | top-k / dense |\n|:---|---:|---:|---:|\n");
    double best_pct = INFINITY;
    int answers_ok = 1, answers_measured = 1;
    for (int i = 0; i < ANS_COUNT; i++) {
        if (!ans_dense[i] || !ans_topk[i]) {
            printf("| %s | failed | | |\n", answer_names[i]);
            answers_measured = 0;
            continue;
        }
        double pct = 100.0 * (double)ans_topk[i] / (double)ans_dense[i];
        printf("| %s | %zu | %zu | %.2f%% |\n", answer_names[i], ans_dense[i], ans_topk[i], pct);
        if (pct < best_pct) best_pct = pct;
        if (pct >= TARGET_ANSWER_PCT) answers_ok = 0;
    }
    printf("\nThe floor of any top-k answer that carries an int32 index beside each float32 value "
           "is 2k/M of the dense weights' bytes: %.2f%% here (binary and base64 reach it); text "
           "indices are shorter than text weights, so JSON comes closer to k/M (%.2f%%).\n",
           200.0 * ANSWER_K / ANSWER_N, 100.0 * ANSWER_K / ANSWER_N);

    printf("\n## Batching across requests, in-process\n\n");
    printf("%d inputs of make bench-http's medium shape (n=%d, E=%d, H=%d, no weights): one "
           "attn_forward each, against one attn_forward_ragged pass over all of them (what the "
           "daemon's --batch-max-requests does with requests waiting together), timed in "
           "alternation (medians of %d turns). The server's gain from batching cannot exceed "
           "this: its 1.3x target (make bench-http) needs at least that much here, and more "
           "where the rest of a request's cost (HTTP, text) stays.\n\n",
           BATCH_K, BATCH_N, BATCH_E, BATCH_H, batch.runs);
    if (batch.ran) {
        const bench_case bc = {BATCH_N, BATCH_E, BATCH_H, false, false, false};
        const double fl = BATCH_K * bench_flops(&bc);
        const double g1 = fl / (batch.one_ms * 1e6), g2 = fl / (batch.batch_ms * 1e6);
        /* whole requests at the one-thread rate, against the one pass
         * timed in the same rounds; the bound on the gain is a ratio of
         * ratios, each from its own rounds */
        const double ideal = batch.alone_ms / batch.workers, reach = ideal / batch.pass2_ms,
                     g3 = fl / (batch.alone_ms * 1e6);
        printf("| inputs | one by one ms | one pass ms | gain | GFLOPS one by one / one pass | "
               "%% of FMA peak |\n|---:|---:|---:|---:|---:|---:|\n");
        printf("| %d | %.3f | %.3f | %.2fx | %.0f / %.0f | %.0f%% / %.0f%% |\n", BATCH_K,
               batch.one_ms, batch.batch_ms, batch.one_ms / batch.batch_ms, g1, g2,
               100.0 * g1 / peak0.gflops, 100.0 * g2 / peak0.gflops);
        printf("\nThe same passes on one thread without the pool, in alternation with the one "
               "pass: %.3f ms against %.3f ms for the one pass in those rounds (%.0f GFLOPS on "
               "one thread, %.0f%% of a thread's share of the FMA peak measured at the start). "
               "%d workers each running whole requests at that rate, with no hand-over or "
               "barrier at all, would take %.3f ms: the one pass reaches %.0f%% of that, so the "
               "most any batching can gain with these kernels is %.2fx.\n",
               batch.alone_ms, batch.pass2_ms, g3, 100.0 * g3 / (peak0.gflops / batch.workers),
               batch.workers, ideal, 100.0 * reach, batch.one_ms / batch.batch_ms / reach);
        /* The one pass runs slower after the one-thread turns than after
         * pooled calls (2026-12-05: 5.0-9.3 ms against 4.2-4.8 in the same
         * runs). The cause (2026-12-06, a harness recording sched_getcpu()
         * as each task starts): after the calling thread has kept one CPU
         * busy, the two workers woken together sometimes land on the same
         * CPU and share it for their first 6-7 tasks, until the scheduler
         * moves one; those passes took 7.2-9.9 ms, the others 3.6-5.2.
         * Workers pinned one a CPU never did (p90 4.5 ms against 7.5), but
         * the server does not pin them (docs/PERFORMANCE.md: its I/O
         * threads then lose the CPU they share with a pinned worker). So
         * the bound above can be high, and it is printed again with the one
         * pass as timed beside the pooled calls: one_ms / ideal, whose two
         * sides come from different rounds. */
        printf("\nWith the one pass as timed beside the one-by-one pooled calls instead (%.3f ms; "
               "after the one-thread passes, the two workers woken together sometimes share one "
               "CPU for a few milliseconds): %.0f%% of the ideal, a bound of %.2fx.\n",
               batch.batch_ms, 100.0 * ideal / batch.batch_ms, batch.one_ms / ideal);
    } else {
        printf("(failed: see stderr)\n");
    }

    /* A quick run never measures the 8192 case, so it cannot pass targets
     * that depend on it. */
    int speed = speed_measured && !(o.quick && big) ? speed_ok : (speed_ok ? -1 : 0);
    int pct_ok = sgemm_measured && !(o.quick && big) ? sgemm_ok : (sgemm_ok ? -1 : 0);
    int rss_ok = rss_kib > 0 ? rss_kib / 1024.0 < TARGET_RSS_MIB : -1;
    printf("\nTargets%s:\n\n", o.quick ? " (quick mode: the 8192-token case is skipped)" : "");
    char worst[32] = "";
    if (isfinite(worst_ratio)) snprintf(worst, sizeof worst, " (worst %.2fx)", worst_ratio);
    printf("- %s: >= %.1fx faster than PyTorch on every case%s\n", pass_fail(speed), TARGET_SPEEDUP,
           worst);
    if (beyond[0])
        printf("  Out of reach of any sgemm-bound forward pass on this machine in this run "
               "(PyTorch's time over the time of our FLOPs at 100%% of the sgemm rate): %s.\n",
               beyond);
    worst[0] = 0;
    if (isfinite(worst_peak)) snprintf(worst, sizeof worst, " (worst %.0f%%)", worst_peak);
    printf("- %s: >= %.0f%% of the pool's %s FMA peak on every case with n >= %d (no mask)%s\n",
           pass_fail(peak_measured ? peak_ok : -1), TARGET_PEAK_PCT, peak0.isa, PEAK_N, worst);
    worst[0] = 0;
    if (isfinite(worst_b2b)) snprintf(worst, sizeof worst, " (worst %.0f%%)", worst_b2b);
    printf("- %s: the same, back to back (the FMA peak of the same minute)%s\n",
           pass_fail(b2b_measured ? b2b_ok : -1), worst);
    worst[0] = 0;
    if (isfinite(worst_pct)) snprintf(worst, sizeof worst, " (worst %.0f%%)", worst_pct);
    printf("- %s: >= %.0f%% of the sgemm rate on the two largest shapes (n >= %d, no mask)%s\n",
           pass_fail(pct_ok), TARGET_SGEMM_PCT, LARGE_N, worst);
    if (rss_kib > 0)
        printf("- %s: 8192-token case under %.0f MiB peak RSS (%.1f MiB)\n", pass_fail(rss_ok),
               TARGET_RSS_MIB, rss_kib / 1024.0);
    else
        printf("- %s: 8192-token case under %.0f MiB peak RSS\n", pass_fail(rss_ok),
               TARGET_RSS_MIB);
    int topk_time_ok = topk_ratio > 0 ? topk_ratio <= TARGET_TOPK_RATIO : -1;
    int topk_rss_ok = rss_topk_kib > 0 ? rss_topk_kib / 1024.0 < TARGET_RSS_MIB : -1;
    int answer_ok = answers_measured ? answers_ok : -1;
    if (big_topk) {
        printf("- %s: top-%d per head at n=%d: time / time without weights <= %.1f",
               pass_fail(topk_time_ok), big_topk->topk, big_topk->n, TARGET_TOPK_RATIO);
        if (topk_ratio > 0) printf(" (%.2f)", topk_ratio);
        printf("\n- %s: top-%d per head at n=%d under %.0f MiB peak RSS", pass_fail(topk_rss_ok),
               big_topk->topk, big_topk->n, TARGET_RSS_MIB);
        if (rss_topk_kib > 0) printf(" (%.1f MiB)", rss_topk_kib / 1024.0);
        printf("\n");
    }
    printf("- %s: n=%d top-%d answer under %.0f%% of the dense weights answer over HTTP, every "
           "way above",
           pass_fail(answer_ok), ANSWER_N, ANSWER_K, TARGET_ANSWER_PCT);
    if (isfinite(best_pct)) printf(" (smallest %.2f%%)", best_pct);
    printf("\n");
    if (failed_match)
        printf("\nOUTPUT MISMATCH: ours and PyTorch's differ by more than %g on a case "
               "(or PyTorch's output was unreadable); the times compare different things.\n",
               MATCH_TOL);

    if (failed_match) return 1;
    if (o.strict &&
        (speed != 1 || pct_ok != 1 || peak_ok != 1 || b2b_ok != 1 || (!o.quick && rss_ok != 1) ||
         answer_ok != 1 || (!o.quick && (topk_time_ok != 1 || topk_rss_ok != 1))))
        return 1;
    return 0;
}
