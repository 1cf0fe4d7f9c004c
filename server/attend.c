/* attend.c - see attend.h.
 *
 * The file is divided as: tensor decoding (nested JSON arrays or base64
 * objects: probe the shape first, then fill once the limits allow it);
 * attend_decode, which validates the whole request; compute; encode. */
#include "attend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "numfmt.h"

#define FIELD_LIST                                                                                 \
    "model, embeddings, query, key, value, key_padding_mask, attn_mask, causal, "                  \
    "need_weights, average_heads, encoding_format, precision"

/* ---------------------------------------------------------------- tensors */

typedef enum { TK_FLOAT, TK_BOOL } tkind;

typedef struct tensor_src {
    const char *field; /* name for messages */
    const jv *v;
    bool is_mask; /* float masks may hold -inf (to remove a score) */
    bool is_b64;
    tkind kind;
    int rank;
    size_t dim[4];
    size_t count;    /* product of dim */
    const char *b64; /* is_b64: the base64 text */
    size_t b64len;
} tensor_src;

static void path_fmt(char *out, size_t n, const char *field, const size_t *idx, int depth) {
    int k = snprintf(out, n, "%s", field);
    for (int i = 0; i < depth && k > 0 && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, "[%zu]", idx[i]);
}

static const char *shape_str(char *out, size_t n, const size_t *dim, int rank) {
    int k = snprintf(out, n, "[");
    for (int i = 0; i < rank && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, i ? ",%zu" : "%zu", dim[i]);
    if ((size_t)k < n) snprintf(out + k, n - (size_t)k, "]");
    return out;
}

static http_error tensor_probe_b64(tensor_src *t, int min_rank, int max_rank, bool allow_bool,
                                   char *err, size_t errlen) {
    const jv *v = t->v, *dtype = NULL, *shape = NULL, *data = NULL;
    for (size_t i = 0; i < v->u.obj.len; i++) {
        const jv_member *mb = &v->u.obj.members[i];
        if (!strcmp(mb->key, "dtype"))
            dtype = &mb->value;
        else if (!strcmp(mb->key, "shape"))
            shape = &mb->value;
        else if (!strcmp(mb->key, "base64"))
            data = &mb->value;
        else {
            snprintf(err, errlen,
                     "%s: unknown key '%.64s' in a tensor object (expected dtype, shape, base64)",
                     t->field, mb->key);
            return HERR_INVALID_REQUEST;
        }
    }
    if (!dtype || !shape || !data) {
        snprintf(err, errlen,
                 "%s: a tensor object needs \"dtype\", \"shape\" and \"base64\"; %s is missing",
                 t->field,
                 !dtype   ? "dtype"
                 : !shape ? "shape"
                          : "base64");
        return HERR_INVALID_REQUEST;
    }
    if (dtype->type != JV_STRING ||
        (strcmp(dtype->u.str.s, "float32") && (!allow_bool || strcmp(dtype->u.str.s, "bool")))) {
        snprintf(err, errlen, "%s.dtype: expected %s", t->field,
                 allow_bool ? "\"float32\" or \"bool\"" : "\"float32\"");
        return HERR_INVALID_REQUEST;
    }
    t->kind = strcmp(dtype->u.str.s, "bool") ? TK_FLOAT : TK_BOOL;
    if (shape->type != JV_ARRAY || !shape->u.arr.d || shape->u.arr.len < (size_t)min_rank ||
        shape->u.arr.len > (size_t)max_rank) {
        snprintf(err, errlen, "%s.shape: expected an array of %d to %d positive integers", t->field,
                 min_rank, max_rank);
        return HERR_INVALID_REQUEST;
    }
    t->rank = (int)shape->u.arr.len;
    for (int i = 0; i < t->rank; i++) {
        double d = shape->u.arr.d[i];
        if (!(d >= 1 && d <= 1e15 && d == floor(d))) {
            snprintf(err, errlen, "%s.shape[%d]: expected a positive integer", t->field, i);
            return HERR_INVALID_REQUEST;
        }
        t->dim[i] = (size_t)d;
    }
    if (data->type != JV_STRING) {
        snprintf(err, errlen, "%s.base64: expected a string", t->field);
        return HERR_INVALID_REQUEST;
    }
    t->is_b64 = true;
    t->b64 = data->u.str.s;
    t->b64len = data->u.str.len;
    return HERR_NONE;
}

