/* v2.c - see v2.h.
 *
 * The file is divided as: the request's parameters, inputs and outputs
 * lists; v2_decode; the answer; metadata; the model repository extension. */
#include "v2.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define invalid(err, errlen, ...) http_fail(HERR_INVALID_REQUEST, err, errlen, __VA_ARGS__)

/* The inputs a request may give, in the order of attend_spec's tensors. */
enum { IN_EMB, IN_Q, IN_K, IN_V, IN_KPM, IN_MASK, IN_COUNT };
static const char *const input_names[IN_COUNT] = {"embeddings",       "query",    "key", "value",
                                                  "key_padding_mask", "attn_mask"};
#define INPUT_LIST "embeddings, query, key, value, key_padding_mask, attn_mask"

/* The outputs an answer may carry; attend_req.outputs lists them in order. */
enum { OUT_OUTPUT, OUT_WEIGHTS, OUT_TOPK_INDICES, OUT_TOPK_VALUES, OUT_COUNT };
static const char *const output_names[OUT_COUNT] = {
    "output", "attention_weights", "attention_topk_indices", "attention_topk_values"};
#define OUTPUT_LIST "output, attention_weights, attention_topk_indices, attention_topk_values"

typedef struct v2_input {
    const jv *name, *shape, *datatype, *data;
    const jv *binary_size; /* parameters.binary_data_size */
    const unsigned char *raw;
    size_t raw_len;
} v2_input;

/* An integer parameter in [0, max]. */
static bool as_size(const jv *v, size_t max, size_t *out) {
    if (!v || v->type != JV_NUMBER) return false;
    double d = v->u.num.d;
    if (!(d >= 0 && d <= (double)max && d == floor(d))) return false;
    *out = (size_t)d;
    return true;
}

static http_error want_bool(const jv *v, const char *field, bool *out, char *err, size_t errlen) {
    if (v->type != JV_TRUE && v->type != JV_FALSE)
        return invalid(err, errlen, "%s: expected true or false, got %s", field,
                       jv_type_name(v->type));
    *out = v->type == JV_TRUE;
    return HERR_NONE;
}

/* ------------------------------------------------------------ parameters */

typedef struct v2_params {
    bool causal, average_heads, binary_output;
    const jv *topk, *rows; /* weights_topk, weights_rows (attend_parse_forms reads them) */
} v2_params;

static http_error parse_params(attend_req *r, const jv *p, v2_params *vp, char *err,
                               size_t errlen) {
    if (!p) return HERR_NONE;
    if (p->type != JV_OBJECT)
        return invalid(err, errlen, "parameters: expected an object, got %s",
                       jv_type_name(p->type));
    http_error e;
    for (size_t i = 0; i < p->u.obj.len; i++) {
        const char *k = p->u.obj.members[i].key;
        const jv *v = &p->u.obj.members[i].value;
        char field[96];
        snprintf(field, sizeof field, "parameters.%.64s", k);
        if (!strcmp(k, "causal")) {
            if ((e = want_bool(v, field, &vp->causal, err, errlen))) return e;
        } else if (!strcmp(k, "average_heads")) {
            if ((e = want_bool(v, field, &vp->average_heads, err, errlen))) return e;
        } else if (!strcmp(k, "binary_data_output")) {
            if ((e = want_bool(v, field, &vp->binary_output, err, errlen))) return e;
        } else if (!strcmp(k, "output_datatype")) {
            int dt = v->type == JV_STRING ? tdtype_parse(v->u.str.s) : -1;
            if (dt != TD_FP32 && dt != TD_FP16 && dt != TD_BF16)
                return invalid(err, errlen,
                               "parameters.output_datatype: expected \"FP32\", \"FP16\" or "
                               "\"BF16\"");
            r->out_dtype = (tdtype)dt;
        } else if (!strcmp(k, "weights_topk")) {
            vp->topk = v->type == JV_NULL ? NULL : v;
        } else if (!strcmp(k, "weights_rows")) {
            vp->rows = v->type == JV_NULL ? NULL : v;
        } else if (!strcmp(k, "priority") || !strcmp(k, "timeout")) {
            /* Triton's scheduling hints: accepted, not used (one FIFO queue) */
        } else {
            return invalid(err, errlen,
                           "parameters: unknown parameter '%.64s' (known: causal, average_heads, "
                           "weights_topk, weights_rows, output_datatype, binary_data_output, "
                           "priority, timeout)",
                           k);
        }
    }
    return HERR_NONE;
}

