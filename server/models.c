/* models.c - see models.h.
 *
 * The file is divided as: loaded versions (file identity, load, self-test,
 * references); the registry's slots and their lock; readers; writers. */
#include "models.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attention.h"
#include "mem.h"
#include "sha256.h"

/* ------------------------------------------------------------ versions */

int model_file_stat(const char *path, model_file_id *id) {
    struct stat st;
    if (stat(path, &st)) return -1;
    memset(id, 0, sizeof *id);
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
    return 0;
}

bool model_file_same(const model_file_id *a, const model_file_id *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Forward w on a small random input on the fast path and on the naive
 * reference (on this thread); they must agree. 0, or -1 with err. */
static int self_test(const attn_weights *w, const char *name, char *err, size_t errlen) {
    int n = 7, m = 5;
    size_t qn = (size_t)n * (size_t)w->E, kn = (size_t)m * (size_t)w->kdim,
           vn = (size_t)m * (size_t)w->vdim, M = (size_t)attn_key_positions(w, m),
           wn = (size_t)w->H * (size_t)n * M;
    float *q = malloc(qn * sizeof *q), *k = malloc(kn * sizeof *k), *v = malloc(vn * sizeof *v),
          *o1 = malloc(qn * sizeof *o1), *o2 = malloc(qn * sizeof *o2),
          *w1 = malloc(wn * sizeof *w1), *w2 = malloc(wn * sizeof *w2);
    int rc = -1;
    if (!q || !k || !v || !o1 || !o2 || !w1 || !w2) {
        snprintf(err, errlen, "self-test of model '%s': out of memory", name);
        goto out;
    }
    unsigned s = 12345u;
    float *bufs[3] = {q, k, v};
    size_t lens[3] = {qn, kn, vn};
    for (int b = 0; b < 3; b++)
        for (size_t j = 0; j < lens[b]; j++) {
            s = s * 1664525u + 1013904223u;
            bufs[b][j] = (float)((double)(s >> 8) / (double)(1u << 24) * 2.0 - 1.0);
        }
    attn_input in = {
        .B = 1, .n = n, .m = m, .query = q, .key = k, .value = v, .need_weights = true};
    char e2[ATTN_ERRLEN];
    if (attn_forward(w, &in, o1, w1, NULL, e2, sizeof e2) ||
        attn_forward_naive(w, &in, o2, w2, e2, sizeof e2)) {
        snprintf(err, errlen, "self-test of model '%s' failed: %s", name, e2);
        goto out;
    }
    double maxd = 0, maxv = 1;
    for (size_t j = 0; j < qn; j++) {
        maxd = fmax(maxd, fabs((double)o1[j] - o2[j]));
        maxv = fmax(maxv, fabs((double)o2[j]));
    }
    for (size_t j = 0; j < wn; j++) maxd = fmax(maxd, fabs((double)w1[j] - w2[j]));
    if (!(maxd <= 1e-4 * maxv)) {
        snprintf(err, errlen, "self-test of model '%s': fast and reference paths differ by %g",
                 name, maxd);
        goto out;
    }
    rc = 0;
out:
    free(q), free(k), free(v), free(o1), free(o2), free(w1), free(w2);
    return rc;
}

static model_entry *entry_new(const char *name, attn_weights *w) {
    model_entry *e = calloc(1, sizeof *e);
    if (!e) {
        attn_weights_destroy(w);
        return NULL;
    }
    snprintf(e->name, sizeof e->name, "%s", name);
    e->w = w;
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(e->loaded_at, sizeof e->loaded_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    e->loaded_unix = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    atomic_init(&e->refs, 1);
    return e;
}

model_entry *model_from_weights(const char *name, attn_weights *w) {
    return entry_new(name, w);
}

model_entry *model_load(const model_spec *s, const model_file_hash *known, model_file_id *id,
                        char *err, size_t errlen) {
    attn_weights_opts o = {.num_heads = s->num_heads,
                           .add_zero_attn = s->add_zero_attn,
                           .prefix = s->prefix[0] ? s->prefix : NULL};
    model_file_id before, after;
    /* The weights are read once and the file is hashed in a second pass;
     * the file's identity before and after both tells whether they saw the
     * same file. A writer that renames a finished file over the old one
     * (as it should) never trips this; one writing in place may. */
    for (int tries = 0; tries < 3; tries++) {
        if (model_file_stat(s->path, &before)) {
            snprintf(err, errlen, "model '%s': %s: cannot open: %s", s->name, s->path,
                     strerror(errno));
            return NULL;
        }
        if (id) *id = before;
        attn_weights *w;
        char e2[ATTN_ERRLEN];
        if (attn_weights_load(s->path, &o, &w, e2, sizeof e2)) {
            if (!model_file_stat(s->path, &after) && !model_file_same(&before, &after)) continue;
            snprintf(err, errlen, "model '%s': %s", s->name, e2);
            return NULL;
        }
        char hex[65];
        uint64_t bytes = (uint64_t)before.size;
        int hashed = 0;
        if (known && model_file_same(&known->id, &before))
            memcpy(hex, known->sha256, sizeof hex); /* hashed already, and still that file */
        else
            hashed = sha256_file(s->path, hex, &bytes);
        if (hashed || model_file_stat(s->path, &after) || !model_file_same(&before, &after)) {
            attn_weights_destroy(w);
            if (hashed && errno != ENOENT) {
                snprintf(err, errlen, "model '%s': %s: cannot read it again to hash it: %s",
                         s->name, s->path, strerror(errno));
                return NULL;
            }
            continue;
        }
        if (self_test(w, s->name, err, errlen)) {
            attn_weights_destroy(w);
            return NULL;
        }
        model_entry *e = entry_new(s->name, w);
        if (!e) {
            snprintf(err, errlen, "model '%s': out of memory", s->name);
            return NULL;
        }
        memcpy(e->sha256, hex, sizeof hex);
        e->file_bytes = bytes;
        return e;
    }
    snprintf(err, errlen,
             "model '%s': %s changed while it was being read, three times in a row; write the "
             "new file under a temporary name, then rename it over this one",
             s->name, s->path);
    return NULL;
}

model_entry *model_retain(model_entry *e) {
    if (e) atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    return e;
}

void model_release(model_entry *e) {
    if (!e || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1) return;
    attn_weights_destroy(e->w);
    free(e);
}

void registry_model_json(const model_entry *e, buf *out) {
    const attn_weights *w = e->w;
    buf_puts(out, "{\"name\":");
    buf_json_string(out, e->name);
    buf_printf(out,
               ",\"embed_dim\":%d,\"num_heads\":%d,\"head_dim\":%d,\"kdim\":%d,\"vdim\":%d,"
               "\"bias\":%s,\"add_bias_kv\":%s,\"add_zero_attn\":%s,\"dtype\":",
               w->E, w->H, w->d, w->kdim, w->vdim, w->bias ? "true" : "false",
               w->add_bias_kv ? "true" : "false", w->add_zero_attn ? "true" : "false");
    buf_json_string(out, w->dtype);
    buf_puts(out, ",\"layout\":");
    buf_json_string(out, w->layout);
    buf_puts(out, ",\"source\":");
    buf_json_string(out, w->source);
    buf_printf(out, ",\"parameters\":%zu,", w->parameters);
    registry_file_json(e, out);
    buf_putc(out, '}');
}

void registry_file_json(const model_entry *e, buf *out) {
    buf_printf(out, "\"sha256\":\"%s\",\"file_bytes\":%llu,\"loaded_at\":\"%s\",\"version\":%u",
               e->sha256, (unsigned long long)e->file_bytes, e->loaded_at, e->version);
}

bool model_name_check(const char *name, const char *field, char *err, size_t errlen) {
    if (config_model_name_valid(name) && strcmp(name, ".") && strcmp(name, "..")) return true;
    snprintf(err, errlen,
             "%s: '%.80s' is not a model name (1-63 characters of A-Z a-z 0-9 . _ -, not '.' or "
             "'..'; never a path)",
             field, name);
    return false;
}

/* ------------------------------------------------------------ registry */

static const char *const state_names[MODEL_STATE_COUNT] = {"READY", "LOADING", "UNAVAILABLE"};

const char *model_state_name(model_state s) {
    return (unsigned)s < MODEL_STATE_COUNT ? state_names[s] : "UNAVAILABLE";
}

typedef struct slot {
    char name[64];
    model_entry *cur; /* the version serving (the registry's reference), or NULL */
    model_state state;
    char reason[512];      /* why it is not READY */
    unsigned last_version; /* of the last version published under this name */
    unsigned long long loads_ok, loads_failed;
} slot;

struct registry {
    pthread_mutex_t mu; /* guards everything below */
    slot *s;            /* n slots, sorted by name */
    int n, cap;
    char default_name[64]; /* "" = none configured */
};

registry *registry_create(void) {
    registry *r = calloc(1, sizeof *r);
    if (r) pthread_mutex_init(&r->mu, NULL);
    return r;
}

void registry_destroy(registry *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) model_release(r->s[i].cur);
    free(r->s);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* The slot of name, or NULL. Lock held. */
static slot *slot_find(registry *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->s[i].name, name)) return &r->s[i];
    return NULL;
}

