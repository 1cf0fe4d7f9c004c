/* test_lifecycle.c - overload, queue timeouts, drain on SIGTERM, and
 * answers under concurrency.
 *
 * A weight set with E=256, 8 heads is written at test time (safetensors,
 * in /tmp), and the long request gets as many tokens (up to 4096) as keep
 * one compute worker busy for about 0.4 s with this build on this machine.
 *
 * 1. Overload (--threads 1 --max-queue 2): 16 concurrent long requests get
 *    200 or 503 overloaded with Retry-After, at least one 503, and the 200s
 *    carry the exact answer; /healthz, /readyz and /metrics answer within
 *    200 ms (p95; median under 50 ms, none over 1 s) while the worker is
 *    busy and requests wait (proved by reading queue depth >= 1 before and
 *    after each round of probes); afterwards a request succeeds within 1 s.
 * 2. Queue timeout (--request-timeout-ms a quarter of the long request's
 *    compute, at most 100): a request queued behind a running long one
 *    gets 503 overloaded.
 * 3. Drain: SIGTERM with one request computing and more queued: every one
 *    completes with 200 and the exact answer; the daemon keeps listening,
 *    /readyz turns 503 not_ready at once (while those still run), /healthz
 *    stays 200, a new /attend gets 503 not_ready with Connection: close;
 *    the process exits 0 within the grace period.
 * 4. 32 different requests sent concurrently give bodies bit-identical to
 *    the same requests sent one at a time.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "attention.h"
#include "check.h"
#include "harness.h"
#include "rawsock.h"
#include "weights.h"

/* ------------------------------------------------------------ helpers */

static uint32_t rng_state = 12345u;
static float rnd(float a) { /* uniform in [-a, a] */
    rng_state = rng_state * 1664525u + 1013904223u;
    return a * (2.0f * (float)(rng_state >> 8) / 16777216.0f - 1.0f);
}

static char *b64(const void *data, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* A self-attention request of n tokens of E as base64, no weights returned. */
static char *long_request(int n, int E) {
    size_t cnt = (size_t)n * (size_t)E;
    float *x = malloc(cnt * sizeof *x);
    for (size_t i = 0; i < cnt; i++) x[i] = rnd(1.0f);
    char *e = b64(x, cnt * sizeof *x);
    free(x);
    size_t cap = strlen(e) + 256;
    char *body = malloc(cap);
    snprintf(body, cap,
             "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[%d,%d],\"base64\":\"%s\"},"
             "\"need_weights\":false,\"encoding_format\":\"base64\"}",
             n, E, e);
    free(e);
    return body;
}


static double metric(const daemon_proc *d, const char *name) { return daemon_metric(d, name, NULL); }

static void nap_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static bool same_body(const http_resp *a, const http_resp *b) {
    return a->status == 200 && b->status == 200 && a->len == b->len && !memcmp(a->body, b->body, a->len);
}

/* error_type of a JSON error body, or "" */
static const char *error_type(const http_resp *r, char *out, size_t n) {
    out[0] = '\0';
    json_t *j = json_loadb(r->body, r->len, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "error_type"));
    if (t) snprintf(out, n, "%s", t);
    json_decref(j);
    return out;
}

/* ------------------------------------------ concurrent requests (multi) */

typedef struct batch {
    const daemon_proc *d;
    int n;
    const char **bodies; /* POST /attend bodies */
    http_resp *resp;     /* n results */
    double *done_at;     /* completion times (h_now) */
    atomic_int done;     /* finished so far */
    double t_start, t_end;
} batch;

static void *batch_run(void *arg) {
    batch *b = arg;
    CURLM *m = curl_multi_init();
    CURL **c = calloc((size_t)b->n, sizeof *c);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    b->t_start = h_now();
    for (int i = 0; i < b->n; i++) {
        c[i] = http_easy(b->d, "POST", "/attend", h, b->bodies[i], strlen(b->bodies[i]), &b->resp[i]);
        curl_easy_setopt(c[i], CURLOPT_PRIVATE, (void *)(intptr_t)i);
        curl_multi_add_handle(m, c[i]);
    }
    int running = b->n;
    while (running) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE) {
                char *pv;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &pv);
                int i = (int)(intptr_t)pv;
                curl_multi_remove_handle(m, msg->easy_handle);
                http_finish(msg->easy_handle, &b->resp[i], msg->data.result);
                b->done_at[i] = h_now();
                atomic_fetch_add(&b->done, 1);
            }
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    b->t_end = h_now();
    curl_slist_free_all(h);
    curl_multi_cleanup(m);
    free(c);
    return NULL;
}

