/* answer.h - a response body as an ordered list of pieces, sent as they lie
 * in memory (MHD_create_response_from_iovec: no copy into one buffer).
 *
 * Text is written into a->text (a buf) as usual; answer_push appends a
 * piece that is already somewhere else (an engine output array sent as
 * binary, a chunk of text encoded by a pool worker, a static asset): the
 * text written so far becomes a piece of its own first, so the order is the
 * order of the calls. The answer owns what it is given to free.
 *
 *     answer a; answer_init(&a);
 *     buf_puts(&a.text, "{\"x\":");
 *     answer_push(&a, chunk, chunk_len, chunk);   // freed with the answer
 *     buf_puts(&a.text, "}");
 *     answer_seal(&a);      // then a.pieces[0..a.n) is the body
 *     answer_free(&a);
 *
 * Not thread-safe: one thread builds an answer at a time.
 */
#ifndef ATTN_ANSWER_H
#define ATTN_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef struct answer_piece {
    const void *p;
    size_t len;
    void *own;       /* freed with the answer, or NULL */
    size_t own_size; /* own is mem_reuse_alloc(own_size)'s: given back there (0: free) */
    /* A lazy piece (fill non-NULL): written as it is sent. fill writes up
     * to max bytes at out and returns how many; 0 when the piece is done,
     * (size_t)-1 when it cannot go on (the connection is then cut, so a
     * client never takes a truncated answer for a whole one). done
     * releases ctx (with the answer). */
    size_t (*fill)(void *ctx, char *out, size_t max);
    void *ctx;
    void (*done)(void *ctx);
} answer_piece;

typedef struct answer {
    buf text;             /* text not yet sealed into a piece */
    answer_piece *pieces; /* the body, in order, once sealed */
    int n, cap;
    bool failed;       /* a piece could not be added (out of memory) */
    bool binary;       /* a v2 JSON header then raw tensors */
    size_t header_len; /* binary: the JSON header's bytes (Inference-Header-Content-Length) */
    size_t lazy_min;   /* text tensors from this many estimated bytes are lazy pieces; 0: never */
    bool lazy;         /* the answer has a lazy piece: its length is not known */
    const char *content_type;
} answer;

void answer_init(answer *a);
/* Append a piece of len bytes at p (own: free it with the answer, or NULL).
 * On failure own is freed at once and a->failed set. */
void answer_push(answer *a, const void *p, size_t len, void *own);
/* answer_push of a block from mem_reuse_alloc(own_size) (hugemem.h), which
 * the answer gives back there to be reused. */
void answer_push_reused(answer *a, const void *p, size_t len, void *own, size_t own_size);
/* Append a lazy piece (see answer_piece). On failure done(ctx) is called at
 * once and a->failed set. */
void answer_push_lazy(answer *a, size_t (*fill)(void *, char *, size_t), void *ctx,
                      void (*done)(void *));
/* Turn the pending text into a piece (nothing when it is empty). */
void answer_seal(answer *a);
/* Bytes of the whole body (sealed or not), lazy pieces not counted. */
size_t answer_len(const answer *a);
void answer_free(answer *a); /* accepts an answer that is all zeros */

#endif
