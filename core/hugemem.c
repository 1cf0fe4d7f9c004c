/* hugemem.c - see hugemem.h. */
#include "hugemem.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

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

static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spare {
    void *p;      /* the block kept, or NULL */
    size_t size;  /* its mem_alloc_size */
    double since; /* when it was kept (CLOCK_MONOTONIC, s) */
    uint64_t seq; /* the order spares were kept in: newest highest */
} spares[MEM_SPARES];
static uint64_t spare_seq;
static mem_hold_hooks hold;

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mem_reuse_hooks(const mem_hold_hooks *hooks) {
    pthread_mutex_lock(&spare_mu);
    hold = hooks ? *hooks : (mem_hold_hooks){0};
    pthread_mutex_unlock(&spare_mu);
}

/* Detach spare i (under the lock): its bytes are no longer held. */
static void *spare_take(int i) {
    void *p = spares[i].p;
    if (p && hold.give) hold.give(spares[i].size);
    spares[i] = (struct spare){0};
    return p;
}

void *mem_reuse_alloc(size_t n) {
    if (n < MEM_HUGE_MIN) return mem_alloc(n);
    const size_t want = mem_alloc_size(n);
    void *p = NULL;
    pthread_mutex_lock(&spare_mu);
    int best = -1; /* the newest of that size */
    for (int i = 0; i < MEM_SPARES; i++)
        if (spares[i].p && spares[i].size == want && (best < 0 || spares[i].seq > spares[best].seq))
            best = i;
    if (best >= 0) p = spare_take(best);
    pthread_mutex_unlock(&spare_mu);
    return p ? p : mem_alloc(n);
}

void mem_reuse_free(void *p, size_t n) {
    if (!p) return;
    const size_t size = mem_alloc_size(n);
    void *old = NULL;
    if (n >= MEM_HUGE_MIN) {
        pthread_mutex_lock(&spare_mu);
        /* an empty slot, else the oldest spare makes room */
        int slot = 0;
        for (int i = 0; i < MEM_SPARES; i++) {
            if (!spares[i].p) {
                slot = i;
                break;
            }
            if (spares[i].seq < spares[slot].seq) slot = i;
        }
        old = spare_take(slot);
        if (!hold.take || hold.take(size)) {
            spares[slot] = (struct spare){p, size, mono_s(), ++spare_seq};
            p = NULL;
        }
        pthread_mutex_unlock(&spare_mu);
    }
    free(old);
    free(p);
}

/* Free the spares kept at or before time `before` (all: INFINITY). */
static void spares_free(double before) {
    void *p[MEM_SPARES];
    int k = 0;
    pthread_mutex_lock(&spare_mu);
    for (int i = 0; i < MEM_SPARES; i++)
        if (spares[i].p && spares[i].since <= before) p[k++] = spare_take(i);
    pthread_mutex_unlock(&spare_mu);
    for (int i = 0; i < k; i++) free(p[i]);
}

void mem_reuse_release(void) {
    spares_free(INFINITY);
}

void mem_reuse_expire(double seconds) {
    spares_free(mono_s() - seconds);
}

size_t mem_reuse_spare(void) {
    size_t size = 0;
    pthread_mutex_lock(&spare_mu);
    for (int i = 0; i < MEM_SPARES; i++) size += spares[i].size;
    pthread_mutex_unlock(&spare_mu);
    return size;
}
