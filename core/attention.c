/* attention.c - the multi-head attention forward pass on CBLAS and the pool.
 *
 * The file has three parts (its kernels over rows are vec.c, its top-k
 * selection topk.c, its matrix kernel gemm.c; the naive reference is
 * naive.c, which shares no code with any of them):
 *   1. geometry: key positions, output sizes, input validation;
 *   2. the plan: block sizes and the layout of the one scratch allocation,
 *      shared by attn_plan_input and attn_forward so the two agree;
 *   3. the tasks run on the pool: projections (also the out-projection),
 *      attention with weights (scores materialised one head at a time for a
 *      block of query rows), attention without weights (tiled online softmax),
 *      and ragged batches.
 *
 * Shapes use the vocabulary of attention.h: B, n, m, M, E, H, d, kdim, vdim.
 * All parallelism comes from the pool (attn_pool_run_phases); OpenBLAS is
 * expected to run single-threaded (configured by blas.c), each sgemm call
 * being one task's private work.
 */
#include "attention.h"

#include "blas.h"
#include "gemm.h"
#include "hugemem.h"
#include "topk.h"
#include "vec.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================ 1. geometry */

int attn_key_positions(const attn_weights *w, int m) {
    return m + (w->add_bias_kv ? 1 : 0) + (w->add_zero_attn ? 1 : 0);
}

bool attn_wants_weights(const attn_input *in) {
    return in->need_weights || in->topk > 0 || in->rows != NULL;
}

int attn_output_sizes(const attn_weights *w, const attn_input *in, size_t *out_floats,
                      size_t *weight_floats) {
    size_t o = 0, wt = 0;
    int ok = 1;
    if (in->B < 0 || in->n < 0 || in->m < 0 || in->m > INT_MAX - 2 || in->nrows < 0 || in->topk < 0)
        ok = 0;
    if (ok) {
        size_t v[4] = {(size_t)in->B, (size_t)in->n, (size_t)w->E, 0};
        ok = attn_mul_sizes(v, 3, &o);
        if (ok && attn_wants_weights(in)) {
            /* [B, H or 1, rows, columns]: n or r rows, M or k columns */
            v[1] = in->average_heads ? 1 : (size_t)w->H;
            v[2] = in->rows && !in->need_weights ? (size_t)in->nrows : (size_t)in->n;
            v[3] = in->topk > 0 && !in->need_weights ? (size_t)in->topk
                                                     : (size_t)attn_key_positions(w, in->m);
            ok = attn_mul_sizes(v, 4, &wt);
        }
    }
    if (!ok) o = wt = 0;
    if (out_floats) *out_floats = o;
    if (weight_floats) *weight_floats = wt;
    return ok;
}

/* The forms of weights after attn_input_check: at most one is asked. */
typedef enum { WT_NONE, WT_DENSE, WT_TOPK, WT_ROWS } weights_form;

static weights_form form_of(const attn_input *in) {
    return in->need_weights ? WT_DENSE : in->topk > 0 ? WT_TOPK : in->rows ? WT_ROWS : WT_NONE;
}

/* The rows list: present with nrows >= 1, each in [0,n), none twice. */
static attn_status check_rows(const attn_input *in, char *err, size_t errlen) {
    if (!in->rows)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "rows is NULL but nrows=%d", in->nrows);
    if (in->nrows < 1)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "rows: nrows=%d; expected >= 1", in->nrows);
    for (int s = 0; s < in->nrows; s++)
        if (in->rows[s] < 0 || in->rows[s] >= in->n)
            return attn_fail(err, errlen, ATTN_ERR_INVALID,
                             "rows[%d]=%d is not a query row (0..%d)", s, in->rows[s], in->n - 1);
    uint8_t *seen = calloc((size_t)in->n / 8 + 1, 1);
    if (!seen)
        return attn_fail(err, errlen, ATTN_ERR_NOMEM, "rows: no memory to check %d rows",
                         in->nrows);
    attn_status st = ATTN_OK;
    for (int s = 0; s < in->nrows && !st; s++) {
        unsigned i = (unsigned)in->rows[s];
        if (seen[i / 8] & (1u << (i % 8)))
            st = attn_fail(err, errlen, ATTN_ERR_INVALID, "rows[%d]=%u is listed twice", s, i);
        seen[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    free(seen);
    return st;
}

static const char *mask_kind_name(attn_mask_kind k) {
    switch (k) {
    case ATTN_MASK_NONE: return "none";
    case ATTN_MASK_BOOL: return "bool";
    case ATTN_MASK_FLOAT: return "float";
    }
    return "invalid";
}

attn_status attn_input_check(const attn_weights *w, const attn_input *in, char *err,
                             size_t errlen) {
    if (!w) return attn_fail(err, errlen, ATTN_ERR_INVALID, "weights: weight set is NULL");
    if (!in) return attn_fail(err, errlen, ATTN_ERR_INVALID, "input is NULL");
    if (w->E < 1 || w->H < 1 || w->d < 1 || w->d * w->H != w->E || w->kdim < 1 || w->vdim < 1)
        return attn_fail(err, errlen, ATTN_ERR_INVALID,
                         "weights: inconsistent geometry E=%d H=%d d=%d kdim=%d vdim=%d", w->E,
                         w->H, w->d, w->kdim, w->vdim);
    if (!w->wq || !w->wk || !w->wv || !w->wo || (!w->wo_t && !w->wo_p) ||
        (w->bias && (!w->bq || !w->bk || !w->bv || !w->bo)) ||
        (w->add_bias_kv && (!w->bias_k || !w->bias_v)))
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "weights: a projection array is NULL");
    if (w->E > INT_MAX / 3)
        return attn_fail(err, errlen, ATTN_ERR_LIMIT, "weights: E=%d is too large", w->E);

    if (in->B < 1)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "batch size B=%d; expected >= 1", in->B);
    if (in->n < 1)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "query has n=%d tokens; expected >= 1",
                         in->n);
    if (in->m < 1)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "key has m=%d tokens; expected >= 1",
                         in->m);
    if (in->m > INT_MAX - 2)
        return attn_fail(err, errlen, ATTN_ERR_LIMIT, "key has m=%d tokens; too many", in->m);
    if (!in->query) return attn_fail(err, errlen, ATTN_ERR_INVALID, "query is NULL");
    if (!in->key) return attn_fail(err, errlen, ATTN_ERR_INVALID, "key is NULL");
    if (!in->value) return attn_fail(err, errlen, ATTN_ERR_INVALID, "value is NULL");
    if (in->key == in->query && (w->kdim != w->E || in->m != in->n))
        return attn_fail(err, errlen, ATTN_ERR_SHAPE,
                         "key is the query tensor (self-attention) but the weight set has "
                         "kdim=%d, E=%d and m=%d, n=%d",
                         w->kdim, w->E, in->m, in->n);
    if (in->value == in->query && (w->vdim != w->E || in->m != in->n))
        return attn_fail(err, errlen, ATTN_ERR_SHAPE,
                         "value is the query tensor (self-attention) but the weight set has "
                         "vdim=%d, E=%d and m=%d, n=%d",
                         w->vdim, w->E, in->m, in->n);

    if (in->kpm_kind != ATTN_MASK_NONE && in->kpm_kind != ATTN_MASK_BOOL &&
        in->kpm_kind != ATTN_MASK_FLOAT)
        return attn_fail(err, errlen, ATTN_ERR_INVALID,
                         "key_padding_mask kind %d; expected none, bool or float",
                         (int)in->kpm_kind);
    if (in->kpm_kind != ATTN_MASK_NONE && !in->kpm)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "key_padding_mask (%s) is NULL",
                         mask_kind_name(in->kpm_kind));
    if (in->mask_kind != ATTN_MASK_NONE && in->mask_kind != ATTN_MASK_BOOL &&
        in->mask_kind != ATTN_MASK_FLOAT)
        return attn_fail(err, errlen, ATTN_ERR_INVALID,
                         "attn_mask kind %d; expected none, bool or float", (int)in->mask_kind);
    if (in->mask_kind != ATTN_MASK_NONE) {
        if (!in->attn_mask)
            return attn_fail(err, errlen, ATTN_ERR_INVALID, "attn_mask (%s) is NULL",
                             mask_kind_name(in->mask_kind));
        if (in->mask_dims < 2 || in->mask_dims > 4)
            return attn_fail(err, errlen, ATTN_ERR_SHAPE,
                             "attn_mask has %d dims; expected 2, 3 or 4", in->mask_dims);
    }

    /* One form of weights, well formed. */
    if ((in->need_weights ? 1 : 0) + (in->topk != 0 ? 1 : 0) + (in->rows || in->nrows ? 1 : 0) > 1)
        return attn_fail(err, errlen, ATTN_ERR_INVALID,
                         "need_weights, topk and rows are exclusive: ask for one form of weights");
    if (in->topk != 0 && (in->topk < 1 || in->topk > attn_key_positions(w, in->m)))
        return attn_fail(err, errlen, ATTN_ERR_INVALID,
                         "topk=%d; expected 1..%d (the key positions attended)", in->topk,
                         attn_key_positions(w, in->m));
    if (in->rows || in->nrows) {
        attn_status st = check_rows(in, err, errlen);
        if (st) return st;
    }

    /* Every buffer the forward pass touches must have a size_t size. */
    size_t M = (size_t)attn_key_positions(w, in->m), E = (size_t)w->E, tmp;
    size_t qkv[4] = {(size_t)in->B, M > (size_t)in->n ? M : (size_t)in->n, 3 * E, 0};
    size_t kin[3] = {(size_t)in->B, (size_t)in->m, (size_t)(w->kdim > w->vdim ? w->kdim : w->vdim)};
    if (!attn_mul_sizes(qkv, 3, &tmp) || !attn_mul_size(tmp, 4 * sizeof(float), &tmp) ||
        !attn_output_sizes(w, in, NULL, &tmp) || !attn_mul_size(tmp, sizeof(float), &tmp) ||
        !attn_mul_sizes(kin, 3, &tmp) || !attn_mul_size(tmp, sizeof(float), &tmp))
        return attn_fail(err, errlen, ATTN_ERR_LIMIT,
                         "sizes B=%d n=%d m=%d with E=%d H=%d overflow size_t", in->B, in->n, in->m,
                         w->E, w->H);
    return ATTN_OK;
}

/* ================================================================ 2. plan
 *
 * One allocation holds everything, in floats, 64-byte aligned pieces:
 *   packed (self-attention with w->wqkv_t): QKV [B, M, 3E] - per batch entry n
 *     rows from one GEMM, then the appended bias_kv / zero rows in the K and V
 *     column ranges; Q is columns [0,E), K [E,2E), V [2E,3E).
 *   separate: Q [B, n, E], K [B, M, E], V [B, M, E].
 *   top-k averaged over heads, besides: a copy of Q [B, n, E] and each
 *     row's softmax max and sum [2, B, H, n] (the second pass needs both).
 *   then one slot of per-worker scratch per pool worker (one in single mode),
 *   the largest of what the worker's tasks need:
 *     with weights and average_heads: S [arow, M];
 *     without dense weights: S [arow, kblk], acc [arow, d], max/sum/alpha
 *       [arow], and with top-k the rows' heaps [arow, k] (uint64 keys) and
 *       their counts [arow];
 *     the averaged top-k pass: S and A [arow, kblk], the heaps and counts;
 *     weight rows: the listed rows of Q [rrow, E], averaged also S [rrow, M].
 * The attention result Y overwrites Q in place (head h's columns of a row
 * block are written only after that block's Q_h has been consumed), and the
 * out-projection reads it from there.
 */

#ifndef SMALL_FLOPS
#define SMALL_FLOPS 1.0e7 /* below this (about 0.1 ms of work), one task runs the whole forward */
#endif
#ifndef PROW_MIN
#define PROW_MIN 64 /* projection rows per task, at least (OpenBLAS) */
#endif
#ifndef SPLIT_WORKERS
#define SPLIT_WORKERS 4 /* the pool size OpenBLAS's phases split for where split_fixed */
#endif
#ifndef PROW_MAX
#define PROW_MAX 1024 /* projection rows per task, at most (the engine's kernel) */
#endif
#ifndef PROW_TAIL
#define PROW_TAIL 128 /* projection rows split by columns at the end of a phase */
#endif
#ifndef AROW_MIN
#define AROW_MIN 64 /* query rows per attention task with weights, at least */
#endif
#ifndef AROW_MAX
#define AROW_MAX 512 /* query rows per attention task with weights */
#endif
#ifndef AROW_AVG_MAX
#define AROW_AVG_MAX 256 /* the same, with the weights averaged over the heads */
#endif
#ifndef SROW_STREAM
#define SROW_STREAM 64 /* rows per sub-block with weights where K and V do not fit L2 */
#endif
#ifndef SROW_CAUSAL
#define SROW_CAUSAL 128 /* rows per sub-block of the causal head average (causal_keys) */
#endif
#ifndef OROW_MAX
#define OROW_MAX 512 /* query rows per attention task without weights */
#endif
#ifndef KBLK
#define KBLK 256 /* keys per block of the online softmax */
#endif
#ifndef EXP_SLACK
/* Blocks of the online softmax after a row's first take their exponentials
 * in the score product's epilogue, shifted by the row's running max, as long
 * as no score of the block is more than EXP_SLACK above it (e^8, about
 * 3000, is then the largest weight before the division by the sum); a row
 * whose block goes above computes its scores again and takes the passes
 * (online_row), and asks for plain scores in its later blocks (climbed).
 * With no slack (the passes' bits exactly) every row of random inputs
 * whose block held a new max was computed twice, and the pass ran 0.82x at
 * n = 2048; slack 8 gave 1.030x at n = 8192, slack 16 1.034x (ab_engine,
 * Zen 5). */
#define EXP_SLACK 8.0f
#endif
#ifndef OVER_ROWS
/* Rows whose key block goes over EXP_SLACK unasked have their plain scores
 * computed again together, up to this many rows a product (over_scores). */