static void batch_init(batch *b, const daemon_proc *d, const char **bodies, int n) {
    memset(b, 0, sizeof *b);
    b->d = d;
    b->n = n;
    b->bodies = bodies;
    b->resp = calloc((size_t)n, sizeof *b->resp);
    b->done_at = calloc((size_t)n, sizeof *b->done_at);
}

static void batch_free(batch *b) {
    for (int i = 0; i < b->n; i++) http_resp_free(&b->resp[i]);
    free(b->resp);
    free(b->done_at);
}

/* ---------------------------------------------------------- calibrate */

static const char *weights_path;
static char *long_req, *small_req;
static double long_compute_s = 0.4; /* the long request's compute on one worker, estimated */
static http_resp long_ref; /* the long request's answer, from the first daemon that computed it */

/* The compute milliseconds of an answer's Server-Timing header, or -1. */
static double compute_ms(const http_resp *r) {
    char st[256];
    if (!resp_header(r, "Server-Timing", st, sizeof st)) return -1;
    const char *c = strstr(st, "compute;dur=");
    return c ? atof(c + strlen("compute;dur=")) : -1;
}

/* Tokens for a request that computes for about 0.4 s on one worker:
 * time a 1024-token request (best of four) and scale by n^2, the cost of
 * the scores. Within [512, 4096], a multiple of 64. The time is the
 * server's compute time (Server-Timing), not the client's: under a
 * sanitizer the JSON parse is instrumented and OpenBLAS is not, so the
 * wall time says little about how long the worker is busy. Where the
 * worker is fast, even 4096 tokens compute for less than 0.4 s: sets
 * long_compute_s to how long the chosen tokens take. */
static int calibrate(void) {
    daemon_proc d;
    char model[300];
    snprintf(model, sizeof model, "big=%s", weights_path);
    const char *args[] = {"--model", model, "--threads", "1", NULL};
    if (daemon_start(&d, args)) return 2048;
    char *req = long_request(1024, 256);
    double best = 1e9;
    /* the best of four: a new process's first large requests also pay for
     * first-touching their memory (slower still under a sanitizer), which
     * the requests of the tests that follow do not */
    for (int i = 0; i < 4; i++) {
        http_resp r;
        http_post_json(&d, "/attend", req, &r);
        double ms = compute_ms(&r);
        if (r.status == 200 && ms > 0 && ms / 1e3 < best) best = ms / 1e3;
        http_resp_free(&r);
    }
    free(req);
    daemon_stop(&d, SIGTERM, 60);
    double n = best < 1e9 ? 1024 * sqrt(0.4 / best) : 2048;
    if (n > 4096) n = 4096;
    if (n < 512) n = 512;
    int tokens = (int)n / 64 * 64;
    if (best < 1e9) long_compute_s = best * ((double)tokens / 1024) * ((double)tokens / 1024);
    return tokens;
}

/* ------------------------------------------------------------ overload */


