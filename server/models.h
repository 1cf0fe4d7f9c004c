/* models.h - the loaded weight sets, by name. Built once at start-up from
 * the configuration, then read-only: safe to share between all threads. */
#ifndef ATTN_MODELS_H
#define ATTN_MODELS_H

#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "weights.h"

typedef struct model_entry {
    char name[64];
    attn_weights *w;     /* owned, immutable */
    char sha256[65];     /* of the file it was loaded from, lowercase hex */
    uint64_t file_bytes; /* that file's size */
    char loaded_at[32];  /* when, RFC 3339 UTC */
    double loaded_unix;  /* the same, seconds since the epoch */
    unsigned version;    /* 1 for the weights loaded at start */
} model_entry;

typedef struct registry {
    model_entry *m;
    int n;
    int default_idx; /* -1: a request must name its model (unless n == 1) */
} registry;

/* Load every model of c. Returns 0, or -1 with err naming the model, file
 * and problem (the engine's message). Partial loads are released. */
int registry_load(registry *r, const attn_config *c, char *err, size_t errlen);
void registry_free(registry *r);
/* By name; NULL name = the default (or the only) model. NULL if none. */
const model_entry *registry_find(const registry *r, const char *name);
/* The message for a model that registry_find did not find: name given
 * ("model 'x' is not loaded; loaded: 'a', 'b'") or not (a model is
 * required when several are loaded). Written into out (n bytes). */
void registry_missing_message(const registry *r, const char *name, char *out, size_t n);
/* One model's /v1/models object. */
void registry_model_json(const model_entry *e, buf *out);
/* The file identity fields ("sha256":..., "file_bytes":..., "loaded_at":...,
 * "version":...), without braces, for both APIs' model objects. */
void registry_file_json(const model_entry *e, buf *out);
/* The models' lines of /metrics: which file each one serves. */
void registry_metrics(const registry *r, buf *out);

#endif