#define OVER_ROWS 32
#endif
#ifndef SBLK_BYTES
/* An attention task's block of scores without dense weights, at most: 128
 * query rows of 512 keys. At n = 512, E = 768, H = 12, 128-row blocks
 * against the whole 512 (1 MB of scores a task), alternated in one process:
 * 2-3% faster passes; n = 2048 (keys in blocks of 256): 256 rows against
 * 512, the same. */
#define SBLK_BYTES (256 << 10)
#endif
#ifndef DIAG_ROWS
/* Causal, the rows of an online-softmax task a key block reaches in part
 * go this many at a time, each run scoring the keys up to its last row
 * (attn_online_task, attn_topk_avg_task). On Zen 4, make bench-ab both orders, same bits,
 * against whole blocks: n = 512 1.130, n = 2048 1.034; against 64, 32
 * rows 1.004 and 1.008, 16 rows 1.002 at both: no gain measured. */
#define DIAG_ROWS 64
#endif
#ifndef KBLK_WHOLE
#define KBLK_WHOLE 512 /* up to this many keys, one block */

#endif
#ifndef COL_RANGES
#define COL_RANGES 32 /* column ranges of a projection's tasks, at most */
#endif
#ifndef RROW
#define RROW 64 /* listed rows per task of the weight-rows phase */
#endif

typedef struct fwd_plan {
    int M;                       /* key positions */
    weights_form form;           /* which weights, if any */
    int avg_topk;                /* top-k of the head average: a second pass */
    int packed;                  /* Q, K, V from one GEMM with w->wqkv_t */
    int single;                  /* everything in one task */
    int nslots;                  /* per-worker scratch slots */
    size_t q_off, k_off, v_off;  /* float offsets of Q, K, V (packed: columns of QKV) */
    int ldq, ldkv;               /* row strides of Q and of K/V */
    size_t q_brows;              /* rows per batch entry in the Q buffer */
    int arow;                    /* query rows per attention task */
    int srow;                    /* dense weights: rows of a task's sub-blocks */
    int kblk;                    /* keys per online-softmax block */
    int rrow;                    /* listed rows per weight-rows task */
    size_t qc_off, st_off;       /* averaged top-k: the copy of Q, then max and sum [2,B,H,n] */
    int kvpack;                  /* K_h^T and V_h packed per (b, h) for attn_gemm */
    int s_out;                   /* dense weights: a sub-block's S goes out of L2 */
    int avg_out;                 /* a task's rows of the head average go out of L2 */
    size_t pk_bh, pv_bh;         /* floats of one (b, h)'s packed K_h^T and V_h */
    size_t pk_stride, pv_stride; /* their panel strides */
    size_t kv_off, kv_floats;    /* where the packed K and V of all (b, h) are, and their size */
    size_t slot_floats;          /* per-worker scratch, a multiple of VL */
    size_t heap_off;             /* top-k: the rows' heaps in a slot, then their counts */
    size_t slot_off;             /* float offset of slot 0 */
    size_t total_floats;         /* whole allocation */
} fwd_plan;

static size_t round_up(size_t x, size_t to) {
    return (x + to - 1) / to * to;
}
static int imin(int a, int b) {
    return a < b ? a : b;
}
static int imax(int a, int b) {
    return a > b ? a : b;
}
static size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

double attn_forward_flops(const attn_weights *w, const attn_input *in) {
    const double B = in->B, n = in->n, m = in->m, E = w->E, M = attn_key_positions(w, in->m);
    /* weight rows compute their scores again; so does the averaged top-k */
    const double again = in->rows && !in->need_weights       ? (double)in->nrows
                         : in->topk > 0 && in->average_heads ? n
                                                             : 0.0;
    return 2.0 * B *
           (n * E * E * 2.0 + m * E * (double)(w->kdim + w->vdim) + (2.0 * n + again) * M * E);
}

/* Whether a causal block of rows may skip the keys after its last row
 * (causal_keys, on the engine's kernel): with the causal mask, where no
 * key position is appended (those are never masked). */
static int causal_skips(const attn_input *in, int M) {
    return in->causal && M == in->m;
}

/* The scratch of one pass, 64-byte aligned: from a megabyte on, 2 MiB
 * aligned in huge pages (hugemem.h), since every page of it is written.
 * Measured: a [512, 768] request with weights, after the server gave its
 * memory back, took 1,460-1,720 page faults, then 100-630. From a megabyte
 * on, the last pass's scratch is kept as the spare and the next pass of
 * the same size reuses it (hugemem.h), so its pages are not faulted and
 * cleared again. No pass reads scratch it has not written. Give back with
 * scratch_free(p, bytes). */
static float *scratch_alloc(size_t bytes) {
    return bytes >= MEM_HUGE_MIN ? mem_reuse_alloc(bytes) : aligned_alloc(64, bytes);
}

static void scratch_free(float *p, size_t bytes) {
    if (bytes >= MEM_HUGE_MIN)
        mem_reuse_free(p, bytes);
    else
        free(p);
}

/* Whether a phase whose products run on OpenBLAS (on_blas) splits its
 * tasks as for SPLIT_WORKERS workers on any pool and on one thread alike:
 * where OpenBLAS's sgemm gives a row other bits beside other rows
 * (attn_blas_rows_invariant: its Haswell and Zen kernels), the tasks'
 * heights are the calls' and so part of the answer, which must not follow
 * --threads. Elsewhere the split follows the pool (each row's bits are its
 * own: the engine's kernel, OpenBLAS's SkylakeX kernel). */
static int split_fixed(int on_blas) {
    return on_blas && !attn_blas_rows_invariant();
}

/* Whether flops of work on nw workers run on the calling thread: tiny work
 * (under SMALL_FLOPS) costs less there than the pool's hand-over. */
static int runs_inline(double flops, int nw) {
    return nw <= 1 || flops < SMALL_FLOPS;
}

/* Fill *p for this input on nw workers; 0 on size_t overflow. The input
 * must have passed attn_input_check. */
static int fwd_plan_make(const attn_weights *w, const attn_input *in, int nw, int use_pool,
                         fwd_plan *p) {
    memset(p, 0, sizeof *p);
    p->avg_out = 1; /* unless the dense weights' blocks below know better */
    const size_t B = (size_t)in->B, n = (size_t)in->n, E = (size_t)w->E, d = (size_t)w->d;
    const int M = attn_key_positions(w, in->m);
    p->M = M;
    p->form = form_of(in);
    p->avg_topk = p->form == WT_TOPK && in->average_heads;
    p->packed = (w->wqkv_t || w->wqkv_p) && (!w->bias || w->bqkv) && in->query == in->key &&
                in->query == in->value && in->n == in->m;

    p->single = !use_pool || runs_inline(attn_forward_flops(w, in), nw);
    p->nslots = p->single ? 1 : nw;

    size_t main_floats, t;
    if (p->packed) {
        p->ldq = p->ldkv = 3 * w->E;
        p->q_brows = (size_t)M;
        p->q_off = 0;
        p->k_off = E;
        p->v_off = 2 * E;
        size_t v[3] = {B, (size_t)M, 3 * E};
        if (!attn_mul_sizes(v, 3, &main_floats)) return 0;
    } else {
        p->ldq = p->ldkv = w->E;
        p->q_brows = n;
        size_t qf, kf;
        size_t vq[3] = {B, n, E}, vk[3] = {B, (size_t)M, E};
        if (!attn_mul_sizes(vq, 3, &qf) || !attn_mul_sizes(vk, 3, &kf)) return 0;
        p->q_off = 0;
        p->k_off = round_up(qf, VL);
        p->v_off = p->k_off + round_up(kf, VL);
        main_floats = p->v_off + kf;
    }
    if (p->avg_topk) { /* the copy of Q and the rows' max and sum */
        /* each piece is smaller than QKV, whose bytes attn_input_check
         * found to fit a size_t four times over */
        size_t qf, sf, vq[3] = {B, n, E}, vs[4] = {2, B, (size_t)w->H, n};
        if (!attn_mul_sizes(vq, 3, &qf) || !attn_mul_sizes(vs, 4, &sf)) return 0;
        p->qc_off = round_up(main_floats, VL);
        p->st_off = p->qc_off + round_up(qf, VL);
        if (!attn_add_size(p->st_off, sf, &main_floats)) return 0;
    }
    if (attn_gemm_nr() > 0) {
        /* each (b, h)'s K_h^T [d, M] then V_h [M, d], in the kernel's
         * panels; only where the panels' padding (keys and head columns
         * rounded up to the panel width) adds at most a quarter to K and V:
         * a batch of many short inputs with narrow heads would otherwise
         * triple them (4096 x 8 tokens, d = 16) */
        const size_t nr = (size_t)attn_gemm_nr();
        size_t bh;
        p->pk_stride = d * nr;
        p->pv_stride = (size_t)M * nr;
        if (!attn_mul_size(ceil_div((size_t)M, nr), p->pk_stride, &p->pk_bh) ||
            !attn_mul_size(ceil_div(d, nr), p->pv_stride, &p->pv_bh) ||
            !attn_mul_size(B, (size_t)w->H, &bh) || !attn_add_size(p->pk_bh, p->pv_bh, &t) ||
            !attn_mul_size(bh, t, &p->kv_floats))
            return 0;
        /* 2 (pk + pv) <= 5 M d; each side below 2^62 (M, d < 2^31, nr 32) */
        p->kvpack = 2 * t <= 5 * (size_t)M * d;
        if (p->kvpack) {
            p->kv_off = round_up(main_floats, VL);
            if (!attn_add_size(p->kv_off, p->kv_floats, &main_floats)) return 0;
        } else {
            p->kv_floats = 0;
        }
    }
    if (!attn_add_size(main_floats, VL, &t)) return 0;
    p->slot_off = round_up(main_floats, VL);

    /* Attention blocks: enough tasks for the workers, not so small that
     * the sgemm calls degenerate. With weights, a task on sgemm repacks
     * each head's K_h for its rows, so blocks are taller (two tasks per
     * worker; on the engine's kernel walked in sub-blocks, below); without,
     * the heads already multiply the task count. */
    /* the workers the tasks are split for, and whether as one task */
    const int fixed = split_fixed(!p->kvpack); /* the products on OpenBLAS */
    const int snw = fixed ? SPLIT_WORKERS : nw, one = p->single && !fixed;
    int target = one ? 1 : 4 * snw;
    if (p->form == WT_DENSE) {
        /* Averaged over the heads, a task's S [arow, M] and its rows of
         * the average are as large as its rows (S whole: see srow below),
         * and at most 256 rows ran faster than 512 where M is long: the
         * attention phase (make bench-ab with AB_PHASES=1, both orders,
         * same bits, Zen 4) at n = 2048 1.038-1.055 (the AVX2 kernel
         * 1.023-1.097), at n = 4096 1.068-1.129 (128 rows: 1.074-1.080);
         * n = 1024 (256 rows already; 128: 0.987-1.000) and 512 (128 rows;
         * 64: 0.986-0.993) as they were. Per head it did not pay: 0.987-
         * 1.006 at n = 2048, 0.980-0.993 at 4096. */
        const int amax = in->average_heads ? AROW_AVG_MAX : AROW_MAX;
        int per_b = (int)ceil_div((size_t)(one ? 1 : 2 * snw), B);
        int rows = (int)ceil_div(n, (size_t)per_b);
        p->arow = imin(in->n, imin(amax, imax(AROW_MIN, rows)));
        if (one) p->arow = imin(in->n, amax);
        /* A task walks its rows in sub-blocks of srow, each head's in
         * turn. Where one head's packed K and V leave room in L2, its scores S
         * [srow, M] are written by the product, softmaxed, added to the
         * head average and read by P V_h while they and K_h, V_h are still
         * in L2, instead of a 512-row S (4 MB at M = 2048) going out to L3
         * and back for each of those steps. srow leaves room for S and as
         * much again (the average's rows, or the output S is written to).
         * Rows are independent in every step, so the bits are the same.
         * make bench-ab and alternated runs on the Xeon (2 MB of L2; 64-row
         * sub-blocks at n = 2048, E = 1024, H = 16): see docs/DESIGN.md.
         * Where one head's K and V leave no such room (1 MB at n = 2048, d =
         * 64, against a 1 MiB L2 on Zen 5), they come from L3 for every
         * sub-block either way, and sub-blocks of SROW_STREAM rows (S 512
         * KiB at M = 2048) still beat whole tasks for weights per head,
         * whose S is the answer's own rows: on Zen 5, against whole 512-row
         * tasks, make bench-ab both orders, same bits: n = 2048 1.017 /
         * 1.020 (16 rows 0.96, 32 0.98, 128 1.00 / 1.03), n = 4096 1.028 /
         * 1.030 (32 rows 1.00 / 0.97). Averaged over the heads (make
         * bench's case, S in the worker's scratch), they lose, by the same
         * measure: 64 rows 0.919 at n = 2048, 0.947 at n = 4096; 128 rows
         * 0.975, 256 0.999 at n = 2048. Why is not established (K and V read
         * from L3 once a sub-block instead of once a task may cost more
         * than an S in L2 saves when S is not the answer); averaged tasks
         * stay whole. */
        p->srow = p->arow;
        if (p->kvpack) {
            const size_t kv = (p->pk_bh + p->pv_bh) * sizeof(float), l2 = attn_gemm_l2_bytes();
            const size_t s2 = 2 * (size_t)M * sizeof(float); /* a row of S, and as much again */
            const size_t room = l2 > kv ? (l2 - kv) / s2 / 8 * 8 : 0;
            const size_t sr = room >= 16 ? room : in->average_heads ? (size_t)p->arow : SROW_STREAM;
            if (sr < (size_t)p->arow) p->srow = (int)sr;
            /* Causal, a sub-block computes the keys up to its last row
             * (causal_keys): a task's R rows compute R (i0 + R) scores
             * where i0 + R/2 would do, so shorter sub-blocks waste less
             * (whole 512-row tasks: n (n + 512) / 2 scores, 25% over at n
             * = 2048). For the head average on Zen 5, make bench-ab both
             * orders, same bits, against whole tasks: n = 2048 32 rows
             * 1.022, 64 1.050, 128 1.043, 256 1.028; n = 4096 64 rows
             * 1.027, 128 1.058. Per head, where L2 leaves room for taller
             * sub-blocks (n = 512: 128 rows), SROW_STREAM's 64 on Zen 4:
             * n = 512 1.019 (32 rows 1.023), n = 1024 (192 rows) 1.004. */
            if (causal_skips(in, M))
                p->srow = imin(p->srow, in->average_heads ? SROW_CAUSAL : SROW_STREAM);
            p->s_out = room < (size_t)p->srow; /* max_in_product */
            /* the task's rows of the head average beside S, K_h and V_h */
            const size_t avg_b =
                in->average_heads ? (size_t)p->arow * (size_t)M * sizeof(float) : 0;
            p->avg_out = avg_b + (size_t)p->srow * (size_t)M * sizeof(float) + kv > l2;
        }
        p->kblk = M;
        if (in->average_heads) { /* S, then the rows' max lanes (head_scores_max) */
            if (!attn_mul_size((size_t)p->srow, (size_t)M, &p->slot_floats)) return 0;
            p->slot_floats = round_up(p->slot_floats, VL) + round_up((size_t)p->srow * 16, VL);
        }
    } else {
        size_t bh = B * (size_t)w->H;
        int per_bh = (int)ceil_div((size_t)target, bh);
        int rows = (int)ceil_div(n, (size_t)per_bh);
        p->kblk = M <= KBLK_WHOLE ? M : KBLK;
        /* the score block S [arow, kblk] stays in L2 from the product that
         * writes it through the softmax to the product that reads it */
        const int amax = imin(OROW_MAX, imax(16, (int)(SBLK_BYTES / sizeof(float)) / p->kblk));
        p->arow = imin(in->n, imin(amax, imax(16, rows)));
        if (one) p->arow = imin(in->n, amax);
        size_t a = (size_t)p->arow, sk = round_up(a * (size_t)p->kblk, VL), heaps = 0;
        /* S, the accumulators, then each row's max, sum, rescale factor,
         * limit, 16 lanes of sums, and over and climb flags (a byte each,
         * in the room of a float), and where key blocks follow each other
         * without top-k, the rows over the slack's Q_h and scores, gathered
         * (attn_online_task) */
        p->slot_floats = sk + round_up(a * d, VL) + 5 * round_up(a, VL) + round_up(a * 16, VL);
        if (p->form != WT_TOPK && p->kblk < M)
            p->slot_floats +=
                round_up(OVER_ROWS * (size_t)d, VL) + round_up(OVER_ROWS * (size_t)p->kblk, VL);
        if (p->form == WT_TOPK) { /* the rows' heaps (8 bytes a key) and counts */
            if (!attn_mul_size(a, 2 * tk_stride(in->topk), &heaps)) return 0;
            heaps = round_up(heaps, VL) + round_up(a, VL);
            p->heap_off = p->avg_topk ? 2 * sk : p->slot_floats;
            if (!attn_add_size(p->heap_off, heaps, &t)) return 0;
            if (t > p->slot_floats) p->slot_floats = t;
        }
    }
    if (p->form == WT_ROWS) {
        p->rrow = imin(in->nrows, RROW);
        size_t r = (size_t)p->rrow; /* at most RROW: no overflow */
        size_t rf = round_up(r * E, VL) + (in->average_heads ? round_up(r * (size_t)M, VL) : 0);
        if (rf > p->slot_floats) p->slot_floats = rf;
    }
    if (!attn_mul_size(p->slot_floats, (size_t)p->nslots, &t) ||
        !attn_add_size(p->slot_off, t, &p->total_floats))
        return 0;
    return 1;
}

