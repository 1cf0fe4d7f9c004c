/* budget.c - see budget.h. */
#include "budget.h"

#include "hugemem.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t limit = (size_t)-1;
static atomic_size_t held;

static bool take(size_t n);

/* The number in a one-line file, or 0 when absent, "max" or unreadable. */
static size_t read_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[64] = "";
    size_t v = 0;
    if (fgets(line, sizeof line, f) && strncmp(line, "max", 3)) {
        char *end;
        unsigned long long x = strtoull(line, &end, 10);
        if (end != line) v = (size_t)x;
    }
    fclose(f);
    return v;
}

size_t budget_default(size_t weights_bytes, char *why, size_t whylen) {
    size_t phys = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    size_t total = read_number("/sys/fs/cgroup/memory.max");
    const char *src = "cgroup v2 memory.max";
    if (!total) {
        total = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        src = "cgroup v1 memory.limit_in_bytes";
    }
    if (!total || total >= phys) { /* no limit (v1 says "no limit" with a huge number) */
        total = phys;
        src = "physical memory";
    }
    size_t room =
        total > weights_bytes + BUDGET_ALLOWANCE ? total - weights_bytes - BUDGET_ALLOWANCE : 0;
    size_t b = room / 4 * 3;
    if (b < ((size_t)64 << 20)) b = (size_t)64 << 20;
    snprintf(why, whylen, "%s %.1f MiB, weights %.1f MiB", src, (double)total / 1048576.0,
             (double)weights_bytes / 1048576.0);
    return b;
}

void budget_init(size_t l) {
    mem_reuse_release(); /* a spare held against the old limit */
    limit = l;
    atomic_store(&held, 0);
    /* the spare is held against the budget, but never at a request's
     * expense: its take does not free spares (it runs under their lock) */
    mem_reuse_hooks(&(mem_hold_hooks){take, budget_give});
}

size_t budget_limit(void) {
    return limit;
}

size_t budget_held(void) {
    const size_t h = atomic_load(&held), spare = mem_reuse_spare();
    return h > spare ? h - spare : 0;
}

static bool take(size_t n) {
    size_t cur = atomic_load(&held);
    do {
        if (n > limit || cur > limit - n) return false;
    } while (!atomic_compare_exchange_weak(&held, &cur, cur + n));
    return true;
}

/* A request comes before the engine's spare scratch (hugemem.h): when it
 * does not fit, the spare is freed and the request tried again. */
bool budget_take(size_t n) {
    if (take(n)) return true;
    if (mem_reuse_spare() == 0) return false;
    mem_reuse_release();
    return take(n);
}

void budget_give(size_t n) {
    atomic_fetch_sub(&held, n);
}
