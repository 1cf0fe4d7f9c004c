/* gen_seeds.c - writes the committed seed corpora of the fuzz targets.
 *
 *   make fuzz-seeds        (= build this, run it with tests/fuzz/corpus)
 *
 * Deterministic: the same files every time. Kept small on purpose (the whole
 * corpus well under 300 KB): the fuzzer grows its own corpus under build/.
 *   corpus/attend/       /attend bodies: self and cross attention, batches,
 *                        nested arrays and base64 tensors, every mask form,
 *                        flags, precision, top-k and weight rows; and
 *                        invalid ones of each kind
 *   corpus/safetensors/  tiny weight files of every layout and dtype, and
 *                        broken ones (bad lengths, gaps, NaN, dup keys, ...)
 *   corpus/numfmt/       number tokens (halfway cases, extremes), raw float
 *                        bytes, base64 text
 *   corpus/json_diff/    JSON documents, valid and invalid
 * The weight geometry matches fuzz_attend's registry: "demo" E=64 H=4 and
 * "cross" E=8 H=2 kdim=4 vdim=6 (bias_k/bias_v, add_zero_attn).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_root;
static int g_count;

static void put_file(const char *dir, const char *name, const void *data, size_t len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", g_root, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        perror(path);
        exit(1);
    }
    g_count++;
}

/* ------------------------------------------------------------ text builder */

typedef struct {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) exit(1);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static uint32_t g_seed = 20240101;
static float rnd(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* A nested array of random numbers of the given shape. */
static void sb_tensor(sbuf *b, const int *dim, int rank) {
    sb_printf(b, "[");
    for (int i = 0; i < dim[0]; i++) {
        if (i) sb_printf(b, ",");
        if (rank == 1)
            sb_printf(b, "%.3g", (double)rnd());
        else
            sb_tensor(b, dim + 1, rank - 1);
    }
    sb_printf(b, "]");
}

/* A nested array of booleans (pattern: masked where (i*7+3) % 5 == 0). */
static int g_bool_i;
static void sb_bools(sbuf *b, const int *dim, int rank) {
    sb_printf(b, "[");
    for (int i = 0; i < dim[0]; i++) {
        if (i) sb_printf(b, ",");
        if (rank == 1)
            sb_printf(b, "%s", (g_bool_i++ * 7 + 3) % 5 == 0 ? "true" : "false");
        else
            sb_bools(b, dim + 1, rank - 1);
    }
    sb_printf(b, "]");
}

static const char b64a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void sb_base64(sbuf *b, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        sb_printf(b, "%c%c%c%c", b64a[v >> 18], b64a[(v >> 12) & 63],
                  i + 1 < n ? b64a[(v >> 6) & 63] : '=', i + 2 < n ? b64a[v & 63] : '=');
    }
}

/* {"dtype":"float32","shape":[...],"base64":"..."} of random floats, or of
 * 0/1 bytes with dtype bool. */
static void sb_b64_tensor(sbuf *b, const int *dim, int rank, int is_bool) {
    size_t count = 1;
    for (int i = 0; i < rank; i++) count *= (size_t)dim[i];
    sb_printf(b, "{\"dtype\":\"%s\",\"shape\":[", is_bool ? "bool" : "float32");
    for (int i = 0; i < rank; i++) sb_printf(b, i ? ",%d" : "%d", dim[i]);
    sb_printf(b, "],\"base64\":\"");
    unsigned char *bytes = malloc(count * 4);
    for (size_t i = 0; i < count; i++) {
        if (is_bool) {
            bytes[i] = (i * 7 + 3) % 5 == 0;
        } else {
            float f = rnd();
            memcpy(bytes + 4 * i, &f, 4);
        }
    }
    sb_base64(b, bytes, is_bool ? count : count * 4);
    free(bytes);
    sb_printf(b, "\"}");
}

static void put_sb(const char *dir, const char *name, sbuf *b) {
    put_file(dir, name, b->s, b->len);
    b->len = 0;
}

/* ------------------------------------------------------------------ attend */

