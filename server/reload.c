/* reload.c - see reload.h.
 *
 * The file is divided as: the sources (configuration and model directory);
 * the table of what was loaded from where, and one model brought in step
 * with its source; a rescan; the jobs; the thread. */
#include "reload.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "mem.h"
#include "metrics.h"
#include "queue.h"
#include "sha256.h"

#define SUFFIX ".safetensors"

/* ------------------------------------------------------------- sources */

static const char *const from_config = "the configuration (config file, ATTN_MODELS or --model)";
static const char *const from_dir = "the model directory (--model-dir)";

typedef struct source {
    model_spec spec;
    const char *origin; /* from_config or from_dir */
} source;

typedef struct sources {
    source *s;
    int n, cap;
} sources;

static source *sources_add(sources *l) {
    source *p = mem_grow(l->s, &l->cap, l->n, sizeof *p);
    if (!p) return NULL;
    l->s = p;
    source *s = &l->s[l->n++];
    memset(s, 0, sizeof *s);
    return s;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const source *)a)->spec.name, ((const source *)b)->spec.name);
}

/* Add dir's NAME.safetensors files. Files whose name starts with '.'
 * (editors' and rsync's temporary files) are not models; other names that
 * are not model names, and entries that are not regular files, are passed
 * over, and logged when verbose (at start and SIGHUP, not at every poll). */
static int scan_dir(const char *dir, bool verbose, sources *l, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "model_dir %s: cannot open: %s", dir, strerror(errno));
        return -1;
    }
    int first = l->n, rc = 0;
    const struct dirent *de;
    while ((de = readdir(d))) {
        const char *f = de->d_name;
        size_t len = strlen(f), sl = strlen(SUFFIX);
        if (f[0] == '.' || len <= sl || strcmp(f + len - sl, SUFFIX)) continue;
        char name[64], why[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - sl), f);
        if (len - sl >= sizeof name || !model_name_check(name, "name", why, sizeof why)) {
            if (verbose)
                log_warn("model_dir %s: %s is not served: its name before " SUFFIX
                         " must be 1-63 characters of A-Z a-z 0-9 . _ -",
                         dir, f);
            continue;
        }
        source *s = sources_add(l);
        if (!s) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        int n = snprintf(s->spec.path, sizeof s->spec.path, "%s/%s", dir, f);
        struct stat st;
        if (n < 0 || (size_t)n >= sizeof s->spec.path || stat(s->spec.path, &st) ||
            !S_ISREG(st.st_mode)) {
            if (verbose) log_warn("model_dir %s: %s is not served: not a regular file", dir, f);
            l->n--;
            continue;
        }
        snprintf(s->spec.name, sizeof s->spec.name, "%s", name);
        s->spec.add_zero_attn = -1;
        s->origin = from_dir;
    }
    closedir(d);
    qsort(l->s + first, (size_t)(l->n - first), sizeof *l->s, by_name);
    return rc;
}

/* The models c names: its own, then its directory's. A name given by both
 * is an error naming both. */
static int sources_read(const attn_config *c, bool verbose, sources *l, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    for (int i = 0; i < c->nmodels; i++) {
        source *s = sources_add(l);
        if (!s) goto nomem;
        s->spec = c->models[i];
        s->origin = from_config;
    }
    if (!c->model_dir[0]) return 0;
    int nconf = l->n;
    if (scan_dir(c->model_dir, verbose, l, err, errlen)) goto fail;
    for (int i = nconf; i < l->n; i++)
        for (int j = 0; j < nconf; j++)
            if (!strcmp(l->s[i].spec.name, l->s[j].spec.name)) {
                snprintf(err, errlen,
                         "model '%s' is given twice: as %s in %s, and as %s in %s; rename one",
                         l->s[i].spec.name, l->s[i].spec.path, from_dir, l->s[j].spec.path,
                         from_config);
                goto fail;
            }
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    free(l->s);
    memset(l, 0, sizeof *l);
    return -1;
}

/* ---------------------------------------------------------------- table */

/* What the reloader knows of one name: where it comes from, which file
 * serves, which file failed. */
