/* hugemem.c - see hugemem.h. */
#include "hugemem.h"

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
static void *spare;        /* the block kept, or NULL */
static size_t spare_size;  /* its mem_alloc_size */
static double spare_since; /* when it was kept (CLOCK_MONOTONIC, s) */
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

/* Detach the spare (under the lock): its bytes are no longer held. */
static void *spare_take(size_t *size) {
    void *p = spare;
    *size = spare_size;
    if (p && hold.give) hold.give(spare_size);
    spare = NULL;
    spare_size = 0;
    return p;
}

void *mem_reuse_alloc(size_t n) {
    if (n < MEM_HUGE_MIN) return mem_alloc(n);
    const size_t want = mem_alloc_size(n);
    size_t size;
    pthread_mutex_lock(&spare_mu);
    void *p = spare_take(&size);
    pthread_mutex_unlock(&spare_mu);
    if (p && size == want) return p;
    free(p);
    return mem_alloc(n);
}

void mem_reuse_free(void *p, size_t n) {
    if (!p) return;
    const size_t size = mem_alloc_size(n);
    void *old = NULL;
    size_t old_size;
    if (n >= MEM_HUGE_MIN) {
        pthread_mutex_lock(&spare_mu);
        old = spare_take(&old_size);
        if (!hold.take || hold.take(size)) {
            spare = p;
            spare_size = size;
            spare_since = mono_s();
            p = NULL;
        }
        pthread_mutex_unlock(&spare_mu);
    }
    free(old);
    free(p);
}

void mem_reuse_release(void) {
    size_t size;
    pthread_mutex_lock(&spare_mu);
    void *p = spare_take(&size);
    pthread_mutex_unlock(&spare_mu);
    free(p);
}

void mem_reuse_expire(double seconds) {
    const double now = mono_s();
    size_t size;
    void *p = NULL;
    pthread_mutex_lock(&spare_mu);
    if (spare && now - spare_since >= seconds) p = spare_take(&size);
    pthread_mutex_unlock(&spare_mu);
    free(p);
}

size_t mem_reuse_spare(void) {
    pthread_mutex_lock(&spare_mu);
    size_t size = spare_size;
    pthread_mutex_unlock(&spare_mu);
    return size;
}
