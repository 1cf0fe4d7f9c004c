/* hugemem.h - allocation of request-sized buffers (megabytes: tensors,
 * answers, the engine's scratch), for the engine and the server alike.
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
#ifndef ATTN_HUGEMEM_H
#define ATTN_HUGEMEM_H

#include <stddef.h>

#define MEM_HUGE_MIN ((size_t)1 << 20) /* below this, advice is not worth a syscall */

/* Advise huge pages for the 2 MiB-aligned interior of [p, p+n). Harmless
 * where the kernel does not do them. */
void mem_advise(void *p, size_t n);

/* malloc that, when n >= MEM_HUGE_MIN, returns 2 MiB-aligned memory with
 * huge pages advised; free with free(). NULL when out of memory. */
void *mem_alloc(size_t n);
/* What mem_alloc(n) can come to hold once written: n, or n rounded up to
 * whole huge pages (a memory budget counts this). */
size_t mem_alloc_size(size_t n);

#endif
