/* test_safetensors.c - the strict safetensors reader: what it accepts, what it
 * refuses (each with a message naming the culprit), exact dtype conversion,
 * and a sweep of truncated and mutated files that must fail cleanly. Files are
 * built in memory; one goes through a real file on disk via st_open. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "safetensors.h"

#define LABEL "<test>"

/* A file: 8-byte little-endian hlen_field, hbytes bytes of header, data. */
static unsigned char *mkfile_raw(uint64_t hlen_field, const void *header, size_t hbytes,
                                 const void *data, size_t dlen, size_t *len) {
    unsigned char *buf = malloc(8 + hbytes + dlen + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen_field >> (8 * i));
    if (hbytes) memcpy(buf + 8, header, hbytes);
    if (dlen) memcpy(buf + 8 + hbytes, data, dlen);
    *len = 8 + hbytes + dlen;
    return buf;
}

/* A file with a truthful header length. */
static unsigned char *mkfile(const char *header, const void *data, size_t dlen, size_t *len) {
    return mkfile_raw(strlen(header), header, strlen(header), data, dlen, len);
}

/* Parse header + data; on success close the file again. */
static attn_status parse(const char *header, const void *data, size_t dlen, char *err) {
    size_t len;
    unsigned char *buf = mkfile(header, data, dlen, &len);
    st_file *f = NULL;
    attn_status st;
    err[0] = '\0';
    st = st_parse(buf, len, LABEL, &f, err, ATTN_ERRLEN);
    free(buf);
    if (st == ATTN_OK) CHECK(f != NULL);
    st_close(f);
    return st;
}

/* The header must be refused as malformed, with a message naming the
 * label and containing needle. */
#define REJECT(header, data, dlen, needle)                           \
    do {                                                             \
        char e_[ATTN_ERRLEN];                                        \
        CHECK_INT_EQ(parse((header), (data), (dlen), e_), ATTN_ERR_FORMAT); \
        CHECK_STR_CONTAINS(e_, LABEL);                               \
        CHECK_STR_CONTAINS(e_, needle);                              \
    } while (0)

static unsigned char zeros[64];

/* Two F32 tensors and metadata; lookups, order, shapes, bytes. */
static void test_valid(void) {
    const char *h = "{\"__metadata__\":{\"num_heads\":\"2\",\"format\":\"pt\"},"
                    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                    "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[16,20]}}";
    unsigned char data[20];
    char err[ATTN_ERRLEN] = "";
    size_t len;
    unsigned char *buf;
    st_file *f = NULL;
    for (int i = 0; i < 20; i++) data[i] = (unsigned char)i;
    buf = mkfile(h, data, sizeof data, &len);
    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_OK);
    memset(buf, 0xAB, len); /* st_parse copied it */
    free(buf);
    if (!f) return;
    CHECK_INT_EQ(st_count(f), 2);
    CHECK_STR_EQ(st_get(f, 0)->name, "w"); /* file order, not sorted */
    CHECK_STR_EQ(st_get(f, 1)->name, "b");
    CHECK(st_get(f, 2) == NULL);
    const st_tensor *w = st_find(f, "w"), *b = st_find(f, "b");
    CHECK(w && b);
    CHECK(st_find(f, "x") == NULL);
    CHECK(st_find(f, "__metadata__") == NULL);
    if (w && b) {
        CHECK_INT_EQ(w->dtype, ST_F32);
        CHECK_INT_EQ(w->ndim, 2);
        CHECK_INT_EQ(w->shape[0], 2);
        CHECK_INT_EQ(w->shape[1], 2);
        CHECK_INT_EQ(w->numel, 4);
        CHECK_INT_EQ(w->nbytes, 16);
        CHECK_INT_EQ(w->data[0], 0);
        CHECK_INT_EQ(w->data[15], 15);
        CHECK_INT_EQ(b->dtype, ST_F16);
        CHECK_INT_EQ(b->nbytes, 4);
        CHECK_INT_EQ(b->data[0], 16);
        CHECK_INT_EQ(b->data[3], 19);
    }
    CHECK_STR_EQ(st_metadata(f, "num_heads"), "2");
    CHECK_STR_EQ(st_metadata(f, "format"), "pt");
    CHECK(st_metadata(f, "nope") == NULL);
    CHECK_STR_EQ(st_label(f), LABEL);
    st_close(f);
    st_close(NULL);
}

