/* test_weights.c - loading one attention layer: every layout, every float
 * dtype (values checked exactly), a layer picked by prefix out of a file
 * with other layers, and each way a weight set can be wrong, with a message
 * naming the culprit. Files are written in memory by a small safetensors
 * writer below; one goes through a real file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "safetensors.h"
#include "gemm.h"
#include "weights.h"

#define LABEL "<test>"

/* ---- a small safetensors writer ----------------------------------------- */

typedef struct {
    char hdr[16384];           /* header JSON under construction */
    size_t hlen;               /* bytes in hdr */
    unsigned char data[65536]; /* tensor bytes */
    size_t dlen;               /* bytes in data */
    int entries;               /* entries written (for commas) */
} stb;

static stb *stb_new(void) {
    stb *b = calloc(1, sizeof *b);
    b->hdr[0] = '{';
    b->hlen = 1;
    return b;
}

static void stb_raw(stb *b, const char *s) {
    size_t n = strlen(s);
    if (b->hlen + n >= sizeof b->hdr) abort();
    memcpy(b->hdr + b->hlen, s, n);
    b->hlen += n;
}

/* "__metadata__": obj, where obj is JSON text such as {"num_heads":"2"}. */
static void stb_meta(stb *b, const char *obj) {
    stb_raw(b, b->entries++ ? ",\"__metadata__\":" : "\"__metadata__\":");
    stb_raw(b, obj);
}

/* A tensor with raw bytes, placed after the previous one. */
static void stb_tensor(stb *b, const char *name, const char *dtype, int ndim, const size_t *shape,
                       const void *bytes, size_t nbytes) {
    char s[512];
    int n = snprintf(s, sizeof s, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", b->entries++ ? "," : "",
                     name, dtype);
    for (int i = 0; i < ndim; i++)
        n += snprintf(s + n, sizeof s - (size_t)n, "%s%zu", i ? "," : "", shape[i]);
    snprintf(s + n, sizeof s - (size_t)n, "],\"data_offsets\":[%zu,%zu]}", b->dlen,
             b->dlen + nbytes);
    stb_raw(b, s);
    if (b->dlen + nbytes > sizeof b->data) abort();
    memcpy(b->data + b->dlen, bytes, nbytes);
    b->dlen += nbytes;
}

/* IEEE half bits of v, which must be 0 or a normal half exactly. */
static uint16_t f16_bits(float v) {
    int e;
    float m;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    if (v == 0) return sign;
    m = frexpf(fabsf(v), &e); /* |v| = m 2^e, m in [0.5, 1) = (1 + f/1024) 2^(E-15) */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((2 * m - 1) * 1024));
}

/* n floats as dtype bytes into out; returns the byte count. Values must be
 * exactly representable in dtype (the tests choose them so). */
static size_t encode(const char *dtype, const float *v, size_t n, unsigned char *out) {
    size_t size = strcmp(dtype, "F64") == 0 ? 8 : strcmp(dtype, "F32") == 0 ? 4 : 2;
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        if (size == 8) {
            double d = v[i];
            memcpy(&u, &d, 8);
        } else if (size == 4) {
            uint32_t x;
            memcpy(&x, &v[i], 4);
            u = x;
        } else if (strcmp(dtype, "F16") == 0) {
            u = f16_bits(v[i]);
        } else { /* BF16: the top half of the float */
            uint32_t x;
            memcpy(&x, &v[i], 4);
            u = x >> 16;
        }
        for (size_t k = 0; k < size; k++) out[i * size + k] = (unsigned char)(u >> (8 * k));
    }
    return n * size;
}

/* A float tensor given as values. */
static void stb_floats(stb *b, const char *name, const char *dtype, int ndim, const size_t *shape,
                       const float *v) {
    size_t n = 1;
    unsigned char *bytes;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    bytes = malloc(n * 8 + 1);
    stb_tensor(b, name, dtype, ndim, shape, bytes, encode(dtype, v, n, bytes));
    free(bytes);
}

/* The file: header padded with spaces to a multiple of 8, as the reference
 * writer does. The caller frees it; stb is freed. */
static unsigned char *stb_finish(stb *b, size_t *len) {
    unsigned char *buf;
    stb_raw(b, "}");
    while (b->hlen % 8) stb_raw(b, " ");
    buf = malloc(8 + b->hlen + b->dlen);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)b->hlen >> (8 * i));
    memcpy(buf + 8, b->hdr, b->hlen);
    memcpy(buf + 8 + b->hlen, b->data, b->dlen);
    *len = 8 + b->hlen + b->dlen;
    free(b);
    return buf;
}

/* ---- layers ------------------------------------------------------------- */

/* Ids of the reference parameters; val(id, i) is element i of each. */
enum { P_WQ, P_WK, P_WV, P_BQ, P_BK, P_BV, P_WO, P_BO, P_BIAS_K, P_BIAS_V };

/* Multiples of 1/8 in [-1, 1]: exact in F16, BF16, F32 and F64. seed
 * makes other layers in the same file differ. */
static float val(int id, size_t i, int seed) {
    return (float)((int)((i * 7 + (size_t)id * 5 + (size_t)seed * 3) % 17) - 8) / 8.0f;
}

static float *vals(int id, size_t n, int seed) {
    float *v = malloc(n * sizeof *v + 1);
    for (size_t i = 0; i < n; i++) v[i] = val(id, i, seed);
    return v;
}

typedef struct {
    const char *layout; /* torch-packed, torch-separate, hf, hf-o (o_proj), bert */
    const char *dtype;
    int E, kdim, vdim;
    bool bias, bias_kv;
    int seed;
} spec;

