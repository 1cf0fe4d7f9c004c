/* queue.c - see queue.h for the locking rule. */
#include "queue.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct cqueue {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* jobs arrived, or stopping */
    pthread_cond_t reap_cv; /* the queue was empty and a job arrived, or stopping */
    pthread_cond_t idle_cv; /* a running job finished */
    cjob *head, *tail;
    long depth, running, max_depth;
    double timeout_s;
    bool stopping;
    cqueue_batching batch;
    int ndisp;
    pthread_t *disp;
    pthread_t reaper;
    bool reaper_started;
};

double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void thread_name(const char *name) {
#ifdef __linux__
    pthread_setname_np(pthread_self(), name);
#else
    (void)name;
#endif
}

/* A monotonic time in seconds (mono_now's) as pthread_cond_timedwait's
 * deadline on the queue's condition variables (CLOCK_MONOTONIC). */
static struct timespec mono_deadline(double t) {
    const double s = floor(t);
    return (struct timespec){(time_t)s, (long)((t - s) * 1e9)};
}

static cjob *pop_locked(cqueue *q) {
    cjob *j = q->head;
    if (j) {
        q->head = j->next;
        if (!q->head) q->tail = NULL;
        q->depth--;
        j->next = NULL;
    }
    return j;
}

/* Unlink the waiting jobs that may join head's batch (same key, not
 * expired, within the bounds), oldest first, appending them to head's
 * batch_next chain; *count and *tokens are the batch's so far. */
static void gather_locked(cqueue *q, cjob *head, int *count, long *tokens, double now) {
    cjob **link = &q->head, *prev = NULL, **tail = &head->batch_next;
    while (*tail) tail = &(*tail)->batch_next;
    while (*link && *count < q->batch.max_requests) {
        cjob *j = *link;
        if (j->batch_key == head->batch_key && *tokens + j->batch_tokens <= q->batch.max_tokens &&
            now - j->enqueued <= q->timeout_s) {
            *link = j->next;
            if (q->tail == j) q->tail = prev;
            q->depth--;
            j->next = NULL;
            j->batch_next = NULL;
            *tail = j;
            tail = &j->batch_next;
            (*count)++;
            *tokens += j->batch_tokens;
        } else {
            prev = j;
            link = &j->next;
        }
    }
}

/* head's batch: what is waiting now, then (delay_us) what arrives soon. */
static void batch_locked(cqueue *q, cjob *head) {
    head->batch_next = NULL;
    if (!head->batch_key || q->batch.max_requests <= 1) return;
    int count = 1;
    long tokens = head->batch_tokens;
    double now = mono_now();
    gather_locked(q, head, &count, &tokens, now);
    if (q->batch.delay_us <= 0) return;
    double until = now + (double)q->batch.delay_us * 1e-6;
    while (count < q->batch.max_requests && tokens < q->batch.max_tokens && !q->stopping &&
           (now = mono_now()) < until) {
        const struct timespec ts = mono_deadline(until);
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
        gather_locked(q, head, &count, &tokens, mono_now());
    }
}

static void *dispatcher_main(void *arg) {
    cqueue *q = arg;
    thread_name("attn-dispatch");
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head && q->stopping) break;
        cjob *j = pop_locked(q);
        q->running++;
        double waited = mono_now() - j->enqueued;
        bool expired = waited > q->timeout_s;
        if (!expired) batch_locked(q, j);
        pthread_mutex_unlock(&q->mu);
        j->fn(j, expired ? CJOB_EXPIRED : CJOB_RUN, waited);
        pthread_mutex_lock(&q->mu);
        q->running--;
        pthread_cond_broadcast(&q->idle_cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Expire jobs at the head that waited too long: FIFO, so the oldest are
 * there. Sleeps until the head's deadline (or, with none waiting, until a
 * push), so an expired job's client hears at its timeout, not at a tick. */
static void *reaper_main(void *arg) {
    cqueue *q = arg;
    thread_name("attn-reaper");
    pthread_mutex_lock(&q->mu);
    while (!q->stopping) {
        double now = mono_now();
        if (q->head && now - q->head->enqueued > q->timeout_s) {
            cjob *j = pop_locked(q);
            pthread_mutex_unlock(&q->mu);
            j->fn(j, CJOB_EXPIRED, now - j->enqueued);
            pthread_mutex_lock(&q->mu);
        } else if (q->head) {
            /* just past the deadline, so the job has waited longer than it */
            const struct timespec ts = mono_deadline(q->head->enqueued + q->timeout_s + 1e-4);
            pthread_cond_timedwait(&q->reap_cv, &q->mu, &ts);
        } else {
            pthread_cond_wait(&q->reap_cv, &q->mu);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

cqueue *cqueue_create(int dispatchers, long max_depth, long timeout_ms,
                      const cqueue_batching *batching) {
    cqueue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca; /* timed waits (the batch delay, deadlines) on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_cond_init(&q->reap_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (batching) q->batch = *batching;
    pthread_cond_init(&q->idle_cv, NULL);
    q->max_depth = max_depth;
    q->timeout_s = (double)timeout_ms / 1000.0;
    q->disp = calloc((size_t)dispatchers, sizeof *q->disp);
    if (!q->disp) goto err;
    for (; q->ndisp < dispatchers; q->ndisp++)
        if (pthread_create(&q->disp[q->ndisp], NULL, dispatcher_main, q)) goto err;
    if (pthread_create(&q->reaper, NULL, reaper_main, q)) goto err;
    q->reaper_started = true;
    return q;
err:
    cqueue_destroy(q);
    return NULL;
}

cqueue_status cqueue_push(cqueue *q, cjob *job) {
    pthread_mutex_lock(&q->mu);
    cqueue_status rc = CQ_OK;
    if (q->stopping)
        rc = CQ_STOPPED;
    else if (q->depth >= q->max_depth)
        rc = CQ_FULL;
    else {
        job->next = NULL;
        job->enqueued = mono_now();
        if (q->tail)
            q->tail->next = job;
        else {
            q->head = job;
            pthread_cond_signal(&q->reap_cv); /* the reaper sleeps with no deadline */
        }
        q->tail = job;
        q->depth++;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

long cqueue_depth(cqueue *q) {
    pthread_mutex_lock(&q->mu);
    long d = q->depth;
    pthread_mutex_unlock(&q->mu);
    return d;
}

bool cqueue_idle(cqueue *q) {
    pthread_mutex_lock(&q->mu);
    bool idle = q->depth == 0 && q->running == 0;
    pthread_mutex_unlock(&q->mu);
    return idle;
}

long cqueue_running(cqueue *q) {
    pthread_mutex_lock(&q->mu);
    long d = q->running;
    pthread_mutex_unlock(&q->mu);
    return d;
}

void cqueue_stop(cqueue *q) {
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_broadcast(&q->cv);
    pthread_cond_signal(&q->reap_cv);
    cjob *j;
    while ((j = pop_locked(q))) {
        pthread_mutex_unlock(&q->mu);
        j->fn(j, CJOB_CANCELLED, mono_now() - j->enqueued);
        pthread_mutex_lock(&q->mu);
    }
    while (q->running) pthread_cond_wait(&q->idle_cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

void cqueue_destroy(cqueue *q) {
    if (!q) return;
    cqueue_stop(q);
    for (int i = 0; i < q->ndisp; i++) pthread_join(q->disp[i], NULL);
    if (q->reaper_started) pthread_join(q->reaper, NULL);
    free(q->disp);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    pthread_cond_destroy(&q->reap_cv);
    pthread_cond_destroy(&q->idle_cv);
    free(q);
}