/* ---------------------------------------------------------------- inputs */

static http_error parse_input(const jv *o, size_t i, v2_input *ins, char *err, size_t errlen) {
    if (o->type != JV_OBJECT)
        return invalid(err, errlen, "inputs[%zu]: expected an object, got %s", i,
                       jv_type_name(o->type));
    const jv *name = jv_get(o, "name");
    if (!name || name->type != JV_STRING)
        return invalid(err, errlen, "inputs[%zu].name: required, a string", i);
    int which = -1;
    for (int k = 0; k < IN_COUNT; k++)
        if (!strcmp(name->u.str.s, input_names[k])) which = k;
    if (which < 0)
        return invalid(err, errlen, "inputs[%zu]: unknown input '%.64s' (known: " INPUT_LIST ")", i,
                       name->u.str.s);
    v2_input *in = &ins[which];
    if (in->name)
        return invalid(err, errlen, "inputs[%zu]: input '%s' given twice", i, input_names[which]);
    in->name = name;
    const char *nm = input_names[which];
    for (size_t j = 0; j < o->u.obj.len; j++) {
        const char *k = o->u.obj.members[j].key;
        const jv *v = &o->u.obj.members[j].value;
        if (!strcmp(k, "name")) continue;
        if (!strcmp(k, "shape"))
            in->shape = v;
        else if (!strcmp(k, "datatype"))
            in->datatype = v;
        else if (!strcmp(k, "data"))
            in->data = v;
        else if (!strcmp(k, "parameters")) {
            if (v->type != JV_OBJECT)
                return invalid(err, errlen, "%s.parameters: expected an object", nm);
            for (size_t q = 0; q < v->u.obj.len; q++) {
                const char *pk = v->u.obj.members[q].key;
                if (!strcmp(pk, "binary_data_size"))
                    in->binary_size = &v->u.obj.members[q].value;
                else
                    return invalid(err, errlen,
                                   "%s.parameters: unknown parameter '%.64s' (known: "
                                   "binary_data_size)",
                                   nm, pk);
            }
        } else
            return invalid(err, errlen,
                           "%s: unknown key '%.64s' (known: name, shape, datatype, parameters, "
                           "data)",
                           nm, k);
    }
    if (!in->shape) return invalid(err, errlen, "%s.shape: required", nm);
    if (!in->datatype || in->datatype->type != JV_STRING)
        return invalid(err, errlen, "%s.datatype: required, a string", nm);
    if (in->data && in->binary_size)
        return invalid(err, errlen, "%s: give either data or parameters.binary_data_size, not both",
                       nm);
    if (!in->data && !in->binary_size)
        return invalid(err, errlen, "%s: data (or parameters.binary_data_size) is required", nm);
    return HERR_NONE;
}