static void add_param(stb *b, const char *prefix, const char *name, const spec *s, int id, int ndim,
                      size_t d0, size_t d1, size_t d2) {
    size_t shape[3] = {d0, d1, d2}, n = 1;
    char full[256];
    float *v;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    v = vals(id, n, s->seed);
    snprintf(full, sizeof full, "%s%s", prefix, name);
    stb_floats(b, full, s->dtype, ndim, shape, v);
    free(v);
}

/* [3E, ...] packed from three parameters. */
static void add_packed(stb *b, const char *prefix, const char *name, const spec *s, int id0,
                       size_t rows, size_t cols) {
    size_t part = rows * cols, shape[2] = {3 * rows, cols};
    float *v = malloc(3 * part * sizeof *v);
    char full[256];
    for (int p = 0; p < 3; p++)
        for (size_t i = 0; i < part; i++) v[(size_t)p * part + i] = val(id0 + p, i, s->seed);
    snprintf(full, sizeof full, "%s%s", prefix, name);
    stb_floats(b, full, s->dtype, cols ? 2 : 1, cols ? shape : &shape[0], v);
    free(v);
}

/* The tensors of one layer in the spec's layout, under prefix. */
static void add_layer(stb *b, const char *prefix, const spec *s) {
    size_t E = (size_t)s->E;
    const char *L = s->layout;
    if (strcmp(L, "torch-packed") == 0 || strcmp(L, "torch-separate") == 0) {
        if (strcmp(L, "torch-packed") == 0) {
            add_packed(b, prefix, "in_proj_weight", s, P_WQ, E, E);
        } else {
            add_param(b, prefix, "q_proj_weight", s, P_WQ, 2, E, E, 0);
            add_param(b, prefix, "k_proj_weight", s, P_WK, 2, E, (size_t)s->kdim, 0);
            add_param(b, prefix, "v_proj_weight", s, P_WV, 2, E, (size_t)s->vdim, 0);
        }
        if (s->bias) {
            size_t shape = 3 * E;
            float *v = malloc(3 * E * sizeof *v);
            char full[256];
            for (int p = 0; p < 3; p++)
                for (size_t i = 0; i < E; i++) v[(size_t)p * E + i] = val(P_BQ + p, i, s->seed);
            snprintf(full, sizeof full, "%sin_proj_bias", prefix);
            stb_floats(b, full, s->dtype, 1, &shape, v);
            free(v);
        }
        add_param(b, prefix, "out_proj.weight", s, P_WO, 2, E, E, 0);
        if (s->bias) add_param(b, prefix, "out_proj.bias", s, P_BO, 1, E, 0, 0);
        if (s->bias_kv) {
            add_param(b, prefix, "bias_k", s, P_BIAS_K, 3, 1, 1, E);
            add_param(b, prefix, "bias_v", s, P_BIAS_V, 3, 1, 1, E);
        }
        return;
    }
    bool bert = strcmp(L, "bert") == 0;
    const char *q = bert ? "attention.self.query." : "q_proj.";
    const char *k = bert ? "attention.self.key." : "k_proj.";
    const char *v = bert ? "attention.self.value." : "v_proj.";
    const char *o = bert                     ? "attention.output.dense."
                    : strcmp(L, "hf-o") == 0 ? "o_proj."
                                             : "out_proj.";
    const char *names[4] = {q, k, v, o};
    const size_t in[4] = {E, (size_t)s->kdim, (size_t)s->vdim, E};
    const int wid[4] = {P_WQ, P_WK, P_WV, P_WO}, bid[4] = {P_BQ, P_BK, P_BV, P_BO};
    char nm[128];
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof nm, "%sweight", names[i]);
        add_param(b, prefix, nm, s, wid[i], 2, E, in[i], 0);
        if (s->bias) {
            snprintf(nm, sizeof nm, "%sbias", names[i]);
            add_param(b, prefix, nm, s, bid[i], 1, E, 0, 0);
        }
    }
}

/* Mismatches between an array and val(id, ., seed). */
static int diff(const float *a, int id, size_t n, int seed) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != val(id, i, seed)) bad++;
    return bad;
}

/* Differences of the transposed copy t (row stride ldt) from tensor id
 * [rows, cols]: t[c * ldt + r] must be element (r, c). */
static int diff_t(const float *t, size_t ldt, int id, size_t rows, size_t cols, int seed) {
    int bad = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            if (t[c * ldt + r] != val(id, r * cols + c, seed)) bad++;
    return bad;
}

/* Parameter id [rows, cols] as columns j0.. of a [cols, N] matrix packed
 * for attn_gemm (its transpose, in panels). */
static int diff_p(const float *p, int j0, int id, size_t rows, size_t cols, int seed) {
    int bad = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            if (attn_gemm_packed_at(p, (int)cols, (int)c, j0 + (int)r) !=
                val(id, r * cols + c, seed))
                bad++;
    return bad;
}