typedef struct known {
    model_spec spec;
    const char *origin;
    bool serving;            /* a version of it was published and not unloaded */
    model_spec served_spec;  /* the options the serving version was loaded with */
    model_file_id served_id; /* the file that serves, as last seen */
    char served_sha[65];
    bool failed;             /* the last try failed (state UNAVAILABLE) */
    model_file_id failed_id; /* the file that failed, when one could be read */
    bool failed_has_id;
    char failed_sha[65]; /* "" when it could not be hashed */
    char failed_msg[512];
    bool unloaded; /* by the API: rescans leave it so until a load */
    bool seen;     /* in the sources of the rescan going on */
} known;

struct reloader {
    registry *reg;
    int argc;
    char **argv;
    long poll_s;
    known *k; /* nk entries: the reload thread's (main's before it starts) */
    int nk, capk;
    /* guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* wakes the thread: a job, a rescan, stop */
    reload_job *head, *tail;    /* jobs waiting */
    bool rescan, stop, stopped; /* stopped: reloader_stop finished */
    bool running;               /* the thread started */
    pthread_t thread;
};

static known *known_find(reloader *rl, const char *name) {
    for (int i = 0; i < rl->nk; i++)
        if (!strcmp(rl->k[i].spec.name, name)) return &rl->k[i];
    return NULL;
}

static known *known_get(reloader *rl, const source *s) {
    known *k = known_find(rl, s->spec.name);
    if (k) return k;
    known *p = mem_grow(rl->k, &rl->capk, rl->nk, sizeof *p);
    if (!p) return NULL;
    rl->k = p;
    k = &rl->k[rl->nk++];
    memset(k, 0, sizeof *k);
    k->spec = s->spec;
    k->origin = s->origin;
    return k;
}

static bool spec_same(const model_spec *a, const model_spec *b) {
    return !strcmp(a->path, b->path) && a->num_heads == b->num_heads &&
           a->add_zero_attn == b->add_zero_attn && !strcmp(a->prefix, b->prefix);
}

/* Record a failed try of k (msg names the model and the problem). */
static void known_failed(reloader *rl, known *k, const char *msg, const model_file_id *id,
                         const char *sha) {
    k->failed = true;
    k->failed_has_id = id != NULL;
    if (id) k->failed_id = *id;
    snprintf(k->failed_sha, sizeof k->failed_sha, "%s", sha ? sha : "");
    snprintf(k->failed_msg, sizeof k->failed_msg, "%s", msg);
    registry_failed(rl->reg, k->spec.name, msg);
    log_warn("%s%s", msg, k->serving ? "; the version loaded before serves on" : "");
}

/* SYNC_STILL_FAILED: failed before, the same file, not logged again. */
typedef enum { SYNC_UNCHANGED, SYNC_LOADED, SYNC_FAILED, SYNC_STILL_FAILED } sync_result;

/* Bring the model of s in step with its file: load it when it is new or
 * its file changed (force: whatever it is). */
