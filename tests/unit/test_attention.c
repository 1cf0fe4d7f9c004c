/* test_attention.c - the forward pass against its naive reference.
 *
 * Every case builds a random weight set and random inputs, runs attn_forward
 * (on pools of 1, 2 and 3 threads, or none) and attn_forward_naive, and
 * compares output and weights; the largest differences are printed. Without
 * weights the online-softmax path is also compared with the weights path.
 * Then: fully masked rows, a long sequence, many keys, concurrent callers,
 * input validation, scratch bounds, and attn_vexp against exp().
 */
#include "attention.h"
#include "gemm.h"
#include "blas.h"
#include "hugemem.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "topk_check.h"

/* Huge-allocation tests expect NULL back, not a sanitizer abort. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

static double worst_out, worst_wts; /* largest relative differences seen */

/* ------------------------------------------------------------ randomness */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float rnd_unit(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; } /* [-1,1) */
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static void fill(float *x, size_t len, float scale) {
    for (size_t i = 0; i < len; i++) x[i] = scale * rnd_unit();
}

/* ------------------------------------------------------------ fixtures */

typedef struct {
    int B, n, m, E, H, kdim, vdim;
    bool bias, bias_kv, zero_attn, self; /* self: query = key = value */
    attn_mask_kind kpm_kind;
    bool kpm_batched;
    attn_mask_kind mask_kind;
    int mask_dims;
    bool causal, need_weights, average;
    float wscale; /* weight magnitude: larger = peakier softmax */
} tcase;

static attn_weights *make_weights(const tcase *c) {
    char err[ATTN_ERRLEN] = "";
    attn_weights *w = NULL;
    attn_status st = attn_weights_alloc(c->E, c->H, c->kdim, c->vdim, c->bias, c->bias_kv,
                                        c->zero_attn, &w, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_weights_alloc: %s", err);
    if (st) return NULL;
    size_t E = (size_t)c->E;
    float s = c->wscale;
    fill(w->wq, E * E, s / sqrtf((float)E));
    fill(w->wk, E * (size_t)c->kdim, s / sqrtf((float)c->kdim));
    fill(w->wv, E * (size_t)c->vdim, 1.0f / sqrtf((float)c->vdim));
    fill(w->wo, E * E, 1.0f / sqrtf((float)E));
    if (c->bias) {
        fill(w->bq, E, 0.5f);
        fill(w->bk, E, 0.5f);
        fill(w->bv, E, 0.5f);
        fill(w->bo, E, 0.5f);
    }
    if (c->bias_kv) {
        fill(w->bias_k, E, 1.0f);
        fill(w->bias_v, E, 1.0f);
    }
    attn_weights_finish(w);
    return w;
}

/* Inputs and masks of one case; free with inputs_free. */
typedef struct {
    attn_input in;
    float *q, *k, *v;
    void *kpm, *mask;
} inputs;

static void *make_mask(attn_mask_kind kind, size_t len) {
    if (kind == ATTN_MASK_BOOL) {
        uint8_t *m = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++) m[i] = rnd() % 4 == 0; /* a quarter masked */
        return m;
    }
    float *m = malloc((len ? len : 1) * sizeof *m);
    for (size_t i = 0; i < len; i++) {
        uint32_t r = rnd() % 10;
        m[i] = r == 0 ? -INFINITY : r == 1 ? 0.0f : 2.0f * rnd_unit();
    }
    return m;
}

static void make_inputs(const tcase *c, inputs *x) {
    memset(x, 0, sizeof *x);
    size_t B = (size_t)c->B, n = (size_t)c->n, m = (size_t)c->m;
    x->q = malloc(B * n * (size_t)c->E * sizeof(float));
    fill(x->q, B * n * (size_t)c->E, 1.0f);
    if (c->self) {
        x->k = x->v = x->q;
    } else {
        x->k = malloc(B * m * (size_t)c->kdim * sizeof(float));
        x->v = malloc(B * m * (size_t)c->vdim * sizeof(float));
        fill(x->k, B * m * (size_t)c->kdim, 1.0f);
        fill(x->v, B * m * (size_t)c->vdim, 1.0f);
    }
    attn_input *in = &x->in;
    in->B = c->B, in->n = c->n, in->m = c->m;
    in->query = x->q, in->key = x->k, in->value = x->v;
    in->kpm_kind = c->kpm_kind;
    in->kpm_batched = c->kpm_batched;
    if (c->kpm_kind != ATTN_MASK_NONE)
        x->kpm = make_mask(c->kpm_kind, (c->kpm_batched ? B : 1) * m);
    in->kpm = x->kpm;
    in->mask_kind = c->mask_kind;
    in->mask_dims = c->mask_dims;
    if (c->mask_kind != ATTN_MASK_NONE) {
        size_t planes = c->mask_dims == 2 ? 1 : c->mask_dims == 3 ? (size_t)c->H : B * c->H;
        x->mask = make_mask(c->mask_kind, planes * n * m);
    }
    in->attn_mask = x->mask;
    in->causal = c->causal;
    in->need_weights = c->need_weights;
    in->average_heads = c->average;
}

static void inputs_free(inputs *x) {
    if (x->k != x->q) free(x->k);
    if (x->v != x->q) free(x->v);
    free(x->q);
    free(x->kpm);
    free(x->mask);
}

static double max_abs(const float *x, size_t len) {
    double mx = 0.0;
    for (size_t i = 0; i < len; i++)
        if (fabs((double)x[i]) > mx) mx = fabs((double)x[i]);
    return mx;
}

/* Largest |a-b| / max(1, max|b|); NaN anywhere counts as infinitely wrong. */
static double rel_diff(const float *a, const float *b, size_t len) {
    double worst = 0.0, scale = max_abs(b, len);
    if (scale < 1.0) scale = 1.0;
    for (size_t i = 0; i < len; i++) {
        double dlt = fabs((double)a[i] - (double)b[i]);
        if (isnan(a[i]) != isnan(b[i]) || isnan(dlt)) return INFINITY;
        if (dlt > worst) worst = dlt;
    }
    return worst / scale;
}

static void describe(const tcase *c, char *buf, size_t len) {
    static const char *kind[] = {"none", "bool", "float"};
    snprintf(buf, len,
             "B=%d n=%d m=%d E=%d H=%d kdim=%d vdim=%d bias=%d bias_kv=%d zero_attn=%d self=%d "
             "kpm=%s%s mask=%s/%d causal=%d weights=%d avg=%d",
             c->B, c->n, c->m, c->E, c->H, c->kdim, c->vdim, c->bias, c->bias_kv, c->zero_attn,
             c->self, kind[c->kpm_kind], c->kpm_batched ? "[B,m]" : "[m]", kind[c->mask_kind],
             c->mask_dims, c->causal, c->need_weights, c->average);
}

/* Run one case on pool (may be NULL) and compare with the reference; also
 * compare the online path with the weights path. */