/* Whitespace inside the JSON and space padding after it, as writers pad to 8
 * bytes; empty headers; scalars and zero-sized tensors; string escapes. */
static void test_valid_variants(void) {
    char err[ATTN_ERRLEN];
    CHECK_INT_EQ(parse("{ \"a\" : { \"dtype\" : \"U8\" ,\r\n\t\"shape\" : [ 3 ] , "
                       "\"data_offsets\" : [ 0 , 3 ] } }        ",
                       zeros, 3, err),
                 ATTN_OK);
    CHECK_INT_EQ(parse("{}", NULL, 0, err), ATTN_OK);
    CHECK_INT_EQ(parse("{}  ", NULL, 0, err), ATTN_OK);
    CHECK_INT_EQ(parse("{\"__metadata__\":{}}", NULL, 0, err), ATTN_OK);
    CHECK_INT_EQ(parse("{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                       "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[8,8]},"
                       "\"z0\":{\"dtype\":\"I64\",\"shape\":[3,0],\"data_offsets\":[0,0]}}",
                       zeros, 8, err),
                 ATTN_OK);

    /* "a\u00e9\ud83d\ude00\n/" decodes to UTF-8 bytes */
    const char *h = "{\"a\\u00e9\\ud83d\\ude00\\n\\/\":{\"dtype\":\"BOOL\",\"shape\":[1,1],"
                    "\"data_offsets\":[0,1]},\"__metadata__\":{\"k\\\"\":\"v\\\\\\t\"}}";
    size_t len;
    unsigned char *buf = mkfile(h, zeros, 1, &len);
    st_file *f = NULL;
    CHECK_INT_EQ(st_parse(buf, len, NULL, &f, err, sizeof err), ATTN_OK);
    free(buf);
    if (!f) return;
    CHECK(st_find(f, "a\xc3\xa9\xf0\x9f\x98\x80\n/") != NULL);
    CHECK_STR_EQ(st_metadata(f, "k\""), "v\\\t");
    CHECK_STR_EQ(st_label(f), "<memory>");
    const st_tensor *s = st_get(f, 0);
    CHECK_INT_EQ(s->numel, 1);
    CHECK_INT_EQ(s->ndim, 2);
    st_close(f);
}

/* The length field and the framing of the header. */
static void test_framing(void) {
    char err[ATTN_ERRLEN];
    size_t len;
    unsigned char *buf;
    st_file *f = NULL;

    /* shorter than the 8-byte length */
    CHECK_INT_EQ(st_parse("\x02\0\0\0", 4, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, LABEL);
    CHECK_STR_CONTAINS(err, "too short");
    CHECK(f == NULL);
    CHECK_INT_EQ(st_parse("", 0, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);

    /* header length past the end of the file */
    buf = mkfile_raw(100, "{}", 2, NULL, 0, &len);
    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "header length 100 runs past the end of the file");
    free(buf);

    /* huge header length: refused before anything is trusted */
    buf = mkfile_raw((uint64_t)ST_MAX_HEADER + 1, "{}", 2, NULL, 0, &len);
    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "exceeds the limit");
    free(buf);
    buf = mkfile_raw(UINT64_MAX, "{}", 2, NULL, 0, &len);
    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "exceeds the limit");
    free(buf);

    /* zero-length header, and a header that is not an object */
    buf = mkfile_raw(0, "", 0, NULL, 0, &len);
    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "JSON object");
    free(buf);
    REJECT("[]", NULL, 0, "JSON object starting with '{', found '['");
    REJECT("\"a\"", NULL, 0, "JSON object");
    REJECT(" {}", NULL, 0, "JSON object"); /* the reference wants '{' first */
    REJECT("{}x", NULL, 0, "unexpected 'x' after the header's JSON object");
    buf = mkfile_raw(4, "{} \0", 4, NULL, 0, &len); /* NUL padding is not whitespace */
    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "byte 0x00 after the header's JSON object");
    free(buf);
    REJECT("{}{}", NULL, 0, "after the header's JSON object");
}

