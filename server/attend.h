/* attend.h - one attention request, whichever API it came by: from a request
 * body to engine input, and from engine output to an answer.
 *
 * Two front ends parse a body into an attend_spec: attend_decode for
 * POST /attend's JSON, v2_decode (v2.h) for the Open Inference Protocol's
 * JSON with optional binary tensors. Both then call attend_plan, which is
 * shared: it checks every shape against the model and the limits, judges the
 * answer's size and the working memory before anything request-sized is
 * allocated (so every 4xx is decided there), then fills the inputs and
 * allocates the outputs. attend_compute runs the engine; the front end's
 * encoder writes the answer (attend_encode for /attend, v2_encode).
 * One attend_req per request; not shared between threads at once. It holds
 * a reference to its model's version from decoding to attend_free, so a
 * reload never changes the weights under it.
 *
 *     attend_req r;
 *     http_error e = attend_decode(&r, body, len, reg, &lim, err, sizeof err);
 *     if (!e) e = attend_compute(&r, pool, err, sizeof err);
 *     answer a;
 *     if (!e) e = attend_encode(&r, &a, pool, err, sizeof err);
 *     ... send a ... answer_free(&a);
 *     attend_free(&r);
 */
#ifndef ATTN_ATTEND_H
#define ATTN_ATTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "answer.h"
#include "attention.h"
#include "buf.h"
#include "encoding.h"
#include "errors.h"
#include "json.h"
#include "models.h"
#include "tensor.h"

typedef struct attend_limits {
    long max_tokens;           /* n and m per sequence */
    long max_batch;            /* B */
    size_t max_response_bytes; /* judged from shapes before computing */
    size_t max_compute_bytes;  /* engine scratch */
    int nworkers;              /* compute pool size (for the scratch estimate) */
    /* Called before each request-sized allocation the plan makes, with its
     * bytes; false refuses the request (503 overloaded). until_answered:
     * the bytes (outputs, answer text) are held until the answer is sent,
     * else (inputs, working memory) until compute ends. NULL: no account. */
    bool (*reserve)(void *ctx, size_t bytes, bool until_answered);
    /* Gives back bytes reserved until compute ends that were freed before
     * it: the JSON parse's memory, once the document is gone. */
    void (*release)(void *ctx, size_t bytes);
    void *reserve_ctx;
    /* Text tensors whose encoding would take this many bytes or more are
     * written as the client reads them (encoding.h); 0: never. */
    size_t stream_min;
} attend_limits;

/* A body's JSON parse, its memory (the document, the parser's stacks:
 * tens of bytes a number) reserved from the budget as it grows, and given
 * back by attend_parse_end when the document is freed. Both front ends
 * parse through it.
 *
 *     attend_parse ap;
 *     jdoc_status js = attend_parse_json(&ap, lim, body, len, &doc, err, errlen);
 *     ...   attend_parse_end(&ap, doc);
 */
typedef struct attend_parse {
    const attend_limits *lim;
    size_t taken;
} attend_parse;
jdoc_status attend_parse_json(attend_parse *ap, const attend_limits *lim, const char *body,
                              size_t len, jdoc **doc, char *err, size_t errlen);
void attend_parse_end(attend_parse *ap, jdoc *doc);

/* What a front end found in a body: the model, the tensors (probed, not
 * filled) and the flags. */
typedef struct attend_spec {
    model_entry *model; /* the request's (attend_req's) reference */
    tensor_src q, k, v, kpm, mask;
    bool cross, has_kpm, has_mask;
    bool causal, need_weights, average_heads; /* need_weights: dense, every row */
    int topk;                                 /* > 0: top-k weights instead (weights_topk) */
    const int *rows;                          /* non-NULL: weight rows instead (weights_rows) */
    int nrows;
    const char *topk_field, *rows_field; /* the request's names, for messages */
} attend_spec;

