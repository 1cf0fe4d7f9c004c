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

/* Once, at start-up: allocations of MEM_HUGE_MIN or more always come from
 * mmap and go back to the system when freed (glibc otherwise raises its
 * mmap threshold after the first large free and keeps freed request
 * buffers in its heap: measured, RSS stayed at 453 MiB after a dozen
 * 45 MB answers, against 38 MiB with this). The cost is the page faults
 * of each new buffer, which huge pages keep small. */
void mem_init(void);

/* Advise huge pages for the 2 MiB-aligned interior of [p, p+n). Harmless
 * where the kernel does not do them. */
void mem_advise(void *p, size_t n);

/* malloc that, when n >= MEM_HUGE_MIN, returns 2 MiB-aligned memory with
 * huge pages advised; free with free(). NULL when out of memory. */
void *mem_alloc(size_t n);

#endif