/* Find rank, shape and kind from the first element at every level. */
static http_error tensor_probe(tensor_src *t, const char *field, const jv *v, int min_rank,
                               int max_rank, bool allow_bool, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->field = field;
    t->v = v;
    char sh[96];
    http_error e = HERR_NONE;
    if (v->type == JV_OBJECT) {
        e = tensor_probe_b64(t, min_rank, max_rank, allow_bool, err, errlen);
    } else if (v->type != JV_ARRAY) {
        snprintf(err, errlen, "%s: expected a nested array of numbers or a tensor object, got %s",
                 field, jv_type_name(v->type));
        return HERR_INVALID_REQUEST;
    } else {
        const jv *cur = v;
        size_t idx[4] = {0};
        for (;;) {
            if (cur->type != JV_ARRAY) break;
            if (t->rank == max_rank) {
                char p[128];
                path_fmt(p, sizeof p, field, idx, t->rank);
                snprintf(err, errlen, "%s: too many dimensions (expected %d to %d); %s is an array",
                         field, min_rank, max_rank, p);
                return HERR_INVALID_REQUEST;
            }
            if (cur->u.arr.len == 0) {
                char p[128];
                path_fmt(p, sizeof p, field, idx, t->rank);
                snprintf(err, errlen, "%s is empty", p);
                return HERR_INVALID_REQUEST;
            }
            t->dim[t->rank++] = cur->u.arr.len;
            if (cur->u.arr.f) { /* packed numbers: this is the innermost level */
                t->kind = TK_FLOAT;
                cur = NULL;
                break;
            }
            cur = &cur->u.arr.items[0];
        }
        if (cur) { /* an element that is not an array: a scalar leaf */
            if (cur->type == JV_NUMBER) {
                t->kind = TK_FLOAT; /* a row mixing in non-numbers: the fill names the culprit */
            } else if ((cur->type == JV_TRUE || cur->type == JV_FALSE) && allow_bool) {
                t->kind = TK_BOOL;
            } else {
                char p[128];
                size_t zero[4] = {0};
                path_fmt(p, sizeof p, field, zero, t->rank);
                snprintf(err, errlen, "%s is %s; expected a number%s", p, jv_type_name(cur->type),
                         allow_bool ? " or a boolean" : "");
                return HERR_INVALID_REQUEST;
            }
        }
        if (t->rank < min_rank) {
            snprintf(err, errlen, "%s: expected %d to %d dimensions, got %d (shape %s)", field,
                     min_rank, max_rank, t->rank, shape_str(sh, sizeof sh, t->dim, t->rank));
            return HERR_INVALID_REQUEST;
        }
    }
    if (!e && !attn_mul_sizes(t->dim, (size_t)t->rank, &t->count)) {
        snprintf(err, errlen, "%s: shape %s is too large", field,
                 shape_str(sh, sizeof sh, t->dim, t->rank));
        return HERR_PAYLOAD_TOO_LARGE;
    }
    return e;
}

