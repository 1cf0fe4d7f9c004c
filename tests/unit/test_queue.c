/* test_queue.c - the compute queue's batching: waiting jobs with the same
 * key are taken together within the bounds, oldest first; other keys,
 * keyless jobs and expired jobs are not; the delay gathers jobs that arrive
 * while the batch waits; a job's fn runs exactly once for the batch. And
 * the timeout: each waiting job is handed back expired at its own deadline,
 * never before it. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "queue.h"

#define NJOBS 16

typedef struct ran {
    pthread_mutex_t mu;
    char log[512]; /* one line per fn call: "name[why]:member,member" */
    atomic_int calls;
} ran;

static ran R = {.mu = PTHREAD_MUTEX_INITIALIZER};
static sem_t gate; /* the blocker job waits on it */

typedef struct tjob {
    cjob job;
    const char *name;
    double waited; /* as the queue handed it to fn */
} tjob;

static void record(cjob *j, cjob_why why, double waited) {
    ((tjob *)j->ctx)->waited = waited;
    pthread_mutex_lock(&R.mu);
    size_t l = strlen(R.log);
    l += (size_t)snprintf(R.log + l, sizeof R.log - l, "%s[%d]", ((tjob *)j->ctx)->name, (int)why);
    for (cjob *b = j->batch_next; b; b = b->batch_next)
        l += (size_t)snprintf(R.log + l, sizeof R.log - l, "+%s", ((tjob *)b->ctx)->name);
    snprintf(R.log + l, sizeof R.log - l, " ");
    pthread_mutex_unlock(&R.mu);
    atomic_fetch_add(&R.calls, 1);
}

static void blocker(cjob *j, cjob_why why, double waited) {
    sem_wait(&gate);
    record(j, why, waited);
}

static void nap_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void wait_calls(int n) {
    for (int i = 0; i < 2000 && atomic_load(&R.calls) < n; i++) nap_ms(1);
}

static void reset(void) {
    R.log[0] = '\0';
    atomic_store(&R.calls, 0);
}

static tjob mk(const char *name, const void *key, long tokens) {
    tjob t = {.job = {.fn = record, .batch_key = key, .batch_tokens = tokens}, .name = name};
    return t;
}

