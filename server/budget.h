/* budget.h - the memory that requests hold together, against one limit.
 *
 * Every request-sized allocation is reserved here before it is made: a body
 * as it arrives (from Content-Length, or chunk by chunk), an inflated body,
 * and, once the shapes are known, the decoded inputs, the outputs, the
 * engine's working memory and the answer's text. A request gives back all
 * it holds when it completes, which is after its client has read the whole
 * answer, so slow readers and stalled uploaders count for what they hold.
 * A reservation that would pass the limit fails, and the request is refused
 * (503 overloaded with Retry-After) before allocating. The engine's spare
 * scratch (hugemem.h), kept between passes, is held here too; a request
 * that does not fit frees it before it is refused.
 *
 *     budget_init(budget_default(weights_bytes, &why, sizeof why));
 *     if (!budget_take(n)) refuse...;   ...   budget_give(n);
 *
 * Thread-safe (one atomic counter); the limit is set once at start-up.
 */
#ifndef ATTN_BUDGET_H
#define ATTN_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes outside the budget that the process needs besides the weight sets
 * (threads' stacks, the allocator's own overhead, libmicrohttpd's buffers):
 * the default leaves this much room, and the memory tests allow it. */
#define BUDGET_ALLOWANCE ((size_t)160 << 20)

/* The default limit: from the cgroup's memory limit (v2 memory.max, else v1
 * memory.limit_in_bytes) when there is one, else physical memory; minus the
 * weight sets and BUDGET_ALLOWANCE, three quarters of what is left, at least
 * 64 MiB. why gets where it came from ("cgroup v2 memory.max 2.0 GiB"). */
size_t budget_default(size_t weights_bytes, char *why, size_t whylen);

void budget_init(size_t limit);
size_t budget_limit(void);
/* What requests hold now (the spare, mem_reuse_spare(), not included). */
size_t budget_held(void);

/* Reserve n bytes: true when they fit under the limit (then held), false
 * otherwise (nothing held). n = 0 always fits. */
bool budget_take(size_t n);
void budget_give(size_t n);

#endif
