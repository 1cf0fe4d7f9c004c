/* status.h - result codes shared by every module of the engine.
 *
 * Every fallible function in core/ returns an attn_status and, on failure,
 * fills a caller-supplied buffer (char *err, size_t errlen) with a message
 * that names the file, tensor, key or field at fault. ATTN_OK is zero, so
 * `if (st != ATTN_OK)` and `if (st)` both read naturally.
 *
 *     char err[ATTN_ERRLEN];
 *     attn_status st = attn_weights_load(path, NULL, &w, err, sizeof err);
 *     if (st) fprintf(stderr, "%s: %s\n", attn_status_name(st), err);
 *
 * The table below is the only list of codes: the enum, the names and the
 * default messages are generated from it. server/ maps these to HTTP in one
 * table of its own.
 */
#ifndef ATTN_STATUS_H
#define ATTN_STATUS_H

#include <stddef.h>

#define ATTN_ERRLEN 512 /* a comfortable size for error buffers */

#define ATTN_STATUS_MAP(X)                                                                         \
    X(OK, "ok")                                                                                    \
    X(ERR_IO, "file cannot be opened or read")                                                     \
    X(ERR_FORMAT, "malformed safetensors file")                                                    \
    X(ERR_LAYER, "tensors do not form a multi-head attention layer")                               \
    X(ERR_INVALID, "invalid argument")                                                             \
    X(ERR_SHAPE, "shape does not match the weight set")                                            \
    X(ERR_LIMIT, "size exceeds a limit")                                                           \
    X(ERR_NOMEM, "out of memory")                                                                  \
    X(ERR_BLAS, "BLAS self-test failed")                                                           \
    X(ERR_INTERNAL, "internal error")

typedef enum {
#define X(name, msg) ATTN_##name,
    ATTN_STATUS_MAP(X)
#undef X
        ATTN_STATUS_COUNT
} attn_status;

/* "OK", "ERR_IO", ... ; "UNKNOWN" for out-of-range values. */
const char *attn_status_name(attn_status st);
/* The default one-line description of a code. */
const char *attn_status_message(attn_status st);

/* Format into err (if err && errlen) and return st: lets callers write
 * `return attn_fail(err, errlen, ATTN_ERR_FORMAT, "%s: ...", path);`. */
attn_status attn_fail(char *err, size_t errlen, attn_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Overflow-checked size arithmetic: store a*b (a+b) in *out and return 1,
 * or return 0 when it would overflow size_t (then *out is untouched). */
int attn_mul_size(size_t a, size_t b, size_t *out);
int attn_add_size(size_t a, size_t b, size_t *out);
/* a*b*c..., count values from the array; 0 on overflow. */
int attn_mul_sizes(const size_t *v, size_t count, size_t *out);

#endif
