/* http.h - the daemon's HTTP side: libmicrohttpd, routing, request bodies,
 * the compute hand-off, responses, and graceful drain.
 *
 *     http_server *s = http_start(&cfg, reg, rl, pool, &blas, err, sizeof err);
 *     ... wait for a signal ...
 *     http_drain(s);   // readiness 503, stop accepting, finish in-flight work
 *     http_stop(s);
 */
#ifndef ATTN_HTTP_H
#define ATTN_HTTP_H

#include <stddef.h>

#include "blas.h"
#include "config.h"
#include "models.h"
#include "pool.h"
#include "reload.h"

typedef struct http_server http_server;

/* Listen and serve. Returns NULL with err on failure (port in use, ...). */
http_server *http_start(const attn_config *cfg, registry *reg, reloader *rl, attn_pool *pool,
                        const attn_blas_info *blas, char *err, size_t errlen);
int http_port(const http_server *s); /* the bound port (useful with --port 0) */
/* Turn readiness off (/readyz 503), refuse new /attend work (503 not_ready,
 * Connection: close) while still listening, and wait up to
 * shutdown_grace_ms for the /attend requests already admitted; then cancel
 * what still waits in the queue and the reloader (503) and wait for running
 * computations and the load going on (reloader_stop). */
void http_drain(http_server *s);
void http_stop(http_server *s); /* close everything and free; accepts NULL */

#endif
