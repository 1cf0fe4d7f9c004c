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

#include <stdbool.h>
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

/* A few spare request-sized buffers, kept between requests so that the
 * next buffer of the same size reuses their pages instead of faulting fresh
 * ones in. A pass's scratch, a request's body and its output arrays are
 * allocated again for every request; sizes past glibc's mmap threshold (32
 * MiB at most, and 2 MiB-aligned ones often below it) come from mmap each
 * time, so every huge page of them is faulted and cleared again, and each
 * free is a munmap. Measured in-process, 2 threads, medians: n = 512, E =
 * 768 without weights 15.0 -> 12.8 ms (10 huge-page faults a pass before,
 * clear_page 5% of its time); n = 2048, E = 1024 157-162 -> 127-130 ms.
 * Over HTTP, the body's and the output's blocks of the same request
 * (n = 512, E = 768, one at a time on a kept-alive connection) cost 0.11 ms
 * to allocate, 0.13 ms to fault in and 0.11 ms to unmap on the way to the
 * answer (docs/PERFORMANCE.md).
 *
 * mem_reuse_alloc(n) is mem_alloc(n), or the newest spare that has exactly
 * mem_alloc_size(n) bytes (so whatever counted n counts the block); smaller
 * sizes never touch the spares. mem_reuse_free(p, n) keeps p (from either,
 * of size n, and from nothing else) as a spare when n >= MEM_HUGE_MIN and
 * the take hook agrees, in place of the oldest when MEM_SPARES are kept;
 * else it frees p. The hooks hold the spares' bytes against a budget
 * (take: true when they fit, then held; give: they are no longer held,
 * when a spare is reused, replaced or released); without hooks a spare is
 * always kept. mem_reuse_release() frees every spare; mem_reuse_expire(s)
 * frees those kept s seconds ago or more, that is, not reused since (a
 * server calls this often, so its memory goes back to the system soon after
 * the large requests stop). Thread-safe; the hooks run under the spares'
 * lock and must not call back in. */
#define MEM_SPARES 4
typedef struct {
    bool (*take)(size_t bytes); /* true: the spare may be held */
    void (*give)(size_t bytes);
} mem_hold_hooks;
void mem_reuse_hooks(const mem_hold_hooks *hooks);
void *mem_reuse_alloc(size_t n);
void mem_reuse_free(void *p, size_t n);
void mem_reuse_release(void);
void mem_reuse_expire(double seconds);
/* The spares' bytes now (0: none), for tests and metrics. */
size_t mem_reuse_spare(void);

#endif
