/* fuzz_attend.c - libFuzzer target: the POST /attend body, end to end.
 *
 * Each input is a request body. attend_decode parses and validates it
 * against the two weight sets of fuzz_registry.h ("demo" and "cross").
 * Limits are small (64 tokens, batch 4, 4 MiB response) so that one input
 * stays cheap. When decoding succeeds the request is computed on a 1-thread
 * pool and encoded, and the response must:
 *   - parse as JSON with the project's own parser (jdoc_parse);
 *   - carry "output" (and "attention_weights" when asked, dense or the rows
 *     of weights_rows, or "attention_topk" with weights_topk) with the
 *     shapes the request implies, whose numbers read back bitwise equal to
 *     what the engine computed (shortest format and base64; with a fixed
 *     precision, equal to the value printf("%.*e") rounds to; top-k indices
 *     as integers or base64 int32);
 *   - carry the right "usage".
 * Anything else aborts with a message. attend_free runs on every path.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attend.h"
#include "json.h"
#include "models.h"
#include "numfmt.h"
#include "pool.h"
#include "weights.h"

static bool g_verbose;       /* ATTN_FUZZ_VERBOSE=1: one line per input (to check seeds) */
static const attend_limits g_lim = {
    .max_tokens = 64,
    .max_batch = 4,
    .max_response_bytes = 4u << 20,
    .max_compute_bytes = 64u << 20,
    .nworkers = 1,
};

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "fuzz_attend: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#include "fuzz_registry.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    fuzz_registry_init(argv);
    const char *vb = getenv("ATTN_FUZZ_VERBOSE");
    g_verbose = vb && *vb == '1';
    return 0;
}

/* ------------------------------------------------ checking the response */

/* The numbers of a tensor in the response, flattened, checking the nesting
 * against dim[0..rank). Returns the count written to dst (cap floats). */
static size_t flatten(const jv *v, const size_t *dim, int rank, float *dst, size_t cap,
                      const char *what) {
    if (v->type != JV_ARRAY) DIE("%s: expected an array, got %s", what, jv_type_name(v->type));
    if (v->u.arr.len != dim[0])
        DIE("%s: an array of %zu elements where the shape says %zu", what, v->u.arr.len, dim[0]);
    if (rank == 1) {
        if (!v->u.arr.f) DIE("%s: innermost array does not hold only numbers", what);
        if (v->u.arr.len > cap) DIE("%s: more numbers than expected", what);
        memcpy(dst, v->u.arr.f, v->u.arr.len * sizeof(float));
        return v->u.arr.len;
    }
    if (!v->u.arr.items) DIE("%s: numbers where arrays were expected", what);
    size_t got = 0;
    for (size_t i = 0; i < v->u.arr.len; i++)
        got += flatten(&v->u.arr.items[i], dim + 1, rank - 1, dst + got, cap - got, what);
    return got;
}

/* The float a fixed-precision encoding should read back as. */
static float rounded(float x, int digits) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*e", digits - 1, (double)x);
    return strtof(tmp, NULL);
}

