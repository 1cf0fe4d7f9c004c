/* encoding.c - see encoding.h.
 *
 * The file is divided as: float JSON; base64; binary; the table; the
 * parallel writer. */
#include "encoding.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "numfmt.h"

static size_t row_len(const enc_tensor *t) {
    return t->dim[t->rank - 1];
}

static size_t row_count(const enc_tensor *t) {
    size_t rows = 1;
    for (int i = 0; i < t->rank - 1; i++) rows *= t->dim[i];
    return rows;
}

/* ------------------------------------------------------------------ float */

/* Bytes of one encoded float: shortest is at most 15 characters
 * ("-1.17549435e-38") plus a separator; a row adds its brackets. */
static size_t float_estimate(size_t count, int precision, size_t elem_size) {
    (void)elem_size;
    size_t per = precision ? (size_t)precision + 8 : 16;
    return count > ((size_t)-1 - 64) / (per + 8) ? (size_t)-1 : count * per + 64;
}

static void write_numbers(buf *out, const float *row, size_t len, int precision) {
    char *p = buf_reserve(out, len * (FMT_F32_MAX + 1));
    if (!p) return;
    char *s = p;
    for (size_t j = 0; j < len; j++) {
        if (j) *s++ = ',';
        s += precision ? fmt_f32_digits(s, row[j], precision) : fmt_f32_shortest(s, row[j]);
    }
    buf_commit(out, (size_t)(s - p));
}

/* int32 text: at most 11 characters ("-2147483648"), within the float
 * estimate's 16 a number. */
static void write_ints(buf *out, const int32_t *row, size_t len) {
    char *p = buf_reserve(out, len * 12);
    if (!p) return;
    char *s = p;
    for (size_t j = 0; j < len; j++) {
        if (j) *s++ = ',';
        uint32_t u = row[j] < 0 ? 0u - (uint32_t)row[j] : (uint32_t)row[j];
        char tmp[12];
        int k = 0;
        do tmp[k++] = (char)('0' + u % 10);
        while ((u /= 10) != 0);
        if (row[j] < 0) *s++ = '-';
        while (k) *s++ = tmp[--k];
    }
    buf_commit(out, (size_t)(s - p));
}

/* Row r of t, as its element type. */
static const void *row_at(const enc_tensor *t, size_t r) {
    return (const char *)t->data + r * row_len(t) * 4;
}

static void float_open(buf *out, const enc_tensor *t) {
    if (!t->nested) buf_putc(out, '[');
}

/* Rows [r0, r1): nested, each row opens the brackets of every level that
 * starts at it and closes those that end at it, so any range of rows
 * writes exactly its part of the whole text. */
static void float_rows(buf *out, const enc_tensor *t, size_t r0, size_t r1) {
    const size_t *dim = t->dim, len = row_len(t);
    const int rank = t->rank;
    for (size_t r = r0; r < r1; r++) {
        if (r) buf_putc(out, ',');
        if (t->nested) {
            size_t k = r;
            int opens = 1;
            for (int i = rank - 2; i >= 0 && k % dim[i] == 0; i--, opens++) k /= dim[i];
            if (r == 0) opens = rank;
            for (int i = 0; i < opens; i++) buf_putc(out, '[');
        }
        if (t->elem == ENC_I32)
            write_ints(out, row_at(t, r), len);
        else
            write_numbers(out, row_at(t, r), len, t->precision);
        if (t->nested) {
            buf_putc(out, ']');
            size_t k = r + 1;
            for (int i = rank - 2; i >= 0 && k % dim[i] == 0; i--) {
                buf_putc(out, ']');
                k /= dim[i];
            }
        }
    }
}

static void float_close(buf *out, const enc_tensor *t) {
    if (!t->nested) buf_putc(out, ']');
}

/* ----------------------------------------------------------------- base64 */

static size_t base64_estimate(size_t count, int precision, size_t elem_size) {
    (void)precision, (void)elem_size;
    return count > ((size_t)-1 - 512) / 6 ? (size_t)-1 : count / 3 * 16 + 512;
}

static void base64_open(buf *out, const enc_tensor *t) {
    buf_puts(out, t->elem == ENC_I32 ? "{\"dtype\":\"int32\",\"shape\":["
                                     : "{\"dtype\":\"float32\",\"shape\":[");
    buf_put_dims(out, t->dim, t->rank);
    buf_puts(out, "],\"base64\":\"");
}

