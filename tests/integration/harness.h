/* harness.h - start the real daemon and talk to it over HTTP with libcurl.
 *
 * The daemon binary comes from $ATTN_SERVER_BIN (make test sets it; default
 * bin/attention-server). It is started on 127.0.0.1 with --port 0, its
 * stderr goes to a log file, and the chosen port is read from its
 * "listening on HOST:PORT" line.
 *
 *     daemon_proc d;
 *     const char *args[] = {"--model", "demo=config/weights/demo.safetensors", NULL};
 *     if (daemon_start(&d, args)) return 1;
 *     http_resp r;
 *     http_do(&d, "GET", "/healthz", NULL, NULL, 0, &r);
 *     CHECK_INT_EQ(r.status, 200);
 *     http_resp_free(&r);
 *     CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
 */
#ifndef ATTN_HARNESS_H
#define ATTN_HARNESS_H

#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

typedef struct daemon_proc {
    pid_t pid;
    int port;
    char log[256]; /* path of the daemon's stderr */
} daemon_proc;

static inline double h_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The daemon's log so far (malloc'd, NUL-terminated). */
static inline char *daemon_log(const daemon_proc *d) {
    FILE *f = fopen(d->log, "rb");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    size_t got = fread(p, 1, (size_t)n, f);
    p[got] = '\0';
    fclose(f);
    return p;
}

/* At exit: the daemons' logs of this test program are removed when every
 * check passed, and kept (their pattern printed) when one failed. */
static void h_remove_logs(void) {
    char pat[64];
    snprintf(pat, sizeof pat, "/tmp/attn-test-%d-*.log", (int)getpid());
    if (check_failed) {
        fprintf(stderr, "daemon logs kept: %s\n", pat);
        return;
    }
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0) return;
    for (size_t i = 0; i < g.gl_pathc; i++) unlink(g.gl_pathv[i]);
    globfree(&g);
}

/* Start with args (NULL-terminated) plus --host 127.0.0.1 --port 0.
 * Returns 0 when it listens, -1 (log printed) otherwise. */
static inline int daemon_start(daemon_proc *d, const char *const *args) {
    const char *bin = getenv("ATTN_SERVER_BIN");
    if (!bin) bin = "bin/attention-server";
    static int cleanup_registered;
    if (!cleanup_registered) {
        cleanup_registered = 1;
        atexit(h_remove_logs);
    }
    memset(d, 0, sizeof *d);
    snprintf(d->log, sizeof d->log, "/tmp/attn-test-%d-%ld.log", (int)getpid(),
             (long)(h_now() * 1e6) % 1000000000L);
    const char *argv[256];
    int k = 0;
    /* ATTN_SERVER_WRAP: a command to run the daemon under, split on spaces
     * (e.g. "valgrind --leak-check=full --error-exitcode=99"). */
    static char wrap[1024];
    const char *w = getenv("ATTN_SERVER_WRAP");
    if (w && *w) {
        snprintf(wrap, sizeof wrap, "%s", w);
        for (char *save = NULL, *t = strtok_r(wrap, " ", &save); t && k < 32;
             t = strtok_r(NULL, " ", &save))
            argv[k++] = t;
    }
    const char *exe = k ? argv[0] : bin;
    argv[k++] = bin;
    for (int i = 0; args && args[i] && k < 250; i++) argv[k++] = args[i];
    argv[k++] = "--host";
    argv[k++] = "127.0.0.1";
    argv[k++] = "--port";
    argv[k++] = "0";
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        FILE *f = freopen(d->log, "w", stderr);
        (void)f;
        execvp(exe, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    d->pid = pid;
    double until = h_now() + 120; /* sanitizer and valgrind runs start slowly */
    while (h_now() < until) {
        char *log = daemon_log(d);
        char *p = strstr(log, "listening on ");
        if (p) {
            char *colon = strchr(p + 13, ' ');
            while (colon && colon > p && *colon != ':') colon--;
            d->port = colon ? atoi(colon + 1) : 0;
            free(log);
            return d->port > 0 ? 0 : -1;
        }
        free(log);
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            char *l = daemon_log(d);
            fprintf(stderr, "daemon exited before listening:\n%s\n", l);
            free(l);
            d->pid = 0;
            return -1;
        }
        usleep(20000);
    }
    fprintf(stderr, "daemon did not listen within 120 s\n");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    d->pid = 0;
    return -1;
}

