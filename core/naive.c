/* naive.c - the naive reference of the forward pass (attn_run_naive):
 * plain loops in double, one batch entry and one head at a time, written
 * from the definition in attention.h. It is what the fast path
 * (attention.c, vec.c, topk.c) is tested against, and what a model's
 * self-test at load compares it with, so it shares no code with it, not
 * even the masking or the top-k ranking: a file of its own, it cannot
 * reach the fast path's helpers. Only the input's and the result's checks are the same calls.
 */
#include "attention.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The reference is single-threaded and runs only in tests and in a model's
 * self-test at load (a few tokens): ThreadSanitizer can find nothing in it,
 * and instrumenting its double loops made it most of test_attention's time
 * under TSan. */
#if defined(__GNUC__)
#define NAIVE_UNSANITIZED __attribute__((no_sanitize("thread")))
#else
#define NAIVE_UNSANITIZED
#endif

/* The additive mask value for (b, h, i, j), j < m: -inf, a float, or 0. */
NAIVE_UNSANITIZED
static double naive_mask(const attn_weights *w, const attn_input *in, int b, int h, int i, int j) {
    double add = 0.0;
    if (in->kpm_kind != ATTN_MASK_NONE) {
        size_t at = (in->kpm_batched ? (size_t)b * (size_t)in->m : 0) + (size_t)j;
        if (in->kpm_kind == ATTN_MASK_BOOL) {
            if (((const uint8_t *)in->kpm)[at]) return -INFINITY;
        } else {
            add += ((const float *)in->kpm)[at];
        }
    }
    if (in->mask_kind != ATTN_MASK_NONE) {
        size_t at;
        if (in->mask_dims == 2)
            at = (size_t)i * (size_t)in->m + (size_t)j;
        else if (in->mask_dims == 3)
            at = ((size_t)h * (size_t)in->n + (size_t)i) * (size_t)in->m + (size_t)j;
        else
            at = (((size_t)b * (size_t)w->H + (size_t)h) * (size_t)in->n + (size_t)i) *
                     (size_t)in->m +
                 (size_t)j;
        if (in->mask_kind == ATTN_MASK_BOOL) {
            if (((const uint8_t *)in->attn_mask)[at]) return -INFINITY;
        } else {
            add += ((const float *)in->attn_mask)[at];
        }
    }
    if (in->causal && j > i) return -INFINITY;
    return add;
}

/* y[r][o] = sum_k x[r][k] W[o][k] + bias[o], in double. */
NAIVE_UNSANITIZED
static void naive_linear(double *y, const float *x, int rows, int in_dim, const float *W,
                         const float *bias, int out_dim) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int k = 0; k < in_dim; k++)
                s += (double)x[(size_t)r * in_dim + k] * (double)W[(size_t)o * in_dim + k];
            y[(size_t)r * out_dim + o] = s;
        }
}

/* A key's weight and index; the top-k ranks them largest first, equal
 * weights by lower index. */
typedef struct {
    double v;
    int j;
} naive_rank;

