/* queue.h - the bounded compute queue between the HTTP threads and the engine.
 *
 * HTTP threads push decoded requests; a few dispatcher threads pop them in
 * FIFO order and run them (each run fans out over the engine's pool and
 * waits for it). A push fails at once when max_depth jobs are waiting, and
 * a job that waits longer than timeout_ms is handed back expired (a reaper
 * thread checks every 50 ms) so its client gets 503 instead of waiting on.
 *
 * Locking: one mutex guards the list and the flags; one condition variable
 * wakes dispatchers. Job callbacks always run with no lock held.
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
};

typedef struct cqueue cqueue;

/* Returns NULL on failure (threads could not start). */
cqueue *cqueue_create(int dispatchers, long max_depth, long timeout_ms);
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

#endif
