/* gz.h - compressed bodies in and out (zlib): HTTP's "gzip" and "deflate"
 * content codings.
 *
 * "deflate" is, by RFC 9110, a zlib stream (RFC 1950); some clients send a
 * bare deflate stream (RFC 1951) under that name, so inflating "deflate"
 * accepts both (a zlib header is recognised by its check bits).
 * Statuses are the codec's own; errors.c maps them to HTTP.
 */
#ifndef ATTN_GZ_H
#define ATTN_GZ_H

#include <stddef.h>

typedef enum {
    GZ_OK = 0,
    GZ_BAD,     /* not a valid stream, truncated, or bytes after it */
    GZ_TOO_BIG, /* inflates past the limit */
    GZ_NOMEM,   /* allocation failed */
} gz_status;

typedef enum { GZ_GZIP, GZ_DEFLATE } gz_format;

const char *gz_format_name(gz_format f); /* "gzip", "deflate" */

/* Inflate a stream into a new malloc'd buffer of at most max bytes (a
 * bomb stops at max with GZ_TOO_BIG, having allocated at most max).
 * Trailing garbage after the stream is GZ_BAD. */
gz_status gz_inflate(const void *in, size_t len, size_t max, gz_format f, char **out,
                     size_t *outlen);

/* Compress the concatenation of n pieces at level (1..9) into a new
 * malloc'd buffer. */
gz_status gz_deflate(const void *const *pieces, const size_t *lens, int n, gz_format f, int level,
                     char **out, size_t *outlen);

#endif
