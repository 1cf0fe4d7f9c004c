/* config.c - see config.h.
 *
 * The file is divided as: the settings table; value parsing shared by all
 * sources; the three sources (file, environment, flags); models; load. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ the table */

typedef enum { T_STR, T_LONG, T_SIZE, T_BOOL, T_LOGFMT, T_KEYFILE, T_PATH, T_CONTROL } setting_type;

typedef struct setting {
    const char *key; /* config-file key; the flag is "--" + key with '_' -> '-' */
    const char *env; /* environment variable or NULL */
    setting_type type;
    size_t offset; /* into attn_config */
    size_t size;   /* T_STR: buffer size */
    long long min, max;
    const char *help;
} setting;

#define OFF(f) offsetof(attn_config, f)
static const setting settings[] = {
    {"host", "ATTN_HOST", T_STR, OFF(host), sizeof(((attn_config *)0)->host), 0, 0,
     "listen address"},
    {"port", "ATTN_PORT", T_LONG, OFF(port), 0, 0, 65535, "listen port (0 = pick a free one)"},
    {"threads", "ATTN_THREADS", T_LONG, OFF(threads), 0, 0, 1024,
     "compute threads (0 = number of CPUs)"},
    {"io_threads", "ATTN_IO_THREADS", T_LONG, OFF(io_threads), 0, 1, 64, "HTTP I/O threads"},
    {"max_body_bytes", "ATTN_MAX_BODY_BYTES", T_SIZE, OFF(max_body_bytes), 0, 1, INT64_MAX,
     "request body limit in bytes"},
    {"max_tokens", "ATTN_MAX_TOKENS", T_LONG, OFF(max_tokens), 0, 1, 1 << 20,
     "limit on query and key length per sequence"},
    {"max_batch", "ATTN_MAX_BATCH", T_LONG, OFF(max_batch), 0, 1, 1 << 16,
     "limit on sequences per request"},
    {"max_queue", "ATTN_MAX_QUEUE", T_LONG, OFF(max_queue), 0, 1, 1 << 20,
     "requests waiting for compute before 503"},
    {"max_response_bytes", "ATTN_MAX_RESPONSE_BYTES", T_SIZE, OFF(max_response_bytes), 0, 1,
     INT64_MAX, "refuse requests whose response would be larger"},
    {"max_compute_bytes", "ATTN_MAX_COMPUTE_BYTES", T_SIZE, OFF(max_compute_bytes), 0, 1, INT64_MAX,
     "refuse requests whose working memory would be larger"},
    {"request_timeout_ms", "ATTN_REQUEST_TIMEOUT_MS", T_LONG, OFF(request_timeout_ms), 0, 1,
     86400000, "time a request may wait in the queue"},
    {"batch_max_requests", "ATTN_BATCH_MAX_REQUESTS", T_LONG, OFF(batch_max_requests), 0, 1, 1024,
     "requests for one model computed together when they wait in the queue (1 = off)"},
    {"batch_max_tokens", "ATTN_BATCH_MAX_TOKENS", T_LONG, OFF(batch_max_tokens), 0, 1, 1 << 20,
     "tokens in one such batch, all its requests together"},
    {"batch_delay_us", "ATTN_BATCH_DELAY_US", T_LONG, OFF(batch_delay_us), 0, 0, 1000000,
     "time a batch may wait for more requests (0 = take what is queued, never wait)"},
    {"body_timeout_ms", "ATTN_BODY_TIMEOUT_MS", T_LONG, OFF(body_timeout_ms), 0, 1, 86400000,
     "time a client has to send a whole request"},
    {"connection_timeout_s", "ATTN_CONNECTION_TIMEOUT_S", T_LONG, OFF(connection_timeout_s), 0, 1,
     86400, "idle connection timeout"},
    {"max_connections", "ATTN_MAX_CONNECTIONS", T_LONG, OFF(max_connections), 0, 1, 1 << 20,
     "concurrent connections"},
    {"shutdown_grace_ms", "ATTN_SHUTDOWN_GRACE_MS", T_LONG, OFF(shutdown_grace_ms), 0, 0, 86400000,
     "time in-flight requests get after SIGTERM"},
    {"api_key_file", "ATTN_API_KEY", T_KEYFILE, OFF(api_key), sizeof(((attn_config *)0)->api_key),
     0, 0, "file holding the API key (ATTN_API_KEY: the key itself)"},
    {"log_format", "ATTN_LOG_FORMAT", T_LOGFMT, OFF(log_format), 0, 0, 0, "text or json"},
    {"no_ui", "ATTN_NO_UI", T_BOOL, OFF(no_ui), 0, 0, 0, "do not serve the playground at /"},
    {"max_memory_bytes", "ATTN_MAX_MEMORY_BYTES", T_SIZE, OFF(max_memory_bytes), 0, 0, INT64_MAX,
     "memory all requests may hold together (0 = from the container's limit or physical memory)"},
    {"cors_allow_origin", "ATTN_CORS_ALLOW_ORIGIN", T_STR, OFF(cors_allow_origin),
     sizeof(((attn_config *)0)->cors_allow_origin), 0, 0,
     "origin allowed to call the API from a browser (\"*\" for any; off when empty)"},
    {"compress_min_bytes", "ATTN_COMPRESS_MIN_BYTES", T_SIZE, OFF(compress_min_bytes), 0, 0,
     INT64_MAX, "never compress answers smaller than this"},
    {"compress_always_bytes", "ATTN_COMPRESS_ALWAYS_BYTES", T_SIZE, OFF(compress_always_bytes), 0,
     0, INT64_MAX, "compress answers up to this size whenever the client asks"},
    {"compress_budget_pct", "ATTN_COMPRESS_BUDGET_PCT", T_LONG, OFF(compress_budget_pct), 0, 0,
     10000, "larger answers: compress only if it adds at most this % to the request's time"},
    {"compress_level", "ATTN_COMPRESS_LEVEL", T_LONG, OFF(compress_level), 0, 1, 9,
     "zlib level for gzip and deflate answers"},
    {"model_dir", "ATTN_MODEL_DIR", T_PATH, OFF(model_dir), sizeof(((attn_config *)0)->model_dir),
     0, 0, "model repository: each NAME.safetensors in it is the model NAME"},
    {"model_poll_s", "ATTN_MODEL_POLL_S", T_LONG, OFF(model_poll_s), 0, 0, 86400,
     "look for changed weight files every N seconds, as SIGHUP does (0 = off)"},
    {"model_control", "ATTN_MODEL_CONTROL", T_CONTROL, OFF(model_control), 0, 0, 0,
     "none, or explicit: POST /v2/repository/models/NAME/load and /unload are allowed"},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static void config_defaults(attn_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "0.0.0.0");
    c->port = 8080;
    c->threads = 0;
    c->io_threads = 2;
    c->max_body_bytes = 64u << 20;
    c->max_tokens = 8192;
    c->max_batch = 64;
    c->max_queue = 256;
    c->max_response_bytes = 256u << 20;
    c->max_compute_bytes = 2048u << 20;
    c->request_timeout_ms = 30000;
    c->batch_max_requests = 1; /* off: measured no gain in req/s and a worse p99 (OPERATIONS.md) */
    c->batch_max_tokens = 2048;
    c->batch_delay_us = 0;
    c->body_timeout_ms = 60000;
    c->connection_timeout_s = 30;
    c->max_connections = 512;
    c->shutdown_grace_ms = 25000;
    c->log_format = LOG_TEXT;
    c->compress_min_bytes = 512;
    c->compress_always_bytes = 64u << 10;
    c->compress_budget_pct = 25;
    c->compress_level = 1;
}

