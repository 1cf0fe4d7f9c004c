/* models.h - the weight sets being served, by name: a registry that changes
 * while requests run.
 *
 * Each loaded version of a model is a model_entry: its weights and the
 * identity of the file they came from (SHA-256, size, load time, version).
 * An entry is immutable once published and reference-counted. The registry
 * maps names to slots; a slot holds the version serving now (or none), the
 * state the repository index and /metrics show (READY, LOADING,
 * UNAVAILABLE, with a reason) and its reload counts.
 *
 * Locking: one mutex guards the slots. It is held to look a name up, to swap
 * a slot's version, to copy the index out and to render /v1/models and
 * /metrics (microseconds); never while a file is read or a model is
 * self-tested.
 *
 * Lifetimes: a request takes a reference when it resolves its model
 * (registry_acquire) and drops it when done (model_release). A swap
 * replaces a slot's pointer under the lock and drops the registry's own
 * reference to the old version, so requests already admitted finish on the
 * weights they started with, and the old version is freed when its last
 * reference goes, on whichever thread drops it.
 *
 *     registry *reg = registry_create();
 *     model_file_id id;
 *     model_entry *e = model_load(&spec, NULL, &id, err, sizeof err);  // off the request path
 *     if (e) registry_publish(reg, e);                            // serves it; takes e's reference
 *     ...
 *     model_entry *m = registry_acquire(reg, "demo");            // a request (NULL: not serving)
 *     ... attn_forward(m->w, ...) ...
 *     model_release(m);
 *     registry_destroy(reg);
 */
#ifndef ATTN_MODELS_H
#define ATTN_MODELS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "buf.h"
#include "config.h"
#include "weights.h"

/* ------------------------------------------------------------ versions */

/* One loaded version of a model. Every field is fixed before the entry is
 * published, except refs. */
typedef struct model_entry {
    char name[64];
    attn_weights *w; /* owned, immutable */
    char sha256[65]; /* of the file it was loaded from, lowercase hex ("" when built in memory) */
    uint64_t file_bytes; /* that file's size */
    char loaded_at[32];  /* when, RFC 3339 UTC */
    double loaded_unix;  /* the same, seconds since the epoch */
    unsigned version;    /* 1 at the name's first load, +1 at each successful reload */
    atomic_int refs;     /* the registry's (while serving) + one per request using it */
} model_entry;

/* What tells a file changed without reading it: the same path may be a new
 * file (renamed over it: new inode) or the same file written again (new
 * size or modification time). */
typedef struct model_file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} model_file_id;

/* stat() path into id: 0, or -1 with errno. */
int model_file_stat(const char *path, model_file_id *id);
bool model_file_same(const model_file_id *a, const model_file_id *b);

/* A file's SHA-256 as hashed when it had identity id. */
typedef struct model_file_hash {
    model_file_id id;
    char sha256[65];
} model_file_hash;

/* Load, fully validate and self-test (fast path against the naive
 * reference, on the calling thread) the weight set spec names, and hash its
 * file (unless known (may be NULL) holds the digest of the file as it is
 * now). Returns a new entry holding one reference (the caller's), version 0
 * until published; or NULL with err naming the model, file and problem. id
 * (may be NULL) gets the identity of the file as it was read; a file that
 * changes while it is being read is read again (three tries). Thread-safe;
 * takes no lock of the registry's. */
model_entry *model_load(const model_spec *spec, const model_file_hash *known, model_file_id *id,
                        char *err, size_t errlen);

/* An entry around weights built in memory (tests, fuzzers): takes w over.
 * NULL when out of memory (w is then destroyed). */
model_entry *model_from_weights(const char *name, attn_weights *w);

/* Take one more reference (e may be NULL); returns e. */
model_entry *model_retain(model_entry *e);
/* Drop one; the last frees the weights. Accepts NULL. Any thread. */
void model_release(model_entry *e);

