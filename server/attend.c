/* attend.c - see attend.h.
 *
 * The file is divided as: /attend's fields into a spec; the shared plan
 * (shapes, limits, size judgement, filling, allocation); compute; the
 * /attend answer; answers. */
#include "attend.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "mem.h"

#define FIELD_LIST                                                                                 \
    "model, embeddings, query, key, value, key_padding_mask, attn_mask, causal, "                  \
    "need_weights, average_heads, weights_topk, weights_rows, encoding_format, precision"

#define invalid(err, errlen, ...) http_fail(HERR_INVALID_REQUEST, err, errlen, __VA_ARGS__)

#define too_large(err, errlen, ...) http_fail(HERR_PAYLOAD_TOO_LARGE, err, errlen, __VA_ARGS__)

static http_error budget_refusal(char *err, size_t errlen, size_t a, size_t b) {
    snprintf(err, errlen,
             "the server's memory budget (max_memory_bytes) cannot take the %zu more bytes this "
             "request needs now; retry later",
             a + b < a ? (size_t)-1 : a + b);
    return HERR_OVERLOADED;
}

static http_error want_bool(const jv *v, const char *field, bool *out, char *err, size_t errlen) {
    if (!v || v->type == JV_NULL) return HERR_NONE;
    if (v->type != JV_TRUE && v->type != JV_FALSE)
        return invalid(err, errlen, "%s: expected true or false, got %s", field,
                       jv_type_name(v->type));
    *out = v->type == JV_TRUE;
    return HERR_NONE;
}

/* ------------------------------------------------------ /attend's fields */

http_error attend_pick_inputs(bool emb, bool q, bool k, bool v, char *err, size_t errlen) {
    bool cross = q || k || v;
    if (cross && emb)
        return invalid(err, errlen,
                       "embeddings: give either embeddings (self-attention) or query, key "
                       "and value (cross-attention), not both");
    if (!cross && !emb)
        return invalid(err, errlen,
                       "embeddings: required (or query, key and value for "
                       "cross-attention)");
    if (cross && (!q || !k || !v))
        return invalid(err, errlen,
                       "%s: required for cross-attention (query, key and value go together)",
                       !q   ? "query"
                       : !k ? "key"
                            : "value");
    return HERR_NONE;
}

http_error attend_parse_forms(attend_req *r, attend_spec *sp, const jv *topk, const jv *rows,
                              const char *topk_field, const char *rows_field, char *err,
                              size_t errlen) {
    sp->topk_field = topk_field;
    sp->rows_field = rows_field;
    if (topk && rows)
        return invalid(err, errlen,
                       "%s and %s: ask for one of them (the top-k weights of every row, or "
                       "every weight of a few rows)",
                       topk_field, rows_field);
    if (topk) {
        double d = topk->type == JV_NUMBER ? topk->u.num.d : 0;
        if (topk->type != JV_NUMBER || d != floor(d) || d < 1 || d > INT_MAX)
            return invalid(err, errlen,
                           "%s: expected a whole number of at least 1 (how many weights of each "
                           "row)",
                           topk_field);
        sp->topk = (int)d;
    }
    if (rows) {
        if (rows->type != JV_ARRAY)
            return invalid(err, errlen, "%s: expected an array of query row indices, got %s",
                           rows_field, jv_type_name(rows->type));
        size_t len = rows->u.arr.len;
        if (len == 0)
            return invalid(err, errlen, "%s: empty; list at least one query row", rows_field);
        for (size_t i = 0; !rows->u.arr.f && i < len; i++) /* not packed: not all numbers */
            if (rows->u.arr.items[i].type != JV_NUMBER)
                return invalid(err, errlen, "%s[%zu]: expected a query row index, got %s",
                               rows_field, i, jv_type_name(rows->u.arr.items[i].type));
        if (len > INT_MAX) return invalid(err, errlen, "%s: %zu rows; too many", rows_field, len);
        r->rows = malloc(len * sizeof *r->rows);
        if (!r->rows)
            return http_fail(HERR_OVERLOADED, err, errlen, "not enough memory for %s now",
                             rows_field);
        for (size_t i = 0; i < len; i++) {
            double d = rows->u.arr.d[i];
            if (d != floor(d) || d < 0 || d > INT_MAX)
                return invalid(err, errlen,
                               "%s[%zu]: %g is not a query row index (a whole number from 0)",
                               rows_field, i, d);
            r->rows[i] = (int)d;
        }
        sp->rows = r->rows;
        sp->nrows = (int)len;
    }
    return HERR_NONE;
}

