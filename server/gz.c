/* gz.c - see gz.h. */
#include "gz.h"

#include <stdlib.h>
#include <zlib.h>

gz_status gz_inflate(const void *in, size_t len, size_t max, char **out, size_t *outlen) {
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return GZ_NOMEM;
    size_t cap = len * 4 + 1024 < max ? len * 4 + 1024 : max, used = 0;
    char *p = malloc(cap + 1);
    gz_status st = GZ_OK;
    if (!p) {
        inflateEnd(&z);
        return GZ_NOMEM;
    }
    z.next_in = (Bytef *)in;
    int rc = Z_OK;
    size_t in_left = len;
    while (rc != Z_STREAM_END) {
        if (used == cap) {
            if (cap >= max) {
                st = GZ_TOO_BIG;
                break;
            }
            size_t ncap = cap * 2 < max ? cap * 2 : max;
            char *np = realloc(p, ncap + 1);
            if (!np) {
                st = GZ_NOMEM;
                break;
            }
            p = np;
            cap = ncap;
        }
        uInt chunk_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
        size_t room = cap - used;
        z.avail_in = chunk_in;
        z.next_out = (Bytef *)p + used;
        z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        uInt out_before = z.avail_out;
        rc = inflate(&z, Z_NO_FLUSH);
        in_left -= chunk_in - z.avail_in;
        used += out_before - z.avail_out;
        if (rc == Z_STREAM_END) break;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = GZ_BAD;
            break;
        }
        if (rc == Z_BUF_ERROR && in_left == 0 && z.avail_out > 0) { /* truncated */
            st = GZ_BAD;
            break;
        }
    }
    if (st == GZ_OK && in_left != 0) st = GZ_BAD; /* bytes after the stream */
    inflateEnd(&z);
    if (st != GZ_OK) {
        free(p);
        return st;
    }
    p[used] = '\0';
    *out = p;
    *outlen = used;
    return GZ_OK;
}

gz_status gz_deflate(const void *in, size_t len, char **out, size_t *outlen) {
    z_stream z = {0};
    if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return GZ_NOMEM;
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    char *p = malloc(cap);
    if (!p) {
        deflateEnd(&z);
        return GZ_NOMEM;
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)p;
    z.avail_out = (uInt)cap;
    int rc = len > 0xffffffffu ? Z_BUF_ERROR : deflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(p);
        return GZ_NOMEM;
    }
    *out = p;
    *outlen = n;
    return GZ_OK;
}
