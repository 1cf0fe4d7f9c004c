/* mem.c - see mem.h. */
#include "mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

void mem_advise(void *p, size_t n) {
    if (!p || n < MEM_HUGE_MIN) return;
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
    if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
}

void *mem_alloc(size_t n) {
    void *p = malloc(n ? n : 1);
    mem_advise(p, n);
    return p;
}