/* Rows [r0, r1) as base64: a range holds a multiple of 3 elements (12
 * bytes, 16 characters) unless it ends the tensor, so ranges join without
 * padding in between. float32 and int32 little-endian: this host's order
 * (tensor.c checks). */
static void base64_rows(buf *out, const enc_tensor *t, size_t r0, size_t r1) {
    size_t len = row_len(t), bytes = (r1 - r0) * len * 4;
    char *p = buf_reserve(out, base64_encoded_len(bytes));
    if (!p) return;
    buf_commit(out, base64_encode(p, row_at(t, r0), bytes));
}

static void base64_close(buf *out, const enc_tensor *t) {
    (void)t;
    buf_puts(out, "\"}");
}

/* ----------------------------------------------------------------- binary */

static size_t binary_estimate(size_t count, int precision, size_t elem_size) {
    (void)precision;
    return count > ((size_t)-1 - 256) / 8 ? (size_t)-1 : count * elem_size + 256;
}

/* ------------------------------------------------------------------ table */

static const encoding encodings[ENC_COUNT] = {
    [ENC_FLOAT] = {ENC_FLOAT, "float", "application/json", false, float_estimate, float_open,
                   float_rows, float_close, 1, 0},
    [ENC_BASE64] = {ENC_BASE64, "base64", "application/json", false, base64_estimate, base64_open,
                    base64_rows, base64_close, 1, 3},
    [ENC_BINARY] = {ENC_BINARY, "binary", "application/octet-stream", true, binary_estimate, NULL,
                    NULL, NULL, 1, 0},
};

const encoding *encoding_get(enc_kind k) {
    return (unsigned)k < ENC_COUNT ? &encodings[k] : &encodings[ENC_FLOAT];
}

const encoding *encoding_find(const char *name) {
    for (int i = 0; i < ENC_COUNT; i++)
        if (!encodings[i].raw && !strcmp(encodings[i].name, name)) return &encodings[i];
    return NULL;
}

/* ------------------------------------------------------ parallel writing */

/* Below this many elements a tensor is written on the calling thread: the
 * hand-off to the pool costs more than it saves. */
#define ENC_PARALLEL_MIN ((size_t)1 << 16)

typedef struct enc_job {
    const encoding *enc;
    const enc_tensor *t;
    size_t rows, step; /* chunk k is rows [k*step, min((k+1)*step, rows)) */
    buf *chunks;
} enc_job;

static void enc_task(void *ctx, size_t k, int worker) {
    enc_job *j = ctx;
    (void)worker;
    size_t r0 = k * j->step, r1 = r0 + j->step < j->rows ? r0 + j->step : j->rows;
    buf *b = &j->chunks[k];
    size_t est = j->enc->estimate((r1 - r0) * row_len(j->t), j->t->precision, 4) + 16 * (r1 - r0);
    if (buf_reserve(b, est)) mem_advise(b->data, b->cap);
    j->enc->rows(b, j->t, r0, r1);
}

