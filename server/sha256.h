/* sha256.h - SHA-256 (FIPS 180-4), to name the weight file that is serving.
 *
 *     char hex[65];
 *     if (sha256_file(path, hex, &bytes) == 0) ... hex is 64 lowercase digits
 */
#ifndef ATTN_SHA256_H
#define ATTN_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256 {
    uint32_t h[8];
    uint64_t bytes; /* hashed so far */
    unsigned char block[64];
    size_t fill; /* bytes waiting in block */
} sha256;

void sha256_init(sha256 *s);
void sha256_update(sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL. */
void sha256_hex(sha256 *s, char out[65]);

/* Hash a whole file: 0, or -1 when it cannot be read (errno set). *bytes
 * (if not NULL) gets its size. */
int sha256_file(const char *path, char out[65], uint64_t *bytes);

#endif