/* Header bytes that are not UTF-8, and JSON syntax. */
static void test_json(void) {
    REJECT("{\"a\xff\":1}", NULL, 0, "not valid UTF-8");
    REJECT("{\"\xc0\x80\":1}", NULL, 0, "not valid UTF-8");     /* overlong NUL */
    REJECT("{\"\xed\xa0\x80\":1}", NULL, 0, "not valid UTF-8"); /* encoded surrogate */
    REJECT("{\"\xf4\x90\x80\x80\":1}", NULL, 0, "not valid UTF-8"); /* above U+10FFFF */
    REJECT("{\"\xe2\x82\":1}", NULL, 0, "not valid UTF-8");         /* cut short */
    REJECT("{\"a\":{\"dtype\":\"F32\"", NULL, 0, "expected ',' or '}'");
    REJECT("{\"a", NULL, 0, "unterminated string");
    REJECT("{a:1}", NULL, 0, "expected a tensor name (a string), found 'a'");
    REJECT("{\"a\" 1}", NULL, 0, "expected ':' after a key, found '1'");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},}", zeros, 4,
           "expected a tensor name (a string), found '}'");
    REJECT("{\"a\tb\":1}", NULL, 0, "unescaped control character 0x09");
    REJECT("{\"a\\x\":1}", NULL, 0, "invalid escape");
    REJECT("{\"a\\u12\":1}", NULL, 0, "four hex digits");
    REJECT("{\"a\\ud800\":1}", NULL, 0, "unpaired surrogate \\uD800");
    REJECT("{\"a\\udc00\":1}", NULL, 0, "unpaired surrogate \\uDC00");
    REJECT("{\"a\\ud800\\u0041\":1}", NULL, 0, "unpaired surrogate");
    REJECT("{\"a\\u0000b\":1}", NULL, 0, "\\u0000");
}

/* Entries: types, completeness, dtypes, duplicates. */
static void test_entries(void) {
    REJECT("{\"w\":5}", NULL, 0, "tensor \"w\": expected an object {dtype, shape, data_offsets}, "
                                 "found a number");
    REJECT("{\"w\":null}", NULL, 0, "found null");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", zeros, 4,
           "tensor \"w\": missing \"data_offsets\"");
    REJECT("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": missing \"dtype\"");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": missing \"shape\"");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", zeros,
           4, "tensor \"w\": unknown key \"extra\"");
    REJECT("{\"w\":{\"dtype\":\"Q4_0\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": unknown dtype \"Q4_0\"");
    REJECT("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4,
           "unknown dtype \"f32\"");
    REJECT("{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": dtype: expected a string, found a number");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           zeros, 4, "tensor \"w\": duplicate key \"dtype\"");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           zeros, 8, "duplicate tensor name \"w\"");
    /* shapes */
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": shape: expected a non-negative integer, found a negative number");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", zeros, 4,
           "fraction or exponent");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", zeros, 4,
           "fraction or exponent");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", zeros, 4,
           "leading zero");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", zeros, 4,
           "found a string");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": shape: expected an array of integers");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
           zeros, 4, "more than 8 dimensions");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}",
           zeros, 4, "integer too large");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
           zeros, 4, "tensor \"w\": shape [4294967296, 4294967296] of F32 overflows");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", zeros, 4,
           "found ']'");
    /* offsets */
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", zeros, 4,
           "tensor \"w\": data_offsets: expected [begin, end]");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", zeros, 8,
           "tensor \"w\": data_offsets: expected [begin, end] (two integers)");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", zeros, 4,
           "found an object");
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", zeros, 4,
           "tensor \"w\": data_offsets [4, 0] end before they begin");
    /* byte length = numel x dtype size */
    REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", zeros, 4,
           "tensor \"w\": data_offsets [0, 4] hold 4 bytes, but shape [2] of F32 needs 8");
    REJECT("{\"w\":{\"dtype\":\"BF16\",\"shape\":[3,1],\"data_offsets\":[0,8]}}", zeros, 8,
           "shape [3, 1] of BF16 needs 6");
}

/* Where the bytes lie: contiguous from 0, no gap, no overlap, exact end. */
static void test_offsets(void) {
    /* gap between two tensors */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           zeros, 12, "tensor \"b\": data_offsets [8, 12] leave a gap of 4 bytes after tensor \"a\"");
    /* gap at the start */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", zeros, 8,
           "gap of 4 bytes after the start of the data");
    /* overlap, whatever the order in the header */
    REJECT("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
           zeros, 8, "tensor \"b\": data_offsets [4, 8] overlap tensor \"a\" [0, 8]");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           zeros, 4, "overlap");
    /* trailing bytes after the last tensor */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 5,
           "1 trailing bytes after the last tensor");
    REJECT("{}", zeros, 3, "3 trailing bytes");
    /* data cut short */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", zeros, 6,
           "tensor \"a\" ends at data byte 8, but the file holds only 6 data bytes");
    /* out of order in the header but contiguous: fine */
    char err[ATTN_ERRLEN];
    CHECK_INT_EQ(parse("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                       "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                       zeros, 8, err),
                 ATTN_OK);
}

