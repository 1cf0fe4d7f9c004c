/* tensor.c - see tensor.h.
 *
 * The file is divided as: datatypes and their conversions; probing (the
 * shape, nothing allocated) for /attend's nested arrays and base64 objects
 * and for v2's typed tensors; filling (every element checked) for each form.
 */
#include "tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "mem.h"
#include "numfmt.h"
#include "safetensors.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "wire tensors are little-endian; add a byte swap for this host");

/* ------------------------------------------------------------- datatypes */

static const struct {
    const char *name;
    size_t size;
} dtypes[TD_COUNT] = {
#define X(name, text, size) {text, size},
    TENSOR_DTYPES(X)
#undef X
};

const char *tdtype_name(tdtype t) {
    return (unsigned)t < TD_COUNT ? dtypes[t].name : "?";
}

size_t tdtype_size(tdtype t) {
    return (unsigned)t < TD_COUNT ? dtypes[t].size : 0;
}

int tdtype_parse(const char *s) {
    for (int i = 0; i < TD_COUNT; i++)
        if (!strcmp(s, dtypes[i].name)) return i;
    return -1;
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* float32 to bfloat16, round to nearest even (NaN kept a NaN). */
static uint16_t f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);
    u += 0x7fffu + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}

/* float32 to IEEE half, round to nearest even; overflow to inf, underflow
 * through the subnormals to zero. */
