/* test_budget.c - the memory budget's accounting: a reservation never
 * passes the limit, and whatever threads take and give back, the bytes
 * held return to exactly zero. And a request's own large blocks (a body's
 * buffer, an output array an answer sends) become spares held against it
 * when let go, for the next request's. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "answer.h"
#include "budget.h"
#include "buf.h"
#include "hugemem.h"
#include "check.h"

#define THREADS 4
#define ROUNDS 200000

static void *worker(void *arg) {
    uintptr_t seed = (uintptr_t)arg, taken = 0;
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t n = (size_t)(seed >> 40) % 5000 + 1;
        if (budget_take(n)) {
            if (budget_held() > budget_limit()) return (void *)1; /* never over */
            budget_give(n);
            taken++;
        }
    }
    return (void *)(uintptr_t)(taken > 0 ? 0 : 2);
}

int main(void) {
    budget_init(10000);
    CHECK(budget_take(0));
    CHECK(budget_take(10000));
    CHECK(!budget_take(1));
    CHECK_INT_EQ(budget_held(), 10000);
    budget_give(10000);
    CHECK(!budget_take(10001));
    CHECK(!budget_take((size_t)-1));
    CHECK_INT_EQ(budget_held(), 0);

    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < THREADS; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        CHECK_MSG(rc == NULL, "thread %d: %s", i,
                  rc == (void *)1 ? "held passed the limit" : "took nothing");
    }
    CHECK_INT_EQ(budget_held(), 0);

    /* the engine's spare scratch is held against the budget, and a request
     * that does not fit frees it rather than being refused */
    const size_t mib = (size_t)1 << 20;
    budget_init(10 * mib);
    void *spare = mem_reuse_alloc(4 * mib);
    mem_reuse_free(spare, 4 * mib);
    CHECK_INT_EQ(mem_reuse_spare(), 4 * mib);
    CHECK_INT_EQ(budget_held(), 0); /* requests' bytes: the spare apart */
    CHECK(budget_take(6 * mib));    /* fits beside it */
    CHECK_INT_EQ(budget_held(), 6 * mib);
    budget_give(6 * mib);
    CHECK(budget_take(5 * mib));
    CHECK_INT_EQ(mem_reuse_spare(), 4 * mib);
    CHECK(budget_take(5 * mib)); /* does not: the spare goes */
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    CHECK_INT_EQ(budget_held(), 10 * mib);
    spare = mem_reuse_alloc(4 * mib);
    mem_reuse_free(spare, 4 * mib); /* no room to keep it */
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    CHECK_INT_EQ(budget_held(), 10 * mib);
    budget_give(10 * mib);
    CHECK(!budget_take(11 * mib)); /* past the limit, spare or not */
    CHECK_INT_EQ(budget_held(), 0);

    /* a buffer's first large reservation is a spare when freed, and the
     * next buffer of that size takes it; grown past it, it is not */
    budget_init(64 * mib);
    buf body;
    buf_init(&body, 8 * mib);
    char *p = buf_reserve(&body, (size_t)1536 << 10); /* a 1.5 MB body: 2 MiB */
    CHECK(p != NULL && body.reuse);
    buf_free(&body);
    CHECK_INT_EQ(mem_reuse_spare(), 2 * mib);
    CHECK_INT_EQ(budget_held(), 0);
    buf_init(&body, 8 * mib);
    CHECK(buf_reserve(&body, (size_t)1500 << 10) == p);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    CHECK(buf_reserve(&body, 3 * mib) != NULL && !body.reuse); /* grown: realloc's */
    buf_free(&body);
    CHECK_INT_EQ(mem_reuse_spare(), 0);
    /* an output array an answer sends goes back when the answer is freed */
    float *out = mem_reuse_alloc(3 * mib);
    answer a;
    answer_init(&a);
    buf_puts(&a.text, "{}");
    answer_push_reused(&a, out, 3 * mib / 2, out, 3 * mib); /* packed to half in place */
    answer_free(&a);
    CHECK_INT_EQ(mem_reuse_spare(), mem_alloc_size(3 * mib));
    CHECK(mem_reuse_alloc(3 * mib) == out);
    free(out);
    mem_reuse_release();
    CHECK_INT_EQ(budget_held(), 0);

    char why[160];
    size_t b = budget_default((size_t)1 << 30, why, sizeof why);
    CHECK_MSG(b >= ((size_t)64 << 20), "default budget %zu below 64 MiB", b);
    CHECK_MSG(why[0] != '\0', "no source named for the default");
    printf("default budget here: %.1f MiB (%s)\n", (double)b / 1048576.0, why);
    return check_exit();
}