/* Walk the inputs in request order, giving each binary one its bytes. */
static http_error frame_binary(const jv *inputs, v2_input *ins, unsigned char *bin, size_t bin_len,
                               bool framed, char *err, size_t errlen) {
    size_t off = 0;
    for (size_t i = 0; i < inputs->u.arr.len; i++) {
        const jv *name = jv_get(&inputs->u.arr.items[i], "name");
        int which = 0;
        while (which < IN_COUNT && strcmp(name->u.str.s, input_names[which])) which++;
        v2_input *in = &ins[which];
        if (!in->binary_size) continue;
        const char *nm = input_names[which];
        if (!framed)
            return invalid(err, errlen,
                           "%s.parameters.binary_data_size: binary data after the JSON needs the "
                           "Inference-Header-Content-Length header (the JSON header's length)",
                           nm);
        size_t n;
        if (!as_size(in->binary_size, (size_t)1 << 52, &n))
            return invalid(err, errlen,
                           "%s.parameters.binary_data_size: expected a non-negative integer", nm);
        if (n > bin_len - off)
            return invalid(err, errlen,
                           "%s.parameters.binary_data_size: %zu bytes, but only %zu bytes of "
                           "binary data follow the header from this input on",
                           nm, n, bin_len - off);
        in->raw = bin + off;
        in->raw_len = n;
        off += n;
    }
    if (off != bin_len)
        return invalid(err, errlen,
                       "body: %zu bytes follow the JSON header but the inputs' binary_data_size "
                       "add up to %zu",
                       bin_len, off);
    return HERR_NONE;
}

/* --------------------------------------------------------------- outputs */

/* The outputs list into r->outputs (in its order), the binary flag of each,
 * and which weights to compute. The weights outputs follow the form the
 * parameters ask for: attention_weights (dense, or weights_rows' rows), or
 * with weights_topk attention_topk_indices and attention_topk_values
 * (either or both). No list: output and the weights of that form. */
static http_error parse_outputs(attend_req *r, const jv *outs, const v2_params *vp,
                                bool binary[OUT_COUNT], attend_spec *sp, char *err, size_t errlen) {
    const bool topk = sp->topk > 0;
    for (int k = 0; k < OUT_COUNT; k++) binary[k] = vp->binary_output;
    if (!outs) { /* no list: every output of the form asked */
        r->outputs[r->noutputs++] = OUT_OUTPUT;
        if (topk) {
            r->outputs[r->noutputs++] = OUT_TOPK_INDICES;
            r->outputs[r->noutputs++] = OUT_TOPK_VALUES;
        } else {
            r->outputs[r->noutputs++] = OUT_WEIGHTS;
        }
        sp->need_weights = !topk && !sp->rows;
        return HERR_NONE;
    }
    if (outs->type != JV_ARRAY)
        return invalid(err, errlen, "outputs: expected an array, got %s", jv_type_name(outs->type));
    bool seen[OUT_COUNT] = {false};
    if (outs->u.arr.len && !outs->u.arr.items) /* packed: all numbers */
        return invalid(err, errlen, "outputs[0]: expected an object, got number");
    for (size_t i = 0; i < outs->u.arr.len; i++) {
        const jv *o = &outs->u.arr.items[i];
        if (o->type != JV_OBJECT)
            return invalid(err, errlen, "outputs[%zu]: expected an object", i);
        const jv *name = jv_get(o, "name");
        if (!name || name->type != JV_STRING)
            return invalid(err, errlen, "outputs[%zu].name: required, a string", i);
        int which = -1;
        for (int k = 0; k < OUT_COUNT; k++)
            if (!strcmp(name->u.str.s, output_names[k])) which = k;
        if (which < 0)
            return invalid(err, errlen,
                           "outputs[%zu]: unknown output '%.64s' (known: " OUTPUT_LIST ")", i,
                           name->u.str.s);
        if (seen[which])
            return invalid(err, errlen, "outputs[%zu]: output '%s' requested twice", i,
                           output_names[which]);
        seen[which] = true;
        r->outputs[r->noutputs++] = (unsigned char)which;
        for (size_t j = 0; j < o->u.obj.len; j++) {
            const char *k = o->u.obj.members[j].key;
            const jv *v = &o->u.obj.members[j].value;
            if (!strcmp(k, "name")) continue;
            if (strcmp(k, "parameters") || v->type != JV_OBJECT)
                return invalid(err, errlen, "%s: unknown key '%.64s' (known: name, parameters)",
                               output_names[which], k);
            for (size_t q = 0; q < v->u.obj.len; q++) {
                const char *pk = v->u.obj.members[q].key;
                char field[96];
                snprintf(field, sizeof field, "%s.parameters.%.40s", output_names[which], pk);
                if (strcmp(pk, "binary_data"))
                    return invalid(err, errlen,
                                   "%s: unknown parameter (known: binary_data; classification "
                                   "is not supported)",
                                   field);
                http_error e =
                    want_bool(&v->u.obj.members[q].value, field, &binary[which], err, errlen);
                if (e) return e;
            }
        }
    }
    if (!r->noutputs)
        return invalid(err, errlen,
                       "outputs: an empty list asks for nothing; name output, the weights or both "
                       "(or leave the list out)");
    if (topk && seen[OUT_WEIGHTS])
        return invalid(err, errlen,
                       "outputs: attention_weights with parameters.weights_topk: the top-k "
                       "weights are the outputs attention_topk_indices and attention_topk_values");
    for (int k = OUT_TOPK_INDICES; k <= OUT_TOPK_VALUES; k++)
        if (!topk && seen[k])
            return invalid(err, errlen,
                           "outputs: %s needs the request parameter weights_topk (how many "
                           "weights of each row)",
                           output_names[k]);
    if (topk && !seen[OUT_TOPK_INDICES] && !seen[OUT_TOPK_VALUES])
        return invalid(err, errlen,
                       "parameters.weights_topk: asks for top-k weights, but outputs names "
                       "neither attention_topk_indices nor attention_topk_values");
    if (sp->rows && !seen[OUT_WEIGHTS])
        return invalid(err, errlen,
                       "parameters.weights_rows: asks for rows of weights, but outputs leaves "
                       "out attention_weights");
    sp->need_weights = seen[OUT_WEIGHTS] && !sp->rows;
    return HERR_NONE;
}

