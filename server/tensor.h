/* tensor.h - request tensors, whatever their wire form, into engine arrays.
 *
 * Both APIs carry tensors in one of four forms:
 *   TS_NESTED   a nested JSON array of numbers or booleans (/attend);
 *   TS_BASE64   /attend's {"dtype","shape","base64"} object;
 *   TS_JSON     v2's "data": numbers or booleans, flat or nested, with the
 *               shape and datatype given beside it;
 *   TS_RAW      v2's binary tensor extension: little-endian bytes after the
 *               JSON header, shape and datatype given beside them.
 * A tensor_src is probed first (shape, element kind, count: nothing
 * allocated), so the caller can check every shape and limit; tensor_fill
 * then checks every element and hands the engine a float32 array (float
 * tensors) or a uint8 array of 0/1 (boolean masks). Raw FP32 and BOOL
 * tensors are used in place, not copied (the caller keeps the bytes alive
 * and 4-byte aligned); the other forms get a new array.
 *
 *     tensor_src t;
 *     http_error e = tensor_probe(&t, "embeddings", v, 2, 3, false, err, sizeof err);
 *     if (!e) ... check t.rank, t.dim ...
 *     void *data; bool owned;
 *     if (!e) e = tensor_fill(&t, &data, &owned, err, sizeof err);
 *     ... if (owned) free(data);
 *
 * Errors follow server/'s convention (errors.h): an http_error and a message
 * naming the field and, for elements, their index.
 */
#ifndef ATTN_TENSOR_H
#define ATTN_TENSOR_H

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"
#include "json.h"

typedef enum { TK_FLOAT, TK_BOOL } tkind;

/* Element types on the wire (v2 datatypes). INT32 is for answers only
 * (top-k key indices). */
#define TENSOR_DTYPES(X)                                                                           \
    X(FP32, "FP32", 4)                                                                             \
    X(FP16, "FP16", 2)                                                                             \
    X(BF16, "BF16", 2)                                                                             \
    X(FP64, "FP64", 8)                                                                             \
    X(BOOL, "BOOL", 1)                                                                             \
    X(INT32, "INT32", 4)

typedef enum {
#define X(name, text, size) TD_##name,
    TENSOR_DTYPES(X)
#undef X
        TD_COUNT
} tdtype;

const char *tdtype_name(tdtype t); /* "FP32", ... */
size_t tdtype_size(tdtype t);      /* bytes of one element */
int tdtype_parse(const char *s);   /* a tdtype, or -1 when s names none */

typedef enum { TS_NESTED, TS_BASE64, TS_JSON, TS_RAW } tsrc;

typedef struct tensor_src {
    const char *field; /* name for messages */
    tsrc src;
    const jv *v;     /* TS_NESTED, TS_JSON: the array */
    const char *b64; /* TS_BASE64: the text */
    size_t b64len;
    const unsigned char *raw; /* TS_RAW: the bytes (raw_len = count x element size) */
    size_t raw_len;
    tdtype dtype; /* TS_JSON, TS_RAW: the declared datatype */
    bool is_mask; /* float masks may hold -inf (to remove a score) */
    tkind kind;
    int rank;
    size_t dim[4];
    size_t count; /* product of dim */
} tensor_src;

/* /attend: v is a nested array or a base64 tensor object. Rank must be in
 * [min_rank, max_rank]; booleans only when allow_bool. */
http_error tensor_probe(tensor_src *t, const char *field, const jv *v, int min_rank, int max_rank,
                        bool allow_bool, char *err, size_t errlen);

/* v2: shape (a JSON array of integers) and the datatype are given; data is
 * either the JSON array v (raw NULL) or raw bytes. A datatype that does not
 * suit the field (BOOL for embeddings) is refused here. */
http_error tensor_probe_typed(tensor_src *t, const char *field, const jv *shape, tdtype dt,
                              const jv *v, const unsigned char *raw, size_t raw_len, int min_rank,
                              int max_rank, bool allow_bool, char *err, size_t errlen);

/* Check every element and produce the engine's array (see the top). *owned
 * says whether the caller must free *data. */
http_error tensor_fill(const tensor_src *t, void **data, bool *owned, char *err, size_t errlen);

/* Bytes tensor_fill will allocate for t (0 when it is used in place). */
size_t tensor_fill_bytes(const tensor_src *t);

/* "[2,5,64]" into out. */
const char *tensor_shape_str(char *out, size_t n, const size_t *dim, int rank);

/* Round float32 values to the precision of dt (FP16 or BF16, round to
 * nearest even; FP32 leaves them), in place. */
void tensor_round(float *x, size_t count, tdtype dt);
/* Pack float32 values into dt's bytes (FP16/BF16: 2 bytes each), in place:
 * dst may be the same memory as src. Returns the bytes written. */
size_t tensor_pack(void *dst, const float *src, size_t count, tdtype dt);

/* The index of the first of count float32 values that is not finite (NaN
 * or +-inf), or count when all are. Chunks are tested without branches so
 * the compiler vectorises them (a [12, 512, 512] answer: 1.18 ms a
 * scalar isfinite loop, 0.41 ms this). */
size_t tensor_first_nonfinite(const float *x, size_t count);

/* The index of the first of count finite float32 values that dt cannot
 * hold (rounding it to dt gives +-inf: beyond 65504 for FP16, near
 * FLT_MAX for BF16), or count when every value fits. */
size_t tensor_first_overflow(const float *x, size_t count, tdtype dt);

#endif