static size_t plan_bytes(const fwd_plan *p) {
    size_t bytes;
    if (!attn_mul_size(p->total_floats, sizeof(float), &bytes)) return 0;
    if (!attn_add_size(bytes, 63, &bytes)) return 0;
    return bytes / 64 * 64;
}

attn_status attn_plan_input(const attn_weights *w, const attn_input *in, int nworkers,
                            attn_plan *plan, char *err, size_t errlen) {
    memset(plan, 0, sizeof *plan);
    attn_status st = attn_input_check(w, in, err, errlen);
    if (st) return st;
    fwd_plan p;
    size_t bytes = 0;
    if (nworkers < 1) nworkers = 1;
    if (fwd_plan_make(w, in, nworkers, 1, &p)) bytes = plan_bytes(&p);
    if (bytes == 0)
        return attn_fail(err, errlen, ATTN_ERR_LIMIT,
                         "the working memory of B=%d n=%d m=%d with E=%d H=%d on %d workers "
                         "overflows size_t",
                         in->B, in->n, in->m, w->E, w->H, nworkers);
    plan->M = p.M;
    attn_output_sizes(w, in, &plan->out_floats, &plan->weight_floats); /* checked above */
    plan->index_count = in->topk > 0 ? plan->weight_floats : 0;
    plan->scratch_bytes = mem_alloc_size(bytes); /* as scratch_alloc takes it */
    plan->flops = attn_forward_flops(w, in);
    plan->ragged_ok = attn_ragged_ok(w, in) != 0;
    return ATTN_OK;
}

size_t attn_forward_scratch_bytes(const attn_weights *w, const attn_input *in, int nworkers) {
    attn_plan plan;
    return attn_plan_input(w, in, nworkers, &plan, NULL, 0) ? 0 : plan.scratch_bytes;
}

/* =============================================================== 3. tasks */

/* One projection y = x W^T + b over batch entries whose rows sit at fixed
 * strides: x row r of batch b at x + (b*xbrows + r)*ldx, y likewise. */
typedef struct proj_job {
    const float *x;  /* input rows, in floats wide */
    int ldx;         /* row stride of x */
    size_t xbrows;   /* rows per batch entry in x's buffer */
    int in;          /* input width */
    const float *Wp; /* [in, cols] packed for attn_gemm, or NULL: then W */
    const float *W;  /* [cols, in] (wtrans CblasTrans) or [in, cols] (CblasNoTrans) */
    enum CBLAS_TRANSPOSE wtrans;
    int ldw;           /* row stride of W */
    const float *bias; /* [cols] or NULL */
    int cols;          /* output width */
    float *y;          /* output rows */
    int ldy;           /* row stride of y */
    size_t ybrows;     /* rows per batch entry in y's buffer */
    int rows;          /* rows to compute per batch entry */
    int scale_cols;    /* the first scale_cols output columns are multiplied by scale */
    float scale;
    /* the split into tasks (proj_job_setup): first nbody tasks of prow
     * rows (the last shorter) and all the columns over the rows before
     * tail, then the rows from tail on in ncolt ranges of columns */
    int prow;                /* rows per task before tail */
    size_t nbody;            /* tasks before tail: ceil(tail / prow) */
    size_t tail;             /* the first row of the tail */
    size_t ncolt;            /* column ranges of the tail (0 if it has no rows) */
    int cut[COL_RANGES + 1]; /* range c is columns cut[c] .. cut[c+1]-1 (at panels) */
    size_t ntasks;           /* nbody + ncolt */
} proj_job;

typedef struct fwd_ctx {
    const attn_weights *w;
    const attn_input *in;
    fwd_plan plan;
    float *buf;       /* the scratch allocation */
    float *slots;     /* per-worker scratch: slot w at slots + w * plan.slot_floats */
    float *Q, *K, *V; /* views into buf, row strides plan.ldq / plan.ldkv */
    float *kvp;       /* packed K_h^T and V_h of every (b, h) (plan.kvpack) */
    float *out;       /* [B,n,E] */
    float *weights;   /* dense weights, weight rows or top-k values (attn_result), or NULL */
    int32_t *indices; /* top-k key indices, or NULL */
    proj_job jobs[3]; /* input projections */
    int njobs;
    size_t nproj;    /* tasks over all jobs */
    size_t npack;    /* packing tasks: one per (b, h) with plan.kvpack */
    proj_job outjob; /* out-projection */
    size_t nrowt;    /* weight-rows tasks */
    size_t natt;     /* attention tasks */
    size_t navg;     /* tasks of the averaged top-k pass */
} fwd_ctx;

/* Columns j0.. of the packed [K, N] weights Wp as a packed matrix of their
 * own, or NULL (then the job uses OpenBLAS) when j0 does not start a panel
 * (E not a multiple of the kernel's panel width) or there is no Wp. */
static const float *packed_cols(const float *Wp, int K, int j0) {
    const int nr = attn_gemm_nr();
    if (!Wp || nr == 0 || j0 % nr != 0) return NULL;
    return Wp + (size_t)(j0 / nr) * (size_t)K * (size_t)nr;
}

/* Whether the engine's kernel's packed [in, cols] weights fit in a core's L2. */
static int packed_fits_l2(int in, int cols) {
    return attn_gemm_packed_floats(in, cols) * sizeof(float) <= attn_gemm_l2_bytes();
}

/* Split the job's B*rows rows into tasks for nw workers (one task when
 * single). Where the packed W is larger than L2 (7 MB at E = 768), each task
 * of the engine's kernel reads all of it from L3 whatever its rows, so the
 * tasks take all the rows (up to PROW_MAX) and a range of W's columns each,
 * and read W once between them. The passes, each way alternated in one
 * process (2 workers, AVX-512): n = 512, E = 768: 2-5% faster; n = 128:
 * 4-10%; n = 64: 1.8 -> 1.1 ms (64 rows had been one task); n = 1024 and
 * 2048: the same (their row ranges were long already). Column ranges start
 * at panels, so each element gets the same arithmetic however the job is
 * split. A W that fits in L2 splits by rows, as OpenBLAS's products do
 * (it packs W itself for each call): at least PROW_MIN rows a task, about
 * two tasks a worker (n = 128, E = 256: columns were 7-9% slower). */
static void proj_job_setup(proj_job *j, size_t B, int nw, int single) {
    const size_t total = B * (size_t)j->rows;
    size_t per = total, tail = total;
    const size_t nr = j->Wp ? (size_t)attn_gemm_nr() : 0,
                 panels = nr ? ceil_div((size_t)j->cols, nr) : 0;
    const int fixed = split_fixed(nr == 0); /* OpenBLAS's rows in tasks of fixed heights */
    if (fixed) nw = SPLIT_WORKERS, single = 0;
    if (single) {
        /* one task */
    } else if (nr && !packed_fits_l2(j->in, j->cols)) {
        /* Too many rows for one task a worker: the rows before the last
         * PROW_TAIL split into tasks of up to PROW_MAX, as many as a
         * multiple of the workers, and the tail in ranges of columns, so
         * that the worker that finishes its rows first takes most of the
         * tail. n = 2048, E = 1024 had been two tasks of 1,024 rows whose
         * workers finished 2.2 ms apart in a median pass (p90 6.6-7.2) of
         * a 63 ms phase. make bench-ab with AB_PHASES=1, both orders, same
         * bits (Zen 4): the projections 1.023-1.027 faster and the
         * out-projection 1.012-1.034, the pass 1.011-1.021 (256 rows of
         * tail: 1.014-1.018 and 1.011-1.037); n = 8192 (8 tasks of 1,024
         * rows before) 0.999-1.008, the pass 0.998-1.004. */
        tail = 0;
        if (nw > 1 && ceil_div(total, PROW_MAX) >= (size_t)nw && total > PROW_TAIL) {
            tail = total - PROW_TAIL;
            const size_t nrow = round_up(ceil_div(tail, PROW_MAX), (size_t)nw);
            per = round_up(ceil_div(tail, nrow), 8);
        }
    } else {
        per = ceil_div(total, 2 * (size_t)nw);
        per = round_up(per < PROW_MIN ? PROW_MIN : per, 8);
    }
    if (per > total) per = total;
    j->prow = per == 0 ? 1 : (int)(per < INT_MAX ? per : INT_MAX);
    j->tail = tail;
    j->nbody = ceil_div(tail, (size_t)j->prow);
    /* The tail's column ranges shrink as they go, each 1/nw of the panels
     * left (at least one): a worker that finishes early takes the small
     * ones at the end, so the phase ends within a panel of its work on
     * every worker. With equal ranges the phase ended with the slower
     * worker: n = 512, E = 768, the two workers' last tasks 0.32-0.33 ms
     * apart in a median pass against 0.17-0.19 (a phase of 9.2-9.3 ms);
     * make bench-ab, both orders, same bits: 1.004-1.006 without weights,
     * 1.005-1.007 with the averaged ones (Zen 4). */
    size_t c = 0; /* a tail only where the kernel's panels are (nr > 0) */
    for (size_t at = 0; tail < total && at < panels && c < COL_RANGES; c++) {
        j->cut[c] = (int)(at * nr);
        at += ceil_div(panels - at, (size_t)nw);
    }
    j->cut[c] = j->cols;
    j->ncolt = c;
    j->ntasks = j->nbody + j->ncolt;
}

/* Task i of a projection job (proj_job_setup): global rows [g, g1) of the
 * B*rows and columns [c0, c1), split at batch boundaries into one GEMM
 * each, then the bias added and the scale applied: by the engine's kernel
 * as it stores each tile, or row by row after sgemm (the same float
 * operations in the same order, so the same bits). */