/* w must hold exactly the spec's layer. */
static void check_layer(const attn_weights *w, const spec *s, int H, const char *layout) {
    size_t E = (size_t)s->E, kd = (size_t)s->kdim, vd = (size_t)s->vdim;
    size_t params = E * E * 2 + E * kd + E * vd + (s->bias ? 4 * E : 0) + (s->bias_kv ? 2 * E : 0);
    int bad = 0;
    CHECK_INT_EQ(w->E, s->E);
    CHECK_INT_EQ(w->H, H);
    CHECK_INT_EQ(w->d, s->E / H);
    CHECK_INT_EQ(w->kdim, s->kdim);
    CHECK_INT_EQ(w->vdim, s->vdim);
    CHECK_INT_EQ(w->bias, s->bias);
    CHECK_INT_EQ(w->add_bias_kv, s->bias_kv);
    CHECK_STR_EQ(w->layout, layout);
    CHECK_STR_EQ(w->dtype, s->dtype);
    CHECK_INT_EQ(w->parameters, params);
    bad += diff(w->wq, P_WQ, E * E, s->seed);
    bad += diff(w->wk, P_WK, E * kd, s->seed);
    bad += diff(w->wv, P_WV, E * vd, s->seed);
    bad += diff(w->wo, P_WO, E * E, s->seed);
    /* the out-projection's copy: packed for the engine's kernel where the
     * CPU has one, else transposed */
    CHECK((w->wo_t != NULL) == (attn_gemm_nr() == 0) && (w->wo_p != NULL) == (attn_gemm_nr() > 0));
    if (w->wo_t) bad += diff_t(w->wo_t, E, P_WO, E, E, s->seed);
    if (w->wo_p) bad += diff_p(w->wo_p, 0, P_WO, E, E, s->seed);
    CHECK(!w->bias == !w->bq && !w->bias == !w->bk && !w->bias == !w->bv && !w->bias == !w->bo);
    if (w->bias && w->bq && w->bk && w->bv && w->bo) {
        bad += diff(w->bq, P_BQ, E, s->seed);
        bad += diff(w->bk, P_BK, E, s->seed);
        bad += diff(w->bv, P_BV, E, s->seed);
        bad += diff(w->bo, P_BO, E, s->seed);
    }
    CHECK(!w->add_bias_kv == !w->bias_k && !w->add_bias_kv == !w->bias_v);
    if (w->bias_k && w->bias_v) {
        bad += diff(w->bias_k, P_BIAS_K, E, s->seed);
        bad += diff(w->bias_v, P_BIAS_V, E, s->seed);
    }
    if (s->kdim == s->E && s->vdim == s->E) {
        CHECK((w->wqkv_t != NULL) == (attn_gemm_nr() == 0));
        CHECK((w->wqkv_p != NULL) == (attn_gemm_nr() > 0));
        CHECK(!w->bias == !w->bqkv);
        if (w->wqkv_p) {
            bad += diff_p(w->wqkv_p, 0, P_WQ, E, E, s->seed);
            bad += diff_p(w->wqkv_p, (int)E, P_WK, E, E, s->seed);
            bad += diff_p(w->wqkv_p, 2 * (int)E, P_WV, E, E, s->seed);
        }
        if (w->wqkv_t) {
            bad += diff_t(w->wqkv_t, 3 * E, P_WQ, E, E, s->seed);
            bad += diff_t(w->wqkv_t + E, 3 * E, P_WK, E, E, s->seed);
            bad += diff_t(w->wqkv_t + 2 * E, 3 * E, P_WV, E, E, s->seed);
        }
        if (w->bqkv) {
            bad += diff(w->bqkv, P_BQ, E, s->seed);
            bad += diff(w->bqkv + E, P_BK, E, s->seed);
            bad += diff(w->bqkv + 2 * E, P_BV, E, s->seed);
        }
    } else {
        CHECK(w->wqkv_t == NULL && w->wqkv_p == NULL && w->bqkv == NULL);
    }
    CHECK_MSG(bad == 0, "%s %s E=%d kdim=%d vdim=%d: %d values differ", layout, s->dtype, s->E,
              s->kdim, s->vdim, bad);
}

/* A file holding one layer (and metadata meta, if any). */
static unsigned char *layer_file(const spec *s, const char *meta, size_t *len) {
    stb *b = stb_new();
    if (meta) stb_meta(b, meta);
    add_layer(b, "", s);
    return stb_finish(b, len);
}

static attn_status load(const unsigned char *buf, size_t len, const attn_weights_opts *o,
                        attn_weights **w, char *err) {
    err[0] = '\0';
    return attn_weights_load_mem(buf, len, LABEL, o, w, err, ATTN_ERRLEN);
}

/* Load must fail with st and a message holding the label and needle. */
#define REJECT(buf, len, opts, want, needle)                                                       \
    do {                                                                                           \
        char e_[ATTN_ERRLEN];                                                                      \
        attn_weights *w_ = NULL;                                                                   \
        CHECK_INT_EQ(load((buf), (len), (opts), &w_, e_), (want));                                 \
        CHECK(w_ == NULL);                                                                         \
        CHECK_STR_CONTAINS(e_, LABEL);                                                             \
        CHECK_STR_CONTAINS(e_, needle);                                                            \
        attn_weights_destroy(w_);                                                                  \
    } while (0)

/* ---- tests -------------------------------------------------------------- */

/* Every layout, with and without bias, with bias_k/bias_v, in every dtype. */
static void test_layouts(void) {
    static const char *const layouts[] = {"torch-packed", "torch-separate", "hf", "hf-o", "bert"};
    static const char *const dtypes[] = {"F32", "F16", "BF16", "F64"};
    char err[ATTN_ERRLEN];
    for (size_t l = 0; l < 5; l++)
        for (size_t d = 0; d < 4; d++)
            for (int variant = 0; variant < 3; variant++) {
                bool torch = l < 2;
                spec s = {layouts[l], dtypes[d], 4, 4, 4, variant != 1, variant == 2 && torch, 0};
                if (l == 1 || l == 2) { /* separate projections: kdim != vdim != E */
                    s.kdim = 3;
                    s.vdim = 6;
                }
                size_t len;
                unsigned char *buf = layer_file(&s, "{\"num_heads\":\"2\"}", &len);
                attn_weights *w = NULL;
                attn_status st = load(buf, len, NULL, &w, err);
                CHECK_MSG(st == ATTN_OK, "%s %s variant %d: %s", s.layout, s.dtype, variant, err);
                if (w) {
                    check_layer(w, &s, 2, l == 3 ? "hf" : s.layout);
                    CHECK_INT_EQ(w->add_zero_attn, 0);
                    CHECK_STR_EQ(w->source, LABEL);
                }
                attn_weights_destroy(w);
                free(buf);
            }
}

