/* hugemem.c - see hugemem.h. */
#include "hugemem.h"

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
    if (n < MEM_HUGE_MIN) return malloc(n ? n : 1);
    /* 2 MiB-aligned and a whole number of huge pages, so all of it can be
     * huge pages (the tail that is never written costs nothing) */
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (n > (size_t)-1 - huge || posix_memalign(&p, huge, (n + huge - 1) / huge * huge))
        return NULL;
    mem_advise(p, (n + huge - 1) / huge * huge);
    return p;
}

size_t mem_alloc_size(size_t n) {
    const size_t huge = (size_t)2 << 20;
    if (n < MEM_HUGE_MIN || n > (size_t)-1 - huge) return n;
    return (n + huge - 1) / huge * huge;
}
