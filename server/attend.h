/* attend.h - POST /attend: from a request body to engine input, and from
 * engine output to a response body.
 *
 * attend_decode parses and validates everything (JSON, fields, shapes
 * against the model, limits) before anything request-sized is allocated,
 * so every 4xx is decided here; attend_compute runs the engine;
 * attend_encode writes the response JSON straight into a buffer (no JSON
 * tree). One attend_req per request; not shared between threads at once.
 *
 *     attend_req r;
 *     http_error e = attend_decode(&r, body, len, &reg, &lim, err, sizeof err);
 *     if (!e) e = attend_compute(&r, pool, err, sizeof err);
 *     if (!e) e = attend_encode(&r, &out, err, sizeof err);
 *     attend_free(&r);
 */
#ifndef ATTN_ATTEND_H
#define ATTN_ATTEND_H

#include <stdbool.h>
#include <stddef.h>

#include "attention.h"
#include "buf.h"
#include "errors.h"
#include "models.h"

typedef struct attend_limits {
    long max_tokens;           /* n and m per sequence */
    long max_batch;            /* B */
    size_t max_response_bytes; /* judged from shapes before computing */
    size_t max_compute_bytes;  /* engine scratch */
    int nworkers;              /* compute pool size (for the scratch estimate) */
} attend_limits;

typedef struct attend_req {
    const model_entry *model;
    attn_input in;              /* pointers into the owned arrays below */
    bool batched;               /* input had a leading B: output keeps it */
    bool base64;                /* encoding_format "base64" */
    int precision;              /* 0 = shortest round-trip, else 1..9 digits */
    int M;                      /* key positions attended */
    float *query, *key, *value; /* owned (key/value NULL for self-attention) */
    void *kpm, *mask;           /* owned masks */
    float *out;                 /* [B,n,E] after compute */
    float *weights;             /* [B,H,n,M] or [B,n,M] after compute, if need_weights */
    size_t out_floats, weight_floats;
    size_t response_estimate; /* upper bound of the encoded size */
} attend_req;

http_error attend_decode(attend_req *r, const char *body, size_t len, const registry *reg,
                         const attend_limits *lim, char *err, size_t errlen);
http_error attend_compute(attend_req *r, attn_pool *pool, char *err, size_t errlen);
/* Writes the 200 body into out (whose max is raised to the estimate). */
http_error attend_encode(const attend_req *r, buf *out, char *err, size_t errlen);
void attend_free(attend_req *r);

#endif