static void gen_attend(void) {
    sbuf b = {0};
    const char *d = "attend";
#define DIMS(...) ((const int[]){__VA_ARGS__})

    sb_printf(&b, "{\"model\":\"demo\",\"embeddings\":");
    sb_tensor(&b, DIMS(2, 64), 2);
    sb_printf(&b, "}");
    put_sb(d, "self-2x64", &b);

    sb_printf(&b, "{\"embeddings\":");
    sb_tensor(&b, DIMS(2, 3, 64), 3);
    sb_printf(&b, ",\"need_weights\":false,\"causal\":true}");
    put_sb(d, "self-batch-noweights-causal", &b);

    sb_printf(&b, "{\"embeddings\":");
    sb_b64_tensor(&b, DIMS(3, 64), 2, 0);
    sb_printf(&b, ",\"encoding_format\":\"base64\",\"average_heads\":true}");
    put_sb(d, "self-base64", &b);

    sb_printf(&b, "{\"model\":\"demo\",\"embeddings\":");
    sb_tensor(&b, DIMS(3, 64), 2);
    sb_printf(&b, ",\"key_padding_mask\":");
    sb_bools(&b, DIMS(3), 1);
    sb_printf(&b, ",\"attn_mask\":");
    sb_bools(&b, DIMS(3, 3), 2);
    sb_printf(&b, ",\"precision\":3}");
    put_sb(d, "self-masks-bool-precision3", &b);

    sb_printf(&b, "{\"embeddings\":");
    sb_tensor(&b, DIMS(2, 64), 2);
    sb_printf(&b, ",\"attn_mask\":");
    sb_b64_tensor(&b, DIMS(4, 2, 2), 3, 1);
    sb_printf(&b, ",\"key_padding_mask\":");
    sb_b64_tensor(&b, DIMS(2), 1, 0);
    sb_printf(&b, ",\"precision\":9}");
    put_sb(d, "self-masks-base64", &b);

    sb_printf(&b, "{\"embeddings\":");
    sb_tensor(&b, DIMS(2, 2, 64), 3);
    sb_printf(&b, ",\"attn_mask\":");
    sb_tensor(&b, DIMS(2, 4, 2, 2), 4);
    sb_printf(&b, ",\"key_padding_mask\":");
    sb_tensor(&b, DIMS(2, 2), 2);
    sb_printf(&b, ",\"precision\":1,\"average_heads\":false}");
    put_sb(d, "self-batch-mask4d-float", &b);

    sb_printf(&b, "{\"model\":\"cross\",\"query\":");
    sb_tensor(&b, DIMS(2, 8), 2);
    sb_printf(&b, ",\"key\":");
    sb_tensor(&b, DIMS(3, 4), 2);
    sb_printf(&b, ",\"value\":");
    sb_tensor(&b, DIMS(3, 6), 2);
    sb_printf(&b, "}");
    put_sb(d, "cross-kdim4-vdim6", &b);

    sb_printf(&b, "{\"model\":\"cross\",\"query\":");
    sb_tensor(&b, DIMS(2, 2, 8), 3);
    sb_printf(&b, ",\"key\":");
    sb_tensor(&b, DIMS(2, 3, 4), 3);
    sb_printf(&b, ",\"value\":");
    sb_b64_tensor(&b, DIMS(2, 3, 6), 3, 0);
    sb_printf(&b, ",\"key_padding_mask\":");
    sb_bools(&b, DIMS(2, 3), 2);
    sb_printf(&b, ",\"attn_mask\":");
    sb_tensor(&b, DIMS(2, 2, 3), 3);
    sb_printf(&b, ",\"causal\":true,\"encoding_format\":\"base64\"}");
    put_sb(d, "cross-batch-masks", &b);

    sb_printf(&b, "{\"model\":\"demo\",\"query\":");
    sb_tensor(&b, DIMS(1, 64), 2);
    sb_printf(&b, ",\"key\":");
    sb_tensor(&b, DIMS(2, 64), 2);
    sb_printf(&b, ",\"value\":");
    sb_tensor(&b, DIMS(2, 64), 2);
    sb_printf(&b, ",\"need_weights\":true,\"average_heads\":true,\"encoding_format\":\"float\"}");
    put_sb(d, "cross-demo", &b);

    /* invalid requests, one problem each (X: a valid cross-attention start) */
#define X                                                                                          \
    "{\"model\":\"cross\",\"query\":[[1,2,3,4,5,6,7,8]],\"key\":[[1,2,3,4],[5,6,7,8]],"            \
    "\"value\":[[1,2,3,4,5,6],[6,5,4,3,2,1]]"
    static const char *const bad[][2] = {
        {"bad-json", "{\"embeddings\":[[1,2],}"},
        {"bad-not-object", "[1,2,3]"},
        {"bad-dupkey", "{\"causal\":true,\"causal\":false}"},
        {"bad-unknown-field", "{\"embedding\":[[1]]}"},
        {"bad-missing-input", "{\"model\":\"demo\"}"},
        {"bad-model", "{\"model\":\"nope\",\"embeddings\":[[1]]}"},
        {"bad-model-type", "{\"model\":3,\"embeddings\":[[1]]}"},
        {"bad-width", "{\"embeddings\":[[1,2,3]]}"},
        {"bad-ragged", "{\"embeddings\":[[1,2],[3]]}"},
        {"bad-empty", "{\"embeddings\":[]}"},
        {"bad-rank", "{\"embeddings\":[[[[1]]]]}"},
        {"bad-string-leaf", "{\"embeddings\":[[\"a\"]]}"},
        {"bad-overflow", "{\"model\":\"cross\",\"query\":[[1,2,3,4,5,6,7,1e39]],\"key\":[[1,2,3,4]]"
                         ",\"value\":[[1,2,3,4,5,6]]}"},
        {"bad-half-cross", "{\"query\":[[1]],\"key\":[[1]]}"},
        {"bad-both", "{\"embeddings\":[[1]],\"query\":[[1]],\"key\":[[1]],\"value\":[[1]]}"},
        {"bad-b64-chars",
         X ",\"key_padding_mask\":{\"dtype\":\"bool\",\"shape\":[2],\"base64\":\"AA!=\"}}"},
        {"bad-b64-len",
         "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[1,64],\"base64\":\"AAAA\"}}"},
        {"bad-b64-dtype",
         "{\"embeddings\":{\"dtype\":\"int8\",\"shape\":[1,1],\"base64\":\"AA==\"}}"},
        {"bad-b64-shape",
         "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[0.5,64],\"base64\":\"\"}}"},
        {"bad-b64-huge", "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[1000000000000000,"
                         "1000000000000000,64],\"base64\":\"\"}}"},
        {"bad-b64-key", "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[1,1],\"base64\":"
                        "\"AAAAAA==\",\"x\":1}}"},
        {"bad-precision", "{\"embeddings\":[[1]],\"precision\":10}"},
        {"bad-precision-frac", "{\"embeddings\":[[1]],\"precision\":2.5}"},
        {"bad-encoding", "{\"embeddings\":[[1]],\"encoding_format\":\"hex\"}"},
        {"bad-flag", "{\"embeddings\":[[1]],\"causal\":1}"},
        {"bad-null-fields", "{\"model\":null,\"embeddings\":null}"},
        {"bad-kpm-shape", X ",\"key_padding_mask\":[true,false,true]}"},
        {"bad-mask-heads", X ",\"attn_mask\":[[[true,false]],[[false,true]],[[true,true]]]}"},
        {"bad-mask-b64-nan",
         X ",\"attn_mask\":{\"dtype\":\"float32\",\"shape\":[1,2],\"base64\":\"AADAfwAAgD8=\"}}"},
        {"bad-mask-mixed", X ",\"attn_mask\":[[true,0]]}"},
        {"ok-cross-kpm-b64-bool", X ",\"key_padding_mask\":{\"dtype\":\"bool\",\"shape\":[2],"
                                    "\"base64\":\"AAE=\"},\"precision\":5}"},
        {"ok-cross-mask-all-masked", X ",\"attn_mask\":[[true,true]],\"average_heads\":true}"},
        {"bad-cross-model-self", "{\"model\":\"cross\",\"embeddings\":[[1,2,3,4,5,6,7,8]]}"},
        {"ok-cross-topk-masks", X ",\"weights_topk\":3,\"attn_mask\":[[true,false]],"
                                  "\"key_padding_mask\":[true,true],\"average_heads\":true}"},
        {"bad-topk-zero", X ",\"weights_topk\":0}"},
        {"bad-topk-over-m", X ",\"weights_topk\":5}"},
        {"bad-rows-twice", X ",\"weights_rows\":[0,0]}"},
        {"bad-rows-range", X ",\"weights_rows\":[1]}"},
        {"bad-topk-and-rows", X ",\"weights_topk\":1,\"weights_rows\":[0]}"},
        {"bad-topk-no-weights", X ",\"weights_topk\":1,\"need_weights\":false}"},
        {"bad-cross-kdim", "{\"model\":\"cross\",\"query\":[[1,2,3,4,5,6,7,8]],\"key\":[[1,2,3]],"
                           "\"value\":[[1,2,3,4,5,6]]}"},
        {"bad-cross-batch", "{\"model\":\"cross\",\"query\":[[[1,2,3,4,5,6,7,8]]],\"key\":[[[1,2,3,"
                            "4]],[[1,2,3,4]]],\"value\":[[[1,2,3,4,5,6]]]}"},
    };
#undef X
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        put_file(d, bad[i][0], bad[i][1], strlen(bad[i][1]));

    /* over the limits of fuzz_attend (64 tokens, batch 4) */
    sb_printf(
        &b,
        "{\"model\":\"cross\",\"query\":{\"dtype\":\"float32\",\"shape\":[65,8],\"base64\":\"\"},"
        "\"key\":[[1,2,3,4]],\"value\":[[1,2,3,4,5,6]]}");
    put_sb(d, "bad-too-many-tokens", &b);
    sb_printf(&b, "{\"model\":\"cross\",\"query\":");
    sb_tensor(&b, DIMS(5, 1, 8), 3);
    sb_printf(&b, ",\"key\":");
    sb_tensor(&b, DIMS(5, 1, 4), 3);
    sb_printf(&b, ",\"value\":");
    sb_tensor(&b, DIMS(5, 1, 6), 3);
    sb_printf(&b, "}");
    put_sb(d, "bad-batch-5", &b);
    free(b.s);
}