static void test_overload(void) {
    daemon_proc d;
    char model[300];
    snprintf(model, sizeof model, "big=%s", weights_path);
    const char *args[] = {"--model", model, "--threads", "1", "--max-queue", "2", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "overload daemon did not start");
        return;
    }
    /* the answer alone, and how long it takes */
    http_resp ref;
    http_post_json(&d, "/attend", long_req, &ref);
    CHECK_INT_EQ(ref.status, 200);
    double t_alone = ref.total_s;
    if (ref.status == 200 && !long_ref.body) {
        long_ref = ref;
        long_ref.body = malloc(ref.len + 1);
        memcpy(long_ref.body, ref.body, ref.len + 1);
    }

    enum { N = 16 };
    const char *bodies[N];
    for (int i = 0; i < N; i++) bodies[i] = long_req;
    batch b;
    batch_init(&b, &d, bodies, N);
    pthread_t th;
    pthread_create(&th, NULL, batch_run, &b);

    /* Liveness while the worker is busy: observe queue depth >= 1 (the one
     * worker is computing and a request waits), probe the three routes,
     * and observe queue depth >= 1 again: the probes ran inside the busy
     * period. Repeat while the load lasts, keeping every proven latency. */
    enum { MAXP = 4096 };
    int proven = 0;
    double *lat[3], burst_worst = 0;
    for (int k = 0; k < 3; k++) lat[k] = malloc(MAXP * sizeof(double));
    const char *routes[3] = {"/healthz", "/readyz", "/metrics"};
    while (atomic_load(&b.done) < N) {
        double scrape;
        double depth = daemon_metric(&d, "attention_server_queue_depth", &scrape);
        if (scrape > burst_worst) burst_worst = scrape;
        if (depth < 1) {
            nap_ms(10);
            continue;
        }
        double t[3];
        long st[3];
        for (int k = 0; k < 3; k++) {
            http_resp r;
            http_do(&d, "GET", routes[k], NULL, NULL, 0, &r);
            st[k] = r.status;
            t[k] = r.total_s;
            http_resp_free(&r);
        }
        double depth2 = metric(&d, "attention_server_queue_depth");
        if (depth2 < 1 || proven == MAXP) continue; /* not proven: the queue drained meanwhile */
        CHECK_MSG(st[0] == 200 && st[1] == 200 && st[2] == 200, "busy: /healthz %ld /readyz %ld /metrics %ld",
                  st[0], st[1], st[2]);
        for (int k = 0; k < 3; k++) lat[k][proven] = t[k];
        proven++;
        nap_ms(20);
    }
    pthread_join(th, NULL);
    printf("overload: one long request alone %.3f s; 16 at once took %.2f s; liveness proven in %d busy "
           "cycles (any scrape during the uploads: worst %.1f ms)\n",
           t_alone, b.t_end - b.t_start, proven, burst_worst * 1e3);
    CHECK_MSG(proven >= 3, "observed the worker busy with a request queued only %d times (load lasted %.2f s)",
              proven, b.t_end - b.t_start);
    /* Every probe ran while the one worker computed and a request waited.
     * A liveness route that waited for compute would be slow every time
     * (by about the compute time); a shared, loaded 2-core machine makes
     * a few probes slow now and then. So: p95 under 200 ms, median under
     * 50 ms, and none over 1 s. */
    for (int k = 0; k < 3 && proven > 0; k++) {
        double *v = lat[k];
        for (int i = 1; i < proven; i++)
            for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
                double x = v[j];
                v[j] = v[j - 1];
                v[j - 1] = x;
            }
        double med = v[proven / 2], p95 = v[(proven * 95) / 100], mx = v[proven - 1];
        printf("  %-9s while busy: median %.1f ms, p95 %.1f ms, max %.1f ms\n", routes[k], med * 1e3, p95 * 1e3,
               mx * 1e3);
        /* Under a sanitizer every I/O-thread step (decoding the big bodies
         * included) is 5-15x slower, so no latency bound separates "answered
         * on the I/O thread" from "waited for compute" there: the bounds are
         * asserted on release builds, and the numbers printed everywhere. */
        if (getenv("ATTN_SANITIZER") && *getenv("ATTN_SANITIZER")) continue;
        CHECK_MSG(p95 < 0.200, "%s p95 %.1f ms while the worker was busy", routes[k], p95 * 1e3);
        CHECK_MSG(med < 0.050, "%s median %.1f ms while the worker was busy", routes[k], med * 1e3);
        CHECK_MSG(mx < 1.0, "%s took %.1f ms while the worker was busy", routes[k], mx * 1e3);
    }
    for (int k = 0; k < 3; k++) free(lat[k]);

    int ok = 0, over = 0;
    for (int i = 0; i < N; i++) {
        http_resp *r = &b.resp[i];
        char et[64], ra[32];
        if (r->status == 200) {
            ok++;
            CHECK_MSG(same_body(r, &ref), "request %d: 200 with a different body", i);
        } else {
            over++;
            CHECK_MSG(r->status == 503, "request %d: status %ld (curl %d): %.200s", i, r->status,
                      (int)r->curl_rc, r->body);
            CHECK_MSG(!strcmp(error_type(r, et, sizeof et), "overloaded"), "request %d: 503 error_type '%s'",
                      i, et);
            CHECK_MSG(resp_header(r, "Retry-After", ra, sizeof ra) && atoi(ra) >= 1,
                      "request %d: 503 without a Retry-After", i);
        }
    }
    printf("overload: %d x 200, %d x 503\n", ok, over);
    CHECK_MSG(over >= 1, "no 503 among 16 concurrent long requests with --max-queue 2");
    CHECK_MSG(ok >= 3, "only %d of 16 succeeded (1 computing + 2 queued should)", ok);
    batch_free(&b);

    /* after the load: a request succeeds within 1 s */
    http_resp r;
    double t0 = h_now();
    http_post_json(&d, "/attend", small_req, &r);
    CHECK_MSG(r.status == 200 && h_now() - t0 < 1.0, "request after the load: %ld in %.2f s", r.status,
              h_now() - t0);
    http_resp_free(&r);
    http_resp_free(&ref);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* ------------------------------------------------------- queue timeout */

