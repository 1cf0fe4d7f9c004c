/* pool.c - a fixed-size pool of compute threads running batches of tasks.
 *
 * A caller describes its batch as one "run" that lives on its own stack:
 * {phases, ctx, current phase, next index to hand out, number finished};
 * its current phase reaching nphases marks it finished.
 * Runs with indices left to hand out wait in one queue. A worker takes the
 * next index of the run at the head (dequeuing the run once the last index
 * of its current phase is handed out), runs the task with the lock released,
 * then counts it finished. The worker that finishes a phase's last task
 * moves the run to its next phase and puts it back at the head of the queue
 * (a run in progress goes before runs not started, so the oldest request
 * finishes first), or, after the last phase, marks the run finished and
 * wakes the callers. Nothing is allocated per run or per task.
 *
 * While some run is in progress, or for LINGER_US after the last one
 * finished, an idle worker first polls `gen` (bumped whenever work is
 * queued) for up to SPIN_US, yielding the core to any other runnable thread
 * between looks, then sleeps on `work`. Waking a sleeping thread costs tens
 * of microseconds on a virtual machine (measured here: the two workers of a
 * (128, 256, 8) forward started 4-27 and 16-46 us after the call), as much
 * as a whole task of a small forward pass, and a forward pass has a phase
 * hand-over after every phase; polling makes them cost next to nothing, and
 * the short linger does the same for a forward that follows another at
 * once. Otherwise idle workers sleep: an idle pool uses no CPU.
 *
 * Locking rule: one mutex (mu) guards every field of the pool except gen,
 * and every field of every queued or unfinished run. gen is atomic, written
 * only with mu held, read without it as a hint (a poller that sees it move
 * takes mu and looks at the queue itself). Workers sleep on `work`
 * (signalled, under mu, for as many sleepers as there are new tasks, or
 * broadcast on shutdown) after counting themselves in `sleeping`; callers
 * sleep on `done` (broadcast when any run finishes; each caller rechecks its
 * own). A task function is always called with mu released. After a run is
 * marked finished no worker touches it again, so the caller may return (and
 * its stack frame disappear) as soon as it sees the mark under mu.
 */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef SPIN_US
#define SPIN_US 100 /* how long an idle worker polls before it sleeps; 0: never */
#endif
#ifndef LINGER_US
#define LINGER_US 50 /* after the last run finished, workers still poll this long */
#endif

typedef struct pool_run {
    const attn_phase *phases; /* [nphases], the caller's */
    int nphases;
    void *ctx;             /* the task functions' context */
    int phase;             /* current phase (guarded by mu) */
    size_t next;           /* next index of the phase to hand out (guarded by mu) */
    size_t done;           /* tasks of the phase finished (guarded by mu) */
    struct pool_run *link; /* next run in the queue */
} pool_run;

typedef struct pool_worker {
    struct attn_pool *pool; /* back pointer */
    int index;              /* worker index passed to tasks */
} pool_worker;

struct attn_pool {
    pthread_mutex_t mu;    /* guards everything below but gen, and queued runs */
    pthread_cond_t work;   /* a run was queued, or stop was set */
    pthread_cond_t done;   /* some run finished */
    pool_run *head, *tail; /* runs with indices left to hand out */
    int stop;              /* set by destroy: exit once the queue is empty */
    int sleeping;          /* workers waiting on `work` */
    int active;            /* runs submitted and not finished */
    double idle_since;     /* mono_us() when active last dropped to 0 */
    atomic_ulong gen;      /* bumped (under mu) whenever work is queued or stop set */
    int nthreads;          /* number of workers started */
    pthread_t *threads;    /* [nthreads] */
    pool_worker *workers;  /* [nthreads] */
};

static double mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

double attn_pool_now(void) {
    return mono_us() * 1e-6;
}

/* Poll gen until it differs from seen or the clock reaches until. Called
 * without mu. */
static void spin_wait(attn_pool *p, unsigned long seen, double until) {
    for (;;) {
        if (atomic_load_explicit(&p->gen, memory_order_relaxed) != seen) return;
        sched_yield(); /* any other runnable thread goes first */
        if (mono_us() >= until) return;
    }
}

/* With mu held: tasks were queued; wake sleepers for them. */
static void wake_for(attn_pool *p, size_t tasks) {
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_relaxed);
    if (p->sleeping == 0) return;
    if (tasks >= (size_t)p->sleeping)
        pthread_cond_broadcast(&p->work);
    else
        for (size_t k = 0; k < tasks; k++) pthread_cond_signal(&p->work);
}

/* With mu held: skip r's empty phases from r->phase on; 0 when none is left. */
static int settle_phase(pool_run *r) {
    while (r->phase < r->nphases && r->phases[r->phase].count == 0) r->phase++;
    r->next = r->done = 0;
    return r->phase < r->nphases;
}

/* With mu held: one task of r has returned. */
static void task_finished(attn_pool *p, pool_run *r) {
    if (++r->done < r->phases[r->phase].count) return;
    if (r->phases[r->phase].ended) *r->phases[r->phase].ended = attn_pool_now();
    r->phase++;
    if (!settle_phase(r)) { /* finished */
        if (--p->active == 0) p->idle_since = mono_us();
        pthread_cond_broadcast(&p->done);
        return;
    }
    r->link = p->head; /* in progress: ahead of runs not started */
    p->head = r;
    if (!p->tail) p->tail = r;
    wake_for(p, r->phases[r->phase].count);
}