/* /attend bodies with the long-context forms of weights; written last, so
 * that the random numbers of the seeds above stay as they were. */
static void gen_attend_forms(void) {
    sbuf b = {0};
    const char *d = "attend";
    sb_printf(&b, "{\"embeddings\":");
    sb_tensor(&b, DIMS(2, 3, 64), 3);
    sb_printf(&b, ",\"weights_rows\":[2,0],\"average_heads\":true,\"causal\":true}");
    put_sb(d, "self-batch-rows-avg", &b);

    sb_printf(&b, "{\"embeddings\":");
    sb_b64_tensor(&b, DIMS(4, 64), 2, 0);
    sb_printf(&b, ",\"weights_topk\":3,\"need_weights\":true,\"encoding_format\":\"base64\"}");
    put_sb(d, "self-topk-base64", &b);
    free(b.s);
}

/* -------------------------------------------------------------- safetensors */

typedef struct {
    const char *name, *dtype;
    int ndim;
    size_t shape[3];
} st_spec;

static size_t dsize(const char *dt) {
    if (!strcmp(dt, "F64") || !strcmp(dt, "I64")) return 8;
    if (!strcmp(dt, "F32") || !strcmp(dt, "I32")) return 4;
    if (!strcmp(dt, "F16") || !strcmp(dt, "BF16") || !strcmp(dt, "I16")) return 2;
    return 1;
}

