/* gz.h - gzip bodies in and out (zlib). */
#ifndef ATTN_GZ_H
#define ATTN_GZ_H

#include <stddef.h>

typedef enum {
    GZ_OK = 0,
    GZ_BAD,     /* not a valid stream, truncated, or bytes after it */
    GZ_TOO_BIG, /* inflates past the limit */
    GZ_NOMEM,   /* allocation failed */
} gz_status;

/* Inflate a gzip stream into a new malloc'd buffer of at most max bytes (a
 * gzip bomb stops at max with GZ_TOO_BIG, having allocated at most max).
 * Trailing garbage after the stream is GZ_BAD. */
gz_status gz_inflate(const void *in, size_t len, size_t max, char **out, size_t *outlen);
/* Deflate to gzip at a fast level into a new malloc'd buffer. */
gz_status gz_deflate(const void *in, size_t len, char **out, size_t *outlen);

#endif