/* ---------------------------------------------------------------- decode */

static const int in_min_rank[IN_COUNT] = {2, 2, 2, 2, 1, 2};
static const int in_max_rank[IN_COUNT] = {3, 3, 3, 3, 2, 4};

http_error v2_decode(attend_req *r, char *body, size_t len, size_t header_len, model_entry *model,
                     const attend_limits *lim, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->out_dtype = TD_FP32;
    bool framed = header_len != (size_t)-1;
    if (!framed) header_len = len;
    if (header_len > len)
        return invalid(err, errlen,
                       "Inference-Header-Content-Length: %zu bytes, but the body has only %zu",
                       header_len, len);
    jdoc *doc = NULL;
    attend_parse ap;
    jdoc_status js = attend_parse_json(&ap, lim, body, header_len, &doc, err, errlen);
    if (js != JDOC_OK) {
        /* the likeliest cause: binary tensors sent without their framing */
        if (js == JDOC_ERR_SYNTAX && !framed && memmem(body, len, "binary_data_size", 16)) {
            size_t k = strlen(err);
            snprintf(err + k, errlen - k,
                     " (binary data after the JSON needs the Inference-Header-Content-Length "
                     "header: the JSON's length in bytes)");
        }
        return http_error_from_jdoc(js);
    }
    http_error e = HERR_NONE;
    r->model = model_retain(model); /* from here on, attend_free drops it */
    attend_spec sp = {.model = model};
    v2_input ins[IN_COUNT];
    v2_params vp = {0};
    bool binary[OUT_COUNT];
    memset(ins, 0, sizeof ins);
    const jv *root = jdoc_root(doc), *inputs = NULL, *outputs = NULL, *params = NULL;
    if (root->type != JV_OBJECT) {
        e = invalid(err, errlen, "request body: expected a JSON object, got %s",
                    jv_type_name(root->type));
        goto out;
    }
    for (size_t i = 0; i < root->u.obj.len; i++) {
        const char *k = root->u.obj.members[i].key;
        const jv *v = &root->u.obj.members[i].value;
        if (!strcmp(k, "id")) {
            if (v->type != JV_STRING || v->u.str.len >= sizeof r->id) {
                e = invalid(err, errlen, "id: expected a string of at most %zu bytes",
                            sizeof r->id - 1);
                goto out;
            }
            memcpy(r->id, v->u.str.s, v->u.str.len + 1);
            r->has_id = true;
        } else if (!strcmp(k, "parameters"))
            params = v;
        else if (!strcmp(k, "inputs"))
            inputs = v;
        else if (!strcmp(k, "outputs"))
            outputs = v;
        else {
            e = invalid(err, errlen,
                        "unknown field '%.64s' (known: id, parameters, inputs, outputs)", k);
            goto out;
        }
    }
    if ((e = parse_params(r, params, &vp, err, errlen)) ||
        (e = attend_parse_forms(r, &sp, vp.topk, vp.rows, "parameters.weights_topk",
                                "parameters.weights_rows", err, errlen)))
        goto out;
    if (!inputs || inputs->type != JV_ARRAY) {
        e = invalid(err, errlen, "inputs: required, an array of tensors");
        goto out;
    }
    if (inputs->u.arr.len && !inputs->u.arr.items) { /* packed: all numbers */
        e = invalid(err, errlen, "inputs[0]: expected an object, got number");
        goto out;
    }
    for (size_t i = 0; i < inputs->u.arr.len; i++)
        if ((e = parse_input(&inputs->u.arr.items[i], i, ins, err, errlen))) goto out;
    if ((e = parse_outputs(r, outputs, &vp, binary, &sp, err, errlen))) goto out;
    if ((e = attend_pick_inputs(ins[IN_EMB].name, ins[IN_Q].name, ins[IN_K].name, ins[IN_V].name,
                                err, errlen)))
        goto out;

    /* The binary section, aligned so FP32 tensors can be used in place: the
     * header is parsed, so its last bytes are free to move over. */
    unsigned char *bin = (unsigned char *)body + header_len;
    size_t bin_len = len - header_len, shift = (uintptr_t)bin & 3;
    if (bin_len && shift) {
        memmove(bin - shift, bin, bin_len);
        bin -= shift;
    }
    if ((e = frame_binary(inputs, ins, bin, bin_len, framed, err, errlen))) goto out;

    /* probe each input (shapes only) into the spec */
    tensor_src *dst[IN_COUNT] = {&sp.q, &sp.q, &sp.k, &sp.v, &sp.kpm, &sp.mask};
    for (int k = 0; k < IN_COUNT; k++) {
        const v2_input *in = &ins[k];
        if (!in->name) continue;
        const char *nm = input_names[k];
        int dt = tdtype_parse(in->datatype->u.str.s);
        if (dt < 0 || dt == TD_INT32) {
            e = invalid(err, errlen,
                        "%s.datatype: '%.32s' is not supported (FP32, FP16, BF16, FP64%s)", nm,
                        in->datatype->u.str.s, k >= IN_KPM ? ", BOOL" : "");
            goto out;
        }
        if ((e = tensor_probe_typed(dst[k], nm, in->shape, (tdtype)dt, in->data, in->raw,
                                    in->raw_len, in_min_rank[k], in_max_rank[k], k >= IN_KPM, err,
                                    errlen)))
            goto out;
    }
    sp.cross = !ins[IN_EMB].name;
    sp.has_kpm = ins[IN_KPM].name != NULL;
    sp.has_mask = ins[IN_MASK].name != NULL;
    sp.causal = vp.causal;
    sp.average_heads = vp.average_heads;
    r->enc_out = encoding_get(binary[OUT_OUTPUT] ? ENC_BINARY : ENC_FLOAT);
    r->enc_weights =
        encoding_get(binary[sp.topk ? OUT_TOPK_VALUES : OUT_WEIGHTS] ? ENC_BINARY : ENC_FLOAT);
    r->enc_index = encoding_get(binary[OUT_TOPK_INDICES] ? ENC_BINARY : ENC_FLOAT);
    e = attend_plan(r, &sp, 4096 + 2 * strlen(r->id) + 2 * strlen(model->name), lim, err, errlen);
out:
    attend_parse_end(&ap, doc);
    if (e) attend_free(r);
    return e;
}