static sync_result sync_one(reloader *rl, const source *s, bool force, char *err, size_t errlen) {
    known *k = known_get(rl, s);
    if (!k) {
        snprintf(err, errlen, "model '%s': out of memory", s->spec.name);
        return SYNC_FAILED;
    }
    bool same_spec = spec_same(&k->spec, &s->spec);
    k->spec = s->spec;
    k->origin = s->origin;
    k->seen = true;
    if (k->unloaded && !force) return SYNC_UNCHANGED;
    model_file_id id;
    char sha[65] = "";
    if (model_file_stat(s->spec.path, &id)) {
        snprintf(err, errlen, "model '%s': %.900s: cannot open: %s", s->spec.name, s->spec.path,
                 strerror(errno));
        if (!force && k->failed && !k->failed_has_id && !strcmp(k->failed_msg, err))
            return SYNC_STILL_FAILED;
        known_failed(rl, k, err, NULL, NULL);
        return SYNC_FAILED;
    }
    if (!force) {
        /* unchanged only under the options it was loaded with: after a
         * refused option change, k->spec holds the refused options */
        bool served = k->serving && spec_same(&k->served_spec, &s->spec),
             failed = k->failed && same_spec;
        if (served && model_file_same(&id, &k->served_id)) goto unchanged;
        if (failed && k->failed_has_id && model_file_same(&id, &k->failed_id)) {
            snprintf(err, errlen, "%s", k->failed_msg);
            return SYNC_STILL_FAILED;
        }
        /* a new inode, size or time: the same bytes? (the digest counts
         * only if the file stayed the same while it was read) */
        model_file_id after;
        if ((served || failed) &&
            (sha256_file(s->spec.path, sha, NULL) || model_file_stat(s->spec.path, &after) ||
             !model_file_same(&id, &after)))
            sha[0] = '\0';
        if (sha[0]) {
            if (served && !strcmp(sha, k->served_sha)) {
                k->served_id = id;
                goto unchanged;
            }
            if (failed && !strcmp(sha, k->failed_sha)) {
                k->failed_id = id;
                snprintf(err, errlen, "%s", k->failed_msg);
                return SYNC_STILL_FAILED;
            }
        }
    }
    registry_loading(rl->reg, s->spec.name);
    double t0 = mono_now();
    model_file_hash seen = {.id = id};
    memcpy(seen.sha256, sha, sizeof sha);
    model_entry *e = model_load(&s->spec, sha[0] ? &seen : NULL, &id, err, errlen);
    if (!e) {
        known_failed(rl, k, err, &id, sha[0] ? sha : NULL);
        return SYNC_FAILED;
    }
    const attn_weights *w = e->w;
    char shown[65];
    memcpy(shown, e->sha256, sizeof shown);
    /* e is the registry's now; it lives on below, as only this thread swaps
     * versions out */
    unsigned version = registry_publish(rl->reg, e);
    if (!version) {
        snprintf(err, errlen, "model '%s': out of memory", s->spec.name);
        return SYNC_FAILED;
    }
    k->serving = true;
    k->served_spec = s->spec;
    k->served_id = id;
    memcpy(k->served_sha, shown, sizeof shown);
    k->failed = k->unloaded = false;
    log_info("model '%s' version %u: E=%d heads=%d head_dim=%d kdim=%d vdim=%d bias=%d "
             "bias_kv=%d zero_attn=%d layout=%s dtype=%s params=%zu sha256=%.16s... from %s%s "
             "(loaded in %.3f s)",
             s->spec.name, version, w->E, w->H, w->d, w->kdim, w->vdim, w->bias, w->add_bias_kv,
             w->add_zero_attn, w->layout, w->dtype, w->parameters, shown, s->spec.path,
             s->spec.is_default ? " (default)" : "", mono_now() - t0);
    return SYNC_LOADED;
unchanged:
    if (k->failed) { /* the file that serves is back: nothing failed any more */
        k->failed = false;
        registry_ready(rl->reg, s->spec.name);
        log_info("model '%s': its file is the one serving again (version's sha256 %.16s...)",
                 s->spec.name, k->served_sha);
    }
    return SYNC_UNCHANGED;
}

static void set_default(reloader *rl, const attn_config *c) {
    const char *def = NULL;
    for (int i = 0; i < c->nmodels; i++)
        if (c->models[i].is_default) def = c->models[i].name;
    registry_set_default(rl->reg, def);
}

/* ---------------------------------------------------------------- rescan */

/* Bring every model in step with the sources of c; names whose source is
 * gone stop serving. strict (start-up): the first failure stops it and is
 * returned. The summary is logged when asked (SIGHUP), or when something
 * changed. Returns 0, or -1 with err (strict, or sources unreadable). */