/* ------------------------------------------------------- value parsing */

static int read_key_file(const char *path, char *out, size_t outsz, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read API key file %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(out, 1, outsz - 1, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    out[n] = '\0';
    while (n && isspace((unsigned char)out[n - 1])) out[--n] = '\0';
    if (more) {
        snprintf(err, errlen, "API key file %s: longer than %zu bytes", path, outsz - 2);
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen, "API key file %s is empty", path);
        return -1;
    }
    return 0;
}

/* A setting of two values (an enum of 0 and 1): *out = 0 for v == a, 1 for
 * v == b. */
static int set_one_of(int *out, const char *v, const char *a, const char *b, const char *src,
                      char *err, size_t errlen) {
    if (strcmp(v, a) && strcmp(v, b)) {
        snprintf(err, errlen, "%s: expected %s or %s, got '%s'", src, a, b, v);
        return -1;
    }
    *out = strcmp(v, a) != 0;
    return 0;
}

/* Set one setting from text (flags and environment). src names the source. */
static int setting_set_text(attn_config *c, const setting *s, const char *v, const char *src,
                            bool key_is_value, char *err, size_t errlen) {
    char *base = (char *)c + s->offset;
    switch (s->type) {
    case T_PATH:
    case T_STR:
        if (strlen(v) >= s->size) {
            snprintf(err, errlen, "%s: value too long", src);
            return -1;
        }
        snprintf(base, s->size, "%s", v);
        return 0;
    case T_KEYFILE:
        if (key_is_value) {
            if (!*v || strlen(v) >= s->size) {
                snprintf(err, errlen, "%s: expected a key of 1 to %zu bytes", src, s->size - 1);
                return -1;
            }
            snprintf(base, s->size, "%s", v);
            return 0;
        }
        return read_key_file(v, base, s->size, err, errlen);
    case T_LONG:
    case T_SIZE: {
        errno = 0;
        char *end;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < s->min || x > s->max) {
            snprintf(err, errlen, "%s: expected an integer from %lld to %lld, got '%s'", src,
                     s->min, s->max, v);
            return -1;
        }
        if (s->type == T_LONG)
            *(long *)base = (long)x;
        else
            *(size_t *)base = (size_t)x;
        return 0;
    }
    case T_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"))
            *(bool *)base = true;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no"))
            *(bool *)base = false;
        else {
            snprintf(err, errlen, "%s: expected true or false, got '%s'", src, v);
            return -1;
        }
        return 0;
    case T_CONTROL: return set_one_of((int *)base, v, "none", "explicit", src, err, errlen);
    case T_LOGFMT: return set_one_of((int *)base, v, "text", "json", src, err, errlen);
    }
    return -1;
}