static void proj_task_run(const proj_job *j, int B, size_t i) {
    const size_t rows = (size_t)j->rows, total = (size_t)B * rows;
    size_t g, g1;
    int c0 = 0, nc = j->cols;
    if (i < j->nbody) {
        g = i * (size_t)j->prow;
        g1 = g + (size_t)j->prow < j->tail ? g + (size_t)j->prow : j->tail;
    } else {
        const size_t ci = i - j->nbody;
        g = j->tail, g1 = total;
        c0 = j->cut[ci], nc = j->cut[ci + 1] - c0;
    }
    const int nscale = imax(0, imin(nc, j->scale_cols - c0));
    while (g < g1) {
        size_t b = g / rows, r0 = g % rows, r1 = r0 + (g1 - g);
        if (r1 > rows) r1 = rows;
        int nr = (int)(r1 - r0);
        const float *x_b = j->x + (b * j->xbrows + r0) * (size_t)j->ldx;
        float *y_b = j->y + (b * j->ybrows + r0) * (size_t)j->ldy + c0;
        if (j->Wp) { /* the bias and scale in the kernel's epilogue */
            const attn_gemm_post post = {
                .bias = j->bias ? j->bias + c0 : NULL, .scale = j->scale, .scale_cols = nscale};
            attn_gemm_ex_post(nr, nc, j->in, x_b, j->ldx, packed_cols(j->Wp, j->in, c0),
                              (size_t)j->in * (size_t)attn_gemm_nr(), y_b, j->ldy, 0, &post);
        } else { /* all the columns (proj_job_setup) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, j->wtrans, nr, j->cols, j->in, 1.0f, x_b,
                        j->ldx, j->W, j->ldw, 0.0f, y_b, j->ldy);
            for (int r = 0; r < nr; r++) {
                float *y_r = y_b + (size_t)r * (size_t)j->ldy;
                if (j->bias) vec_axpy(y_r, j->bias + c0, (size_t)nc, 1.0f);
                if (nscale > 0) vec_scale(y_r, (size_t)nscale, j->scale);
            }
        }
        g += (size_t)nr;
    }
}

/* Add the masks to a block of scores: S row r is query i0 + r, column c is
 * key position j0 + c, for batch entry b and head h. Only the m given keys
 * are masked; appended bias_kv / zero positions never are. */
static void mask_block(const fwd_ctx *c, int b, int h, int i0, int i1, int j0, int j1, float *S,
                       size_t lds) {
    const attn_input *in = c->in;
    const int m = in->m, je = j1 < m ? j1 : m;
    if (je <= j0) return;
    const size_t len = (size_t)(je - j0), R = (size_t)(i1 - i0);
    if (in->kpm_kind == ATTN_MASK_BOOL) {
        const uint8_t *k = (const uint8_t *)in->kpm + (in->kpm_batched ? (size_t)b * m : 0) + j0;
        for (size_t r = 0; r < R; r++) vec_mask_bool(S + r * lds, k, len);
    } else if (in->kpm_kind == ATTN_MASK_FLOAT) {
        const float *k = (const float *)in->kpm + (in->kpm_batched ? (size_t)b * m : 0) + j0;
        for (size_t r = 0; r < R; r++) vec_axpy(S + r * lds, k, len, 1.0f);
    }
    if (in->mask_kind != ATTN_MASK_NONE) {
        size_t plane = in->mask_dims == 2   ? 0
                       : in->mask_dims == 3 ? (size_t)h
                                            : (size_t)b * (size_t)c->w->H + (size_t)h;
        size_t base = (plane * (size_t)in->n + (size_t)i0) * (size_t)m + (size_t)j0;
        for (size_t r = 0; r < R; r++) {
            float *s = S + r * lds;
            size_t at = base + r * (size_t)m;
            if (in->mask_kind == ATTN_MASK_BOOL) {
                vec_mask_bool(s, (const uint8_t *)in->attn_mask + at, len);
            } else {
                vec_axpy(s, (const float *)in->attn_mask + at, len, 1.0f);
            }
        }
    }
    if (in->causal) {
        for (int i = i0; i < i1; i++) {
            int from = imax(j0, i + 1);
            if (from < je)
                vec_fill_ninf(S + (size_t)(i - i0) * lds + (from - j0), (size_t)(je - from));
        }
    }
}

/* One (b, h)'s packed K_h^T, and its packed V_h after it. */
static float *packed_k(const fwd_ctx *c, int b, int h) {
    const fwd_plan *p = &c->plan;
    return c->kvp + ((size_t)b * (size_t)c->w->H + (size_t)h) * (p->pk_bh + p->pv_bh);
}

/* Packing task t = (b, h): K_h^T and V_h of batch entry b, every key
 * position (appended ones included), for the attention products. */
static void kv_pack_task(void *vctx, size_t t, int worker) {
    fwd_ctx *c = vctx;
    const fwd_plan *p = &c->plan;
    const int H = c->w->H, d = c->w->d, M = p->M, b = (int)(t / (size_t)H), h = (int)(t % H);
    (void)worker;
    const size_t at = (size_t)b * (size_t)M * (size_t)p->ldkv + (size_t)h * d;
    float *pk = packed_k(c, b, h);
    attn_gemm_pack_t(pk, p->pk_stride, d, M, c->K + at, p->ldkv);
    attn_gemm_pack_n(pk + p->pk_bh, p->pv_stride, M, d, c->V + at, p->ldkv);
}

/* S [R, kb] (row stride lds) = the R rows of Q_h (row stride ldq) times
 * K_h^T for keys j0 .. j0+kb-1 of batch entry b: the engine's kernel on the
 * packed K where there is one, else sgemm. */
static void head_scores(const fwd_ctx *c, int b, int h, const float *Q_h, int ldq, int R, int j0,
                        int kb, float *S, int lds) {
    const fwd_plan *p = &c->plan;
    const int d = c->w->d;
    if (p->kvpack) {
        const size_t panel = (size_t)j0 / (size_t)attn_gemm_nr(); /* j0: a multiple of KBLK */
        attn_gemm_ex(R, kb, d, Q_h, ldq, packed_k(c, b, h) + panel * p->pk_stride, p->pk_stride, S,
                     lds, 0);
        return;
    }
    const float *K_bh =
        c->K + ((size_t)b * (size_t)p->M + (size_t)j0) * (size_t)p->ldkv + (size_t)h * d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, kb, d, 1.0f, Q_h, ldq, K_bh, p->ldkv,
                0.0f, S, lds);
}

/* The first query row at or after which no mask reaches the scores of key
 * positions j0 .. j1-1 (appended positions never are masked), or INT_MAX
 * where a mask other than the causal one may: rows from there on can take
 * the exponentials, or the max, in the product's epilogue. A function of
 * the row and the block alone, so a row takes the same path whatever rows
 * share its task (the pool's size, a ragged batch). */
static int block_unmasked_from(const attn_input *in, int j0, int j1) {
    const int je = imin(j1, in->m);
    if (je <= j0) return 0;
    if (in->kpm_kind != ATTN_MASK_NONE || in->mask_kind != ATTN_MASK_NONE) return INT_MAX;
    return in->causal ? je - 1 : 0;
}

static int epilogue_max_mode = 1; /* attn_epilogue_max */

int attn_epilogue_max(int on) {
    const int was = epilogue_max_mode;
    epilogue_max_mode = on != 0;
    return was;
}

/* Whether the rows i0.. take their max over every key from the
 * product's epilogue (head_scores_max): on the engine's AVX-512 kernel,
 * where no mask reaches those rows' scores, and where the sub-block's
 * scores go out of L2 before the softmax reads them (s_out: one head's K
 * and V leave no room for them). Where they stay in L2 the pass over the
 * rows costs less than the epilogue: the attention phase of the head
 * average at n = 512 ran 1.017-1.026 with the pass (make bench-ab
 * AB_PHASES=1, both orders, same bits, Zen 4; 1.038-1.052 on the AVX2
 * kernel; heads of 32 1.012-1.017), n = 256 1.022-1.028, n = 1024
 * 1.001-1.009; n = 128, an attention phase of a fraction of a millisecond,
 * 0.979-1.004 (heads of 32) and 0.991-1.031 (of 64); n = 2048 unchanged
 * (its scores leave L2). Not on the AVX2 kernel: with every pass at AVX2
 * (ATTN_ISA=avx2, Zen 4), the pass made the attention phase 1.013-1.022
 * faster at n = 2048 and 1.032 at n = 4096 (whole passes 1.003-1.007 and
 * 1.021-1.029, same bits); why is not established (its 3 x 16 tile does a
 * quarter of the AVX-512 tile's sums for the epilogue's maxima, as it did
 * for a call's cost). */
static int max_in_product(const fwd_ctx *c, int i0) {
    return epilogue_max_mode && attn_gemm_nr() == 32 && c->plan.kvpack && c->plan.s_out &&
           block_unmasked_from(c->in, 0, c->plan.M) <= i0;
}

/* head_scores on the engine's kernel (kvpack), each row's max kept on the
 * way in vm [R][16] (attn_gemm_post's vmax; set here): the same scores,
 * and a row's max is the largest of its lanes (softmax_row, vec.c),
 * without a pass over the row. Used for the head average's dense weights
 * only, whose task's scores (4 MiB at n = 2048) go out to L3 before the
 * softmax reads them: there it saves a pass of reads from L3 (make
 * bench-ab, both orders, same bits: 1.012-1.019 at n = 2048). Where the
 * rows are in L2 when the max is taken, the pass costs less than the
 * epilogue: the dense weights per head (sub-blocks of 64 rows)
 * 0.95-0.98, the online softmax's key blocks 0.998 (top-k per head at n =
 * 8192; every block on the AVX2 kernel). */
static void head_scores_max(const fwd_ctx *c, int b, int h, const float *Q_h, int ldq, int R,
                            int j0, int kb, float *S, int lds, float *vm) {
    const fwd_plan *p = &c->plan;
    const size_t panel = (size_t)j0 / (size_t)attn_gemm_nr();
    for (size_t i = 0; i < (size_t)R * 16; i++) vm[i] = -INFINITY;
    const attn_gemm_post post = {.vmax = vm};
    attn_gemm_ex_post(R, kb, c->w->d, Q_h, ldq, packed_k(c, b, h) + panel * p->pk_stride,
                      p->pk_stride, S, lds, 0, &post);
}

/* head_scores on the engine's kernel (kvpack) with the exponential
 * epilogue (attn_gemm_post): rows whose scores all stay <= limit[r] come
 * out as e^(score - shift[r]), summed into lanes; the others set over[r],
 * and their pieces above the limit come out as plain scores. */
static void head_scores_exp(const fwd_ctx *c, int b, int h, const float *Q_h, int ldq, int R,
                            int j0, int kb, float *S, int lds, const float *shift,
                            const float *limit, float *lanes, unsigned char *over) {
    const fwd_plan *p = &c->plan;
    const size_t panel = (size_t)j0 / (size_t)attn_gemm_nr();
    const attn_gemm_post post = {.shift = shift, .limit = limit, .lanes = lanes, .over = over};
    attn_gemm_ex_post(R, kb, c->w->d, Q_h, ldq, packed_k(c, b, h) + panel * p->pk_stride,
                      p->pk_stride, S, lds, 0, &post);
}

/* The plain scores of the rows that went over their limit unasked (over[r]
 * with a limit that is not NaN) after head_scores_exp, into their rows of S
 * [R, kb]: their rows of Q_h gathered into Qg, OVER_ROWS at a time, one
 * product into Sg, then copied. A row's product has the same bits alone or
 * among others, so the row's answer does not depend on which other rows go
 * over. One product for many rows, where every row of a task can go over in
 * the same block (scores that climb with the key position): a row at a
 * time, such a pass ran 0.88-0.90x the passes' speed (see DESIGN.md). */
static void over_scores(const fwd_ctx *c, int b, int h, const float *Q_h, int R, int j0, int kb,
                        float *S, const float *limit, const unsigned char *over, float *Qg,
                        float *Sg) {
    const int d = c->w->d;
    const size_t ldq = (size_t)c->plan.ldq;
    int idx[OVER_ROWS], g = 0;
    for (int r = 0; r < R; r++) {
        if (over[r] && !isnan(limit[r])) {
            memcpy(Qg + (size_t)g * (size_t)d, Q_h + (size_t)r * ldq, (size_t)d * sizeof *Qg);
            idx[g++] = r;
        }
        if (g == OVER_ROWS || (g > 0 && r == R - 1)) {
            head_scores(c, b, h, Qg, d, g, j0, kb, Sg, kb);
            for (int i = 0; i < g; i++)
                memcpy(S + (size_t)idx[i] * (size_t)kb, Sg + (size_t)i * (size_t)kb,
                       (size_t)kb * sizeof *S);
            g = 0;
        }
    }
}

/* Y [R, d] (row stride ldy) = P [R, kb] (row stride ldp) times V_h rows
 * j0 .. j0+kb-1 of batch entry b, or Y += that when add. */
static void head_values(const fwd_ctx *c, int b, int h, const float *P, int ldp, int R, int j0,
                        int kb, float *Y, int ldy, int add) {
    const fwd_plan *p = &c->plan;
    const int d = c->w->d;
    if (p->kvpack) {
        const float *pv = packed_k(c, b, h) + p->pk_bh + (size_t)j0 * (size_t)attn_gemm_nr();
        attn_gemm_ex(R, d, kb, P, ldp, pv, p->pv_stride, Y, ldy, add);
        return;
    }
    const float *V_bh =
        c->V + ((size_t)b * (size_t)p->M + (size_t)j0) * (size_t)p->ldkv + (size_t)h * d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, d, kb, 1.0f, P, ldp, V_bh, p->ldkv,
                add ? 1.0f : 0.0f, Y, ldy);
}

/* Causal, on the engine's kernel: how many of the rows i0 .. i0+R-1 (from
 * the first) a block of given keys ending at j1 reaches in part. Those see
 * the keys up to their own only, and go DIAG_ROWS at a time, each run
 * scoring diag_keys of the block; appended keys, never masked, come after
 * the given ones, and a block that holds them is taken whole. */
static int diag_part(const fwd_ctx *c, int i0, int R, int j1) {
    const attn_input *in = c->in;
    return c->plan.kvpack && in->causal && j1 <= in->m ? imax(0, imin(R, j1 - 1 - i0)) : 0;
}

/* The keys of a block j0 .. j0+kb-1 that causal rows up to row last
 * score: up to the last, rounded up to 32 (the same bits as all of them,
 * as causal_keys argues); none for rows wholly before the block. */
static int diag_keys(int last, int j0, int kb) {
    return last < j0 ? 0 : imin(kb, (int)round_up((size_t)(last + 1 - j0), 32));
}

/* The key positions a causal block of rows can see, rounded up to a
 * multiple of 32 (at most M): the rows are i0 .. i0+R-1, or rows[0..R)
 * (the weight rows, in any order: up to the highest of them). The keys after
 * them are masked for every row, so their scores need not be computed,
 * their weights are 0 and P V_h need not read them. The same bits as
 * computing them: past the keys, a row's softmax adds 0 into its sums (a
 * multiple of 16 keeps every lane's order), stores 0 into its weights and
 * its average, and P V_h adds 0 products. Only on the engine's kernel
 * (OpenBLAS's sgemm gives an element other bits in products of other
 * shapes: tried with the runs, its answers differed between pool sizes;
 * docs/DESIGN.md), and where no key position is appended (those are never
 * masked); else M. */
static int causal_keys(const fwd_ctx *c, int i0, int R, const int *rows) {
    const int M = c->plan.M;
    if (!c->plan.kvpack || !causal_skips(c->in, M)) return M;
    int last = i0 + R - 1;
    if (rows) {
        last = rows[0];
        for (int r = 1; r < R; r++) last = imax(last, rows[r]);
    }
    return diag_keys(last, 0, M);
}

/* A row of the head average, asked for as its softmax starts: its share
 * is added last (softmax_row), and where a task's rows of the average go
 * out of L2 between heads (avg_out: 2 MiB at 2048 keys, from L3 once a
 * head) the row arrives while the max and the exponentials run, which
 * hardware prefetch did not do (measured: docs/DESIGN.md, "The head
 * average's rows"). Where they stay in L2 (n = 512 on a 1 MiB L2), not
 * asking ran the attention phase 1.002-1.031 (make bench-ab AB_PHASES=1,
 * both orders, same bits, Zen 4, four runs, passes 1.000-1.011; the AVX2
 * kernel 1.006-1.013); n = 1024, whose 256-row tasks' average is 1 MiB,
 * 1.001-1.005 without it, so it keeps it. */
static void prefetch_avg(const float *av, size_t len) {
    for (size_t j = 0; j < len; j += 64 / sizeof *av) __builtin_prefetch(av + j, 1, 3);
}

/* Softmaxed scores of head h for R query rows of batch entry b into S
 * [R, M]: the rows' Q_h at Q_h with row stride ldq; the rows are the query
 * rows i0.. (rows NULL) or rows[0..R). With avg ([R, M]), each row's share
 * of the head average is added there too (stored for head 0), in the
 * softmax's last pass. The dense weights and the weight rows both come
 * from here, so they agree. Returns the keys P V_h must read (causal_keys:
 * the weights past them are 0). */
static int head_weights(const fwd_ctx *c, int b, int h, const float *Q_h, int ldq, int i0,
                        const int *rows, int R, float *S, float *avg, float *vm) {
    /* vm: room for the rows' max lanes (head_scores_max), or NULL */
    const int M = c->plan.M, kb = causal_keys(c, i0, R, rows);
    if (vm && !rows && max_in_product(c, i0))
        head_scores_max(c, b, h, Q_h, ldq, R, 0, M, S, M, vm);
    else
        head_scores(c, b, h, Q_h, ldq, R, 0, kb, S, M), vm = NULL;
    if (rows)
        for (int r = 0; r < R; r++)
            mask_block(c, b, h, rows[r], rows[r] + 1, 0, kb, S + (size_t)r * (size_t)M, (size_t)M);
    else
        mask_block(c, b, h, i0, i0 + R, 0, kb, S, (size_t)M);
    const float a = 1.0f / (float)c->w->H;
    for (int r = 0; r < R; r++) {
        float *s = S + (size_t)r * (size_t)M, *av = avg ? avg + (size_t)r * (size_t)M : NULL;
        if (av && c->plan.avg_out) prefetch_avg(av, (size_t)kb);
        softmax_row(s, (size_t)kb, av, a, h == 0, vm ? vm + (size_t)r * 16 : NULL);
        /* keys every row here masks: weight 0, as their softmax gives, in
         * the answer (S itself per head; averaged, S is scratch nothing
         * reads past kb, and the average's row is written once) */
        if (kb < M && !av) memset(s + kb, 0, (size_t)(M - kb) * sizeof *s);
        if (kb < M && av && h == 0) memset(av + kb, 0, (size_t)(M - kb) * sizeof *av);
    }
    return kb;
}

/* With weights: task t is (b, block of arow query rows). For each head,
 * sub-block by sub-block of srow rows (fwd_plan_make), the scores S are
 * computed straight into the weights output (or into the worker's scratch
 * when averaging, then added into the task's own rows of weights[b]),
 * softmaxed in place, and Y_h = P V_h written over Q_h. */
static void attn_weights_task(fwd_ctx *c, size_t t, int worker) {
    const fwd_plan *p = &c->plan;
    const attn_input *in = c->in;
    const int n = in->n, M = p->M, H = c->w->H, d = c->w->d;
    const size_t nb = ceil_div((size_t)n, (size_t)p->arow);
    /* causal (causal_keys): the last rows' blocks, the largest, first */
    const size_t blk = in->causal ? nb - 1 - t % nb : t % nb;
    const int b = (int)(t / nb), i0 = (int)blk * p->arow, i1 = imin(n, i0 + p->arow);
    const int R = i1 - i0;
    float *Q_b = c->Q + ((size_t)b * p->q_brows + (size_t)i0) * (size_t)p->ldq;
    float *avg = NULL, *S = NULL, *vm = NULL;
    if (in->average_heads) {
        avg = c->weights + ((size_t)b * (size_t)n + (size_t)i0) * (size_t)M;
        S = c->slots + (size_t)worker * p->slot_floats;
        vm = S + round_up((size_t)p->srow * (size_t)M, VL);
    }
    for (int h = 0; h < H; h++) {
        for (int r0 = 0; r0 < R; r0 += p->srow) {
            const int rs = imin(p->srow, R - r0);
            float *Q_r = Q_b + (size_t)r0 * (size_t)p->ldq + (size_t)h * (size_t)d;
            if (!avg)
                S = c->weights +
                    (((size_t)b * (size_t)H + (size_t)h) * (size_t)n + (size_t)(i0 + r0)) *
                        (size_t)M;
            const int kb = head_weights(c, b, h, Q_r, p->ldq, i0 + r0, NULL, rs, S,
                                        avg ? avg + (size_t)r0 * (size_t)M : NULL, vm);
            head_values(c, b, h, S, M, rs, 0, kb, Q_r, p->ldq, 0);
        }
    }
}

/* Weight rows: task t is (b, a run of rrow entries of the rows list), in a
 * phase before attention (which overwrites Q). The listed rows of Q are
 * gathered into the worker's slot, then each head's rows are the dense
 * path's (head_weights), straight into the answer, whose rows for
 * consecutive list entries are consecutive; averaged, they are added up in
 * the slot's S first. The outputs themselves come from the online pass. */
static void attn_rows_task(void *vctx, size_t t, int worker) {
    fwd_ctx *c = vctx;
    const fwd_plan *p = &c->plan;
    const attn_input *in = c->in;
    const int H = c->w->H, d = c->w->d, E = c->w->E, M = p->M, nr = in->nrows;
    const size_t nchunk = ceil_div((size_t)nr, (size_t)p->rrow);
    const int b = (int)(t / nchunk), s0 = (int)(t % nchunk) * p->rrow, R = imin(p->rrow, nr - s0);
    float *Qg = c->buf + p->slot_off + (size_t)worker * p->slot_floats;
    float *S = Qg + round_up((size_t)p->rrow * (size_t)E, VL);
    for (int r = 0; r < R; r++)
        memcpy(Qg + (size_t)r * (size_t)E,
               c->Q + ((size_t)b * p->q_brows + (size_t)in->rows[s0 + r]) * (size_t)p->ldq,
               (size_t)E * sizeof *Qg);
    float *avg =
        in->average_heads ? c->weights + ((size_t)b * (size_t)nr + (size_t)s0) * (size_t)M : NULL;
    for (int h = 0; h < H; h++) {
        float *S_h =
            avg ? S
                : c->weights +
                      (((size_t)b * (size_t)H + (size_t)h) * (size_t)nr + (size_t)s0) * (size_t)M;
        head_weights(c, b, h, Qg + (size_t)h * d, E, 0, in->rows + s0, R, S_h, avg, NULL);
    }
}

/* Without dense weights: task t is (b, h, block of arow query rows). Keys
 * are visited in blocks of kblk with a running max and sum per row; the
 * accumulator is rescaled whenever a row's max grows. Working memory is the
 * worker's slot: S [R, kblk], acc [R, d] and three [R] vectors. The first
 * block overwrites acc (beta 0, nothing to rescale); when it is the only
 * one, acc is Q_h itself, whose last use was that block's scores.
 * Top-k per head: each block's masked scores are offered to the rows'
 * heaps before they become exponentials. Top-k of the head average: the
 * rows' Q_h, max and sum are kept for the second pass. */
static int online_exp_mode = 1; /* attn_online_exp */

int attn_online_exp(int on) {
    const int was = online_exp_mode;
    online_exp_mode = on != 0;
    return was;
}

/* Whether a row's running max went from mold to mnew by more than
 * EXP_SLACK after its first block: its later blocks then ask for the plain
 * product rather than the exponentials (scores that climb key block after
 * key block would otherwise be computed twice in each: n = 4096, a pass
 * 0.41x the passes' speed with no such rule, 0.78x where only the next
 * block asked). */
static int climbed(float mold, float mnew) {
    return mold != -INFINITY && mnew - mold > EXP_SLACK;
}

/* One row's step of the online softmax over a key block: its scores s
 * [len] (masked, their max bm) become e^(s - the new running max), the
 * running max *mx and sum *sum move on, and *alpha is the factor for the
 * row's accumulated values (1 when the max stayed), and *climb is set when
 * the max climbed past the slack; returns whether that factor is not 1. */
static int online_row_max(float *s, size_t len, float bm, float *mx, float *sum, float *alpha,
                          unsigned char *climb) {
    const float mold = *mx;
    const float mnew = bm > mold ? bm : mold;
    int rescale = 0;
    *alpha = 1.0f;
    if (mnew == -INFINITY) { /* nothing unmasked yet in this row */
        memset(s, 0, len * sizeof *s);
        return 0;
    }
    if (mnew != mold) {
        *alpha = expf(mold - mnew); /* 0 when mold is -inf */
        rescale = 1;
        *climb |= climbed(mold, mnew);
    }
    *sum = *sum * *alpha + vec_exp_sum(s, s, len, mnew);
    *mx = mnew;
    return rescale;
}

/* online_row_max with the block's max (bm) found here. */
static int online_row(float *s, size_t len, float *mx, float *sum, float *alpha,
                      unsigned char *climb) {
    return online_row_max(s, len, vec_max(s, len), mx, sum, alpha, climb);
}

/* The sum of a row's 16 lanes of exponentials (attn_gemm_post) in the
 * order both exp-and-sum kernels reduce theirs (_mm512_reduce_add_ps's:
 * the halves, the quarters, then pairs), so the same bits. */
static float lanes_sum(const float *l) {
    float t[8];
    for (int i = 0; i < 8; i++) t[i] = l[i + 8] + l[i];
    for (int i = 0; i < 4; i++) t[i] = t[i + 4] + t[i];
    return (t[0] + t[2]) + (t[1] + t[3]);
}

/* A task's rows in the online softmax (attn_online_task): their Q_h and
 * the accumulators their values add up in, each row's running state, and
 * the scratch a key block is scored in. online_rows_from gives a run of
 * them, which a key block updates on its own (online_block). */
typedef struct online_rows {
    float *Q, *acc;                          /* row 0's Q_h and accumulators */
    int ldq, lda;                            /* their row strides */
    int i0, R;                               /* query rows i0 .. i0+R-1 */
    float *mx, *sum, *alpha, *limit, *lanes; /* a row's (lanes: 16) */
    unsigned char *over, *climb;             /* a row's flags */
    uint64_t *heap;                          /* top-k per head: ks keys a row, or NULL */
    int *cnt;                                /* and their counts */
    size_t ks;
    float *S, *Qg, *Sg; /* scratch: the block's scores, the rows over the slack */
} online_rows;

static online_rows online_rows_from(const online_rows *o, int r, int R) {
    online_rows g = *o;
    g.Q += (size_t)r * (size_t)o->ldq;
    g.acc += (size_t)r * (size_t)o->lda;
    g.i0 += r;
    g.R = R;
    g.mx += r;
    g.sum += r;
    g.alpha += r;
    g.limit += r;
    g.lanes += (size_t)r * 16;
    g.over += r;
    g.climb += r;
    if (g.heap) {
        g.heap += (size_t)r * o->ks;
        g.cnt += r;
    }
    return g;
}

/* Key positions j0 .. j0+kb-1 for the rows of o: their scores into o->S
 * [R, kb], masked, the online softmax's step, and P V_h added into the
 * accumulators (written, in the task's first block). fuse: the
 * exponentials may come from the product (attn_online_task). */
static void online_block(const fwd_ctx *c, int b, int h, const online_rows *o, int j0, int kb,
                         int first, int fuse) {
    const int R = o->R, i0 = o->i0, i1 = i0 + R, j1 = j0 + kb, k = c->in->topk;
    float *S = o->S;
    int rescale = 0;
    const int from = block_unmasked_from(c->in, j0, j1);
    if (fuse && !first && kb % 32 == 0 && from < i1) {
        /* The exponentials in the product's epilogue, while the scores
         * are in registers (EXP_SLACK): the shift stays the running
         * max, so alpha is 1, and a row's sum adds its lanes as
         * vec_exp_sum adds. A row the causal mask reaches here, or
         * that has climbed past the slack before, asks for the plain
         * product (limit NaN: every piece over) and takes the passes.
         * A row that goes over unasked has its scores computed again
         * (over_scores). */
        for (int r = 0; r < R; r++) {
            o->limit[r] = o->climb[r] || i0 + r < from ? NAN : o->mx[r] + EXP_SLACK;
            o->over[r] = 0;
        }
        memset(o->lanes, 0, (size_t)R * 16 * sizeof *o->lanes);
        head_scores_exp(c, b, h, o->Q, o->ldq, R, j0, kb, S, kb, o->mx, o->limit, o->lanes,
                        o->over);
        over_scores(c, b, h, o->Q, R, j0, kb, S, o->limit, o->over, o->Qg, o->Sg);
        for (int r = 0; r < R; r++) {
            float *s = S + (size_t)r * (size_t)kb;
            o->alpha[r] = 1.0f;
            if (!o->over[r]) {
                o->sum[r] += lanes_sum(o->lanes + (size_t)r * 16);
                continue;
            }
            mask_block(c, b, h, i0 + r, i0 + r + 1, j0, j1, s, (size_t)kb);
            rescale |= online_row(s, (size_t)kb, &o->mx[r], &o->sum[r], &o->alpha[r], &o->climb[r]);
        }
    } else {
        head_scores(c, b, h, o->Q, o->ldq, R, j0, kb, S, kb);
        mask_block(c, b, h, i0, i1, j0, j1, S, (size_t)kb);
        for (int r = 0; r < R; r++) {
            float *s = S + (size_t)r * (size_t)kb;
            const float bm = vec_max(s, (size_t)kb);
            /* a full row whose worst kept score the block's best does
             * not beat takes nothing from it (tk_offer's own test, on
             * the whole block at once: a third of the row-blocks at n =
             * 8192, whose offers are skipped; make bench-ab 1.009, the
             * same bits) */
            uint64_t *hp = o->heap ? o->heap + (size_t)r * o->ks : NULL;
            if (hp && (o->cnt[r] < k || bm > tk_worst(hp, k)))
                tk_offer(hp, &o->cnt[r], k, s, (size_t)kb, j0);
            rescale |= online_row_max(s, (size_t)kb, bm, &o->mx[r], &o->sum[r], &o->alpha[r],
                                      &o->climb[r]);
        }
    }
    if (rescale && !first)
        for (int r = 0; r < R; r++)
            if (o->alpha[r] != 1.0f)
                vec_scale(o->acc + (size_t)r * (size_t)o->lda, (size_t)c->w->d, o->alpha[r]);
    head_values(c, b, h, S, kb, R, j0, kb, o->acc, o->lda, !first);
}

static void attn_online_task(fwd_ctx *c, size_t t, int worker) {
    const fwd_plan *p = &c->plan;
    const attn_input *in = c->in;
    const int n = in->n, m = in->m, M = p->M, H = c->w->H, d = c->w->d;
    const size_t nb = ceil_div((size_t)n, (size_t)p->arow);
    const int blk = (int)(t % nb), h = (int)((t / nb) % (size_t)H), b = (int)(t / nb / (size_t)H);
    const int i0 = blk * p->arow, i1 = imin(n, i0 + p->arow), R = i1 - i0;
    float *Q_bh = c->Q + ((size_t)b * p->q_brows + (size_t)i0) * (size_t)p->ldq + (size_t)h * d;

    const size_t a = (size_t)p->arow;
    float *S = c->slots + (size_t)worker * p->slot_floats;
    float *acc = S + round_up(a * (size_t)p->kblk, VL);
    float *mx = acc + round_up(a * (size_t)d, VL);
    float *sum = mx + round_up(a, VL);
    float *alpha = sum + round_up(a, VL);
    float *limit = alpha + round_up(a, VL);
    float *lanes = limit + round_up(a, VL);
    unsigned char *over = (unsigned char *)(lanes + round_up(a * 16, VL));
    unsigned char *climb = over + a; /* both in the next round_up(a, VL) floats */
    float *Qg = lanes + round_up(a * 16, VL) + round_up(a, VL); /* when fused: the rows over */
    float *Sg = Qg + round_up(OVER_ROWS * (size_t)d, VL);
    const int k = in->topk;
    uint64_t *heap = NULL; /* top-k per head: the rows' kept keys [R, ks] */
    int *cnt = NULL;       /* and their counts */
    const size_t ks = tk_stride(k);
    if (p->form == WT_TOPK && !p->avg_topk) {
        heap = (uint64_t *)(S + p->heap_off);
        cnt = (int *)(S + p->heap_off + round_up(a * 2 * ks, VL));
    }
    for (int r = 0; r < R; r++) {
        mx[r] = -INFINITY;
        sum[r] = 0.0f;
        climb[r] = 0;
        if (heap) cnt[r] = 0;
    }
    if (heap) memset(heap, 0, (size_t)R * ks * sizeof *heap);
    if (p->avg_topk) /* the second pass needs Q_h, which Y overwrites */
        for (int r = 0; r < R; r++)
            memcpy(c->buf + p->qc_off +
                       ((size_t)b * (size_t)n + (size_t)(i0 + r)) * (size_t)c->w->E + (size_t)h * d,
                   Q_bh + (size_t)r * (size_t)p->ldq, (size_t)d * sizeof *Q_bh);
    const int direct = p->kblk >= M; /* one key block */
    const online_rows rows = {.Q = Q_bh,
                              .acc = direct ? Q_bh : acc,
                              .ldq = p->ldq,
                              .lda = direct ? p->ldq : d,
                              .i0 = i0,
                              .R = R,
                              .mx = mx,
                              .sum = sum,
                              .alpha = alpha,
                              .limit = limit,
                              .lanes = lanes,
                              .over = over,
                              .climb = climb,
                              .heap = heap,
                              .cnt = cnt,
                              .ks = ks,
                              .S = S,
                              .Qg = Qg,
                              .Sg = Sg};

    int first = 1;
    /* the exponentials in the product (EXP_SLACK), on the engine's
     * AVX-512 kernel, where no row keeps top-k. On the AVX2 kernel they
     * cost more than the passes (make bench-ab under ATTN_GEMM=avx2 on
     * Zen 5: 0.973 at n = 8192, 0.996 at 2048; why is not established). */
    const int fuse = online_exp_mode && p->kvpack && attn_gemm_nr() == 32 && !heap && !p->avg_topk;
    for (int j0 = 0; j0 < M; j0 += p->kblk) {
        const int j1 = imin(M, j0 + p->kblk), kb = j1 - j0;
        /* causal: a block of given keys all after the block's last query is
         * fully masked and contributes nothing */
        if (in->causal && j1 <= m && j0 > i1 - 1) {
            if (heap)
                for (int r = 0; r < R; r++)
                    tk_pad(heap + (size_t)r * ks, &cnt[r], k, j0, j1, -INFINITY);
            continue;
        }
        const int part = diag_part(c, i0, R, j1); /* causal: those rows in runs */
        for (int r = 0; r < part; r += DIAG_ROWS) {
            const int rs = imin(DIAG_ROWS, part - r), kg = diag_keys(i0 + r + rs - 1, j0, kb);
            const online_rows g = online_rows_from(&rows, r, rs);
            if (kg > 0) online_block(c, b, h, &g, j0, kg, first, 0);
            if (heap && kg < kb)
                for (int q = 0; q < rs; q++)
                    tk_pad(g.heap + (size_t)q * ks, &g.cnt[q], k, j0 + kg, j1, -INFINITY);
        }
        if (part < R) {
            const online_rows g = online_rows_from(&rows, part, R - part);
            online_block(c, b, h, &g, j0, kb, first, fuse);
        }
        first = 0;
    }

    /* Y_h = acc / sum over Q_h, whose last use was the last score block. */
    for (int r = 0; r < R; r++) {
        float *y = Q_bh + (size_t)r * (size_t)p->ldq;
        if (mx[r] == -INFINITY) {
            memset(y, 0, (size_t)d * sizeof *y);
        } else {
            if (!direct) memcpy(y, acc + (size_t)r * (size_t)d, (size_t)d * sizeof *y);
            vec_scale(y, (size_t)d, 1.0f / sum[r]);
        }
    }
    if (heap) { /* the rows' top-k into the answer, as weights */
        const size_t row0 = ((size_t)b * (size_t)H + (size_t)h) * (size_t)n + (size_t)i0;
        for (int r = 0; r < R; r++)
            tk_finish(heap + (size_t)r * ks, k, mx[r], sum[r],
                      c->weights + (row0 + (size_t)r) * (size_t)k,
                      c->indices + (row0 + (size_t)r) * (size_t)k);
    }
    if (p->avg_topk) {
        const size_t bhn = (size_t)in->B * (size_t)H * (size_t)n;
        float *st = c->buf + p->st_off + ((size_t)b * (size_t)H + (size_t)h) * (size_t)n + i0;
        memcpy(st, mx, (size_t)R * sizeof *st);
        memcpy(st + bhn, sum, (size_t)R * sizeof *st);
    }
}

/* Top-k of the head average, the second pass: key positions j0 .. j0+kb-1
 * for the query rows i0 .. i0+R-1 of batch entry b (their copy of Q at
 * Qc, row stride E): every head's weights of the block, recomputed from
 * the copy of Q and the rows' max and sum, averaged into A [R, kb] as the
 * dense path averages (weights times 1/H, added head after head), and
 * offered to the rows' kept keys (heap, cnt: the first row's). */
static void topk_avg_block(const fwd_ctx *c, int b, int i0, int R, const float *Qc, int j0, int kb,
                           float *S, float *A, uint64_t *heap, int *cnt) {
    const attn_input *in = c->in;
    const int n = in->n, H = c->w->H, d = c->w->d, E = c->w->E, k = in->topk;
    const size_t ks = tk_stride(k), bhn = (size_t)in->B * (size_t)H * (size_t)n;
    const float *st_mx = c->buf + c->plan.st_off, *st_sum = st_mx + bhn;
    memset(A, 0, (size_t)R * (size_t)kb * sizeof *A);
    for (int h = 0; h < H; h++) {
        head_scores(c, b, h, Qc + h * d, E, R, j0, kb, S, kb);
        mask_block(c, b, h, i0, i0 + R, j0, j0 + kb, S, (size_t)kb);
        for (int r = 0; r < R; r++) {
            const size_t at = ((size_t)b * (size_t)H + (size_t)h) * (size_t)n + (size_t)(i0 + r);
            if (st_mx[at] == -INFINITY) continue; /* a fully masked row: zero weights */
            float *s = S + (size_t)r * (size_t)kb;
            vec_exp_sum(s, s, (size_t)kb, st_mx[at]);
            vec_scale_avg(s, A + (size_t)r * (size_t)kb, (size_t)kb, 1.0f / st_sum[at],
                          1.0f / (float)H, 0);
        }
    }
    for (int r = 0; r < R; r++)
        tk_offer(heap + (size_t)r * ks, &cnt[r], k, A + (size_t)r * (size_t)kb, (size_t)kb, j0);
}

/* Top-k of the head average, the second pass (see core/topk.h):
 * task t is (b, block of arow query rows), walked key block by key block
 * (topk_avg_block); causal, the rows a block reaches in part in runs, as
 * the online pass takes them (diag_part), the keys a run does not score
 * offered as masked (weight 0). */
static void attn_topk_avg_task(void *vctx, size_t t, int worker) {
    fwd_ctx *c = vctx;
    const fwd_plan *p = &c->plan;
    const attn_input *in = c->in;
    const int n = in->n, m = in->m, M = p->M, E = c->w->E, k = in->topk;
    const size_t nb = ceil_div((size_t)n, (size_t)p->arow);
    const int b = (int)(t / nb), i0 = (int)(t % nb) * p->arow, i1 = imin(n, i0 + p->arow);
    const int R = i1 - i0;
    const size_t sk = round_up((size_t)p->arow * (size_t)p->kblk, VL);
    float *S = c->buf + p->slot_off + (size_t)worker * p->slot_floats, *A = S + sk;
    const size_t ks = tk_stride(k); /* slots of a row's kept keys */
    uint64_t *heap = (uint64_t *)(S + p->heap_off);
    int *cnt = (int *)(S + p->heap_off + round_up((size_t)p->arow * 2 * ks, VL));
    const float *Qc = c->buf + p->qc_off + ((size_t)b * (size_t)n + (size_t)i0) * (size_t)E;
    const size_t row0 = (size_t)b * (size_t)n + (size_t)i0;
    for (int r = 0; r < R; r++) cnt[r] = 0;
    memset(heap, 0, (size_t)R * ks * sizeof *heap);
    for (int j0 = 0; j0 < M; j0 += p->kblk) {
        const int j1 = imin(M, j0 + p->kblk), kb = j1 - j0;
        if (in->causal && j1 <= m && j0 > i1 - 1) { /* every head masks it whole */
            for (int r = 0; r < R; r++) tk_pad(heap + (size_t)r * ks, &cnt[r], k, j0, j1, 0.0f);
            continue;
        }
        const int part = diag_part(c, i0, R, j1);
        for (int r = 0; r < part; r += DIAG_ROWS) {
            const int rs = imin(DIAG_ROWS, part - r), kg = diag_keys(i0 + r + rs - 1, j0, kb);
            if (kg > 0)
                topk_avg_block(c, b, i0 + r, rs, Qc + (size_t)r * (size_t)E, j0, kg, S, A,
                               heap + (size_t)r * ks, cnt + r);
            if (kg < kb)
                for (int q = r; q < r + rs; q++)
                    tk_pad(heap + (size_t)q * ks, &cnt[q], k, j0 + kg, j1, 0.0f);
        }
        if (part < R)
            topk_avg_block(c, b, i0 + part, R - part, Qc + (size_t)part * (size_t)E, j0, kb, S, A,
                           heap + (size_t)part * ks, cnt + part);
    }
    for (int r = 0; r < R; r++) /* the values are the averaged weights already */
        tk_emit(heap + (size_t)r * ks, k, c->weights + (row0 + (size_t)r) * (size_t)k,
                c->indices + (row0 + (size_t)r) * (size_t)k);
}

static void proj_task(void *vctx, size_t t, int worker) {
    fwd_ctx *c = vctx;
    (void)worker;
    for (int j = 0; j < c->njobs; j++) {
        if (t < c->jobs[j].ntasks) {
            proj_task_run(&c->jobs[j], c->in->B, t);
            return;
        }
        t -= c->jobs[j].ntasks;
    }
}

static void attn_task(void *vctx, size_t t, int worker) {
    fwd_ctx *c = vctx;
    if (c->plan.form == WT_DENSE)
        attn_weights_task(c, t, worker);
    else
        attn_online_task(c, t, worker);
}

static void out_task(void *vctx, size_t t, int worker) {
    fwd_ctx *c = vctx;
    (void)worker;
    proj_task_run(&c->outjob, c->in->B, t);
}

/* The pass's phases in order (attn_phase_id), each with its task count and
 * function; ends, when not NULL, gets each one's end (attn_phase.ended). */
static void fwd_phases(fwd_ctx *c, attn_phase ph[ATTN_PH_COUNT], double *ends) {
    const attn_phase all[ATTN_PH_COUNT] = {[ATTN_PH_PROJ] = {c->nproj, proj_task, NULL},
                                           [ATTN_PH_PACK] = {c->npack, kv_pack_task, NULL},
                                           [ATTN_PH_ROWS] = {c->nrowt, attn_rows_task, NULL},
                                           [ATTN_PH_ATTN] = {c->natt, attn_task, NULL},
                                           [ATTN_PH_AVG] = {c->navg, attn_topk_avg_task, NULL},
                                           [ATTN_PH_OUT] = {c->outjob.ntasks, out_task, NULL}};
    for (int k = 0; k < ATTN_PH_COUNT; k++) {
        ph[k] = all[k];
        if (ends) ph[k].ended = &ends[k];
    }
}

/* *t from the phases' ends: each phase from the previous one's end (the
 * first from t_ph, when the phases began); t_run, when the call began. */
static void phase_times(attn_phase_times *t, const attn_phase *ph, const double *ends, double t_ph,
                        double t_run) {
    double prev = t_ph;
    for (int k = 0; k < ATTN_PH_COUNT; k++) {
        t->s[k] = ph[k].count ? ends[k] - prev : 0.0;
        if (ph[k].count) prev = ends[k];
    }
    t->total = attn_pool_now() - t_run;
}

const char *attn_phase_name(attn_phase_id ph) {
    static const char *const names[ATTN_PH_COUNT] = {
        [ATTN_PH_PROJ] = "projections",  [ATTN_PH_PACK] = "pack",
        [ATTN_PH_ROWS] = "rows",         [ATTN_PH_ATTN] = "attention",
        [ATTN_PH_AVG] = "top-k average", [ATTN_PH_OUT] = "out-projection"};
    return (unsigned)ph < ATTN_PH_COUNT ? names[ph] : "?";
}

/* Every task of c, phase after phase, on the calling thread with scratch
 * slot `slot`: single mode's whole forward (slot 0), or one input of a
 * ragged batch on the worker running it (ragged_whole). The same tasks as
 * on the pool, so the same bits. */
static void fwd_run_all(fwd_ctx *c, int slot) {
    attn_phase ph[ATTN_PH_COUNT];
    fwd_phases(c, ph, NULL);
    for (int k = 0; k < ATTN_PH_COUNT; k++)
        for (size_t t = 0; t < ph[k].count; t++) ph[k].fn(c, t, slot);
}

/* The projection jobs, the out-projection job and the attention task count
 * of c, from its plan, input and the views c->buf/Q/K/V and c->out. */
static void fwd_jobs_setup(fwd_ctx *c) {
    const attn_weights *w = c->w;
    const attn_input *in = c->in;
    const fwd_plan *p = &c->plan;
    const int B = in->B, n = in->n, m = in->m, M = p->M, E = w->E;
    const float qscale = (float)(1.0 / sqrt((double)w->d));
    if (p->packed) {
        c->jobs[0] = (proj_job){.x = in->query,
                                .ldx = E,
                                .xbrows = (size_t)n,
                                .in = E,
                                .Wp = w->wqkv_p,
                                .W = w->wqkv_t,
                                .wtrans = CblasNoTrans,
                                .ldw = 3 * E,
                                .bias = w->bias ? w->bqkv : NULL,
                                .cols = 3 * E,
                                .y = c->buf,
                                .ldy = 3 * E,
                                .ybrows = (size_t)M,
                                .rows = n,
                                .scale_cols = E,
                                .scale = qscale};
        c->njobs = 1;
    } else {
        c->jobs[0] = (proj_job){.x = in->query,
                                .ldx = E,
                                .xbrows = (size_t)n,
                                .in = E,
                                .Wp = w->wqkv_p,
                                .W = w->wqkv_t ? w->wqkv_t : w->wq,
                                .wtrans = w->wqkv_t ? CblasNoTrans : CblasTrans,
                                .ldw = w->wqkv_t ? 3 * E : E,
                                .bias = w->bias ? w->bq : NULL,
                                .cols = E,
                                .y = c->Q,
                                .ldy = E,
                                .ybrows = (size_t)n,
                                .rows = n,
                                .scale_cols = E,
                                .scale = qscale};
        c->jobs[1] = (proj_job){.x = in->key,
                                .ldx = w->kdim,
                                .xbrows = (size_t)m,
                                .in = w->kdim,
                                .Wp = packed_cols(w->wqkv_p, E, E),
                                .W = w->wqkv_t ? w->wqkv_t + E : w->wk,
                                .wtrans = w->wqkv_t ? CblasNoTrans : CblasTrans,
                                .ldw = w->wqkv_t ? 3 * E : w->kdim,
                                .bias = w->bias ? w->bk : NULL,
                                .cols = E,
                                .y = c->K,
                                .ldy = E,
                                .ybrows = (size_t)M,
                                .rows = m};
        c->jobs[2] = (proj_job){.x = in->value,
                                .ldx = w->vdim,
                                .xbrows = (size_t)m,
                                .in = w->vdim,
                                .Wp = packed_cols(w->wqkv_p, E, 2 * E),
                                .W = w->wqkv_t ? w->wqkv_t + 2 * E : w->wv,
                                .wtrans = w->wqkv_t ? CblasNoTrans : CblasTrans,
                                .ldw = w->wqkv_t ? 3 * E : w->vdim,
                                .bias = w->bias ? w->bv : NULL,
                                .cols = E,
                                .y = c->V,
                                .ldy = E,
                                .ybrows = (size_t)M,
                                .rows = m};
        c->njobs = 3;
    }
    for (int j = 0; j < c->njobs; j++) {
        proj_job_setup(&c->jobs[j], (size_t)B, p->nslots, p->single);
        c->nproj += c->jobs[j].ntasks;
    }
    c->outjob = (proj_job){.x = c->Q,
                           .ldx = p->ldq,
                           .xbrows = p->q_brows,
                           .in = E,
                           .Wp = w->wo_p,
                           .W = w->wo_t,
                           .wtrans = CblasNoTrans,
                           .ldw = E,
                           .bias = w->bias ? w->bo : NULL,
                           .cols = E,
                           .y = c->out,
                           .ldy = E,
                           .ybrows = (size_t)n,
                           .rows = n};
    proj_job_setup(&c->outjob, (size_t)B, p->nslots, p->single);
    size_t nb = ceil_div((size_t)n, (size_t)p->arow);
    c->natt = p->form == WT_DENSE ? (size_t)B * nb : (size_t)B * (size_t)w->H * nb;
    c->navg = p->avg_topk ? (size_t)B * nb : 0;
    c->npack = p->kvpack ? (size_t)B * (size_t)w->H : 0;
    c->nrowt = p->form == WT_ROWS ? (size_t)B * ceil_div((size_t)in->nrows, (size_t)p->rrow) : 0;
}

attn_status attn_result_check(const attn_input *in, const attn_result *res, char *err,
                              size_t errlen) {
    if (!res || !res->out) return attn_fail(err, errlen, ATTN_ERR_INVALID, "out is NULL");
    if (attn_wants_weights(in) && !res->weights)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "weights is NULL but %s",
                         in->need_weights ? "need_weights is set"
                         : in->topk > 0   ? "topk is set"
                                          : "rows are listed");
    if (in->topk > 0 && !res->indices)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "indices is NULL but topk is set");
    return ATTN_OK;
}