static void test_metadata(void) {
    REJECT("{\"__metadata__\":{\"num_heads\":4}}", NULL, 0,
           "__metadata__[\"num_heads\"]: expected a string value, found a number");
    REJECT("{\"__metadata__\":{\"a\":[\"x\"]}}", NULL, 0, "found an array");
    REJECT("{\"__metadata__\":{\"a\":null}}", NULL, 0, "found null");
    REJECT("{\"__metadata__\":[]}", NULL, 0, "__metadata__: expected an object of strings");
    REJECT("{\"__metadata__\":\"x\"}", NULL, 0, "found a string");
    REJECT("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", NULL, 0,
           "__metadata__: duplicate key \"a\"");
    REJECT("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0, "duplicate key \"__metadata__\"");
}

/* Exact conversion of every float dtype, and refusal of non-finite values. */
static void test_convert(void) {
    /* F16 bit patterns and their exact values */
    static const uint16_t h[] = {0x3C00, 0xC000, 0x0001, 0x03FF, 0x0400, 0x7BFF,
                                 0x8000, 0x3555, 0x8001, 0x0000};
    const float hv[] = {1.0f, -2.0f, ldexpf(1, -24), ldexpf(1023, -24), ldexpf(1, -14), 65504.0f,
                        -0.0f, ldexpf(1365, -12), -ldexpf(1, -24), 0.0f};
    /* BF16: the top half of a float */
    static const uint16_t b[] = {0x3F80, 0xBFC0, 0x0001, 0x7F7F, 0x0080, 0x4049};
    const float bv[] = {1.0f, -1.5f, ldexpf(1, -133), ldexpf(255, 120), FLT_MIN, 3.140625f};
    const double dv[] = {0.5, -3.25, 1e-40 /* float subnormal */, (double)FLT_MAX, 0.1};
    const float fv[] = {1.0f, -0.0f, FLT_MAX, ldexpf(1, -149), 0.1f};
    unsigned char buf[128];
    float out[16];
    char err[ATTN_ERRLEN];
    st_tensor t;
    int bad;

    memset(&t, 0, sizeof t);
    t.name = "h";
    t.dtype = ST_F16;
    t.numel = sizeof h / sizeof h[0];
    for (size_t i = 0; i < t.numel; i++) {
        buf[2 * i] = (unsigned char)(h[i] & 0xFF);
        buf[2 * i + 1] = (unsigned char)(h[i] >> 8);
    }
    t.data = buf;
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_OK);
    bad = 0;
    for (size_t i = 0; i < t.numel; i++)
        if (memcmp(&out[i], &hv[i], 4) != 0) {
            bad++;
            fprintf(stderr, "F16 0x%04x -> %.9g, want %.9g\n", h[i], out[i], hv[i]);
        }
    CHECK_INT_EQ(bad, 0);

    t.dtype = ST_BF16;
    t.numel = sizeof b / sizeof b[0];
    for (size_t i = 0; i < t.numel; i++) {
        buf[2 * i] = (unsigned char)(b[i] & 0xFF);
        buf[2 * i + 1] = (unsigned char)(b[i] >> 8);
    }
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_OK);
    bad = 0;
    for (size_t i = 0; i < t.numel; i++)
        if (memcmp(&out[i], &bv[i], 4) != 0) {
            bad++;
            fprintf(stderr, "BF16 0x%04x -> %.9g, want %.9g\n", b[i], out[i], bv[i]);
        }
    CHECK_INT_EQ(bad, 0);

    t.dtype = ST_F64;
    t.numel = sizeof dv / sizeof dv[0];
    for (size_t i = 0; i < t.numel; i++) {
        uint64_t u;
        memcpy(&u, &dv[i], 8);
        for (int k = 0; k < 8; k++) buf[8 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_OK);
    bad = 0;
    for (size_t i = 0; i < t.numel; i++)
        if (out[i] != (float)dv[i]) bad++;
    CHECK_INT_EQ(bad, 0);

    t.dtype = ST_F32;
    t.numel = sizeof fv / sizeof fv[0];
    for (size_t i = 0; i < t.numel; i++) {
        uint32_t u;
        memcpy(&u, &fv[i], 4);
        for (int k = 0; k < 4; k++) buf[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_OK);
    CHECK_INT_EQ(memcmp(out, fv, sizeof fv), 0);

    /* non-finite values, named by tensor and flat index */
    t.dtype = ST_F16;
    t.numel = 3;
    memcpy(buf, "\x00\x3c\x00\x3c\x00\x7e", 6); /* 1, 1, NaN */
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, LABEL ": tensor \"h\": value at flat index 2 is NaN");
    memcpy(buf, "\x00\x3c\x00\xfc\x00\x3c", 6); /* 1, -inf, 1 */
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "flat index 1 is -inf");
    t.dtype = ST_BF16;
    t.numel = 1;
    memcpy(buf, "\x80\x7f", 2); /* +inf */
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "flat index 0 is inf");
    t.dtype = ST_F32;
    t.numel = 2;
    memcpy(buf, "\x00\x00\x80\x3f\x01\x00\xc0\x7f", 8); /* 1, NaN with payload */
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "flat index 1 is NaN");
    t.dtype = ST_F64;
    t.numel = 2;
    {
        double d[2] = {1.0, 1e39};
        uint64_t u;
        for (int i = 0; i < 2; i++) {
            memcpy(&u, &d[i], 8);
            for (int k = 0; k < 8; k++) buf[8 * i + k] = (unsigned char)(u >> (8 * k));
        }
    }
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_ERR_LAYER);
    CHECK_STR_CONTAINS(err, "flat index 1 is beyond the float32 range");
    t.dtype = ST_I32;
    CHECK_INT_EQ(st_to_f32(&t, out, LABEL, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, "tensor \"h\" has dtype I32");

    CHECK_INT_EQ(st_dtype_size(ST_BF16), 2);
    CHECK_INT_EQ(st_dtype_size(ST_F64), 8);
    CHECK_INT_EQ(st_dtype_size(ST_BOOL), 1);
    CHECK_STR_EQ(st_dtype_name(ST_BF16), "BF16");
    CHECK_STR_EQ(st_dtype_name(ST_DTYPE_COUNT), "UNKNOWN");
}

