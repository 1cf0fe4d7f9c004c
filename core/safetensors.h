/* safetensors.h - a strict reader of the safetensors file format.
 *
 * A safetensors file is: 8 bytes little-endian N, N bytes of a UTF-8 JSON
 * object (the header), then the raw tensor bytes. Each header entry maps a
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets
 * relative to the byte after the header; the optional "__metadata__" entry
 * maps strings to strings.
 *
 * This reader trusts nothing: the header length must be sane and inside the
 * file, the header must be a UTF-8 JSON object without duplicate keys, every
 * entry complete, offsets contiguous from 0 with no gap or overlap, each byte
 * length equal to product(shape) x dtype size (overflow-checked), and the
 * data must end exactly at the end of the file. It has its own small JSON
 * parser: core/ does not depend on a JSON library.
 *
 *     st_file *f;
 *     char err[ATTN_ERRLEN];
 *     if (st_open("layer.safetensors", &f, err, sizeof err)) { puts(err); return; }
 *     const st_tensor *t = st_find(f, "in_proj_weight");
 *     ...
 *     st_close(f);
 *
 * An st_file is immutable after st_open/st_parse and may be read from many
 * threads at once.
 */
#ifndef ATTN_SAFETENSORS_H
#define ATTN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define ST_MAX_DIMS   8                    /* more dimensions are rejected */
#define ST_MAX_HEADER (100u * 1024 * 1024) /* as the reference implementation */

typedef enum {
    ST_F64,
    ST_F32,
    ST_F16,
    ST_BF16,
    ST_I64,
    ST_I32,
    ST_I16,
    ST_I8,
    ST_U8,
    ST_BOOL,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct st_tensor {
    const char *name;          /* NUL-terminated, owned by the st_file */
    st_dtype dtype;            /* element type as stored */
    int ndim;                  /* 0..ST_MAX_DIMS */
    size_t shape[ST_MAX_DIMS]; /* dimensions, outermost first */
    size_t numel;              /* product of shape (1 for a scalar) */
    size_t nbytes;             /* numel x st_dtype_size(dtype) */
    const unsigned char *data; /* nbytes bytes, little-endian, unaligned */
} st_tensor;

typedef struct st_file st_file;

/* Size in bytes of one element; "F32", "BF16", ... as in the file. */
size_t st_dtype_size(st_dtype dt);
const char *st_dtype_name(st_dtype dt);

/* Write a shape as "[3, 4]" ("[]" for a scalar) into buf (always
 * NUL-terminated when len > 0, truncated to fit). For messages. */
void st_format_shape(const size_t *shape, int ndim, char *buf, size_t len);

/* Read and validate the whole file at path. On success *out owns a copy of
 * the file's bytes; release it with st_close. Fails with ATTN_ERR_IO (cannot
 * read) or ATTN_ERR_FORMAT (message names the path and what is wrong). */
attn_status st_open(const char *path, st_file **out, char *err, size_t errlen);

/* Validate len bytes at buf (copied; buf may be freed afterwards). label
 * names the source in messages (a path, or "<memory>"). Used by st_open and
 * by the fuzz target. */
attn_status st_parse(const void *buf, size_t len, const char *label, st_file **out, char *err,
                     size_t errlen);

void st_close(st_file *f); /* accepts NULL */

size_t st_count(const st_file *f);                            /* tensors, metadata excluded */
const st_tensor *st_get(const st_file *f, size_t i);          /* i < st_count, in file order */
const st_tensor *st_find(const st_file *f, const char *name); /* NULL if absent */
/* Value of __metadata__[key], or NULL if absent. */
const char *st_metadata(const st_file *f, const char *key);
const char *st_label(const st_file *f);

/* Convert a F32/F16/BF16/F64 tensor to float32 into dst (t->numel floats).
 * Fails with ATTN_ERR_FORMAT for other dtypes, naming the tensor. Values that
 * are not finite in float32 (NaN, inf, or a F64 beyond FLT_MAX) fail with
 * ATTN_ERR_LAYER naming the tensor and the flat index. */
/* IEEE half (as its 16 bits) to float, exactly; inf and NaN stay so. */
float st_f16_to_f32(uint16_t h);

attn_status st_to_f32(const st_tensor *t, float *dst, const char *label, char *err, size_t errlen);
/* The same for elements [first, first + count) of t only (into dst[0..count));
 * messages give the index in the whole tensor. The caller keeps the range
 * within t->numel. */
attn_status st_to_f32_range(const st_tensor *t, size_t first, size_t count, float *dst,
                            const char *label, char *err, size_t errlen);

#endif