/* Walk nested arrays checking every length against the probed shape. */
static http_error tensor_fill_rec(const tensor_src *t, const jv *a, int depth, size_t *idx,
                                  char *dst, size_t *pos, char *err, size_t errlen) {
    char p[160];
    if (a->type != JV_ARRAY) {
        path_fmt(p, sizeof p, t->field, idx, depth);
        snprintf(err, errlen, "%s is %s; expected an array of %zu", p, jv_type_name(a->type),
                 t->dim[depth]);
        return HERR_INVALID_REQUEST;
    }
    if (a->u.arr.len != t->dim[depth]) {
        char q[160];
        size_t zero[4] = {0};
        path_fmt(p, sizeof p, t->field, idx, depth);
        path_fmt(q, sizeof q, t->field, zero, depth);
        snprintf(err, errlen, "%s has %zu elements; %s has %zu (arrays must not be ragged)", p,
                 a->u.arr.len, q, t->dim[depth]);
        return HERR_INVALID_REQUEST;
    }
    if (depth < t->rank - 1) {
        if (a->u.arr.f) {
            path_fmt(p, sizeof p, t->field, idx, depth);
            snprintf(err, errlen, "%s holds numbers; expected arrays (shape must not be ragged)",
                     p);
            return HERR_INVALID_REQUEST;
        }
        for (size_t i = 0; i < a->u.arr.len; i++) {
            idx[depth] = i;
            http_error e =
                tensor_fill_rec(t, &a->u.arr.items[i], depth + 1, idx, dst, pos, err, errlen);
            if (e) return e;
        }
        return HERR_NONE;
    }
    size_t len = a->u.arr.len;
    if (t->kind == TK_FLOAT) {
        if (!a->u.arr.f) { /* not all numbers: name the first that is not */
            for (size_t i = 0; i < len; i++)
                if (a->u.arr.items[i].type != JV_NUMBER) {
                    idx[depth] = i;
                    path_fmt(p, sizeof p, t->field, idx, depth + 1);
                    snprintf(err, errlen, "%s is %s; expected a number", p,
                             jv_type_name(a->u.arr.items[i].type));
                    return HERR_INVALID_REQUEST;
                }
        }
        const float *f = a->u.arr.f;
        for (size_t i = 0; i < len; i++)
            if (!isfinite(f[i]) && !(t->is_mask && f[i] < 0)) {
                idx[depth] = i;
                path_fmt(p, sizeof p, t->field, idx, depth + 1);
                snprintf(err, errlen, "%s = %g is outside the float32 range", p, a->u.arr.d[i]);
                return HERR_INVALID_REQUEST;
            }
        memcpy(dst + *pos * sizeof(float), f, len * sizeof(float));
    } else {
        for (size_t i = 0; i < len; i++) {
            jv_type ty = a->u.arr.f ? JV_NUMBER : a->u.arr.items[i].type;
            if (ty != JV_TRUE && ty != JV_FALSE) {
                idx[depth] = i;
                path_fmt(p, sizeof p, t->field, idx, depth + 1);
                snprintf(err, errlen,
                         "%s is %s; this mask holds booleans (do not mix them with numbers)", p,
                         jv_type_name(ty));
                return HERR_INVALID_REQUEST;
            }
            ((uint8_t *)dst)[*pos + i] = ty == JV_TRUE;
        }
    }
    *pos += len;
    return HERR_NONE;
}

/* Allocate and fill; the caller has checked the shape against the limits. */
static http_error tensor_fill(const tensor_src *t, void **out, char *err, size_t errlen) {
    size_t esize = t->kind == TK_FLOAT ? sizeof(float) : 1, bytes, cap;
    if (!attn_mul_size(t->count, esize, &bytes)) return HERR_PAYLOAD_TOO_LARGE;
    /* base64 text of the right length but without '=' padding decodes to up
     * to 2 bytes more than the tensor holds: room for what the decoder may
     * write, then the decoded size is checked. */
    cap = t->is_b64 ? base64_decoded_max(t->b64len) : bytes;
    if (cap < bytes) cap = bytes;
    char *dst = malloc(cap ? cap : 1);
    if (!dst) {
        snprintf(err, errlen, "%s: not enough memory for %zu bytes now", t->field, bytes);
        return HERR_OVERLOADED;
    }
    http_error e = HERR_NONE;
    if (t->is_b64) {
        char sh[96];
        if (t->b64len != base64_encoded_len(bytes)) {
            size_t got = t->b64len / 4 * 3;
            snprintf(err, errlen,
                     "%s.base64: %zu characters (about %zu bytes); shape %s of %s needs %zu bytes "
                     "(%zu base64 characters)",
                     t->field, t->b64len, got, shape_str(sh, sizeof sh, t->dim, t->rank),
                     t->kind == TK_FLOAT ? "float32" : "bool", bytes, base64_encoded_len(bytes));
            e = HERR_INVALID_REQUEST;
        } else {
            size_t bad = 0;
            size_t n = base64_decode(dst, t->b64, t->b64len, &bad);
            if (n == (size_t)-1) {
                snprintf(err, errlen, "%s.base64: invalid base64 at character %zu", t->field, bad);
                e = HERR_INVALID_REQUEST;
            } else if (n != bytes) {
                snprintf(err, errlen,
                         "%s.base64: decodes to %zu bytes; shape %s needs %zu (is the '=' padding "
                         "missing?)",
                         t->field, n, shape_str(sh, sizeof sh, t->dim, t->rank), bytes);
                e = HERR_INVALID_REQUEST;
            } else if (t->kind == TK_FLOAT) {
                const float *f = (const float *)dst;
                for (size_t i = 0; i < t->count; i++)
                    if (!isfinite(f[i]) && !(t->is_mask && f[i] < 0)) {
                        snprintf(err, errlen, "%s: element %zu (flat index) is %s", t->field, i,
                                 t->is_mask ? "NaN or +inf (a mask may hold -inf, not these)"
                                            : "not finite");
                        e = HERR_INVALID_REQUEST;
                        break;
                    }
            } else {
                for (size_t i = 0; i < t->count; i++) ((uint8_t *)dst)[i] = dst[i] != 0;
            }
        }
    } else {
        size_t idx[4] = {0}, pos = 0;
        e = tensor_fill_rec(t, t->v, 0, idx, dst, &pos, err, errlen);
    }
    if (e) {
        free(dst);
        return e;
    }
    *out = dst;
    return HERR_NONE;
}