/* One value as dtype bytes (little-endian). */
static void put_value(unsigned char *p, const char *dt, float v) {
    if (!strcmp(dt, "F32")) {
        memcpy(p, &v, 4);
    } else if (!strcmp(dt, "F64")) {
        double x = v;
        memcpy(p, &x, 8);
    } else if (!strcmp(dt, "BF16")) {
        uint32_t u;
        memcpy(&u, &v, 4);
        p[0] = (unsigned char)(u >> 16);
        p[1] = (unsigned char)(u >> 24);
    } else if (!strcmp(dt, "F16")) {
        /* small values in [-1, 1]: sign, exponent 15 - k, 10 bits mantissa */
        uint16_t h = 0;
        float a = v < 0 ? -v : v;
        if (a >= 0x1p-14f) {
            int e = 0;
            while (a >= 2.0f) a /= 2, e++;
            while (a < 1.0f) a *= 2, e--;
            h = (uint16_t)((e + 15) << 10 | (uint16_t)((a - 1.0f) * 1024.0f));
        }
        if (v < 0) h |= 0x8000;
        p[0] = (unsigned char)h;
        p[1] = (unsigned char)(h >> 8);
    } else {
        memset(p, 1, dsize(dt));
    }
}

/* A file with the given tensors (in order, contiguous), metadata JSON text
 * (NULL = none), random values. pad_header pads with spaces to 8 bytes. */
