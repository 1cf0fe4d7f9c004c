/* queue.h - the bounded compute queue between the HTTP threads and the engine.
 *
 * HTTP threads push decoded requests; a few dispatcher threads pop them in
 * FIFO order and run them (each run fans out over the engine's pool and
 * waits for it). A push fails at once when max_depth jobs are waiting, and
 * a job that waits longer than timeout_ms is handed back expired (a reaper
 * thread sleeps until the oldest job's deadline) so its client gets 503 at
 * its timeout instead of waiting on.
 *
 * Jobs that declare a batch key can be taken together (cqueue_batching):
 * the first one's fn runs them all.
 *
 * Locking: one mutex guards the list and the flags; one condition variable
 * wakes dispatchers, another the reaper. Job callbacks always run with no
 * lock held.
 */
#ifndef ATTN_QUEUE_H
#define ATTN_QUEUE_H

#include <stdbool.h>

typedef struct cjob cjob;
/* Called exactly once per pushed job: why == CJOB_RUN on a dispatcher to do
 * the work, CJOB_EXPIRED when it waited past the timeout, CJOB_CANCELLED
 * when the queue is stopped with the job still waiting. */
typedef enum { CJOB_RUN, CJOB_EXPIRED, CJOB_CANCELLED } cjob_why;
typedef void (*cjob_fn)(cjob *job, cjob_why why, double waited_s);

struct cjob {
    cjob *next;      /* queue link, owned by the queue while queued */
    double enqueued; /* monotonic seconds, set by cqueue_push */
    cjob_fn fn;
    void *ctx;
    const void *batch_key; /* non-NULL: may run with waiting jobs of the same key */
    long batch_tokens;     /* its size, counted against the batch's max_tokens */
    cjob *batch_next;      /* set by the queue before fn(CJOB_RUN): the other jobs of
                              this job's batch, which fn then runs too (their own fn is
                              not called); NULL when it runs alone */
};

/* Batching: a dispatcher that pops a job with a batch key also takes the
 * waiting jobs with the same key (anywhere in the queue, oldest first)
 * while the batch holds at most max_requests jobs and max_tokens tokens,
 * and, when delay_us > 0 and the batch is not full, waits up to delay_us
 * for more. max_requests <= 1: no batching. */
typedef struct cqueue_batching {
    int max_requests;
    long max_tokens;
    long delay_us;
} cqueue_batching;

typedef struct cqueue cqueue;

/* Returns NULL on failure (threads could not start). batching may be NULL
 * (no batching). */
cqueue *cqueue_create(int dispatchers, long max_depth, long timeout_ms,
                      const cqueue_batching *batching);
typedef enum {
    CQ_OK = 0,  /* queued */
    CQ_FULL,    /* max_depth jobs are waiting */
    CQ_STOPPED, /* cqueue_stop was called */
} cqueue_status;

/* Queue a job; it must stay valid until its fn runs. */
cqueue_status cqueue_push(cqueue *q, cjob *job);
long cqueue_depth(cqueue *q);
/* No job waiting and none running (a snapshot: it may change at once). */
bool cqueue_idle(cqueue *q);
long cqueue_running(cqueue *q);
/* Cancel waiting jobs (fn with CJOB_CANCELLED), refuse new ones, and wait
 * for the running ones to finish. Idempotent. */
void cqueue_stop(cqueue *q);
void cqueue_destroy(cqueue *q); /* stops first; accepts NULL */

double mono_now(void); /* monotonic clock in seconds */

/* Name the calling thread (at most 15 characters), as top -H, ps -L and
 * /proc/PID/task/TID/comm show it: the server's own threads are "attn-...",
 * libmicrohttpd names its own "MHD-worker". */
void thread_name(const char *name);

#endif