/* ---------------------------------------------------------------- answer */

/* One entry of "outputs": name, datatype, shape, then data or its size.
 * A binary output's array is the answer's bytes: packed in place to dt
 * (INT32 as it is) and handed to raw (sent as it is after the header,
 * freed with the answer). Returns true when the answer took data over: the
 * caller forgets it. */
static bool put_output(answer *a, attn_pool *pool, const char *name, const encoding *enc, tdtype dt,
                       void *data, size_t count, const size_t *dim, int rank, answer_piece *raw,
                       int *nraw) {
    buf *h = &a->text;
    buf_puts(h, "{\"name\":");
    buf_json_string(h, name);
    buf_puts(h, ",\"datatype\":\"");
    buf_puts(h, tdtype_name(dt));
    buf_puts(h, "\",\"shape\":[");
    buf_put_dims(h, dim, rank);
    buf_putc(h, ']');
    if (enc->raw) {
        size_t n = dt == TD_INT32 ? count * 4 : tensor_pack(data, data, count, dt);
        buf_puts(h, ",\"parameters\":{\"binary_data_size\":");
        buf_put_u64(h, n);
        buf_puts(h, "}}");
        /* data is attend_plan's mem_reuse_alloc(count * 4) */
        raw[(*nraw)++] = (answer_piece){.p = data, .len = n, .own = data, .own_size = count * 4};
        return true;
    }
    if (dt != TD_INT32) tensor_round(data, count, dt);
    buf_puts(h, ",\"data\":");
    enc_tensor t = {data, dim, rank, 0, false, dt == TD_INT32 ? ENC_I32 : ENC_F32};
    bool taken = encoding_write(enc, a, pool, &t, true);
    buf_putc(h, '}');
    return taken;
}

