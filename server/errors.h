/* errors.h - the API's error types and their HTTP statuses: the one table.
 *
 * Every error response is {"error": "<message naming the field>",
 * "error_type": "<name>"} with the status from this table.
 *
 * The error convention of server/: a function that can refuse a request
 * returns an http_error (HERR_NONE = 0 on success) and writes a message that
 * names the field, header or input into a caller-supplied buffer. Modules
 * that know nothing of HTTP (the engine, the JSON parser, the gzip codec,
 * the compute queue) return their own status enums; each is turned into an
 * http_error here, by one http_error_from_* function, and nowhere else.
 *
 * Two rules decide the status of a resource failure:
 *   - a request over a configured limit (body, tokens, batch, response,
 *     working memory) is 413 payload_too_large: sending it again will fail
 *     again, so the client must change it;
 *   - memory that cannot be had right now (malloc failed, the queue is full)
 *     is 503 overloaded with Retry-After: the same request may succeed later.
 */
#ifndef ATTN_ERRORS_H
#define ATTN_ERRORS_H

#include <stddef.h>

#include "gz.h"
#include "json.h"
#include "queue.h"
#include "status.h"

#define HTTP_ERROR_MAP(X)                                                                          \
    X(INVALID_JSON, 400, "invalid_json")                                                           \
    X(INVALID_REQUEST, 400, "invalid_request")                                                     \
    X(MODEL_LOAD_FAILED, 400, "model_load_failed")                                                 \
    X(UNAUTHORIZED, 401, "unauthorized")                                                           \
    X(FORBIDDEN, 403, "forbidden")                                                                 \
    X(NOT_FOUND, 404, "not_found")                                                                 \
    X(MODEL_NOT_FOUND, 404, "model_not_found")                                                     \
    X(METHOD_NOT_ALLOWED, 405, "method_not_allowed")                                               \
    X(REQUEST_TIMEOUT, 408, "request_timeout")                                                     \
    X(PAYLOAD_TOO_LARGE, 413, "payload_too_large")                                                 \
    X(UNSUPPORTED_MEDIA_TYPE, 415, "unsupported_media_type")                                       \
    X(HEADERS_TOO_LARGE, 431, "headers_too_large")                                                 \
    X(INTERNAL, 500, "internal")                                                                   \
    X(NOT_IMPLEMENTED, 501, "not_implemented")                                                     \
    X(OVERLOADED, 503, "overloaded")                                                               \
    X(NOT_READY, 503, "not_ready")

typedef enum {
    HERR_NONE = 0,
#define X(name, status, type) HERR_##name,
    HTTP_ERROR_MAP(X)
#undef X
        HERR_COUNT
} http_error;

int http_error_status(http_error e); /* 400, 404, ... */
/* Write the message (printf-style) into err and return e: the one way a
 * function of server/ refuses a request. */
http_error http_fail(http_error e, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *http_error_type(http_error e); /* "invalid_json", ... */
/* The API error for an engine failure while serving a request. */
http_error http_error_from_status(attn_status st);
/* ... for a request body the JSON parser refused. */
http_error http_error_from_jdoc(jdoc_status js);
/* ... for a compressed request body that would not inflate. */
http_error http_error_from_gz(gz_status g);
/* ... for a job the compute queue would not take. */
http_error http_error_from_cqueue(cqueue_status q);

#endif
