/* pool.c - a fixed-size pool of compute threads running batches of tasks.
 *
 * A caller of attn_pool_run describes its batch as one "run" that lives on
 * its own stack: {fn, ctx, count, next index to hand out, number finished}.
 * Runs wait in one FIFO queue. A worker takes the next index of the oldest
 * run (dequeuing the run once its last index is handed out), runs the task
 * with the lock released, then counts it finished; the caller sleeps until
 * its run's finished count reaches its task count. Nothing is allocated per
 * run or per task.
 *
 * Locking rule: one mutex (mu) guards every field of the pool and every
 * field of every queued or unfinished run. Workers sleep on `work` (signalled
 * when a run is queued or on shutdown), callers sleep on `done` (broadcast
 * when any run finishes; each caller rechecks its own run). A task function
 * is always called with mu released. After a run's last task is counted
 * finished no worker touches it again, so the caller may return (and its
 * stack frame disappear) as soon as it sees done == count under mu.
 */
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_run {
    attn_task_fn fn;       /* the task function */
    void *ctx;             /* its context */
    size_t count;          /* tasks in this run */
    size_t next;           /* next index to hand out (guarded by mu) */
    size_t done;           /* tasks finished (guarded by mu) */
    struct pool_run *link; /* next run in the queue */
} pool_run;

typedef struct pool_worker {
    struct attn_pool *pool; /* back pointer */
    int index;              /* worker index passed to tasks */
} pool_worker;

struct attn_pool {
    pthread_mutex_t mu;    /* guards everything below and queued runs */
    pthread_cond_t work;   /* a run was queued, or stop was set */
    pthread_cond_t done;   /* some run finished */
    pool_run *head, *tail; /* FIFO of runs with indices left to hand out */
    int stop;              /* set by destroy: exit once the queue is empty */
    int nthreads;          /* number of workers started */
    pthread_t *threads;    /* [nthreads] */
    pool_worker *workers;  /* [nthreads] */
};

static void *pool_worker_main(void *arg) {
    pool_worker *self = arg;
    attn_pool *p = self->pool;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop) pthread_cond_wait(&p->work, &p->mu);
        pool_run *r = p->head;
        if (!r) break; /* stop requested and nothing left */
        size_t i = r->next++;
        if (r->next == r->count) {
            p->head = r->link;
            if (!p->head) p->tail = NULL;
        }
        pthread_mutex_unlock(&p->mu);

        r->fn(r->ctx, i, self->index);

        pthread_mutex_lock(&p->mu);
        if (++r->done == r->count) pthread_cond_broadcast(&p->done);
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

void attn_pool_run(attn_pool *p, size_t count, attn_task_fn fn, void *ctx) {
    if (count == 0) return;
    if (!p) { /* no pool: the caller is the only worker */
        for (size_t i = 0; i < count; i++) fn(ctx, i, 0);
        return;
    }
    pool_run r = {.fn = fn, .ctx = ctx, .count = count, .next = 0, .done = 0, .link = NULL};

    pthread_mutex_lock(&p->mu);
    if (p->tail)
        p->tail->link = &r;
    else
        p->head = &r;
    p->tail = &r;
    /* Wake as many workers as there are tasks (all of them at most). */
    if (count >= (size_t)p->nthreads)
        pthread_cond_broadcast(&p->work);
    else
        for (size_t k = 0; k < count; k++) pthread_cond_signal(&p->work);
    while (r.done < r.count) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