/* The slot of name, made (UNAVAILABLE, nothing serving) if new; NULL when
 * out of memory. Lock held. */
static slot *slot_get(registry *r, const char *name) {
    slot *s = slot_find(r, name);
    if (s) return s;
    slot *p = mem_grow(r->s, &r->cap, r->n, sizeof *p);
    if (!p) return NULL;
    r->s = p;
    int at = 0;
    while (at < r->n && strcmp(r->s[at].name, name) < 0) at++;
    memmove(&r->s[at + 1], &r->s[at], (size_t)(r->n - at) * sizeof *r->s);
    r->n++;
    s = &r->s[at];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->state = MODEL_UNAVAILABLE;
    return s;
}

/* The slot a request naming name (NULL: none) gets, or NULL. Lock held. */
static slot *slot_serving(registry *r, const char *name) {
    if (name) {
        slot *s = slot_find(r, name);
        return s && s->cur ? s : NULL;
    }
    if (r->default_name[0]) return slot_serving(r, r->default_name);
    slot *only = NULL;
    for (int i = 0; i < r->n; i++)
        if (r->s[i].cur) {
            if (only) return NULL;
            only = &r->s[i];
        }
    return only;
}

/* ------------------------------------------------------------- readers */

model_entry *registry_acquire(registry *r, const char *name) {
    pthread_mutex_lock(&r->mu);
    slot *s = slot_serving(r, name);
    model_entry *e = s ? model_retain(s->cur) : NULL;
    pthread_mutex_unlock(&r->mu);
    return e;
}