/* torch-separate with kdim == vdim == E still gets the packed copies. */
static void test_separate_square(void) {
    spec s = {"torch-separate", "F32", 6, 6, 6, true, false, 1};
    char err[ATTN_ERRLEN];
    size_t len;
    unsigned char *buf = layer_file(&s, "{\"num_heads\":\"3\"}", &len);
    attn_weights *w = NULL;
    CHECK_INT_EQ(load(buf, len, NULL, &w, err), ATTN_OK);
    if (w) check_layer(w, &s, 3, "torch-separate");
    attn_weights_destroy(w);
    free(buf);
}

/* A layer picked by prefix from a file that holds others (and non-float
 * tensors), with or without the trailing dot. */
static void test_prefix(void) {
    spec l0 = {"torch-packed", "F32", 4, 4, 4, true, false, 0};
    spec l1 = {"torch-packed", "F32", 4, 4, 4, true, true, 1};
    spec l10 = {"torch-packed", "F32", 8, 8, 8, true, false, 2};
    spec h1 = {"hf-o", "BF16", 8, 8, 8, false, false, 3};
    long long ids[3] = {0, 1, 2};
    size_t idshape = 3, len;
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    stb *b = stb_new();
    stb_meta(b, "{\"num_heads\":\"2\",\"add_zero_attn\":\"true\"}");
    stb_tensor(b, "embeddings.position_ids", "I64", 1, &idshape, ids, sizeof ids);
    add_layer(b, "enc.layers.0.", &l0);
    add_layer(b, "enc.layers.1.", &l1);
    add_layer(b, "enc.layers.10.", &l10);
    add_layer(b, "model.layers.1.self_attn.", &h1);
    unsigned char *buf = stb_finish(b, &len);

    attn_weights_opts o = {.num_heads = 0, .add_zero_attn = -1, .prefix = "enc.layers.1."};
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_OK);
    if (w) {
        check_layer(w, &l1, 2, "torch-packed");
        CHECK_INT_EQ(w->add_zero_attn, 1);
    }
    attn_weights_destroy(w);

    o.prefix = "enc.layers.1"; /* no dot: not enc.layers.10 */
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_OK);
    if (w) check_layer(w, &l1, 2, "torch-packed");
    attn_weights_destroy(w);

    o.prefix = "enc.layers.10";
    o.num_heads = 4; /* an option that disagrees with the file's metadata is an error */
    REJECT(buf, len, &o, ATTN_ERR_LAYER,
           "num_heads: 4 given (config num_heads or --model NAME=PATH:HEADS) but the file's "
           "__metadata__[\"num_heads\"] is 2");
    o.num_heads = 2; /* one that agrees is fine */
    o.add_zero_attn = 0;
    REJECT(buf, len, &o, ATTN_ERR_LAYER,
           "add_zero_attn: false given (config add_zero_attn or --model ...:add_zero_attn=) but "
           "the file's __metadata__[\"add_zero_attn\"] is \"true\"");
    o.add_zero_attn = 1;
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_OK);
    if (w) {
        check_layer(w, &l10, 2, "torch-packed");
        CHECK_INT_EQ(w->add_zero_attn, 1);
    }
    attn_weights_destroy(w);
    o.add_zero_attn = -1;

    o.prefix = "model.layers.1.self_attn.";
    o.num_heads = 0;
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_OK);
    if (w) check_layer(w, &h1, 2, "hf");
    attn_weights_destroy(w);

    /* the file's layers, as a message lists them when none is chosen */
    const char *layers = "the file holds 4 attention layers, choose one with a prefix (config "
                         "\"prefix\", or --model NAME=PATH:prefix=PREFIX): \"enc.layers.0.\" "
                         "(torch-packed), \"enc.layers.1.\" (torch-packed), \"enc.layers.10.\" "
                         "(torch-packed), \"model.layers.1.self_attn.\" (hf)";

    /* a prefix nothing starts with */
    o.prefix = "decoder.layers.0.";
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_ERR_LAYER);
    CHECK(w == NULL);
    CHECK_STR_CONTAINS(err, LABEL);
    CHECK_STR_CONTAINS(err, "no tensor name starts with the prefix \"decoder.layers.0.\"");
    CHECK_STR_CONTAINS(err, layers);

    /* a prefix some names start with, but no layer under it */
    o.prefix = "embeddings.";
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "no attention layer under the prefix \"embeddings.\"");
    CHECK_STR_CONTAINS(err, layers);

    /* no prefix on a whole-model file */
    CHECK_INT_EQ(load(buf, len, NULL, &w, err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "no attention layer at the top level");
    CHECK_STR_CONTAINS(err, layers);
    free(buf);

    /* a file with no layer anywhere: the message lists the names found */
    stb *b2 = stb_new();
    for (int i = 0; i < 8; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "embeddings.w%d", i);
        stb_tensor(b2, nm, "I64", 1, &idshape, ids, sizeof ids);
    }
    buf = stb_finish(b2, &len);
    o.prefix = "decoder.";
    REJECT(buf, len, &o, ATTN_ERR_LAYER,
           "no tensor name starts with the prefix \"decoder.\"; the file has 8 tensors: "
           "\"embeddings.w0\"");
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "no attention layer at the top level: expected in_proj_weight, q_proj_weight, "
           "q_proj.weight or attention.self.query.weight; found \"embeddings.w0\"");
    free(buf);
}

