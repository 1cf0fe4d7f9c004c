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
 * The result is a markdown table on stdout followed by the targets, each
 * PASS or FAIL as measured; progress goes to stderr.
 *
 * The file is divided into: the seeded inputs shared with torch_mha.py,
 * timing, the sgemm reference, the PyTorch coprocess, the RSS child, main.
 *
 *     build/release/bench/bench_attention [--quick] [--threads N] [--no-torch]
 *         [--python /usr/bin/python3] [--torch-script tests/bench/torch_mha.py]
 *         [--min-time S] [--strict]
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "attention.h"
#include "blas.h"
#include "fma_peak.h"
#include "pool.h"
#include "status.h"
#include "weights.h"

typedef struct {
    int n, E, H;
    bool need_weights;
    bool big; /* skipped in --quick mode */
} bench_case;

static const bench_case bench_cases[] = {
    {5, 64, 4, true, false},        {5, 64, 4, false, false},
    {128, 256, 8, true, false},     {128, 256, 8, false, false},
    {512, 768, 12, true, false},    {512, 768, 12, false, false},
    {2048, 1024, 16, true, false},  {2048, 1024, 16, false, false},
    {8192, 1024, 16, false, true},
};
#define NCASES (sizeof bench_cases / sizeof bench_cases[0])

#define TARGET_SPEEDUP 1.5    /* torch time / ours, every case */
#define TARGET_SGEMM_PCT 70.0 /* % of the sgemm rate, cases with n >= 2048 */
#define TARGET_PEAK_PCT 80.0  /* % of the pool's FMA peak, cases with n >= PEAK_N */
#define PEAK_N 512
#define TARGET_RSS_MIB 512.0  /* peak RSS of the 8192-token case */
#define MATCH_TOL 1e-3        /* max |ours - torch| before the run is void */
#define LARGE_N 2048          /* the two largest shapes: n = 2048 and 8192 */

typedef struct {
    int threads;
    bool quick, torch, strict;
    double min_time;
    int min_runs;
    const char *python, *script;
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
static attn_status bench_make_weights(int E, int H, attn_weights **out, char *err,
                                      size_t errlen) {
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

/* Projections 2nE*3E, scores and P.V 2n*n*d per head each, out-projection
 * 2nE*E; softmax, biases and averaging are not counted. */
static double bench_flops(const bench_case *c) {
    double n = c->n, E = c->E;
    return 8.0 * n * E * E + 4.0 * n * n * E;
}

/* ------------------------------------------------------------------ timing */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int count) {
    qsort(v, (size_t)count, sizeof *v, cmp_double);
    return count % 2 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2]);
}

#define MAX_RUNS 1000
#define MAX_ROUNDS 3 /* rounds of ours-then-PyTorch per case (quick mode: 2) */

/* Time fa against fb in alternating turns: a turn runs fa `reps` times in
 * a row (enough for about BATCH_S, judged from one untimed warm-up run) and
 * then fb once (after its own untimed run). Until fa has had min_runs turns
 * and min_time seconds: the median per-call time of each side in *ta and
 * *tb, 0 on success. Both sides see the same moments of a shared, noisy
 * machine, so their ratio holds even when the machine's speed drifts. */
