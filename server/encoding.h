/* encoding.h - how an answer carries a float tensor: the one place that
 * knows each encoding's size, writer and media type.
 *
 *   ENC_FLOAT   JSON numbers (shortest round-trip text, or `precision`
 *               significant digits), nested by the shape (/attend) or flat
 *               (v2's "data");
 *   ENC_BASE64  /attend's {"dtype":"float32","shape":[...],"base64":"..."};
 *   ENC_BINARY  v2's binary tensor extension: the raw little-endian bytes
 *               after the JSON header, which names their size only.
 *
 * The request path picks an encoding once (from encoding_format, or v2's
 * binary_data parameters) and then asks it, never "if (base64)".
 *
 *     const encoding *enc = encoding_get(ENC_BASE64);
 *     size_t est = enc->estimate(count, precision, 4);   // before computing
 *     enc->write(&out, data, dim, rank, precision, nested);
 */
#ifndef ATTN_ENCODING_H
#define ATTN_ENCODING_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef enum { ENC_FLOAT, ENC_BASE64, ENC_BINARY, ENC_COUNT } enc_kind;

typedef struct encoding {
    enc_kind kind;
    const char *name;         /* "float", "base64", "binary" */
    const char *content_type; /* of an answer that carries tensors this way */
    bool raw;                 /* the bytes travel after the JSON header, not in it */
    /* Upper bound of the bytes count elements take, at `precision` digits
     * (0 = shortest) and elem_size bytes each on the wire (binary). */
    size_t (*estimate)(size_t count, int precision, size_t elem_size);
    /* Write data [dim...] as a JSON value into out: nested arrays when
     * nested, else one flat array (ENC_FLOAT); a tensor object (ENC_BASE64).
     * ENC_BINARY writes nothing here (its bytes are a segment of their own). */
    void (*write)(buf *out, const float *data, const size_t *dim, int rank, int precision,
                  bool nested);
} encoding;

const encoding *encoding_get(enc_kind k);
/* By its /attend name ("float", "base64"); NULL when unknown. */
const encoding *encoding_find(const char *name);

#endif