/* --------------------------------------------------------------- models */

static int model_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 63) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-') return 0;
    return 1;
}

/* Add a model, given by origin. A name given twice, by any two sources,
 * is an error naming both: which one the user meant cannot be guessed. */
static int config_put_model(attn_config *c, model_spec *m, const char *origin, char *err,
                            size_t errlen) {
    snprintf(m->origin, sizeof m->origin, "%s", origin);
    for (int i = 0; i < c->nmodels; i++)
        if (!strcmp(c->models[i].name, m->name)) {
            snprintf(err, errlen,
                     "model '%s' is given twice: by %s (%s) and by %s (%s); each name must be "
                     "given once",
                     m->name, c->models[i].origin, c->models[i].path, m->origin, m->path);
            return -1;
        }
    if (c->nmodels >= 256) {
        snprintf(err, errlen, "more than 256 models");
        return -1;
    }
    model_spec *p = realloc(c->models, sizeof *p * (size_t)(c->nmodels + 1));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->models = p;
    c->models[c->nmodels++] = *m;
    return 0;
}

/* One ":OPTION" after the path, the last one first: HEADS (digits),
 * prefix=P or add_zero_attn=true|false. Returns 1 when taken (and sets
 * the field), 0 when seg is not an option (it is part of the path), -1 on
 * a bad or repeated value (err set). */