/* Exact values of tricky F16/BF16 numbers through a whole load. */
static void test_dtype_values(void) {
    /* F16 0x0001 = 2^-24 (subnormal), 0x7BFF = 65504, 0x8400 = -2^-14 */
    unsigned char h16[2 * 4] = {0x01, 0x00, 0xFF, 0x7B, 0x00, 0x84, 0x00, 0x3C};
    unsigned char wo16[2 * 4] = {0};
    size_t shape[2] = {2, 2}, bshape = 6, len;
    unsigned char bias16[12] = {0};
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    stb *b = stb_new();
    stb_meta(b, "{\"num_heads\":\"1\"}");
    stb_tensor(b, "q_proj_weight", "F16", 2, shape, h16, sizeof h16);
    stb_tensor(b, "k_proj_weight", "F16", 2, shape, wo16, sizeof wo16);
    stb_tensor(b, "v_proj_weight", "F16", 2, shape, wo16, sizeof wo16);
    stb_tensor(b, "out_proj.weight", "F16", 2, shape, wo16, sizeof wo16);
    stb_tensor(b, "in_proj_bias", "F16", 1, &bshape, bias16, sizeof bias16);
    stb_tensor(b, "out_proj.bias", "BF16", 1, shape, "\x01\x00\x80\xbf", 4); /* 2^-133, -1 */
    unsigned char *buf = stb_finish(b, &len);
    CHECK_INT_EQ(load(buf, len, NULL, &w, err), ATTN_OK);
    if (w) {
        CHECK(w->wq[0] == ldexpf(1, -24));
        CHECK(w->wq[1] == 65504.0f);
        CHECK(w->wq[2] == -ldexpf(1, -14));
        CHECK(w->wq[3] == 1.0f);
        CHECK(w->bo[0] == ldexpf(1, -133));
        CHECK(w->bo[1] == -1.0f);
        CHECK_STR_EQ(w->dtype, "mixed");
        CHECK_STR_EQ(w->layout, "torch-separate");
    }
    attn_weights_destroy(w);
    free(buf);
}

/* A file with spec s but one tensor replaced (name, dtype, shape, values) or
 * dropped (v == NULL and ndim < 0). */
static unsigned char *edited_file(const spec *s, const char *meta, const char *name,
                                  const char *dtype, int ndim, const size_t *shape, const float *v,
                                  size_t *len) {
    unsigned char *full = layer_file(s, NULL, len);
    st_file *f = NULL;
    char err[ATTN_ERRLEN];
    stb *b = stb_new();
    if (st_parse(full, *len, "x", &f, err, sizeof err)) abort();
    if (meta) stb_meta(b, meta);
    for (size_t i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_get(f, i);
        if (strcmp(t->name, name) != 0)
            stb_tensor(b, t->name, st_dtype_name(t->dtype), t->ndim, t->shape, t->data, t->nbytes);
        else if (ndim >= 0)
            stb_floats(b, name, dtype, ndim, shape, v);
    }
    st_close(f);
    free(full);
    return stb_finish(b, len);
}

