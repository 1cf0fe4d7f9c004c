/* ab_shim.c - one copy of the engine behind a plain interface, for
 * ab_engine.c (make bench-ab). Compiled once against each tree's core/
 * headers, with AB_BASE for the commit under comparison and without it
 * for the working tree, then linked with that tree's libattn.a into one
 * object whose other symbols are made local (tests/bench/ab-build.sh), so
 * two versions of the engine live in one process without clashing. The
 * layer and input are the same seeded numbers in both copies. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "attention.h"
#include "pool.h"

#ifdef AB_BASE
#define AB_FN(x) ab_base_##x
#else
#define AB_FN(x) ab_work_##x
#endif

#define AB_TOPK 16 /* k of the top-k forms */
#define AB_ROWS 256 /* the weight rows form's rows, spread over the sequence */
#define AB_PHASES_MAX 16 /* phases ab_engine has room for (attn_phase_id) */

typedef struct {
    attn_weights *w;
    attn_pool *pool;
    attn_input in;
    float *x, *out, *wts; /* wts: in out's buffer, after the output */
    int32_t *idx;         /* top-k: the key indices, after the values */
    int *rows;            /* weight rows: the rows listed */
    size_t nout, nwts;
    int timed;                     /* AB_PHASES=1: each pass timed by phase */
    double phase[AB_PHASES_MAX];   /* the last pass's time in each phase, seconds */
} ab_ctx;

/* uniform in [-scale, scale), from a 32-bit LCG: the same in both copies */
static void fill(float *v, size_t n, unsigned *s, float scale) {
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        v[i] = scale * ((float)(*s >> 8) / 8388608.0f - 1.0f);
    }
}

void AB_FN(free)(void *vc);

/* The input and the answer in huge pages, as the daemon has a request's
 * body and output arrays (core/hugemem.h's mem_alloc, written out here so
 * that the shim builds against commits from before it): 2 MiB-aligned,
 * whole huge pages, advised. On the Zen 4 a pass writing its answer into
 * 4 KiB pages ran 1.7x slower in some processes (docs/DESIGN.md), and
 * each copy has buffers of its own. Freed with free(). */
static void *alloc_huge(size_t bytes) {
    const size_t huge = (size_t)2 << 20, whole = ((bytes ? bytes : 1) + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, whole)) return NULL;
    madvise(p, whole, MADV_HUGEPAGE);
    return p;
}

/* Self-attention of n tokens of E on H heads, threads pool threads;
 * weights 0 none, 1 dense per head [H, n, n], 2 dense averaged over the
 * heads [n, n] (make bench's case with weights), 3 top-16 per head, 4
 * top-16 of the head average (the values, then their key indices), 5
 * per head for AB_ROWS rows spread over the sequence (as make bench's
 * weight rows: 0, ..., n-1; all n when fewer). NULL
 * (and a message on stderr) on failure. */
void *AB_FN(setup)(int n, int E, int H, int threads, int weights) {
    char err[256] = "";
    ab_ctx *c = calloc(1, sizeof *c);
    if (!c || attn_weights_alloc(E, H, E, E, true, false, false, &c->w, err, sizeof err) ||
        attn_pool_create(threads, &c->pool, err, sizeof err)) {
        fprintf(stderr, "ab: %s\n", err[0] ? err : "out of memory");
        AB_FN(free)(c);
        return NULL;
    }
    unsigned s = 12345u;
    float *mats[] = {c->w->wq, c->w->wk, c->w->wv, c->w->wo};
    for (int m = 0; m < 4; m++) fill(mats[m], (size_t)E * (size_t)E, &s, 0.05f);
    float *biases[] = {c->w->bq, c->w->bk, c->w->bv, c->w->bo};
    for (int m = 0; m < 4; m++) fill(biases[m], (size_t)E, &s, 0.5f);
    attn_weights_finish(c->w);
    c->x = alloc_huge(sizeof(float) * (size_t)n * (size_t)E);
    c->in = (attn_input){.B = 1,
                         .n = n,
                         .m = n,
                         .need_weights = weights == 1 || weights == 2,
                         .average_heads = weights == 2 || weights == 4,
                         .topk = weights == 3 || weights == 4 ? AB_TOPK : 0};
    c->in.query = c->in.key = c->in.value = c->x;
    c->in.causal = getenv("AB_CAUSAL") && strcmp(getenv("AB_CAUSAL"), "1") == 0;
    c->timed = getenv("AB_PHASES") && strcmp(getenv("AB_PHASES"), "1") == 0;
    if (weights == 5) {
        const int nr = n < AB_ROWS ? n : AB_ROWS;
        if (!(c->rows = malloc(sizeof(int) * (size_t)nr))) {
            fprintf(stderr, "ab: out of memory\n");
            AB_FN(free)(c);
            return NULL;
        }
        for (int i = 0; i < nr; i++) c->rows[i] = nr > 1 ? (int)((long)i * (n - 1) / (nr - 1)) : 0;
        c->in.rows = c->rows;
        c->in.nrows = nr;
    }
    if (c->x) fill(c->x, (size_t)n * (size_t)E, &s, 1.0f);
    if (!c->x || !attn_output_sizes(c->w, &c->in, &c->nout, &c->nwts) ||
        !(c->out = alloc_huge(sizeof(float) * (c->nout + c->nwts + (c->in.topk ? c->nwts : 0))))) {
        fprintf(stderr, "ab: out of memory\n");
        AB_FN(free)(c);
        return NULL;
    }
    if (weights) c->wts = c->out + c->nout;
    if (c->in.topk) c->idx = (int32_t *)(c->wts + c->nwts); /* int32 and float: 4 bytes */
    return c;
}

/* One forward pass; 0 on success. */
int AB_FN(pass)(void *vc) {
    ab_ctx *c = vc;
    char err[256];
    const attn_result res = {.out = c->out, .weights = c->wts, .indices = c->idx};
    attn_phase_times t;
    if ((c->timed ? attn_run_timed(c->w, &c->in, &res, c->pool, &t, err, sizeof err)
                  : attn_run(c->w, &c->in, &res, c->pool, err, sizeof err)) != ATTN_OK) {
        fprintf(stderr, "ab: %s\n", err);
        return -1;
    }
    for (int p = 0; c->timed && p < ATTN_PH_COUNT && p < AB_PHASES_MAX; p++) c->phase[p] = t.s[p];
    return 0;
}

/* With AB_PHASES=1, the last pass's time in each phase (seconds) into
 * s[0..] and their names into name[0..], at most max; the count, or 0
 * when passes are not timed. */
int AB_FN(phases)(void *vc, double *s, const char **name, int max) {
    ab_ctx *c = vc;
    int k = 0;
    for (; c->timed && k < ATTN_PH_COUNT && k < max && k < AB_PHASES_MAX; k++) {
        s[k] = c->phase[k];
        name[k] = attn_phase_name((attn_phase_id)k);
    }
    return k;
}

/* The last pass's output [n, E], followed by its weights when asked (and
 * with top-k their indices, as floats' bits), and its FLOPs. */
const float *AB_FN(output)(void *vc, size_t *len, double *flops) {
    ab_ctx *c = vc;
    *len = c->nout + (c->idx ? 2 : 1) * c->nwts;
    *flops = attn_forward_flops(c->w, &c->in);
    return c->out;
}

void AB_FN(free)(void *vc) {
    ab_ctx *c = vc;
    if (!c) return;
    attn_pool_destroy(c->pool);
    attn_weights_destroy(c->w);
    free(c->x);
    free(c->out);
    free(c->rows);
    free(c);
}
