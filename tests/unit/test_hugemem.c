/* test_hugemem.c - the spare request-sized buffer (hugemem.h): a block of
 * the same size comes back, any other size gets a fresh one, small blocks
 * are never kept, and the hold hooks see every byte taken given back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hugemem.h"

#define MIB ((size_t)1 << 20)

static size_t hooked;       /* bytes the hooks hold now */
static int refuse;          /* the take hook says no */
static int takes, gives;

static bool hold_take(size_t n) {
    if (refuse) return false;
    hooked += n;
    takes++;
    return true;
}
static void hold_give(size_t n) {
    hooked -= n;
    gives++;
}

int main(void) {
    /* without hooks: the same size comes back, written as it was left */
    char *a = mem_reuse_alloc(3 * MIB);
    CHECK(a != NULL && (uintptr_t)a % (2 * MIB) == 0);
    memset(a, 0x5a, 3 * MIB);
    mem_reuse_free(a, 3 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(3 * MIB));
    char *b = mem_reuse_alloc(3 * MIB + 1000); /* the same 2 MiB-rounded size */
    CHECK(b == a);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    CHECK(b[0] == 0x5a && b[3 * MIB - 1] == 0x5a);
    mem_reuse_free(b, 3 * MIB);

    /* another size: the spare is freed and a fresh block comes */
    char *c = mem_reuse_alloc(9 * MIB);
    CHECK(c != NULL);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    memset(c, 1, 9 * MIB); /* all of it is there (ASan checks the bounds) */
    mem_reuse_free(c, 9 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(9 * MIB));

    /* small blocks are freed, and leave the spare as it was */
    char *s = mem_reuse_alloc(4096);
    CHECK(s != NULL);
    mem_reuse_free(s, 4096);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(9 * MIB));
    mem_reuse_free(NULL, 9 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(9 * MIB));

    /* it expires only once it has been kept that long */
    mem_reuse_expire(60.0);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(9 * MIB));
    mem_reuse_expire(0.0);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    c = mem_reuse_alloc(9 * MIB);
    mem_reuse_free(c, 9 * MIB);

    /* a newer block replaces the spare */
    char *d = mem_alloc(5 * MIB);
    mem_reuse_free(d, 5 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(5 * MIB));
    mem_reuse_release();
    CHECK_INT_EQ(mem_reuse_spare(), 0);

    /* with hooks: the spare's bytes are held while it is kept, given back
     * when it is reused, replaced or released */
    mem_reuse_hooks(&(mem_hold_hooks){hold_take, hold_give});
    char *e = mem_reuse_alloc(3 * MIB);
    mem_reuse_free(e, 3 * MIB);
    CHECK_INT_EQ(hooked, mem_alloc_size(3 * MIB));
    char *f = mem_reuse_alloc(3 * MIB);
    CHECK(f == e);
    CHECK_INT_EQ(hooked, 0);
    mem_reuse_free(f, 3 * MIB);
    char *g = mem_reuse_alloc(7 * MIB); /* a miss gives the spare back */
    CHECK_INT_EQ(hooked, 0);
    mem_reuse_free(g, 7 * MIB);
    CHECK_INT_EQ(hooked, mem_alloc_size(7 * MIB));
    refuse = 1; /* no room: the block is freed, the old spare too */
    char *h = mem_alloc(3 * MIB);
    mem_reuse_free(h, 3 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    CHECK_INT_EQ(hooked, 0);
    refuse = 0;
    char *i = mem_reuse_alloc(2 * MIB);
    mem_reuse_free(i, 2 * MIB);
    mem_reuse_release();
    CHECK_INT_EQ(hooked, 0);
    CHECK_INT_EQ(takes, gives);
    mem_reuse_hooks(NULL);
    return check_exit();
}