static bool parse_reserve(void *ctx, size_t n) {
    attend_parse *ap = ctx;
    if (!ap->lim->reserve(ap->lim->reserve_ctx, n, false)) return false;
    ap->taken += n;
    return true;
}

jdoc_status attend_parse_json(attend_parse *ap, const attend_limits *lim, const char *body,
                              size_t len, jdoc **doc, char *err, size_t errlen) {
    ap->lim = lim;
    ap->taken = 0;
    jdoc_limits jl = JDOC_LIMITS_DEFAULT;
    if (lim->reserve) {
        jl.reserve = parse_reserve;
        jl.reserve_ctx = ap;
    }
    jdoc_status js = jdoc_parse(body, len, &jl, doc, err, errlen);
    if (js != JDOC_OK) attend_parse_end(ap, NULL); /* the parse freed what it took */
    return js;
}

void attend_parse_end(attend_parse *ap, jdoc *doc) {
    jdoc_free(doc);
    if (ap->taken && ap->lim->release) ap->lim->release(ap->lim->reserve_ctx, ap->taken);
    ap->taken = 0;
}

http_error attend_decode(attend_req *r, const char *body, size_t len, registry *reg,
                         const attend_limits *lim, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    jdoc *doc = NULL;
    http_error e = HERR_NONE;
    attend_spec sp = {0};
    attend_parse ap;
    jdoc_status js = attend_parse_json(&ap, lim, body, len, &doc, err, errlen);
    if (js != JDOC_OK) return http_error_from_jdoc(js);
    const jv *root = jdoc_root(doc);
    const jv *f_model = NULL, *f_emb = NULL, *f_q = NULL, *f_k = NULL, *f_v = NULL, *f_kpm = NULL,
             *f_mask = NULL, *f_causal = NULL, *f_nw = NULL, *f_avg = NULL, *f_enc = NULL,
             *f_prec = NULL, *f_topk = NULL, *f_rows = NULL;
    if (root->type != JV_OBJECT) {
        e = invalid(err, errlen, "request body: expected a JSON object, got %s",
                    jv_type_name(root->type));
        goto out;
    }
    for (size_t i = 0; i < root->u.obj.len; i++) {
        const jv_member *mb = &root->u.obj.members[i];
        const char *k = mb->key;
        const jv **slot = !strcmp(k, "model")              ? &f_model
                          : !strcmp(k, "embeddings")       ? &f_emb
                          : !strcmp(k, "query")            ? &f_q
                          : !strcmp(k, "key")              ? &f_k
                          : !strcmp(k, "value")            ? &f_v
                          : !strcmp(k, "key_padding_mask") ? &f_kpm
                          : !strcmp(k, "attn_mask")        ? &f_mask
                          : !strcmp(k, "causal")           ? &f_causal
                          : !strcmp(k, "need_weights")     ? &f_nw
                          : !strcmp(k, "average_heads")    ? &f_avg
                          : !strcmp(k, "weights_topk")     ? &f_topk
                          : !strcmp(k, "weights_rows")     ? &f_rows
                          : !strcmp(k, "encoding_format")  ? &f_enc
                          : !strcmp(k, "precision")        ? &f_prec
                                                           : NULL;
        if (!slot) {
            e = invalid(err, errlen, "unknown field '%.64s' (known: " FIELD_LIST ")", k);
            goto out;
        }
        *slot = mb->value.type == JV_NULL ? NULL : &mb->value;
    }

    /* model */
    if (f_model && f_model->type != JV_STRING) {
        e = invalid(err, errlen, "model: expected a string, got %s", jv_type_name(f_model->type));
        goto out;
    }
    sp.model = r->model = registry_acquire(reg, f_model ? f_model->u.str.s : NULL);
    if (!sp.model) {
        registry_missing_message(reg, f_model ? f_model->u.str.s : NULL, err, errlen);
        e = f_model ? HERR_MODEL_NOT_FOUND : HERR_INVALID_REQUEST;
        goto out;
    }

    /* flags */
    sp.need_weights = true;
    if ((e = want_bool(f_causal, "causal", &sp.causal, err, errlen)) ||
        (e = want_bool(f_nw, "need_weights", &sp.need_weights, err, errlen)) ||
        (e = want_bool(f_avg, "average_heads", &sp.average_heads, err, errlen)))
        goto out;
    /* weights_topk or weights_rows: the weights come in that form instead
     * of dense; need_weights may stay (true by default) but not say false */
    if ((e = attend_parse_forms(r, &sp, f_topk, f_rows, "weights_topk", "weights_rows", err,
                                errlen)))
        goto out;
    if (sp.topk || sp.rows) {
        if (!sp.need_weights) {
            e = invalid(err, errlen,
                        "need_weights: false asks for no attention weights, but %s asks for "
                        "some; leave need_weights out (or true)",
                        sp.topk ? "weights_topk" : "weights_rows");
            goto out;
        }
        sp.need_weights = false;
    }
    r->enc_out = encoding_get(ENC_FLOAT);
    if (f_enc) {
        const encoding *enc = f_enc->type == JV_STRING ? encoding_find(f_enc->u.str.s) : NULL;
        if (!enc) {
            e = invalid(err, errlen, "encoding_format: expected \"float\" or \"base64\"");
            goto out;
        }
        r->enc_out = enc;
    }
    r->enc_weights = r->enc_index = r->enc_out;
    if (f_prec) {
        double d = f_prec->type == JV_NUMBER ? f_prec->u.num.d : 0;
        if (f_prec->type != JV_NUMBER || d != floor(d) || d < 1 || d > 9) {
            e = invalid(err, errlen, "precision: expected an integer from 1 to 9");
            goto out;
        }
        r->precision = (int)d;
    }

    /* inputs: shapes only, nothing allocated yet */
    sp.cross = f_q || f_k || f_v;
    if ((e = attend_pick_inputs(f_emb, f_q, f_k, f_v, err, errlen))) goto out;
    if ((e = tensor_probe(&sp.q, sp.cross ? "query" : "embeddings", sp.cross ? f_q : f_emb, 2, 3,
                          false, err, errlen)))
        goto out;
    if (sp.cross && ((e = tensor_probe(&sp.k, "key", f_k, 2, 3, false, err, errlen)) ||
                     (e = tensor_probe(&sp.v, "value", f_v, 2, 3, false, err, errlen))))
        goto out;
    if (f_kpm) {
        if ((e = tensor_probe(&sp.kpm, "key_padding_mask", f_kpm, 1, 2, true, err, errlen)))
            goto out;
        sp.has_kpm = true;
    }
    if (f_mask) {
        if ((e = tensor_probe(&sp.mask, "attn_mask", f_mask, 2, 4, true, err, errlen))) goto out;
        sp.has_mask = true;
    }
    e = attend_plan(r, &sp, 4096, lim, err, errlen);
out:
    attend_parse_end(&ap, doc);
    if (e) attend_free(r);
    return e;
}