/* ---------------------------------------------------------------- decode */

static http_error want_bool(const jv *v, const char *field, bool *out, char *err, size_t errlen) {
    if (!v || v->type == JV_NULL) return HERR_NONE;
    if (v->type != JV_TRUE && v->type != JV_FALSE) {
        snprintf(err, errlen, "%s: expected true or false, got %s", field, jv_type_name(v->type));
        return HERR_INVALID_REQUEST;
    }
    *out = v->type == JV_TRUE;
    return HERR_NONE;
}

static http_error too_large(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static http_error too_large(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return HERR_PAYLOAD_TOO_LARGE;
}

/* Bytes of one encoded float: shortest is at most 15 characters
 * ("-1.17549435e-38") plus a separator. */
static size_t float_text_bytes(int precision) {
    return precision ? (size_t)precision + 8 : 16;
}

http_error attend_decode(attend_req *r, const char *body, size_t len, const registry *reg,
                         const attend_limits *lim, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    jdoc *doc = NULL;
    jdoc_limits jl = JDOC_LIMITS_DEFAULT;
    http_error e = HERR_NONE;
    char sh[96];
    jdoc_status js = jdoc_parse(body, len, &jl, &doc, err, errlen);
    if (js != JDOC_OK) return http_error_from_jdoc(js);
    const jv *root = jdoc_root(doc);
    const jv *f_model = NULL, *f_emb = NULL, *f_q = NULL, *f_k = NULL, *f_v = NULL, *f_kpm = NULL,
             *f_mask = NULL, *f_causal = NULL, *f_nw = NULL, *f_avg = NULL, *f_enc = NULL,
             *f_prec = NULL;
    if (root->type != JV_OBJECT) {
        snprintf(err, errlen, "request body: expected a JSON object, got %s",
                 jv_type_name(root->type));
        e = HERR_INVALID_REQUEST;
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
                          : !strcmp(k, "encoding_format")  ? &f_enc
                          : !strcmp(k, "precision")        ? &f_prec
                                                           : NULL;
        if (!slot) {
            snprintf(err, errlen, "unknown field '%.64s' (known: " FIELD_LIST ")", k);
            e = HERR_INVALID_REQUEST;
            goto out;
        }
        *slot = mb->value.type == JV_NULL ? NULL : &mb->value;
    }

    /* model */
    if (f_model && f_model->type != JV_STRING) {
        snprintf(err, errlen, "model: expected a string, got %s", jv_type_name(f_model->type));
        e = HERR_INVALID_REQUEST;
        goto out;
    }
    r->model = registry_find(reg, f_model ? f_model->u.str.s : NULL);
    if (!r->model) {
        registry_missing_message(reg, f_model ? f_model->u.str.s : NULL, err, errlen);
        e = f_model ? HERR_MODEL_NOT_FOUND : HERR_INVALID_REQUEST;
        goto out;
    }
    const attn_weights *w = r->model->w;
    const char *mname = r->model->name;

    /* flags */
    attn_input *in = &r->in;
    in->need_weights = true;
    if ((e = want_bool(f_causal, "causal", &in->causal, err, errlen)) ||
        (e = want_bool(f_nw, "need_weights", &in->need_weights, err, errlen)) ||
        (e = want_bool(f_avg, "average_heads", &in->average_heads, err, errlen)))
        goto out;
    if (f_enc) {
        if (f_enc->type != JV_STRING ||
            (strcmp(f_enc->u.str.s, "float") && strcmp(f_enc->u.str.s, "base64"))) {
            snprintf(err, errlen, "encoding_format: expected \"float\" or \"base64\"");
            e = HERR_INVALID_REQUEST;
            goto out;
        }
        r->base64 = !strcmp(f_enc->u.str.s, "base64");
    }
    if (f_prec) {
        double d = f_prec->type == JV_NUMBER ? f_prec->u.num.d : 0;
        if (f_prec->type != JV_NUMBER || d != floor(d) || d < 1 || d > 9) {
            snprintf(err, errlen, "precision: expected an integer from 1 to 9");
            e = HERR_INVALID_REQUEST;
            goto out;
        }
        r->precision = (int)d;
    }

    /* inputs: shapes first, nothing allocated yet */
    tensor_src tq, tk, tv, tkpm, tmask;
    bool cross = f_q || f_k || f_v;
    if (cross && f_emb) {
        snprintf(err, errlen,
                 "embeddings: give either embeddings (self-attention) or query, key "
                 "and value (cross-attention), not both");
        e = HERR_INVALID_REQUEST;
        goto out;
    }
    if (!cross && !f_emb) {
        snprintf(err, errlen, "embeddings: required (or query, key and value for cross-attention)");
        e = HERR_INVALID_REQUEST;
        goto out;
    }
    if (cross && (!f_q || !f_k || !f_v)) {
        snprintf(err, errlen, "%s: required for cross-attention (query, key and value go together)",
                 !f_q   ? "query"
                 : !f_k ? "key"
                        : "value");
        e = HERR_INVALID_REQUEST;
        goto out;
    }
    const char *qname = cross ? "query" : "embeddings";
    if ((e = tensor_probe(&tq, qname, cross ? f_q : f_emb, 2, 3, false, err, errlen))) goto out;
    if (tq.dim[tq.rank - 1] != (size_t)w->E) {
        size_t zero[4] = {0};
        char p[64];
        path_fmt(p, sizeof p, qname, zero, tq.rank - 1);
        snprintf(err, errlen, "%s has %zu numbers; model '%s' expects %d (embed_dim)", p,
                 tq.dim[tq.rank - 1], mname, w->E);
        e = HERR_INVALID_REQUEST;
        goto out;
    }
    r->batched = tq.rank == 3;
    size_t B = r->batched ? tq.dim[0] : 1, n = tq.dim[tq.rank - 2], m = n;
    if (!cross && (w->kdim != w->E || w->vdim != w->E)) {
        snprintf(err, errlen,
                 "embeddings: model '%s' has kdim %d and vdim %d (not embed_dim %d): "
                 "send query, key and value",
                 mname, w->kdim, w->vdim, w->E);
        e = HERR_INVALID_REQUEST;
        goto out;
    }
    if (cross) {
        if ((e = tensor_probe(&tk, "key", f_k, 2, 3, false, err, errlen)) ||
            (e = tensor_probe(&tv, "value", f_v, 2, 3, false, err, errlen)))
            goto out;
        const tensor_src *kv[2] = {&tk, &tv};
        const int want[2] = {w->kdim, w->vdim};
        const char *wname[2] = {"kdim", "vdim"};
        for (int i = 0; i < 2; i++) {
            const tensor_src *t = kv[i];
            if (t->rank != tq.rank) {
                snprintf(err, errlen, "%s: has %d dimensions; query has %d", t->field, t->rank,
                         tq.rank);
                e = HERR_INVALID_REQUEST;
                goto out;
            }
            if (r->batched && t->dim[0] != B) {
                snprintf(err, errlen, "%s: batch of %zu; query has %zu", t->field, t->dim[0], B);
                e = HERR_INVALID_REQUEST;
                goto out;
            }
            if (t->dim[t->rank - 1] != (size_t)want[i]) {
                snprintf(err, errlen, "%s: rows have %zu numbers; model '%s' expects %d (%s)",
                         t->field, t->dim[t->rank - 1], mname, want[i], wname[i]);
                e = HERR_INVALID_REQUEST;
                goto out;
            }
        }
        m = tk.dim[tk.rank - 2];
        if (tv.dim[tv.rank - 2] != m) {
            snprintf(err, errlen, "value: %zu tokens; key has %zu", tv.dim[tv.rank - 2], m);
            e = HERR_INVALID_REQUEST;
            goto out;
        }
    }
    if (B > (size_t)lim->max_batch) {
        e = too_large(err, errlen, "%s: batch of %zu sequences; the limit is %ld (max_batch)",
                      qname, B, lim->max_batch);
        goto out;
    }
    if (n > (size_t)lim->max_tokens || m > (size_t)lim->max_tokens) {
        e = too_large(err, errlen, "%s: %zu tokens; the limit is %ld (max_tokens)",
                      n > (size_t)lim->max_tokens ? qname : "key", n > m ? n : m, lim->max_tokens);
        goto out;
    }
    in->B = (int)B;
    in->n = (int)n;
    in->m = (int)m;
    r->M = attn_key_positions(w, (int)m);

    /* masks */
    if (f_kpm) {
        if ((e = tensor_probe(&tkpm, "key_padding_mask", f_kpm, 1, 2, true, err, errlen))) goto out;
        tkpm.is_mask = true;
        bool ok = tkpm.dim[tkpm.rank - 1] == m && (tkpm.rank == 1 || tkpm.dim[0] == B);
        if (!ok) {
            snprintf(err, errlen, "key_padding_mask: shape %s; expected [%zu] or [%zu,%zu]",
                     shape_str(sh, sizeof sh, tkpm.dim, tkpm.rank), m, B, m);
            e = HERR_INVALID_REQUEST;
            goto out;
        }
    }
    if (f_mask) {
        if ((e = tensor_probe(&tmask, "attn_mask", f_mask, 2, 4, true, err, errlen))) goto out;
        tmask.is_mask = true;
        const size_t *d = tmask.dim;
        int rk = tmask.rank;
        bool ok = d[rk - 2] == n && d[rk - 1] == m && (rk < 3 || d[rk - 3] == (size_t)w->H) &&
                  (rk < 4 || d[0] == B);
        if (!ok) {
            snprintf(err, errlen,
                     "attn_mask: shape %s; expected [%zu,%zu], [%d,%zu,%zu] or [%zu,%d,%zu,%zu]",
                     shape_str(sh, sizeof sh, d, rk), n, m, w->H, n, m, B, w->H, n, m);
            e = HERR_INVALID_REQUEST;
            goto out;
        }
    }

    /* what the answer and the work would cost, before allocating either */
    size_t fb = r->base64 ? 4 : float_text_bytes(r->precision), est = 4096, tmp;
    if (!attn_output_sizes(w, in, &r->out_floats, &r->weight_floats) ||
        !attn_add_size(r->out_floats, r->weight_floats, &tmp) || !attn_mul_size(tmp, fb, &tmp) ||
        !attn_add_size(est, r->base64 ? tmp / 3 * 4 + 8 : tmp, &est)) {
        e = too_large(err, errlen, "the response would be larger than the address space");
        goto out;
    }
    r->response_estimate = est;
    if (est > lim->max_response_bytes) {
        e = too_large(err, errlen,
                      "the response would be up to %zu bytes (%zu output and %zu attention weight "
                      "numbers); the limit is %zu (max_response_bytes): set need_weights to false, "
                      "average_heads to true, or encoding_format to \"base64\"",
                      est, r->out_floats, r->weight_floats, lim->max_response_bytes);
        goto out;
    }
    /* now allocate and fill */
    if ((e = tensor_fill(&tq, (void **)&r->query, err, errlen))) goto out;
    if (cross && ((e = tensor_fill(&tk, (void **)&r->key, err, errlen)) ||
                  (e = tensor_fill(&tv, (void **)&r->value, err, errlen))))
        goto out;
    if (f_kpm) {
        if ((e = tensor_fill(&tkpm, &r->kpm, err, errlen))) goto out;
        in->kpm_kind = tkpm.kind == TK_BOOL ? ATTN_MASK_BOOL : ATTN_MASK_FLOAT;
        in->kpm = r->kpm;
        in->kpm_batched = tkpm.rank == 2;
    }
    if (f_mask) {
        if ((e = tensor_fill(&tmask, &r->mask, err, errlen))) goto out;
        in->mask_kind = tmask.kind == TK_BOOL ? ATTN_MASK_BOOL : ATTN_MASK_FLOAT;
        in->attn_mask = r->mask;
        in->mask_dims = tmask.rank;
    }
    in->query = r->query;
    in->key = cross ? r->key : r->query;
    in->value = cross ? r->value : r->query;
    /* The inputs are bounded by the body size; the engine's working memory
     * is not, so check it before allocating the outputs. */
    char e2[ATTN_ERRLEN];
    attn_status st = attn_input_check(w, in, e2, sizeof e2);
    if (st) {
        snprintf(err, errlen, "%s", e2);
        e = http_error_from_status(st);
        goto out;
    }
    size_t scratch = attn_forward_scratch_bytes(w, in, lim->nworkers);
    if (scratch == 0 || scratch > lim->max_compute_bytes) {
        e = too_large(err, errlen,
                      "the computation would need %zu bytes of working memory; the limit is %zu "
                      "(max_compute_bytes)",
                      scratch, lim->max_compute_bytes);
        goto out;
    }
    r->out = malloc(r->out_floats * sizeof(float));
    if (in->need_weights)
        r->weights = malloc((r->weight_floats ? r->weight_floats : 1) * sizeof(float));
    if (!r->out || (in->need_weights && !r->weights)) {
        snprintf(err, errlen, "not enough memory for the result now");
        e = HERR_OVERLOADED;
        goto out;
    }
out:
    jdoc_free(doc);
    if (e) attend_free(r);
    return e;
}

/* --------------------------------------------------------------- compute */

http_error attend_compute(attend_req *r, attn_pool *pool, char *err, size_t errlen) {
    char e2[ATTN_ERRLEN];
    attn_status st = attn_forward(r->model->w, &r->in, r->out, r->weights, pool, e2, sizeof e2);
    if (st) {
        snprintf(err, errlen, "%s", e2);
        return http_error_from_status(st);
    }
    /* Finite inputs can still overflow float32 inside the scores (say,
     * embeddings of 1e30): JSON cannot carry the result, so say why. */
    for (size_t i = 0; i < r->out_floats; i++)
        if (!isfinite(r->out[i])) {
            snprintf(err, errlen,
                     "%s: the values are too large: attention overflows float32 "
                     "(output element %zu is not finite)",
                     r->key ? "query" : "embeddings", i);
            return HERR_INVALID_REQUEST;
        }
    if (r->weights)
        for (size_t i = 0; i < r->weight_floats; i++)
            if (!isfinite(r->weights[i])) {
                snprintf(err, errlen,
                         "%s: the values are too large: attention scores overflow float32",
                         r->key ? "query" : "embeddings");
                return HERR_INVALID_REQUEST;
            }
    return HERR_NONE;
}

/* ---------------------------------------------------------------- encode */

static void encode_shape(buf *out, const size_t *dim, int rank) {
    buf_putc(out, '[');
    for (int i = 0; i < rank; i++) buf_printf(out, i ? ",%zu" : "%zu", dim[i]);
    buf_putc(out, ']');
}

/* Nested arrays of dim[0..rank) from data, innermost rows written straight
 * into reserved space. */
static void encode_floats(buf *out, const float *data, const size_t *dim, int rank, int precision) {
    size_t rows = 1, len = dim[rank - 1];
    for (int i = 0; i < rank - 1; i++) rows *= dim[i];
    for (size_t r = 0; r < rows; r++) {
        /* open brackets for every level that starts at this row */
        size_t k = r;
        int opens = 1;
        for (int i = rank - 2; i >= 0 && k % dim[i] == 0; i--, opens++) k /= dim[i];
        if (r == 0) opens = rank;
        if (r) buf_putc(out, ',');
        for (int i = 1; i < opens; i++) buf_putc(out, '[');
        buf_putc(out, '[');
        char *p = buf_reserve(out, len * (FMT_F32_MAX + 1));
        if (!p) return;
        char *s = p;
        const float *row = data + r * len;
        for (size_t j = 0; j < len; j++) {
            if (j) *s++ = ',';
            s += precision ? fmt_f32_digits(s, row[j], precision) : fmt_f32_shortest(s, row[j]);
        }
        buf_commit(out, (size_t)(s - p));
        buf_putc(out, ']');
        /* close every level that ends at this row */
        k = r + 1;
        for (int i = rank - 2; i >= 0 && k % dim[i] == 0; i--) {
            buf_putc(out, ']');
            k /= dim[i];
        }
    }
}

static void encode_tensor(buf *out, const attend_req *r, const float *data, const size_t *dim,
                          int rank) {
    if (r->base64) {
        size_t count = 1;
        for (int i = 0; i < rank; i++) count *= dim[i];
        buf_puts(out, "{\"dtype\":\"float32\",\"shape\":");
        encode_shape(out, dim, rank);
        buf_puts(out, ",\"base64\":\"");
        size_t bytes = count * sizeof(float), n64 = base64_encoded_len(bytes);
        char *p = buf_reserve(out, n64);
        if (!p) return;
        /* float32 little-endian: this host's order (checked at build) */
        buf_commit(out, base64_encode(p, data, bytes));
        buf_puts(out, "\"}");
    } else {
        encode_floats(out, data, dim, rank, r->precision);
    }
}

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "base64 tensors are little-endian float32; add a byte swap for this host");