static int model_arg_option(model_spec *m, const char *seg, size_t len, char *err, size_t errlen) {
    static const char pfx[] = "prefix=", za[] = "add_zero_attn=";
    size_t digits = 0;
    while (digits < len && isdigit((unsigned char)seg[digits])) digits++;
    if (len > 0 && digits == len) {
        long h = len > 6 ? 0 : strtol(seg, NULL, 10);
        if (m->num_heads) {
            snprintf(err, errlen, "model '%s': HEADS given twice", m->name);
            return -1;
        }
        if (h < 1 || h > 65536) {
            snprintf(err, errlen, "model '%s': HEADS must be from 1 to 65536, got '%.*s'", m->name,
                     (int)len, seg);
            return -1;
        }
        m->num_heads = (int)h;
        return 1;
    }
    if (len >= sizeof pfx - 1 && !strncmp(seg, pfx, sizeof pfx - 1)) {
        size_t pl = len - (sizeof pfx - 1);
        if (m->prefix[0] || pl == 0 || pl >= sizeof m->prefix) {
            snprintf(err, errlen, "model '%s': prefix= %s", m->name,
                     m->prefix[0] ? "given twice" : "must be 1 to 255 characters");
            return -1;
        }
        memcpy(m->prefix, seg + sizeof pfx - 1, pl);
        m->prefix[pl] = '\0';
        return 1;
    }
    if (len >= sizeof za - 1 && !strncmp(seg, za, sizeof za - 1)) {
        const char *v = seg + sizeof za - 1;
        size_t vl = len - (sizeof za - 1);
        int val = vl == 4 && !strncmp(v, "true", 4)    ? 1
                  : vl == 5 && !strncmp(v, "false", 5) ? 0
                                                       : -1;
        if (m->add_zero_attn != -1 || val < 0) {
            snprintf(err, errlen, "model '%s': add_zero_attn= %s, got '%.*s'", m->name,
                     m->add_zero_attn != -1 ? "given twice" : "must be true or false", (int)vl, v);
            return -1;
        }
        m->add_zero_attn = val;
        return 1;
    }
    return 0;
}

int config_parse_model_arg(const char *arg, model_spec *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->add_zero_attn = -1;
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        snprintf(err, errlen,
                 "expected NAME=PATH[:HEADS][:prefix=PREFIX][:add_zero_attn=true|false], got '%s'",
                 arg);
        return -1;
    }
    size_t nl = (size_t)(eq - arg);
    if (nl >= sizeof m->name) nl = sizeof m->name - 1;
    memcpy(m->name, arg, nl);
    m->name[nl] = '\0';
    if (!model_name_ok(m->name)) {
        snprintf(err, errlen, "model name '%s': expected 1-63 characters of A-Z a-z 0-9 . _ -",
                 m->name);
        return -1;
    }
    /* Options come after the last colons of the path, so a path may hold
     * colons itself ("/a:b/x.safetensors:12" is /a:b/x.safetensors with
     * 12 heads). */
    const char *path = eq + 1;
    size_t pl = strlen(path);
    for (;;) {
        const char *colon = NULL;
        for (size_t i = pl; i > 0; i--)
            if (path[i - 1] == ':') {
                colon = path + i - 1;
                break;
            }
        if (!colon) break;
        int rc = model_arg_option(m, colon + 1, pl - (size_t)(colon + 1 - path), err, errlen);
        if (rc < 0) return -1;
        if (rc == 0) break;
        pl = (size_t)(colon - path);
    }
    if (pl == 0 || pl >= sizeof m->path) {
        snprintf(err, errlen, "model '%s': bad path", m->name);
        return -1;
    }
    memcpy(m->path, path, pl);
    m->path[pl] = '\0';
    return 0;
}

/* ----------------------------------------------------------- the file */