static void test_queue_timeout(void) {
    daemon_proc d;
    char model[300], tmo[32];
    snprintf(model, sizeof model, "big=%s", weights_path);
    /* a quarter of the long request's compute, so the queued one times
     * out well before the long one is done even where 4096 tokens take
     * only 0.1 s (a fast CPU); at most the 100 ms of old, at least 5 */
    int timeout_ms = (int)(long_compute_s * 1000 / 4);
    if (timeout_ms > 100) timeout_ms = 100;
    if (timeout_ms < 5) timeout_ms = 5;
    snprintf(tmo, sizeof tmo, "%d", timeout_ms);
    const char *args[] = {"--model", model, "--threads", "1", "--request-timeout-ms", tmo, NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "timeout daemon did not start");
        return;
    }
    double started0 = metric(&d, "attention_server_queue_wait_seconds_count");
    const char *bodies[1] = {long_req};
    batch b;
    batch_init(&b, &d, bodies, 1);
    pthread_t th;
    pthread_create(&th, NULL, batch_run, &b);
    /* the long one has left the queue (its wait is observed when its job
     * starts): it is computing now */
    double t0 = h_now();
    while (metric(&d, "attention_server_queue_wait_seconds_count") <= started0 && h_now() - t0 < 20 &&
           atomic_load(&b.done) == 0)
        nap_ms(5);
    http_resp r;
    double ts = h_now();
    http_post_json(&d, "/attend", small_req, &r);
    double waited = h_now() - ts;
    bool long_done_first = atomic_load(&b.done) > 0;
    char et[64], ra[32];
    CHECK_MSG(!long_done_first, "the long request finished before the queued one was answered: no overlap");
    if (!long_done_first) {
        CHECK_MSG(r.status == 503, "queued behind a long request with request_timeout_ms %d: %ld %.200s",
                  timeout_ms, r.status, r.body);
        CHECK_MSG(!strcmp(error_type(&r, et, sizeof et), "overloaded"), "error_type '%s'", et);
        CHECK_MSG(strstr(r.body, "request_timeout_ms") != NULL, "message: %s", r.body);
        CHECK_MSG(resp_header(&r, "Retry-After", ra, sizeof ra) != NULL, "503 without Retry-After");
        CHECK_MSG(waited >= 0.9e-3 * timeout_ms, "answered 503 after %.3f s, before the %d ms timeout", waited,
                  timeout_ms);
    }
    printf("queue timeout: queued request answered %ld after %.3f s (timeout %d ms; the long one computes about "
           "%.3f s)\n",
           r.status, waited, timeout_ms, long_compute_s);
    http_resp_free(&r);
    pthread_join(th, NULL);
    CHECK_MSG(b.resp[0].status == 200, "the long request: %ld", b.resp[0].status);
    CHECK_MSG(!long_ref.body || same_body(&b.resp[0], &long_ref),
              "the long request's answer differs from the first daemon's");
    batch_free(&b);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* --------------------------------------------------------------- drain */

/* Wait for the process to exit: its exit status, 128+signal, or -1 on timeout. */
static int wait_exit(daemon_proc *d, double timeout_s, double *took) {
    double t0 = h_now();
    while (h_now() - t0 < timeout_s) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            *took = h_now() - t0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        nap_ms(10);
    }
    *took = h_now() - t0;
    return -1;
}