http_error v2_encode(attend_req *r, answer *a, attn_pool *pool, char *err, size_t errlen) {
    answer_init(a);
    /* each output's encoding and array, by OUT_* */
    const encoding *enc[OUT_COUNT] = {r->enc_out, r->enc_weights, r->enc_index, r->enc_weights};
    /* a binary answer needs the header's exact length up front: no lazy
     * text in it then */
    a->lazy_min = r->stream_min;
    for (int i = 0; i < r->noutputs; i++)
        if (enc[r->outputs[i]]->raw) a->lazy_min = 0;
    buf *h = &a->text;
    buf_puts(h, "{\"model_name\":");
    buf_json_string(h, r->model->name);
    buf_puts(h, ",\"model_version\":\"" V2_VERSION "\"");
    if (r->has_id) {
        buf_puts(h, ",\"id\":");
        buf_json_string(h, r->id);
    }
    buf_puts(h, ",\"outputs\":[");
    size_t d[4];
    answer_piece raw[OUT_COUNT];
    int nraw = 0;
    for (int i = 0; i < r->noutputs; i++) {
        const int o = r->outputs[i];
        if (i) buf_putc(h, ',');
        if (o == OUT_OUTPUT) {
            int rk = attend_out_shape(r, d);
            if (put_output(a, pool, output_names[o], enc[o], r->out_dtype, r->out,
                           r->plan.out_floats, d, rk, raw, &nraw))
                r->out = NULL;
        } else if (o == OUT_TOPK_INDICES) {
            int rk = attend_weights_shape(r, d);
            if (put_output(a, pool, output_names[o], enc[o], TD_INT32, r->indices,
                           r->plan.index_count, d, rk, raw, &nraw))
                r->indices = NULL;
        } else { /* attention_weights (dense or rows) or the top-k values */
            int rk = attend_weights_shape(r, d);
            if (put_output(a, pool, output_names[o], enc[o], r->out_dtype, r->weights,
                           r->plan.weight_floats, d, rk, raw, &nraw))
                r->weights = NULL;
        }
    }
    buf_puts(h, "]}");
    /* the JSON header is complete: the raw tensors follow it */
    if (nraw) {
        a->binary = true;
        a->header_len = answer_len(a);
        a->content_type = encoding_get(ENC_BINARY)->content_type;
    }
    for (int i = 0; i < nraw; i++)
        answer_push_reused(a, raw[i].p, raw[i].len, raw[i].own, raw[i].own_size);
    return attend_answer_done(r, a, err, errlen);
}