static int config_file_models(attn_config *c, json_t *arr, const char *dir, char *err,
                              size_t errlen) {
    const char *f = c->config_path;
    if (!json_is_array(arr)) {
        snprintf(err, errlen, "%s: models: expected an array of objects", f);
        return -1;
    }
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        model_spec m;
        memset(&m, 0, sizeof m);
        m.add_zero_attn = -1;
        if (!json_is_object(o)) {
            snprintf(err, errlen, "%s: models[%zu]: expected an object", f, i);
            return -1;
        }
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
            if (!strcmp(k, "name") && json_is_string(v) && model_name_ok(json_string_value(v))) {
                snprintf(m.name, sizeof m.name, "%s", json_string_value(v));
            } else if (!strcmp(k, "path") && json_is_string(v) && json_string_length(v) > 0) {
                const char *p = json_string_value(v);
                int n = p[0] == '/' || !dir[0] ? snprintf(m.path, sizeof m.path, "%s", p)
                                               : snprintf(m.path, sizeof m.path, "%s/%s", dir, p);
                if (n < 0 || (size_t)n >= sizeof m.path) {
                    snprintf(err, errlen, "%s: models[%zu].path: too long", f, i);
                    return -1;
                }
            } else if (!strcmp(k, "num_heads") && json_is_integer(v) &&
                       json_integer_value(v) >= 1 && json_integer_value(v) <= 65536) {
                m.num_heads = (int)json_integer_value(v);
            } else if (!strcmp(k, "prefix") && json_is_string(v) &&
                       json_string_length(v) < sizeof m.prefix) {
                snprintf(m.prefix, sizeof m.prefix, "%s", json_string_value(v));
            } else if (!strcmp(k, "default") && json_is_boolean(v)) {
                m.is_default = json_is_true(v);
            } else if (!strcmp(k, "add_zero_attn") && json_is_boolean(v)) {
                m.add_zero_attn = json_is_true(v);
            } else {
                const char *why =
                    !strcmp(k, "name")        ? "a name of 1-63 characters of A-Z a-z 0-9 . _ -"
                    : !strcmp(k, "path")      ? "a non-empty string"
                    : !strcmp(k, "num_heads") ? "an integer from 1 to 65536"
                    : !strcmp(k, "prefix")    ? "a string"
                    : !strcmp(k, "default") || !strcmp(k, "add_zero_attn") ? "true or false"
                                                                           : NULL;
                if (why) {
                    char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                    snprintf(err, errlen, "%s: models[%zu].%s: expected %s, got %.80s", f, i, k,
                             why, shown ? shown : "?");
                    free(shown);
                } else
                    snprintf(err, errlen,
                             "%s: models[%zu]: unknown key '%s' (known: name, path, num_heads, "
                             "prefix, default, add_zero_attn)",
                             f, i, k);
                return -1;
            }
        }
        if (!m.name[0] || !m.path[0]) {
            snprintf(err, errlen, "%s: models[%zu]: 'name' and 'path' are required", f, i);
            return -1;
        }
        char origin[sizeof m.origin];
        snprintf(origin, sizeof origin, "%.60s models[%zu]", f, i);
        if (config_put_model(c, &m, origin, err, errlen)) return -1;
    }
    return 0;
}

