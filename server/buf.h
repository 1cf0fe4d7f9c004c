/* buf.h - a growable byte buffer with a hard cap, for building responses.
 *
 * Appends never abort: when memory runs out or the cap would be passed the
 * buffer records the failure (b->failed) and ignores further appends, so an
 * encoder can write a whole response and check once at the end.
 *
 *     buf b; buf_init(&b, 1 << 20);  // cap 1 MiB
 *     buf_puts(&b, "{\"a\":"); buf_printf(&b, "%d}", 1);
 *     if (b.failed) ...; else use(b.data, b.len);
 *     buf_free(&b);  // or buf_take the data (malloc'd) and own it
 *
 * A first reservation of a megabyte or more takes a request-sized block
 * that buf_free keeps for the next such buffer (mem_reuse_alloc): a
 * request's body, for one, is read into it without faulting its pages in.
 */
#ifndef ATTN_BUF_H
#define ATTN_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct buf {
    char *data;  /* malloc'd, NUL-terminated when len > 0 */
    size_t len;  /* bytes used */
    size_t cap;  /* bytes allocated */
    size_t max;  /* hard cap on len */
    bool failed; /* an append failed: out of memory or past max */
    bool reuse;  /* data is mem_reuse_alloc(cap)'s (hugemem.h): buf_free gives it back there */
} buf;

void buf_init(buf *b, size_t max);
void buf_free(buf *b);
/* Make room for n more bytes; returns a pointer to write them at (then call
 * buf_commit) or NULL when it fails (b->failed set). */
char *buf_reserve(buf *b, size_t n);
void buf_commit(buf *b, size_t n);
void buf_append(buf *b, const void *p, size_t n);
void buf_puts(buf *b, const char *s);
void buf_putc(buf *b, char c);
void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append a duration in milliseconds with three decimals ("12.345"), as
 * printf's "%.3f" would for values from 0 to 2^53 us, without printf (on
 * every access log line and Server-Timing header). */
void buf_put_ms(buf *b, double ms);
/* Append an unsigned integer in decimal. */
void buf_put_u64(buf *b, unsigned long long v);
/* Append a shape's dimensions, comma-separated ("5,64"), without printf
 * (in every answer's tensors). */
void buf_put_dims(buf *b, const size_t *dim, int rank);
/* Append s as a JSON string literal, quotes included. */
void buf_json_string(buf *b, const char *s);
/* Detach the data (caller frees); the buffer is reset to empty. */
char *buf_take(buf *b, size_t *len);

#endif