void registry_missing_message(registry *r, const char *name, char *out, size_t n) {
    buf names;
    buf_init(&names, 4096);
    pthread_mutex_lock(&r->mu);
    int serving = 0;
    for (int i = 0; i < r->n; i++)
        if (r->s[i].cur) buf_printf(&names, serving++ ? ", '%s'" : "'%s'", r->s[i].name);
    const char *list = names.data && !names.failed ? names.data : "none";
    const char *who = name ? name : r->default_name[0] ? r->default_name : NULL;
    const slot *s = who ? slot_find(r, who) : NULL;
    char why[600] = "";
    if (s)
        snprintf(why, sizeof why, " (%s%s%s)", state_names[s->state], s->reason[0] ? ": " : "",
                 s->reason);
    if (name)
        snprintf(out, n, "model '%.64s' is not loaded%s; loaded: %s", name, why, list);
    else if (who)
        snprintf(out, n, "model: the default model '%s' is not loaded%s; name one of: %s", who, why,
                 list);
    else if (!serving)
        snprintf(out, n, "model: no model is loaded");
    else
        snprintf(out, n, "model: required when several weight sets are loaded (%s)", list);
    pthread_mutex_unlock(&r->mu);
    buf_free(&names);
}

bool registry_knows(registry *r, const char *name) {
    pthread_mutex_lock(&r->mu);
    bool known = slot_find(r, name) != NULL;
    pthread_mutex_unlock(&r->mu);
    return known;
}