static void test_reject_tensors(void) {
    const char *meta = "{\"num_heads\":\"2\"}";
    spec packed = {"torch-packed", "F32", 4, 4, 4, true, true, 0};
    spec hf = {"hf", "F32", 4, 4, 4, true, false, 0};
    spec bert = {"bert", "F32", 4, 4, 4, true, false, 0};
    float v[64];
    size_t shape[3], len;
    unsigned char *buf;
    for (int i = 0; i < 64; i++) v[i] = 0.5f;

    /* missing tensors */
    buf = edited_file(&packed, meta, "out_proj.weight", NULL, -1, NULL, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "missing tensor \"out_proj.weight\" (torch-packed layout)");
    free(buf);
    buf = edited_file(&hf, meta, "k_proj.weight", NULL, -1, NULL, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER, "missing tensor \"k_proj.weight\" (hf layout)");
    free(buf);
    buf = edited_file(&hf, meta, "out_proj.weight", NULL, -1, NULL, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "missing tensor \"out_proj.weight\" or \"o_proj.weight\"");
    free(buf);
    buf = edited_file(&bert, meta, "attention.output.dense.weight", NULL, -1, NULL, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER, "missing tensor \"attention.output.dense.weight\"");
    free(buf);

    /* Hugging Face layers may lack single biases (Whisper's k_proj): zero */
    buf = edited_file(&hf, meta, "v_proj.bias", NULL, -1, NULL, NULL, &len);
    {
        attn_weights *wp = NULL;
        char ep[ATTN_ERRLEN];
        CHECK_INT_EQ(attn_weights_load_mem(buf, len, "<test>", NULL, &wp, ep, sizeof ep), ATTN_OK);
        if (wp) {
            float mx = 0, mq = 0;
            for (int i = 0; i < wp->E; i++)
                mx = fmaxf(mx, fabsf(wp->bv[i])), mq = fmaxf(mq, fabsf(wp->bq[i]));
            CHECK(wp->bias);
            CHECK_MSG(mx == 0.0f && mq > 0.0f,
                      "missing v_proj.bias is zero (max %g), q_proj.bias kept (max %g)", (double)mx,
                      (double)mq);
        }
        attn_weights_destroy(wp);
    }
    free(buf);
    /* PyTorch layouts: biases all or none; bias_k and bias_v together */
    buf = edited_file(&packed, meta, "in_proj_bias", NULL, -1, NULL, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER, "\"in_proj_bias\" is missing");
    free(buf);
    buf = edited_file(&packed, meta, "bias_v", NULL, -1, NULL, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER, "\"bias_k\" is present but \"bias_v\" is missing");
    free(buf);

    /* inconsistent shapes: tensor, expected and found */
    shape[0] = 4;
    shape[1] = 5;
    buf = edited_file(&packed, meta, "out_proj.weight", "F32", 2, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"out_proj.weight\": expected shape [E, E] = [4, 4] with E = 4, found [4, 5]");
    free(buf);
    shape[0] = 10;
    shape[1] = 4;
    buf = edited_file(&packed, meta, "in_proj_weight", "F32", 2, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"in_proj_weight\": expected shape [3E, E] with E > 0, found [10, 4]");
    free(buf);
    shape[0] = 4;
    buf = edited_file(&packed, meta, "in_proj_bias", "F32", 1, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER, "tensor \"in_proj_bias\": expected shape [3E] = [12]");
    free(buf);
    buf = edited_file(&packed, meta, "bias_k", "F32", 1, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"bias_k\": expected shape [1, 1, E] = [1, 1, 4]");
    free(buf);
    shape[0] = 5;
    shape[1] = 4;
    buf = edited_file(&hf, meta, "q_proj.weight", "F32", 2, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"q_proj.weight\": expected shape [E, E] with E > 0, found [5, 4]");
    free(buf);
    buf = edited_file(&hf, meta, "v_proj.weight", "F32", 2, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"v_proj.weight\": expected shape [E, vdim] = [4, vdim]");
    free(buf);
    shape[0] = 3;
    buf = edited_file(&bert, meta, "attention.self.key.bias", "F32", 1, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"attention.self.key.bias\": expected shape [E] = [4] with E = 4, found [3]");
    free(buf);

    /* non-finite weights: tensor and index */
    v[5] = NAN;
    shape[0] = shape[1] = 4;
    buf = edited_file(&hf, meta, "out_proj.weight", "F32", 2, shape, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "tensor \"out_proj.weight\": value at flat index 5 is NaN");
    free(buf);
    v[5] = INFINITY;
    buf = edited_file(&packed, meta, "in_proj_bias", "F64", 1, (size_t[]){12}, v, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER, "tensor \"in_proj_bias\": value at flat index 5 is inf");
    free(buf);
    v[5] = 0.5f;

    /* an integer weight */
    {
        stb *b = stb_new();
        long long q[16] = {0};
        size_t sq[2] = {4, 4};
        spec nobias = {"hf", "F32", 4, 4, 4, false, false, 0};
        stb_meta(b, meta);
        stb_tensor(b, "x.q_proj.weight", "I64", 2, sq, q, sizeof q);
        add_param(b, "x.", "k_proj.weight", &nobias, P_WK, 2, 4, 4, 0);
        add_param(b, "x.", "v_proj.weight", &nobias, P_WV, 2, 4, 4, 0);
        add_param(b, "x.", "o_proj.weight", &nobias, P_WO, 2, 4, 4, 0);
        buf = stb_finish(b, &len);
        attn_weights_opts o = {0, -1, "x."};
        REJECT(buf, len, &o, ATTN_ERR_LAYER,
               "tensor \"x.q_proj.weight\": expected dtype F32, F16, BF16 or F64, found I64");
        free(buf);
    }

    /* two layouts at once */
    {
        stb *b = stb_new();
        spec p = {"torch-packed", "F32", 4, 4, 4, false, false, 0};
        stb_meta(b, meta);
        add_layer(b, "", &p);
        add_param(b, "", "q_proj.weight", &p, P_WQ, 2, 4, 4, 0);
        buf = stb_finish(b, &len);
        REJECT(
            buf, len, NULL, ATTN_ERR_LAYER,
            "ambiguous layer: \"in_proj_weight\" (torch-packed layout) and \"q_proj.weight\" (hf "
            "layout)");
        free(buf);
        b = stb_new();
        p.layout = "hf";
        stb_meta(b, meta);
        add_layer(b, "", &p);
        add_param(b, "", "o_proj.weight", &p, P_WO, 2, 4, 4, 0);
        buf = stb_finish(b, &len);
        REJECT(buf, len, NULL, ATTN_ERR_LAYER,
               "both \"out_proj.weight\" and \"o_proj.weight\" are present");
        free(buf);
    }

    /* file-level errors come through with the label */
    buf = layer_file(&packed, meta, &len);
    REJECT(buf, len - 1, NULL, ATTN_ERR_FORMAT, "but the file holds only");
    REJECT(buf, 7, NULL, ATTN_ERR_FORMAT, "too short");
    free(buf);
    REJECT((const unsigned char *)"\2\0\0\0\0\0\0\0{}", 10, NULL, ATTN_ERR_LAYER,
           "the file holds no tensors");
}

