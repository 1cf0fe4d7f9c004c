/* gz.c - see gz.h. */
#include "gz.h"

#include <stdlib.h>
#include <zlib.h>

const char *gz_format_name(gz_format f) {
    return f == GZ_DEFLATE ? "deflate" : "gzip";
}

/* zlib's windowBits for inflating f, looking at the stream's first bytes. */
static int inflate_bits(const unsigned char *in, size_t len, gz_format f) {
    if (f == GZ_GZIP) return 16 + MAX_WBITS;
    /* a zlib header: compression method 8, and the two bytes a multiple of 31 */
    if (len >= 2 && (in[0] & 0x0f) == 8 && ((unsigned)in[0] << 8 | in[1]) % 31 == 0)
        return MAX_WBITS;
    return -MAX_WBITS; /* a bare deflate stream */
}

gz_status gz_inflate(const void *in, size_t len, size_t max, gz_format f, char **out,
                     size_t *outlen) {
    z_stream z = {0};
    if (inflateInit2(&z, inflate_bits(in, len, f)) != Z_OK) return GZ_NOMEM;
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

gz_status gz_deflate(const void *const *pieces, const size_t *lens, int n, gz_format f, int level,
                     char **out, size_t *outlen) {
    z_stream z = {0};
    if (deflateInit2(&z, level, Z_DEFLATED, f == GZ_GZIP ? 16 + MAX_WBITS : MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return GZ_NOMEM;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    /* deflateBound for the whole, plus a few bytes per piece boundary */
    size_t cap = deflateBound(&z, (uLong)total) + 64 + 16 * (size_t)n;
    char *p = malloc(cap);
    if (!p) {
        deflateEnd(&z);
        return GZ_NOMEM;
    }
    z.next_out = (Bytef *)p;
    int rc = Z_OK;
    for (int i = 0; i < n && rc == Z_OK; i++) {
        const unsigned char *s = pieces[i];
        size_t left = lens[i];
        do {
            uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
            size_t room = cap - (size_t)((char *)z.next_out - p);
            z.next_in = (Bytef *)s;
            z.avail_in = chunk;
            z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
            rc = deflate(&z, Z_NO_FLUSH);
            s += chunk - z.avail_in;
            left -= chunk - z.avail_in;
        } while (rc == Z_OK && left > 0);
    }
    if (rc == Z_OK) {
        size_t room = cap - (size_t)((char *)z.next_out - p);
        z.avail_in = 0;
        z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        rc = deflate(&z, Z_FINISH);
    }
    size_t used = (size_t)((char *)z.next_out - p);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(p);
        return GZ_NOMEM;
    }
    *out = p;
    *outlen = used;
    return GZ_OK;
}