/* want: count floats, or int32 when ints (top-k indices). */
static void check_tensor(const attend_req *r, const jv *v, const void *want, size_t count,
                         const size_t *dim, int rank, const char *what, bool ints) {
    if (!v) DIE("response has no \"%s\"", what);
    float *got = malloc((count ? count : 1) * sizeof(float));
    if (!got) DIE("out of memory");
    bool base64 = r->enc_out->kind == ENC_BASE64;
    if (base64) {
        if (v->type != JV_OBJECT) DIE("%s: expected a tensor object", what);
        const jv *dt = jv_get(v, "dtype"), *sh = jv_get(v, "shape"), *b64 = jv_get(v, "base64");
        if (!dt || dt->type != JV_STRING || strcmp(dt->u.str.s, ints ? "int32" : "float32"))
            DIE("%s.dtype is not \"%s\"", what, ints ? "int32" : "float32");
        if (!sh || sh->type != JV_ARRAY || !sh->u.arr.d || sh->u.arr.len != (size_t)rank)
            DIE("%s.shape is not an array of %d numbers", what, rank);
        for (int i = 0; i < rank; i++)
            if (sh->u.arr.d[i] != (double)dim[i])
                DIE("%s.shape[%d] = %g, expected %zu", what, i, sh->u.arr.d[i], dim[i]);
        if (!b64 || b64->type != JV_STRING) DIE("%s.base64 is not a string", what);
        if (base64_decoded_max(b64->u.str.len) > (count ? count : 1) * sizeof(float) + 2)
            DIE("%s.base64: %zu characters for %zu floats", what, b64->u.str.len, count);
        size_t bad = 0, n = base64_decode(got, b64->u.str.s, b64->u.str.len, &bad);
        if (n != count * sizeof(float))
            DIE("%s.base64 decodes to %zu bytes (bad at %zu), expected %zu", what, n, bad,
                count * sizeof(float));
    } else {
        size_t n = flatten(v, dim, rank, got, count, what);
        if (n != count) DIE("%s: %zu numbers, expected %zu", what, n, count);
    }
    for (size_t i = 0; i < count && ints; i++) {
        const int32_t wi = ((const int32_t *)want)[i];
        int32_t gi;
        memcpy(&gi, &got[i], sizeof gi);
        if (base64 ? gi != wi : (double)got[i] != (double)wi)
            DIE("%s[flat %zu]: response reads back %.9g, engine computed %d", what, i,
                base64 ? (double)gi : (double)got[i], wi);
    }
    for (size_t i = 0; i < count && !ints; i++) {
        const float wf = ((const float *)want)[i];
        float w = base64 || !r->precision ? wf : rounded(wf, r->precision);
        if (memcmp(&got[i], &w, sizeof w) != 0)
            DIE("%s[flat %zu]: response reads back %.9g, engine computed %.9g (expected %.9g, "
                "precision %d, base64 %d)",
                what, i, (double)got[i], (double)wf, (double)w, r->precision, base64);
    }
    free(got);
}

static void check_usage(const jv *u, const char *key, long want) {
    const jv *v = jv_get(u, key);
    if (!v || v->type != JV_NUMBER || v->u.num.d != (double)want)
        DIE("usage.%s missing or not %ld", key, want);
}

static void check_response(const attend_req *r, const buf *out) {
    char err[256];
    jdoc *doc = NULL;
    jdoc_status js = jdoc_parse(out->data, out->len, NULL, &doc, err, sizeof err);
    if (js != JDOC_OK)
        DIE("the response is not JSON (status %d): %s\n--- response (%zu bytes) ---\n%.*s", js, err,
            out->len, (int)(out->len < 4000 ? out->len : 4000), out->data);
    const jv *root = jdoc_root(doc);
    if (root->type != JV_OBJECT) DIE("the response is not an object");
    const jv *model = jv_get(root, "model");
    if (!model || model->type != JV_STRING || strcmp(model->u.str.s, r->model->name))
        DIE("response \"model\" is not '%s'", r->model->name);

    const attn_weights *w = r->model->w;
    const attn_input *in = &r->in;
    size_t d[4];
    int rk = 0;
    if (r->batched) d[rk++] = (size_t)in->B;
    d[rk++] = (size_t)in->n;
    d[rk++] = (size_t)w->E;
    check_tensor(r, jv_get(root, "output"), r->out, r->plan.out_floats, d, rk, "output", false);
    const jv *aw = jv_get(root, "attention_weights"), *tk = jv_get(root, "attention_topk");
    rk = 0;
    if (r->batched) d[rk++] = (size_t)in->B;
    if (!in->average_heads) d[rk++] = (size_t)w->H;
    d[rk++] = (size_t)(in->rows ? in->nrows : in->n);
    d[rk++] = (size_t)(in->topk > 0 ? in->topk : r->plan.M);
    if (in->topk > 0) {
        if (aw) DIE("attention_weights present beside attention_topk");
        if (!tk || tk->type != JV_OBJECT) DIE("response has no \"attention_topk\" object");
        check_tensor(r, jv_get(tk, "indices"), r->indices, r->plan.index_count, d, rk,
                     "attention_topk.indices", true);
        check_tensor(r, jv_get(tk, "values"), r->weights, r->plan.weight_floats, d, rk,
                     "attention_topk.values", false);
        for (size_t i = 0; i < r->plan.weight_floats; i++)
            if (r->indices[i] < 0 || r->indices[i] >= r->plan.M || !(r->weights[i] >= 0.0f))
                DIE("attention_topk[flat %zu]: index %d (M %d), value %g", i, r->indices[i],
                    r->plan.M, (double)r->weights[i]);
    } else if (in->need_weights || in->rows) {
        if (tk) DIE("attention_topk present without weights_topk");
        check_tensor(r, aw, r->weights, r->plan.weight_floats, d, rk, "attention_weights", false);
    } else if (aw || tk) {
        DIE("attention weights present although none were asked for");
    }
    const jv *u = jv_get(root, "usage");
    if (!u || u->type != JV_OBJECT) DIE("response has no \"usage\" object");
    check_usage(u, "batch", in->B);
    check_usage(u, "query_tokens", in->n);
    check_usage(u, "key_tokens", in->m);
    check_usage(u, "heads", w->H);
    jdoc_free(doc);
}

