/* metrics.h - the daemon's counters, gauges and histograms, rendered in the
 * Prometheus text exposition format (checked by `promtool check metrics`).
 *
 * All functions are thread-safe. Label values are bounded: route is one of
 * the daemon's fixed routes, model a loaded model's name or "" (names a
 * client sends that match no model are never used as labels).
 */
#ifndef ATTN_METRICS_H
#define ATTN_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef enum { MH_DECODE, MH_QUEUE, MH_COMPUTE, MH_ENCODE, MH_TOTAL, MH_COUNT } metrics_hist;

void metrics_init(const char *version, const char *blas_core);

/* One request, recorded when it ends, under one lock (a lock for each
 * histogram was ~3% of a small request's server CPU): its count by route,
 * model and status; its bytes; the phase histograms it passed through
 * (seconds[h] for each bit 1 << h of phases; MH_TOTAL always); and, for an
 * inference of a model that was serving (per_model: a name from the
 * registry, never one a client made up), that model's total and compute
 * time. The first 64 models get histograms; requests of later ones are
 * counted as dropped. A phase is thus observed when its request ends, not
 * when the phase does. */
typedef struct metrics_req {
    const char *route, *model;
    int status;
    size_t bytes_in, bytes_out;
    unsigned phases;
    double seconds[MH_COUNT];
    bool per_model;
} metrics_req;
void metrics_request(const metrics_req *m);
/* A re-reading of the configuration (SIGHUP, poll): ok, or failed (the
 * configuration or the model directory could not be read). */
void metrics_config_reload(bool ok);
void metrics_in_flight_add(int delta);
/* A request refused by the memory budget; cause is "body", "inflate" or
 * "decode" (a fixed string). */
void metrics_budget_refusal(const char *cause);
long metrics_in_flight(void);
/* A batch of requests computed together: how many, and their tokens. */
void metrics_batch(int requests, long tokens);
/* Render everything; queue_depth and models come from their owners. */
void metrics_render(buf *out, long queue_depth, long models_loaded, int ready);

#endif
