/* compress.h - whether an answer is compressed, and how.
 *
 * Asking for compression must never be a trap: browsers, Python requests and
 * fetch send Accept-Encoding: gzip on every call, and compressing a 45 MB
 * answer at zlib's fastest level takes longer than computing it. So the
 * server compresses an answer only when it pays:
 *   - never below min_bytes (the gzip framing outweighs the gain);
 *   - always up to always_bytes (JSON text that small compresses in well
 *     under a millisecond);
 *   - above that, only text (JSON numbers; raw float32 tensors shrink by a
 *     few percent at most), and only when the expected time to compress it,
 *     at the rate this process has measured, is at most `budget` times the
 *     time the server has already spent on the request (decoding, computing,
 *     encoding): so the answer costs at most 1 + budget times as long.
 * Every threshold is a setting (--compress-*).
 *
 * Thread-safe: the measured rate is one atomic.
 */
#ifndef ATTN_COMPRESS_H
#define ATTN_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "gz.h"

typedef struct compress_policy {
    size_t min_bytes;    /* never compress smaller answers */
    size_t always_bytes; /* always compress (when asked) answers up to this size */
    double budget;       /* compress time at most budget x the request's own time */
    int level;           /* zlib level 1..9 */
} compress_policy;

/* The coding to answer with for an Accept-Encoding header (NULL = none):
 * gzip or deflate, whichever the client prefers by q-value (gzip on a tie);
 * returns false when it accepts neither. */
bool compress_negotiate(const char *accept_encoding, gz_format *f);

/* Whether to compress an answer of `bytes` (text or raw tensors) for a
 * request the server has spent server_s seconds on. */
bool compress_pays(const compress_policy *p, size_t bytes, bool text, double server_s);

/* Record a compression: bytes in, seconds taken (updates the rate). */
void compress_observe(size_t bytes, double seconds);

/* The rate used for the decision, bytes per second. */
double compress_rate(void);

#endif