static void test_reject_options(void) {
    spec s = {"torch-packed", "F32", 6, 6, 6, true, false, 0};
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    size_t len;
    unsigned char *buf;

    buf = layer_file(&s, NULL, &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "num_heads not given: set it in __metadata__, the config (num_heads) or --model "
           "NAME=PATH:HEADS");
    attn_weights_opts o = {.num_heads = 3, .add_zero_attn = -1, .prefix = NULL};
    CHECK_INT_EQ(load(buf, len, &o, &w, err), ATTN_OK);
    if (w) check_layer(w, &s, 3, "torch-packed");
    attn_weights_destroy(w);
    o.num_heads = 4;
    REJECT(buf, len, &o, ATTN_ERR_LAYER,
           "embed dim E = 6 is not divisible by num_heads H = 4 (from the options)");
    o.num_heads = -1;
    REJECT(buf, len, &o, ATTN_ERR_INVALID, "num_heads option");
    o.num_heads = 0;
    o.add_zero_attn = 2;
    REJECT(buf, len, &o, ATTN_ERR_INVALID, "add_zero_attn option");
    free(buf);

    static const char *const bad_heads[] = {
        "{\"num_heads\":\"4\"}",          "{\"num_heads\":\"two\"}", "{\"num_heads\":\"0\"}",
        "{\"num_heads\":\"-2\"}",         "{\"num_heads\":\" 2\"}",  "{\"num_heads\":\"\"}",
        "{\"num_heads\":\"99999999999\"}"};
    for (size_t i = 0; i < sizeof bad_heads / sizeof bad_heads[0]; i++) {
        buf = layer_file(&s, bad_heads[i], &len);
        REJECT(buf, len, NULL, ATTN_ERR_LAYER,
               i == 0 ? "E = 6 is not divisible by num_heads H = 4 (from __metadata__)"
                      : "__metadata__[\"num_heads\"]: expected a positive decimal integer");
        free(buf);
    }
    buf = layer_file(&s, "{\"num_heads\":\"6\",\"add_zero_attn\":\"True\"}", &len);
    REJECT(buf, len, NULL, ATTN_ERR_LAYER,
           "__metadata__[\"add_zero_attn\"]: expected \"true\" or \"false\", found \"True\"");
    o.add_zero_attn = 1; /* a bad value in the file is an error with an option too */
    REJECT(buf, len, &o, ATTN_ERR_LAYER, "__metadata__[\"add_zero_attn\"]: expected");
    free(buf);
    o.add_zero_attn = -1;
    buf = layer_file(&s, "{\"num_heads\":\"6\",\"add_zero_attn\":\"false\"}", &len);
    CHECK_INT_EQ(load(buf, len, NULL, &w, err), ATTN_OK);
    if (w) {
        CHECK_INT_EQ(w->add_zero_attn, 0);
        CHECK_INT_EQ(w->H, 6);
        CHECK_INT_EQ(w->d, 1);
    }
    attn_weights_destroy(w);
    free(buf);
}

/* attn_weights_load from a real file, and from one that is not there. */
static void test_file(void) {
    spec s = {"bert", "F16", 8, 8, 8, true, false, 4};
    char path[] = "/tmp/test_weights_XXXXXX", err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    size_t len;
    unsigned char *buf = layer_file(&s, "{\"num_heads\":\"4\"}", &len);
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK_INT_EQ(write(fd, buf, len), (long long)len);
        close(fd);
        CHECK_INT_EQ(attn_weights_load(path, NULL, &w, err, sizeof err), ATTN_OK);
        if (w) {
            check_layer(w, &s, 4, "bert");
            CHECK_STR_EQ(w->source, path);
        }
        attn_weights_destroy(w);
        unlink(path);
        CHECK_INT_EQ(attn_weights_load(path, NULL, &w, err, sizeof err), ATTN_ERR_IO);
        CHECK(w == NULL);
        CHECK_STR_CONTAINS(err, path);
    }
    free(buf);
}

static void test_alloc(void) {
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    CHECK_INT_EQ(attn_weights_alloc(6, 4, 6, 6, true, false, false, &w, err, sizeof err),
                 ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "E = 6 is not divisible by num_heads H = 4");
    CHECK(w == NULL);
    CHECK_INT_EQ(attn_weights_alloc(0, 1, 1, 1, true, false, false, &w, err, sizeof err),
                 ATTN_ERR_LAYER);
    CHECK_INT_EQ(attn_weights_alloc(4, 2, 4, 4, true, true, true, &w, err, sizeof err), ATTN_OK);
    if (w) {
        int nonzero = 0;
        /* the weights zeroed; the transposed copies are attn_weights_finish's */
        for (int i = 0; i < 16; i++) nonzero += w->wq[i] != 0 || w->wo[i] != 0;
        CHECK_INT_EQ(nonzero, 0);
        CHECK((w->wqkv_t && w->wo_t) || (w->wqkv_p && w->wo_p));
        CHECK(w->bq && w->bk && w->bv && w->bo && w->bqkv && w->bias_k && w->bias_v);
        CHECK_INT_EQ(w->d, 2);
        CHECK_INT_EQ(w->parameters, 4 * 16 + 4 * 4 + 2 * 4);
        for (int i = 0; i < 16; i++) {
            w->wq[i] = 1;
            w->wk[i] = 2;
            w->wv[i] = (float)(100 + i);
            w->wo[i] = (float)i;
        }
        for (int i = 0; i < 4; i++) w->bv[i] = 7;
        attn_weights_finish(w);
        /* wqkv [4, 12]: row k holds column k of Wq, then of Wk, then of Wv,
         * transposed (wqkv_t) or packed (wqkv_p, read by element) */
        float q[48], o[16];
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 12; j++)
                q[k * 12 + j] =
                    w->wqkv_t ? w->wqkv_t[k * 12 + j] : attn_gemm_packed_at(w->wqkv_p, 4, k, j);
            for (int j = 0; j < 4; j++)
                o[k * 4 + j] = w->wo_t ? w->wo_t[k * 4 + j] : attn_gemm_packed_at(w->wo_p, 4, k, j);
        }
        CHECK(q[0] == 1 && q[4] == 2 && q[8] == 100);
        CHECK(q[9] == 104 && q[12 + 8] == 101 && q[47] == 115);
        CHECK(o[1] == 4 && o[4] == 1 && o[15] == 15 && o[11] == 14);
        CHECK(w->bqkv[0] == 0 && w->bqkv[8] == 7 && w->bqkv[11] == 7);
    }
    attn_weights_destroy(w);
    CHECK_INT_EQ(attn_weights_alloc(4, 1, 3, 5, false, false, false, &w, err, sizeof err), ATTN_OK);
    if (w)
        CHECK(w->wqkv_t == NULL && w->wqkv_p == NULL && w->bqkv == NULL && w->bq == NULL &&
              w->bias_k == NULL);
    attn_weights_finish(w);
    attn_weights_destroy(w);
    attn_weights_destroy(NULL);
    attn_weights_finish(NULL);
}

/* Every layer option __metadata__ states is checked against the tensors:
 * stated and true loads, stated and false is an error naming both. */