/* ------------------------------------------------------------------ plan */

static http_error fill(attend_req *r, const tensor_src *t, const void **dst, char *err,
                       size_t errlen) {
    void *data;
    bool owned;
    http_error e = tensor_fill(t, &data, &owned, err, errlen);
    if (e) return e;
    if (owned)
        for (int i = 0; i < 5; i++)
            if (!r->own[i]) {
                r->own[i] = data;
                break;
            }
    *dst = data;
    return HERR_NONE;
}

/* Shapes of the inputs against the model and each other; sets B, n, m. */
static http_error check_shapes(attend_req *r, attend_spec *sp, const attend_limits *lim, char *err,
                               size_t errlen) {
    const attn_weights *w = sp->model->w;
    const char *mname = sp->model->name, *qname = sp->q.field;
    const tensor_src *tq = &sp->q;
    char sh[96];
    if (tq->dim[tq->rank - 1] != (size_t)w->E)
        return invalid(err, errlen, "%s%s has %zu numbers; model '%s' expects %d (embed_dim)",
                       qname, tq->rank == 3 ? "[0][0]" : "[0]", tq->dim[tq->rank - 1], mname, w->E);
    r->batched = tq->rank == 3;
    size_t B = r->batched ? tq->dim[0] : 1, n = tq->dim[tq->rank - 2], m = n;
    if (!sp->cross && (w->kdim != w->E || w->vdim != w->E))
        return invalid(err, errlen,
                       "embeddings: model '%s' has kdim %d and vdim %d (not embed_dim %d): "
                       "send query, key and value",
                       mname, w->kdim, w->vdim, w->E);
    if (sp->cross) {
        const tensor_src *kv[2] = {&sp->k, &sp->v};
        const int want[2] = {w->kdim, w->vdim};
        const char *wname[2] = {"kdim", "vdim"};
        for (int i = 0; i < 2; i++) {
            const tensor_src *t = kv[i];
            if (t->rank != tq->rank)
                return invalid(err, errlen, "%s: has %d dimensions; query has %d", t->field,
                               t->rank, tq->rank);
            if (r->batched && t->dim[0] != B)
                return invalid(err, errlen, "%s: batch of %zu; query has %zu", t->field, t->dim[0],
                               B);
            if (t->dim[t->rank - 1] != (size_t)want[i])
                return invalid(err, errlen, "%s: rows have %zu numbers; model '%s' expects %d (%s)",
                               t->field, t->dim[t->rank - 1], mname, want[i], wname[i]);
        }
        m = sp->k.dim[sp->k.rank - 2];
        if (sp->v.dim[sp->v.rank - 2] != m)
            return invalid(err, errlen, "value: %zu tokens; key has %zu", sp->v.dim[sp->v.rank - 2],
                           m);
    }
    if (B > (size_t)lim->max_batch)
        return too_large(err, errlen, "%s: batch of %zu sequences; the limit is %ld (max_batch)",
                         qname, B, lim->max_batch);
    if (n > (size_t)lim->max_tokens || m > (size_t)lim->max_tokens)
        return too_large(err, errlen, "%s: %zu tokens; the limit is %ld (max_tokens)",
                         n > (size_t)lim->max_tokens ? qname : "key", n > m ? n : m,
                         lim->max_tokens);
    if (sp->has_kpm) {
        const tensor_src *t = &sp->kpm;
        sp->kpm.is_mask = true;
        if (!(t->dim[t->rank - 1] == m && (t->rank == 1 || t->dim[0] == B)))
            return invalid(err, errlen, "key_padding_mask: shape %s; expected [%zu] or [%zu,%zu]",
                           tensor_shape_str(sh, sizeof sh, t->dim, t->rank), m, B, m);
    }
    if (sp->has_mask) {
        sp->mask.is_mask = true;
        const size_t *d = sp->mask.dim;
        int rk = sp->mask.rank;
        if (!(d[rk - 2] == n && d[rk - 1] == m && (rk < 3 || d[rk - 3] == (size_t)w->H) &&
              (rk < 4 || d[0] == B)))
            return invalid(err, errlen,
                           "attn_mask: shape %s; expected [%zu,%zu], [%d,%zu,%zu] or "
                           "[%zu,%d,%zu,%zu]",
                           tensor_shape_str(sh, sizeof sh, d, rk), n, m, w->H, n, m, B, w->H, n, m);
    }
    r->in.B = (int)B;
    r->in.n = (int)n;
    r->in.m = (int)m;
    r->plan.M = attn_key_positions(w, (int)m);
    return HERR_NONE;
}

