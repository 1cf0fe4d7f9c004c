/* mem.h - allocation of request-sized buffers (megabytes: tensors, answers).
 *
 * Fresh large allocations come from mmap, and every first touch of a 4 KiB
 * page is a page fault. On the virtual machines this runs on a fault costs
 * about as much as base64-encoding the page: measured, faults were 15% of
 * the time of a base64 answer and as much as the encoder itself. mem_advise
 * asks the kernel for transparent huge pages (MADV_HUGEPAGE, where the
 * kernel allows it: /sys/kernel/mm/transparent_hugepage/enabled "madvise" or
 * "always"), so a 2 MiB region faults once instead of 512 times. Memory use
 * is unchanged: the pages are touched anyway.
 */
#ifndef ATTN_MEM_H
#define ATTN_MEM_H

#include <stddef.h>

#define MEM_HUGE_MIN ((size_t)1 << 20) /* below this, advice is not worth a syscall */

/* Give the memory that freed request buffers left in the allocator's heap
 * back to the system (malloc_trim). glibc keeps freed large buffers for
 * reuse once its mmap threshold has risen past them, which is what makes
 * back-to-back large requests fast (measured: medium requests under load
 * 540-610 req/s with reuse, 260-300 when every buffer was mmap'd and
 * unmapped, the page faults and TLB shootdowns costing half the time); the
 * HTTP watchdog calls this when no request is in flight, so an idle server's
 * RSS goes back down. */
void mem_trim(void);

/* Advise huge pages for the 2 MiB-aligned interior of [p, p+n). Harmless
 * where the kernel does not do them. */
void mem_advise(void *p, size_t n);

/* malloc that, when n >= MEM_HUGE_MIN, returns 2 MiB-aligned memory with
 * huge pages advised; free with free(). NULL when out of memory. */
void *mem_alloc(size_t n);
/* What mem_alloc(n) can come to hold once written: n, or n rounded up to
 * whole huge pages (a memory budget counts this). */
size_t mem_alloc_size(size_t n);

/* Room for one more element in the array p of n elements of elem bytes,
 * *cap allocated: returns the array (moved when it grew, *cap updated), or
 * NULL when out of memory (p is then unchanged and still owned). */
void *mem_grow(void *p, int *cap, int n, size_t elem);

#endif