/* A real file through st_open; missing files and directories are I/O errors. */
static void test_open(void) {
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    const float v[2] = {0.25f, -4.0f};
    unsigned char data[8];
    char path[] = "/tmp/test_safetensors_XXXXXX", err[ATTN_ERRLEN];
    size_t len;
    unsigned char *buf;
    st_file *f = NULL;
    float out[2];
    int fd;

    for (int i = 0; i < 2; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) data[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    buf = mkfile(h, data, sizeof data, &len);
    fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        free(buf);
        return;
    }
    CHECK_INT_EQ(write(fd, buf, len), (long long)len);
    close(fd);
    CHECK_INT_EQ(st_open(path, &f, err, sizeof err), ATTN_OK);
    if (f) {
        CHECK_STR_EQ(st_label(f), path);
        const st_tensor *t = st_find(f, "w");
        CHECK(t != NULL);
        if (t) {
            CHECK_INT_EQ(st_to_f32(t, out, st_label(f), err, sizeof err), ATTN_OK);
            CHECK(out[0] == 0.25f && out[1] == -4.0f);
        }
        st_close(f);
    }

    /* the same file with its last byte cut: the message names the path */
    CHECK_INT_EQ(truncate(path, (off_t)len - 1), 0);
    CHECK_INT_EQ(st_open(path, &f, err, sizeof err), ATTN_ERR_FORMAT);
    CHECK_STR_CONTAINS(err, path);
    CHECK_STR_CONTAINS(err, "tensor \"w\" ends at data byte 8");
    CHECK(f == NULL);
    unlink(path);
    free(buf);

    CHECK_INT_EQ(st_open(path, &f, err, sizeof err), ATTN_ERR_IO);
    CHECK_STR_CONTAINS(err, path);
    CHECK_INT_EQ(st_open("/tmp", &f, err, sizeof err), ATTN_ERR_IO);
    CHECK_STR_CONTAINS(err, "/tmp: not a regular file");
}

