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

typedef enum {
    MH_RECEIVE,
    MH_DECODE,
    MH_QUEUE,
    MH_COMPUTE,
    MH_ENCODE,
    MH_SEND,
    MH_TOTAL,
    MH_COUNT
} metrics_hist;

void metrics_init(const char *version, const char *blas_core);
void metrics_request(const char *route, const char *model, int status, size_t bytes_in,
                     size_t bytes_out);
void metrics_observe(metrics_hist h, double seconds);
/* One inference request of a model that was serving (a name from the
 * registry, never one a client made up): its total and compute time. The
 * first 64 models get histograms; requests of later ones are counted as
 * dropped. */
void metrics_observe_model(const char *model, double total_s, double compute_s);
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