static int config_file(attn_config *c, char *err, size_t errlen) {
    const char *f = c->config_path;
    json_error_t je;
    json_t *root = json_load_file(f, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "config file %s: %s (line %d, column %d)", f, je.text, je.line,
                 je.column);
        return -1;
    }
    int rc = -1;
    char dirbuf[PATH_MAX];
    snprintf(dirbuf, sizeof dirbuf, "%s", f);
    const char *dir = strchr(f, '/') ? dirname(dirbuf) : "";
    if (!json_is_object(root)) {
        snprintf(err, errlen, "config file %s: expected a JSON object", f);
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        char src[PATH_MAX + 64];
        snprintf(src, sizeof src, "config file %s: %s", f, k);
        if (!strcmp(k, "models")) {
            if (config_file_models(c, v, dir, err, errlen)) goto out;
            continue;
        }
        const setting *s = NULL;
        for (size_t i = 0; i < NSETTINGS; i++)
            if (!strcmp(settings[i].key, k)) s = &settings[i];
        if (!s) {
            snprintf(err, errlen, "config file %s: unknown key '%s'", f, k);
            goto out;
        }
        char text[1024];
        if (json_is_string(v) && s->type != T_LONG && s->type != T_SIZE && s->type != T_BOOL) {
            const char *sv = json_string_value(v);
            char path[PATH_MAX];
            if ((s->type == T_KEYFILE || s->type == T_PATH) && sv[0] != '/' && dir[0]) {
                snprintf(path, sizeof path, "%s/%s", dir, sv);
                sv = path;
            }
            if (setting_set_text(c, s, sv, src, false, err, errlen)) goto out;
        } else if (json_is_integer(v) && (s->type == T_LONG || s->type == T_SIZE)) {
            snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            if (setting_set_text(c, s, text, src, false, err, errlen)) goto out;
        } else if (json_is_boolean(v) && s->type == T_BOOL) {
            *(bool *)((char *)c + s->offset) = json_is_true(v);
        } else {
            const char *want = s->type == T_LONG || s->type == T_SIZE ? "an integer"
                               : s->type == T_BOOL                    ? "true or false"
                                                                      : "a string";
            char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(err, errlen, "%s: expected %s, got %.80s", src, want, shown ? shown : "?");
            free(shown);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* -------------------------------------------------- environment, flags */

static int config_env(attn_config *c, char *err, size_t errlen) {
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = getenv(settings[i].env);
        if (!v) continue;
        if (setting_set_text(c, &settings[i], v, settings[i].env, true, err, errlen)) return -1;
    }
    const char *models = getenv("ATTN_MODELS");
    if (models && *models) {
        char *copy = strdup(models), *save = NULL;
        if (!copy) return -1;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            model_spec m;
            char e2[512];
            if (config_parse_model_arg(tok, &m, e2, sizeof e2) ||
                config_put_model(c, &m, "ATTN_MODELS", e2, sizeof e2)) {
                snprintf(err, errlen, "ATTN_MODELS: %s", e2);
                free(copy);
                return -1;
            }
        }
        free(copy);
    }
    return 0;
}

static const setting *flag_setting(const char *name, size_t len) {
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *k = settings[i].key;
        if (strlen(k) != len) continue;
        size_t j = 0;
        for (; j < len; j++)
            if (name[j] != (k[j] == '_' ? '-' : k[j])) break;
        if (j == len) return &settings[i];
    }
    return NULL;
}