static int sync_all(reloader *rl, const attn_config *c, bool strict, bool summary, char *err,
                    size_t errlen) {
    double t0 = mono_now();
    sources l;
    if (sources_read(c, strict || summary, &l, err, errlen)) return -1;
    if (strict && l.n == 0) {
        snprintf(err, errlen,
                 "no weight set configured: give --model NAME=PATH[:HEADS], ATTN_MODELS, a "
                 "config file with \"models\", or --model-dir with NAME" SUFFIX " files%s%s",
                 c->model_dir[0] ? " (none in " : "", c->model_dir[0] ? c->model_dir : "");
        if (c->model_dir[0]) snprintf(err + strlen(err), errlen - strlen(err), ")");
        free(l.s);
        return -1;
    }
    for (int i = 0; i < rl->nk; i++) rl->k[i].seen = false;
    int loaded = 0, failed = 0, still = 0, removed = 0;
    char e2[1024];
    for (int i = 0; i < l.n; i++) {
        sync_result r = sync_one(rl, &l.s[i], false, e2, sizeof e2);
        loaded += r == SYNC_LOADED;
        failed += r == SYNC_FAILED;
        still += r == SYNC_STILL_FAILED;
        if (r >= SYNC_FAILED && strict) {
            snprintf(err, errlen, "%s", e2);
            free(l.s);
            return -1;
        }
    }
    free(l.s);
    for (int i = 0; i < rl->nk;) {
        known *k = &rl->k[i];
        if (k->seen) {
            i++;
            continue;
        }
        registry_unload(rl->reg, k->spec.name, "its source is gone", true);
        log_info("model '%s': %s is no longer in %s: not served any more", k->spec.name,
                 k->spec.path, k->origin);
        removed++;
        *k = rl->k[--rl->nk];
    }
    set_default(rl, c);
    if (loaded || removed) mem_trim(); /* the old versions' memory, back to the system */
    if (!strict && (summary || loaded || failed || removed))
        log_info("models re-read: %d loaded, %d failed (%d of them as before), %d removed, %d "
                 "unchanged (%.3f s)",
                 loaded, failed + still, still, removed, rl->nk - loaded - failed - still,
                 mono_now() - t0);
    return 0;
}

/* A rescan: the configuration as it is now (flags, environment, config
 * file), then its sources. Settings other than the models and model_dir
 * need a restart to change. */
static void rescan(reloader *rl, bool summary) {
    attn_config c;
    char err[2048];
    bool ok = !config_load(&c, rl->argc, rl->argv, err, sizeof err) &&
              !sync_all(rl, &c, false, summary, err, sizeof err);
    if (!ok) log_error("models not re-read: %s; the models loaded before serve on", err);
    metrics_config_reload(ok);
    config_free(&c);
}

/* ------------------------------------------------------------------ jobs */

static void run_load(reloader *rl, reload_job *j) {
    attn_config c;
    sources l = {0};
    if (config_load(&c, rl->argc, rl->argv, j->msg, sizeof j->msg) ||
        sources_read(&c, false, &l, j->msg, sizeof j->msg)) {
        j->herr = HERR_MODEL_LOAD_FAILED;
        config_free(&c);
        return;
    }
    const source *s = NULL;
    for (int i = 0; i < l.n; i++)
        if (!strcmp(l.s[i].spec.name, j->name)) s = &l.s[i];
    if (!s) {
        j->herr =
            http_fail(HERR_MODEL_NOT_FOUND, j->msg, sizeof j->msg,
                      "model '%s' is neither %s" SUFFIX " in the model directory%s%s%s nor "
                      "in the configuration",
                      j->name, j->name, c.model_dir[0] ? " (" : " (none is set", c.model_dir, ")");
    } else if (sync_one(rl, s, true, j->msg, sizeof j->msg) >= SYNC_FAILED) {
        j->herr = HERR_MODEL_LOAD_FAILED;
    } else {
        j->herr = HERR_NONE;
        if (s->spec.is_default) set_default(rl, &c);
    }
    free(l.s);
    config_free(&c);
    mem_trim();
}

static void run_unload(reloader *rl, reload_job *j) {
    known *k = known_find(rl, j->name);
    if (!k) {
        j->herr = http_fail(HERR_MODEL_NOT_FOUND, j->msg, sizeof j->msg,
                            "model '%s' is not in the repository", j->name);
        return;
    }
    registry_unload(rl->reg, j->name, "unloaded through the repository API", false);
    k->serving = k->failed = false;
    k->unloaded = true;
    log_info("model '%s': unloaded through the repository API", j->name);
    j->herr = HERR_NONE;
    mem_trim();
}

/* ---------------------------------------------------------------- thread */