static int naive_rank_cmp(const void *a, const void *b) {
    const naive_rank *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

/* Query row i's weights row[0..M) of weight plane `plane` (b*H + h, or b
 * when averaged) into the result, in the input's form of weights. */
NAIVE_UNSANITIZED
static void naive_emit(const attn_input *in, const attn_result *res, int M, size_t plane, int i,
                       const double *row, naive_rank *rank) {
    const size_t n = (size_t)in->n;
    if (in->need_weights) {
        for (int j = 0; j < M; j++) res->weights[(plane * n + (size_t)i) * M + j] = (float)row[j];
    } else if (in->rows) {
        for (int s = 0; s < in->nrows; s++)
            if (in->rows[s] == i)
                for (int j = 0; j < M; j++)
                    res->weights[(plane * (size_t)in->nrows + (size_t)s) * M + j] = (float)row[j];
    } else if (in->topk > 0) {
        for (int j = 0; j < M; j++) rank[j] = (naive_rank){row[j], j};
        qsort(rank, (size_t)M, sizeof *rank, naive_rank_cmp);
        size_t at = (plane * n + (size_t)i) * (size_t)in->topk;
        for (int q = 0; q < in->topk; q++) {
            res->weights[at + q] = (float)rank[q].v;
            res->indices[at + q] = rank[q].j;
        }
    }
}

attn_status attn_forward_naive(const attn_weights *w, const attn_input *in, float *out,
                               float *weights, char *err, size_t errlen) {
    const attn_result res = {.out = out, .weights = weights, .indices = NULL};
    return attn_run_naive(w, in, &res, err, errlen);
}

NAIVE_UNSANITIZED
attn_status attn_run_naive(const attn_weights *w, const attn_input *in, const attn_result *res,
                           char *err, size_t errlen) {
    attn_status st = attn_input_check(w, in, err, errlen);
    if (st) return st;
    if ((st = attn_result_check(in, res, err, errlen))) return st;
    float *out = res->out;
    const int n = in->n, m = in->m, E = w->E, H = w->H, d = w->d;
    const int M = attn_key_positions(w, m);
    const bool wants = attn_wants_weights(in);
    double *Q = malloc((size_t)n * E * sizeof *Q);
    double *K = malloc((size_t)M * E * sizeof *K);
    double *V = malloc((size_t)M * E * sizeof *V);
    double *Y = malloc((size_t)n * E * sizeof *Y);
    double *s = malloc((size_t)M * sizeof *s);
    double *o = malloc((size_t)E * sizeof *o);
    naive_rank *rank = malloc((size_t)M * sizeof *rank);
    const int avg_heads = wants && in->average_heads;
    double *avg = avg_heads ? malloc((size_t)n * M * sizeof *avg) : NULL;
    if (!Q || !K || !V || !Y || !s || !o || !rank || (avg_heads && !avg)) {
        free(Q), free(K), free(V), free(Y), free(s), free(o), free(rank), free(avg);
        return attn_fail(err, errlen, ATTN_ERR_NOMEM, "naive reference: out of memory");
    }
    const double scale = 1.0 / sqrt((double)d);
    for (int b = 0; b < in->B; b++) {
        naive_linear(Q, in->query + (size_t)b * n * E, n, E, w->wq, w->bias ? w->bq : NULL, E);
        naive_linear(K, in->key + (size_t)b * m * w->kdim, m, w->kdim, w->wk,
                     w->bias ? w->bk : NULL, E);
        naive_linear(V, in->value + (size_t)b * m * w->vdim, m, w->vdim, w->wv,
                     w->bias ? w->bv : NULL, E);
        int r = m;
        if (w->add_bias_kv) {
            for (int e = 0; e < E; e++) {
                K[(size_t)r * E + e] = w->bias_k[e];
                V[(size_t)r * E + e] = w->bias_v[e];
            }
            r++;
        }
        if (w->add_zero_attn)
            for (int e = 0; e < E; e++) K[(size_t)r * E + e] = V[(size_t)r * E + e] = 0.0;

        if (avg_heads)
            for (size_t k = 0; k < (size_t)n * M; k++) avg[k] = 0.0;
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < n; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < M; j++) {
                    double dot = 0.0;
                    for (int k = 0; k < d; k++)
                        dot += Q[(size_t)i * E + h * d + k] * K[(size_t)j * E + h * d + k];
                    s[j] = dot * scale + (j < m ? naive_mask(w, in, b, h, i, j) : 0.0);
                    if (s[j] > mx) mx = s[j];
                }
                double total = 0.0;
                for (int j = 0; j < M; j++) {
                    s[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx);
                    total += s[j];
                }
                for (int j = 0; j < M; j++) s[j] = total > 0.0 ? s[j] / total : 0.0;
                for (int k = 0; k < d; k++) {
                    double acc = 0.0;
                    for (int j = 0; j < M; j++) acc += s[j] * V[(size_t)j * E + h * d + k];
                    Y[(size_t)i * E + h * d + k] = acc;
                }
                if (!wants) continue;
                if (avg_heads)
                    for (int j = 0; j < M; j++) avg[(size_t)i * M + j] += s[j] / H;
                else
                    naive_emit(in, res, M, (size_t)b * H + h, i, s, rank);
            }
        }
        if (avg_heads)
            for (int i = 0; i < n; i++)
                naive_emit(in, res, M, (size_t)b, i, avg + (size_t)i * M, rank);
        for (int i = 0; i < n; i++) {
            for (int e = 0; e < E; e++) {
                double acc = w->bias ? w->bo[e] : 0.0;
                for (int k = 0; k < E; k++) acc += Y[(size_t)i * E + k] * w->wo[(size_t)e * E + k];
                o[e] = acc;
            }
            for (int e = 0; e < E; e++) out[((size_t)b * n + i) * E + e] = (float)o[e];
        }
    }
    free(Q), free(K), free(V), free(Y), free(s), free(o), free(rank), free(avg);
    return ATTN_OK;
}