static size_t gcd(size_t a, size_t b) {
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A lazy piece: the rows of a tensor encoded a piece at a time as the
 * reader asks for them and handed out from the sub-chunks the piece was
 * written in (no copy of it as a whole), the piece split over the pool's
 * workers when the pool is idle (attn_pool_try_run: the HTTP thread that
 * reads never waits behind a forward pass), else on the reading thread. */
#define LAZY_SPLIT 8 /* most sub-chunks a piece is split into */

typedef struct enc_lazy {
    const encoding *enc;
    enc_tensor t;
    size_t dim[4];
    void *data;             /* owned */
    attn_pool *pool;        /* NULL: always on the reading thread */
    size_t row, rows, step; /* next row, all rows, rows per sub-chunk */
    int split;              /* sub-chunks per piece */
    buf sub[LAZY_SPLIT];    /* a piece's sub-chunks as the workers write them */
    int k;                  /* sub[k] is being handed out (split: all were) */
    size_t off;             /* of sub[k] handed out */
} enc_lazy;

static void lazy_task(void *ctx, size_t k, int worker) {
    enc_lazy *z = ctx;
    (void)worker;
    size_t r0 = z->row + k * z->step;
    if (r0 >= z->rows) return;
    size_t r1 = r0 + z->step < z->rows ? r0 + z->step : z->rows;
    z->enc->rows(&z->sub[k], &z->t, r0, r1);
}

static size_t lazy_fill(void *ctx, char *out, size_t max) {
    enc_lazy *z = ctx;
    size_t n = 0;
    while (n < max) {
        if (z->k == z->split) { /* the piece is handed out: encode the next */
            if (z->row == z->rows) break;
            for (int k = 0; k < z->split; k++) z->sub[k].len = 0;
            if (!attn_pool_try_run(z->pool, (size_t)z->split, lazy_task, z))
                for (int k = 0; k < z->split; k++) lazy_task(z, (size_t)k, 0);
            for (int k = 0; k < z->split; k++)
                if (z->sub[k].failed) return (size_t)-1; /* out of memory: cannot be whole */
            size_t span = (size_t)z->split * z->step;
            z->row = z->rows - z->row > span ? z->row + span : z->rows;
            z->k = 0;
            z->off = 0;
        }
        /* straight from the sub-chunks: no copy of the piece as a whole */
        const buf *b = &z->sub[z->k];
        size_t m = b->len - z->off < max - n ? b->len - z->off : max - n;
        if (m) memcpy(out + n, b->data + z->off, m);
        n += m;
        z->off += m;
        if (z->off == b->len) {
            z->k++;
            z->off = 0;
        }
    }
    return n;
}

static void lazy_done(void *ctx) {
    enc_lazy *z = ctx;
    for (int k = 0; k < LAZY_SPLIT; k++) buf_free(&z->sub[k]);
    free(z->data);
    free(z);
}

bool encoding_write(const encoding *enc, answer *a, attn_pool *pool, const enc_tensor *t,
                    bool give) {
    size_t rows = row_count(t), len = row_len(t);
    enc->open(&a->text, t);
    size_t est = enc->estimate(rows * len, t->precision, 4);
    if (a->lazy_min && est >= a->lazy_min && give) {
        enc_lazy *z = calloc(1, sizeof *z);
        if (!z) {
            a->failed = true;
            return false;
        }
        /* pieces of about ENC_LAZY_PIECE bytes, in one sub-chunk per worker,
         * each starting where a chunk can */
        int workers = pool ? attn_pool_size(pool) : 1;
        int split = workers < 1 ? 1 : workers > LAZY_SPLIT ? LAZY_SPLIT : workers;
        size_t m = enc->elem_multiple ? enc->elem_multiple / gcd(len, enc->elem_multiple) : 1;
        size_t per_row = est / rows + 1, step = ENC_LAZY_PIECE / (size_t)split / per_row;
        step = step < m ? m : step / m * m;
        *z = (enc_lazy){.enc = enc,
                        .t = *t,
                        .data = (void *)t->data,
                        .pool = pool,
                        .rows = rows,
                        .step = step,
                        .split = split};
        memcpy(z->dim, t->dim, (size_t)t->rank * sizeof *t->dim);
        z->t.dim = z->dim;
        for (int k = 0; k < LAZY_SPLIT; k++) buf_init(&z->sub[k], (size_t)-1 / 2);
        z->k = split; /* nothing encoded yet */
        answer_push_lazy(a, lazy_fill, z, lazy_done);
        enc->close(&a->text, t);
        return true;
    }
    int workers = pool ? attn_pool_size(pool) : 1;
    if (workers < 2 || rows < 2 || rows * len < ENC_PARALLEL_MIN) {
        buf_reserve(&a->text, enc->estimate(rows * len, t->precision, 4));
        enc->rows(&a->text, t, 0, rows);
        enc->close(&a->text, t);
        return false;
    }
    /* chunks: a few per worker (they finish unevenly), each starting at a
     * row the encoding can start a chunk at */
    size_t m = enc->elem_multiple ? enc->elem_multiple / gcd(len, enc->elem_multiple) : 1;
    size_t nchunks = (size_t)workers * 4, step = (rows + nchunks - 1) / nchunks;
    step = (step + m - 1) / m * m;
    nchunks = (rows + step - 1) / step;
    buf *chunks = calloc(nchunks, sizeof *chunks);
    if (!chunks) {
        a->failed = true;
        return false;
    }
    for (size_t k = 0; k < nchunks; k++) buf_init(&chunks[k], (size_t)-1 / 2);
    enc_job j = {enc, t, rows, step, chunks};
    attn_pool_run(pool, nchunks, enc_task, &j);
    for (size_t k = 0; k < nchunks; k++) {
        if (chunks[k].failed) {
            a->failed = true;
            buf_free(&chunks[k]);
            continue;
        }
        size_t n;
        char *p = buf_take(&chunks[k], &n);
        answer_push(a, p, n, p);
    }
    free(chunks);
    enc->close(&a->text, t);
    return false;
}
