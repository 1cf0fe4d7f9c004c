/* reload.h - keeping the weight sets served in step with their sources,
 * without a restart.
 *
 * Sources: every model of the configuration (the config file's "models",
 * ATTN_MODELS, --model) and every NAME.safetensors in the model directory
 * (--model-dir); a name given by both is an error naming both.
 *
 * At start-up reloader_create loads them all on the calling thread, and any
 * failure is fatal. After that one thread of the reloader's own does every
 * load, so the I/O and compute threads never read or validate a file:
 *   - a rescan (reloader_rescan on SIGHUP, and every model_poll_s seconds)
 *     re-reads the configuration and the directory; a file whose inode,
 *     size or modification time changed is hashed, and loaded when its
 *     SHA-256 differs from the one serving; a model whose source is gone
 *     stops serving; a model unloaded through the API stays unloaded;
 *   - jobs (the repository API's load and unload) run one at a time, in
 *     order with the rescans.
 * A load that fails leaves the version serving in place (registry_failed:
 * UNAVAILABLE with the reason) and is not tried again until the file
 * changes. A load that succeeds is swapped in at once (registry_publish).
 *
 * Locking: one mutex guards the job queue and the flags; the table of what
 * was loaded from where is the reload thread's alone (main's before the
 * thread starts).
 *
 *     reloader *rl = reloader_create(reg, &cfg, argc, argv, err, sizeof err);   // loads
 *     reloader_start(rl, err, sizeof err);
 *     ... on SIGHUP: reloader_rescan(rl); ...
 *     reloader_stop(rl);     // at drain
 *     reloader_destroy(rl);
 */
#ifndef ATTN_RELOAD_H
#define ATTN_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "errors.h"
#include "models.h"

typedef struct reloader reloader;

typedef enum { RELOAD_LOAD, RELOAD_UNLOAD } reload_op;

/* A repository API request, run on the reload thread. */
typedef struct reload_job reload_job;
struct reload_job {
    reload_op op;
    char name[64];
    /* set before done is called: */
    http_error herr; /* HERR_NONE when it was done */
    char msg[1024];  /* otherwise why not, naming the model */
    /* Called once, on the reload thread (or by reloader_stop with
     * HERR_NOT_READY when the job never ran). */
    void (*done)(reload_job *j);
    void *ctx;
    reload_job *next; /* queue link, the reloader's while queued */
};

/* Read the sources of cfg and load every model into reg, on this thread.
 * argc/argv (kept, not copied) are read again at each rescan, with the
 * environment and the config file. Returns NULL with err naming the model,
 * file and problem (or both sources of a name given twice). */
reloader *reloader_create(registry *reg, const attn_config *cfg, int argc, char **argv, char *err,
                          size_t errlen);
/* Start the reload thread. 0, or -1 with err. */
int reloader_start(reloader *rl, char *err, size_t errlen);
/* Ask for a rescan (SIGHUP). Returns at once; any thread, not a signal
 * handler (main takes SIGHUP with sigtimedwait). */
void reloader_rescan(reloader *rl);
/* Queue a job; false when the reloader is stopped (done is not called). */
bool reloader_submit(reloader *rl, reload_job *j);
/* Refuse new jobs, cancel the queued ones (done with HERR_NOT_READY) and
 * wait for the one running. Idempotent. */
void reloader_stop(reloader *rl);
/* Stops first; accepts NULL. */
void reloader_destroy(reloader *rl);

#endif