int registry_serving(registry *r) {
    pthread_mutex_lock(&r->mu);
    int n = 0;
    for (int i = 0; i < r->n; i++) n += r->s[i].cur != NULL;
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t registry_weights_bytes(registry *r) {
    pthread_mutex_lock(&r->mu);
    size_t bytes = 0;
    for (int i = 0; i < r->n; i++)
        if (r->s[i].cur) bytes += r->s[i].cur->w->bytes;
    pthread_mutex_unlock(&r->mu);
    return bytes;
}

void registry_models_json(registry *r, buf *out) {
    buf_puts(out, "{\"models\":[");
    pthread_mutex_lock(&r->mu);
    bool first = true;
    for (int i = 0; i < r->n; i++) {
        if (!r->s[i].cur) continue;
        if (!first) buf_putc(out, ',');
        first = false;
        registry_model_json(r->s[i].cur, out);
    }
    pthread_mutex_unlock(&r->mu);
    buf_puts(out, "]}");
}

model_status *registry_snapshot(registry *r, const char *name, int *n) {
    *n = 0;
    pthread_mutex_lock(&r->mu);
    model_status *out = r->n ? malloc((size_t)r->n * sizeof *out) : NULL;
    for (int i = 0; out && i < r->n; i++) {
        const slot *s = &r->s[i];
        if (name && strcmp(s->name, name)) continue;
        model_status *m = &out[(*n)++];
        memcpy(m->name, s->name, sizeof m->name);
        m->state = s->state;
        memcpy(m->reason, s->reason, sizeof m->reason);
        m->e = model_retain(s->cur);
    }
    pthread_mutex_unlock(&r->mu);
    return out;
}

void registry_snapshot_free(model_status *s, int n) {
    for (int i = 0; i < n; i++) model_release(s[i].e);
    free(s);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void prom_label(buf *out, const char *s) {
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            buf_putc(out, '\\');
        else if (*s == '\n') {
            buf_puts(out, "\\n");
            continue;
        }
        buf_putc(out, *s);
    }
}

void registry_metrics(registry *r, buf *out) {
    pthread_mutex_lock(&r->mu);
    buf_puts(out, "# HELP attention_server_model_info The weight file each model serves: its "
                  "SHA-256 and version (1 at the first load, +1 at each reload).\n"
                  "# TYPE attention_server_model_info gauge\n");
    for (int i = 0; i < r->n; i++)
        if (r->s[i].cur)
            buf_printf(out,
                       "attention_server_model_info{model=\"%s\",sha256=\"%s\",version=\"%u\"} 1\n",
                       r->s[i].name, r->s[i].cur->sha256, r->s[i].cur->version);
    buf_puts(out, "# HELP attention_server_model_loaded_timestamp_seconds When each model's "
                  "weights were loaded.\n# TYPE attention_server_model_loaded_timestamp_seconds "
                  "gauge\n");
    for (int i = 0; i < r->n; i++)
        if (r->s[i].cur)
            buf_printf(out, "attention_server_model_loaded_timestamp_seconds{model=\"%s\"} %.3f\n",
                       r->s[i].name, r->s[i].cur->loaded_unix);
    buf_puts(out, "# HELP attention_server_model_state Each model's state in the repository "
                  "(1 for the state it is in).\n# TYPE attention_server_model_state gauge\n");
    for (int i = 0; i < r->n; i++)
        for (int st = 0; st < MODEL_STATE_COUNT; st++)
            buf_printf(out, "attention_server_model_state{model=\"%s\",state=\"%s\"} %d\n",
                       r->s[i].name, state_names[st], r->s[i].state == (model_state)st);
    buf_puts(out, "# HELP attention_server_model_state_reason_info Why a model is not READY.\n"
                  "# TYPE attention_server_model_state_reason_info gauge\n");
    for (int i = 0; i < r->n; i++) {
        if (!r->s[i].reason[0]) continue;
        buf_printf(out, "attention_server_model_state_reason_info{model=\"%s\",reason=\"",
                   r->s[i].name);
        prom_label(out, r->s[i].reason);
        buf_puts(out, "\"} 1\n");
    }
    buf_puts(out, "# HELP attention_server_model_loads_total Loads of each model's weight file "
                  "(at start, SIGHUP, poll or the repository API), by result.\n"
                  "# TYPE attention_server_model_loads_total counter\n");
    for (int i = 0; i < r->n; i++)
        buf_printf(out,
                   "attention_server_model_loads_total{model=\"%s\",result=\"ok\"} %llu\n"
                   "attention_server_model_loads_total{model=\"%s\",result=\"failed\"} %llu\n",
                   r->s[i].name, r->s[i].loads_ok, r->s[i].name, r->s[i].loads_failed);
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------- writers */

unsigned registry_publish(registry *r, model_entry *e) {
    pthread_mutex_lock(&r->mu);
    slot *s = slot_get(r, e->name);
    if (!s) { /* out of memory for a new slot: it cannot serve */
        pthread_mutex_unlock(&r->mu);
        model_release(e);
        return 0;
    }
    model_entry *old = s->cur;
    e->version = ++s->last_version; /* e is not shared yet */
    s->cur = e;
    s->state = MODEL_READY;
    s->reason[0] = '\0';
    s->loads_ok++;
    unsigned v = e->version;
    pthread_mutex_unlock(&r->mu);
    model_release(old); /* freed here, or by the last request using it */
    return v;
}

void registry_loading(registry *r, const char *name) {
    pthread_mutex_lock(&r->mu);
    slot *s = slot_get(r, name);
    if (s) {
        s->state = MODEL_LOADING;
        s->reason[0] = '\0';
    }
    pthread_mutex_unlock(&r->mu);
}

void registry_failed(registry *r, const char *name, const char *why) {
    pthread_mutex_lock(&r->mu);
    slot *s = slot_get(r, name);
    if (s) {
        s->state = MODEL_UNAVAILABLE;
        s->loads_failed++;
        if (s->cur)
            snprintf(s->reason, sizeof s->reason, "%.400s; version %u (sha256 %.12s...) serves on",
                     why, s->cur->version, s->cur->sha256);
        else
            snprintf(s->reason, sizeof s->reason, "%s", why);
    }
    pthread_mutex_unlock(&r->mu);
}

void registry_unload(registry *r, const char *name, const char *why, bool forget) {
    pthread_mutex_lock(&r->mu);
    slot *s = slot_find(r, name);
    model_entry *old = NULL;
    if (s) {
        old = s->cur;
        s->cur = NULL;
        s->state = MODEL_UNAVAILABLE;
        snprintf(s->reason, sizeof s->reason, "%s", why);
        if (forget) {
            int at = (int)(s - r->s);
            memmove(s, s + 1, (size_t)(r->n - at - 1) * sizeof *s);
            r->n--;
        }
    }
    pthread_mutex_unlock(&r->mu);
    model_release(old);
}

void registry_ready(registry *r, const char *name) {
    pthread_mutex_lock(&r->mu);
    slot *s = slot_find(r, name);
    if (s && s->cur) {
        s->state = MODEL_READY;
        s->reason[0] = '\0';
    }
    pthread_mutex_unlock(&r->mu);
}

void registry_set_default(registry *r, const char *name) {
    pthread_mutex_lock(&r->mu);
    snprintf(r->default_name, sizeof r->default_name, "%s", name ? name : "");
    pthread_mutex_unlock(&r->mu);
}