static void *reload_main(void *arg) {
    reloader *rl = arg;
    thread_name("attn-reload");
    double next_poll = rl->poll_s > 0 ? mono_now() + (double)rl->poll_s : 0;
    pthread_mutex_lock(&rl->mu);
    while (!rl->stop) {
        reload_job *j = rl->head;
        if (j) {
            rl->head = j->next;
            if (!rl->head) rl->tail = NULL;
            pthread_mutex_unlock(&rl->mu);
            (j->op == RELOAD_LOAD ? run_load : run_unload)(rl, j);
            j->done(j);
            pthread_mutex_lock(&rl->mu);
            continue;
        }
        bool due = next_poll > 0 && mono_now() >= next_poll;
        if (rl->rescan || due) {
            bool asked = rl->rescan;
            rl->rescan = false;
            pthread_mutex_unlock(&rl->mu);
            rescan(rl, asked);
            if (next_poll > 0) next_poll = mono_now() + (double)rl->poll_s;
            pthread_mutex_lock(&rl->mu);
            continue;
        }
        if (next_poll > 0) {
            struct timespec until;
            double t = next_poll - mono_now();
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += (time_t)t;
            until.tv_nsec += (long)((t - (double)(time_t)t) * 1e9);
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&rl->cv, &rl->mu, &until);
        } else {
            pthread_cond_wait(&rl->cv, &rl->mu);
        }
    }
    pthread_mutex_unlock(&rl->mu);
    return NULL;
}

reloader *reloader_create(registry *reg, const attn_config *cfg, int argc, char **argv, char *err,
                          size_t errlen) {
    reloader *rl = calloc(1, sizeof *rl);
    if (!rl) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rl->reg = reg;
    rl->argc = argc;
    rl->argv = argv;
    rl->poll_s = cfg->model_poll_s;
    pthread_mutex_init(&rl->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* mono_now's clock */
    pthread_cond_init(&rl->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (sync_all(rl, cfg, true, false, err, errlen)) {
        reloader_destroy(rl);
        return NULL;
    }
    return rl;
}

int reloader_start(reloader *rl, char *err, size_t errlen) {
    pthread_mutex_lock(&rl->mu);
    int rc = pthread_create(&rl->thread, NULL, reload_main, rl);
    rl->running = rc == 0;
    pthread_mutex_unlock(&rl->mu);
    if (rc) snprintf(err, errlen, "cannot start the reload thread");
    return rc ? -1 : 0;
}

void reloader_rescan(reloader *rl) {
    pthread_mutex_lock(&rl->mu);
    rl->rescan = true;
    pthread_cond_signal(&rl->cv);
    pthread_mutex_unlock(&rl->mu);
}

bool reloader_submit(reloader *rl, reload_job *j) {
    pthread_mutex_lock(&rl->mu);
    bool ok = !rl->stop && rl->running;
    if (ok) {
        j->next = NULL;
        if (rl->tail)
            rl->tail->next = j;
        else
            rl->head = j;
        rl->tail = j;
        pthread_cond_signal(&rl->cv);
    }
    pthread_mutex_unlock(&rl->mu);
    return ok;
}

void reloader_stop(reloader *rl) {
    pthread_mutex_lock(&rl->mu);
    if (rl->stopped) {
        pthread_mutex_unlock(&rl->mu);
        return;
    }
    rl->stop = true;
    reload_job *j = rl->head;
    rl->head = rl->tail = NULL;
    pthread_cond_signal(&rl->cv);
    pthread_mutex_unlock(&rl->mu);
    while (j) {
        reload_job *next = j->next; /* done may free j */
        j->herr = http_fail(HERR_NOT_READY, j->msg, sizeof j->msg,
                            "shutting down before model '%s' could be %s", j->name,
                            j->op == RELOAD_LOAD ? "loaded" : "unloaded");
        j->done(j);
        j = next;
    }
    pthread_mutex_lock(&rl->mu);
    bool running = rl->running;
    pthread_mutex_unlock(&rl->mu);
    if (running) pthread_join(rl->thread, NULL);
    pthread_mutex_lock(&rl->mu);
    rl->stopped = true;
    pthread_mutex_unlock(&rl->mu);
}

void reloader_destroy(reloader *rl) {
    if (!rl) return;
    reloader_stop(rl);
    free(rl->k);
    pthread_cond_destroy(&rl->cv);
    pthread_mutex_destroy(&rl->mu);
    free(rl);
}
