/* encoding.c - see encoding.h. */
#include "encoding.h"

#include <string.h>

#include "numfmt.h"

/* ------------------------------------------------------------------ float */

/* Bytes of one encoded float: shortest is at most 15 characters
 * ("-1.17549435e-38") plus a separator. */
static size_t float_estimate(size_t count, int precision, size_t elem_size) {
    (void)elem_size;
    size_t per = precision ? (size_t)precision + 8 : 16;
    return count > ((size_t)-1 - 64) / per ? (size_t)-1 : count * per + 64;
}

static void write_row(buf *out, const float *row, size_t len, int precision) {
    char *p = buf_reserve(out, len * (FMT_F32_MAX + 1));
    if (!p) return;
    char *s = p;
    for (size_t j = 0; j < len; j++) {
        if (j) *s++ = ',';
        s += precision ? fmt_f32_digits(s, row[j], precision) : fmt_f32_shortest(s, row[j]);
    }
    buf_commit(out, (size_t)(s - p));
}

/* Nested arrays of dim[0..rank) from data, innermost rows written straight
 * into reserved space. */
static void write_nested(buf *out, const float *data, const size_t *dim, int rank, int precision) {
    size_t rows = 1, len = dim[rank - 1];
    for (int i = 0; i < rank - 1; i++) rows *= dim[i];
    for (size_t r = 0; r < rows; r++) {
        /* open brackets for every level that starts at this row */
        size_t k = r;
        int opens = 1;
        for (int i = rank - 2; i >= 0 && k % dim[i] == 0; i--, opens++) k /= dim[i];
        if (r == 0) opens = rank;
        if (r) buf_putc(out, ',');
        for (int i = 1; i < opens; i++) buf_putc(out, '[');
        buf_putc(out, '[');
        write_row(out, data + r * len, len, precision);
        buf_putc(out, ']');
        /* close every level that ends at this row */
        k = r + 1;
        for (int i = rank - 2; i >= 0 && k % dim[i] == 0; i--) {
            buf_putc(out, ']');
            k /= dim[i];
        }
    }
}

static void float_write(buf *out, const float *data, const size_t *dim, int rank, int precision,
                        bool nested) {
    if (nested) {
        write_nested(out, data, dim, rank, precision);
        return;
    }
    size_t count = 1, row = dim[rank - 1];
    for (int i = 0; i < rank; i++) count *= dim[i];
    buf_putc(out, '[');
    for (size_t i = 0; i < count; i += row) { /* a row at a time bounds the reservation */
        if (i) buf_putc(out, ',');
        write_row(out, data + i, row, precision);
    }
    buf_putc(out, ']');
}

/* ----------------------------------------------------------------- base64 */

static size_t base64_estimate(size_t count, int precision, size_t elem_size) {
    (void)precision, (void)elem_size;
    return count > ((size_t)-1 - 512) / 6 ? (size_t)-1 : count / 3 * 16 + 512;
}

static void base64_write(buf *out, const float *data, const size_t *dim, int rank, int precision,
                         bool nested) {
    (void)precision, (void)nested;
    size_t count = 1;
    buf_puts(out, "{\"dtype\":\"float32\",\"shape\":[");
    for (int i = 0; i < rank; i++) {
        buf_printf(out, i ? ",%zu" : "%zu", dim[i]);
        count *= dim[i];
    }
    buf_puts(out, "],\"base64\":\"");
    size_t bytes = count * sizeof(float);
    char *p = buf_reserve(out, base64_encoded_len(bytes));
    if (!p) return;
    /* float32 little-endian: this host's order (tensor.c checks it at build) */
    buf_commit(out, base64_encode(p, data, bytes));
    buf_puts(out, "\"}");
}

/* ----------------------------------------------------------------- binary */

static size_t binary_estimate(size_t count, int precision, size_t elem_size) {
    (void)precision;
    return count > ((size_t)-1 - 256) / 8 ? (size_t)-1 : count * elem_size + 256;
}

static void binary_write(buf *out, const float *data, const size_t *dim, int rank, int precision,
                         bool nested) {
    (void)out, (void)data, (void)dim, (void)rank, (void)precision, (void)nested;
}

/* ------------------------------------------------------------------ table */

static const encoding encodings[ENC_COUNT] = {
    [ENC_FLOAT] = {ENC_FLOAT, "float", "application/json", false, float_estimate, float_write},
    [ENC_BASE64] = {ENC_BASE64, "base64", "application/json", false, base64_estimate, base64_write},
    [ENC_BINARY] = {ENC_BINARY, "binary", "application/octet-stream", true, binary_estimate,
                    binary_write},
};

const encoding *encoding_get(enc_kind k) {
    return (unsigned)k < ENC_COUNT ? &encodings[k] : &encodings[ENC_FLOAT];
}

const encoding *encoding_find(const char *name) {
    for (int i = 0; i < ENC_COUNT; i++)
        if (!encodings[i].raw && !strcmp(encodings[i].name, name)) return &encodings[i];
    return NULL;
}