/* weights_topk and weights_rows against the shapes: k at most the key
 * positions attended, rows in [0,n) and none twice. */
static http_error check_forms(const attend_req *r, const attend_spec *sp, char *err,
                              size_t errlen) {
    const attn_weights *w = r->model->w;
    if (sp->topk > r->plan.M)
        return invalid(err, errlen,
                       "%s: %d is more than the %d keys each query attends (%d key tokens%s%s); "
                       "expected 1..%d",
                       sp->topk_field, sp->topk, r->plan.M, r->in.m,
                       w->add_bias_kv ? " + bias_kv" : "",
                       w->add_zero_attn ? " + the zero key" : "", r->plan.M);
    if (!sp->rows) return HERR_NONE;
    uint8_t *seen = calloc((size_t)r->in.n / 8 + 1, 1);
    if (!seen)
        return http_fail(HERR_OVERLOADED, err, errlen, "not enough memory for %s now",
                         sp->rows_field);
    http_error e = HERR_NONE;
    for (int s = 0; s < sp->nrows && !e; s++) {
        int i = sp->rows[s];
        if (i >= r->in.n)
            e = invalid(err, errlen,
                        "%s[%d]: %d is not a query row (the query has %d tokens: 0..%d)",
                        sp->rows_field, s, i, r->in.n, r->in.n - 1);
        else if (seen[i / 8] & (1u << (i % 8)))
            e = invalid(err, errlen, "%s[%d]: row %d is listed twice", sp->rows_field, s, i);
        else
            seen[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    free(seen);
    return e;
}

/* What the answer would cost, from the shapes, before computing: the
 * output, and the weights in their form (top-k: the values and as many
 * int32 indices). */
static http_error judge_answer(attend_req *r, const attend_spec *sp, size_t overhead,
                               const attend_limits *lim, char *err, size_t errlen) {
    const attn_weights *w = r->model->w;
    const bool wants = attn_wants_weights(&r->in);
    size_t elem = tdtype_size(r->out_dtype), est = overhead;
    attn_plan *p = &r->plan;
    if (!attn_output_sizes(w, &r->in, &p->out_floats, &p->weight_floats))
        return too_large(err, errlen, "the response would be larger than the address space");
    p->index_count = r->in.topk > 0 ? p->weight_floats : 0;
    if (!attn_add_size(est, r->enc_out->estimate(p->out_floats, r->precision, elem), &est) ||
        (wants && !attn_add_size(
                      est, r->enc_weights->estimate(p->weight_floats, r->precision, elem), &est)) ||
        (p->index_count && !attn_add_size(est, r->enc_index->estimate(p->index_count, 0, 4), &est)))
        return too_large(err, errlen, "the response would be larger than the address space");
    r->response_estimate = est;
    if (est <= lim->max_response_bytes) return HERR_NONE;
    const bool form = r->in.topk > 0 || r->in.rows;
    char hint[320];
    if (form)
        snprintf(hint, sizeof hint, "ask for fewer weights");
    else
        snprintf(hint, sizeof hint,
                 "leave out the attention weights, ask for the top-k weights of each row or a few "
                 "rows of them instead (%s, %s)",
                 sp->topk_field ? sp->topk_field : "weights_topk",
                 sp->rows_field ? sp->rows_field : "weights_rows");
    return too_large(err, errlen,
                     "the response would be up to %zu bytes (%zu output numbers and %zu %s); the "
                     "limit is %zu (max_response_bytes): %s, average them over heads, or use a "
                     "more compact encoding (base64 or binary)",
                     est, r->plan.out_floats, wants ? r->plan.weight_floats : 0,
                     r->in.topk > 0 ? "top-k weights with as many indices"
                     : r->in.rows   ? "numbers of weight rows"
                                    : "attention weight numbers",
                     lim->max_response_bytes, hint);
}

http_error attend_plan(attend_req *r, attend_spec *sp, size_t overhead, const attend_limits *lim,
                       char *err, size_t errlen) {
    attn_input *in = &r->in;
    http_error e;
    r->model = sp->model;
    r->stream_min = lim->stream_min;
    in->causal = sp->causal;
    in->need_weights = sp->need_weights;
    in->average_heads = sp->average_heads;
    in->topk = sp->topk;
    in->rows = sp->rows;
    in->nrows = sp->nrows;
    if ((e = check_shapes(r, sp, lim, err, errlen)) || (e = check_forms(r, sp, err, errlen)) ||
        (e = judge_answer(r, sp, overhead, lim, err, errlen)))
        return e;
    /* the memory the inputs, the outputs and the answer's text will take,
     * before any of it is allocated */
    if (lim->reserve) {
        size_t in_bytes = 0, out_bytes = 0, t;
        const tensor_src *ts[5] = {&sp->q, &sp->k, &sp->v, &sp->kpm, &sp->mask};
        const bool present[5] = {true, sp->cross, sp->cross, sp->has_kpm, sp->has_mask};
        for (int i = 0; i < 5; i++)
            if (present[i] && !attn_add_size(in_bytes, tensor_fill_bytes(ts[i]), &in_bytes))
                in_bytes = (size_t)-1;
        /* the answer's text: a tensor written as it is read holds two
         * pieces at most, any other all its text. An answer with a binary
         * output writes all its text at once (its header's length must be
         * known before the first byte: v2_encode) */
        size_t text = overhead;
        const bool wants = attn_wants_weights(in), tk = in->topk > 0;
        const encoding *encs[3] = {r->enc_out, wants ? r->enc_weights : NULL,
                                   tk ? r->enc_index : NULL};
        const size_t counts[3] = {r->plan.out_floats, r->plan.weight_floats, r->plan.index_count};
        bool lazy = lim->stream_min > 0;
        for (int i = 0; i < 3; i++)
            if (encs[i] && encs[i]->raw) lazy = false;
        for (int i = 0; i < 3; i++) {
            if (!encs[i] || encs[i]->raw) continue;
            size_t est = encs[i]->estimate(counts[i], i == 2 ? 0 : r->precision, 4);
            text += lazy && est >= lim->stream_min ? 2 * ENC_LAZY_PIECE : est;
        }
        size_t tensors =
            r->plan.out_floats + (wants ? r->plan.weight_floats : 0) + r->plan.index_count;
        if (!attn_mul_size(tensors, sizeof(float), &out_bytes) ||
            !attn_add_size(out_bytes, text, &t))
            t = (size_t)-1;
        if (!lim->reserve(lim->reserve_ctx, in_bytes, false) ||
            !lim->reserve(lim->reserve_ctx, t, true))
            return budget_refusal(err, errlen, in_bytes, t);
    }
    /* now allocate and fill */
    if ((e = fill(r, &sp->q, (const void **)&in->query, err, errlen))) return e;
    if (sp->cross) {
        if ((e = fill(r, &sp->k, (const void **)&in->key, err, errlen)) ||
            (e = fill(r, &sp->v, (const void **)&in->value, err, errlen)))
            return e;
    } else {
        in->key = in->value = in->query;
    }
    if (sp->has_kpm) {
        if ((e = fill(r, &sp->kpm, &in->kpm, err, errlen))) return e;
        in->kpm_kind = sp->kpm.kind == TK_BOOL ? ATTN_MASK_BOOL : ATTN_MASK_FLOAT;
        in->kpm_batched = sp->kpm.rank == 2;
    }
    if (sp->has_mask) {
        if ((e = fill(r, &sp->mask, &in->attn_mask, err, errlen))) return e;
        in->mask_kind = sp->mask.kind == TK_BOOL ? ATTN_MASK_BOOL : ATTN_MASK_FLOAT;
        in->mask_dims = sp->mask.rank;
    }
    /* The inputs are bounded by the body size; the engine's working memory
     * is not, so check it before allocating the outputs. */
    char e2[ATTN_ERRLEN];
    attn_plan plan;
    attn_status st = attn_plan_input(r->model->w, in, lim->nworkers, &plan, e2, sizeof e2);
    if (st) {
        snprintf(err, errlen, "%s", e2);
        return http_error_from_status(st);
    }
    r->plan = plan; /* the same sizes as judged from the shapes, and the costs */
    size_t scratch = plan.scratch_bytes;
    if (scratch > lim->max_compute_bytes)
        return too_large(err, errlen,
                         "the computation would need %zu bytes of working memory; the limit is "
                         "%zu (max_compute_bytes)",
                         scratch, lim->max_compute_bytes);
    if (lim->reserve && !lim->reserve(lim->reserve_ctx, scratch, false))
        return budget_refusal(err, errlen, scratch, 0);
    /* request-sized blocks, kept for the next request's when freed
     * (hugemem.h; attend_free, or the answer that takes them over) */
    r->out = mem_reuse_alloc(r->plan.out_floats * sizeof(float));
    if (attn_wants_weights(in)) r->weights = mem_reuse_alloc(r->plan.weight_floats * sizeof(float));
    if (in->topk > 0) r->indices = mem_reuse_alloc(r->plan.index_count * sizeof(int32_t));
    if (!r->out || (attn_wants_weights(in) && !r->weights) || (in->topk > 0 && !r->indices)) {
        snprintf(err, errlen, "not enough memory for the result now");
        return HERR_OVERLOADED;
    }
    return HERR_NONE;
}

/* --------------------------------------------------------------- compute */

http_error attend_compute(attend_req *r, attn_pool *pool, char *err, size_t errlen) {
    char e2[ATTN_ERRLEN];
    const attn_result res = {r->out, r->weights, r->indices};
    attn_status st = attn_run(r->model->w, &r->in, &res, pool, e2, sizeof e2);
    if (st) {
        snprintf(err, errlen, "%s", e2);
        return http_error_from_status(st);
    }
    return attend_check_outputs(r, err, errlen);
}

http_error attend_check_outputs(const attend_req *r, char *err, size_t errlen) {
    /* Finite inputs can still overflow float32 inside the scores (say,
     * embeddings of 1e30): JSON cannot carry the result, so say why. */
    const char *qname = r->in.key != r->in.query ? "query" : "embeddings";
    size_t i = tensor_first_nonfinite(r->out, r->plan.out_floats);
    if (i < r->plan.out_floats)
        return invalid(err, errlen,
                       "%s: the values are too large: attention overflows float32 "
                       "(output element %zu is not finite)",
                       qname, i);
    if (r->weights &&
        tensor_first_nonfinite(r->weights, r->plan.weight_floats) < r->plan.weight_floats)
        return invalid(err, errlen,
                       "%s: the values are too large: attention scores overflow float32", qname);
    /* A finite float32 output beyond the range of the datatype asked for
     * would be written as +-inf, which JSON cannot carry and which is no
     * value of the answer: refuse it in every encoding alike. (Weights and
     * top-k values lie in [0, 1].) */
    size_t bad = tensor_first_overflow(r->out, r->plan.out_floats, r->out_dtype);
    if (bad < r->plan.out_floats)
        return invalid(err, errlen,
                       "output_datatype: %s cannot hold the output (element %zu is %g, beyond %s's "
                       "range): ask for FP32",
                       tdtype_name(r->out_dtype), bad, (double)r->out[bad],
                       tdtype_name(r->out_dtype));
    return HERR_NONE;
}

/* ------------------------------------------------------ the /attend answer */

int attend_out_shape(const attend_req *r, size_t *d) {
    int rk = 0;
    if (r->batched) d[rk++] = (size_t)r->in.B;
    d[rk++] = (size_t)r->in.n;
    d[rk++] = (size_t)r->model->w->E;
    return rk;
}

int attend_weights_shape(const attend_req *r, size_t *d) {
    int rk = 0;
    if (r->batched) d[rk++] = (size_t)r->in.B;
    if (!r->in.average_heads) d[rk++] = (size_t)r->model->w->H;
    d[rk++] = (size_t)(r->in.rows ? r->in.nrows : r->in.n);
    d[rk++] = (size_t)(r->in.topk > 0 ? r->in.topk : r->plan.M);
    return rk;
}

http_error attend_encode(attend_req *r, answer *a, attn_pool *pool, char *err, size_t errlen) {
    const attn_input *in = &r->in;
    buf *out = &a->text;
    answer_init(a);
    a->lazy_min = r->stream_min;
    a->content_type = r->enc_out->content_type;
    buf_puts(out, "{\"model\":");
    buf_json_string(out, r->model->name);
    buf_puts(out, ",\"output\":");
    size_t d[4];
    enc_tensor t = {r->out, d, attend_out_shape(r, d), r->precision, true, ENC_F32};
    if (encoding_write(r->enc_out, a, pool, &t, true)) r->out = NULL;
    if (in->topk > 0) {
        buf_puts(out, ",\"attention_topk\":{\"indices\":");
        t = (enc_tensor){r->indices, d, attend_weights_shape(r, d), 0, true, ENC_I32};
        if (encoding_write(r->enc_index, a, pool, &t, true)) r->indices = NULL;
        buf_puts(out, ",\"values\":");
        t = (enc_tensor){r->weights, d, attend_weights_shape(r, d), r->precision, true, ENC_F32};
        if (encoding_write(r->enc_weights, a, pool, &t, true)) r->weights = NULL;
        buf_putc(out, '}');
    } else if (attn_wants_weights(in)) {
        buf_puts(out, ",\"attention_weights\":");
        t = (enc_tensor){r->weights, d, attend_weights_shape(r, d), r->precision, true, ENC_F32};
        if (encoding_write(r->enc_weights, a, pool, &t, true)) r->weights = NULL;
    }
    const char *keys[] = {",\"usage\":{\"batch\":", ",\"query_tokens\":", ",\"key_tokens\":",
                          ",\"attended_keys\":", ",\"heads\":"};
    const int vals[] = {in->B, in->n, in->m, r->plan.M, r->model->w->H}; /* all >= 0 */
    for (int i = 0; i < 5; i++) {
        buf_puts(out, keys[i]);
        buf_put_u64(out, (unsigned)vals[i]);
    }
    buf_puts(out, "}}");
    return attend_answer_done(r, a, err, errlen);
}

http_error attend_answer_done(const attend_req *r, answer *a, char *err, size_t errlen) {
    answer_seal(a);
    if (a->failed)
        return http_fail(HERR_OVERLOADED, err, errlen,
                         "not enough memory for a %zu-byte response now", r->response_estimate);
    return HERR_NONE;
}

void attend_free(attend_req *r) {
    for (int i = 0; i < 5; i++) free(r->own[i]);
    model_release(r->model);
    mem_reuse_free(r->out, r->plan.out_floats * sizeof(float));
    mem_reuse_free(r->weights, r->plan.weight_floats * sizeof(float));
    mem_reuse_free(r->indices, r->plan.index_count * sizeof(int32_t));
    free(r->rows);
    memset(r, 0, sizeof *r);
}