static void test_drain(void) {
    daemon_proc d;
    char model[300];
    snprintf(model, sizeof model, "big=%s", weights_path);
    const long grace_ms = 20000;
    const char *args[] = {"--model", model, "--threads", "1", "--max-queue", "8", "--shutdown-grace-ms", "20000",
                          NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "drain daemon did not start");
        return;
    }
    /* the answer another daemon gave (same weights file, same input) */
    http_resp ref = long_ref;
    if (!ref.body) {
        http_post_json(&d, "/attend", long_req, &long_ref);
        ref = long_ref;
    }
    CHECK_INT_EQ(ref.status, 200);

    enum { NREQ = 4 };
    const char *bodies[NREQ];
    for (int i = 0; i < NREQ; i++) bodies[i] = long_req;
    batch b;
    batch_init(&b, &d, bodies, NREQ);
    pthread_t th;
    pthread_create(&th, NULL, batch_run, &b);
    /* one computing and at least two waiting */
    double t0 = h_now(), depth = 0;
    while ((depth = metric(&d, "attention_server_queue_depth")) < 2 && h_now() - t0 < 20 &&
           atomic_load(&b.done) == 0)
        nap_ms(5);
    CHECK_MSG(depth >= 2 && atomic_load(&b.done) == 0, "could not get 1 running + 2 queued (depth %.0f)",
              depth);

    double t_sig = h_now();
    kill(d.pid, SIGTERM);
    /* The daemon keeps listening while it drains: /readyz turns 503
     * not_ready at once, /healthz stays 200, and new /attend work gets 503
     * not_ready with Connection: close (a load balancer retries elsewhere).
     * A pre-signal /readyz on the same poll would be 200, so poll. */
    http_resp r;
    long ready_st = 0;
    bool pending_at_503 = false;
    char et[64] = "", hv[64];
    while (h_now() - t_sig < 2.0) {
        http_do(&d, "GET", "/readyz", NULL, NULL, 0, &r);
        ready_st = r.status;
        if (ready_st == 503) {
            pending_at_503 = atomic_load(&b.done) < NREQ;
            error_type(&r, et, sizeof et);
        }
        http_resp_free(&r);
        if (ready_st == 503) break;
        nap_ms(10);
    }
    double t_503 = h_now() - t_sig;
    CHECK_MSG(ready_st == 503, "/readyz %ld 2 s after SIGTERM (curl: new connections must still be served)",
              ready_st);
    CHECK_MSG(pending_at_503, "/readyz turned 503 only after the in-flight requests completed");
    CHECK_MSG(!strcmp(et, "not_ready"), "/readyz 503 error_type '%s'", et);
    bool probed_while_busy = false;
    http_do(&d, "GET", "/healthz", NULL, NULL, 0, &r);
    CHECK_MSG(r.status == 200, "/healthz during the drain: %ld", r.status);
    http_resp_free(&r);
    http_post_json(&d, "/attend", small_req, &r);
    CHECK_MSG(r.status == 503 && !strcmp(error_type(&r, et, sizeof et), "not_ready"),
              "new /attend during the drain: %ld %s", r.status, r.body);
    CHECK_MSG(resp_header(&r, "Retry-After", hv, sizeof hv) != NULL, "503 not_ready without Retry-After");
    CHECK_MSG(resp_header(&r, "Connection", hv, sizeof hv) && !strcasecmp(hv, "close"),
              "503 not_ready during the drain without Connection: close");
    http_resp_free(&r);
    probed_while_busy = atomic_load(&b.done) < NREQ;

    pthread_join(th, NULL);
    int ok = 0;
    for (int i = 0; i < NREQ; i++) {
        if (same_body(&b.resp[i], &ref)) ok++;
        else
            CHECK_MSG(0, "drained request %d: status %ld (curl %d) %.200s", i, b.resp[i].status,
                      (int)b.resp[i].curl_rc, b.resp[i].body);
    }
    double last_done = 0;
    for (int i = 0; i < NREQ; i++)
        if (b.done_at[i] - t_sig > last_done) last_done = b.done_at[i] - t_sig;
    CHECK_INT_EQ(ok, NREQ);
    double took;
    int rc = wait_exit(&d, (double)grace_ms / 1000.0 + 5, &took);
    printf("drain: /readyz 503 %.0f ms after SIGTERM (%s requests pending); /healthz and a new /attend "
           "probed %s; %d/%d requests completed 200 (last %.2f s after SIGTERM); exit %d %.2f s after that\n",
           t_503 * 1e3, pending_at_503 ? "with" : "without", probed_while_busy ? "while busy" : "after the work",
           ok, NREQ, last_done, rc, took);
    CHECK_MSG(rc == 0, "exit status %d after SIGTERM", rc);
    CHECK_MSG(h_now() - t_sig < (double)grace_ms / 1000.0, "exit %.1f s after SIGTERM (grace %ld ms)",
              h_now() - t_sig, grace_ms);
    batch_free(&b);
    char *log = daemon_log(&d);
    CHECK_MSG(strstr(log, "draining") != NULL, "no drain line in the log");
    CHECK_MSG(strstr(log, "grace period over") == NULL, "the drain ran out of grace");
    free(log);
}

/* --------------------------------------------------------- concurrency */