static void run_case(const tcase *c, attn_pool *pool, bool verbose) {
    char err[ATTN_ERRLEN] = "", what[400];
    describe(c, what, sizeof what);
    attn_weights *w = make_weights(c);
    if (!w) return;
    inputs x;
    make_inputs(c, &x);
    size_t nout = 0, nwts = 0;
    CHECK(attn_output_sizes(w, &x.in, &nout, &nwts));
    float *out = malloc(nout * sizeof *out), *ref = malloc(nout * sizeof *ref);
    float *wts = nwts ? malloc(nwts * sizeof *wts) : NULL;
    float *wref = nwts ? malloc(nwts * sizeof *wref) : NULL;

    attn_status st = attn_forward(w, &x.in, out, wts, pool, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_forward %s: %s", what, err);
    st = attn_forward_naive(w, &x.in, ref, wref, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_forward_naive %s: %s", what, err);

    double d_out = rel_diff(out, ref, nout), d_wts = nwts ? rel_diff(wts, wref, nwts) : 0.0;
    if (d_out > worst_out) worst_out = d_out;
    if (d_wts > worst_wts) worst_wts = d_wts;
    CHECK_MSG(d_out <= 1e-4, "%s: output differs from the reference by %.3g", what, d_out);
    CHECK_MSG(d_wts <= 1e-4, "%s: weights differ from the reference by %.3g", what, d_wts);
    if (verbose) printf("  %-150s out %.2e wts %.2e\n", what, d_out, d_wts);

    /* The other path on the same input must agree. */
    attn_input other = x.in;
    other.need_weights = !x.in.need_weights;
    size_t nwts2 = 0;
    attn_output_sizes(w, &other, NULL, &nwts2);
    float *out2 = malloc(nout * sizeof *out2);
    float *wts2 = nwts2 ? malloc(nwts2 * sizeof *wts2) : NULL;
    st = attn_forward(w, &other, out2, wts2, pool, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_forward (other path) %s: %s", what, err);
    double d_path = rel_diff(out2, out, nout);
    CHECK_MSG(d_path <= 1e-4, "%s: online and weights paths differ by %.3g", what, d_path);

    free(out2);
    free(wts2);
    free(out);
    free(ref);
    free(wts);
    free(wref);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* ------------------------------------------------- top-k and weight rows */

static double worst_topk, worst_rows; /* largest differences from the dense weights */

/* One case in every form of weights: dense, top-k (k of 1, M, or between)
 * and weight rows (a random list in random order), each per head or
 * averaged as c->average says; fast against the fast dense weights (the
 * same float scores: 1e-6) and against the reference (1e-4 of max(1, .)),
 * the naive top-k against the naive dense. The outputs of top-k and weight
 * rows are those of the pass without weights: it is the same pass (the
 * block sizes may differ where the extra work tips the one-task choice). */
static void run_forms_case(const tcase *c0, attn_pool *pool) {
    tcase c = *c0;
    c.need_weights = false;
    char err[ATTN_ERRLEN] = "", what[400];
    describe(&c, what, sizeof what);
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    const int M = attn_key_positions(w, c.m), Hx = c.average ? 1 : c.H;
    size_t nout = 0, nd = 0;
    attn_input dense_in = x.in;
    dense_in.need_weights = true;
    attn_output_sizes(w, &dense_in, &nout, &nd);
    float *out0 = malloc(nout * sizeof(float)), *out = malloc(nout * sizeof(float));
    float *ref = malloc(nout * sizeof(float));
    float *D = malloc(nd * sizeof(float)), *Dref = malloc(nd * sizeof(float));
    CHECK_INT_EQ(attn_forward(w, &x.in, out0, NULL, pool, err, sizeof err), ATTN_OK);
    CHECK_INT_EQ(attn_forward(w, &dense_in, out, D, pool, err, sizeof err), ATTN_OK);
    CHECK_INT_EQ(attn_forward_naive(w, &dense_in, ref, Dref, err, sizeof err), ATTN_OK);
    const size_t nrow_all = (size_t)c.B * (size_t)Hx * (size_t)c.n;

    /* top-k */
    attn_input in = x.in;
    uint32_t pick = rnd() % 4;
    in.topk = pick == 0 ? 1 : pick == 1 ? M : rnd_int(1, M);
    size_t nv = 0;
    CHECK(attn_output_sizes(w, &in, NULL, &nv));
    CHECK_INT_EQ(nv, nrow_all * (size_t)in.topk);
    float *val = malloc(nv * sizeof *val), *nval = malloc(nv * sizeof *nval);
    int32_t *idx = malloc(nv * sizeof *idx), *nidx = malloc(nv * sizeof *nidx);
    attn_result res = {out, val, idx}, nres = {ref, nval, nidx};
    char w2[480];
    snprintf(w2, sizeof w2, "%s topk=%d", what, in.topk);
    attn_status st = attn_run(w, &in, &res, pool, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_run %s: %s", w2, err);
    if (!st) {
        CHECK_MSG(rel_diff(out, out0, nout) <= 1e-5, "%s: output differs from the pass "
                  "without weights", w2);
        double dd = check_topk(w2, D, val, idx, nrow_all, M, in.topk, 1e-6, true);
        double dr = check_topk(w2, Dref, val, idx, nrow_all, M, in.topk,
                               1e-4 * fmax(1.0, max_abs(Dref, nd)), true);
        if (dd > worst_topk) worst_topk = dd;
        (void)dr;
        /* the heaps, and the rows' keys in AVX2 registers, where the
         * default kept them in AVX-512 ones: the same answer, bit for bit */
        for (int mode = 0; mode <= 2; mode += 2) {
            const int was = attn_topk_lanes(mode);
            attn_result hres = {out, nval, nidx};
            CHECK_INT_EQ(attn_run(w, &in, &hres, pool, err, sizeof err), ATTN_OK);
            attn_topk_lanes(was);
            CHECK_MSG(!memcmp(val, nval, nv * sizeof *val) && !memcmp(idx, nidx, nv * sizeof *idx),
                      "%s: the answer with attn_topk_lanes(%d) differs from the default's", w2,
                      mode);
        }
    }
    st = attn_run_naive(w, &in, &nres, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_run_naive %s: %s", w2, err);
    if (!st) check_topk(w2, Dref, nval, nidx, nrow_all, M, in.topk, 0.0, false);

    /* weight rows: a random list in random order */
    in = x.in;
    in.nrows = rnd_int(1, c.n < 6 ? c.n : 6);
    int *rows = malloc((size_t)c.n * sizeof *rows);
    for (int i = 0; i < c.n; i++) rows[i] = i;
    for (int i = c.n - 1; i > 0; i--) {
        int j = rnd_int(0, i), t = rows[i];
        rows[i] = rows[j], rows[j] = t;
    }
    in.rows = rows;
    size_t nr = 0;
    CHECK(attn_output_sizes(w, &in, NULL, &nr));
    CHECK_INT_EQ(nr, (size_t)c.B * (size_t)Hx * (size_t)in.nrows * (size_t)M);
    float *R = malloc(nr * sizeof *R), *Rref = malloc(nr * sizeof *Rref);
    res = (attn_result){out, R, NULL};
    nres = (attn_result){ref, Rref, NULL};
    snprintf(w2, sizeof w2, "%s rows=%d", what, in.nrows);
    st = attn_run(w, &in, &res, pool, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_run %s: %s", w2, err);
    CHECK_INT_EQ(attn_run_naive(w, &in, &nres, err, sizeof err), ATTN_OK);
    if (!st) {
        CHECK_MSG(rel_diff(out, out0, nout) <= 1e-5, "%s: output differs from the pass "
                  "without weights", w2);
        double worst = 0.0;
        for (size_t pl = 0; pl < (size_t)c.B * (size_t)Hx; pl++)
            for (int s = 0; s < in.nrows; s++) {
                const float *got = R + (pl * (size_t)in.nrows + (size_t)s) * (size_t)M;
                const float *want = D + (pl * (size_t)c.n + (size_t)rows[s]) * (size_t)M;
                const float *nref = Rref + (pl * (size_t)in.nrows + (size_t)s) * (size_t)M;
                const float *dref = Dref + (pl * (size_t)c.n + (size_t)rows[s]) * (size_t)M;
                for (int j = 0; j < M; j++) {
                    double dlt = fabs((double)got[j] - want[j]);
                    if (dlt > worst) worst = dlt;
                    if (nref[j] != dref[j]) worst = INFINITY;
                }
            }
        if (worst > worst_rows) worst_rows = worst;
        CHECK_MSG(worst <= 1e-6, "%s: weight rows differ from the dense rows by %.3g", w2, worst);
    }
    free(rows), free(R), free(Rref);
    free(val), free(nval), free(idx), free(nidx);
    free(out0), free(out), free(ref), free(D), free(Dref);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* ------------------------------------------------------------ the cases */

static const int geoms[][2] = {{6, 2}, {30, 5}, {16, 1}, {8, 8}, {32, 4}, {64, 4}, {48, 3}, {20, 20}};

static tcase random_case(int nmax, int Bmax) {
    tcase c;
    memset(&c, 0, sizeof c);
    int g = rnd_int(0, (int)(sizeof geoms / sizeof geoms[0]) - 1);
    c.E = geoms[g][0], c.H = geoms[g][1];
    c.B = rnd_int(1, Bmax);
    c.n = rnd() % 5 == 0 ? 1 : rnd_int(1, nmax);
    c.self = rnd() % 2 == 0;
    if (c.self) {
        c.m = c.n, c.kdim = c.vdim = c.E;
    } else {
        c.m = rnd() % 5 == 0 ? 1 : rnd_int(1, nmax);
        static const int widths[] = {0, 5, 12, 33};
        int kw = widths[rnd() % 4], vw = widths[rnd() % 4];
        c.kdim = kw ? kw : c.E;
        c.vdim = vw ? vw : c.E;
    }
    c.bias = rnd() % 4 != 0;
    c.bias_kv = rnd() % 3 == 0;
    c.zero_attn = rnd() % 3 == 0;
    c.kpm_kind = (attn_mask_kind)(rnd() % 3);
    c.kpm_batched = rnd() % 2;
    c.mask_kind = (attn_mask_kind)(rnd() % 3);
    c.mask_dims = rnd_int(2, 4);
    c.causal = rnd() % 4 == 0;
    c.need_weights = rnd() % 3 != 0;
    c.average = rnd() % 3 == 0;
    c.wscale = rnd() % 2 ? 1.0f : 4.0f;
    return c;
}

/* An emulated CPU: tests/unit/emulated-cpu runs this program under QEMU's
 * user mode as an AVX2-only CPU, translating each instruction (the whole
 * program took 8 minutes there against 30 s here), in two halves side by
 * side: ATTN_TEST_EMULATED=1 or 2 (main); 0 where it is not set. */
static int emulated_part(void) {
    const char *s = getenv("ATTN_TEST_EMULATED");
    return s && (*s == '1' || *s == '2') && !s[1] ? *s - '0' : 0;
}

static bool emulated(void) {
    return emulated_part() != 0;
}

/* Sanitizer builds instrument the naive reference too, and an emulated CPU
 * runs it slowly: fewer, smaller cases. */
static int sanitized(void) {
    const char *s = getenv("ATTN_SANITIZER");
    return (s && *s) || emulated();
}

/* ThreadSanitizer, the slowest build. */
static bool thread_sanitized(void) {
    const char *s = getenv("ATTN_SANITIZER");
    return s && strstr(s, "thread");
}

/* Whether a run on pools[p] is left out: under ThreadSanitizer, the runs on
 * no pool (p 0) and on one worker (p 1) of the cases that also run on two
 * and three workers. It finds races only where two threads share data;
 * what the other two pools check (the answers, their bits) the release and
 * ASan+UBSan builds check whole; and it is the slowest build (its
 * test_attention took 112-150 s of CI's 30 minutes). On an emulated CPU,
 * every pool but two workers' (the daemon's on two cores): what it checks
 * is the CPU's paths, which do not change with the pool. Where a case
 * compares bits across pools, p 0 stays as its reference (keep0). */
static bool pool_skipped(int p, bool keep0) {
    if (p == 0 && keep0) return false;
    if (emulated()) return p != 2;
    return thread_sanitized() && p < 2;
}

/* How many of the four pools a case runs on (pool_skipped). */
static int pools_kept(bool keep0) {
    int k = 0;
    for (int p = 0; p < 4; p++) k += !pool_skipped(p, keep0);
    return k;
}

/* The pool for a case's t-th run, every pool that is not skipped in turn. */
static attn_pool *pool_for(attn_pool *pools[4], int t) {
    int kept[4], k = 0;
    for (int p = 0; p < 4; p++)
        if (!pool_skipped(p, false)) kept[k++] = p;
    return pools[kept[t % k]];
}

static void test_random(attn_pool *pools[4]) {
    int count = !sanitized() ? 240 : thread_sanitized() ? 32 : 60;
    for (int t = 0; t < count; t++) {
        tcase c = random_case(t % 4 == 3 ? 90 : 24, t % 4 == 3 ? 3 : 4);
        run_case(&c, pool_for(pools, t), false);
    }
    printf("random cases: largest difference out %.3g, weights %.3g\n", worst_out, worst_wts);
}

/* The named cases into cs (room for 32); returns their count. */
static int named_cases(tcase *cs) {
    const tcase base = {.B = 3, .n = 70, .m = 90, .E = 64, .H = 4, .kdim = 64, .vdim = 64,
                        .bias = true, .need_weights = true, .wscale = 2.0f};
    int k = 0;
    cs[k++] = base;                                                  /* plain cross */
    cs[k] = base, cs[k].m = 70, cs[k].self = true, k++;              /* packed self */
    cs[k] = base, cs[k].m = 70, cs[k].self = true, cs[k].bias_kv = true, cs[k].zero_attn = true, k++;
    cs[k] = base, cs[k].kdim = 12, cs[k].vdim = 40, k++;             /* kdim != vdim != E */
    cs[k] = base, cs[k].bias = false, k++;
    cs[k] = base, cs[k].E = 30, cs[k].H = 5, cs[k].kdim = cs[k].vdim = 30, k++;
    cs[k] = base, cs[k].E = 6, cs[k].H = 2, cs[k].kdim = cs[k].vdim = 6, k++;
    cs[k] = base, cs[k].H = 1, k++;
    cs[k] = base, cs[k].E = cs[k].H = cs[k].kdim = cs[k].vdim = 16, k++; /* H = E, d = 1 */
    cs[k] = base, cs[k].kpm_kind = ATTN_MASK_BOOL, k++;
    cs[k] = base, cs[k].kpm_kind = ATTN_MASK_BOOL, cs[k].kpm_batched = true, k++;
    cs[k] = base, cs[k].kpm_kind = ATTN_MASK_FLOAT, k++;
    cs[k] = base, cs[k].kpm_kind = ATTN_MASK_FLOAT, cs[k].kpm_batched = true, k++;
    for (int dims = 2; dims <= 4; dims++) {
        cs[k] = base, cs[k].mask_kind = ATTN_MASK_BOOL, cs[k].mask_dims = dims, k++;
        cs[k] = base, cs[k].mask_kind = ATTN_MASK_FLOAT, cs[k].mask_dims = dims, k++;
    }
    cs[k] = base, cs[k].causal = true, k++;
    cs[k] = base, cs[k].causal = true, cs[k].m = 40, k++; /* m < n: rows past m see all */
    cs[k] = base, cs[k].causal = true, cs[k].bias_kv = true, cs[k].kpm_kind = ATTN_MASK_BOOL, k++;
    cs[k] = base, cs[k].average = true, k++;
    cs[k] = base, cs[k].average = true, cs[k].mask_kind = ATTN_MASK_FLOAT, cs[k].mask_dims = 4, k++;
    cs[k] = base, cs[k].n = 1, k++;
    cs[k] = base, cs[k].m = 1, cs[k].zero_attn = true, k++;
    cs[k] = base, cs[k].B = 1, cs[k].n = 300, cs[k].m = 300, cs[k].self = true, k++;
    cs[k] = base, cs[k].n = 300, cs[k].m = 600, cs[k].need_weights = false, cs[k].causal = true,
    cs[k].kpm_kind = ATTN_MASK_FLOAT, k++; /* several key and row blocks */
    cs[k] = base, cs[k].n = 5, cs[k].m = 5, cs[k].B = 1, cs[k].self = true, k++; /* tiny */
    cs[k] = base, cs[k].B = 7, cs[k].n = 3, cs[k].m = 4, k++; /* row blocks across batches */
    /* Wider layers on the pool path: E not a multiple of 16, packed and
     * separate projections, a head dim of 66. */
    cs[k] = base, cs[k].B = 1, cs[k].n = cs[k].m = 130, cs[k].self = true, cs[k].E = 200,
    cs[k].H = 8, cs[k].kdim = cs[k].vdim = 200, k++;
    cs[k] = base, cs[k].B = 2, cs[k].n = 40, cs[k].m = 70, cs[k].E = 264, cs[k].H = 4,
    cs[k].kdim = 33, cs[k].vdim = 264, cs[k].bias_kv = true, k++;
    return k;
}

/* Named cases, each on every pool. */
static void test_named(attn_pool *pools[4]) {
    tcase cs[32];
    int k = named_cases(cs);
    for (int i = 0; i < k; i++) {
        for (int p = 0; p < 4; p++) {
            if (pool_skipped(p, false)) continue;
            run_case(&cs[i], pools[p], p == 2);
            tcase nw = cs[i];
            nw.need_weights = !nw.need_weights;
            run_case(&nw, pools[p], false);
        }
    }
    printf("named cases: largest difference out %.3g, weights %.3g\n", worst_out, worst_wts);
}

/* Every form of weights on the named cases (per head and averaged, on a
 * pool and without) and on random ones. */
static void test_forms(attn_pool *pools[4]) {
    tcase cs[32];
    int k = named_cases(cs);
    for (int i = 0; i < k; i++)
        for (int avg = 0; avg < 2; avg++) {
            tcase c = cs[i];
            c.average = avg;
            run_forms_case(&c, (i + avg) % 2 ? pools[2]
                                : pool_skipped(0, false) ? pool_for(pools, 1) : pools[0]);
        }
    int count = sanitized() ? 30 : 120;
    for (int t = 0; t < count; t++) {
        tcase c = random_case(t % 4 == 3 ? 90 : 24, t % 4 == 3 ? 3 : 4);
        run_forms_case(&c, pool_for(pools, t));
    }
    printf("top-k and weight rows: largest difference from the dense weights: top-k %.3g, "
           "rows %.3g\n",
           worst_topk, worst_rows);
}

/* Rows whose keys are all masked: zero weights, output exactly b_o. */
static void test_fully_masked(attn_pool *pool) {
    tcase c = {.B = 2, .n = 6, .m = 7, .E = 32, .H = 4, .kdim = 32, .vdim = 32, .bias = true,
               .wscale = 1.0f, .need_weights = true};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    uint8_t kpm[2 * 7] = {0};
    for (int j = 0; j < 7; j++) kpm[7 + j] = 1; /* batch 1: every key padded */
    uint8_t mask[6 * 7] = {0};
    for (int j = 0; j < 7; j++) mask[2 * 7 + j] = 1; /* query 2: every key masked */
    x.in.kpm_kind = ATTN_MASK_BOOL, x.in.kpm = kpm, x.in.kpm_batched = true;
    x.in.mask_kind = ATTN_MASK_BOOL, x.in.attn_mask = mask, x.in.mask_dims = 2;
    char err[ATTN_ERRLEN];
    for (int path = 0; path < 2; path++) {
        x.in.need_weights = path == 0;
        float out[2 * 6 * 32], wts[2 * 4 * 6 * 7], ref[2 * 6 * 32], rw[2 * 4 * 6 * 7];
        CHECK_INT_EQ(attn_forward(w, &x.in, out, wts, pool, err, sizeof err), ATTN_OK);
        CHECK_INT_EQ(attn_forward_naive(w, &x.in, ref, rw, err, sizeof err), ATTN_OK);
        CHECK(rel_diff(out, ref, 2 * 6 * 32) <= 1e-5);
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 6; i++) {
                bool dead = b == 1 || i == 2;
                if (!dead) continue;
                for (int e = 0; e < 32; e++)
                    CHECK_MSG(out[(b * 6 + i) * 32 + e] == w->bo[e],
                              "fully masked row b=%d i=%d e=%d: %g != bo %g", b, i, e,
                              out[(b * 6 + i) * 32 + e], w->bo[e]);
                if (path == 0)
                    for (int h = 0; h < 4; h++)
                        for (int j = 0; j < 7; j++)
                            CHECK_MSG(wts[((b * 4 + h) * 6 + i) * 7 + j] == 0.0f,
                                      "fully masked row b=%d h=%d i=%d: weight %g", b, h, i,
                                      wts[((b * 4 + h) * 6 + i) * 7 + j]);
            }
        /* every other row sums to 1 */
        if (path == 0)
            for (int h = 0; h < 4; h++)
                for (int i = 0; i < 6; i++) {
                    if (i == 2) continue;
                    double s = 0;
                    for (int j = 0; j < 7; j++) s += wts[(h * 6 + i) * 7 + j];
                    CHECK_NEAR(s, 1.0, 1e-5);
                }
    }
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* The head average where some heads mask a row entirely and others do
 * not: head 0 stores its share of each averaged row (a zero row where it
 * masks every key) and the later heads add theirs, so the answer written
 * over NaN must still equal the reference's mean of the heads; a row that
 * every head masks averages to zeros and outputs b_o. The weight rows come
 * from the same code, so they are the dense answer's rows, bit for bit. */
static void test_masked_head_average(attn_pool *pool) {
    enum { N = 6, MK = 7, E = 32, H = 4 };
    tcase c = {.B = 1,
               .n = N,
               .m = MK,
               .E = E,
               .H = H,
               .kdim = E,
               .vdim = E,
               .bias = true,
               .wscale = 1.0f,
               .need_weights = true,
               .average = true};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    uint8_t mask[H * N * MK] = {0};
    for (int j = 0; j < MK; j++) {
        mask[(0 * N + 1) * MK + j] = 1;                             /* head 0, query 1 */
        mask[(2 * N + 4) * MK + j] = 1;                             /* head 2, query 4 */
        for (int h = 0; h < H; h++) mask[(h * N + 3) * MK + j] = 1; /* query 3, every head */
    }
    mask[(1 * N + 0) * MK + 2] = 1;
    mask[(3 * N + 5) * MK + 6] = 1;
    x.in.mask_kind = ATTN_MASK_BOOL, x.in.attn_mask = mask, x.in.mask_dims = 3;
    x.in.average_heads = true;
    char err[ATTN_ERRLEN];
    float out[N * E], wts[N * MK], ref[N * E], rw[N * MK], rows_w[3 * MK];
    for (int i = 0; i < N * MK; i++) wts[i] = NAN;
    CHECK_INT_EQ(attn_forward(w, &x.in, out, wts, pool, err, sizeof err), ATTN_OK);
    CHECK_INT_EQ(attn_forward_naive(w, &x.in, ref, rw, err, sizeof err), ATTN_OK);
    CHECK(rel_diff(out, ref, N * E) <= 1e-5);
    double worst = 0.0;
    for (int i = 0; i < N * MK; i++) {
        const double dd = fabs((double)wts[i] - (double)rw[i]);
        if (!(dd <= worst)) worst = dd; /* NaN counts */
    }
    CHECK_MSG(worst <= 1e-6, "head average with masked rows: largest difference %g", worst);
    for (int j = 0; j < MK; j++)
        CHECK_MSG(wts[3 * MK + j] == 0.0f, "query 3, masked by every head: weight %g",
                  wts[3 * MK + j]);
    for (int e = 0; e < E; e++)
        CHECK_MSG(out[3 * E + e] == w->bo[e], "query 3: output %g != bo %g", out[3 * E + e],
                  w->bo[e]);
    const int rows[3] = {3, 1, 4};
    attn_input in = x.in;
    in.need_weights = false, in.rows = rows, in.nrows = 3;
    for (int i = 0; i < 3 * MK; i++) rows_w[i] = NAN;
    CHECK_INT_EQ(attn_forward(w, &in, out, rows_w, pool, err, sizeof err), ATTN_OK);
    for (int r = 0; r < 3; r++)
        CHECK_MSG(!memcmp(rows_w + r * MK, wts + rows[r] * MK, MK * sizeof *wts),
                  "weight row of query %d differs from the dense answer's", rows[r]);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* A row's largest score wherever it stands: every key position of rows of
 * 150 keys (vec_max's four vectors of 16, its single vectors, its scalar
 * tail) in turn holds a score hundreds above the rest. Softmax subtracts
 * the row's max before the exponentials, so a max that missed it would
 * make e^(s - max) infinite and the row NaN; the row is one-hot at that
 * key instead. Identity projections: scores are x_i . x_j / sqrt(E). */
static void test_max_anywhere(attn_pool *pool) {
    enum { N = 150, E = 8 };
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    CHECK_INT_EQ(attn_weights_alloc(E, 1, E, E, false, false, false, &w, err, sizeof err),
                 ATTN_OK);
    if (!w) return;
    float *mats[] = {w->wq, w->wk, w->wv, w->wo};
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < E; r++)
            for (int c = 0; c < E; c++) mats[k][r * E + c] = r == c ? 1.0f : 0.0f;
    attn_weights_finish(w);
    static float x[N * E], out[N * E], ref[N * E], wts[N * N], rw[N * N];
    attn_input in = {.B = 1, .n = N, .m = N, .query = x, .key = x, .value = x};
    int bad = 0;
    for (int spike = 0; spike < N; spike++) {
        for (int j = 0; j < N; j++)
            for (int e = 0; e < E; e++)
                x[j * E + e] = e == 0 ? (j == spike ? 40.0f : 1.0f) : 0.01f * (float)(j % 7);
        for (int path = 0; path < 2; path++) {
            in.need_weights = path == 0;
            if (attn_forward(w, &in, out, wts, pool, err, sizeof err) ||
                attn_forward_naive(w, &in, ref, rw, err, sizeof err)) {
                CHECK_MSG(0, "spike %d: %s", spike, err);
                continue;
            }
            const float got = out[spike * E];
            if (!(rel_diff(out, ref, N * E) <= 1e-5) || !(fabsf(got - 40.0f) <= 1e-4f) ||
                (path == 0 && !(wts[spike * N + spike] == 1.0f)))
                bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %d passes wrong where a row's largest score moves", bad, 2 * N);
    attn_weights_destroy(w);
}

/* Without weights, the key blocks after a row's first take their
 * exponentials in the score product's epilogue (attn_online_exp). Inputs
 * past one key block (n = 1100: blocks of 256 and a last of 76), no mask
 * and causal (blocks under the diagonal only): random scores, which stay
 * near their running max; and scores climbing with the key, faster the
 * later the query, so that late rows go above their max by more than the
 * slack block after block (computed again). Either way the reference's
 * answers, and the two ways within rounding of each other; with the
 * epilogue, the same bits on every pool size (a row's path does not
 * depend on the rows that share its task). */
static void test_online_exp(attn_pool *pools[4]) {
    attn_pool *pool = pools[2];
    const int N = sanitized() ? 600 : 1100, E = 64; /* heads of 32: K and V packed */
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    CHECK_INT_EQ(attn_weights_alloc(E, 2, E, E, true, false, false, &w, err, sizeof err), ATTN_OK);
    if (!w) return;
    float *mats[] = {w->wq, w->wk, w->wv, w->wo};
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < E; r++)
            for (int c = 0; c < E; c++) mats[k][r * E + c] = (r == c ? 1.0f : 0.0f) + 0.05f * rnd_unit();
    float *biases[] = {w->bq, w->bk, w->bv, w->bo};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < E; i++) biases[k][i] = 0.1f * rnd_unit();
    attn_weights_finish(w);
    float *x = malloc(sizeof(float) * (size_t)N * E), *out[2], *ref = malloc(sizeof(float) * (size_t)N * E);
    out[0] = malloc(sizeof(float) * (size_t)N * E);
    out[1] = malloc(sizeof(float) * (size_t)N * E);
    if (!x || !ref || !out[0] || !out[1]) {
        CHECK(!"out of memory");
        return;
    }
    for (int kind = 0; kind < 2; kind++)
        for (int causal = 0; causal < 2; causal++) {
            for (int j = 0; j < N; j++)
                for (int e = 0; e < E; e++)
                    x[j * E + e] = kind == 0 ? 2.0f * rnd_unit()
                                   : e == 0  ? 0.03f * (float)j
                                             : 0.3f * rnd_unit();
            attn_input in = {.B = 1, .n = N, .m = N, .query = x, .key = x, .value = x, .causal = causal};
            CHECK_INT_EQ(attn_forward_naive(w, &in, ref, NULL, err, sizeof err), ATTN_OK);
            for (int fused = 0; fused < 2; fused++) {
                attn_online_exp(fused);
                attn_status st = attn_forward(w, &in, out[fused], NULL, pool, err, sizeof err);
                CHECK_MSG(st == ATTN_OK, "%s", err);
                const double d = rel_diff(out[fused], ref, (size_t)N * E);
                CHECK_MSG(d <= 1e-5, "%s scores, causal %d, epilogue %s: %.3g from the reference",
                          kind ? "climbing" : "random", causal, fused ? "on" : "off", d);
            }
            static const int others[] = {0, 1, 3}; /* no pool, 1 and 3 threads */
            for (int q = 0; q < 3 && attn_gemm_nr() > 0; q++) { /* rows alone: our kernels */
                const int p = others[q];
                float *o = malloc(sizeof(float) * (size_t)N * E);
                if (!o) break;
                attn_forward(w, &in, o, NULL, pools[p], err, sizeof err);
                CHECK_MSG(!memcmp(o, out[1], sizeof(float) * (size_t)N * E),
                          "%s scores, causal %d: other bits on %d threads than on 2",
                          kind ? "climbing" : "random", causal, p);
                free(o);
            }
            const double d = rel_diff(out[0], out[1], (size_t)N * E);
            CHECK_MSG(d <= 5e-6, "%s scores, causal %d: the epilogue's answers %.3g from the passes'",
                      kind ? "climbing" : "random", causal, d);
        }
    attn_online_exp(1);
    free(x), free(ref), free(out[0]), free(out[1]);
    attn_weights_destroy(w);
}

/* A self-attention layer of width E and H heads with random weights and
 * biases (scores of a few units), for the tests that compare two ways of
 * computing the same answer bit for bit; with kv, add_bias_kv and
 * add_zero_attn too, the two appended key positions (bias_k and bias_v
 * random). */
static attn_weights *random_weights_kv(int E, int H, bool kv) {
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    CHECK_INT_EQ(attn_weights_alloc(E, H, E, E, true, kv, kv, &w, err, sizeof err), ATTN_OK);
    if (!w) return NULL;
    if (kv)
        for (int i = 0; i < E; i++) w->bias_k[i] = 0.3f * rnd_unit(), w->bias_v[i] = 0.3f * rnd_unit();
    float *mats[] = {w->wq, w->wk, w->wv, w->wo};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < E * E; i++) mats[k][i] = 0.2f * rnd_unit();
    float *biases[] = {w->bq, w->bk, w->bv, w->bo};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < E; i++) biases[k][i] = 0.1f * rnd_unit();
    attn_weights_finish(w);
    return w;
}

static attn_weights *random_weights(int E, int H) {
    return random_weights_kv(E, H, false);
}

/* The head average's rows' max from the score product's epilogue
 * (attn_epilogue_max): the same max as the pass over the row, so the same
 * bits, on the pool and without it (tasks of other heights); with a causal
 * mask or key padding the rows take the pass (a max taken before the mask
 * would change the bits). The engine takes the max there only where one
 * head's K and V leave no room in L2 for the scores (max_in_product), so
 * the rows are as long as L2 in KiB, and 12 more (a narrow last piece):
 * heads of 128, K and V 1 KiB a key. */
static void test_epilogue_max(attn_pool *pool) {
    const int N = (int)(attn_gemm_l2_bytes() / 1024) + 12, E = 256, H = 2;
    printf("the head average's max from the product: rows of %d keys\n", N);
    char err[ATTN_ERRLEN];
    attn_weights *w = random_weights(E, H);
    if (!w) return;
    const size_t no = (size_t)N * E, nw = (size_t)N * N;
    float *x = malloc(sizeof(float) * no), *o[2], *wt[2];
    uint8_t *pad = calloc((size_t)N, 1);
    for (int e = 0; e < 2; e++) o[e] = malloc(sizeof(float) * no), wt[e] = malloc(sizeof(float) * nw);
    if (!x || !pad || !o[0] || !o[1] || !wt[0] || !wt[1]) {
        CHECK(!"out of memory");
    } else {
        for (size_t i = 0; i < no; i++) x[i] = 2.0f * rnd_unit();
        for (int j = 0; j < N; j += 7) pad[j] = 1;
        static const char *const masks[3] = {"no mask", "causal", "key padding"};
        for (int q = 0; q < 2; q++)
            for (int mk = 0; mk < 3; mk++) {
                attn_input in = {.B = 1, .n = N, .m = N, .query = x, .key = x, .value = x,
                                 .need_weights = true, .average_heads = true, .causal = mk == 1};
                if (mk == 2) in.kpm_kind = ATTN_MASK_BOOL, in.kpm = pad;
                for (int e = 0; e < 2; e++) {
                    attn_epilogue_max(e);
                    CHECK_INT_EQ(attn_forward(w, &in, o[e], wt[e], q ? pool : NULL, err, sizeof err),
                                 ATTN_OK);
                }
                attn_epilogue_max(1);
                CHECK_MSG(!memcmp(o[0], o[1], no * sizeof(float)) &&
                              !memcmp(wt[0], wt[1], nw * sizeof(float)),
                          "%s, %s: the head average with the max from the product differs from "
                          "the pass's",
                          masks[mk], q ? "pool" : "no pool");
            }
    }
    for (int e = 0; e < 2; e++) free(o[e]), free(wt[e]);
    free(x), free(pad);
    attn_weights_destroy(w);
}

/* With the dense weights or the weight rows, a causal block of rows skips
 * the keys after its last row (causal_keys): the answer must be the same
 * bits as the same mask given as an explicit boolean attn_mask, which
 * computes every key (the weights, and the dense form's outputs). Per head
 * and averaged, on the pool and without it (other task heights), lengths
 * that are and are not whole panels, and one of a single block. The rows
 * list starts with a task's worth of low rows in descending order (its
 * keys end at the first entry, not the last), then the rest in a
 * scattered order. */
static void test_causal_skip(attn_pool *pool) {
    const int E = 64, H = 2;
    static const int ns[3] = {1100, 200, 45};
    static const char *const forms[2] = {"dense weights", "weight rows"};
    char err[ATTN_ERRLEN];
    attn_weights *w = random_weights(E, H);
    if (!w) return;
    int runs = 0;
    for (int t = 0; t < 3; t++) {
        const int N = sanitized() && ns[t] > 600 ? 600 : ns[t];
        const int nr = N < 150 ? N : 150, low = N / 2 < 64 ? N / 2 : 64;
        const size_t no = (size_t)N * E, nwh = (size_t)H * N * N;
        float *x = malloc(sizeof(float) * no), *o[2], *wt[2];
        uint8_t *tri = malloc((size_t)N * N), *used = calloc((size_t)N, 1);
        int *rows = malloc(sizeof(int) * (size_t)nr);
        for (int e = 0; e < 2; e++) o[e] = malloc(sizeof(float) * no), wt[e] = malloc(sizeof(float) * nwh);
        if (!x || !tri || !used || !rows || !o[0] || !o[1] || !wt[0] || !wt[1]) {
            CHECK(!"out of memory");
        } else {
            for (size_t i = 0; i < no; i++) x[i] = 2.0f * rnd_unit();
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j++) tri[(size_t)i * N + j] = j > i;
            int s = 0;
            for (; s < low; s++) rows[s] = 2 * (low - 1 - s), used[rows[s]] = 1;
            for (int u = 0; s < nr; u++) /* 37 is prime to each N: a permutation */
                if (!used[(u * 37 + 5) % N]) rows[s++] = (u * 37 + 5) % N, used[(u * 37 + 5) % N] = 1;
            for (int f = 0; f < 2; f++)
                for (int q = 0; q < 2; q++)
                    for (int avg = 0; avg < 2; avg++) {
                        size_t nw = 0;
                        for (int e = 0; e < 2; e++) {
                            attn_input in = {.B = 1, .n = N, .m = N, .query = x, .key = x, .value = x,
                                             .need_weights = f == 0, .average_heads = avg};
                            if (f == 1) in.rows = rows, in.nrows = nr;
                            if (e == 0)
                                in.causal = true;
                            else
                                in.mask_kind = ATTN_MASK_BOOL, in.attn_mask = tri, in.mask_dims = 2;
                            size_t nout = 0;
                            CHECK(attn_output_sizes(w, &in, &nout, &nw) && nw <= nwh);
                            memset(wt[e], 0xff, sizeof(float) * nwh); /* NaN: all must be written */
                            const attn_result res = {.out = o[e], .weights = wt[e]};
                            CHECK_INT_EQ(attn_run(w, &in, &res, q ? pool : NULL, err, sizeof err),
                                         ATTN_OK);
                        }
                        runs++;
                        /* the weight rows' outputs are the online pass's, which
                         * takes other paths under the two masks (the
                         * exponentials in the product, whole blocks skipped) */
                        CHECK_MSG((f == 1 || !memcmp(o[0], o[1], no * sizeof(float))) &&
                                      !memcmp(wt[0], wt[1], nw * sizeof(float)),
                                  "n = %d, %s, %s, %s: causal differs from the explicit mask", N,
                                  forms[f], avg ? "averaged" : "per head", q ? "pool" : "no pool");
                    }
        }
        for (int e = 0; e < 2; e++) free(o[e]), free(wt[e]);
        free(x), free(tri), free(used), free(rows);
    }
    CHECK_INT_EQ(runs, 24);
    attn_weights_destroy(w);
}

/* Without dense weights, causal, the rows a key block reaches in part go
 * DIAG_ROWS at a time, each run scoring the keys up to its last row
 * (attn_online_task, and the second pass of the head average's top-k):
 * the same bits as the mask given as an explicit boolean attn_mask, which
 * scores every key (with the exponentials in the product off: they are
 * taken only where no mask but the causal one reaches a block). The
 * outputs, and top-k per head and of the head average (whose rows are
 * padded with the keys not scored: k of 100 for heads of 64, more than a
 * run's fewest keys; 16 for the others). Lengths of several key blocks (1100:
 * 256 a block and 76), of one whole block (512), a block and a part (300)
 * and under a panel (45), heads of 32 and 64 (their K and V packed for the
 * engine's kernel), heads of 32 with add_bias_kv and add_zero_attn
 * (appended keys, never masked, after the given ones), and heads of 16
 * (on OpenBLAS under the AVX-512 kernel, where the block is taken whole;
 * packed under ATTN_GEMM=avx2), on each pool and none: the rows in runs of
 * other heights. With the exponentials on, the same bits on every pool,
 * also where OpenBLAS's rows depend on their neighbours (its Haswell and
 * Zen kernels: heads of 16 on the AVX-512 kernel, everything under
 * ATTN_GEMM=blas and ATTN_ISA=portable), whose tasks do not follow the
 * pool (split_fixed). */
static void test_causal_online(attn_pool *pools[4]) {
    static const int ns[4] = {1100, 512, 300, 45};
    static const char *const forms[3] = {"no weights", "top-k per head", "top-k of the average"};
    char err[ATTN_ERRLEN];
    int runs = 0;
    for (int hd = 0; hd < 4; hd++) {
        const int E = 64, H = hd == 1 ? 1 : hd == 3 ? 4 : 2;
        attn_weights *w = random_weights_kv(E, H, hd == 2);
        if (!w) return;
        for (int t = 0; t < 4; t++) {
            const int N = sanitized() && ns[t] > 600 ? 600 : ns[t];
            /* heads of 64: k past a run's 32 keys, so its rows need the keys
             * it does not score (padded as masked ones) */
            const int k = hd == 1 ? (N < 100 ? N : 100) : 16;
            const size_t no = (size_t)N * E, nk = (size_t)H * N * k;
            float *x = malloc(sizeof(float) * no), *o[4], *v[4];
            int32_t *ix[4];
            uint8_t *tri = malloc((size_t)N * N);
            bool ok = x && tri;
            for (int e = 0; e < 4; e++) {
                o[e] = malloc(sizeof(float) * no), v[e] = malloc(sizeof(float) * nk);
                ix[e] = malloc(sizeof(int32_t) * nk);
                ok = ok && o[e] && v[e] && ix[e];
            }
            if (!ok) {
                CHECK(!"out of memory");
            } else {
                for (size_t i = 0; i < no; i++) x[i] = 2.0f * rnd_unit();
                for (int i = 0; i < N; i++)
                    for (int j = 0; j < N; j++) tri[(size_t)i * N + j] = j > i;
                for (int f = 0; f < 3; f++) {
                    const size_t nv = f == 2 ? (size_t)N * k : f == 1 ? nk : 0;
                    for (int q = 0; q < 4; q++) {
                        if (pool_skipped(q, true)) continue;
                        /* e 0: causal, 1: the explicit mask, exponentials off;
                         * 2 (q 0) or 3: causal, exponentials on */
                        for (int e = 0; e < 3; e++) {
                            const int into = e < 2 ? e : q == 0 ? 2 : 3;
                            attn_input in = {.B = 1, .n = N, .m = N, .query = x, .key = x, .value = x,
                                             .topk = f ? k : 0, .average_heads = f == 2};
                            if (e == 1)
                                in.mask_kind = ATTN_MASK_BOOL, in.attn_mask = tri, in.mask_dims = 2;
                            else
                                in.causal = true;
                            const attn_result res = {.out = o[into], .weights = f ? v[into] : NULL,
                                                     .indices = f ? ix[into] : NULL};
                            attn_online_exp(e == 2);
                            CHECK_INT_EQ(attn_run(w, &in, &res, pools[q], err, sizeof err), ATTN_OK);
                        }
                        attn_online_exp(1);
                        runs++;
                        CHECK_MSG(!memcmp(o[0], o[1], no * sizeof(float)) &&
                                      !memcmp(v[0], v[1], nv * sizeof(float)) &&
                                      !memcmp(ix[0], ix[1], nv * sizeof(int32_t)),
                                  "n = %d, H = %d%s, %s, pool %d: causal differs from the explicit mask",
                                  N, H, hd == 2 ? " with bias_kv" : "", forms[f], q);
                        if (q > 0)
                            CHECK_MSG(!memcmp(o[2], o[3], no * sizeof(float)) &&
                                          !memcmp(v[2], v[3], nv * sizeof(float)) &&
                                          !memcmp(ix[2], ix[3], nv * sizeof(int32_t)),
                                      "n = %d, H = %d%s, %s: other bits on %d threads than none", N, H,
                                      hd == 2 ? " with bias_kv" : "", forms[f], q);
                    }
                }
            }
            for (int e = 0; e < 4; e++) free(o[e]), free(v[e]), free(ix[e]);
            free(x), free(tri);
        }
        attn_weights_destroy(w);
    }
    CHECK_INT_EQ(runs, 48 * pools_kept(true));
}

/* attn_run_timed: the same bits as attn_run, and a time for each phase the
 * pass has work in (rows only with weight rows, the top-k average's second
 * pass only with it), none for the others, their sum within the call's. */
static void test_phase_times(attn_pool *pool) {
    char err[ATTN_ERRLEN];
    tcase c = {.B = 1, .n = 300, .m = 300, .E = 64, .H = 4, .kdim = 64, .vdim = 64,
               .bias = true, .self = true, .wscale = 1.0f};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    static const char *const forms[4] = {"no weights", "dense weights", "weight rows",
                                         "top-4 of the head average"};
    int rows[3] = {0, 150, 299};
    for (int f = 0; f < 4; f++) {
        attn_input in = x.in;
        in.need_weights = f == 1;
        if (f == 2) in.rows = rows, in.nrows = 3;
        if (f == 3) in.topk = 4, in.average_heads = true;
        size_t no = 0, nw = 0;
        CHECK(attn_output_sizes(w, &in, &no, &nw));
        float *o1 = calloc(no, sizeof *o1), *o2 = calloc(no, sizeof *o2);
        float *w1 = calloc(nw + 1, sizeof *w1), *w2 = calloc(nw + 1, sizeof *w2);
        int32_t *i1 = calloc(nw + 1, sizeof *i1), *i2 = calloc(nw + 1, sizeof *i2);
        const attn_result r1 = {o1, w1, i1}, r2 = {o2, w2, i2};
        attn_phase_times t;
        memset(&t, 0xff, sizeof t); /* NaNs: every field must be written */
        CHECK_INT_EQ(attn_run(w, &in, &r1, pool, err, sizeof err), ATTN_OK);
        CHECK_INT_EQ(attn_run_timed(w, &in, &r2, pool, &t, err, sizeof err), ATTN_OK);
        CHECK_MSG(!memcmp(o1, o2, no * sizeof *o1) && !memcmp(w1, w2, nw * sizeof *w1) &&
                      !memcmp(i1, i2, nw * sizeof *i1),
                  "%s: attn_run_timed's answer differs from attn_run's", forms[f]);
        double sum = 0;
        for (int k = 0; k < ATTN_PH_COUNT; k++) {
            const bool has = k == ATTN_PH_PROJ || k == ATTN_PH_ATTN || k == ATTN_PH_OUT ||
                             (k == ATTN_PH_ROWS && f == 2) || (k == ATTN_PH_AVG && f == 3);
            if (k == ATTN_PH_PACK) /* only where the engine's kernel packs K and V */
                CHECK_MSG(t.s[k] >= 0, "%s: %s %g s", forms[f], attn_phase_name(k), t.s[k]);
            else
                CHECK_MSG(has ? t.s[k] > 0 : t.s[k] == 0, "%s: %s %g s", forms[f],
                          attn_phase_name(k), t.s[k]);
            sum += t.s[k];
        }
        CHECK_MSG(t.total >= sum && t.total < 60, "%s: phases %g s, the call %g s", forms[f], sum,
                  t.total);
        free(o1), free(o2), free(w1), free(w2), free(i1), free(i2);
    }
    CHECK(strcmp(attn_phase_name(ATTN_PH_OUT), "out-projection") == 0);
    CHECK(strcmp(attn_phase_name(ATTN_PH_COUNT), "?") == 0);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* Top-k where keys are masked: a fully masked row is k zeros at keys
 * 0..k-1; a row with fewer than k allowed keys takes them, then its lowest
 * masked keys (the ties rule, weight 0) - also across key blocks that
 * causal masking skips whole, and with the appended bias_kv and zero keys
 * (indices m and m+1), which are never masked. Checked against the naive
 * reference entry by entry where its weight is 0. */
static void test_topk_masked(attn_pool *pool) {
    char err[ATTN_ERRLEN];
    /* batch entry 1 has every key padded, query 2 every key masked */
    tcase c = {.B = 2, .n = 6, .m = 7, .E = 32, .H = 4, .kdim = 32, .vdim = 32, .bias = true,
               .wscale = 1.0f};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    uint8_t kpm[2 * 7] = {0};
    for (int j = 0; j < 7; j++) kpm[7 + j] = 1;
    uint8_t mask[6 * 7] = {0};
    for (int j = 0; j < 7; j++) mask[2 * 7 + j] = 1;
    x.in.kpm_kind = ATTN_MASK_BOOL, x.in.kpm = kpm, x.in.kpm_batched = true;
    x.in.mask_kind = ATTN_MASK_BOOL, x.in.attn_mask = mask, x.in.mask_dims = 2;
    for (int avg = 0; avg < 2; avg++)
        for (int k = 3; k <= 7; k += 4) {
            x.in.topk = k, x.in.average_heads = avg;
            const int Hx = avg ? 1 : 4;
            float out[2 * 6 * 32], val[2 * 4 * 6 * 7];
            int32_t idx[2 * 4 * 6 * 7];
            attn_result res = {out, val, idx};
            CHECK_INT_EQ(attn_run(w, &x.in, &res, pool, err, sizeof err), ATTN_OK);
            for (int b = 0; b < 2; b++)
                for (int h = 0; h < Hx; h++)
                    for (int i = 0; i < 6; i++) {
                        if (b == 0 && i != 2) continue;
                        for (int q = 0; q < k; q++) {
                            size_t at = (((size_t)b * Hx + h) * 6 + i) * k + q;
                            CHECK_MSG(val[at] == 0.0f && idx[at] == q,
                                      "fully masked row b=%d h=%d i=%d k=%d avg=%d: entry %d is "
                                      "(%g, %d), want (0, %d)",
                                      b, h, i, k, avg, q, val[at], idx[at], q);
                        }
                    }
        }
    inputs_free(&x);
    attn_weights_destroy(w);

    /* long and causal: skipped key blocks, appended keys after them */
    int len = sanitized() ? 300 : 600;
    tcase lc = {.B = 1, .n = len, .m = len, .E = 16, .H = 2, .kdim = 16, .vdim = 16, .bias = true,
                .bias_kv = true, .zero_attn = true, .self = true, .causal = true,
                .kpm_kind = ATTN_MASK_BOOL, .wscale = 1.0f};
    w = make_weights(&lc);
    if (!w) return;
    make_inputs(&lc, &x);
    const int M = len + 2;
    for (int avg = 0; avg < 2; avg++)
        for (int k = 1; k <= M; k = k * 3 + 2) {
            x.in.topk = k, x.in.average_heads = avg;
            const size_t cnt = (size_t)(avg ? 1 : 2) * (size_t)len * (size_t)k;
            float *out = malloc((size_t)len * 16 * sizeof *out), *ref = malloc((size_t)len * 16 * 4);
            float *val = malloc(cnt * sizeof *val), *nval = malloc(cnt * sizeof *nval);
            int32_t *idx = malloc(cnt * sizeof *idx), *nidx = malloc(cnt * sizeof *nidx);
            attn_result res = {out, val, idx}, nres = {ref, nval, nidx};
            CHECK_INT_EQ(attn_run(w, &x.in, &res, pool, err, sizeof err), ATTN_OK);
            CHECK_INT_EQ(attn_run_naive(w, &x.in, &nres, err, sizeof err), ATTN_OK);
            int bad = 0;
            for (size_t e = 0; e < cnt && bad < 3; e++)
                if (nval[e] == 0.0f && (val[e] != 0.0f || idx[e] != nidx[e])) {
                    CHECK_MSG(0, "causal n=%d k=%d avg=%d row %zu entry %zu: (%g, %d), reference "
                              "(0, %d)", len, k, avg, e / (size_t)k, e % (size_t)k, val[e], idx[e],
                              nidx[e]);
                    bad++;
                }
            /* row 0 sees key 0 and the two appended keys, then masked keys from 1 */
            int want[8] = {0, len, len + 1, 1, 2, 3, 4, 5}, got[8];
            int kk = k < 8 ? k : 8;
            for (int q = 0; q < kk; q++) got[q] = idx[q];
            for (int q = 3; q < kk; q++) CHECK_INT_EQ(got[q], want[q]);
            int fin = 0;
            for (int q = 0; q < (kk < 3 ? kk : 3); q++) fin += got[q] == 0 || got[q] >= len;
            CHECK_INT_EQ(fin, kk < 3 ? kk : 3);
            free(out), free(ref), free(val), free(nval), free(idx), free(nidx);
        }
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* Top-k where the order of the keys is adversarial for the per-row heaps:
 * a float mask whose scores rise along every row (every key displaces the
 * lightest one kept, across many key blocks) or fall along it (none after
 * the first k does). Checked against the naive reference's dense weights.
 * (Ties among equal weights are checked with masked keys, above: keys with
 * equal inputs need not get bit-equal scores from sgemm's edge kernels.) */
static void test_topk_adversarial(attn_pool *pool) {
    char err[ATTN_ERRLEN];
    const int n = 5, m = sanitized() ? 700 : 2100, k = 7;
    tcase c = {.B = 1, .n = n, .m = m, .E = 16, .H = 2, .kdim = 16, .vdim = 16, .bias = true,
               .wscale = 0.01f};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    float *mask = malloc((size_t)n * m * sizeof *mask);
    float *ref = malloc((size_t)n * 16 * sizeof *ref), *out = malloc((size_t)n * 16 * sizeof *out);
    float *D = malloc((size_t)2 * n * m * sizeof *D), *val = malloc((size_t)2 * n * k * sizeof *val);
    int32_t *idx = malloc((size_t)2 * n * k * sizeof *idx);
    static const char *const kind[2] = {"rising", "falling"};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++)
                mask[(size_t)i * m + j] = t == 0 ? 0.01f * j : -0.01f * j;
        x.in.mask_kind = ATTN_MASK_FLOAT, x.in.attn_mask = mask, x.in.mask_dims = 2;
        attn_input dense = x.in;
        dense.need_weights = true;
        CHECK_INT_EQ(attn_forward_naive(w, &dense, ref, D, err, sizeof err), ATTN_OK);
        attn_input in = x.in;
        in.topk = k;
        attn_result res = {out, val, idx};
        CHECK_INT_EQ(attn_run(w, &in, &res, pool, err, sizeof err), ATTN_OK);
        char what[64];
        snprintf(what, sizeof what, "top-%d, %s scores over %d keys", k, kind[t], m);
        check_topk(what, D, val, idx, (size_t)2 * n, m, k, 1e-4, true);
        for (int q = 0; q < k; q++) /* rising: the last keys; falling: the first */
            CHECK_INT_EQ(idx[(size_t)n * k + q], t == 0 ? m - 1 - q : q);
    }
    free(mask), free(ref), free(out), free(D), free(val), free(idx);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* A long sequence without weights (online softmax over many key blocks),
 * and many keys for a few queries. */
static void test_long(attn_pool *pool) {
    int len = sanitized() ? 300 : 1500;
    tcase c = {.B = 1, .n = len, .m = len, .E = 32, .H = 2, .kdim = 32, .vdim = 32,
               .bias = true, .self = true, .kpm_kind = ATTN_MASK_BOOL, .causal = true,
               .wscale = 2.0f};
    run_case(&c, pool, true);
    tcase many = {.B = 2, .n = 4, .m = sanitized() ? 3000 : 9000, .E = 16, .H = 2, .kdim = 8, .vdim = 16,
                  .bias = true, .bias_kv = true, .zero_attn = true,
                  .mask_kind = ATTN_MASK_FLOAT, .mask_dims = 3, .wscale = 4.0f};
    run_case(&many, pool, true);
    printf("long cases: largest difference out %.3g, weights %.3g\n", worst_out, worst_wts);

    /* Without weights, scratch stays far below n*M floats. */
    attn_weights *w = NULL;
    char err[ATTN_ERRLEN];
    if (attn_weights_alloc(1024, 16, 1024, 1024, true, false, false, &w, err, sizeof err)) return;
    attn_weights_finish(w);
    float dummy[1];
    attn_input in = {.B = 1, .n = 8192, .m = 8192, .query = dummy, .key = dummy, .value = dummy};
    size_t bytes = attn_forward_scratch_bytes(w, &in, 2);
    printf("scratch for n=m=8192 E=1024 without weights: %.1f MiB (n*M floats: %.1f MiB)\n",
           bytes / 1048576.0, 8192.0 * 8192 * 4 / 1048576.0);
    CHECK(bytes > 0);
    /* QKV (3nE floats), the packed K and V of the engine's kernel (2nE)
     * and the workers' slots: O(n), nothing n*M */
    CHECK(bytes < (size_t)8192 * 1024 * 4 * 6);
    in.n = in.m = 4096;
    size_t half = attn_forward_scratch_bytes(w, &in, 2);
    in.n = in.m = 8192;
    CHECK_MSG(half > 0 && (double)bytes < 2.2 * (double)half,
              "scratch grows faster than n: %zu bytes at n=4096, %zu at 8192", half, bytes);
    /* top-k per head needs a heap count per row more; averaged, a copy of
     * Q and each row's max and sum (n*E and 2*H*n floats); rows a few rows */
    in.topk = 16;
    size_t tk = attn_forward_scratch_bytes(w, &in, 2);
    in.average_heads = true;
    size_t tka = attn_forward_scratch_bytes(w, &in, 2);
    in.topk = 0, in.average_heads = false;
    int rows[2] = {5, 8000};
    in.rows = rows, in.nrows = 2;
    size_t rw = attn_forward_scratch_bytes(w, &in, 2);
    printf("scratch, same shape: top-k %.1f MiB, top-k averaged %.1f MiB, two weight rows %.1f "
           "MiB\n",
           tk / 1048576.0, tka / 1048576.0, rw / 1048576.0);
    /* each figure is rounded up to whole 2 MiB huge pages (hugemem.h), so
     * an increment under a megabyte may not show and costs up to 2 MiB */
    const size_t huge = (size_t)2 << 20;
    CHECK(bytes % huge == 0);
    CHECK(tk >= bytes && tk < bytes + (1u << 20) + huge); /* heaps: 512 rows x 16 keys x 8 bytes a worker */
    CHECK(tka > tk && tka < tk + (size_t)8192 * (1024 + 2 * 16) * 4 + (1u << 20) + huge);
    CHECK(rw >= bytes && rw < bytes + (1u << 20) + huge);
    attn_weights_destroy(w);
}

/* Several threads share one pool and one weight set. */
typedef struct {
    const attn_weights *w;
    const attn_input *in;
    attn_pool *pool;
    const float *expect;
    size_t nout;
    int bad;
} conc_arg;

static void *conc_main(void *varg) {
    conc_arg *a = varg;
    float *out = malloc(a->nout * sizeof *out);
    char err[ATTN_ERRLEN];
    for (int r = 0; r < 5; r++) {
        if (attn_forward(a->w, a->in, out, NULL, a->pool, err, sizeof err) != ATTN_OK ||
            memcmp(out, a->expect, a->nout * sizeof *out) != 0)
            a->bad++;
    }
    free(out);
    return NULL;
}

/* A pass whose scratch is the spare left by the one before (hugemem.h)
 * gives the same bits even when the spare holds NaN everywhere: no pass
 * reads scratch it has not written. */
static void test_spare(attn_pool *pool) {
    tcase c = {.B = 2, .n = 200, .m = 200, .E = 256, .H = 4, .kdim = 256, .vdim = 256,
               .bias = true, .self = true, .wscale = 0.3f};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    for (int nw = 0; nw < 2; nw++) {
        x.in.need_weights = nw;
        char err[ATTN_ERRLEN] = "";
        size_t nout = 0, nwts = 0;
        CHECK(attn_output_sizes(w, &x.in, &nout, &nwts));
        float *o[2] = {malloc(nout * sizeof(float)), malloc(nout * sizeof(float))};
        float *wt[2] = {malloc((nwts + 1) * sizeof(float)), malloc((nwts + 1) * sizeof(float))};
        const size_t bytes = attn_forward_scratch_bytes(w, &x.in, pool ? attn_pool_size(pool) : 1);
        CHECK_MSG(bytes >= MEM_HUGE_MIN, "scratch %zu bytes: too small to be kept", bytes);
        mem_reuse_release(); /* spares of other sizes, from earlier passes */
        for (int r = 0; r < 2; r++) {
            CHECK_INT_EQ(attn_forward(w, &x.in, o[r], nw ? wt[r] : NULL, pool, err, sizeof err),
                         ATTN_OK);
            CHECK_MSG(mem_reuse_spare() == bytes, "spare %zu bytes after a pass of %zu",
                      mem_reuse_spare(), bytes);
            float *spare = mem_reuse_alloc(bytes); /* the spare, poisoned and put back */
            for (size_t i = 0; i < bytes / sizeof *spare; i++) spare[i] = NAN;
            mem_reuse_free(spare, bytes);
        }
        CHECK_MSG(memcmp(o[0], o[1], nout * sizeof(float)) == 0,
                  "weights %d: output changed when the scratch was a poisoned spare", nw);
        CHECK_MSG(!nw || memcmp(wt[0], wt[1], nwts * sizeof(float)) == 0,
                  "weights changed when the scratch was a poisoned spare");
        for (int r = 0; r < 2; r++) free(o[r]), free(wt[r]);
    }
    mem_reuse_release();
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* c on every pool of pools[0..3] (0 to 3 workers) gives the same bits,
 * outputs and weights, as on the first: the task splits never change an
 * element's arithmetic (on OpenBLAS whose rows depend on their neighbours,
 * the splits do not follow the pool: split_fixed in core/attention.c). */
static void check_same_bits(const tcase *c, attn_pool **pools, const char *what) {
    attn_weights *w = make_weights(c);
    if (!w) return;
    inputs x;
    make_inputs(c, &x);
    char err[ATTN_ERRLEN] = "";
    size_t nout = 0, nwts = 0;
    CHECK(attn_output_sizes(w, &x.in, &nout, &nwts));
    float *o[4] = {NULL}, *wt[4] = {NULL};
    for (int p = 0; p < 4; p++) {
        if (pool_skipped(p, true)) continue;
        o[p] = malloc(nout * sizeof(float));
        wt[p] = nwts ? malloc(nwts * sizeof(float)) : NULL;
        CHECK_INT_EQ(attn_forward(w, &x.in, o[p], wt[p], pools[p], err, sizeof err), ATTN_OK);
    }
    for (int p = 1; p < 4; p++) {
        if (pool_skipped(p, true)) continue;
        CHECK_MSG(memcmp(o[0], o[p], nout * sizeof(float)) == 0,
                  "%s: output with %d workers differs from one task's", what, p);
        CHECK_MSG(!nwts || memcmp(wt[0], wt[p], nwts * sizeof(float)) == 0,
                  "%s: weights with %d workers differ from one task's", what, p);
    }
    for (int p = 0; p < 4; p++) free(o[p]), free(wt[p]);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* Every instruction set the vector code is built for that this CPU runs
 * (attn_isa_use; the matrix kernel stays the default): the AVX2 copies give
 * the AVX-512 ones' bits (outputs, dense weights per head and averaged,
 * top-k values and indices), the portable ones the same results within
 * 1e-5 (their exponentials round without FMA). Inputs of odd lengths (each
 * kernel's tail), masks, keys and a long one (the online blocks). */
static void test_isa_same_bits(attn_pool *pool) {
    const attn_isa was = attn_isa_now();
    static const tcase cases[] = {
        {.B = 2, .n = 77, .m = 77, .E = 64, .H = 4, .kdim = 64, .vdim = 64, .bias = true,
         .self = true, .kpm_kind = ATTN_MASK_BOOL, .kpm_batched = true, .wscale = 2.0f},
        {.B = 1, .n = 45, .m = 131, .E = 96, .H = 3, .kdim = 40, .vdim = 56, .bias = true,
         .bias_kv = true, .zero_attn = true, .mask_kind = ATTN_MASK_FLOAT, .mask_dims = 3,
         .wscale = 2.0f},
        {.B = 2, .n = 150, .m = 150, .E = 64, .H = 2, .kdim = 64, .vdim = 64, .self = true,
         .causal = true, .wscale = 2.0f},
        {.B = 1, .n = 700, .m = 700, .E = 64, .H = 2, .kdim = 64, .vdim = 64, .bias = true,
         .self = true, .kpm_kind = ATTN_MASK_BOOL, .wscale = 4.0f},
    };
    const int ncase = (int)(sizeof cases / sizeof cases[0]);
    int levels = 0;
    for (int ci = 0; ci < ncase; ci++) {
        char err[ATTN_ERRLEN] = "", what[400];
        attn_weights *w = make_weights(&cases[ci]);
        if (!w) continue;
        inputs x;
        make_inputs(&cases[ci], &x);
        static const char *forms[] = {"no weights", "weights per head", "averaged weights",
                                      "top-5 per head"};
        for (int form = 0; form < 4; form++) {
            attn_input in = x.in;
            in.need_weights = form == 1 || form == 2;
            in.average_heads = form == 2;
            in.topk = form == 3 ? 5 : 0;
            size_t nout = 0, nw = 0;
            CHECK(attn_output_sizes(w, &in, &nout, &nw));
            float *o[3] = {0}, *wt[3] = {0};
            int32_t *ix[3] = {0};
            levels = 0;
            for (int l = ATTN_ISA_PORTABLE; l <= ATTN_ISA_AVX512; l++) {
                if (!attn_isa_use((attn_isa)l)) continue;
                levels++;
                o[l] = malloc(nout * sizeof(float));
                wt[l] = nw ? malloc(nw * sizeof(float)) : NULL;
                ix[l] = nw && in.topk ? malloc(nw * sizeof(int32_t)) : NULL;
                attn_result res = {o[l], wt[l], ix[l]};
                CHECK_INT_EQ(attn_run(w, &in, &res, pool, err, sizeof err), ATTN_OK);
            }
            attn_isa_use(was);
            describe(&cases[ci], what, sizeof what);
            if (o[ATTN_ISA_AVX2] && o[ATTN_ISA_AVX512]) {
                CHECK_MSG(!memcmp(o[ATTN_ISA_AVX2], o[ATTN_ISA_AVX512], nout * sizeof(float)),
                          "%s, %s: the AVX2 copies' output differs from AVX-512's", what,
                          forms[form]);
                CHECK_MSG(!nw || !memcmp(wt[ATTN_ISA_AVX2], wt[ATTN_ISA_AVX512], nw * sizeof(float)),
                          "%s, %s: the AVX2 copies' weights differ from AVX-512's", what, forms[form]);
                CHECK_MSG(!ix[ATTN_ISA_AVX2] ||
                              !memcmp(ix[ATTN_ISA_AVX2], ix[ATTN_ISA_AVX512], nw * sizeof(int32_t)),
                          "%s, %s: the AVX2 copies' top-k keys differ from AVX-512's", what,
                          forms[form]);
            }
            const int best = o[ATTN_ISA_AVX512] ? ATTN_ISA_AVX512 : ATTN_ISA_AVX2;
            if (o[best] && o[ATTN_ISA_PORTABLE]) {
                const double d = rel_diff(o[ATTN_ISA_PORTABLE], o[best], nout);
                CHECK_MSG(d <= 1e-5, "%s, %s: the portable copies' output differs by %.3g",
                          what, forms[form], d);
                if (nw && !in.topk) {
                    const double dw = rel_diff(wt[ATTN_ISA_PORTABLE], wt[best], nw);
                    CHECK_MSG(dw <= 1e-5,
                              "%s, %s: the portable copies' weights differ by %.3g", what,
                              forms[form], dw);
                }
            }
            for (int l = 0; l < 3; l++) free(o[l]), free(wt[l]), free(ix[l]);
        }
        inputs_free(&x);
        attn_weights_destroy(w);
    }
    printf("vector code on %d instruction sets (running on %s): AVX2 bits = AVX-512 bits\n",
           levels, attn_isa_name(was));
}

/* Projections whose packed weights are larger than L2 split into column
 * ranges (all rows each) instead of row ranges, and with more rows than a
 * task takes (2 x 600 here, on 2 workers), into row ranges and a tail of
 * the last rows in column ranges: the outputs (and weights, for the short
 * inputs) are the same bits with no pool (one task), 1, 2 and 3 workers,
 * self-attention (one [E, 3E] product) and cross-attention (each
 * projection its own piece of the packed matrix). E = 768: 7 MB packed,
 * above any L2 this runs on. */
static void test_column_split(attn_pool **pools) {
    if (attn_gemm_nr() == 0) return; /* OpenBLAS products split by rows only */
    static const char *names[2][2] = {
        {"column split, cross-attention", "column split, self-attention"},
        {"row ranges and a column-split tail, cross-attention",
         "row ranges and a column-split tail, self-attention"}};
    for (int tall = 0; tall < 2; tall++)
        for (int self = 1; self >= 0; self--) {
            const int n = tall ? 600 : 45, m = self ? n : tall ? 550 : 70;
            tcase c = {.B = 2, .n = n, .m = m, .E = 768, .H = 12, .kdim = 768, .vdim = 768,
                       .bias = true, .self = self, .need_weights = !tall, .wscale = 0.2f};
            CHECK(attn_gemm_packed_floats(c.E, 3 * c.E) * sizeof(float) > attn_gemm_l2_bytes());
            check_same_bits(&c, pools, names[tall][self]);
        }
}

/* Dense weights over many keys: where L2 holds a head's K and V, a task
 * walks its rows in sub-blocks (fwd_plan_make); per head and averaged,
 * against the reference and bit for bit across 0 to 3 workers (one task's
 * 512 rows, or two or more tasks' rows, in sub-blocks of the same size).
 * Then a head whose K and V alone fill this CPU's L2 (d = 128, keys from
 * the L2 size): per head it takes sub-blocks of SROW_STREAM rows, averaged
 * whole tasks. */
static void test_dense_blocks(attn_pool **pools) {
    printf("dense weights in row sub-blocks: L2 %zu KiB a core\n", attn_gemm_l2_bytes() >> 10);
    const int len = 1200; /* sub-blocks from 512 KiB of L2, under sanitizers too */
    const int wide = (int)(attn_gemm_l2_bytes() / 1024) + 64; /* K, V: 1 KiB a key */
    static const char *names[2][2] = {
        {"dense weights, per head", "dense weights, averaged"},
        {"dense weights, K and V past L2, per head", "dense weights, K and V past L2, averaged"}};
    for (int big = 0; big < 2; big++)
        for (int avg = 0; avg < 2; avg++) {
            const int n = big ? wide : len, E = big ? 128 : 64;
            tcase c = {.B = big ? 1 : 2, .n = n, .m = n, .E = E, .H = big ? 1 : 2, .kdim = E,
                       .vdim = E, .bias = true, .self = true, .kpm_kind = ATTN_MASK_BOOL,
                       .kpm_batched = true, .causal = avg == 0, .need_weights = true,
                       .average = avg, .wscale = 2.0f};
            run_case(&c, pools[2], true);
            check_same_bits(&c, pools, names[big][avg]);
        }
}

static void test_concurrent(attn_pool *pool) {
    tcase c = {.B = 2, .n = 100, .m = 100, .E = 64, .H = 4, .kdim = 64, .vdim = 64,
               .bias = true, .self = true, .wscale = 2.0f};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    size_t nout;
    attn_output_sizes(w, &x.in, &nout, NULL);
    float *expect = malloc(nout * sizeof *expect);
    char err[ATTN_ERRLEN];
    CHECK_INT_EQ(attn_forward(w, &x.in, expect, NULL, pool, err, sizeof err), ATTN_OK);
    pthread_t th[4];
    conc_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (conc_arg){.w = w, .in = &x.in, .pool = pool, .expect = expect, .nout = nout};
        pthread_create(&th[t], NULL, conc_main, &args[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_MSG(args[t].bad == 0, "concurrent caller %d: %d runs differed", t, args[t].bad);
    }
    free(expect);
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* ------------------------------------------------------------ validation */

static void test_validation(attn_pool *pool) {
    tcase c = {.B = 1, .n = 4, .m = 5, .E = 8, .H = 2, .kdim = 8, .vdim = 8, .wscale = 1.0f};
    attn_weights *w = make_weights(&c);
    if (!w) return;
    inputs x;
    make_inputs(&c, &x);
    float out[4 * 8], wts[2 * 4 * 5];
    char err[ATTN_ERRLEN];
    attn_input in;

    CHECK_INT_EQ(attn_input_check(w, &x.in, err, sizeof err), ATTN_OK);
    in = x.in, in.mask_kind = ATTN_MASK_BOOL, in.attn_mask = wts, in.mask_dims = 5;
    CHECK_INT_EQ(attn_forward(w, &in, out, NULL, pool, err, sizeof err), ATTN_ERR_SHAPE);
    CHECK_STR_CONTAINS(err, "attn_mask has 5 dims; expected 2, 3 or 4");
    in = x.in, in.mask_kind = ATTN_MASK_FLOAT, in.attn_mask = NULL, in.mask_dims = 2;
    CHECK(attn_input_check(w, &in, err, sizeof err) != ATTN_OK);
    CHECK_STR_CONTAINS(err, "attn_mask");
    in = x.in, in.kpm_kind = ATTN_MASK_BOOL, in.kpm = NULL;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "key_padding_mask");
    in = x.in, in.kpm_kind = (attn_mask_kind)7, in.kpm = wts;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "key_padding_mask");
    in = x.in, in.B = 0;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "B=0");
    in = x.in, in.n = 0;
    CHECK_INT_EQ(attn_forward_naive(w, &in, out, NULL, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "query");
    in = x.in, in.m = -3;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "key");
    in = x.in, in.query = NULL;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "query");
    in = x.in, in.value = NULL;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "value");
    in = x.in, in.need_weights = true;
    CHECK_INT_EQ(attn_forward(w, &in, out, NULL, pool, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "weights");
    CHECK_INT_EQ(attn_forward(w, &x.in, NULL, NULL, pool, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "out");
    CHECK_INT_EQ(attn_input_check(NULL, &x.in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_INT_EQ(attn_input_check(w, NULL, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_INT_EQ(attn_forward_scratch_bytes(w, &in, 2) > 0, 1);
    in = x.in, in.n = 0;
    CHECK_INT_EQ(attn_forward_scratch_bytes(w, &in, 2), 0);

    /* Sizes: key positions, output counts, overflow. */
    CHECK_INT_EQ(attn_key_positions(w, 5), 5);
    size_t no = 0, nw = 0;
    in = x.in, in.need_weights = true;
    CHECK(attn_output_sizes(w, &in, &no, &nw));
    CHECK_INT_EQ(no, 4 * 8);
    CHECK_INT_EQ(nw, 2 * 4 * 5);
    in.average_heads = true;
    CHECK(attn_output_sizes(w, &in, &no, &nw));
    CHECK_INT_EQ(nw, 4 * 5);
    in = x.in, in.B = INT32_MAX, in.n = INT32_MAX, in.m = INT32_MAX - 2, in.need_weights = true;
    CHECK(!attn_output_sizes(w, &in, &no, &nw) || sizeof(size_t) > 8);
    CHECK_INT_EQ(attn_forward(w, &in, out, wts, pool, err, sizeof err), ATTN_ERR_LIMIT);
    CHECK_STR_CONTAINS(err, "overflow");
    in.m = INT32_MAX;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_LIMIT);

    /* A request too big to allocate is refused, not aborted. */
    in = x.in, in.B = 64, in.n = in.m = 1 << 30, in.need_weights = false;
    attn_weights *big = NULL;
    if (attn_weights_alloc(1024, 8, 1024, 1024, false, false, false, &big, err, sizeof err) ==
        ATTN_OK) {
        attn_weights_finish(big);
        CHECK_INT_EQ(attn_forward(big, &in, out, NULL, pool, err, sizeof err), ATTN_ERR_NOMEM);
        CHECK_STR_CONTAINS(err, "scratch");
        attn_weights_destroy(big);
    }

    /* Forms of weights: one at a time, k in 1..M, rows unique and in range. */
    int32_t idx[2 * 4 * 5];
    int rows[3] = {1, 3, 0};
    attn_result res = {out, wts, idx};
    in = x.in, in.topk = -1;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "topk=-1; expected 1..5");
    in.topk = 6;
    CHECK_INT_EQ(attn_run(w, &in, &res, pool, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "topk=6");
    in.topk = 5;
    CHECK_INT_EQ(attn_run(w, &in, &res, pool, err, sizeof err), ATTN_OK);
    in.need_weights = true;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "exclusive");
    in = x.in, in.topk = 2, in.rows = rows, in.nrows = 3;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "exclusive");
    in = x.in, in.topk = 2;
    res.indices = NULL;
    CHECK_INT_EQ(attn_run(w, &in, &res, pool, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "indices");
    res = (attn_result){out, NULL, idx};
    CHECK_INT_EQ(attn_run_naive(w, &in, &res, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "topk");
    res = (attn_result){out, wts, idx};
    in = x.in, in.rows = rows, in.nrows = 3;
    CHECK_INT_EQ(attn_run(w, &in, &res, pool, err, sizeof err), ATTN_OK);
    CHECK(attn_output_sizes(w, &in, &no, &nw));
    CHECK_INT_EQ(nw, 2 * 3 * 5);
    in.nrows = 0;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "nrows=0");
    in.rows = NULL, in.nrows = 2;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "rows is NULL");
    int bad_rows[3] = {0, 4, 1}, twice[3] = {2, 0, 2};
    in.rows = bad_rows, in.nrows = 3;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "rows[1]=4 is not a query row (0..3)");
    in.rows = twice;
    CHECK_INT_EQ(attn_input_check(w, &in, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "rows[2]=2 is listed twice");
    in = x.in, in.topk = 3, in.average_heads = true;
    CHECK(attn_output_sizes(w, &in, &no, &nw));
    CHECK_INT_EQ(nw, 4 * 3);
    CHECK(attn_wants_weights(&in));
    in.topk = 0;
    CHECK(!attn_wants_weights(&in));

    /* Self-attention pointers with mismatched widths. */
    tcase c2 = c;
    c2.kdim = 5;
    attn_weights *w2 = make_weights(&c2);
    if (w2) {
        in = x.in, in.key = in.query, in.m = in.n;
        CHECK_INT_EQ(attn_input_check(w2, &in, err, sizeof err), ATTN_ERR_SHAPE);
        CHECK_STR_CONTAINS(err, "kdim");
        attn_weights_destroy(w2);
    }
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* ------------------------------------------------------------ the plan */

/* attn_plan_input answers as the separate geometry calls do, fails as
 * attn_input_check does (status and message, the plan left zero), and its
 * sizes are enough: each valid input runs into buffers of exactly those. */
static void test_plan(attn_pool *pool) {
    const tcase cases[2] = {
        {.B = 2, .n = 6, .m = 6, .E = 8, .H = 2, .kdim = 8, .vdim = 8, .bias = true,
         .self = true, .wscale = 1.0f},
        {.B = 2, .n = 4, .m = 5, .E = 8, .H = 2, .kdim = 6, .vdim = 8, .bias = true,
         .bias_kv = true, .zero_attn = true, .wscale = 1.0f},
    };
    for (int ci = 0; ci < 2; ci++) {
        const tcase *c = &cases[ci];
        attn_weights *w = make_weights(c);
        if (!w) return;
        inputs x;
        make_inputs(c, &x);
        int rows[2] = {3, 1}, twice[2] = {2, 2};
        for (int v = 0; v < 11; v++) {
            attn_input in = x.in;
            switch (v) {
            case 1: in.need_weights = true; break;
            case 2: in.need_weights = in.average_heads = true; break;
            case 3: in.topk = 3; break;
            case 4: in.topk = 2, in.average_heads = true; break;
            case 5: in.rows = rows, in.nrows = 2; break;
            case 6: in.topk = attn_key_positions(w, in.m) + 1; break; /* the rest are refused */
            case 7: in.n = 0; break;
            case 8: in.rows = twice, in.nrows = 2; break;
            case 9: in.query = NULL; break;
            case 10: in.need_weights = true, in.topk = 1; break;
            }
            char e1[ATTN_ERRLEN] = "", e2[ATTN_ERRLEN] = "";
            attn_plan p;
            memset(&p, 0xff, sizeof p);
            const attn_status want = attn_input_check(w, &in, e1, sizeof e1);
            const attn_status got =
                attn_plan_input(w, &in, pool ? attn_pool_size(pool) : 1, &p, e2, sizeof e2);
            CHECK_MSG(got == want, "case %d variant %d: plan %s, check %s", ci, v,
                      attn_status_name(got), attn_status_name(want));
            CHECK_MSG(strcmp(e1, e2) == 0, "case %d variant %d: plan '%s', check '%s'", ci, v, e2,
                      e1);
            if (got != ATTN_OK) {
                attn_plan zero;
                memset(&zero, 0, sizeof zero);
                CHECK_MSG(memcmp(&p, &zero, sizeof p) == 0, "case %d variant %d: plan not zeroed",
                          ci, v);
                continue;
            }
            size_t no = 0, nw = 0;
            CHECK(attn_output_sizes(w, &in, &no, &nw));
            CHECK_INT_EQ(p.M, attn_key_positions(w, in.m));
            CHECK_INT_EQ(p.out_floats, no);
            CHECK_INT_EQ(p.weight_floats, nw);
            CHECK_INT_EQ(p.index_count, in.topk > 0 ? nw : 0);
            CHECK(p.scratch_bytes > 0);
            CHECK(p.flops == attn_forward_flops(w, &in));
            /* a batch takes self-attention without weights only */
            CHECK_INT_EQ(p.ragged_ok, c->self && !attn_wants_weights(&in));
            float *out = malloc(p.out_floats * sizeof(float));
            float *wts = p.weight_floats ? malloc(p.weight_floats * sizeof(float)) : NULL;
            int32_t *idx = p.index_count ? malloc(p.index_count * sizeof(int32_t)) : NULL;
            const attn_result res = {out, wts, idx};
            char err[ATTN_ERRLEN];
            CHECK_MSG(attn_run(w, &in, &res, pool, err, sizeof err) == ATTN_OK,
                      "case %d variant %d: %s", ci, v, err);
            free(out), free(wts), free(idx);
        }
        inputs_free(&x);
        attn_weights_destroy(w);
    }
}

/* ------------------------------------------------------------ attn_vexp */

typedef void (*vexp_fn)(float *y, const float *x, size_t len);

static void test_vexp(vexp_fn vexp, const char *name) {
    enum { N = 400000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    const float special[] = {-INFINITY, -110.0f, -104.0f, -103.9f, -100.0f, -90.0f, -87.5f,
                             -87.33f,   -10.0f,  -1.0f,   -0.5f,    -1e-8f,  0.0f,   1e-8f,
                             0.3465f,   0.5f,    1.0f,    10.0f,    80.0f,   88.0f,  88.72f,
                             88.73f,    89.0f,   100.0f,  INFINITY, NAN,
                             /* past the kernels' in-range steps (|x| < 1e6) */
                             -FLT_MAX, -1e30f, -1e7f, 0x1.419edp+26f, 1e7f, FLT_MAX};
    size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < ns; i++) x[i] = special[i];
    for (size_t i = ns; i < N; i++) x[i] = -105.0f + 194.0f * (float)(i - ns) / (float)(N - ns);
    vexp(y, x, N);
    double worst_rel = 0.0, worst_sub = 0.0;
    float at_rel = 0.0f;
    for (size_t i = 0; i < N; i++) {
        double e = exp((double)x[i]);
        if (isnan(x[i])) {
            CHECK(isnan(y[i]));
        } else if (e > FLT_MAX) {
            CHECK_MSG(isinf(y[i]) && y[i] > 0, "exp(%g) = %g, expected inf", x[i], y[i]);
        } else if (e >= FLT_MIN) {
            double rel = fabs((double)y[i] - e) / e;
            if (rel > worst_rel) worst_rel = rel, at_rel = x[i];
        } else {
            double ab = fabs((double)y[i] - e);
            if (ab > worst_sub) worst_sub = ab;
        }
    }
    CHECK(y[0] == 0.0f); /* -inf */
    CHECK(y[12] == 1.0f); /* 0 */
    printf("%s: largest relative error %.3g (at x=%g), largest absolute error on "
           "subnormal results %.3g\n",
           name, worst_rel, at_rel, worst_sub);
    CHECK_MSG(worst_rel < 2e-7, "%s relative error %g at x=%g", name, worst_rel, at_rel);
    CHECK_MSG(worst_sub <= 1.5e-45, "%s subnormal error %g", name, worst_sub);
    /* in place, and every tail length */
    for (size_t len = 0; len < 40; len++) {
        float a[40], b[40];
        for (size_t i = 0; i < len; i++) a[i] = b[i] = -3.0f + 0.37f * (float)i;
        vexp(a, a, len);
        for (size_t i = 0; i < len; i++) CHECK_NEAR(a[i], exp((double)b[i]), 2e-7 * exp((double)b[i]));
    }
    free(x);
    free(y);
}

/* attn_vexp_with(ATTN_ISA_AVX2), for test_vexp's accuracy checks */
static void vexp_avx2(float *y, const float *x, size_t len) {
    if (!attn_vexp_with(ATTN_ISA_AVX2, y, x, len, NULL)) attn_vexp_portable(y, x, len);
}

/* The AVX2 exp kernel gives the AVX-512 one's bits, values and sum, on
 * every row length (on a CPU that has both). */
static void test_vexp_same_bits(void) {
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    /* with the AVX2 kernel's one-product range's ends (-86, 87) */
    const float special[] = {-INFINITY, -110.0f, -104.0f, -103.9f, -87.33f,   -87.0f,
                             -86.0001f, -86.0f,  -1e-8f,  0.0f,    0.3465f,   87.0f,
                             87.0001f,  88.72f,  88.73f,  89.0f,   INFINITY,  NAN};
    const size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < ns; i++) x[i] = special[i];
    for (size_t i = ns; i < N; i++) x[i] = -110.0f + 200.0f * (float)(i - ns) / (float)(N - ns);
    float sa, sb;
    if (!attn_vexp_with(ATTN_ISA_AVX2, a, x, N, &sa) ||
        !attn_vexp_with(ATTN_ISA_AVX512, b, x, N, &sb)) {
        printf("exp kernels: this CPU lacks AVX2 or AVX-512; their bits not compared\n");
    } else {
        size_t diff = 0;
        for (size_t i = 0; i < N; i++)
            if (memcmp(&a[i], &b[i], sizeof a[i]) != 0 && !(isnan(a[i]) && isnan(b[i]))) diff++;
        CHECK_MSG(diff == 0, "exp: %zu of %d AVX2 values differ from AVX-512's", diff, N);
        CHECK_MSG(isnan(sa) && isnan(sb), "exp: a NaN in the row makes the sum NaN");
        /* the same values shuffled, so that blocks of 16 mix lanes in and
         * out of the one-product range */
        unsigned seed = 12345u;
        for (size_t i = N - 1; i > 0; i--) {
            seed = seed * 1664525u + 1013904223u;
            size_t j = (size_t)(seed >> 8) % (i + 1);
            float t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
        attn_vexp_with(ATTN_ISA_AVX2, a, x, N, &sa);
        attn_vexp_with(ATTN_ISA_AVX512, b, x, N, &sb);
        diff = 0;
        for (size_t i = 0; i < N; i++)
            if (memcmp(&a[i], &b[i], sizeof a[i]) != 0 && !(isnan(a[i]) && isnan(b[i]))) diff++;
        CHECK_MSG(diff == 0, "exp, shuffled: %zu of %d AVX2 values differ from AVX-512's", diff, N);
        for (size_t i = 0; i < N; i++) /* in order again, for the tails below */
            x[i] = i < ns ? special[i] : -110.0f + 200.0f * (float)(i - ns) / (float)(N - ns);
        for (size_t len = 0; len <= 70; len++) { /* every tail, sums without NaN */
            const float *xs = x + ns + 1000 * len;
            float s1, s2;
            attn_vexp_with(ATTN_ISA_AVX2, a, xs, len, &s1);
            attn_vexp_with(ATTN_ISA_AVX512, b, xs, len, &s2);
            CHECK_MSG(memcmp(&s1, &s2, sizeof s1) == 0 && memcmp(a, b, len * sizeof *a) == 0,
                      "exp, %zu elements: AVX2 not AVX-512's bits (sums %.9g, %.9g)", len, s1,
                      s2);
        }
    }
    free(x);
    free(a);
    free(b);
}

/* ------------------------------------------------------------- ragged */

/* Inputs of different lengths run as one ragged batch give, bit for bit,
 * what each gives alone; inputs that cannot join are refused. */
static void test_ragged(attn_pool *pools[4]) {
    char err[ATTN_ERRLEN];
    printf("ragged: OpenBLAS's sgemm rows %s on their neighbours in a call; the "
           "engine's own kernel: %s\n",
           attn_blas_rows_invariant() ? "do not depend" : "depend", attn_gemm_kernel());
    enum { K = 7 };
    static const int lens[K] = {1, 5, 37, 128, 3, 300, 64};
    for (int variant = 0; variant < 4; variant++) {
        tcase base = {.E = 48, .H = 3, .kdim = 48, .vdim = 48, .bias = variant != 1, .self = true,
                      .wscale = 1.0f};
        attn_weights *w = make_weights(&base);
        if (!w) return;
        inputs x[K];
        const attn_input *ins[K];
        float *alone[K], *batched[K];
        for (int i = 0; i < K; i++) {
            tcase c = base;
            c.B = variant == 3 && i % 2 ? 2 : 1;
            c.n = c.m = lens[i];
            c.causal = variant >= 2 && i % 3 == 0;
            c.kpm_kind = i % 2 ? ATTN_MASK_BOOL : ATTN_MASK_NONE;
            c.kpm_batched = c.B > 1;
            c.mask_kind = i % 3 == 1 ? ATTN_MASK_FLOAT : ATTN_MASK_NONE;
            c.mask_dims = 2 + i % 3;
            make_inputs(&c, &x[i]);
            ins[i] = &x[i].in;
            size_t of, wf;
            attn_output_sizes(w, ins[i], &of, &wf);
            alone[i] = malloc(of * sizeof(float));
            batched[i] = malloc(of * sizeof(float));
            CHECK(attn_ragged_ok(w, ins[i]));
        }
        for (int p = 0; p < 4; p++) {
            if (pool_skipped(p, false)) continue;
            for (int i = 0; i < K; i++)
                CHECK_INT_EQ(attn_forward(w, ins[i], alone[i], NULL, pools[p], err, sizeof err),
                             ATTN_OK);
            for (int mode = ATTN_RAGGED_AUTO; mode <= ATTN_RAGGED_SEPARATE; mode++) {
                CHECK(attn_ragged_scratch_bytes(w, ins, K, p ? p : 1, mode) > 0);
                CHECK_INT_EQ(
                    attn_forward_ragged(w, ins, K, batched, mode, pools[p], err, sizeof err),
                    ATTN_OK);
                /* concatenated rows are the same bits only on a kernel whose
                 * rows do not depend on their neighbours; else within
                 * rounding (and AUTO does not concatenate there) */
                bool exact = mode != ATTN_RAGGED_CONCAT || attn_proj_rows_invariant(w);
                for (int i = 0; i < K; i++) {
                    size_t of, wf;
                    attn_output_sizes(w, ins[i], &of, &wf);
                    double d = rel_diff(batched[i], alone[i], of);
                    bool same = memcmp(alone[i], batched[i], of * sizeof(float)) == 0;
                    CHECK_MSG(exact ? same : d < 1e-6,
                              "ragged mode %d variant %d pool %d input %d (B=%d n=%d): differs "
                              "from alone by %.3g",
                              mode, variant, p, i, ins[i]->B, ins[i]->n, d);
                }
            }
        }
        /* a batch of one, and the first three only */
        CHECK_INT_EQ(attn_forward_ragged(w, ins + 3, 1, batched + 3, ATTN_RAGGED_AUTO, pools[2],
                                         err, sizeof err),
                     ATTN_OK);
        CHECK_INT_EQ(
            attn_forward_ragged(w, ins, 3, batched, ATTN_RAGGED_AUTO, pools[2], err, sizeof err),
            ATTN_OK);
        for (int i = 0; i < K; i++) {
            inputs_free(&x[i]);
            free(alone[i]);
            free(batched[i]);
        }
        attn_weights_destroy(w);
    }

    /* who may not join: weights wanted, cross-attention, appended keys */
    tcase c = {.B = 1, .n = 4, .m = 4, .E = 16, .H = 2, .kdim = 16, .vdim = 16, .bias = true,
               .self = true, .wscale = 1.0f};
    attn_weights *w = make_weights(&c);
    inputs x;
    make_inputs(&c, &x);
    float out[64];
    float *outs[1] = {out};
    const attn_input *ins[1] = {&x.in};
    CHECK(attn_ragged_ok(w, &x.in));
    x.in.need_weights = true;
    CHECK(!attn_ragged_ok(w, &x.in));
    CHECK_INT_EQ(attn_forward_ragged(w, ins, 1, outs, ATTN_RAGGED_AUTO, pools[2], err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "input 0 cannot join a ragged batch");
    x.in.need_weights = false;
    x.in.key = out;
    CHECK(!attn_ragged_ok(w, &x.in));
    x.in.key = x.q;
    CHECK_INT_EQ(attn_forward_ragged(w, ins, 0, outs, ATTN_RAGGED_AUTO, pools[2], err, sizeof err), ATTN_ERR_INVALID);
    x.in.n = 0;
    CHECK_INT_EQ(attn_forward_ragged(w, ins, 1, outs, ATTN_RAGGED_AUTO, pools[2], err, sizeof err), ATTN_ERR_INVALID);
    CHECK_STR_CONTAINS(err, "input 0: ");
    inputs_free(&x);
    attn_weights_destroy(w);
    c.bias_kv = true;
    w = make_weights(&c);
    make_inputs(&c, &x);
    CHECK(!attn_ragged_ok(w, &x.in));
    inputs_free(&x);
    attn_weights_destroy(w);
    c.bias_kv = false;
    c.zero_attn = true;
    w = make_weights(&c);
    make_inputs(&c, &x);
    CHECK(!attn_ragged_ok(w, &x.in));
    inputs_free(&x);
    attn_weights_destroy(w);
}

/* The first half of the sections: the row passes, the exponentials, the
 * plan, masks, the online softmax, causal keys, top-k. all: every section
 * and pool (not on an emulated CPU: see main). */
static void sections_one(attn_pool *pools[4], bool all) {
    test_vexp(attn_vexp, "attn_vexp");
    test_vexp(attn_vexp_portable, "attn_vexp_portable");
    test_vexp(vexp_avx2, "the AVX2 exp kernel");
    test_vexp_same_bits();
    test_isa_same_bits(pools[2]);
    if (all) test_isa_same_bits(NULL);
    test_validation(pools[2]);
    test_plan(pools[2]);
    test_plan(NULL);
    test_fully_masked(pools[2]);
    test_fully_masked(NULL);
    test_masked_head_average(pools[2]);
    test_masked_head_average(NULL);
    test_max_anywhere(pools[2]);
    if (all) test_max_anywhere(NULL);
    test_online_exp(pools);
    if (all) test_epilogue_max(pools[2]); /* the AVX-512 kernel's path only */
    test_causal_skip(pools[2]);
    if (all) test_causal_online(pools);
    test_phase_times(pools[2]);
    test_phase_times(NULL);
    for (int mode = 2; mode >= 0; mode--) { /* k <= 16 in AVX2 registers, the default, heaps */
        attn_topk_lanes(mode);
        test_topk_masked(pools[2]);
        test_topk_masked(NULL);
        test_topk_adversarial(pools[2]);
        test_topk_adversarial(NULL);
    }
    attn_topk_lanes(1);
}

/* The second half: the named and random cases, long inputs, dense weights
 * in sub-blocks, concurrency, scratch, ragged batches. */
static void sections_two(attn_pool *pools[4], bool all) {
    test_named(pools);
    test_random(pools);
    if (all) test_forms(pools);
    test_long(pools[3]);
    if (all) test_column_split(pools);
    test_dense_blocks(pools);
    test_concurrent(pools[2]);
    test_spare(pools[2]);
    test_spare(NULL);
    test_ragged(pools);
}

int main(void) {
    char err[ATTN_ERRLEN];
    attn_blas_info blas; /* one OpenBLAS thread inside pool workers, as the daemon runs */
    CHECK_INT_EQ(attn_blas_init(&blas, err, sizeof err), ATTN_OK);
    attn_pool *pools[4] = {NULL, NULL, NULL, NULL}; /* none, 1, 2 and 3 threads */
    for (int p = 1; p < 4; p++) {
        attn_status st = attn_pool_create(p, &pools[p], err, sizeof err);
        CHECK_MSG(st == ATTN_OK, "attn_pool_create(%d): %s", p, err);
        if (st) return check_exit();
    }
    /* On an emulated CPU (tests/unit/emulated-cpu, ATTN_TEST_EMULATED=1 or
     * 2) a process runs one half of the sections, the two side by side,
     * and of them what CI can afford there: not the four that took 11-80 s
     * each even with the reductions above (epilogue_max, causal_online,
     * forms, column_split; the whole program took 8 minutes without any),
     * nor a second run without a pool where one on two workers has the
     * same paths. The AVX2 paths these cover run at full size in
     * other-kernels' ATTN_ISA=avx2. */
    const int part = emulated_part();
    if (part != 2) sections_one(pools, part == 0);
    if (part != 1) sections_two(pools, part == 0);
    printf("largest difference overall: out %.3g, weights %.3g (relative to max(1, max|ref|))\n",
           worst_out, worst_wts);
    for (int p = 1; p < 4; p++) attn_pool_destroy(pools[p]);
    return check_exit();
}