attn_status attn_forward(const attn_weights *w, const attn_input *in, float *out, float *weights,
                         attn_pool *pool, char *err, size_t errlen) {
    const attn_result res = {.out = out, .weights = weights, .indices = NULL};
    return attn_run(w, in, &res, pool, err, errlen);
}

attn_status attn_run(const attn_weights *w, const attn_input *in, const attn_result *res,
                     attn_pool *pool, char *err, size_t errlen) {
    return attn_run_timed(w, in, res, pool, NULL, err, errlen);
}

attn_status attn_run_timed(const attn_weights *w, const attn_input *in, const attn_result *res,
                           attn_pool *pool, attn_phase_times *times, char *err, size_t errlen) {
    const double t_run = times ? attn_pool_now() : 0.0;
    attn_status st = attn_input_check(w, in, err, errlen);
    if (st) return st;
    if ((st = attn_result_check(in, res, err, errlen))) return st;

    const int nw = pool ? attn_pool_size(pool) : 1;
    fwd_ctx c;
    memset(&c, 0, sizeof c);
    c.w = w;
    c.in = in;
    c.out = res->out;
    c.weights = attn_wants_weights(in) ? res->weights : NULL;
    c.indices = in->topk > 0 ? res->indices : NULL;
    fwd_plan *p = &c.plan;
    size_t bytes = 0;
    if (!fwd_plan_make(w, in, nw, pool != NULL, p) || (bytes = plan_bytes(p)) == 0)
        return attn_fail(err, errlen, ATTN_ERR_LIMIT,
                         "scratch size for B=%d n=%d m=%d overflows size_t", in->B, in->n, in->m);
    c.buf = scratch_alloc(bytes);
    if (!c.buf)
        return attn_fail(err, errlen, ATTN_ERR_NOMEM,
                         "cannot allocate %zu bytes of scratch for B=%d n=%d m=%d", bytes, in->B,
                         in->n, in->m);
    c.Q = c.buf + p->q_off;
    c.K = c.buf + p->k_off;
    c.V = c.buf + p->v_off;
    c.kvp = c.buf + p->kv_off;
    c.slots = c.buf + p->slot_off;

    fwd_jobs_setup(&c);
    const int B = in->B, m = in->m, M = p->M, E = w->E;

    /* The appended key positions: bias_k / bias_v, then a zero row. */
    for (int b = 0; b < B; b++) {
        int r = m;
        float *k_r = c.K + ((size_t)b * (size_t)M + (size_t)r) * (size_t)p->ldkv;
        float *v_r = c.V + ((size_t)b * (size_t)M + (size_t)r) * (size_t)p->ldkv;
        if (w->add_bias_kv) {
            memcpy(k_r, w->bias_k, (size_t)E * sizeof *k_r);
            memcpy(v_r, w->bias_v, (size_t)E * sizeof *v_r);
            k_r += p->ldkv;
            v_r += p->ldkv;
        }
        if (w->add_zero_attn) {
            memset(k_r, 0, (size_t)E * sizeof *k_r);
            memset(v_r, 0, (size_t)E * sizeof *v_r);
        }
    }

    /* Tiny work (p->single: one task, tens of microseconds) runs on the
     * calling thread, as with no pool: handing it to a pool worker and
     * waiting for it costs more than the work (measured over HTTP: 93 us
     * of "compute" for a 22 us forward). The pool still runs everything
     * that can be split. */
    attn_phase phases[ATTN_PH_COUNT];
    double ends[ATTN_PH_COUNT] = {0};
    fwd_phases(&c, phases, times ? ends : NULL);
    const double t_ph = times ? attn_pool_now() : 0.0;
    attn_pool_run_phases(p->single ? NULL : pool, phases, ATTN_PH_COUNT, &c);
    scratch_free(c.buf, bytes);
    if (times) phase_times(times, phases, ends, t_ph, t_run);
    return ATTN_OK;
}

