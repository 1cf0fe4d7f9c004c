/* fuzz_v2.c - libFuzzer target: a v2 infer body (JSON header and binary
 * tensors), end to end.
 *
 * Input layout: byte 0 picks the model (bit 0: "demo" or "cross") and
 * whether the request sends Inference-Header-Content-Length (bit 1); bytes
 * 1-2 are that length (little-endian, may point past the body); the rest is
 * the body, copied into a buffer of exactly its size so ASan catches any read
 * past it. v2_decode parses and validates it (the weight sets of
 * fuzz_registry.h, small limits). When it succeeds the request is computed
 * on a 1-thread pool and encoded, and the answer must:
 *   - have a JSON head that jdoc_parse accepts, with model_name, "1", and
 *     one entry per output the request asked for, in its order, whose
 *     shape and datatype are what the request implies (top-k indices
 *     INT32);
 *   - carry each binary output as exactly binary_data_size bytes, in order,
 *     and nothing after them; each JSON output with as many numbers as its
 *     shape holds.
 * Anything else aborts with a message. attend_free and answer_free run on
 * every path.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "json.h"
#include "v2.h"

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "fuzz_v2: " __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#include "fuzz_registry.h"

static const attend_limits g_lim = {
    .max_tokens = 64,
    .max_batch = 4,
    .max_response_bytes = 4u << 20,
    .max_compute_bytes = 64u << 20,
    .nworkers = 1,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    fuzz_registry_init(argv);
    return 0;
}

static size_t count_numbers(const jv *v) {
    if (v->type == JV_NUMBER) return 1;
    if (v->type != JV_ARRAY) DIE("data holds a %s", jv_type_name(v->type));
    if (v->u.arr.f) return v->u.arr.len;
    size_t n = 0;
    for (size_t i = 0; i < v->u.arr.len; i++) n += count_numbers(&v->u.arr.items[i]);
    return n;
}

static void check_answer(const attend_req *r, const answer *a) {
    char err[256];
    jdoc *doc = NULL;
    if (a->n < 1 || a->text.len) DIE("the answer is not sealed");
    size_t head_len = a->binary ? a->header_len : answer_len(a);
    /* the JSON (header) may span several pieces when encoded in chunks */
    char *head = malloc(head_len + 1);
    size_t at = 0;
    int p = 0;
    for (; p < a->n && at < head_len; p++) {
        if (at + a->pieces[p].len > head_len) DIE("a piece straddles the header's end");
        memcpy(head + at, a->pieces[p].p, a->pieces[p].len);
        at += a->pieces[p].len;
    }
    if (at != head_len) DIE("the pieces hold %zu header bytes, header_len says %zu", at, head_len);
    int first_raw = p;
    if (jdoc_parse(head, head_len, NULL, &doc, err, sizeof err) != JDOC_OK)
        DIE("the answer's JSON head does not parse: %s", err);
    const jv *root = jdoc_root(doc), *name = jv_get(root, "model_name"),
             *ver = jv_get(root, "model_version"), *outs = jv_get(root, "outputs");
    if (!name || name->type != JV_STRING || strcmp(name->u.str.s, r->model->name))
        DIE("model_name is not '%s'", r->model->name);
    if (!ver || ver->type != JV_STRING || strcmp(ver->u.str.s, "1")) DIE("model_version is not 1");
    if (!outs || outs->type != JV_ARRAY) DIE("no outputs array");
    static const char *const names[4] = {"output", "attention_weights", "attention_topk_indices",
                                         "attention_topk_values"};
    if (outs->u.arr.len != (size_t)r->noutputs)
        DIE("%zu outputs, expected %d", outs->u.arr.len, r->noutputs);
    int seg = first_raw;
    for (size_t i = 0; i < outs->u.arr.len; i++) {
        const jv *o = &outs->u.arr.items[i], *on = jv_get(o, "name"), *sh = jv_get(o, "shape");
        if (!on || on->type != JV_STRING || !sh || sh->type != JV_ARRAY || !sh->u.arr.d)
            DIE("outputs[%zu] lacks a name or a shape", i);
        if (r->outputs[i] >= 4 || strcmp(on->u.str.s, names[r->outputs[i]]))
            DIE("outputs[%zu] is %s, expected %s", i, on->u.str.s,
                r->outputs[i] < 4 ? names[r->outputs[i]] : "?");
        const bool ints = r->outputs[i] == 2;
        const jv *dt = jv_get(o, "datatype");
        if (!dt || dt->type != JV_STRING ||
            strcmp(dt->u.str.s, ints ? "INT32" : tdtype_name(r->out_dtype)))
            DIE("%s: datatype is not %s", on->u.str.s, ints ? "INT32" : tdtype_name(r->out_dtype));
        size_t dim[4];
        int rk = !strcmp(on->u.str.s, "output") ? attend_out_shape(r, dim)
                                                : attend_weights_shape(r, dim);
        if (sh->u.arr.len != (size_t)rk) DIE("%s: rank %zu, expected %d", on->u.str.s, sh->u.arr.len, rk);
        size_t count = 1;
        for (int k = 0; k < rk; k++) {
            if (sh->u.arr.d[k] != (double)dim[k]) DIE("%s: shape[%d] is wrong", on->u.str.s, k);
            count *= dim[k];
        }
        const jv *par = jv_get(o, "parameters"), *data = jv_get(o, "data");
        const jv *bs = par ? jv_get(par, "binary_data_size") : NULL;
        if (bs) {
            size_t esize = ints || r->out_dtype == TD_FP32 ? 4 : 2;
            if (seg >= a->n || bs->type != JV_NUMBER || bs->u.num.d != (double)(count * esize) ||
                a->pieces[seg].len != count * esize)
                DIE("%s: binary_data_size does not match its %zu elements or its segment",
                    on->u.str.s, count);
            seg++;
        } else {
            if (!data) DIE("%s: neither data nor binary_data_size", on->u.str.s);
            if (count_numbers(data) != count) DIE("%s: data does not hold %zu numbers", on->u.str.s, count);
        }
    }
    if (seg != a->n) DIE("%d pieces, %d accounted for", a->n, seg);
    if (a->binary != (first_raw < a->n)) DIE("binary flag disagrees with the pieces");
    jdoc_free(doc);
    free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    model_entry *model = g_models[data[0] & 1];
    size_t header_len = (data[0] & 2) ? (size_t)data[1] | (size_t)data[2] << 8 : (size_t)-1;
    size_t len = size - 3;
    char *body = malloc(len ? len : 1);
    if (!body) return 0;
    if (len) memcpy(body, data + 3, len);
    char err[512] = "";
    attend_req r;
    http_error e = v2_decode(&r, body, len, header_len, model, &g_lim, err, sizeof err);
    if (e != HERR_NONE) {
        if (!err[0]) DIE("v2_decode failed (%s) without a message", http_error_type(e));
        if (http_error_status(e) < 400 || http_error_status(e) > 503)
            DIE("v2_decode: status %d for a bad request", http_error_status(e));
    } else {
        if (!r.model || !r.in.query || !r.out || (attn_wants_weights(&r.in) && !r.weights) ||
            (r.in.topk > 0 && !r.indices))
            DIE("v2_decode succeeded with a half-built request");
        if (r.response_estimate > g_lim.max_response_bytes)
            DIE("v2_decode accepted a response estimate of %zu bytes", r.response_estimate);
        e = attend_compute(&r, g_pool, err, sizeof err);
        if (e == HERR_NONE) {
            answer a;
            e = v2_encode(&r, &a, g_pool, err, sizeof err);
            if (e != HERR_NONE) DIE("v2_encode failed: %s", err);
            if (answer_len(&a) > r.response_estimate)
                DIE("the answer is %zu bytes, above its estimate of %zu", answer_len(&a),
                    r.response_estimate);
            check_answer(&r, &a);
            answer_free(&a);
        } else if (e != HERR_INVALID_REQUEST) {
            DIE("attend_compute failed with %s: %s", http_error_type(e), err);
        }
    }
    attend_free(&r);
    free(body);
    return 0;
}
