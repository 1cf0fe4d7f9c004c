/* errors.c - the error table of errors.h. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>

static const int error_status[] = {0,
#define X(name, status, type) status,
                                   HTTP_ERROR_MAP(X)
#undef X
};

static const char *error_type[] = {"none",
#define X(name, status, type) type,
                                   HTTP_ERROR_MAP(X)
#undef X
};

int http_error_status(http_error e) {
    return (unsigned)e < HERR_COUNT ? error_status[e] : 500;
}

http_error http_fail(http_error e, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return e;
}

const char *http_error_type(http_error e) {
    return (unsigned)e < HERR_COUNT ? error_type[e] : "internal";
}

http_error http_error_from_status(attn_status st) {
    switch (st) {
    case ATTN_OK: return HERR_NONE;
    case ATTN_ERR_INVALID:
    case ATTN_ERR_SHAPE: return HERR_INVALID_REQUEST;
    case ATTN_ERR_LIMIT: return HERR_PAYLOAD_TOO_LARGE;
    case ATTN_ERR_NOMEM: return HERR_OVERLOADED;
    default: return HERR_INTERNAL;
    }
}

http_error http_error_from_jdoc(jdoc_status js) {
    switch (js) {
    case JDOC_OK: return HERR_NONE;
    case JDOC_ERR_DUPKEY: return HERR_INVALID_REQUEST;
    case JDOC_ERR_TOOBIG: return HERR_PAYLOAD_TOO_LARGE;
    case JDOC_ERR_NOMEM: return HERR_OVERLOADED;
    default: return HERR_INVALID_JSON;
    }
}

http_error http_error_from_gz(gz_status g) {
    switch (g) {
    case GZ_OK: return HERR_NONE;
    case GZ_TOO_BIG: return HERR_PAYLOAD_TOO_LARGE;
    case GZ_NOMEM: return HERR_OVERLOADED;
    default: return HERR_INVALID_REQUEST;
    }
}

http_error http_error_from_cqueue(cqueue_status q) {
    switch (q) {
    case CQ_OK: return HERR_NONE;
    case CQ_FULL: return HERR_OVERLOADED;
    default: return HERR_NOT_READY;
    }
}