typedef struct attend_req {
    model_entry *model;                    /* a reference, dropped by attend_free */
    attn_input in;                         /* pointers into the inputs below or into the body */
    bool batched;                          /* input had a leading B: output keeps it */
    const encoding *enc_out, *enc_weights; /* how each output is written */
    const encoding *enc_index;             /* top-k indices (/attend: enc_weights) */
    int precision;                         /* 0 = shortest round-trip, else 1..9 digits */
    void *own[5];     /* input arrays this request allocated (inputs used in place are not) */
    float *out;       /* [B,n,E] after compute */
    float *weights;   /* dense [B,H,n,M], rows [B,H,r,M] or top-k values [B,H,n,k]
                       * (without H averaged) after compute, if any weights */
    int32_t *indices; /* top-k key indices, as many as the values */
    int *rows;        /* the weights_rows list (owned) */
    /* the engine's answer for this request: its sizes (M, out_floats,
     * weight_floats, index_count) from the shapes before the inputs are
     * decoded, the rest (working memory, FLOPs, whether it may join a
     * batch) once they are (attend_plan) */
    attn_plan plan;
    size_t response_estimate; /* upper bound of the answer's size */
    size_t stream_min;        /* from the limits: lazy text tensors from this size */
    /* v2 only */
    char id[256]; /* the request's "id", echoed; "" when none */
    bool has_id;
    tdtype out_dtype;         /* FP32, FP16 or BF16 (top-k indices are INT32) */
    unsigned char outputs[4]; /* the answer's outputs, in the request's order (v2.c's OUT_*) */
    int noutputs;
} attend_req;

/* The rule both front ends share for which inputs a request gives:
 * embeddings alone (self-attention) or query, key and value together. */
http_error attend_pick_inputs(bool emb, bool q, bool k, bool v, char *err, size_t errlen);

/* The long-context forms of weights, as both front ends take them: topk
 * (a whole number >= 1) and rows (a non-empty array of whole numbers >= 0),
 * each NULL when not given, named topk_field and rows_field in messages;
 * not both. Fills sp->topk, or sp->rows (owned by r) and sp->nrows; their
 * bounds against the shapes (k <= M, rows < n, no row twice) are
 * attend_plan's. */
http_error attend_parse_forms(attend_req *r, attend_spec *sp, const jv *topk, const jv *rows,
                              const char *topk_field, const char *rows_field, char *err,
                              size_t errlen);

/* Resolves the body's model in reg (taking a reference), parses, plans. On
 * error r is freed. */
http_error attend_decode(attend_req *r, const char *body, size_t len, registry *reg,
                         const attend_limits *lim, char *err, size_t errlen);

/* Shared by both front ends: r->enc_*, precision and (v2) out_dtype are set,
 * the spec is complete. Checks, judges the size (overhead: bytes of the
 * answer besides the tensors), fills, allocates. On error r is freed. */
http_error attend_plan(attend_req *r, attend_spec *sp, size_t overhead, const attend_limits *lim,
                       char *err, size_t errlen);

http_error attend_compute(attend_req *r, attn_pool *pool, char *err, size_t errlen);
/* The second half of attend_compute, for outputs computed elsewhere (a
 * batch): 400 when an output overflowed float32. */
http_error attend_check_outputs(const attend_req *r, char *err, size_t errlen);

/* Writes the /attend 200 answer into a (initialised here); large tensors
 * are encoded on the pool's workers (NULL: on this thread). */
http_error attend_encode(attend_req *r, answer *a, attn_pool *pool, char *err, size_t errlen);

/* An encoder's last step: seal the answer; out of memory while writing it
 * is 503. */
http_error attend_answer_done(const attend_req *r, answer *a, char *err, size_t errlen);

/* The shapes of the outputs: rank and dims ([B,]n,E; weights [B,][H,]n,M,
 * weight rows [B,][H,]r,M, top-k values and indices [B,][H,]n,k). */
int attend_out_shape(const attend_req *r, size_t *dim);
int attend_weights_shape(const attend_req *r, size_t *dim);

/* Frees what r holds and drops its model reference; r is zeroed, so a
 * second call does nothing. */
void attend_free(attend_req *r);

#endif