/* 32 different requests against demo (E=64, 4 heads) and tiny (E=8). */
static char *variant(int v) {
    size_t cap = 1 << 20, k = 0;
    char *p = malloc(cap);
    int n = 1 + (v * 7) % 23, B = 1 + v % 3, E = 64;
    bool cross = v % 4 == 3, batched = v % 5 < 2, tiny = v % 8 == 5;
    if (tiny) E = 8;
    int m = cross ? 1 + (v * 5) % 17 : n;
    rng_state = 777u + (uint32_t)v * 31u;
    k += (size_t)snprintf(p + k, cap - k, "{\"model\":\"%s\"", tiny ? "tiny" : "demo");
    const char *fields[3] = {cross ? "query" : "embeddings", "key", "value"};
    for (int f = 0; f < (cross ? 3 : 1); f++) {
        int rows = f == 0 ? n : m;
        k += (size_t)snprintf(p + k, cap - k, ",\"%s\":", fields[f]);
        if (v % 6 == 4) { /* base64 input */
            size_t cnt = (size_t)(batched ? B : 1) * (size_t)rows * (size_t)E;
            float *x = malloc(cnt * sizeof *x);
            for (size_t i = 0; i < cnt; i++) x[i] = rnd(2.0f);
            char *e = b64(x, cnt * sizeof *x);
            if (batched)
                k += (size_t)snprintf(p + k, cap - k, "{\"dtype\":\"float32\",\"shape\":[%d,%d,%d],\"base64\":\"%s\"}",
                                      B, rows, E, e);
            else
                k += (size_t)snprintf(p + k, cap - k, "{\"dtype\":\"float32\",\"shape\":[%d,%d],\"base64\":\"%s\"}",
                                      rows, E, e);
            free(e);
            free(x);
            continue;
        }
        if (batched) p[k++] = '[';
        for (int b = 0; b < (batched ? B : 1); b++) {
            if (b) p[k++] = ',';
            p[k++] = '[';
            for (int i = 0; i < rows; i++) {
                if (i) p[k++] = ',';
                p[k++] = '[';
                for (int j = 0; j < E; j++) k += (size_t)snprintf(p + k, cap - k, j ? ",%.6g" : "%.6g", rnd(2.0f));
                p[k++] = ']';
            }
            p[k++] = ']';
        }
        if (batched) p[k++] = ']';
    }
    if (v % 3 == 1) k += (size_t)snprintf(p + k, cap - k, ",\"causal\":true");
    if (v % 7 == 2) k += (size_t)snprintf(p + k, cap - k, ",\"need_weights\":false");
    if (v % 5 == 3) k += (size_t)snprintf(p + k, cap - k, ",\"average_heads\":true");
    if (v % 9 == 6) k += (size_t)snprintf(p + k, cap - k, ",\"precision\":%d", 1 + v % 9);
    if (v % 10 == 7) k += (size_t)snprintf(p + k, cap - k, ",\"encoding_format\":\"base64\"");
    if (v % 4 == 0 && !batched) { /* a key padding mask over the m keys */
        k += (size_t)snprintf(p + k, cap - k, ",\"key_padding_mask\":[");
        for (int j = 0; j < m; j++) k += (size_t)snprintf(p + k, cap - k, j ? ",%s" : "%s", j % 3 == 2 ? "true" : "false");
        p[k++] = ']';
    }
    k += (size_t)snprintf(p + k, cap - k, "}");
    return p;
}

static void test_concurrency(void) {
    daemon_proc d;
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--model",
                          "tiny=tests/golden/h8_e8.safetensors", "--threads", "2", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "concurrency daemon did not start");
        return;
    }
    enum { N = 32 };
    char *req[N];
    const char *bodies[N];
    http_resp one[N];
    for (int i = 0; i < N; i++) {
        req[i] = variant(i);
        bodies[i] = req[i];
        http_post_json(&d, "/attend", req[i], &one[i]);
        CHECK_MSG(one[i].status == 200, "variant %d alone: %ld %.300s", i, one[i].status, one[i].body);
    }
    /* distinct requests really give distinct answers */
    int distinct = 0;
    for (int i = 1; i < N; i++) distinct += !same_body(&one[i], &one[i - 1]);
    CHECK_MSG(distinct == N - 1, "only %d of %d neighbouring answers differ", distinct, N - 1);
    for (int round = 0; round < 2; round++) {
        /* the second round sends them in reverse order */
        const char *order[N];
        for (int i = 0; i < N; i++) order[i] = bodies[round ? N - 1 - i : i];
        batch b;
        batch_init(&b, &d, order, N);
        batch_run(&b);
        int same = 0;
        for (int i = 0; i < N; i++) {
            int v = round ? N - 1 - i : i;
            if (same_body(&b.resp[i], &one[v])) same++;
            else
                CHECK_MSG(0, "round %d variant %d: concurrent answer differs (status %ld, %zu vs %zu bytes)", round,
                          v, b.resp[i].status, b.resp[i].len, one[v].len);
        }
        printf("concurrency round %d: %d/%d bit-identical in %.2f s\n", round, same, N, b.t_end - b.t_start);
        batch_free(&b);
    }
    for (int i = 0; i < N; i++) {
        http_resp_free(&one[i]);
        free(req[i]);
    }
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* ---------------------------------------------------------------- main */

/* ------------------------------------------------------------ batching */

/* Requests that wait together for the one worker are computed together
 * (attention_server_batch_requests shows batches of more than one), and
 * each answer is byte for byte the one the same request gets alone. */
