/* test_pool.c - the compute pool: every index of every run runs exactly once,
 * with many concurrent callers, on pools of several sizes; the phases of a
 * multi-phase run never overlap; an idle pool uses no CPU. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

/* One run's bookkeeping: how many times each index ran, which workers. */
typedef struct {
    atomic_int *hits;   /* [count] */
    size_t count;
    int nworkers;
    atomic_int bad_worker; /* a task saw a worker index out of range */
} run_ctx;

static void count_task(void *vctx, size_t i, int worker) {
    run_ctx *c = vctx;
    if (worker < 0 || worker >= c->nworkers) atomic_store(&c->bad_worker, 1);
    if (i < c->count) atomic_fetch_add(&c->hits[i], 1);
}

typedef struct {
    attn_pool *pool;
    unsigned seed;
    int runs;
    int failures;  /* runs with an index not run exactly once */
    int bad_worker;
} caller_arg;

static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

static void *caller_main(void *varg) {
    caller_arg *a = varg;
    atomic_int *hits = malloc(600 * sizeof *hits);
    if (!hits) {
        a->failures = a->runs;
        return NULL;
    }
    for (int r = 0; r < a->runs; r++) {
        size_t count = next_rand(&a->seed) % 600; /* 0 included */
        for (size_t i = 0; i < count; i++) atomic_init(&hits[i], 0);
        run_ctx c = {.hits = hits, .count = count, .nworkers = attn_pool_size(a->pool)};
        atomic_init(&c.bad_worker, 0);
        attn_pool_run(a->pool, count, count_task, &c);
        int ok = 1;
        for (size_t i = 0; i < count; i++)
            if (atomic_load(&hits[i]) != 1) ok = 0;
        if (!ok) a->failures++;
        if (atomic_load(&c.bad_worker)) a->bad_worker++;
    }
    free(hits);
    return NULL;
}

/* 8 callers x 200 runs of random sizes on one pool. */
static void test_stress(int nthreads) {
    char err[ATTN_ERRLEN] = "";
    attn_pool *p = NULL;
    CHECK_INT_EQ(attn_pool_create(nthreads, &p, err, sizeof err), ATTN_OK);
    if (!p) return;
    CHECK_INT_EQ(attn_pool_size(p), nthreads);
    enum { NCALLERS = 8 };
    pthread_t th[NCALLERS];
    caller_arg args[NCALLERS];
    for (int k = 0; k < NCALLERS; k++) {
        args[k] = (caller_arg){.pool = p, .seed = 1234u + 77u * (unsigned)k, .runs = 200};
        CHECK_INT_EQ(pthread_create(&th[k], NULL, caller_main, &args[k]), 0);
    }
    for (int k = 0; k < NCALLERS; k++) {
        pthread_join(th[k], NULL);
        CHECK_MSG(args[k].failures == 0, "pool of %d, caller %d: %d runs had an index not run once",
                  nthreads, k, args[k].failures);
        CHECK_MSG(args[k].bad_worker == 0, "pool of %d, caller %d: worker index out of range",
                  nthreads, k);
    }
    attn_pool_destroy(p);
}

/* Every worker index shows up when tasks block until all workers hold one. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, n;
    int seen[8];
    char names[8][16]; /* each worker's thread name */
} barrier_ctx;