static void *pool_worker_main(void *arg) {
    pool_worker *self = arg;
    attn_pool *p = self->pool;
#ifdef __linux__
    /* as top -H and /proc/PID/task/TID/comm show it (make bench-http
     * splits the server's CPU time by it) */
    pthread_setname_np(pthread_self(), "attn-pool");
#endif

    pthread_mutex_lock(&p->mu);
    for (;;) {
        pool_run *r = p->head;
        if (r) {
            size_t i = r->next++;
            attn_task_fn fn = r->phases[r->phase].fn;
            if (r->next == r->phases[r->phase].count) {
                p->head = r->link;
                if (!p->head) p->tail = NULL;
            }
            pthread_mutex_unlock(&p->mu);
            fn(r->ctx, i, self->index);
            pthread_mutex_lock(&p->mu);
            task_finished(p, r);
            continue;
        }
        if (p->stop) break;
        /* A phase hand-over or a queued run is near, or another forward
         * may follow the one that just finished: poll before sleeping. */
        const double t = SPIN_US > 0 ? mono_us() : 0.0;
        const double until = p->active > 0 ? t + SPIN_US : p->idle_since + LINGER_US;
        if (SPIN_US > 0 && t < until) {
            unsigned long seen = atomic_load_explicit(&p->gen, memory_order_relaxed);
            pthread_mutex_unlock(&p->mu);
            spin_wait(p, seen, until);
            pthread_mutex_lock(&p->mu);
            if (p->head || p->stop) continue;
        }
        p->sleeping++;
        pthread_cond_wait(&p->work, &p->mu);
        p->sleeping--;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

attn_status attn_pool_create(int nthreads, attn_pool **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!out) return attn_fail(err, errlen, ATTN_ERR_INVALID, "pool: out is NULL");
    if (nthreads < 1 || nthreads > 1024)
        return attn_fail(err, errlen, ATTN_ERR_INVALID,
                         "pool: %d threads requested; expected 1..1024", nthreads);

    attn_pool *p = calloc(1, sizeof *p);
    if (!p) return attn_fail(err, errlen, ATTN_ERR_NOMEM, "pool: out of memory");
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    p->workers = calloc((size_t)nthreads, sizeof *p->workers);
    if (!p->threads || !p->workers) {
        free(p->threads);
        free(p->workers);
        free(p);
        return attn_fail(err, errlen, ATTN_ERR_NOMEM, "pool: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->gen, 0);

    for (int t = 0; t < nthreads; t++) {
        p->workers[t].pool = p;
        p->workers[t].index = t;
        int rc = pthread_create(&p->threads[t], NULL, pool_worker_main, &p->workers[t]);
        if (rc != 0) {
            p->nthreads = t; /* destroy joins the ones that started */
            attn_pool_destroy(p);
            return attn_fail(err, errlen, ATTN_ERR_NOMEM, "pool: cannot start thread %d of %d: %s",
                             t + 1, nthreads, strerror(rc));
        }
    }
    p->nthreads = nthreads;
    *out = p;
    return ATTN_OK;
}

void attn_pool_destroy(attn_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_relaxed);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->nthreads; t++) pthread_join(p->threads[t], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p->threads);
    free(p);
}

int attn_pool_size(const attn_pool *p) {
    return p ? p->nthreads : 0;
}

/* Queue r and wait for it; with only_if_idle, give up (returning 0) unless
 * no other run is in progress or queued. */
static int run_or_refuse(attn_pool *p, pool_run *r, int only_if_idle) {
    pthread_mutex_lock(&p->mu);
    if (only_if_idle && p->active > 0) {
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    p->active++;
    if (p->tail)
        p->tail->link = r;
    else
        p->head = r;
    p->tail = r;
    wake_for(p, r->phases[r->phase].count);
    while (r->phase < r->nphases) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return 1;
}

void attn_pool_run_phases(attn_pool *p, const attn_phase *phases, int nphases, void *ctx) {
    if (!p) { /* no pool: the caller is the only worker */
        for (int k = 0; k < nphases; k++) {
            for (size_t i = 0; i < phases[k].count; i++) phases[k].fn(ctx, i, 0);
            if (phases[k].ended && phases[k].count) *phases[k].ended = attn_pool_now();
        }
        return;
    }
    pool_run r = {.phases = phases, .nphases = nphases, .ctx = ctx};
    if (!settle_phase(&r)) return; /* nothing to run */
    run_or_refuse(p, &r, 0);
}

int attn_pool_try_run(attn_pool *p, size_t count, attn_task_fn fn, void *ctx) {
    if (!p) return 0;
    attn_phase one = {.count = count, .fn = fn};
    pool_run r = {.phases = &one, .nphases = 1, .ctx = ctx};
    if (!settle_phase(&r)) return 1; /* nothing to run: done */
    return run_or_refuse(p, &r, 1);
}

void attn_pool_run(attn_pool *p, size_t count, attn_task_fn fn, void *ctx) {
    attn_phase one = {.count = count, .fn = fn};
    attn_pool_run_phases(p, &one, 1, ctx);
}
