/* answer.c - see answer.h. */
#include "answer.h"

#include <stdlib.h>
#include <string.h>

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

void answer_push(answer *a, const void *p, size_t len, void *own) {
    answer_seal(a);
    if (!grow(a)) {
        free(own);
        a->failed = true;
        return;
    }
    a->pieces[a->n++] = (answer_piece){.p = p, .len = len, .own = own};
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
        free(a->pieces[i].own);
        if (a->pieces[i].done) a->pieces[i].done(a->pieces[i].ctx);
    }
    free(a->pieces);
    memset(a, 0, sizeof *a);
}