/* Walk argv. pass 0 only picks up --config; pass 1 applies everything else. */
static int config_flags(attn_config *c, int argc, char **argv, int pass, char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h")) a = "--help"; /* the one short flag everyone tries */
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (see --help)", a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        bool noarg = (nlen == 5 && !strncmp(name, "check", 5)) ||
                     (nlen == 7 && !strncmp(name, "version", 7)) ||
                     (nlen == 4 && !strncmp(name, "help", 4)) ||
                     (nlen == 5 && !strncmp(name, "no-ui", 5));
        bool known = noarg || (nlen == 6 && !strncmp(name, "config", 6)) ||
                     (nlen == 11 && !strncmp(name, "healthcheck", 11)) ||
                     (nlen == 5 && !strncmp(name, "model", 5)) || flag_setting(name, nlen);
        if (!known) { /* before taking a value: "--bogus" alone is unknown, not short of one */
            snprintf(err, errlen, "unknown flag '--%.*s' (see --help)",
                     (int)(nlen > 60 ? 60 : nlen), name);
            return -1;
        }
        const char *val = NULL;
        if (!noarg) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                snprintf(err, errlen, "%s: missing value", a);
                return -1;
            }
        } else if (eq) {
            snprintf(err, errlen, "--%.*s takes no value", (int)nlen, name);
            return -1;
        }
        char src[96];
        snprintf(src, sizeof src, "--%.*s", (int)(nlen > 60 ? 60 : nlen), name);
        if (nlen == 6 && !strncmp(name, "config", 6)) {
            if (pass == 0) snprintf(c->config_path, sizeof c->config_path, "%s", val);
            continue;
        }
        if (pass == 0) continue;
        if (nlen == 5 && !strncmp(name, "check", 5))
            c->check = true;
        else if (nlen == 7 && !strncmp(name, "version", 7))
            c->version = true;
        else if (nlen == 4 && !strncmp(name, "help", 4))
            c->help = true;
        else if (nlen == 5 && !strncmp(name, "no-ui", 5))
            c->no_ui = true;
        else if (nlen == 11 && !strncmp(name, "healthcheck", 11))
            snprintf(c->healthcheck_url, sizeof c->healthcheck_url, "%s", val);
        else if (nlen == 5 && !strncmp(name, "model", 5)) {
            model_spec m;
            char e2[512];
            if (config_parse_model_arg(val, &m, e2, sizeof e2) ||
                config_put_model(c, &m, "--model", e2, sizeof e2)) {
                snprintf(err, errlen, "--model: %s", e2);
                return -1;
            }
        } else {
            const setting *s = flag_setting(name, nlen);
            if (!s) {
                snprintf(err, errlen, "unknown flag '%s' (see --help)", src);
                return -1;
            }
            if (setting_set_text(c, s, val, src, false, err, errlen)) return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ load */

int config_load(attn_config *c, int argc, char **argv, char *err, size_t errlen) {
    config_defaults(c);
    const char *envcfg = getenv("ATTN_CONFIG");
    if (envcfg) snprintf(c->config_path, sizeof c->config_path, "%s", envcfg);
    if (config_flags(c, argc, argv, 0, err, errlen)) return -1;
    if (c->config_path[0] && config_file(c, err, errlen)) return -1;
    if (config_env(c, err, errlen)) return -1;
    if (config_flags(c, argc, argv, 1, err, errlen)) return -1;
    int ndefault = 0;
    for (int i = 0; i < c->nmodels; i++) ndefault += c->models[i].is_default;
    if (ndefault > 1) {
        snprintf(err, errlen, "more than one model is marked \"default\"");
        return -1;
    }
    return 0;
}

void config_free(attn_config *c) {
    free(c->models);
    c->models = NULL;
    c->nmodels = 0;
}

void config_usage(FILE *out) {
    fprintf(out,
            "usage: attention-server [--config FILE] [--model NAME=PATH[:HEADS]]... [options]\n"
            "       attention-server --check [...]    load, self-test, print a summary, exit\n"
            "       attention-server --healthcheck URL   exit 0 if GET URL answers 200\n\n"
            "options (flag > environment > config file > default):\n"
            "  %-28s %-26s %s\n  %-28s %-26s %s\n",
            "--config FILE", "ATTN_CONFIG", "JSON config file", "--model NAME=PATH[:OPT]...",
            "ATTN_MODELS (comma-sep.)",
            "add a weight set (repeatable; each name once); OPT: HEADS, prefix=P, "
            "add_zero_attn=true|false");
    for (size_t i = 0; i < NSETTINGS; i++) {
        char flag[64];
        int n = snprintf(flag, sizeof flag, "--");
        for (const char *k = settings[i].key; *k && n < 60; k++) flag[n++] = *k == '_' ? '-' : *k;
        flag[n] = '\0';
        if (settings[i].type != T_BOOL) snprintf(flag + n, sizeof flag - (size_t)n, " V");
        fprintf(out, "  %-28s %-26s %s\n", flag, settings[i].env, settings[i].help);
    }
    fprintf(out, "  %-28s %-26s %s\n  %-28s %-26s %s\n", "--version", "", "print the version",
            "--help", "", "this text");
}

bool config_model_name_valid(const char *name) {
    return model_name_ok(name);
}
