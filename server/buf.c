/* buf.c - growable byte buffer; see buf.h. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

void buf_init(buf *b, size_t max) {
    memset(b, 0, sizeof *b);
    b->max = max;
}

void buf_free(buf *b) {
    if (b->reuse)
        mem_reuse_free(b->data, b->cap);
    else
        free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->reuse = false;
}

char *buf_reserve(buf *b, size_t n) {
    if (b->failed) return NULL;
    if (n > b->max - b->len || n + 1 > ((size_t)-1) - b->len) {
        b->failed = true;
        return NULL;
    }
    size_t need = b->len + n + 1; /* room for a NUL */
    if (need > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < need) ncap = ncap > ((size_t)-1) / 2 ? need : ncap * 2;
        /* a first large reservation: aligned for huge pages, and kept for
         * the next one when freed (hugemem.h); grown, a block is the
         * allocator's like any other */
        const bool reuse = !b->data && ncap >= MEM_HUGE_MIN;
        char *p = reuse ? mem_reuse_alloc(ncap) : realloc(b->data, ncap);
        if (!p) {
            b->failed = true;
            return NULL;
        }
        b->reuse = reuse;
        if (!reuse && ncap >= MEM_HUGE_MIN && (p != b->data || ncap > 2 * b->cap))
            mem_advise(p, ncap);
        b->data = p;
        b->cap = ncap;
    }
    return b->data + b->len;
}

void buf_commit(buf *b, size_t n) {
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_append(buf *b, const void *p, size_t n) {
    char *dst = buf_reserve(b, n);
    if (!dst) return;
    memcpy(dst, p, n);
    buf_commit(b, n);
}

void buf_puts(buf *b, const char *s) {
    buf_append(b, s, strlen(s));
}

void buf_putc(buf *b, char c) {
    buf_append(b, &c, 1);
}

void buf_printf(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    char *dst = buf_reserve(b, (size_t)n);
    if (!dst) return;
    va_start(ap, fmt);
    vsnprintf(dst, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_commit(b, (size_t)n);
}

void buf_json_string(buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_append(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            if (c == '\n')
                buf_append(b, "\\n", 2);
            else if (c == '\t')
                buf_append(b, "\\t", 2);
            else if (c == '\r')
                buf_append(b, "\\r", 2);
            else
                buf_append(b, e, 6);
        } else {
            buf_putc(b, (char)c);
        }
    }
    buf_putc(b, '"');
}

char *buf_take(buf *b, size_t *len) {
    char *p = b->data;
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    b->reuse = false; /* the taker frees it with free(): a spare is malloc'd too */
    return p;
}

void buf_put_u64(buf *b, unsigned long long v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_append(b, tmp + sizeof tmp - n, (size_t)n);
}

void buf_put_dims(buf *b, const size_t *dim, int rank) {
    for (int i = 0; i < rank; i++) {
        if (i) buf_putc(b, ',');
        buf_put_u64(b, dim[i]);
    }
}

void buf_put_ms(buf *b, double ms) {
    if (!(ms >= 0)) ms = 0; /* negative or NaN: never for a duration */
    if (ms > 9e12) ms = 9e12;
    unsigned long long us = (unsigned long long)(ms * 1000.0 + 0.5);
    buf_put_u64(b, us / 1000);
    char frac[4] = {'.', (char)('0' + us / 100 % 10), (char)('0' + us / 10 % 10),
                    (char)('0' + us % 10)};
    buf_append(b, frac, 4);
}