/* -------------------------------------------------------------- metadata */

void v2_server_json(buf *out) {
    buf_puts(out, "{\"name\":\"attention-server\",\"version\":\"" ATTN_VERSION
                  "\",\"extensions\":[\"binary_tensor_data\",\"model_repository\"]}");
}

static void put_tensor_meta(buf *out, bool *first, const char *name, const char *dtype,
                            const long *shape, int rank) {
    if (!*first) buf_putc(out, ',');
    *first = false;
    buf_printf(out, "{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[", name, dtype);
    for (int i = 0; i < rank; i++) buf_printf(out, i ? ",%ld" : "%ld", shape[i]);
    buf_puts(out, "]}");
}

void v2_model_json(const model_entry *e, buf *out) {
    const attn_weights *w = e->w;
    buf_puts(out, "{\"name\":");
    buf_json_string(out, e->name);
    buf_puts(out, ",\"versions\":[\"" V2_VERSION "\"],\"platform\":\"attention-server\","
                  "\"inputs\":[");
    bool first = true;
    /* -1: a variable dimension; the leading batch dimension may be left out */
    long emb[3] = {-1, -1, w->E}, k[3] = {-1, -1, w->kdim}, v[3] = {-1, -1, w->vdim};
    long kpm[2] = {-1, -1}, mask[4] = {-1, w->H, -1, -1};
    if (w->kdim == w->E && w->vdim == w->E)
        put_tensor_meta(out, &first, "embeddings", "FP32", emb, 3);
    put_tensor_meta(out, &first, "query", "FP32", emb, 3);
    put_tensor_meta(out, &first, "key", "FP32", k, 3);
    put_tensor_meta(out, &first, "value", "FP32", v, 3);
    put_tensor_meta(out, &first, "key_padding_mask", "BOOL", kpm, 2);
    put_tensor_meta(out, &first, "attn_mask", "BOOL", mask, 4);
    buf_puts(out, "],\"outputs\":[");
    first = true;
    long o[3] = {-1, -1, w->E}, aw[4] = {-1, w->H, -1, -1};
    put_tensor_meta(out, &first, "output", "FP32", o, 3);
    put_tensor_meta(out, &first, "attention_weights", "FP32", aw, 4);
    /* with the request parameter weights_topk: [B,H,n,k] */
    put_tensor_meta(out, &first, "attention_topk_indices", "INT32", aw, 4);
    put_tensor_meta(out, &first, "attention_topk_values", "FP32", aw, 4);
    buf_puts(out, "],\"parameters\":{");
    registry_file_json(e, out);
    buf_puts(out, "}}");
}

http_error v2_check_version(const model_entry *e, const char *version, char *err, size_t errlen) {
    if (!version || !strcmp(version, V2_VERSION)) return HERR_NONE;
    snprintf(err, errlen,
             "model '%s' has no version '%.32s'; its one version is \"" V2_VERSION "\"", e->name,
             version);
    return HERR_MODEL_NOT_FOUND;
}

/* --------------------------------------------- model repository extension */

void v2_index_entry_json(const model_status *m, buf *out) {
    buf_puts(out, "{\"name\":");
    buf_json_string(out, m->name);
    if (m->e) buf_puts(out, ",\"version\":\"" V2_VERSION "\"");
    buf_printf(out, ",\"state\":\"%s\",\"reason\":", model_state_name(m->state));
    buf_json_string(out, m->reason);
    if (m->e) {
        buf_puts(out, ",\"parameters\":{");
        registry_file_json(m->e, out);
        buf_putc(out, '}');
    }
    buf_putc(out, '}');
}

