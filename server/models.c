/* models.c - see models.h. */
#include "models.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sha256.h"

int registry_load(registry *r, const attn_config *c, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->default_idx = -1;
    if (c->nmodels == 0) {
        snprintf(err, errlen,
                 "no weight set configured: give --model NAME=PATH[:HEADS], ATTN_MODELS or a "
                 "config file with \"models\"");
        return -1;
    }
    r->m = calloc((size_t)c->nmodels, sizeof *r->m);
    if (!r->m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < c->nmodels; i++) {
        const model_spec *s = &c->models[i];
        attn_weights_opts o = {.num_heads = s->num_heads,
                               .add_zero_attn = s->add_zero_attn,
                               .prefix = s->prefix[0] ? s->prefix : NULL};
        char e2[ATTN_ERRLEN];
        attn_status st = attn_weights_load(s->path, &o, &r->m[i].w, e2, sizeof e2);
        if (st) {
            snprintf(err, errlen, "model '%s': %s", s->name, e2);
            registry_free(r);
            return -1;
        }
        model_entry *e = &r->m[i];
        snprintf(e->name, sizeof e->name, "%s", s->name);
        r->n++;
        /* which file is serving: its digest, size and the time it was read */
        if (sha256_file(s->path, e->sha256, &e->file_bytes)) {
            snprintf(err, errlen, "model '%s': %s: cannot read it again to hash it: %s", s->name,
                     s->path, strerror(errno));
            registry_free(r);
            return -1;
        }
        struct timespec now;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(e->loaded_at, sizeof e->loaded_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        e->loaded_unix = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
        e->version = 1;
        if (s->is_default) r->default_idx = i;
    }
    if (r->default_idx < 0 && r->n == 1) r->default_idx = 0;
    return 0;
}

void registry_free(registry *r) {
    for (int i = 0; i < r->n; i++) attn_weights_destroy(r->m[i].w);
    free(r->m);
    memset(r, 0, sizeof *r);
    r->default_idx = -1;
}

const model_entry *registry_find(const registry *r, const char *name) {
    if (!name) return r->default_idx >= 0 ? &r->m[r->default_idx] : NULL;
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->m[i].name, name)) return &r->m[i];
    return NULL;
}

void registry_missing_message(const registry *r, const char *name, char *out, size_t n) {
    buf names;
    buf_init(&names, 4096);
    for (int i = 0; i < r->n; i++) buf_printf(&names, i ? ", '%s'" : "'%s'", r->m[i].name);
    const char *list = names.data && !names.failed ? names.data : "";
    if (name)
        snprintf(out, n, "model '%.64s' is not loaded; loaded: %s", name, list);
    else
        snprintf(out, n, "model: required when several weight sets are loaded (%s)", list);
    buf_free(&names);
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

void registry_metrics(const registry *r, buf *out) {
    buf_puts(out, "# HELP attention_server_model_info The weight file each model serves: its "
                  "SHA-256 and version (1 at start).\n# TYPE attention_server_model_info gauge\n");
    for (int i = 0; i < r->n; i++)
        buf_printf(out,
                   "attention_server_model_info{model=\"%s\",sha256=\"%s\",version=\"%u\"} 1\n",
                   r->m[i].name, r->m[i].sha256, r->m[i].version);
    buf_puts(out, "# HELP attention_server_model_loaded_timestamp_seconds When each model's "
                  "weights were loaded.\n# TYPE attention_server_model_loaded_timestamp_seconds "
                  "gauge\n");
    for (int i = 0; i < r->n; i++)
        buf_printf(out, "attention_server_model_loaded_timestamp_seconds{model=\"%s\"} %.3f\n",
                   r->m[i].name, r->m[i].loaded_unix);
}