/* Every truncation of a valid file, and single-byte mutations of it, must be
 * either refused with a message or accepted: never crash or leak (the
 * sanitizers watch). A few hundred parses. */
static void test_sweep(void) {
    const char *h = "{\"__metadata__\":{\"num_heads\":\"1\"},"
                    "\"in_proj_weight\":{\"dtype\":\"F16\",\"shape\":[3,1],\"data_offsets\":[0,6]},"
                    "\"out_proj.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[6,"
                    "10]}}  ";
    static const unsigned char mutations[] = {0x00, '"', '{', '}', '9', 0xff};
    size_t len;
    unsigned char *buf = mkfile(h, zeros, 10, &len);
    char err[ATTN_ERRLEN];
    st_file *f = NULL;
    int truncations_refused = 0, accepted = 0, refused_with_message = 0, refused = 0;

    CHECK_INT_EQ(st_parse(buf, len, LABEL, &f, err, sizeof err), ATTN_OK);
    st_close(f);
    for (size_t n = 0; n < len; n++) {
        err[0] = '\0';
        if (st_parse(buf, n, LABEL, &f, err, sizeof err) != ATTN_OK && f == NULL &&
            strstr(err, LABEL))
            truncations_refused++;
        st_close(f);
    }
    CHECK_INT_EQ(truncations_refused, (long long)len);

    for (size_t i = 0; i < len; i++) {
        unsigned char keep = buf[i];
        for (size_t m = 0; m < sizeof mutations; m++) {
            if (mutations[m] == keep) continue;
            buf[i] = mutations[m];
            err[0] = '\0';
            if (st_parse(buf, len, LABEL, &f, err, sizeof err) == ATTN_OK) {
                accepted++;
            } else {
                refused++;
                if (f == NULL && strstr(err, LABEL)) refused_with_message++;
            }
            st_close(f);
        }
        buf[i] = keep;
    }
    CHECK_INT_EQ(refused_with_message, refused);
    CHECK(refused > accepted);
    free(buf);
}

static void test_format_shape(void) {
    char s[32];
    size_t shape[3] = {3, 4, 5};
    st_format_shape(shape, 3, s, sizeof s);
    CHECK_STR_EQ(s, "[3, 4, 5]");
    st_format_shape(shape, 0, s, sizeof s);
    CHECK_STR_EQ(s, "[]");
    st_format_shape(shape, 3, s, 5);
    CHECK_STR_EQ(s, "[3, ");
}

/* Files of other formats are named as such, with the way to export. */
static void test_foreign(void) {
    static const struct {
        const char *bytes;
        size_t len;
        const char *needle;
    } cases[] = {
#define LIT(s) s, sizeof(s) - 1 /* the bytes of a literal, without its NUL */
        {LIT("PK\x03\x04\x14\0\0\0archive/data.pklxxxxxxxx"), "a PyTorch checkpoint (torch.save"},
        {LIT("PK\x03\x04\x14\0\0\0x.npyxxxxxxxxxxxxxxxx"), "a NumPy .npz archive"},
        {LIT("PK\x03\x04\x14\0\0\0other.txtxxxxxxxxxxx"), "a zip archive"},
        {LIT("\x80\x02}q\0(X\x0e\0\0\0in_proj_weightq"), "a Python pickle"},
        {LIT("GGUF\x03\0\0\0\0\0\0\0\0\0\0\0"), "a GGUF file"},
        {LIT("\x93NUMPY\x01\0v\0{'descr': '<f4'"), "a NumPy .npy array"},
#undef LIT
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[ATTN_ERRLEN];
        st_file *f = NULL;
        CHECK_INT_EQ(st_parse(cases[i].bytes, cases[i].len, LABEL, &f, err, sizeof err),
                     ATTN_ERR_FORMAT);
        CHECK_STR_CONTAINS(err, cases[i].needle);
        CHECK_STR_CONTAINS(err, "safetensors.torch.save_file");
        st_close(f);
    }
}

int main(void) {
    test_foreign();
    test_valid();
    test_valid_variants();
    test_framing();
    test_json();
    test_entries();
    test_offsets();
    test_metadata();
    test_convert();
    test_open();
    test_sweep();
    test_format_shape();
    return check_exit();
}
