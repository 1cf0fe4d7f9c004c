/* errors.c - the error table of errors.h. */
#include "errors.h"

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

const char *http_error_type(http_error e) {
    return (unsigned)e < HERR_COUNT ? error_type[e] : "internal";
}

http_error http_error_from_status(attn_status st) {
    switch (st) {
    case ATTN_OK: return HERR_NONE;
    case ATTN_ERR_INVALID:
    case ATTN_ERR_SHAPE: return HERR_INVALID_REQUEST;
    case ATTN_ERR_LIMIT:
    case ATTN_ERR_NOMEM: return HERR_PAYLOAD_TOO_LARGE;
    default: return HERR_INTERNAL;
    }
}