/* A value and its index, ranked largest first, ties by index: a batch's
 * inputs by their work (ragged_whole). */
typedef struct {
    double v;
    int j;
} rank_pair;

static int rank_pair_cmp(const void *a, const void *b) {
    const rank_pair *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

/* ====================================================== ragged batches
 *
 * Several requests' inputs as one pass of three pool phases instead of
 * three each. Two ways to run the projections:
 *
 *   concatenated: the inputs' rows (every batch entry of every input, back
 *   to back: N rows) are copied into one X [N,E] and projected by one GEMM
 *   job into QKV [N,3E]; the out-projection runs over all N rows into
 *   Y [N,E], copied to each input's out. Taller GEMMs, W packed once per
 *   task instead of once per input's task.
 *   separate: each input's projection and out-projection tasks are exactly
 *   the ones attn_forward would run for it alone (same row splits, so the
 *   same sgemm calls), gathered into the same phases, or all of an input's
 *   tasks in one on one worker (ragged_whole).
 *
 * Either way each input is attended with its own plan, masks and causal
 * flag, reading its rows of QKV, and gets exactly the bits it would get
 * alone. Concatenated needs projections whose rows do not depend on their
 * neighbours in the call (attn_proj_rows_invariant); where ATTN_RAGGED_AUTO
 * picks it, see ragged_concat.
 *
 * Only inputs for which attn_ragged_ok holds: self-attention without
 * weights on a layer with packed projections and no appended key positions,
 * so that each batch entry's rows of QKV are exactly its n keys. */

int attn_ragged_ok(const attn_weights *w, const attn_input *in) {
    return in->query == in->key && in->query == in->value && in->n == in->m &&
           !attn_wants_weights(in) && (w->wqkv_t || w->wqkv_p) && (!w->bias || w->bqkv) &&
           !w->add_bias_kv && !w->add_zero_attn;
}

typedef struct ragged_ctx {
    int k;            /* inputs */
    int concat;       /* projections over the concatenation, else input by input */
    fwd_ctx *c;       /* [k] each input's context: plan, Q/K/V views into QKV, its own
                         projection jobs when separate */
    size_t *first[4]; /* [k+1] first task of input i in each phase (RP_*); first[p][k] =
                         the phase's count */
    proj_job in_job;  /* concatenated: X -> QKV over all N rows */
    proj_job out_job; /* concatenated: Q (holding Y) -> Ycat over all N rows */
    int whole;        /* c[0..whole-1] run whole, one task each (ragged_whole); the
                         split phases' task t is task first[p][whole] + t */
} ragged_ctx;

/* The phases of a ragged pass. */
enum { RP_PROJ, RP_PACK, RP_ATTN, RP_OUT, RP_PHASES };

/* The input whose tasks of phase ph hold task t (binary search). */
static int ragged_input(const ragged_ctx *r, int ph, size_t t) {
    int lo = 0, hi = r->k - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r->first[ph][mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void ragged_proj_task(void *vctx, size_t t, int worker) {
    ragged_ctx *r = vctx;
    t += r->first[RP_PROJ][r->whole];
    if (r->concat) {
        proj_task_run(&r->in_job, 1, t);
        return;
    }
    int i = ragged_input(r, RP_PROJ, t);
    proj_task(&r->c[i], t - r->first[RP_PROJ][i], worker);
}

static void ragged_pack_task(void *vctx, size_t t, int worker) {
    ragged_ctx *r = vctx;
    t += r->first[RP_PACK][r->whole];
    int i = ragged_input(r, RP_PACK, t);
    kv_pack_task(&r->c[i], t - r->first[RP_PACK][i], worker);
}

static void ragged_attn_task(void *vctx, size_t t, int worker) {
    ragged_ctx *r = vctx;
    t += r->first[RP_ATTN][r->whole];
    int i = ragged_input(r, RP_ATTN, t);
    attn_online_task(&r->c[i], t - r->first[RP_ATTN][i], worker);
}

static void ragged_out_task(void *vctx, size_t t, int worker) {
    ragged_ctx *r = vctx;
    t += r->first[RP_OUT][r->whole];
    if (r->concat) {
        proj_task_run(&r->out_job, 1, t);
        return;
    }
    int i = ragged_input(r, RP_OUT, t);
    out_task(&r->c[i], t - r->first[RP_OUT][i], worker);
}

/* Input c[i] whole on one worker. */
static void ragged_whole_task(void *vctx, size_t i, int worker) {
    ragged_ctx *r = vctx;
    fwd_run_all(&r->c[i], worker);
}

/* The scratch of a ragged pass: X, QKV and Y for N rows, then nw slots of
 * the largest slot any input needs. Fills the plans; 0 on overflow. */
static size_t ragged_layout(const attn_weights *w, const attn_input *const *ins, int k, int nw,
                            int concat, fwd_plan *plans, size_t *N_out, size_t *slot_floats,
                            size_t *kv_floats) {
    size_t N = 0, slot = 0, kv = 0, t, xqkvy;
    for (int i = 0; i < k; i++) {
        if (!fwd_plan_make(w, ins[i], nw, 1, &plans[i])) return 0;
        size_t rows;
        if (!attn_mul_size((size_t)ins[i]->B, (size_t)ins[i]->n, &rows) ||
            !attn_add_size(N, rows, &N))
            return 0;
        if (plans[i].slot_floats > slot) slot = plans[i].slot_floats;
        if (!attn_add_size(kv, round_up(plans[i].kv_floats, VL), &kv)) return 0;
    }
    /* X [N,E] + QKV [N,3E] + Y [N,E] (concatenated; else QKV only), each
     * rounded to VL */
    if (!attn_mul_size(N, (concat ? 5 : 3) * (size_t)w->E, &xqkvy) ||
        !attn_add_size(xqkvy, 3 * VL, &xqkvy) || !attn_add_size(xqkvy, kv, &xqkvy))
        return 0;
    if (!attn_mul_size(slot, (size_t)nw, &t) || !attn_add_size(xqkvy, t, &t) ||
        !attn_mul_size(t, sizeof(float), &t) || !attn_add_size(t, 63, &t))
        return 0;
    *N_out = N;
    *slot_floats = slot;
    *kv_floats = kv;
    return t / 64 * 64;
}

int attn_proj_rows_invariant(const attn_weights *w) {
    return (w->wqkv_p && w->wo_p) || attn_blas_rows_invariant();
}

/* Whether a ragged pass on nw workers runs on the calling thread: a batch
 * as small as one small pass does, as attn_forward runs one (32 inputs of
 * 5 x 64 through the pool's four phases took 1.3x what they took one by
 * one on the calling thread). */
static int ragged_single(const attn_weights *w, const attn_input *const *ins, int k, int nw) {
    double flops = 0;
    for (int i = 0; i < k; i++) flops += attn_forward_flops(w, ins[i]);
    return runs_inline(flops, nw);
}

/* How many of a batch's inputs run whole, one worker each, with no
 * barrier between their phases and their QKV in that worker's cache: on
 * the pool, input by input, where the packed projections fit in L2 (on
 * larger ones splitting by columns shares W's reads between the workers).
 * All but k % nw of them, so that equal inputs leave no worker idle; the
 * rest split over the workers in phases after them. 15 inputs of 128 x
 * 256 on the Xeon: 1.16-1.20x the inputs one by one, in phases 1.08-1.15x;
 * 8 of 256 x 512 (W 3 MB): 0.98x, in phases 1.02x. */
static int ragged_whole(const attn_weights *w, int k, int nw, int single, int concat) {
    if (single || concat || nw < 2 || !w->wqkv_p || !w->wo_p || !packed_fits_l2(w->E, 3 * w->E))
        return 0;
    return k - k % nw;
}

/* AUTO concatenates where the rows allow it and it pays. On sgemm it does:
 * one task packs W once for many inputs' rows (15 inputs of 128 x 256 on
 * the Xeon: 1.06x the inputs one by one, input by input 1.02x). The
 * engine's kernel reads W packed once at load, so on the pool the copies
 * into and out of the concatenation, on the calling thread while the
 * workers wait, are all that changes (input by input 1.05-1.16x,
 * concatenated 0.85-0.93x); on the calling thread alone, where short
 * inputs' GEMMs read all of W for a few rows each, it does pay (32 inputs
 * of 5 x 64: 1.17x against 1.03x). docs/DESIGN.md has the runs. */
static int ragged_concat(const attn_weights *w, attn_ragged_mode mode, int single) {
    if (mode != ATTN_RAGGED_AUTO) return mode == ATTN_RAGGED_CONCAT;
    if (w->wqkv_p && w->wo_p) return single;
    return attn_blas_rows_invariant();
}

size_t attn_ragged_scratch_bytes(const attn_weights *w, const attn_input *const *ins, int k,
                                 int nworkers, attn_ragged_mode mode) {
    if (k < 1 || nworkers < 1) return 0;
    fwd_plan *plans = malloc((size_t)k * sizeof *plans);
    size_t N, slot, kv, bytes = 0;
    if (plans)
        bytes = ragged_layout(w, ins, k, nworkers,
                              ragged_concat(w, mode, ragged_single(w, ins, k, nworkers)), plans, &N,
                              &slot, &kv);
    free(plans);
    return mem_alloc_size(bytes); /* as scratch_alloc takes it */
}

attn_status attn_forward_ragged(const attn_weights *w, const attn_input *const *ins, int k,
                                float *const *outs, attn_ragged_mode mode, attn_pool *pool,
                                char *err, size_t errlen) {
    if (k < 1 || !ins || !outs) return attn_fail(err, errlen, ATTN_ERR_INVALID, "no inputs");
    for (int i = 0; i < k; i++) {
        char e2[ATTN_ERRLEN];
        attn_status st = attn_input_check(w, ins[i], e2, sizeof e2);
        if (st) return attn_fail(err, errlen, st, "input %d: %s", i, e2);
        if (!attn_ragged_ok(w, ins[i]))
            return attn_fail(err, errlen, ATTN_ERR_INVALID,
                             "input %d cannot join a ragged batch (see attn_ragged_ok)", i);
        if (!outs[i]) return attn_fail(err, errlen, ATTN_ERR_INVALID, "out %d is NULL", i);
    }
    const int nw = pool ? attn_pool_size(pool) : 1;
    const size_t E = (size_t)w->E;
    const int single = !pool || ragged_single(w, ins, k, nw);
    ragged_ctx r = {.k = k, .concat = ragged_concat(w, mode, single)};
    fwd_plan *plans = malloc((size_t)k * sizeof *plans);
    r.c = calloc((size_t)k, sizeof *r.c);
    size_t *firsts = malloc(RP_PHASES * ((size_t)k + 1) * sizeof *firsts);
    rank_pair *order = malloc((size_t)k * sizeof *order);
    float *buf = NULL;
    attn_status st = ATTN_OK;
    size_t N = 0, slot = 0, kv = 0, bytes = 0;
    if (!plans || !r.c || !firsts || !order) {
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM, "out of memory for a batch of %d", k);
        goto done;
    }
    for (int ph = 0; ph < RP_PHASES; ph++) r.first[ph] = firsts + (size_t)ph * ((size_t)k + 1);
    if (!(bytes = ragged_layout(w, ins, k, nw, r.concat, plans, &N, &slot, &kv))) {
        st = attn_fail(err, errlen, ATTN_ERR_LIMIT, "scratch size of a batch of %d overflows", k);
        goto done;
    }
    if (!(buf = scratch_alloc(bytes))) {
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM,
                       "cannot allocate %zu bytes of scratch for a batch of %d", bytes, k);
        goto done;
    }
    float *QKV = buf, *X = NULL, *Y = NULL, *slots = QKV + round_up(N * 3 * E, VL);
    if (r.concat) {
        X = slots;
        Y = X + round_up(N * E, VL);
        slots = Y + round_up(N * E, VL);
    }
    float *kvp = slots; /* each input's packed K and V, then the slots */
    slots += kv;

    /* the order of the inputs in r.c: as given, or largest first when some
     * run whole */
    r.whole = ragged_whole(w, k, nw, single, r.concat);
    for (int i = 0; i < k; i++)
        order[i] = (rank_pair){r.whole ? attn_forward_flops(w, ins[i]) : 0, i};
    if (r.whole) qsort(order, (size_t)k, sizeof *order, rank_pair_cmp);
    /* each input's view of QKV, its tasks, and (concatenated) its rows of X */
    size_t row = 0;
    for (int ph = 0; ph < RP_PHASES; ph++) r.first[ph][0] = 0;
    for (int p = 0; p < k; p++) {
        const int i = order[p].j;
        const attn_input *in = ins[i];
        size_t rows = (size_t)in->B * (size_t)in->n;
        fwd_ctx *c = &r.c[p];
        c->w = w;
        c->in = in;
        c->plan = plans[i];
        c->plan.slot_floats = slot; /* the stride of the shared slots */
        c->buf = c->Q = QKV + row * 3 * E;
        c->K = c->Q + E;
        c->V = c->Q + 2 * E;
        c->slots = slots;
        c->kvp = kvp;
        kvp += round_up(plans[i].kv_floats, VL);
        c->out = outs[i];
        /* its task counts (and, for the separate mode, its own jobs) as
         * attn_forward would set them up alone */
        fwd_jobs_setup(c);
        if (r.concat) memcpy(X + row * E, in->query, rows * E * sizeof *X);
        r.first[RP_PROJ][p + 1] = r.first[RP_PROJ][p] + c->nproj;
        r.first[RP_PACK][p + 1] = r.first[RP_PACK][p] + c->npack;
        r.first[RP_ATTN][p + 1] = r.first[RP_ATTN][p] + c->natt;
        r.first[RP_OUT][p + 1] = r.first[RP_OUT][p] + c->outjob.ntasks;
        row += rows;
    }
    r.in_job = (proj_job){.x = X,
                          .ldx = (int)E,
                          .xbrows = N,
                          .in = (int)E,
                          .Wp = w->wqkv_p,
                          .W = w->wqkv_t,
                          .wtrans = CblasNoTrans,
                          .ldw = 3 * (int)E,
                          .bias = w->bias ? w->bqkv : NULL,
                          .cols = 3 * (int)E,
                          .y = QKV,
                          .ldy = 3 * (int)E,
                          .ybrows = N,
                          .rows = (int)N,
                          .scale_cols = (int)E,
                          .scale = (float)(1.0 / sqrt((double)w->d))};
    r.out_job = (proj_job){.x = QKV,
                           .ldx = 3 * (int)E,
                           .xbrows = N,
                           .in = (int)E,
                           .Wp = w->wo_p,
                           .W = w->wo_t,
                           .wtrans = CblasNoTrans,
                           .ldw = (int)E,
                           .bias = w->bias ? w->bo : NULL,
                           .cols = (int)E,
                           .y = Y,
                           .ldy = (int)E,
                           .ybrows = N,
                           .rows = (int)N};
    size_t count[RP_PHASES];
    for (int ph = 0; ph < RP_PHASES; ph++) count[ph] = r.first[ph][k];
    if (r.concat) {
        proj_job_setup(&r.in_job, 1, nw, single);
        proj_job_setup(&r.out_job, 1, nw, single);
        count[RP_PROJ] = r.in_job.ntasks;
        count[RP_OUT] = r.out_job.ntasks;
    }
    for (int ph = 0; ph < RP_PHASES; ph++) /* the split phases: inputs whole.. */
        count[ph] -= r.first[ph][r.whole];
    const attn_phase phases[1 + RP_PHASES] = {{(size_t)r.whole, ragged_whole_task, NULL},
                                              {count[RP_PROJ], ragged_proj_task, NULL},
                                              {count[RP_PACK], ragged_pack_task, NULL},
                                              {count[RP_ATTN], ragged_attn_task, NULL},
                                              {count[RP_OUT], ragged_out_task, NULL}};
    /* single: on this thread (no whole inputs then, ragged_whole) */
    attn_pool_run_phases(single ? NULL : pool, phases, 1 + RP_PHASES, &r);
    if (r.concat) {
        row = 0;
        for (int i = 0; i < k; i++) {
            size_t rows = (size_t)ins[i]->B * (size_t)ins[i]->n;
            memcpy(outs[i], Y + row * E, rows * E * sizeof *Y);
            row += rows;
        }
    }
done:
    scratch_free(buf, bytes);
    free(plans);
    free(r.c);
    free(firsts);
    free(order);
    return st;
}