static void gen_st(const char *name, const st_spec *t, int nt, const char *meta) {
    sbuf h = {0};
    size_t off = 0;
    sb_printf(&h, "{");
    if (meta) sb_printf(&h, "\"__metadata__\":%s", meta);
    for (int i = 0; i < nt; i++) {
        size_t n = dsize(t[i].dtype);
        for (int k = 0; k < t[i].ndim; k++) n *= t[i].shape[k];
        sb_printf(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", (meta || i) ? "," : "", t[i].name,
                  t[i].dtype);
        for (int k = 0; k < t[i].ndim; k++) sb_printf(&h, k ? ",%zu" : "%zu", t[i].shape[k]);
        sb_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + n);
        off += n;
    }
    sb_printf(&h, "}");
    while (h.len % 8) sb_printf(&h, " ");
    size_t len = 8 + h.len + off;
    unsigned char *file = calloc(1, len);
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    memcpy(file + 8, h.s, h.len);
    unsigned char *p = file + 8 + h.len;
    for (int i = 0; i < nt; i++) {
        size_t n = 1, es = dsize(t[i].dtype);
        for (int k = 0; k < t[i].ndim; k++) n *= t[i].shape[k];
        for (size_t k = 0; k < n; k++, p += es) put_value(p, t[i].dtype, rnd() * 0.5f);
    }
    put_file("safetensors", name, file, len);
    free(file);
    free(h.s);
}