static uint16_t f32_to_f16(float x) {
    uint32_t u = f32_bits(x), sign = u >> 16 & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        /* the value in units of 2^-24, rounded to nearest even */
        float v = bits_f32(a) * 16777216.0f; /* exact: a power-of-two scaling */
        uint32_t q = (uint32_t)v;
        float frac = v - (float)q;
        if (frac > 0.5f || (frac == 0.5f && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + (a >> 13 & 1); /* round the 13 dropped bits to even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

void tensor_round(float *x, size_t count, tdtype dt) {
    if (dt == TD_BF16)
        for (size_t i = 0; i < count; i++) x[i] = bits_f32((uint32_t)f32_to_bf16(x[i]) << 16);
    else if (dt == TD_FP16)
        for (size_t i = 0; i < count; i++) x[i] = st_f16_to_f32(f32_to_f16(x[i]));
}

size_t tensor_first_nonfinite(const float *x, size_t count) {
    enum { CHUNK = 256 };
    size_t i = 0;
    for (; i + CHUNK <= count; i += CHUNK) {
        uint32_t bad = 0; /* exponent all ones: inf or NaN */
        for (size_t l = 0; l < CHUNK; l++) {
            uint32_t u;
            memcpy(&u, x + i + l, sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (bad) break; /* the element is in this chunk: the loop below finds it */
    }
    for (; i < count; i++)
        if (!isfinite(x[i])) return i;
    return count;
}

size_t tensor_first_overflow(const float *x, size_t count, tdtype dt) {
    if (dt != TD_FP16 && dt != TD_BF16) return count;
    for (size_t i = 0; i < count; i++) {
        uint16_t h = dt == TD_BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
        if ((h & 0x7fff) == (dt == TD_BF16 ? 0x7f80 : 0x7c00) && isfinite(x[i])) return i;
    }
    return count;
}

size_t tensor_pack(void *dst, const float *src, size_t count, tdtype dt) {
    unsigned char *o = dst;
    if (dt == TD_FP32) {
        if ((const void *)src != dst) memmove(dst, src, count * 4);
        return count * 4;
    }
    /* front to back: element i's 2 bytes never overtake element i's 4 */
    for (size_t i = 0; i < count; i++) {
        float x;
        memcpy(&x, src + i, sizeof x);
        uint16_t h = dt == TD_BF16 ? f32_to_bf16(x) : f32_to_f16(x);
        memcpy(o + 2 * i, &h, 2);
    }
    return count * 2;
}

/* Element i of raw bytes of type dt, as float32 (FP64 beyond the float
 * range becomes +-inf, refused by the caller's finiteness check). */
static float raw_f32(const unsigned char *p, size_t i, tdtype dt) {
    switch (dt) {
    case TD_FP32: {
        float x;
        memcpy(&x, p + 4 * i, 4);
        return x;
    }
    case TD_FP16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return st_f16_to_f32(h);
    }
    case TD_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return bits_f32((uint32_t)h << 16);
    }
    case TD_FP64: {
        double d;
        memcpy(&d, p + 8 * i, 8);
        return isfinite(d) && fabs(d) > 3.4028234663852886e38 ? (d > 0 ? INFINITY : -INFINITY)
                                                              : (float)d;
    }
    default: return p[i] ? 1.0f : 0.0f;
    }
}

/* --------------------------------------------------------------- probing */

static void path_fmt(char *out, size_t n, const char *field, const size_t *idx, int depth) {
    int k = snprintf(out, n, "%s", field);
    for (int i = 0; i < depth && k > 0 && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, "[%zu]", idx[i]);
}

const char *tensor_shape_str(char *out, size_t n, const size_t *dim, int rank) {
    int k = snprintf(out, n, "[");
    for (int i = 0; i < rank && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, i ? ",%zu" : "%zu", dim[i]);
    if ((size_t)k < n) snprintf(out + k, n - (size_t)k, "]");
    return out;
}

/* A tensor's "shape": 1 to 4 positive integers, rank within [min, max]. */
static http_error parse_shape(tensor_src *t, const jv *shape, int min_rank, int max_rank, char *err,
                              size_t errlen) {
    if (!shape || shape->type != JV_ARRAY || !shape->u.arr.d ||
        shape->u.arr.len < (size_t)min_rank || shape->u.arr.len > (size_t)max_rank)
        return http_fail(HERR_INVALID_REQUEST, err, errlen,
                         "%s.shape: expected an array of %d to %d positive integers", t->field,
                         min_rank, max_rank);
    t->rank = (int)shape->u.arr.len;
    for (int i = 0; i < t->rank; i++) {
        double d = shape->u.arr.d[i];
        if (!(d >= 1 && d <= 1e15 && d == floor(d)))
            return http_fail(HERR_INVALID_REQUEST, err, errlen,
                             "%s.shape[%d]: expected a positive integer, got %g", t->field, i, d);
        t->dim[i] = (size_t)d;
    }
    return HERR_NONE;
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
    http_error e = parse_shape(t, shape, min_rank, max_rank, err, errlen);
    if (e) return e;
    if (data->type != JV_STRING) {
        snprintf(err, errlen, "%s.base64: expected a string", t->field);
        return HERR_INVALID_REQUEST;
    }
    t->src = TS_BASE64;
    t->b64 = data->u.str.s;
    t->b64len = data->u.str.len;
    return HERR_NONE;
}

/* Find rank, shape and kind from the first element at every level. */
http_error tensor_probe(tensor_src *t, const char *field, const jv *v, int min_rank, int max_rank,
                        bool allow_bool, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->field = field;
    t->v = v;
    t->src = TS_NESTED;
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
                     min_rank, max_rank, t->rank, tensor_shape_str(sh, sizeof sh, t->dim, t->rank));
            return HERR_INVALID_REQUEST;
        }
    }
    if (!e && !attn_mul_sizes(t->dim, (size_t)t->rank, &t->count)) {
        snprintf(err, errlen, "%s: shape %s is too large", field,
                 tensor_shape_str(sh, sizeof sh, t->dim, t->rank));
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

http_error tensor_probe_typed(tensor_src *t, const char *field, const jv *shape, tdtype dt,
                              const jv *v, const unsigned char *raw, size_t raw_len, int min_rank,
                              int max_rank, bool allow_bool, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->field = field;
    t->dtype = dt;
    t->kind = dt == TD_BOOL ? TK_BOOL : TK_FLOAT;
    char sh[96];
    if (dt == TD_INT32) { /* callers refuse it first; an answer's type only */
        snprintf(err, errlen, "%s: datatype INT32 is not an input type", field);
        return HERR_INVALID_REQUEST;
    }
    if (dt == TD_BOOL && !allow_bool) {
        snprintf(err, errlen, "%s: datatype BOOL is only for masks; send FP32, FP16, BF16 or FP64",
                 field);
        return HERR_INVALID_REQUEST;
    }
    http_error e = parse_shape(t, shape, min_rank, max_rank, err, errlen);
    if (e) return e;
    if (!attn_mul_sizes(t->dim, (size_t)t->rank, &t->count)) {
        snprintf(err, errlen, "%s: shape %s is too large", field,
                 tensor_shape_str(sh, sizeof sh, t->dim, t->rank));
        return HERR_PAYLOAD_TOO_LARGE;
    }
    if (raw) {
        size_t want;
        if (!attn_mul_size(t->count, tdtype_size(dt), &want) || want != raw_len) {
            snprintf(err, errlen,
                     "%s: binary_data_size is %zu bytes; shape %s of %s needs %zu x %zu bytes",
                     field, raw_len, tensor_shape_str(sh, sizeof sh, t->dim, t->rank),
                     tdtype_name(dt), t->count, tdtype_size(dt));
            return HERR_INVALID_REQUEST;
        }
        t->src = TS_RAW;
        t->raw = raw;
        t->raw_len = raw_len;
        return HERR_NONE;
    }
    if (!v || v->type != JV_ARRAY) {
        snprintf(err, errlen,
                 "%s.data: expected an array of %s (or binary_data_size in parameters)", field,
                 dt == TD_BOOL ? "booleans" : "numbers");
        return HERR_INVALID_REQUEST;
    }
    t->src = TS_JSON;
    t->v = v;
    return HERR_NONE;
}

/* ---------------------------------------------------------------- filling */

static http_error bad_element(const tensor_src *t, size_t i, float x, char *err, size_t errlen) {
    snprintf(err, errlen, "%s: element %zu (flat index) is %s", t->field, i,
             t->is_mask ? "NaN or +inf (a mask may hold -inf, not these)" : "not finite");
    (void)x;
    return HERR_INVALID_REQUEST;
}

/* TS_JSON: flatten the (flat or nested) data into dst, checking the count. */
static http_error json_fill_rec(const tensor_src *t, const jv *a, int depth, char *dst, size_t *pos,
                                char *err, size_t errlen) {
    if (depth > 8) {
        snprintf(err, errlen, "%s.data: nested deeper than 8 levels", t->field);
        return HERR_INVALID_REQUEST;
    }
    size_t len = a->u.arr.len;
    if (len > t->count - *pos) {
        snprintf(err, errlen, "%s.data: more than the %zu elements its shape holds", t->field,
                 t->count);
        return HERR_INVALID_REQUEST;
    }
    if (a->u.arr.f) { /* packed numbers */
        if (t->kind == TK_BOOL) {
            snprintf(err, errlen, "%s.data[%zu] is a number; datatype BOOL holds true or false",
                     t->field, *pos);
            return HERR_INVALID_REQUEST;
        }
        float *f = (float *)dst + *pos;
        for (size_t i = 0; i < len; i++) {
            double d = a->u.arr.d[i];
            float x = t->dtype == TD_FP64 ? raw_f32((const unsigned char *)&d, 0, TD_FP64)
                                          : a->u.arr.f[i];
            if (!isfinite(x) && !(t->is_mask && x < 0))
                return bad_element(t, *pos + i, x, err, errlen);
            f[i] = x;
        }
        if (t->dtype == TD_FP16 || t->dtype == TD_BF16) tensor_round(f, len, t->dtype);
        *pos += len;
        return HERR_NONE;
    }
    for (size_t i = 0; i < len; i++) {
        const jv *e = &a->u.arr.items[i];
        if (e->type == JV_ARRAY) {
            http_error r = json_fill_rec(t, e, depth + 1, dst, pos, err, errlen);
            if (r) return r;
            continue;
        }
        bool is_bool = e->type == JV_TRUE || e->type == JV_FALSE;
        if (t->kind == TK_BOOL && is_bool) {
            if (*pos >= t->count) break; /* counted below */
            ((uint8_t *)dst)[(*pos)++] = e->type == JV_TRUE;
            continue;
        }
        snprintf(err, errlen, "%s.data: element %zu is %s; datatype %s holds %s", t->field, *pos,
                 jv_type_name(e->type), tdtype_name(t->dtype),
                 t->kind == TK_BOOL ? "true or false" : "numbers");
        return HERR_INVALID_REQUEST;
    }
    if (*pos > t->count) {
        snprintf(err, errlen, "%s.data: more than the %zu elements its shape holds", t->field,
                 t->count);
        return HERR_INVALID_REQUEST;
    }
    return HERR_NONE;
}

static http_error raw_fill(const tensor_src *t, void **out, bool *owned, char *err, size_t errlen) {
    if (t->dtype == TD_BOOL) {
        for (size_t i = 0; i < t->count; i++)
            if (t->raw[i] > 1) {
                snprintf(err, errlen,
                         "%s: byte %zu is %u; a BOOL tensor holds one byte per element, 0 or 1",
                         t->field, i, t->raw[i]);
                return HERR_INVALID_REQUEST;
            }
        *out = (void *)t->raw;
        *owned = false;
        return HERR_NONE;
    }
    if (t->dtype == TD_FP32 && ((uintptr_t)t->raw & 3) == 0) {
        const float *f = (const float *)(const void *)t->raw;
        /* the vectorised scan first: a float mask may hold -inf, so its
         * non-finite elements are then looked at one by one */
        for (size_t i = tensor_first_nonfinite(f, t->count); i < t->count; i++)
            if (!isfinite(f[i]) && !(t->is_mask && f[i] < 0))
                return bad_element(t, i, f[i], err, errlen);
        *out = (void *)t->raw;
        *owned = false;
        return HERR_NONE;
    }
    size_t bytes;
    if (!attn_mul_size(t->count, sizeof(float), &bytes)) return HERR_PAYLOAD_TOO_LARGE;
    float *f = mem_alloc(bytes);
    if (!f) {
        snprintf(err, errlen, "%s: not enough memory for %zu bytes now", t->field, bytes);
        return HERR_OVERLOADED;
    }
    for (size_t i = 0; i < t->count; i++) {
        f[i] = raw_f32(t->raw, i, t->dtype);
        if (!isfinite(f[i]) && !(t->is_mask && f[i] < 0)) {
            http_error e = bad_element(t, i, f[i], err, errlen);
            free(f);
            return e;
        }
    }
    *out = f;
    *owned = true;
    return HERR_NONE;
}

static http_error b64_fill(const tensor_src *t, char *dst, size_t bytes, char *err, size_t errlen) {
    char sh[96];
    if (t->b64len != base64_encoded_len(bytes)) {
        size_t got = t->b64len / 4 * 3;
        snprintf(err, errlen,
                 "%s.base64: %zu characters (about %zu bytes); shape %s of %s needs %zu bytes "
                 "(%zu base64 characters)",
                 t->field, t->b64len, got, tensor_shape_str(sh, sizeof sh, t->dim, t->rank),
                 t->kind == TK_FLOAT ? "float32" : "bool", bytes, base64_encoded_len(bytes));
        return HERR_INVALID_REQUEST;
    }
    size_t bad = 0;
    size_t n = base64_decode(dst, t->b64, t->b64len, &bad);
    if (n == (size_t)-1) {
        snprintf(err, errlen, "%s.base64: invalid base64 at character %zu", t->field, bad);
        return HERR_INVALID_REQUEST;
    }
    if (n != bytes) {
        snprintf(err, errlen,
                 "%s.base64: decodes to %zu bytes; shape %s needs %zu (is the '=' padding "
                 "missing?)",
                 t->field, n, tensor_shape_str(sh, sizeof sh, t->dim, t->rank), bytes);
        return HERR_INVALID_REQUEST;
    }
    if (t->kind == TK_FLOAT) {
        const float *f = (const float *)dst;
        for (size_t i = 0; i < t->count; i++)
            if (!isfinite(f[i]) && !(t->is_mask && f[i] < 0))
                return bad_element(t, i, f[i], err, errlen);
    } else {
        for (size_t i = 0; i < t->count; i++) ((uint8_t *)dst)[i] = dst[i] != 0;
    }
    return HERR_NONE;
}

size_t tensor_fill_bytes(const tensor_src *t) {
    if (t->src == TS_RAW &&
        (t->dtype == TD_BOOL || (t->dtype == TD_FP32 && ((uintptr_t)t->raw & 3) == 0)))
        return 0;
    size_t bytes;
    if (!attn_mul_size(t->count, t->kind == TK_FLOAT ? sizeof(float) : 1, &bytes))
        return (size_t)-1;
    if (t->src == TS_BASE64 && base64_decoded_max(t->b64len) > bytes)
        bytes = base64_decoded_max(t->b64len);
    return bytes;
}

/* The caller has checked the shape against the limits. */
http_error tensor_fill(const tensor_src *t, void **out, bool *owned, char *err, size_t errlen) {
    if (t->src == TS_RAW) return raw_fill(t, out, owned, err, errlen);
    size_t esize = t->kind == TK_FLOAT ? sizeof(float) : 1, bytes, cap;
    if (!attn_mul_size(t->count, esize, &bytes)) return HERR_PAYLOAD_TOO_LARGE;
    /* base64 text of the right length but without '=' padding decodes to up
     * to 2 bytes more than the tensor holds: room for what the decoder may
     * write, then the decoded size is checked. */
    cap = t->src == TS_BASE64 ? base64_decoded_max(t->b64len) : bytes;
    if (cap < bytes) cap = bytes;
    char *dst = mem_alloc(cap);
    if (!dst) {
        snprintf(err, errlen, "%s: not enough memory for %zu bytes now", t->field, bytes);
        return HERR_OVERLOADED;
    }
    http_error e = HERR_NONE;
    if (t->src == TS_BASE64) {
        e = b64_fill(t, dst, bytes, err, errlen);
    } else if (t->src == TS_JSON) {
        size_t pos = 0;
        e = json_fill_rec(t, t->v, 0, dst, &pos, err, errlen);
        if (!e && pos != t->count) {
            char sh[96];
            snprintf(err, errlen, "%s.data: %zu elements; shape %s holds %zu", t->field, pos,
                     tensor_shape_str(sh, sizeof sh, t->dim, t->rank), t->count);
            e = HERR_INVALID_REQUEST;
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
    *owned = true;
    return HERR_NONE;
}