static void test_batching(void) {
    daemon_proc d;
    char model[300];
    snprintf(model, sizeof model, "big=%s", weights_path);
    const char *args[] = {"--model", model, "--threads", "1", "--batch-max-requests", "8", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "batching daemon did not start");
        return;
    }
    enum { N = 12 };
    char *small[N];
    const char *bodies[N];
    for (int i = 0; i < N; i++) bodies[i] = small[i] = long_request(3 + (7 * i) % 40, 256);
    double started0 = metric(&d, "attention_server_queue_wait_seconds_count");
    const char *lb[1] = {long_req};
    batch bl, bs;
    batch_init(&bl, &d, lb, 1);
    batch_init(&bs, &d, bodies, N);
    pthread_t tl, ts;
    pthread_create(&tl, NULL, batch_run, &bl);
    /* the long one is computing: the small ones queue behind it */
    double t0 = h_now();
    while (metric(&d, "attention_server_queue_wait_seconds_count") <= started0 && h_now() - t0 < 20)
        nap_ms(5);
    pthread_create(&ts, NULL, batch_run, &bs);
    pthread_join(ts, NULL);
    pthread_join(tl, NULL);
    double reqs = metric(&d, "attention_server_batch_requests_sum");
    double runs = metric(&d, "attention_server_batch_requests_count");
    printf("batching: %d requests queued behind a long one ran in %.0f engine passes (%.0f "
           "requests)\n",
           N, runs - 1, reqs - 1);
    CHECK_MSG(bl.resp[0].status == 200, "the long request: %ld", bl.resp[0].status);
    CHECK_MSG(reqs > runs, "no batch of more than one request (%.0f requests in %.0f passes)",
              reqs, runs);
    for (int i = 0; i < N; i++) {
        http_resp alone;
        http_post_json(&d, "/attend", bodies[i], &alone);
        CHECK_MSG(same_body(&bs.resp[i], &alone),
                  "request %d: batched answer (%ld, %zu bytes) differs from the answer alone (%ld, "
                  "%zu bytes)",
                  i, bs.resp[i].status, bs.resp[i].len, alone.status, alone.len);
        http_resp_free(&alone);
        free(small[i]);
    }
    batch_free(&bl);
    batch_free(&bs);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);

    /* --batch-max-requests 1: every pass is one request */
    const char *args1[] = {"--model", model, "--threads", "1", "--batch-max-requests", "1", NULL};
    if (daemon_start(&d, args1)) {
        CHECK_MSG(0, "daemon without batching did not start");
        return;
    }
    const char *b2[4] = {long_req, small_req, small_req, small_req};
    batch_init(&bs, &d, b2, 4);
    batch_run(&bs);
    for (int i = 0; i < 4; i++) CHECK_INT_EQ(bs.resp[i].status, 200);
    reqs = metric(&d, "attention_server_batch_requests_sum");
    runs = metric(&d, "attention_server_batch_requests_count");
    CHECK_MSG(reqs == runs, "batching off, yet %.0f requests in %.0f passes", reqs, runs);
    batch_free(&bs);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* A batch's one pass can need more working memory than its requests
 * reserved for passes of their own (on one worker the engine concatenates
 * their tokens: copies of the inputs and outputs). The difference comes
 * from the memory budget too: under a budget that holds the requests but
 * not it, they run one by one, and answer what they answer batched. (On
 * one worker the engine concatenates a batch this small wherever its own
 * kernel runs, on every CPU with AVX2; where it would not, the pass needs
 * nothing extra and the test says it skipped.) */