http_error attend_encode(const attend_req *r, buf *out, char *err, size_t errlen) {
    const attn_weights *w = r->model->w;
    const attn_input *in = &r->in;
    out->max = r->response_estimate + 4096;
    /* One allocation of the (over-)estimate instead of doubling and copying
     * tens of MB; pages that are never written cost nothing. */
    if (!buf_reserve(out, r->response_estimate)) {
        snprintf(err, errlen, "not enough memory for a %zu-byte response now",
                 r->response_estimate);
        return HERR_OVERLOADED;
    }
    buf_puts(out, "{\"model\":");
    buf_json_string(out, r->model->name);
    buf_puts(out, ",\"output\":");
    size_t d[4];
    int rk = 0;
    if (r->batched) d[rk++] = (size_t)in->B;
    d[rk++] = (size_t)in->n;
    d[rk++] = (size_t)w->E;
    encode_tensor(out, r, r->out, d, rk);
    if (in->need_weights) {
        buf_puts(out, ",\"attention_weights\":");
        rk = 0;
        if (r->batched) d[rk++] = (size_t)in->B;
        if (!in->average_heads) d[rk++] = (size_t)w->H;
        d[rk++] = (size_t)in->n;
        d[rk++] = (size_t)r->M;
        encode_tensor(out, r, r->weights, d, rk);
    }
    buf_printf(out,
               ",\"usage\":{\"batch\":%d,\"query_tokens\":%d,\"key_tokens\":%d,"
               "\"attended_keys\":%d,\"heads\":%d}}",
               in->B, in->n, in->m, r->M, w->H);
    if (out->failed) {
        snprintf(err, errlen, "response: out of memory or past max_response_bytes while encoding");
        return HERR_OVERLOADED;
    }
    return HERR_NONE;
}

void attend_free(attend_req *r) {
    free(r->query);
    free(r->key);
    free(r->value);
    free(r->kpm);
    free(r->mask);
    free(r->out);
    free(r->weights);
    memset(r, 0, sizeof *r);
}
