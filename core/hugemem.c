/* hugemem.c - see hugemem.h. */
#include "hugemem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void mem_advise(void *p, size_t n) {
    if (!p || n < MEM_HUGE_MIN) return;
    const uintptr_t huge = HUGE_PAGE;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
    if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
}

size_t mem_alloc_size(size_t n) {
    if (n < MEM_HUGE_MIN || n > (size_t)-1 - HUGE_PAGE) return n;
    return (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
}

void *mem_alloc(size_t n) {
    if (n < MEM_HUGE_MIN) return malloc(n ? n : 1);
    if (n > (size_t)-1 - HUGE_PAGE) return NULL;
    /* 2 MiB-aligned and a whole number of huge pages, so all of it can be
     * huge pages (the tail that is never written costs nothing) */
    size_t whole = mem_alloc_size(n);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, whole)) return NULL;
    mem_advise(p, whole);
    return p;
}