static void test_batch_budget(void) {
    enum { K = 4, N = 40 };
    char err[ATTN_ERRLEN];
    attn_weights *w = NULL;
    if (attn_weights_load(weights_path, NULL, &w, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    static float x[N * 256];
    attn_input in = {.B = 1, .n = N, .m = N, .query = x, .key = x, .value = x};
    const attn_input *ins[K];
    size_t own = 0;
    for (int i = 0; i < K; i++) {
        ins[i] = &in;
        own += attn_forward_scratch_bytes(w, &in, 1);
    }
    const size_t pass = attn_ragged_scratch_bytes(w, ins, K, 1, ATTN_RAGGED_AUTO);
    attn_weights_destroy(w);
    if (pass <= own) { /* then no batch can want more: nothing to test here */
        printf("batch budget: skipped: the batch's pass needs %zu bytes, its requests reserved "
               "%zu\n",
               pass, own);
        return;
    }

    char model[300];
    snprintf(model, sizeof model, "big=%s", weights_path);
    char *bodies_s[K];
    const char *bodies[K];
    for (int i = 0; i < K; i++) bodies[i] = bodies_s[i] = long_request(N, 256);
    /* the dispatcher waits up to a second for a batch to fill: one request
     * alone shows what each holds while it waits */
    const char *args[] = {"--model", model, "--threads", "1", "--batch-max-requests", "4",
                          "--batch-delay-us", "1000000", NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "batching daemon did not start");
        return;
    }
    batch one, four, tight;
    batch_init(&one, &d, bodies, 1);
    const double dec0 = metric(&d, "attention_server_decode_seconds_count"), t0 = h_now();
    pthread_t th;
    pthread_create(&th, NULL, batch_run, &one);
    /* once decoded, a request holds all it will until its compute */
    while (metric(&d, "attention_server_decode_seconds_count") <= dec0 && h_now() - t0 < 0.9)
        nap_ms(5);
    const double held = metric(&d, "attention_server_memory_held_bytes");
    const double waited = h_now() - t0;
    pthread_join(th, NULL);
    CHECK_MSG(held > 0 && waited < 0.9 && one.resp[0].status == 200,
              "no reservation seen while the request waited (%.0f bytes after %.2f s; status %ld)",
              held, waited, one.resp[0].status);
    double c0 = metric(&d, "attention_server_batch_requests_count");
    double s0 = metric(&d, "attention_server_batch_requests_sum");
    batch_init(&four, &d, bodies, K);
    batch_run(&four);
    double passes = metric(&d, "attention_server_batch_requests_count") - c0;
    double reqs = metric(&d, "attention_server_batch_requests_sum") - s0;
    CHECK_MSG(passes == 1 && reqs == K, "ample budget: %.0f requests in %.0f passes", reqs, passes);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);

    /* room for the four requests and half of what their batch adds */
    const size_t limit = K * (size_t)held + (pass - own) / 2;
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", limit);
    const char *args2[] = {"--model", model, "--threads", "1", "--batch-max-requests", "4",
                           "--batch-delay-us", "1000000", "--max-memory-bytes", lim, NULL};
    if (daemon_start(&d, args2)) {
        CHECK_MSG(0, "daemon with a %s-byte budget did not start", lim);
    } else {
        batch_init(&tight, &d, bodies, K);
        batch_run(&tight);
        passes = metric(&d, "attention_server_batch_requests_count");
        reqs = metric(&d, "attention_server_batch_requests_sum");
        printf("batch budget: %d requests of %d tokens hold %.0f bytes each; their pass needs %zu "
               "bytes beyond their %zu; under a budget of %zu they ran in %.0f passes\n",
               K, N, held, pass - own, own, limit, passes);
        CHECK_MSG(passes == K && reqs == K, "tight budget: %.0f requests in %.0f passes", reqs,
                  passes);
        for (int i = 0; i < K; i++)
            CHECK_MSG(same_body(&tight.resp[i], &four.resp[i]),
                      "request %d under the tight budget: %ld, %zu bytes; batched: %ld, %zu bytes",
                      i, tight.resp[i].status, tight.resp[i].len, four.resp[i].status,
                      four.resp[i].len);
        batch_free(&tight);
        CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    }
    batch_free(&one);
    batch_free(&four);
    for (int i = 0; i < K; i++) free(bodies_s[i]);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_ALL);
    static char path[128];
    snprintf(path, sizeof path, "/tmp/attn-lifecycle-%d.safetensors", (int)getpid());
    weights_path = path;
    if (write_mha_weights(path, 256, 8, 12345u)) {
        CHECK_MSG(0, "cannot write %s", path);
        return check_exit();
    }
    /* The long request: as many tokens as take about 0.4 s of compute on
     * one worker of this build on this machine now (at most 4096 x 256,
     * 5.6 MB of input). */
    int n = calibrate();
    long_req = long_request(n, 256);
    small_req = long_request(4, 256);
    printf("long request: %d tokens x 256\n", n);

    double t0 = h_now();
    test_overload();
    printf("overload       %5.1f s\n", h_now() - t0);
    t0 = h_now();
    test_queue_timeout();
    printf("queue timeout  %5.1f s\n", h_now() - t0);
    t0 = h_now();
    test_drain();
    printf("drain          %5.1f s\n", h_now() - t0);
    t0 = h_now();
    test_concurrency();
    printf("concurrency    %5.1f s\n", h_now() - t0);
    t0 = h_now();
    test_batching();
    printf("batching       %5.1f s\n", h_now() - t0);
    t0 = h_now();
    test_batch_budget();
    printf("batch budget   %5.1f s\n", h_now() - t0);

    unlink(path);
    http_resp_free(&long_ref);
    free(long_req);
    free(small_req);
    curl_global_cleanup();
    return check_exit();
}
