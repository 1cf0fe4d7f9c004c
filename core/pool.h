/* pool.h - a fixed-size pool of compute threads.
 *
 * The pool owns the cores: every compute-heavy loop of the engine is split
 * into independent tasks and run here, so concurrent requests share the same
 * N workers instead of each spawning threads of their own.
 *
 *     attn_pool *p;
 *     if (attn_pool_create(4, &p, err, sizeof err)) ...
 *     attn_pool_run(p, ntasks, my_task, &ctx);   // returns when all are done
 *     attn_pool_destroy(p);
 *
 * attn_pool_run and attn_pool_run_phases may be called from any number of
 * threads at once; their runs queue FIFO behind each other. They must never
 * be called from inside a task (a worker waiting on its own pool would
 * deadlock).
 *
 * While a run is in progress, a worker that runs out of tasks polls for new
 * ones for up to 100 us (SPIN_US in pool.c), yielding to any other runnable
 * thread between looks, before it sleeps; so the phases of a forward pass do
 * not each pay a thread wake-up (tens of microseconds on a virtual machine).
 * After the last run finishes, workers poll 50 us more (LINGER_US) for a run
 * that follows at once; then they sleep.
 */
#ifndef ATTN_POOL_H
#define ATTN_POOL_H

#include <stddef.h>

#include "status.h"

typedef struct attn_pool attn_pool;

/* One task: i is the task index in [0, count), worker the index of the pool
 * thread running it in [0, attn_pool_size) - use it to pick per-worker
 * scratch. Tasks of one run may execute in any order and concurrently. */
typedef void (*attn_task_fn)(void *ctx, size_t i, int worker);

/* Start nthreads workers (1..1024). Fails with ATTN_ERR_INVALID or
 * ATTN_ERR_NOMEM (thread creation). */
attn_status attn_pool_create(int nthreads, attn_pool **out, char *err, size_t errlen);

/* Stop the workers after the queued tasks finish, join them and free the
 * pool. Accepts NULL. No run may be in progress. */
void attn_pool_destroy(attn_pool *p);

int attn_pool_size(const attn_pool *p);

/* Run fn(ctx, i, worker) for every i in [0, count) on the workers and return
 * when all have returned. count == 0 returns at once. Thread-safe. Never
 * fails: the pool allocates nothing per task.
 * (Also: p NULL runs the tasks in order on the calling thread, worker 0.) */
void attn_pool_run(attn_pool *p, size_t count, attn_task_fn fn, void *ctx);

/* attn_pool_run, but only when the pool is idle (no run in progress or
 * queued): returns 1 when the tasks ran, 0 at once when the pool was busy
 * (nothing ran; the caller does the work itself). For work that must never
 * wait behind other runs, such as an HTTP thread encoding an answer.
 * (p NULL: returns 0.) */
int attn_pool_try_run(attn_pool *p, size_t count, attn_task_fn fn, void *ctx);

/* One phase of a multi-phase run: count tasks of fn. ended, when not
 * NULL, is set to the monotonic clock (seconds, attn_pool_now) as the
 * phase's last task returns; a phase with count 0 leaves it. */
typedef struct attn_phase {
    size_t count;
    attn_task_fn fn;
    double *ended;
} attn_phase;

/* The monotonic clock in seconds, as attn_phase.ended reads it. */
double attn_pool_now(void);

/* Run the phases in order with one ctx: every task of phase k returns
 * before any task of phase k+1 starts, the hand-over happening on the
 * worker that finishes phase k (the caller sleeps once, until the last
 * phase is done). Phases with count 0 are skipped. Same rules as
 * attn_pool_run otherwise (p NULL: all on the calling thread, in order). */
void attn_pool_run_phases(attn_pool *p, const attn_phase *phases, int nphases, void *ctx);

#endif