/* Send sig and wait up to timeout_s; returns the exit status, 128+signal if
 * killed by one, or -1 on timeout (then it is killed). */
static inline int daemon_stop(daemon_proc *d, int sig, double timeout_s) {
    if (!d->pid) return -1;
    kill(d->pid, sig);
    double until = h_now() + timeout_s;
    int st = 0;
    while (h_now() < until) {
        pid_t w = waitpid(d->pid, &st, WNOHANG);
        if (w == d->pid) {
            d->pid = 0;
            /* the server's exact accounting: at exit nothing is held */
            char *log = daemon_log(d);
            CHECK_MSG(!strstr(log, "still held after every request ended"),
                      "the memory budget's accounting is off at exit: %.200s",
                      strstr(log, "memory budget:") ? strstr(log, "memory budget:") : "");
            free(log);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

typedef struct http_resp {
    long status;     /* 0 when the transfer failed */
    char *body;      /* NUL-terminated */
    size_t len, cap; /* cap: bytes allocated for body */
    char headers[16384];
    size_t hlen;
    CURLcode curl_rc;
    double total_s;
} http_resp;

static inline size_t h_write(char *p, size_t sz, size_t n, void *ud) {
    http_resp *r = ud;
    size_t k = sz * n;
    if (r->len + k + 1 > r->cap) { /* doubling: a 24 MB answer in 16 KB pieces stays linear */
        size_t cap = r->cap < 65536 ? 65536 : r->cap;
        while (cap < r->len + k + 1) cap *= 2;
        char *nb = realloc(r->body, cap);
        if (!nb) return 0;
        r->body = nb;
        r->cap = cap;
    }
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

static inline size_t h_header(char *p, size_t sz, size_t n, void *ud) {
    http_resp *r = ud;
    size_t k = sz * n;
    if (r->hlen + k < sizeof r->headers) {
        memcpy(r->headers + r->hlen, p, k);
        r->hlen += k;
        r->headers[r->hlen] = '\0';
    }
    return k;
}

/* A configured easy handle for one request (for curl_multi users too). */
static inline CURL *http_easy(const daemon_proc *d, const char *method, const char *path,
                              struct curl_slist *hdrs, const void *body, size_t len, http_resp *r) {
    memset(r, 0, sizeof *r);
    r->body = calloc(1, 1);
    r->cap = 1;
    CURL *c = curl_easy_init();
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", d->port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (hdrs) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, h_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    return c;
}

static inline void http_finish(CURL *c, http_resp *r, CURLcode rc) {
    r->curl_rc = rc;
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &r->total_s);
    curl_easy_cleanup(c);
}

/* headers: NULL-terminated "Name: value" strings, or NULL. Returns status. */
static inline long http_do(const daemon_proc *d, const char *method, const char *path,
                           const char *const *headers, const void *body, size_t len, http_resp *r) {
    struct curl_slist *h = NULL;
    for (int i = 0; headers && headers[i]; i++) h = curl_slist_append(h, headers[i]);
    CURL *c = http_easy(d, method, path, h, body, len, r);
    http_finish(c, r, curl_easy_perform(c));
    curl_slist_free_all(h);
    return r->status;
}

static inline long http_post_json(const daemon_proc *d, const char *path, const char *json,
                                  http_resp *r) {
    const char *h[] = {"Content-Type: application/json", NULL};
    return http_do(d, "POST", path, h, json, strlen(json), r);
}

/* Value of a response header (case-insensitive name), copied into out. */
static inline const char *resp_header(const http_resp *r, const char *name, char *out, size_t n) {
    size_t nl = strlen(name);
    for (const char *p = r->headers; *p;) {
        const char *eol = strstr(p, "\r\n");
        if (!eol) break;
        if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ') v++;
            size_t vl = (size_t)(eol - v);
            if (vl >= n) vl = n - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return out;
        }
        p = eol + 2;
    }
    return NULL;
}

static inline void http_resp_free(http_resp *r) {
    free(r->body);
    r->body = NULL;
}

/* Value of a metric line "name value" (no labels) from /metrics, or -1;
 * *secs (if given) gets how long the scrape took. */
static inline double daemon_metric(const daemon_proc *d, const char *name, double *secs) {
    http_resp r;
    http_do(d, "GET", "/metrics", NULL, NULL, 0, &r);
    if (secs) *secs = r.total_s;
    double v = -1;
    size_t nl = strlen(name);
    for (const char *p = r.body; r.status == 200 && p && *p;) {
        if (!strncmp(p, name, nl) && p[nl] == ' ') {
            v = strtod(p + nl + 1, NULL);
            break;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    http_resp_free(&r);
    return v;
}

/* An error answer: the status, its JSON error_type, and a message that
 * mentions needle (when given). */
static inline void check_error(const http_resp *r, long status, const char *type,
                               const char *needle) {
    json_t *root = json_loads(r->body, 0, NULL);
    const char *t = json_string_value(json_object_get(root, "error_type"));
    const char *m = json_string_value(json_object_get(root, "error"));
    CHECK_MSG(r->status == status && t && !strcmp(t, type) && m && (!needle || strstr(m, needle)),
              "want %ld %s mentioning '%s'; got %ld %.400s", status, type, needle ? needle : "",
              r->status, r->body);
    json_decref(root);
}

/* Write an nn.MultiheadAttention state dict (E, H, packed in_proj, biases)
 * as safetensors: weights uniform in +-1/sqrt(E), biases in +-0.02, from an
 * LCG seeded with seed (the same seed, the same file). Written to path
 * directly (rename it into place to swap it atomically). 0, or -1. */
static inline int write_mha_weights(const char *path, int E, int H, uint32_t seed) {
    const char *names[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    size_t count[4] = {(size_t)3 * E * E, (size_t)3 * E, (size_t)E * E, (size_t)E};
    float scale[4] = {1.0f / sqrtf((float)E), 0.02f, 1.0f / sqrtf((float)E), 0.02f};
    char hdr[1024];
    size_t off = 0;
    int k = snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"num_heads\":\"%d\"}", H);
    for (int i = 0; i < 4; i++) {
        size_t bytes = count[i] * 4;
        if (i % 2 == 0)
            k += snprintf(
                hdr + k, sizeof hdr - (size_t)k,
                ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%d],\"data_offsets\":[%zu,%zu]}",
                names[i], count[i] / (size_t)E, E, off, off + bytes);
        else
            k += snprintf(hdr + k, sizeof hdr - (size_t)k,
                          ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}",
                          names[i], count[i], off, off + bytes);
        off += bytes;
    }
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "}");
    while (k % 8) hdr[k++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t n = (uint64_t)k; /* little-endian host (x86-64, aarch64) */
    fwrite(&n, 8, 1, f);
    fwrite(hdr, 1, (size_t)k, f);
    uint32_t s = seed;
    float chunk[1024];
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < count[i];) {
            size_t c = 0;
            for (; c < 1024 && j < count[i]; c++, j++) {
                s = s * 1664525u + 1013904223u;
                chunk[c] = scale[i] * (2.0f * (float)(s >> 8) / 16777216.0f - 1.0f);
            }
            fwrite(chunk, 4, c, f);
        }
    return fclose(f);
}

#endif