static void test_metadata_options(void) {
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    size_t len;
    unsigned char *buf;
    spec packed = {"torch-packed", "F32", 4, 4, 4, true, true, 0};
    spec sep = {"torch-separate", "F32", 4, 3, 5, false, false, 0};

    buf = layer_file(&packed,
                     "{\"num_heads\":\"2\",\"add_zero_attn\":\"false\",\"add_bias_kv\":\"true\","
                     "\"bias\":\"true\",\"embed_dim\":\"4\",\"kdim\":\"4\",\"vdim\":\"4\","
                     "\"layout\":\"packed\",\"exporter\":\"anything\"}",
                     &len);
    CHECK_INT_EQ(load(buf, len, NULL, &w, err), ATTN_OK);
    if (w) check_layer(w, &packed, 2, "torch-packed");
    attn_weights_destroy(w);
    free(buf);
    buf = layer_file(
        &sep,
        "{\"num_heads\":\"2\",\"add_bias_kv\":\"false\",\"bias\":\"false\","
        "\"embed_dim\":\"4\",\"kdim\":\"3\",\"vdim\":\"5\",\"layout\":\"torch-separate\"}",
        &len);
    CHECK_INT_EQ(load(buf, len, NULL, &w, err), ATTN_OK);
    if (w) check_layer(w, &sep, 2, "torch-separate");
    attn_weights_destroy(w);
    free(buf);

    const struct {
        const spec *s;
        const char *meta, *needle;
    } bad[] = {
        {&packed, "{\"num_heads\":\"2\",\"add_bias_kv\":\"false\"}",
         "__metadata__[\"add_bias_kv\"] is \"false\" but the tensors include them"},
        {&sep, "{\"num_heads\":\"2\",\"bias\":\"true\"}",
         "__metadata__[\"bias\"] is \"true\" but the tensors do not include them"},
        {&packed, "{\"num_heads\":\"2\",\"bias\":\"yes\"}",
         "__metadata__[\"bias\"]: expected \"true\" or \"false\", found \"yes\""},
        {&packed, "{\"num_heads\":\"2\",\"embed_dim\":\"8\"}",
         "__metadata__[\"embed_dim\"] is 8 but the tensors' shapes give 4"},
        {&sep, "{\"num_heads\":\"2\",\"kdim\":\"4\"}",
         "__metadata__[\"kdim\"] is 4 but the tensors' shapes give 3"},
        {&sep, "{\"num_heads\":\"2\",\"vdim\":\"x\"}",
         "__metadata__[\"vdim\"]: expected a positive decimal integer, found \"x\""},
        {&sep, "{\"num_heads\":\"2\",\"layout\":\"packed\"}",
         "__metadata__[\"layout\"] is \"packed\" but the tensor names are the torch-separate "
         "layout"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        buf = layer_file(bad[i].s, bad[i].meta, &len);
        REJECT(buf, len, NULL, ATTN_ERR_LAYER, bad[i].needle);
        free(buf);
    }
}

/* The memory a weight set holds: every array counted (at least the raw
 * weights, the copy of the four matrices the projections multiply by, and
 * bq;bk;bv again as bqkv; bo has no copy), and the arrays of a megabyte or
 * more on 2 MiB boundaries, rounded up to whole huge pages: each pass reads
 * them (core/weights.c, alloc_floats). */
static void test_alloc_bytes(void) {
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    const size_t MiB = (size_t)1 << 20, huge = 2 * MiB;
    CHECK_INT_EQ(attn_weights_alloc(16, 4, 16, 16, true, false, false, &w, err, sizeof err),
                 ATTN_OK);
    if (w) {
        /* small: no huge pages; on top of the floats, each array's last
         * cache line and, for the engine's kernel, the packed copies'
         * padding to whole panels (16 columns to 32 on AVX-512). Counting
         * bo twice, as this check once did, held only where that padding
         * hid it: an AVX2-only CPU (16-column panels) came out 64 bytes
         * under. */
        const size_t e = (size_t)w->E, least = (w->parameters + 4 * e * e + 3 * e) * sizeof(float);
        CHECK_MSG(w->bytes >= least, "%zu bytes, at least %zu", w->bytes, least);
        CHECK_MSG(w->bytes < least + 64 * 64, "%zu bytes, under %zu", w->bytes, least + 64 * 64);
        attn_weights_destroy(w);
        w = NULL;
    }
    /* E = 512: each of Wq, Wk, Wv and Wo is exactly 1 MiB */
    CHECK_INT_EQ(attn_weights_alloc(512, 8, 512, 512, true, false, false, &w, err, sizeof err),
                 ATTN_OK);
    if (w) {
        const float *big[] = {w->wq,
                              w->wk,
                              w->wv,
                              w->wo,
                              w->wqkv_t ? w->wqkv_t : w->wqkv_p,
                              w->wo_t ? w->wo_t : w->wo_p};
        for (size_t i = 0; i < sizeof big / sizeof *big; i++)
            CHECK_MSG(big[i] && (uintptr_t)big[i] % huge == 0, "array %zu at %p", i,
                      (const void *)big[i]);
        /* six arrays of at least 1 MiB, each rounded to whole huge pages
         * (Wqkv's 3 MiB to 4), biases on top */
        CHECK(w->bytes >= 5 * huge + 4 * MiB);
        CHECK(w->bytes < 5 * huge + 4 * MiB + huge + 64 * 1024);
        attn_weights_destroy(w);
    }
}

int main(void) {
    test_layouts();
    test_separate_square();
    test_prefix();
    test_dtype_values();
    test_reject_tensors();
    test_reject_options();
    test_metadata_options();
    test_file();
    test_alloc();
    test_alloc_bytes();
    return check_exit();
}