static void barrier_task(void *vctx, size_t i, int worker) {
    (void)i;
    barrier_ctx *c = vctx;
    pthread_mutex_lock(&c->mu);
    c->seen[worker]++;
#ifdef __linux__
    pthread_getname_np(pthread_self(), c->names[worker], sizeof c->names[worker]);
#endif
    if (++c->arrived == c->n) pthread_cond_broadcast(&c->cv);
    while (c->arrived < c->n) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void test_all_workers_used(void) {
    char err[ATTN_ERRLEN] = "";
    attn_pool *p = NULL;
    CHECK_INT_EQ(attn_pool_create(3, &p, err, sizeof err), ATTN_OK);
    if (!p) return;
    barrier_ctx c = {.n = 3};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    attn_pool_run(p, 3, barrier_task, &c); /* would hang if tasks did not run concurrently */
    for (int t = 0; t < 3; t++) CHECK_INT_EQ(c.seen[t], 1);
#ifdef __linux__
    /* named for top -H and make bench-http's CPU split */
    for (int t = 0; t < 3; t++) CHECK_STR_EQ(c.names[t], "attn-pool");
#endif
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
    attn_pool_destroy(p);
}

static void test_create_errors(void) {
    char err[ATTN_ERRLEN] = "";
    attn_pool *p = (attn_pool *)1;
    CHECK_INT_EQ(attn_pool_create(0, &p, err, sizeof err), ATTN_ERR_INVALID);
    CHECK(p == NULL);
    CHECK_STR_CONTAINS(err, "0 threads");
    CHECK_INT_EQ(attn_pool_create(1025, &p, err, sizeof err), ATTN_ERR_INVALID);
    CHECK_INT_EQ(attn_pool_create(2, NULL, err, sizeof err), ATTN_ERR_INVALID);
    attn_pool_destroy(NULL);
    CHECK_INT_EQ(attn_pool_size(NULL), 0);
}

/* A NULL pool runs the tasks on the calling thread as worker 0. */
static void test_null_pool(void) {
    atomic_int hits[5];
    for (int i = 0; i < 5; i++) atomic_init(&hits[i], 0);
    run_ctx c = {.hits = hits, .count = 5, .nworkers = 1};
    atomic_init(&c.bad_worker, 0);
    attn_pool_run(NULL, 5, count_task, &c);
    for (int i = 0; i < 5; i++) CHECK_INT_EQ(atomic_load(&hits[i]), 1);
    CHECK_INT_EQ(atomic_load(&c.bad_worker), 0);
}

/* Multi-phase runs: a task of phase k sees every task of phase k-1 finished
 * and none of phase k+1 started. */
enum { NPH = 5 };
typedef struct {
    size_t count[NPH];
    atomic_size_t ran[NPH];
    atomic_int overlap; /* a task saw a phase boundary crossed */
} phase_ctx;

static void phase_check(phase_ctx *c, int k) {
    if (k > 0 && atomic_load(&c->ran[k - 1]) != c->count[k - 1]) atomic_store(&c->overlap, 1);
    if (k + 1 < NPH && atomic_load(&c->ran[k + 1]) != 0) atomic_store(&c->overlap, 1);
    atomic_fetch_add(&c->ran[k], 1);
}
static void phase0(void *c, size_t i, int w) { (void)i, (void)w, phase_check(c, 0); }
static void phase1(void *c, size_t i, int w) { (void)i, (void)w, phase_check(c, 1); }
static void phase2(void *c, size_t i, int w) { (void)i, (void)w, phase_check(c, 2); }
static void phase3(void *c, size_t i, int w) { (void)i, (void)w, phase_check(c, 3); }
static void phase4(void *c, size_t i, int w) { (void)i, (void)w, phase_check(c, 4); }

typedef struct {
    attn_pool *pool;
    unsigned seed;
    int runs, failures;
} phase_caller;

static void *phase_caller_main(void *varg) {
    phase_caller *a = varg;
    const attn_task_fn fns[NPH] = {phase0, phase1, phase2, phase3, phase4};
    for (int r = 0; r < a->runs; r++) {
        phase_ctx c;
        attn_phase ph[NPH];
        atomic_init(&c.overlap, 0);
        for (int k = 0; k < NPH; k++) {
            /* a third of the phases are empty, which the pool must skip */
            unsigned v = next_rand(&a->seed);
            c.count[k] = v % 3 == 0 ? 0 : v % 40;
            atomic_init(&c.ran[k], 0);
            ph[k] = (attn_phase){c.count[k], fns[k], NULL};
        }
        attn_pool_run_phases(a->pool, ph, NPH, &c);
        int ok = !atomic_load(&c.overlap);
        for (int k = 0; k < NPH; k++)
            if (atomic_load(&c.ran[k]) != c.count[k]) ok = 0;
        if (!ok) a->failures++;
    }
    return NULL;
}

static void test_phases(int nthreads) {
    char err[ATTN_ERRLEN] = "";
    attn_pool *p = NULL;
    CHECK_INT_EQ(attn_pool_create(nthreads, &p, err, sizeof err), ATTN_OK);
    if (!p) return;
    enum { NCALLERS = 4 };
    pthread_t th[NCALLERS];
    phase_caller args[NCALLERS];
    for (int k = 0; k < NCALLERS; k++) {
        args[k] = (phase_caller){.pool = p, .seed = 99u + 13u * (unsigned)k, .runs = 300};
        CHECK_INT_EQ(pthread_create(&th[k], NULL, phase_caller_main, &args[k]), 0);
    }
    for (int k = 0; k < NCALLERS; k++) {
        pthread_join(th[k], NULL);
        CHECK_MSG(args[k].failures == 0,
                  "pool of %d, caller %d: %d multi-phase runs overlapped phases or missed tasks",
                  nthreads, k, args[k].failures);
    }
    /* the calling thread alone (no pool), in order */
    phase_caller solo = {.pool = NULL, .seed = 7u, .runs = 50};
    phase_caller_main(&solo);
    CHECK_INT_EQ(solo.failures, 0);
    attn_pool_destroy(p);
}

static void test_destroy_idle(void) {
    char err[ATTN_ERRLEN] = "";
    for (int n = 1; n <= 4; n++) {
        attn_pool *p = NULL;
        CHECK_INT_EQ(attn_pool_create(n, &p, err, sizeof err), ATTN_OK);
        attn_pool_run(p, 0, count_task, NULL); /* count 0: returns at once */
        attn_pool_destroy(p);                  /* never ran anything */
    }
}

static void add_task(void *vctx, size_t i, int worker) {
    (void)worker;
    atomic_fetch_add((atomic_long *)vctx, (long)i);
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* After runs, workers poll for a bounded time (pool.c's SPIN_US and
 * LINGER_US, each under a millisecond) and then sleep: over 200 ms of
 * idleness the process uses almost no CPU. Workers that kept polling would
 * use about 200 ms each. */
static void test_idle_sleeps(void) {
    char err[ATTN_ERRLEN] = "";
    attn_pool *p = NULL;
    CHECK_INT_EQ(attn_pool_create(2, &p, err, sizeof err), ATTN_OK);
    if (!p) return;
    atomic_long sum;
    atomic_init(&sum, 0);
    const attn_phase phases[2] = {{4, add_task, NULL}, {4, add_task, NULL}};
    for (int k = 0; k < 200; k++) attn_pool_run_phases(p, phases, 2, &sum);
    CHECK_INT_EQ((int)atomic_load(&sum), 200 * 2 * 6);
    struct timespec settle = {0, 20 * 1000 * 1000}, idle = {0, 200 * 1000 * 1000};
    nanosleep(&settle, NULL);
    const double c0 = cpu_seconds();
    nanosleep(&idle, NULL);
    const double used = cpu_seconds() - c0;
    if (used >= 0.02)
        fprintf(stderr, "  idle pool used %.1f ms of CPU in 200 ms\n", used * 1e3);
    CHECK(used < 0.02);
    attn_pool_destroy(p);
}

/* attn_pool_try_run: runs the tasks when the pool is idle, refuses at once
 * (running nothing) while another run is in progress. */
static atomic_int try_count;
static void try_task(void *ctx, size_t i, int worker) {
    (void)ctx, (void)i, (void)worker;
    atomic_fetch_add(&try_count, 1);
}
static void slow_task(void *ctx, size_t i, int worker) {
    (void)i, (void)worker;
    atomic_store((atomic_int *)ctx, 1);
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
}
typedef struct slow_arg {
    attn_pool *p;
    atomic_int started;
} slow_arg;
static void *slow_run(void *arg) {
    slow_arg *a = arg;
    attn_pool_run(a->p, 1, slow_task, &a->started);
    return NULL;
}
static void test_try_run(void) {
    char err[256];
    attn_pool *p;
    CHECK_INT_EQ(attn_pool_create(2, &p, err, sizeof err), ATTN_OK);
    atomic_store(&try_count, 0);
    CHECK_INT_EQ(attn_pool_try_run(p, 5, try_task, NULL), 1);
    CHECK_INT_EQ(atomic_load(&try_count), 5);
    slow_arg a = {.p = p};
    pthread_t th;
    pthread_create(&th, NULL, slow_run, &a);
    while (!atomic_load(&a.started)) {
        struct timespec t = {0, 1000 * 1000};
        nanosleep(&t, NULL);
    }
    atomic_store(&try_count, 0);
    CHECK_INT_EQ(attn_pool_try_run(p, 5, try_task, NULL), 0); /* busy: refused */
    CHECK_INT_EQ(atomic_load(&try_count), 0);
    pthread_join(th, NULL);
    CHECK_INT_EQ(attn_pool_try_run(p, 3, try_task, NULL), 1);
    CHECK_INT_EQ(atomic_load(&try_count), 3);
    CHECK_INT_EQ(attn_pool_try_run(NULL, 3, try_task, NULL), 0);
    attn_pool_destroy(p);
}

int main(void) {
    test_try_run();
    test_create_errors();
    test_destroy_idle();
    test_null_pool();
    test_all_workers_used();
    test_stress(1);
    test_stress(2);
    test_stress(3);
    test_phases(1);
    test_phases(2);
    test_phases(3);
    test_idle_sleeps();
    return check_exit();
}