#define BATCH_S 0.05
static int time_paired(int (*fa)(void *), void *ca, int (*fb)(void *), void *cb, int min_runs,
                       double min_time, double *ta, double *tb, int *runs) {
    static double times_a[MAX_RUNS], times_b[MAX_RUNS];
    double t0 = now_s();
    if (fa(ca)) return -1;
    double once = now_s() - t0;
    if (fb(cb)) return -1;
    int reps = once >= BATCH_S ? 1 : once * 10000 < BATCH_S ? 10000 : (int)(BATCH_S / once) + 1;
    int k = 0;
    double spent_a = 0.0;
    while (k < MAX_RUNS && (k < min_runs || spent_a < min_time)) {
        t0 = now_s();
        for (int i = 0; i < reps; i++)
            if (fa(ca)) return -1;
        double t1 = now_s();
        if (fb(cb)) return -1;
        times_a[k] = (t1 - t0) / reps;
        times_b[k++] = now_s() - t1;
        spent_a += t1 - t0;
    }
    *runs = k;
    *ta = median(times_a, k);
    *tb = median(times_b, k);
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

#define SGEMM_N 2048
#define SGEMM_FLOPS (2.0 * SGEMM_N * (double)SGEMM_N * SGEMM_N)

/* The 2048^3 operands, or 0 on allocation failure. */
static int sgemm_setup(sgemm_ctx *s, attn_pool *pool) {
    size_t NN = (size_t)SGEMM_N * SGEMM_N;
    *s = (sgemm_ctx){pool, SGEMM_N, attn_pool_size(pool), malloc(NN * sizeof(float)),
                     malloc(NN * sizeof(float)), malloc(NN * sizeof(float))};
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
                    threads, NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) { /* our own environment as it was, for the RSS child */
        for (int i = 0; i < 3; i++) {
            if (saved[i]) setenv(vars[i], saved[i], 1);
            else unsetenv(vars[i]);
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
    fprintf(t->to, "case %d %d %d %d %d %g %s\n", c->n, c->E, c->H, c->need_weights ? 1 : 0,
            min_runs, min_time, out_path);
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
    float buf[4096];
    size_t done = 0, got;
    while (done < count && (got = fread(buf, sizeof *buf, 4096, f)) > 0) {
        for (size_t i = 0; i < got && done + i < count; i++) {
            double d = fabs((double)buf[i] - (double)ours[done + i]);
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
    attn_pool *pool;
    char err[ATTN_ERRLEN];
} forward_ctx;

static int forward_run(void *ctx) {
    forward_ctx *f = ctx;
    attn_status st = attn_forward(f->w, &f->in, f->out, f->weights, f->pool, f->err,
                                  sizeof f->err);
    if (st) fprintf(stderr, "bench: attn_forward: %s: %s\n", attn_status_name(st), f->err);
    return st != ATTN_OK;
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
    f->in = (attn_input){.B = 1, .n = c->n, .m = c->n, .query = x, .key = x, .value = x,
                         .need_weights = c->need_weights, .average_heads = c->need_weights};
    if (!x || !attn_output_sizes(w, &f->in, &out_floats, &weight_floats))
        return attn_fail(f->err, sizeof f->err, ATTN_ERR_NOMEM, "bench: input");
    bench_fill(x, nx, SEED_X, 1.0f);
    f->out = malloc(out_floats * sizeof *f->out);
    if (c->need_weights) f->weights = malloc(weight_floats * sizeof *f->weights);
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

/* --rss-case n E H threads: run that case once, no weights, and exit; the
 * parent reads our peak RSS from wait4. Nothing else lives in this process. */
static int rss_child(char **argv) {
    bench_case c = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), false, true};
    int threads = atoi(argv[5]);
    attn_blas_info info;
    char err[ATTN_ERRLEN];
    attn_pool *pool;
    if (attn_blas_init(&info, err, sizeof err) ||
        attn_pool_create(threads, &pool, err, sizeof err)) {
        fprintf(stderr, "bench rss child: %s\n", err);
        return 1;
    }
    forward_ctx f;
    int rc = case_setup(&f, &c, pool) != ATTN_OK || forward_run(&f);
    if (rc) fprintf(stderr, "bench rss child: %s\n", f.err);
    case_teardown(&f);
    attn_pool_destroy(pool);
    return rc;
}

/* Peak RSS in KiB of a fresh process running case c, or -1. */
static long rss_measure(const bench_case *c, int threads) {
    char sn[16], se[16], sh[16], st[16];
    snprintf(sn, sizeof sn, "%d", c->n);
    snprintf(se, sizeof se, "%d", c->E);
    snprintf(sh, sizeof sh, "%d", c->H);
    snprintf(st, sizeof st, "%d", threads);
    char *argv[] = {"bench_attention", "--rss-case", sn, se, sh, st, NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return ru.ru_maxrss;
}

/* -------------------------------------------------------------------- main */

typedef struct {
    double ours_ms, torch_ms, gflops, maxdiff;
    double sgemm_gflops; /* the pool's 2048^3 sgemm, timed alternately with ours */
    double pct, ratio;   /* medians over the rounds of % of sgemm and PyTorch/ours */
    double ceiling;      /* PyTorch's time over our FLOPs' time at the sgemm rate (median) */
    double peak_gflops;  /* the pool's FMA peak, measured just before the case */
    double peak_pct;     /* our GFLOPS as % of that */
    int ours_runs, torch_runs;
    long torch_rss_kib;
    bool ran;
} case_result;

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_attention [--quick] [--threads N] [--no-torch] [--strict]\n"
            "         [--min-time S] [--python PATH] [--torch-script PATH]\n"
            "  --quick         fewer repeats, no 8192-token case (while others use the machine)\n"
            "  --threads N     pool threads, and torch's (default: online CPUs)\n"
            "  --no-torch      skip the PyTorch comparison\n"
            "  --strict        exit 1 when a target is missed\n"
            "  --min-time S    time each side at least S seconds per case (default 1, quick 0.2)\n"
            "  --python PATH   interpreter with torch (default /usr/bin/python3)\n"
            "  --torch-script  default tests/bench/torch_mha.py\n");
}

static const char *pass_fail(int ok) {
    return ok < 0 ? "NOT MEASURED" : ok ? "PASS" : "FAIL";
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "--rss-case") == 0) return rss_child(argv);
    attn_blas_reexec_if_needed(argv);

    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    bench_opts o = {.threads = ncpu > 0 ? (int)ncpu : 1, .torch = true, .min_time = -1,
                    .python = "/usr/bin/python3", .script = "tests/bench/torch_mha.py"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) o.quick = true;
        else if (strcmp(a, "--no-torch") == 0) o.torch = false;
        else if (strcmp(a, "--strict") == 0) o.strict = true;
        else if (strcmp(a, "--threads") == 0 && v) o.threads = atoi(argv[++i]);
        else if (strcmp(a, "--min-time") == 0 && v) o.min_time = atof(argv[++i]);
        else if (strcmp(a, "--python") == 0 && v) o.python = argv[++i];
        else if (strcmp(a, "--torch-script") == 0 && v) o.script = argv[++i];
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
    fma_peak peak0 = fma_peak_measure(pool, NULL, 0.05, 5);
    fma_peak peak_avx2 = fma_peak_measure(pool, "AVX2", 0.05, 5);
    fprintf(stderr, "bench: %s; FMA peak %s %.0f GFLOPS, AVX2 %.0f GFLOPS\n", cpu_name,
            peak0.isa, peak0.gflops, peak_avx2.gflops);

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
                c->need_weights ? "on" : "off");
        forward_ctx f;
        if ((st = case_setup(&f, c, pool))) {
            fprintf(stderr, "bench: %s\n", f.err);
            case_teardown(&f);
            continue;
        }
        /* the physical limit, in the same moments as the case: noise only
         * ever lowers a measurement of it, so the best of the run's
         * measurements so far is the limit */
        fma_peak pk = fma_peak_measure(pool, NULL, 0.02, 5);
        if (pk.gflops > peak0.gflops) peak0.gflops = pk.gflops;
        r->peak_gflops = pk.gflops;
        /* Rounds of ours (alternating with the sgemm) then PyTorch, so drift
         * of the machine's speed hits both sides alike; each figure is the
         * median over the rounds, each ratio the median of the rounds'. */
        double t_q[MAX_ROUNDS], ts_q[MAX_ROUNDS], tt_q[MAX_ROUNDS], ratio_q[MAX_ROUNDS],
            pct_q[MAX_ROUNDS], ceil_q[MAX_ROUNDS];
        int nq = 0, torch_ok = o.torch;
        r->torch_ms = r->maxdiff = -1.0;
        for (int q = 0; q < rounds; q++) {
            settle();
            int runs = 0;
            if (time_paired(forward_run, &f, sgemm_run, &sg, round_runs, round_time, &t_q[q],
                            &ts_q[q], &runs))
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
            double t = median(t_q, nq);
            r->ours_ms = t * 1e3;
            r->gflops = bench_flops(c) / t * 1e-9;
            r->sgemm_gflops = SGEMM_FLOPS / median(ts_q, nq) * 1e-9;
            r->pct = median(pct_q, nq);
            r->peak_pct = -1; /* against the run's best peak, once all are measured */
            if (torch_ok) {
                r->torch_ms = median(tt_q, nq);
                r->ratio = median(ratio_q, nq);
                r->ceiling = median(ceil_q, nq);
            }
        }
        settle();
        case_teardown(&f);
    }

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
        rss_kib = rss_measure(big, o.threads);
    }
    getloadavg(load1, 3);
    for (size_t k = 0; k < NCASES; k++)
        if (res[k].ran && peak0.gflops > 0) res[k].peak_pct = 100.0 * res[k].gflops / peak0.gflops;

    /* ----------------------------------------------------------- report */
    printf("## attention-server forward pass%s\n\n", o.quick ? " (quick mode)" : "");
    printf("CPU: %s, %d pool threads; FMA peak measured with %s (%d floats per vector): "
           "%.0f GFLOPS for the pool (%.0f per thread)",
           cpu_name, o.threads, peak0.isa, peak0.lanes, peak0.gflops, peak0.gflops / o.threads);
    if (peak_avx2.lanes && peak0.lanes != peak_avx2.lanes)
        printf("; with AVX2 only (what OpenBLAS's %s kernel uses): %.0f GFLOPS", info.corename,
               peak_avx2.gflops);
    printf(".\n");
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
           "largest PyTorch/ours any forward pass built on this sgemm could reach.\n");
    printf("Each case: %d rounds of ours (alternating with the sgemm) then PyTorch, each side "
           ">= %d runs and >= %g s per round; times are medians over all rounds, %% of sgemm "
           "and PyTorch/ours the medians of the rounds' own ratios. Load average: %.2f at "
           "start, %.2f at end.\n\n",
           rounds, round_runs, round_time, load0[0], load1[0]);

    printf("%% of peak: our GFLOPS over the pool's FMA peak (independent vector FMA chains on "
           "every pool thread, the widest vectors the CPU has): the best of its measurements "
           "in this run, at the start and just before each case (the FMA peak column: that "
           "case's own measurement, lower when the machine was busy).\n\n");
    printf("| n | E | H | weights | ours ms | ours GFLOPS | FMA peak GFLOPS | %% of peak | "
           "sgemm GFLOPS | %% of sgemm | PyTorch ms | PyTorch/ours | ceiling | max abs diff |\n");
    printf("|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int speed_ok = 1, sgemm_ok = 1, speed_measured = 1, sgemm_measured = 0;
    int peak_ok = 1, peak_measured = 0;
    double worst_peak = INFINITY;
    double worst_ratio = INFINITY, worst_pct = INFINITY;
    char beyond[512] = ""; /* cases whose ceiling is under the speed-up target */
    for (size_t k = 0; k < NCASES; k++) {
        const bench_case *c = &bench_cases[k];
        case_result *r = &res[k];
        if (o.quick && c->big) continue;
        printf("| %d | %d | %d | %s ", c->n, c->E, c->H, c->need_weights ? "on" : "off");
        if (!r->ran) {
            printf("| failed | | | | | | | | | |\n");
            speed_ok = sgemm_ok = 0;
            continue;
        }
        double pct = r->pct;
        printf("| %.3f | %.1f | %.0f | %.0f%% | %.1f | %.0f%% ", r->ours_ms, r->gflops,
               r->peak_gflops, r->peak_pct, r->sgemm_gflops, pct);
        if (c->n >= PEAK_N && r->peak_pct >= 0) {
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
                         l ? ", " : "", c->n, c->E, c->H, c->need_weights ? "on" : "off",
                         r->ceiling);
            }
        } else {
            printf("| n/a | n/a | n/a | n/a |\n");
            speed_measured = 0;
        }
        if (c->n >= LARGE_N) {
            sgemm_measured = 1;
            if (pct < worst_pct) worst_pct = pct;
            if (pct < TARGET_SGEMM_PCT) sgemm_ok = 0;
        }
    }
    printf("\n");
    if (rss_kib > 0)
        printf("Peak RSS, n=%d E=%d H=%d without weights, alone in a child process: %.1f MiB "
               "(input and output alone are %.0f MiB).\n",
               big->n, big->E, big->H, rss_kib / 1024.0,
               2.0 * big->n * big->E * sizeof(float) / (1024.0 * 1024.0));
    for (size_t k = 0; k < NCASES; k++)
        if (bench_cases[k].big && res[k].torch_rss_kib > 0)
            printf("PyTorch's process peaked at %.1f MiB after the same case.\n",
                   res[k].torch_rss_kib / 1024.0);

    /* A quick run never measures the 8192 case, so it cannot pass targets
     * that depend on it. */
    int speed = speed_measured && !(o.quick && big) ? speed_ok : (speed_ok ? -1 : 0);
    int pct_ok = sgemm_measured && !(o.quick && big) ? sgemm_ok : (sgemm_ok ? -1 : 0);
    int rss_ok = rss_kib > 0 ? rss_kib / 1024.0 < TARGET_RSS_MIB : -1;
    printf("\nTargets%s:\n\n", o.quick ? " (quick mode: the 8192-token case is skipped)" : "");
    char worst[32] = "";
    if (isfinite(worst_ratio)) snprintf(worst, sizeof worst, " (worst %.2fx)", worst_ratio);
    printf("- %s: >= %.1fx faster than PyTorch on every case%s\n", pass_fail(speed),
           TARGET_SPEEDUP, worst);
    if (beyond[0])
        printf("  Out of reach of any sgemm-bound forward pass on this machine in this run "
               "(PyTorch's time over the time of our FLOPs at 100%% of the sgemm rate): %s.\n",
               beyond);
    worst[0] = 0;
    if (isfinite(worst_peak)) snprintf(worst, sizeof worst, " (worst %.0f%%)", worst_peak);
    printf("- %s: >= %.0f%% of the pool's %s FMA peak on every case with n >= %d%s\n",
           pass_fail(peak_measured ? peak_ok : -1), TARGET_PEAK_PCT, peak0.isa, PEAK_N, worst);
    worst[0] = 0;
    if (isfinite(worst_pct)) snprintf(worst, sizeof worst, " (worst %.0f%%)", worst_pct);
    printf("- %s: >= %.0f%% of the sgemm rate on the two largest shapes (n >= %d)%s\n",
           pass_fail(pct_ok), TARGET_SGEMM_PCT, LARGE_N, worst);
    if (rss_kib > 0)
        printf("- %s: 8192-token case under %.0f MiB peak RSS (%.1f MiB)\n", pass_fail(rss_ok),
               TARGET_RSS_MIB, rss_kib / 1024.0);
    else
        printf("- %s: 8192-token case under %.0f MiB peak RSS\n", pass_fail(rss_ok),
               TARGET_RSS_MIB);
    if (failed_match)
        printf("\nOUTPUT MISMATCH: ours and PyTorch's differ by more than %g on a case "
               "(or PyTorch's output was unreadable); the times compare different things.\n",
               MATCH_TOL);

    if (failed_match) return 1;
    if (o.strict && (speed != 1 || pct_ok != 1 || peak_ok != 1 || (!o.quick && rss_ok != 1)))
        return 1;
    return 0;
}
