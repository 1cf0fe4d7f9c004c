/* mem.h - request-sized buffers: mem_alloc and huge pages (core/hugemem.h,
 * shared with the engine's scratch), giving memory back, growing arrays. */
#ifndef ATTN_MEM_H
#define ATTN_MEM_H

#include <stddef.h>

#include "hugemem.h"

/* Give the memory that freed request buffers left in the allocator's heap
 * back to the system (malloc_trim). glibc keeps freed large buffers for
 * reuse once its mmap threshold has risen past them, which is what makes
 * back-to-back large requests fast (measured: medium requests under load
 * 540-610 req/s with reuse, 260-300 when every buffer was mmap'd and
 * unmapped, the page faults and TLB shootdowns costing half the time); the
 * HTTP watchdog calls this when no request is in flight, so an idle server's
 * RSS goes back down. (The engine's spare scratch, hugemem.h, has its own
 * clock: the watchdog frees it a second after the last pass that used it.) */
void mem_trim(void);

/* Room for one more element in the array p of n elements of elem bytes,
 * *cap allocated: returns the array (moved when it grew, *cap updated), or
 * NULL when out of memory (p is then unchanged and still owned). */
void *mem_grow(void *p, int *cap, int n, size_t elem);

#endif
