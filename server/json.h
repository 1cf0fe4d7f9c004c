/* json.h - a strict JSON parser built for /attend bodies.
 *
 * Accepts exactly RFC 8259 JSON (what a strict parser such as jansson with
 * JSON_REJECT_DUPLICATES accepts): one value, optional surrounding
 * whitespace, UTF-8 validated strings with every escape, no NaN/Infinity,
 * no leading zeros, no trailing commas, no comments, no NUL outside strings.
 * Differences are resource limits only (nesting depth, value count), which
 * fail with their own codes.
 *
 * Numbers are parsed once, to the double and to the correctly rounded float32
 * (identical to strtof on the token). An array whose elements are all numbers
 * is stored packed: its floats in one contiguous array (jv.u.arr.f), with no
 * per-element nodes, so a tensor costs 4 bytes a number.
 *
 *     jdoc *doc; char err[256];
 *     jdoc_limits lim = JDOC_LIMITS_DEFAULT;
 *     int rc = jdoc_parse(body, len, &lim, &doc, err, sizeof err);
 *     if (rc == JDOC_OK) { const jv *m = jv_get(jdoc_root(doc), "model"); ... }
 *     jdoc_free(doc);
 *
 * A jdoc is immutable after parsing and owns everything its jv nodes point to.
 */
#ifndef ATTN_JSON_H
#define ATTN_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    JDOC_OK = 0,
    JDOC_ERR_SYNTAX, /* not JSON: message has "at byte N" and what was expected */
    JDOC_ERR_DUPKEY, /* an object repeats a key: message names it and its byte */
    JDOC_ERR_DEPTH,  /* nesting deeper than limits.max_depth */
    JDOC_ERR_TOOBIG, /* more values than limits.max_values (packed numbers don't count) */
    JDOC_ERR_NOMEM,  /* allocation failed */
} jdoc_status;

typedef struct jdoc_limits {
    int max_depth;     /* arrays/objects nested deeper fail with JDOC_ERR_DEPTH */
    size_t max_values; /* non-packed nodes allowed (objects, arrays, strings, ...) */
    /* Optional: asked before the parse takes n more bytes of heap (the
     * document's blocks, its scratch stacks as they grow); false fails the
     * parse with JDOC_ERR_NOMEM and a message naming the memory budget.
     * What was granted is the caller's to give back (the parse keeps no
     * count): the stacks are freed when jdoc_parse returns, the document's
     * blocks by jdoc_free. */
    bool (*reserve)(void *ctx, size_t n);
    void *reserve_ctx;
} jdoc_limits;
#define JDOC_LIMITS_DEFAULT                                                                        \
    { 64, 4u << 20, NULL, NULL }

typedef enum { JV_NULL, JV_FALSE, JV_TRUE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT } jv_type;

typedef struct jv jv;
typedef struct jv_member jv_member;

struct jv {
    jv_type type;
    size_t offset; /* byte offset of the value in the source, for messages */
    union {
        struct {
            double d; /* the value as a correctly rounded double */
            float f;  /* correctly rounded float32 (may be +-inf on overflow) */
        } num;
        struct {
            const char *s; /* unescaped UTF-8, NUL-terminated; never contains \0
                              (\u0000 is rejected, as jansson does by default) */
            size_t len;
        } str;
        struct {
            size_t len;      /* number of elements */
            const jv *items; /* elements, NULL when packed */
            const float *f;  /* packed: all elements were numbers (len floats); else NULL.
                                [] is packed: len 0, f and d non-NULL, items NULL */
            const double *d; /* packed: the same as doubles (len), for integer checks */
        } arr;
        struct {
            size_t len;
            const jv_member *members; /* in source order, keys unique */
        } obj;
    } u;
};

struct jv_member {
    const char *key; /* unescaped, NUL-terminated */
    size_t key_len;
    jv value;
};

typedef struct jdoc jdoc;

/* Parse len bytes at buf (need not be NUL-terminated; not retained; may be
 * NULL when len is 0). lim NULL means JDOC_LIMITS_DEFAULT. On success returns
 * JDOC_OK and *out (free with jdoc_free). On failure returns the code,
 * *out = NULL, and err (if err && errlen) holds a message with the byte
 * offset, e.g. "invalid JSON at byte 17: expected ',' or ']' after array
 * element, found 'x'". Thread-safe: no shared state.
 *
 * Numbers jansson refuses but RFC 8259 allows are accepted: integers beyond
 * long long (the double is rounded) and magnitudes beyond DBL_MAX (d and f
 * are +-inf; callers that need finite values check isfinite). The locale
 * (LC_NUMERIC) does not matter. */
jdoc_status jdoc_parse(const char *buf, size_t len, const jdoc_limits *lim, jdoc **out, char *err,
                       size_t errlen);
const jv *jdoc_root(const jdoc *doc);
void jdoc_free(jdoc *doc); /* accepts NULL */

/* Member of an object by key, or NULL (also when obj is not an object). */
const jv *jv_get(const jv *obj, const char *key);
/* Element i of an array (packed or not): for packed arrays it fills *tmp
 * with a JV_NUMBER and returns tmp (its offset is the array's: packed numbers
 * keep no offsets of their own). NULL if out of range or not an array. */
const jv *jv_at(const jv *arr, size_t i, jv *tmp);
const char *jv_type_name(jv_type t); /* "null", "boolean", "number", ... */

#endif
