/* mem.c - see mem.h. */
#include "mem.h"

#include <malloc.h>
#include <stdlib.h>

void mem_trim(void) {
    malloc_trim(0);
}

void *mem_grow(void *p, int *cap, int n, size_t elem) {
    if (n < *cap) return p;
    int c = *cap ? 2 * *cap : 8;
    void *q = c > 0 ? realloc(p, (size_t)c * elem) : NULL;
    if (q) *cap = c;
    return q;
}