int main(void) {
    static const char A[] = "a", B[] = "b";
    sem_init(&gate, 0, 0);

    /* one dispatcher held by a blocker while jobs queue behind it */
    cqueue_batching bat = {.max_requests = 3, .max_tokens = 100, .delay_us = 0};
    cqueue *q = cqueue_create(1, 64, 60000, &bat);
    CHECK(q != NULL);
    tjob blk = {.job = {.fn = blocker}, .name = "blk"};
    tjob j[8] = {mk("a1", A, 10), mk("b1", B, 10), mk("a2", A, 10), mk("a3", A, 95),
                 mk("a4", A, 10), mk("n1", NULL, 10), mk("a5", A, 10), mk("a6", A, 10)};
    for (int i = 0; i < 8; i++) j[i].job.ctx = &j[i];
    blk.job.ctx = &blk;
    CHECK_INT_EQ(cqueue_push(q, &blk.job), CQ_OK);
    nap_ms(20); /* the blocker is running */
    for (int i = 0; i < 8; i++) CHECK_INT_EQ(cqueue_push(q, &j[i].job), CQ_OK);
    sem_post(&gate);
    wait_calls(6);
    /* a1 takes a2 and a4 (a3 would pass 100 tokens; three is the most);
     * b1 alone; a3 with a5 (95 + 10 > 100: no), so a3 alone; n1 has no key;
     * a5 and a6 together */
    CHECK_STR_EQ(R.log, "blk[0] a1[0]+a2+a4 b1[0] a3[0] n1[0] a5[0]+a6 ");
    CHECK_INT_EQ(atomic_load(&R.calls), 6);
    cqueue_destroy(q);

    /* the delay: a lone job waits for company that arrives in time */
    reset();
    bat = (cqueue_batching){.max_requests = 2, .max_tokens = 100, .delay_us = 300000};
    q = cqueue_create(1, 64, 60000, &bat);
    tjob d1 = mk("d1", A, 1), d2 = mk("d2", A, 1), d3 = mk("d3", A, 1);
    d1.job.ctx = &d1;
    d2.job.ctx = &d2;
    d3.job.ctx = &d3;
    CHECK_INT_EQ(cqueue_push(q, &d1.job), CQ_OK);
    nap_ms(50);
    CHECK_INT_EQ(cqueue_push(q, &d2.job), CQ_OK);
    wait_calls(1);
    CHECK_STR_EQ(R.log, "d1[0]+d2 "); /* full at two: ran before the delay ended */
    /* alone: runs when the delay ends */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_INT_EQ(cqueue_push(q, &d3.job), CQ_OK);
    wait_calls(2);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_STR_EQ(R.log, "d1[0]+d2 d3[0] ");
    CHECK_MSG(waited >= 0.25, "a lone job with a 300 ms delay ran after %.3f s", waited);
    cqueue_destroy(q);

    /* batching off: every job alone */
    reset();
    q = cqueue_create(1, 64, 60000, NULL);
    tjob o1 = mk("o1", A, 1), o2 = mk("o2", A, 1);
    o1.job.ctx = &o1;
    o2.job.ctx = &o2;
    blk.job.batch_next = NULL;
    CHECK_INT_EQ(cqueue_push(q, &blk.job), CQ_OK);
    nap_ms(20);
    CHECK_INT_EQ(cqueue_push(q, &o1.job), CQ_OK);
    CHECK_INT_EQ(cqueue_push(q, &o2.job), CQ_OK);
    sem_post(&gate);
    wait_calls(3);
    CHECK_STR_EQ(R.log, "blk[0] o1[0] o2[0] ");
    cqueue_destroy(q);

    /* expired jobs never join a batch: they are handed back expired */
    reset();
    bat = (cqueue_batching){.max_requests = 4, .max_tokens = 100, .delay_us = 0};
    q = cqueue_create(1, 64, 100, &bat);
    tjob e1 = mk("e1", A, 1), e2 = mk("e2", A, 1);
    e1.job.ctx = &e1;
    e2.job.ctx = &e2;
    CHECK_INT_EQ(cqueue_push(q, &blk.job), CQ_OK);
    nap_ms(20);
    CHECK_INT_EQ(cqueue_push(q, &e1.job), CQ_OK);
    nap_ms(300); /* past the 100 ms timeout: the reaper expires it */
    CHECK_INT_EQ(cqueue_push(q, &e2.job), CQ_OK);
    sem_post(&gate);
    wait_calls(3);
    CHECK_STR_EQ(R.log, "e1[1] blk[0] e2[0] ");
    cqueue_destroy(q);

    /* each job expires at its own deadline: five queued 10 ms apart behind
     * the blocker with a 100 ms timeout are handed back having waited at
     * least 100 ms and less than 125 (a reaper that looked every 50 ms
     * would have kept some of them up to 50 ms past it) */
    reset();
    q = cqueue_create(1, 64, 100, NULL);
    enum { NLATE = 5 };
    tjob late[NLATE];
    static const char *late_names[NLATE] = {"l0", "l1", "l2", "l3", "l4"};
    CHECK_INT_EQ(cqueue_push(q, &blk.job), CQ_OK);
    nap_ms(20);
    for (int i = 0; i < NLATE; i++) {
        late[i] = mk(late_names[i], NULL, 1);
        late[i].job.ctx = &late[i];
        CHECK_INT_EQ(cqueue_push(q, &late[i].job), CQ_OK);
        nap_ms(10);
    }
    wait_calls(NLATE);
    CHECK_STR_EQ(R.log, "l0[1] l1[1] l2[1] l3[1] l4[1] ");
    double latest = 0;
    for (int i = 0; i < NLATE; i++) {
        CHECK_MSG(late[i].waited > 0.1 && late[i].waited < 0.125,
                  "job %d handed back expired after %.1f ms (timeout 100 ms)", i, late[i].waited * 1e3);
        if (late[i].waited > latest) latest = late[i].waited;
    }
    printf("timeout 100 ms: %d jobs handed back expired after at most %.2f ms\n", NLATE, latest * 1e3);
    sem_post(&gate);
    wait_calls(NLATE + 1);
    cqueue_destroy(q);
    sem_destroy(&gate);
    return check_exit();
}