/* ------------------------------------------------------------ the target */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    attend_req r;
    /* a copy of exactly size bytes, so ASan catches any read past the body */
    char *body = malloc(size ? size : 1);
    if (!body) return 0;
    if (size) memcpy(body, data, size);

    err[0] = '\0';
    http_error e = attend_decode(&r, body, size, g_reg, &g_lim, err, sizeof err);
    if (e != HERR_NONE) {
        if (!err[0]) DIE("attend_decode failed (%s) without a message", http_error_type(e));
        if (http_error_status(e) < 400 || http_error_status(e) > 503)
            DIE("attend_decode: status %d for a bad request", http_error_status(e));
    } else {
        if (!r.model || !r.in.query || !r.out || (attn_wants_weights(&r.in) && !r.weights) ||
            (r.in.topk > 0 && !r.indices))
            DIE("attend_decode succeeded with a half-built request");
        if (r.in.B < 1 || r.in.B > g_lim.max_batch || r.in.n < 1 || r.in.n > g_lim.max_tokens ||
            r.in.m < 1 || r.in.m > g_lim.max_tokens)
            DIE("attend_decode accepted B=%d n=%d m=%d beyond the limits", r.in.B, r.in.n, r.in.m);
        if (r.response_estimate > g_lim.max_response_bytes)
            DIE("attend_decode accepted a response estimate of %zu bytes", r.response_estimate);
        e = attend_compute(&r, g_pool, err, sizeof err);
        if (e == HERR_NONE) {
            answer ans;
            e = attend_encode(&r, &ans, g_pool, err, sizeof err);
            buf out; /* the pieces joined */
            buf_init(&out, (size_t)-1 / 2);
            for (int k = 0; k < ans.n; k++) buf_append(&out, ans.pieces[k].p, ans.pieces[k].len);
            if (e != HERR_NONE)
                DIE("attend_encode failed on a request whose estimate was %zu bytes: %s",
                    r.response_estimate, err);
            if (out.len > r.response_estimate)
                DIE("the response is %zu bytes, above its estimate of %zu", out.len,
                    r.response_estimate);
            check_response(&r, &out);
            buf_free(&out);
            answer_free(&ans);
        } else if (e != HERR_INVALID_REQUEST) {
            DIE("attend_compute failed with %s: %s", http_error_type(e), err);
        }
    }
    if (g_verbose)
        fprintf(stderr, "fuzz_attend: %zu bytes: %s%s%s\n", size, e ? http_error_type(e) : "200",
                e ? ": " : "", e ? err : "");
    attend_free(&r);
    free(body);
    return 0;
}