void v2_index_json(const model_status *m, int n, bool ready_only, buf *out) {
    buf_putc(out, '[');
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (ready_only && !m[i].e) continue;
        if (!first) buf_putc(out, ',');
        first = false;
        v2_index_entry_json(&m[i], out);
    }
    buf_putc(out, ']');
}

/* The body of a repository request: empty, or a JSON object (of at most
 * REPO_BODY_MAX bytes) of which check() judges each member. */
#define REPO_BODY_MAX 65536
static http_error repo_body(const char *body, size_t len,
                            http_error (*check)(const char *key, const jv *v, void *ctx, char *err,
                                                size_t errlen),
                            void *ctx, char *err, size_t errlen) {
    if (len == 0) return HERR_NONE;
    /* a few parameters: its parse stays small whatever the body limit */
    if (len > REPO_BODY_MAX)
        return http_fail(HERR_PAYLOAD_TOO_LARGE, err, errlen,
                         "request body: %zu bytes; a repository request's body is at most %d", len,
                         REPO_BODY_MAX);
    jdoc *doc = NULL;
    jdoc_status js = jdoc_parse(body, len, NULL, &doc, err, errlen);
    if (js != JDOC_OK) return http_error_from_jdoc(js);
    const jv *root = jdoc_root(doc);
    http_error e = HERR_NONE;
    if (root->type != JV_OBJECT)
        e = invalid(err, errlen, "request body: expected a JSON object, got %s",
                    jv_type_name(root->type));
    for (size_t i = 0; !e && root->type == JV_OBJECT && i < root->u.obj.len; i++)
        e = check(root->u.obj.members[i].key, &root->u.obj.members[i].value, ctx, err, errlen);
    jdoc_free(doc);
    return e;
}

static http_error index_member(const char *key, const jv *v, void *ctx, char *err, size_t errlen) {
    if (!strcmp(key, "ready")) return want_bool(v, "ready", ctx, err, errlen);
    return invalid(err, errlen, "unknown field '%.64s' (known: ready)", key);
}

http_error v2_index_request(const char *body, size_t len, bool *ready_only, char *err,
                            size_t errlen) {
    *ready_only = false;
    return repo_body(body, len, index_member, ready_only, err, errlen);
}

/* load: Triton's "config" and "file:..." parameters would bring a model's
 * settings or its files in the request; here they come only from the
 * server's configuration and model directory. unload: "unload_dependents"
 * (a model here has none). */
static http_error control_member(const char *key, const jv *v, void *ctx, char *err,
                                 size_t errlen) {
    bool load = *(const bool *)ctx;
    if (strcmp(key, "parameters"))
        return invalid(err, errlen, "unknown field '%.64s' (known: parameters)", key);
    if (v->type != JV_OBJECT)
        return invalid(err, errlen, "parameters: expected an object, got %s",
                       jv_type_name(v->type));
    for (size_t i = 0; i < v->u.obj.len; i++) {
        const char *k = v->u.obj.members[i].key;
        bool dependents;
        if (!load && !strcmp(k, "unload_dependents")) {
            http_error e = want_bool(&v->u.obj.members[i].value, "parameters.unload_dependents",
                                     &dependents, err, errlen);
            if (e) return e;
        } else if (load && (!strcmp(k, "config") || !strncmp(k, "file:", 5))) {
            return invalid(err, errlen,
                           "parameters.%.64s: not supported: a model's file and options come from "
                           "the server's model directory and configuration, never from a request",
                           k);
        } else {
            return invalid(err, errlen, "parameters: unknown parameter '%.64s' (known: %s)", k,
                           load ? "none" : "unload_dependents");
        }
    }
    return HERR_NONE;
}

http_error v2_control_request(const char *body, size_t len, bool load, char *err, size_t errlen) {
    return repo_body(body, len, control_member, &load, err, errlen);
}
