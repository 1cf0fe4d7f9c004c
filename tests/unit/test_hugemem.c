/* test_hugemem.c - the spare request-sized buffers (hugemem.h): a block of
 * the same size comes back (the newest of that size), other sizes get fresh
 * ones and leave the spares be, at most MEM_SPARES are kept (the oldest
 * makes room), small blocks are never kept, expiry and release free them,
 * and the hold hooks see every byte taken given back. */
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

    /* another size: a fresh block comes, and the spare stays for its size */
    char *c = mem_reuse_alloc(9 * MIB);
    CHECK(c != NULL && c != a);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(3 * MIB));
    memset(c, 1, 9 * MIB); /* all of it is there (ASan checks the bounds) */
    mem_reuse_free(c, 9 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(3 * MIB) + mem_alloc_size(9 * MIB));
    CHECK(mem_reuse_alloc(9 * MIB) == c && mem_reuse_alloc(3 * MIB) == a);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    mem_reuse_free(a, 3 * MIB);
    mem_reuse_free(c, 9 * MIB);

    /* small blocks are freed, and leave the spares as they were */
    const size_t both = mem_alloc_size(3 * MIB) + mem_alloc_size(9 * MIB);
    char *s = mem_reuse_alloc(4096);
    CHECK(s != NULL);
    mem_reuse_free(s, 4096);
    CHECK_INT_EQ(mem_reuse_spare(), both);
    mem_reuse_free(NULL, 9 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), both);

    /* they expire only once they have been kept that long */
    mem_reuse_expire(60.0);
    CHECK_INT_EQ(mem_reuse_spare(), both);
    mem_reuse_expire(0.0);
    CHECK_INT_EQ(mem_reuse_spare(), 0);

    /* of two blocks of one size, the newest comes back first */
    char *p1 = mem_reuse_alloc(3 * MIB), *p2 = mem_reuse_alloc(3 * MIB);
    CHECK(p1 != p2);
    mem_reuse_free(p1, 3 * MIB);
    mem_reuse_free(p2, 3 * MIB);
    CHECK(mem_reuse_alloc(3 * MIB) == p2);
    mem_reuse_free(p2, 3 * MIB);

    /* at most MEM_SPARES: a newer block takes the oldest one's place */
    char *blk[MEM_SPARES + 1];
    for (int i = 0; i <= MEM_SPARES; i++) blk[i] = mem_alloc((size_t)(5 + 2 * i) * MIB);
    mem_reuse_release();
    for (int i = 0; i <= MEM_SPARES; i++) mem_reuse_free(blk[i], (size_t)(5 + 2 * i) * MIB);
    size_t kept = 0;
    for (int i = 1; i <= MEM_SPARES; i++) kept += mem_alloc_size((size_t)(5 + 2 * i) * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), kept); /* blk[0], the oldest, was freed */
    CHECK(mem_reuse_alloc(7 * MIB) == blk[1]);
    mem_reuse_free(blk[1], 7 * MIB);
    mem_reuse_release();
    CHECK_INT_EQ(mem_reuse_spare(), 0);

    /* with hooks: a spare's bytes are held while it is kept, given back
     * when it is reused, replaced or released */
    mem_reuse_hooks(&(mem_hold_hooks){hold_take, hold_give});
    char *e = mem_reuse_alloc(3 * MIB);
    mem_reuse_free(e, 3 * MIB);
    CHECK_INT_EQ(hooked, mem_alloc_size(3 * MIB));
    char *f = mem_reuse_alloc(3 * MIB);
    CHECK(f == e);
    CHECK_INT_EQ(hooked, 0);
    mem_reuse_free(f, 3 * MIB);
    char *g = mem_reuse_alloc(7 * MIB); /* a miss: the other spare stays held */
    CHECK_INT_EQ(hooked, mem_alloc_size(3 * MIB));
    mem_reuse_free(g, 7 * MIB);
    CHECK_INT_EQ(hooked, mem_alloc_size(3 * MIB) + mem_alloc_size(7 * MIB));
    refuse = 1; /* no room: the block is freed, the others stay */
    char *h = mem_alloc(5 * MIB);
    mem_reuse_free(h, 5 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(3 * MIB) + mem_alloc_size(7 * MIB));
    CHECK_INT_EQ(hooked, mem_reuse_spare());
    /* full, and no room for the newest: the oldest (e's) goes all the same */
    refuse = 0;
    for (int i = 0; i < MEM_SPARES - 2; i++)
        mem_reuse_free(mem_alloc((size_t)(11 + 2 * i) * MIB), (size_t)(11 + 2 * i) * MIB);
    const size_t full = mem_reuse_spare();
    refuse = 1;
    mem_reuse_free(mem_alloc(2 * MIB), 2 * MIB);
    CHECK_INT_EQ(mem_reuse_spare(), full - mem_alloc_size(3 * MIB));
    CHECK_INT_EQ(hooked, mem_reuse_spare());
    refuse = 0;
    mem_reuse_release();
    CHECK_INT_EQ(hooked, 0);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    char *i = mem_reuse_alloc(2 * MIB);
    mem_reuse_free(i, 2 * MIB);
    mem_reuse_release();
    CHECK_INT_EQ(hooked, 0);
    CHECK_INT_EQ(takes, gives);
    mem_reuse_hooks(NULL);
    return check_exit();
}