static void gen_safetensors(void) {
    /* torch packed, E=4, H=2 from metadata */
    const st_spec packed[] = {{"in_proj_weight", "F32", 2, {12, 4}},
                              {"in_proj_bias", "F32", 1, {12}},
                              {"out_proj.weight", "F32", 2, {4, 4}},
                              {"out_proj.bias", "F32", 1, {4}}};
    gen_st("torch-packed-f32", packed, 4, "{\"num_heads\":\"2\",\"add_zero_attn\":\"false\"}");
    gen_st("torch-packed-noheads", packed, 4, NULL);

    /* torch separate under "layer.", F16, kdim 2, vdim 3, bias_k/bias_v */
    const st_spec sep[] = {
        {"layer.q_proj_weight", "F16", 2, {2, 2}},   {"layer.k_proj_weight", "F16", 2, {2, 2}},
        {"layer.v_proj_weight", "F16", 2, {2, 3}},   {"layer.in_proj_bias", "F16", 1, {6}},
        {"layer.out_proj.weight", "F16", 2, {2, 2}}, {"layer.out_proj.bias", "F16", 1, {2}},
        {"layer.bias_k", "F16", 3, {1, 1, 2}},       {"layer.bias_v", "F16", 3, {1, 1, 2}}};
    gen_st("torch-separate-f16-prefix", sep, 8, "{\"num_heads\":\"1\",\"add_zero_attn\":\"true\"}");

    /* Hugging Face, BF16, o_proj, no biases */
    const st_spec hf[] = {{"layer.q_proj.weight", "BF16", 2, {4, 4}},
                          {"layer.k_proj.weight", "BF16", 2, {4, 4}},
                          {"layer.v_proj.weight", "BF16", 2, {4, 4}},
                          {"layer.o_proj.weight", "BF16", 2, {4, 4}}};
    gen_st("hf-bf16-oproj", hf, 4, "{\"num_heads\":\"2\"}");

    /* BERT, F64 */
    const st_spec bert[] = {{"attention.self.query.weight", "F64", 2, {2, 2}},
                            {"attention.self.query.bias", "F64", 1, {2}},
                            {"attention.self.key.weight", "F64", 2, {2, 2}},
                            {"attention.self.key.bias", "F64", 1, {2}},
                            {"attention.self.value.weight", "F64", 2, {2, 2}},
                            {"attention.self.value.bias", "F64", 1, {2}},
                            {"attention.output.dense.weight", "F64", 2, {2, 2}},
                            {"attention.output.dense.bias", "F64", 1, {2}}};
    gen_st("bert-f64", bert, 8, "{\"num_heads\":\"2\"}");

    /* refused as a layer: wrong shapes, dtype, missing bias, not divisible */
    const st_spec badshape[] = {{"in_proj_weight", "F32", 2, {9, 4}},
                                {"out_proj.weight", "F32", 2, {4, 4}}};
    gen_st("layer-bad-shape", badshape, 2, "{\"num_heads\":\"2\"}");
    const st_spec i8[] = {{"in_proj_weight", "I8", 2, {6, 2}},
                          {"out_proj.weight", "I8", 2, {2, 2}}};
    gen_st("layer-int8", i8, 2, "{\"num_heads\":\"1\"}");
    gen_st("layer-heads-3", packed, 4, "{\"num_heads\":\"3\"}");
    const st_spec halfbias[] = {{"in_proj_weight", "F32", 2, {6, 2}},
                                {"in_proj_bias", "F32", 1, {6}},
                                {"out_proj.weight", "F32", 2, {2, 2}}};
    gen_st("layer-half-bias", halfbias, 3, "{\"num_heads\":\"1\"}");
    const st_spec other[] = {{"weight", "U8", 1, {3}}, {"bias", "BOOL", 0, {0}}};
    gen_st("not-a-layer", other, 2, "{\"x\":\"\\u00e9\\ud83d\\ude00\"}");

    /* refused as a file */
    static const struct {
        const char *name, *header, *data;
        size_t datalen;
    } raw[] = {
        {"file-empty-header", "{}", "", 0},
        {"file-gap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         "\0\0\0\0\0\0\0\0", 8},
        {"file-overlap",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\","
         "\"shape\":[4],\"data_offsets\":[0,4]}}",
         "\0\0\0\0", 4},
        {"file-trailing", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", "abc",
         3},
        {"file-size-mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
         "abcd", 4},
        {"file-dup-name",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\","
         "\"shape\":[1],\"data_offsets\":[1,2]}}",
         "ab", 2},
        {"file-bad-dtype", "{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "a",
         1},
        {"file-nan",
         "{\"in_proj_weight\":{\"dtype\":\"F32\",\"shape\":[3,1],\"data_offsets\":[0,12]},\"out_"
         "proj.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[12,16]},\"__metadata__"
         "\":{\"num_heads\":\"1\"}}",
         "\0\0\xc0\x7f\0\0\x80\x3f\0\0\x80\x3f\0\0\x80\x7f", 16},
        {"file-overflow-shape",
         "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", "",
         0},
        {"file-nul-escape",
         "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "a", 1},
        {"file-meta-not-string", "{\"__metadata__\":{\"num_heads\":2}}", "", 0},
        {"file-scalar", "{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}",
         "12345678", 8},
        {"file-zero-dim", "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}", "",
         0},
    };
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        size_t hl = strlen(raw[i].header), len = 8 + hl + raw[i].datalen;
        unsigned char *file = malloc(len);
        for (int k = 0; k < 8; k++) file[k] = (unsigned char)((uint64_t)hl >> (8 * k));
        memcpy(file + 8, raw[i].header, hl);
        memcpy(file + 8 + hl, raw[i].data, raw[i].datalen);
        put_file("safetensors", raw[i].name, file, len);
        free(file);
    }
    put_file("safetensors", "file-short", "\x02\0\0\0", 4);
    put_file("safetensors", "file-hlen-past-end", "\xff\0\0\0\0\0\0\0{}", 10);
    put_file("safetensors", "file-hlen-huge", "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
}

/* ------------------------------------------------------------------ numfmt */

static void gen_numfmt(void) {
    static const char *const nums[] = {
        "0",
        "-0",
        "1",
        "-1",
        "0.1",
        "1.5e10",
        "3.4028235e38",
        "3.4028236e38",
        "1e39",
        "1.17549435e-38",
        "1e-45",
        "7e-46",
        "1.401298464324817e-45",
        "2.2250738585072014e-308",
        "4.9e-324",
        "1.7976931348623157e308",
        "1.8e308",
        "123456789012345678901234567890",
        "9007199254740993",
        "18446744073709551616",
        "0.30000000000000004",
        "1.00000005960464477539062500000000000000001",
        "1.000000059604644775390625",
        "16777217",
        "33554431.999999999999999",
        "1e22",
        "1e23",
        "123e30",
        "1E-7",
        "-2.5E+5",
        "0.000001",
        "100000000000000000000000000000000000000e-38",
        "0."
        "000000000000000000000000000000000000000000001401298464324817070923729583289916131280261941"
        "87651577175706828388979108268586060148663818836212158203125",
    };
    char name[32];
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        snprintf(name, sizeof name, "num-%02zu", i);
        put_file("numfmt", name, nums[i], strlen(nums[i]));
    }
    static const float floats[] = {0.1f,   1e-7f,       3.4028235e38f, 1.17549435e-38f,
                                   1e-45f, -0.0f,       123456789.0f,  1e10f,
                                   0.5f,   9.999999e8f, 1e-5f,         9.99999e-6f};
    put_file("numfmt", "floats", floats, sizeof floats);
    put_file("numfmt", "b64-pad2", "QQ==", 4);
    put_file("numfmt", "b64-pad1", "QUI=", 4);
    put_file("numfmt", "b64-full", "QUJDRA+/", 8);
    put_file("numfmt", "b64-bad-bits", "QR==", 4);
}

/* ------------------------------------------------------------------ json */

static void gen_json(void) {
    static const char *const docs[] = {
        "{\"a\":[1,2.5,-3e10,{\"b\":null}],\"c\":\"x\\u00e9\\ud83d\\ude00\\n\\\"\",\"d\":true,"
        "\"e\":false}",
        "[[],{},[[]],\"\",0,-0,0.0e+0]",
        "  \"\\/\\b\\f\\n\\r\\t\\\\\"  ",
        "1e309",
        "-123456789012345678901234567890",
        "[1,2,\"mixed\",3,[4,5],6]",
        "{\"\":{\"\":[]}}",
        "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
        "{\"k\":1,\"k\":2}",
        "[1,]",
        "{\"a\":1,}",
        "[01]",
        "[1.]",
        "[.5]",
        "[-]",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"\\x\"",
        "\"\xed\xa0\x80\"",
        "\"\xc0\xaf\"",
        "\"\x01\"",
        "[NaN]",
        "[Infinity]",
        "nul",
        "[1] x",
        "{\"a\" 1}",
        "[\"a\",\"b\"",
        "",
        " ",
        "truefalse",
        "[true,false,null]",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    };
    char name[32];
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        snprintf(name, sizeof name, "doc-%02zu", i);
        put_file("json_diff", name, docs[i], strlen(docs[i]));
    }
    put_file("json_diff", "doc-nul-byte", "[1,\0 2]", 7);
    put_file("json_diff", "doc-nul-in-string", "\"a\0b\"", 5);
    put_file("json_diff", "doc-nul-after-token", "[1\0,true\0]", 10); /* jansson accepts */
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR (with attend/ safetensors/ numfmt/ json_diff/)\n",
                argv[0]);
        return 2;
    }
    g_root = argv[1];
    gen_attend();
    gen_safetensors();
    gen_numfmt();
    gen_json();
    gen_attend_forms();
    printf("gen_seeds: wrote %d files under %s\n", g_count, g_root);
    return 0;
}
