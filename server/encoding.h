/* encoding.h - how an answer carries a tensor (float32 or int32 elements):
 * the one place that knows each encoding's size, writer and media type.
 *
 *   ENC_FLOAT   JSON numbers (floats: shortest round-trip text, or
 *               `precision` significant digits; int32: integers), nested by
 *               the shape (/attend) or flat (v2's "data");
 *   ENC_BASE64  /attend's {"dtype":"float32","shape":[...],"base64":"..."}
 *               ("dtype":"int32" for int32 elements);
 *   ENC_BINARY  v2's binary tensor extension: the raw little-endian bytes
 *               after the JSON header, which names their size only.
 *
 * The request path picks an encoding once (from encoding_format, or v2's
 * binary_data parameters) and then asks it, never "if (base64)".
 *
 * A text encoding writes a tensor as an opening, its rows, and a closing;
 * rows can be written in independent ranges, so encoding_write splits a
 * large tensor into chunks that the compute pool's workers encode at once,
 * each into its own buffer, which become pieces of the answer in order (no
 * copy to join them). The text is the same as one writer's.
 *
 *     const encoding *enc = encoding_get(ENC_BASE64);
 *     size_t est = enc->estimate(count, precision, 4);   // before computing
 *     encoding_write(enc, &answer, pool, &t, &data);
 *
 * A tensor whose text would reach answer->lazy_min bytes is not written at
 * all but becomes a lazy piece of the answer, encoded a few hundred
 * kilobytes at a time as the client reads it: a slow reader then holds the
 * raw tensor and one piece, not the whole text.
 */
#ifndef ATTN_ENCODING_H
#define ATTN_ENCODING_H

#include <stdbool.h>
#include <stddef.h>

#include "answer.h"
#include "buf.h"
#include "pool.h"

typedef enum { ENC_FLOAT, ENC_BASE64, ENC_BINARY, ENC_COUNT } enc_kind;

/* The element type of a tensor: both 4 bytes, little-endian. */
typedef enum { ENC_F32, ENC_I32 } enc_elem;

/* A tensor to write: data [dim...] (rank 1..4), as rows of dim[rank-1]. */
typedef struct enc_tensor {
    const void *data; /* float, or int32_t with ENC_I32 */
    const size_t *dim;
    int rank;
    int precision; /* floats: 0 = shortest round-trip, else 1..9 significant digits */
    bool nested;   /* nested arrays by the shape (else one flat array) */
    enc_elem elem; /* ENC_F32 (the default) or ENC_I32 */
} enc_tensor;

typedef struct encoding {
    enc_kind kind;
    const char *name;         /* "float", "base64", "binary" */
    const char *content_type; /* of an answer that carries tensors this way */
    bool raw;                 /* the bytes travel after the JSON header, not in it */
    /* Upper bound of the bytes count elements take, at `precision` digits
     * (0 = shortest, which also bounds int32 text) and elem_size bytes each
     * on the wire (binary). */
    size_t (*estimate)(size_t count, int precision, size_t elem_size);
    /* Text before the rows, rows [r0, r1), text after them (not for raw). */
    void (*open)(buf *out, const enc_tensor *t);
    void (*rows)(buf *out, const enc_tensor *t, size_t r0, size_t r1);
    void (*close)(buf *out, const enc_tensor *t);
    size_t row_multiple;  /* chunks start at multiples of this many rows... */
    size_t elem_multiple; /* ...or, when set, of rows holding a multiple of this many elements */
} encoding;

const encoding *encoding_get(enc_kind k);
/* By its /attend name ("float", "base64"); NULL when unknown. */
const encoding *encoding_find(const char *name);

/* Write t into a's text with encoding enc (not ENC_BINARY), splitting a
 * large tensor over the pool (NULL: on this thread), or, when give is true
 * (t->data is malloc'd and the caller's to give), as a lazy piece (see the
 * top): then the answer takes t->data over (frees it with itself) and this
 * returns true, and the caller must forget the pointer; else false. On
 * out-of-memory a->failed is set. Must not be called from a pool task. */
bool encoding_write(const encoding *enc, answer *a, attn_pool *pool, const enc_tensor *t,
                    bool give);

/* Bytes of text a lazy piece holds at once (besides its tensor). */
#define ENC_LAZY_PIECE ((size_t)1 << 20)

#endif
