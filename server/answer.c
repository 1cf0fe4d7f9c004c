/* answer.c - see answer.h. */
#include "answer.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

void answer_init(answer *a) {
    memset(a, 0, sizeof *a);
    buf_init(&a->text, (size_t)-1 / 2);
    a->content_type = "application/json";
}

static bool grow(answer *a) {
    if (a->n < a->cap) return true;
    int ncap = a->cap ? 2 * a->cap : 8;
    answer_piece *p = realloc(a->pieces, (size_t)ncap * sizeof *p);
    if (!p) return false;
    a->pieces = p;
    a->cap = ncap;
    return true;
}

void answer_seal(answer *a) {
    if (a->text.failed) a->failed = true;
    if (!a->text.len) return;
    if (!grow(a)) {
        a->failed = true;
        return;
    }
    size_t len;
    char *p = buf_take(&a->text, &len);
    a->pieces[a->n++] = (answer_piece){.p = p, .len = len, .own = p};
}

/* Let go of what a piece owns. */
static void own_free(void *own, size_t own_size) {
    if (own_size)
        mem_reuse_free(own, own_size);
    else
        free(own);
}

void answer_push_reused(answer *a, const void *p, size_t len, void *own, size_t own_size) {
    answer_seal(a);
    if (!grow(a)) {
        own_free(own, own_size);
        a->failed = true;
        return;
    }
    a->pieces[a->n++] = (answer_piece){.p = p, .len = len, .own = own, .own_size = own_size};
}

void answer_push(answer *a, const void *p, size_t len, void *own) {
    answer_push_reused(a, p, len, own, 0);
}

void answer_push_lazy(answer *a, size_t (*fill)(void *, char *, size_t), void *ctx,
                      void (*done)(void *)) {
    answer_seal(a);
    if (!grow(a)) {
        done(ctx);
        a->failed = true;
        return;
    }
    a->pieces[a->n++] = (answer_piece){.fill = fill, .ctx = ctx, .done = done};
    a->lazy = true;
}

size_t answer_len(const answer *a) {
    size_t n = a->text.len;
    for (int i = 0; i < a->n; i++) n += a->pieces[i].len;
    return n;
}

void answer_free(answer *a) {
    buf_free(&a->text);
    for (int i = 0; i < a->n; i++) {
        own_free(a->pieces[i].own, a->pieces[i].own_size);
        if (a->pieces[i].done) a->pieces[i].done(a->pieces[i].ctx);
    }
    free(a->pieces);
    memset(a, 0, sizeof *a);
}
