/* status.c - names and messages of attn_status, and overflow-checked sizes. */
#include "status.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static const char *status_names[] = {
#define X(name, msg) #name,
    ATTN_STATUS_MAP(X)
#undef X
};

static const char *status_messages[] = {
#define X(name, msg) msg,
    ATTN_STATUS_MAP(X)
#undef X
};

const char *attn_status_name(attn_status st) {
    if ((unsigned)st >= ATTN_STATUS_COUNT) return "UNKNOWN";
    return status_names[st];
}

const char *attn_status_message(attn_status st) {
    if ((unsigned)st >= ATTN_STATUS_COUNT) return "unknown status";
    return status_messages[st];
}

attn_status attn_fail(char *err, size_t errlen, attn_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

int attn_mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

int attn_add_size(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return 0;
    *out = a + b;
    return 1;
}

int attn_mul_sizes(const size_t *v, size_t count, size_t *out) {
    size_t acc = 1;
    for (size_t i = 0; i < count; i++)
        if (!attn_mul_size(acc, v[i], &acc)) return 0;
    *out = acc;
    return 1;
}