/* One model's /v1/models object. */
void registry_model_json(const model_entry *e, buf *out);
/* The file identity fields ("sha256":..., "file_bytes":..., "loaded_at":...,
 * "version":...), without braces, for both APIs' model objects. */
void registry_file_json(const model_entry *e, buf *out);

/* ------------------------------------------------------------ registry */

typedef enum { MODEL_READY, MODEL_LOADING, MODEL_UNAVAILABLE, MODEL_STATE_COUNT } model_state;
/* "READY", "LOADING", "UNAVAILABLE" (Triton's names). */
const char *model_state_name(model_state s);

typedef struct registry registry;

/* NULL when out of memory. */
registry *registry_create(void);
/* Drops the registry's references (entries still held by someone live on
 * until released). Accepts NULL. */
void registry_destroy(registry *r);

/* Readers: any thread. */

/* The version serving under name, with a reference the caller must
 * release; NULL name = the default model, else the only one serving. NULL
 * when nothing serves under that name. */
model_entry *registry_acquire(registry *r, const char *name);
/* The message for a name registry_acquire did not find: given ("model 'x'
 * is not loaded; loaded: 'a', 'b'", with the state and reason when the
 * repository knows the name) or not (a model is required when several are
 * serving). Written into out (n bytes). */
void registry_missing_message(registry *r, const char *name, char *out, size_t n);
/* Whether the repository knows the name (serving or not). */
bool registry_knows(registry *r, const char *name);
/* How many models serve now. */
int registry_serving(registry *r);
/* Bytes the serving versions' weights take (matrices and their transposed
 * copies). */
size_t registry_weights_bytes(registry *r);
/* GET /v1/models: {"models":[...]} of the serving versions, by name. */
void registry_models_json(registry *r, buf *out);

/* What the repository knows of one name, copied out. */
typedef struct model_status {
    char name[64];
    model_state state;
    char reason[512]; /* why it is not READY; "" when READY */
    model_entry *e;   /* the version serving (a reference), or NULL */
} model_status;
/* Every name the repository knows, by name: a malloc'd array of *n (NULL
 * with *n = 0 when none or out of memory); free with
 * registry_snapshot_free. name: only that one (then *n is 0 or 1). */
model_status *registry_snapshot(registry *r, const char *name, int *n);
void registry_snapshot_free(model_status *s, int n);
/* The models' lines of /metrics: which file each one serves, its state
 * (and why it is not READY), its reload counts. */
void registry_metrics(registry *r, buf *out);

/* Writers: the reload thread, and main at start-up. */

/* Serve e (a loaded entry; its reference is taken over) as e->name: makes
 * the slot if needed, gives e the next version, swaps it in, state READY,
 * counts a successful load. The old version is released. Returns the new
 * version number. */
unsigned registry_publish(registry *r, model_entry *e);
/* Mark a name LOADING (a slot is made for a new name; what serves, serves
 * on). */
void registry_loading(registry *r, const char *name);
/* A load of name failed: state UNAVAILABLE with why (the version serving,
 * if any, serves on and the reason says so); counts a failed load. */
void registry_failed(registry *r, const char *name, const char *why);
/* Serve nothing under name: the version is released, state UNAVAILABLE
 * with why ("unloaded"). forget: the name leaves the repository too (not
 * listed any more). No-op for an unknown name. */
void registry_unload(registry *r, const char *name, const char *why, bool forget);
/* Back to READY (its file is the one serving after all). No-op unless a
 * version serves. */
void registry_ready(registry *r, const char *name);
/* The model used when a request names none (NULL or "": none configured,
 * then the only model serving is). */
void registry_set_default(registry *r, const char *name);

/* Model names the API and the repository accept: 1-63 characters of
 * A-Z a-z 0-9 . _ - and not "." or "..". false with err naming field. */
bool model_name_check(const char *name, const char *field, char *err, size_t errlen);

#endif
