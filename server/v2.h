/* v2.h - the Open Inference Protocol (KServe v2, as Triton speaks it) over
 * HTTP/REST: the infer request and answer, JSON or with binary tensors, and
 * the server and model metadata.
 *
 * An infer body is a JSON header, optionally followed by raw tensors (the
 * binary tensor extension: the header's length comes in the
 * Inference-Header-Content-Length HTTP header). Inputs are taken by name
 * (embeddings, or query/key/value; key_padding_mask; attn_mask) with the
 * meaning of /attend's fields; outputs are "output" and
 * "attention_weights". Raw FP32 and BOOL inputs are used where they lie in
 * the body (which must then outlive the request's compute).
 *
 *     attend_req r;
 *     e = v2_decode(&r, body, len, hlen, model, version, &lim, err, sizeof err);
 *     if (!e) e = attend_compute(&r, pool, err, sizeof err);
 *     if (!e) e = v2_encode(&r, &answer, pool, err, sizeof err);
 */
#ifndef ATTN_V2_H
#define ATTN_V2_H

#include <stdbool.h>
#include <stddef.h>

#include "attend.h"
#include "buf.h"
#include "models.h"

#define V2_VERSION "1" /* the one version of every model */

/* body[0..len) is writable: a binary section may be moved by up to 3 bytes
 * to align its FP32 tensors. header_len is Inference-Header-Content-Length,
 * or (size_t)-1 when the request did not send it (the whole body is JSON).
 * model comes from the path (never NULL); r takes a reference of its own
 * (the caller keeps its one). On error r is freed. */
http_error v2_decode(attend_req *r, char *body, size_t len, size_t header_len, model_entry *model,
                     const attend_limits *lim, char *err, size_t errlen);

/* The 200 answer: JSON, or a JSON header plus raw tensors (a->binary).
 * Takes the output arrays of binary outputs over from r. */
http_error v2_encode(attend_req *r, answer *a, attn_pool *pool, char *err, size_t errlen);

/* GET /v2 and GET /v2/models/{model} bodies. */
void v2_server_json(buf *out);
void v2_model_json(const model_entry *e, buf *out);

/* Triton's model repository extension. An index entry: name, version
 * (while one serves), state, reason, and the serving file's identity under
 * "parameters". The index: a JSON array of them, only the models that
 * serve when ready_only. */
void v2_index_entry_json(const model_status *m, buf *out);
void v2_index_json(const model_status *m, int n, bool ready_only, buf *out);
/* The body of POST /v2/repository/index: empty, or {"ready": bool}. */
http_error v2_index_request(const char *body, size_t len, bool *ready_only, char *err,
                            size_t errlen);
/* The body of a load (load) or unload request: empty, or {"parameters":
 * {...}}; the parameters that would carry a model's file or settings are
 * refused, naming them. */
http_error v2_control_request(const char *body, size_t len, bool load, char *err, size_t errlen);

/* The model version in a path: NULL (none given) or V2_VERSION is fine;
 * anything else writes a message and returns HERR_MODEL_NOT_FOUND. */
http_error v2_check_version(const model_entry *e, const char *version, char *err, size_t errlen);

#endif
