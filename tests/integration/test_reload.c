/* test_reload.c - weight sets that change while the server serves.
 *
 * Weight files are written at test time (harness.h: write_mha_weights) into
 * a model directory in /tmp, and swapped the way docs/OPERATIONS.md says:
 * written under a temporary name, then renamed over the model's file.
 *
 * 1. Reload under load: client threads post requests back to back (/attend
 *    and v2 infer, half each, one keep-alive connection each) while the
 *    model's file is swapped between two weight sets A and B and SIGHUP is
 *    sent, several times: no request fails, every answer holds A's or B's
 *    numbers (the engine's naive reference on the same files), never a mix,
 *    and after each swap the new numbers are served; the index, the v2
 *    metadata and /metrics follow with the new SHA-256 and version.
 * 2. A truncated file: the numbers served before serve on, the index and
 *    /metrics show UNAVAILABLE with the reason, the load is not retried
 *    until the file changes, and a good file brings READY back.
 * 3. --model-poll-s: a change is picked up without a signal; a file removed
 *    from the directory stops being served.
 * 4. The model directory's names: dot-files and names that are not model
 *    names are passed over; a name given both by the directory and by
 *    --model is a start-up error (exit 1) naming both.
 * 5. The repository API: index (with and without "ready"), unload (then
 *    404 model_not_found for infer and metadata, and SIGHUP leaves it
 *    unloaded), load (brings it back), 403 without --model-control
 *    explicit, the API key, names that are paths, parameters that would
 *    carry a file; /readyz 503 while no model is loaded.
 *
 * Bench mode (ATTN_RELOAD_BENCH=1, tests/bench/bench-reload.sh): part 1
 * only, at E=1024 with 64 connections and 20 reloads, printing the time
 * from SIGHUP to the new weights serving and the daemon's RSS.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "attention.h"
#include "check.h"
#include "harness.h"
#include "sha256.h"
#include "weights.h"

/* ------------------------------------------------------------ set-up */

typedef struct params {
    int E, H, n; /* the layer, and the tokens of each request */
    int clients; /* client threads, one connection each */
    int swaps;   /* reloads under load */
    bool bench;  /* print figures, skip parts 2-5 */
} params;

static char moddir[128];     /* the model directory */
static char model_file[192]; /* moddir/m.safetensors */
static float *X;             /* [n,E], the input every request sends */
static float *ref[3];        /* [n,E]: the naive reference's output for seeds 1, 2, 3 */
static char *attend_body, *v2_body;

static const uint32_t SEEDS[3] = {1u, 2u, 3u}; /* weight sets A, B, C */

static uint32_t rng = 777u;
static float rnd(void) {
    rng = rng * 1664525u + 1013904223u;
    return 2.0f * (float)(rng >> 8) / 16777216.0f - 1.0f;
}

/* Swap in NAME's weights the way an operator should: a temporary file
 * (a dot-file, which the directory scan passes over), then rename. */
static int put_weights(const char *name, const params *p, uint32_t seed) {
    char tmp[256], dst[256];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", moddir, name);
    snprintf(dst, sizeof dst, "%s/%s.safetensors", moddir, name);
    if (write_mha_weights(tmp, p->E, p->H, seed)) return -1;
    return rename(tmp, dst);
}

/* The naive reference's output for the weights of seed, on X. */
static int reference(const params *p, uint32_t seed, float *out) {
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/.ref.tmp", moddir);
    attn_weights *w = NULL;
    if (write_mha_weights(path, p->E, p->H, seed) ||
        attn_weights_load(path, NULL, &w, err, sizeof err)) {
        CHECK_MSG(0, "reference weights: %s", err);
        return -1;
    }
    attn_input in = {.B = 1, .n = p->n, .m = p->n, .query = X, .key = X, .value = X};
    attn_status st = attn_forward_naive(w, &in, out, NULL, err, sizeof err);
    attn_weights_destroy(w);
    unlink(path);
    CHECK_MSG(st == ATTN_OK, "attn_forward_naive: %s", err);
    return st == ATTN_OK ? 0 : -1;
}

static void make_bodies(const params *p) {
    size_t cnt = (size_t)p->n * (size_t)p->E, cap = cnt * 20 + 512;
    X = malloc(cnt * sizeof *X);
    for (size_t i = 0; i < cnt; i++) X[i] = rnd();
    attend_body = malloc(cap);
    v2_body = malloc(cap);
    size_t a = (size_t)snprintf(attend_body, cap,
                                "{\"model\":\"m\",\"need_weights\":false,\"embeddings\":[");
    size_t v = (size_t)snprintf(
        v2_body, cap,
        "{\"outputs\":[{\"name\":\"output\"}],\"inputs\":[{\"name\":\"embeddings\","
        "\"datatype\":\"FP32\",\"shape\":[%d,%d],\"data\":[",
        p->n, p->E);
    for (int i = 0; i < p->n; i++) {
        a += (size_t)snprintf(attend_body + a, cap - a, i ? ",[" : "[");
        for (int j = 0; j < p->E; j++) {
            float x = X[(size_t)i * (size_t)p->E + (size_t)j];
            a += (size_t)snprintf(attend_body + a, cap - a, j ? ",%.9g" : "%.9g", (double)x);
            v += (size_t)snprintf(v2_body + v, cap - v, i || j ? ",%.9g" : "%.9g", (double)x);
        }
        a += (size_t)snprintf(attend_body + a, cap - a, "]");
    }
    snprintf(attend_body + a, cap - a, "]}");
    snprintf(v2_body + v, cap - v, "]}]}");
}

/* Which weight set an answer's output is: 0..2 for the seeds, -1 for none
 * (or a mix: within float32 rounding of no single one), -2 for an answer
 * that holds no output. */
static int classify(const params *p, const char *body, size_t len, bool v2, int nref) {
    json_t *root = json_loadb(body, len, 0, NULL);
    size_t cnt = (size_t)p->n * (size_t)p->E, k = 0;
    float *o = malloc(cnt * sizeof *o);
    if (v2) {
        json_t *data = json_object_get(json_array_get(json_object_get(root, "outputs"), 0), "data");
        for (size_t i = 0; i < json_array_size(data) && k < cnt; i++)
            o[k++] = (float)json_number_value(json_array_get(data, i));
    } else {
        json_t *rows = json_object_get(root, "output");
        for (size_t i = 0; i < json_array_size(rows); i++) {
            json_t *row = json_array_get(rows, i);
            for (size_t j = 0; j < json_array_size(row) && k < cnt; j++)
                o[k++] = (float)json_number_value(json_array_get(row, j));
        }
    }
    json_decref(root);
    int which = k == cnt ? -1 : -2;
    for (int r = 0; r < nref && which != -2; r++) {
        double maxd = 0;
        for (size_t i = 0; i < cnt; i++) maxd = fmax(maxd, fabs((double)o[i] - ref[r][i]));
        if (maxd <= 1e-4) which = which == -1 ? r : -1;
    }
    free(o);
    return which;
}

/* ------------------------------------------------------- the repository */

static const char *KEY_HDR = "Authorization: Bearer reload-test-key";

/* POST path with a JSON body (may be NULL) and the API key header when
 * key; returns the status. */
static long post(const daemon_proc *d, const char *path, const char *json, bool key, http_resp *r) {
    const char *h[] = {"Content-Type: application/json", key ? KEY_HDR : NULL, NULL};
    return http_do(d, "POST", path, h, json, json ? strlen(json) : 0, r);
}

/* POST path as post() does and check the error answer (check_error). */
static void post_expect(const daemon_proc *d, const char *path, const char *json, bool key,
                        long status, const char *type, const char *needle) {
    http_resp r;
    post(d, path, json, key, &r);
    check_error(&r, status, type, needle);
    http_resp_free(&r);
}

/* A string member of a JSON object, or "". */
static const char *str_of(const json_t *o, const char *key) {
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The index entry of name: its state, reason and parameters.version (0
 * when none serves); false when the index does not list it. */
static bool index_entry(const daemon_proc *d, bool key, const char *name, char *state, char *reason,
                        size_t rlen, long *version) {
    http_resp r;
    post(d, "/v2/repository/index", "{}", key, &r);
    json_t *root = json_loadb(r.body, r.len, 0, NULL);
    bool found = false;
    for (size_t i = 0; i < json_array_size(root); i++) {
        json_t *e = json_array_get(root, i);
        if (strcmp(str_of(e, "name"), name)) continue;
        found = true;
        snprintf(state, 32, "%s", str_of(e, "state"));
        snprintf(reason, rlen, "%s", str_of(e, "reason"));
        *version =
            (long)json_integer_value(json_object_get(json_object_get(e, "parameters"), "version"));
    }
    json_decref(root);
    http_resp_free(&r);
    return found;
}

/* Wait (up to timeout_s) until name's index entry has this version (and
 * state, when given). Returns the seconds it took, or -1. */
static double wait_version(const daemon_proc *d, bool key, const char *name, long version,
                           const char *want_state, double timeout_s) {
    double t0 = h_now();
    char state[32], reason[1024];
    long v;
    while (h_now() - t0 < timeout_s) {
        if (index_entry(d, key, name, state, reason, sizeof reason, &v) && v == version &&
            (!want_state || !strcmp(state, want_state)))
            return h_now() - t0;
        usleep(2000);
    }
    return -1;
}

/* A /metrics line starting with prefix, or NULL (malloc'd). */
static char *metric_line(const daemon_proc *d, const char *prefix) {
    http_resp r;
    http_do(d, "GET", "/metrics", NULL, NULL, 0, &r);
    char *line = NULL;
    for (const char *p = r.body; p && *p && !line;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (!strncmp(p, prefix, strlen(prefix))) line = strndup(p, n);
        p = eol ? eol + 1 : NULL;
    }
    http_resp_free(&r);
    return line;
}

static void check_promtool(const daemon_proc *d) {
    if (access("/usr/bin/promtool", X_OK)) return; /* test_api insists on it */
    http_resp r;
    http_do(d, "GET", "/metrics", NULL, NULL, 0, &r);
    FILE *p = popen("/usr/bin/promtool check metrics >/tmp/attn-promtool-reload.out 2>&1", "w");
    fwrite(r.body, 1, r.len, p);
    CHECK_MSG(pclose(p) == 0, "promtool check metrics failed (see /tmp/attn-promtool-reload.out)");
    http_resp_free(&r);
}

/* The daemon's resident set, in bytes (0 when it cannot be read). */
static double rss_bytes(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atof(line + 6);
    if (f) fclose(f);
    return kb * 1024;
}

/* --------------------------------------------------- 1. under load */

typedef struct client {
    const daemon_proc *d;
    const params *p;
    bool v2;
    atomic_int *stop;
    long sent, failed, mixed, seen[2];
    char first_bad[400];
} client;

static void *client_main(void *arg) {
    client *c = arg;
    http_resp r;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    const char *body = c->v2 ? v2_body : attend_body;
    CURL *e = http_easy(c->d, "POST", c->v2 ? "/v2/models/m/infer" : "/attend", h, body,
                        strlen(body), &r);
    while (!atomic_load(c->stop)) {
        r.len = r.hlen = 0;
        r.status = 0;
        CURLcode rc = curl_easy_perform(e);
        if (rc == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.status);
        c->sent++;
        int which = r.status == 200 ? classify(c->p, r.body, r.len, c->v2, 2) : -2;
        if (which >= 0) {
            c->seen[which]++;
            continue;
        }
        if (which == -1)
            c->mixed++;
        else
            c->failed++;
        if (!c->first_bad[0])
            snprintf(c->first_bad, sizeof c->first_bad, "%s: status %ld (curl %d): %.300s",
                     c->v2 ? "v2" : "/attend", r.status, (int)rc, r.body);
    }
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    free(r.body);
    return NULL;
}

/* Samples the daemon's RSS until told to stop, keeping the largest. */
typedef struct rss_probe {
    pid_t pid;
    atomic_int stop;
    double max;
} rss_probe;

static void *rss_main(void *arg) {
    rss_probe *pr = arg;
    while (!atomic_load(&pr->stop)) {
        pr->max = fmax(pr->max, rss_bytes(pr->pid));
        usleep(2000);
    }
    return NULL;
}

/* One answer from the main thread: which weight set it holds. */
static int probe_numbers(const daemon_proc *d, const params *p, int nref) {
    http_resp r;
    http_post_json(d, "/attend", attend_body, &r);
    int which = r.status == 200 ? classify(p, r.body, r.len, false, nref) : -2;
    http_resp_free(&r);
    return which;
}

/* The version serving m now, and which weight set it is. */
static int version_now = 1, weights_now = 0;

/* Swap m's file to weight set which and send SIGHUP; wait until the next
 * version serves and check that an answer holds its numbers. Returns the
 * seconds from SIGHUP to the new version in the index (-1: not within 30
 * s). */
static double swap_to(const params *p, daemon_proc *d, int which) {
    CHECK_INT_EQ(put_weights("m", p, SEEDS[which]), 0);
    double t0 = h_now();
    kill(d->pid, SIGHUP);
    double waited = wait_version(d, false, "m", version_now + 1, "READY", 30);
    double took = waited >= 0 ? h_now() - t0 : -1;
    CHECK_MSG(waited >= 0, "version %d not serving within 30 s", version_now + 1);
    version_now++;
    weights_now = which;
    int got = probe_numbers(d, p, 2);
    CHECK_MSG(got == which, "version %d: the answer after the swap holds weights %d, not %d",
              version_now, got, which);
    return took;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Bench mode: reloads with no other load, for the time from SIGHUP to
 * serving and the memory a reload takes. */
static void test_idle_swaps(const params *p, daemon_proc *d, int n) {
    double took[8], peak = 0, base = rss_bytes(d->pid);
    for (int i = 0; i < n && i < 8; i++) {
        rss_probe pr = {.pid = d->pid};
        pthread_t th;
        pthread_create(&th, NULL, rss_main, &pr);
        took[i] = swap_to(p, d, 1 - weights_now);
        atomic_store(&pr.stop, 1);
        pthread_join(th, NULL);
        peak = fmax(peak, pr.max);
        usleep(1500000); /* the watchdog gives freed memory back when idle */
    }
    qsort(took, (size_t)n, sizeof *took, cmp_double);
    printf(
        "idle server, %d reloads: SIGHUP to the new weights serving: median %.1f ms, max %.1f "
        "ms; RSS %.1f MiB before, at most %.1f MiB during a reload (+%.1f MiB), %.1f MiB after\n",
        n, took[n / 2] * 1e3, took[n - 1] * 1e3, base / 1048576.0, peak / 1048576.0,
        (peak - base) / 1048576.0, rss_bytes(d->pid) / 1048576.0);
    CHECK_MSG(took[n - 1] < 1.0, "SIGHUP to serving took %.3f s on an idle server (target < 1 s)",
              took[n - 1]);
}

static void test_under_load(const params *p, daemon_proc *d) {
    /* the clients run while the file is swapped A -> B -> A ..., one SIGHUP
     * each; each swap must serve before the next */
    atomic_int stop = 0;
    client *cl = calloc((size_t)p->clients, sizeof *cl);
    pthread_t *th = calloc((size_t)p->clients, sizeof *th);
    for (int i = 0; i < p->clients; i++) {
        cl[i] = (client){.d = d, .p = p, .v2 = i % 2 == 1, .stop = &stop};
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    usleep(200000); /* every client connected and answered once or more */
    rss_probe pr = {.pid = d->pid};
    double rss_before = rss_bytes(d->pid);
    pthread_t rss_th;
    pthread_create(&rss_th, NULL, rss_main, &pr);
    double *took = calloc((size_t)p->swaps, sizeof *took);
    for (int s = 0; s < p->swaps; s++) {
        took[s] = swap_to(p, d, 1 - weights_now);
        usleep(p->bench ? 200000 : 50000); /* the clients see each version for a while */
    }
    usleep(100000);
    atomic_store(&stop, 1);
    long sent = 0, failed = 0, mixed = 0, seen[2] = {0, 0};
    for (int i = 0; i < p->clients; i++) {
        pthread_join(th[i], NULL);
        sent += cl[i].sent;
        failed += cl[i].failed;
        mixed += cl[i].mixed;
        seen[0] += cl[i].seen[0];
        seen[1] += cl[i].seen[1];
        CHECK_MSG(!cl[i].first_bad[0], "client %d: %s", i, cl[i].first_bad);
    }
    atomic_store(&pr.stop, 1);
    pthread_join(rss_th, NULL);
    usleep(1500000); /* the watchdog trims the heap once requests stop */
    double rss_after = rss_bytes(d->pid);
    CHECK_INT_EQ(failed, 0);
    CHECK_INT_EQ(mixed, 0);
    CHECK_MSG(seen[0] > 0 && seen[1] > 0, "answers: %ld of A, %ld of B", seen[0], seen[1]);

    /* the file's identity everywhere: index version, v2 metadata, /metrics */
    char sha[65], want[256];
    uint64_t bytes;
    CHECK_INT_EQ(sha256_file(model_file, sha, &bytes), 0);
    http_resp r;
    http_do(d, "GET", "/v2/models/m", NULL, NULL, 0, &r);
    snprintf(want, sizeof want, "\"sha256\":\"%s\"", sha);
    CHECK_STR_CONTAINS(r.body, want);
    snprintf(want, sizeof want, "\"version\":%d", version_now);
    CHECK_STR_CONTAINS(r.body, want);
    http_resp_free(&r);
    char *line = metric_line(d, "attention_server_model_info{model=\"m\"");
    snprintf(want, sizeof want, "sha256=\"%s\",version=\"%d\"} 1", sha, version_now);
    CHECK_STR_CONTAINS(line, want);
    free(line);
    line = metric_line(d, "attention_server_model_loads_total{model=\"m\",result=\"ok\"}");
    snprintf(want, sizeof want, "} %d", version_now);
    CHECK_STR_CONTAINS(line, want);
    free(line);
    line = metric_line(d, "attention_server_model_request_duration_seconds_count{model=\"m\"}");
    CHECK_MSG(line != NULL, "no by-model latency histogram for m");
    free(line);

    qsort(took, (size_t)p->swaps, sizeof *took, cmp_double);
    printf(
        "reload under load: E=%d, %d connections, %d reloads: %ld requests (%ld of A, %ld of B), "
        "%ld failed, %ld mixed\n",
        p->E, p->clients, p->swaps, sent, seen[0], seen[1], failed, mixed);
    printf("under that load, SIGHUP to the new weights serving: median %.1f ms, max %.1f ms\n",
           took[p->swaps / 2] * 1e3, took[p->swaps - 1] * 1e3);
    double layer = 8.0 * p->E * p->E * 4 / 1048576.0;
    printf("under that load, daemon RSS: %.1f MiB before the reloads, at most %.1f MiB during "
           "them (+%.1f MiB), %.1f MiB after; the layer: %.1f MiB in memory, its file %.1f MiB\n",
           rss_before / 1048576.0, pr.max / 1048576.0, (pr.max - rss_before) / 1048576.0,
           rss_after / 1048576.0, layer, (double)bytes / 1048576.0);
    free(took);
    free(cl);
    free(th);
}

/* ---------------------------------------------- 2. an invalid new file */

static void test_truncated(const params *p, daemon_proc *d) {
    char state[32], reason[1024];
    long v0, v;
    CHECK(index_entry(d, false, "m", state, reason, sizeof reason, &v0));
    int serving = probe_numbers(d, p, 2);
    CHECK(serving >= 0);
    /* a file cut in half, renamed into place */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/.m.tmp", moddir);
    CHECK_INT_EQ(write_mha_weights(tmp, p->E, p->H, SEEDS[2]), 0);
    struct stat st;
    stat(tmp, &st);
    CHECK_INT_EQ(truncate(tmp, st.st_size / 2), 0);
    CHECK_INT_EQ(rename(tmp, model_file), 0);
    kill(d->pid, SIGHUP);
    CHECK_MSG(wait_version(d, false, "m", v0, "UNAVAILABLE", 30) >= 0,
              "m did not turn UNAVAILABLE after a truncated file");
    CHECK(index_entry(d, false, "m", state, reason, sizeof reason, &v));
    CHECK_STR_EQ(state, "UNAVAILABLE");
    CHECK_STR_CONTAINS(reason, "truncated");
    CHECK_STR_CONTAINS(reason, "serves on");
    CHECK_INT_EQ(v, v0); /* the version loaded before still serves */
    CHECK_INT_EQ(probe_numbers(d, p, 2), serving);
    http_resp r;
    http_do(d, "GET", "/v2/models/m/ready", NULL, NULL, 0, &r);
    CHECK_INT_EQ(r.status, 200);
    http_resp_free(&r);
    char *line = metric_line(d, "attention_server_model_state{model=\"m\",state=\"UNAVAILABLE\"}");
    CHECK_STR_CONTAINS(line, "} 1");
    free(line);
    line = metric_line(d, "attention_server_model_state_reason_info{model=\"m\",reason=");
    CHECK_STR_CONTAINS(line, "truncated");
    free(line);
    line = metric_line(d, "attention_server_model_loads_total{model=\"m\",result=\"failed\"}");
    CHECK_STR_CONTAINS(line, "} 1");
    free(line);
    check_promtool(d);
    char *log = daemon_log(d);
    CHECK_STR_CONTAINS(log, "truncated");
    free(log);

    /* the same broken file again: not retried, not counted again */
    kill(d->pid, SIGHUP);
    usleep(300000);
    line = metric_line(d, "attention_server_model_loads_total{model=\"m\",result=\"failed\"}");
    CHECK_STR_CONTAINS(line, "} 1");
    free(line);

    /* a good file: READY, the next version, its numbers */
    CHECK_INT_EQ(put_weights("m", p, SEEDS[2]), 0);
    kill(d->pid, SIGHUP);
    CHECK_MSG(wait_version(d, false, "m", v0 + 1, "READY", 30) >= 0, "C did not load");
    CHECK_INT_EQ(probe_numbers(d, p, 3), 2);
    line = metric_line(d, "attention_server_model_state_reason_info{model=\"m\"");
    CHECK_MSG(line == NULL, "a reason is still shown: %s", line);
    free(line);
}

/* ----------------------------------------------------------- 3. poll */

static void test_poll(const params *p) {
    CHECK_INT_EQ(put_weights("m", p, SEEDS[0]), 0);
    const char *args[] = {"--model-dir", moddir, "--model-poll-s", "1", NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon did not start");
        return;
    }
    CHECK_INT_EQ(probe_numbers(&d, p, 2), 0);
    CHECK_INT_EQ(put_weights("m", p, SEEDS[1]), 0);
    CHECK_MSG(wait_version(&d, false, "m", 2, "READY", 20) >= 0, "the poll did not load B");
    CHECK_INT_EQ(probe_numbers(&d, p, 2), 1);
    /* a second model appears, then the first one's file goes */
    CHECK_INT_EQ(put_weights("second", p, SEEDS[0]), 0);
    CHECK_MSG(wait_version(&d, false, "second", 1, "READY", 20) >= 0,
              "the poll did not find a new file");
    CHECK_INT_EQ(unlink(model_file), 0);
    char state[32], reason[512];
    long v;
    double t0 = h_now();
    while (index_entry(&d, false, "m", state, reason, sizeof reason, &v) && h_now() - t0 < 20)
        usleep(20000);
    CHECK_MSG(!index_entry(&d, false, "m", state, reason, sizeof reason, &v),
              "m is still in the index after its file was removed");
    http_resp r;
    http_post_json(&d, "/attend", attend_body, &r);
    check_error(&r, 404, "model_not_found", "'m'");
    http_resp_free(&r);
    char *log = daemon_log(&d);
    CHECK_STR_CONTAINS(log, "not served any more");
    free(log);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    char second[256];
    snprintf(second, sizeof second, "%s/second.safetensors", moddir);
    unlink(second);
}

/* ------------------------------------- 3b. a refused option change */

/* A config file's model given num_heads 8 where its file says 4: the
 * reload is refused and the version loaded with 4 serves on, UNAVAILABLE
 * with the reason; a second SIGHUP with nothing changed must not call it
 * READY (the file is the one serving, but not under these options);
 * putting 4 back makes it READY. */
static void write_config(const char *path, int heads) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "{\"models\": [{\"name\": \"c\", \"path\": \"%s\", \"num_heads\": %d}]}\n",
            model_file, heads);
    fclose(f);
}

static void test_option_change(const params *p) {
    CHECK_INT_EQ(put_weights("m", p, SEEDS[0]), 0);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/../c.json", moddir);
    write_config(cfg, p->H);
    const char *args[] = {"--config", cfg, NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon did not start with a config file");
        unlink(cfg);
        return;
    }
    char state[32], reason[1024];
    long v = 0;
    CHECK(index_entry(&d, false, "c", state, reason, sizeof reason, &v));
    CHECK_STR_EQ(state, "READY");
    write_config(cfg, 2 * p->H);
    for (int round = 0; round < 2; round++) {
        kill(d.pid, SIGHUP);
        if (round == 0)
            CHECK_MSG(wait_version(&d, false, "c", 1, "UNAVAILABLE", 30) >= 0,
                      "c did not turn UNAVAILABLE under num_heads %d", 2 * p->H);
        else
            usleep(500000);
        CHECK(index_entry(&d, false, "c", state, reason, sizeof reason, &v));
        CHECK_MSG(!strcmp(state, "UNAVAILABLE"),
                  "SIGHUP %d after a refused num_heads: state %s (reason '%s')", round + 1, state,
                  reason);
        CHECK_STR_CONTAINS(reason, "num_heads");
        CHECK_INT_EQ(v, 1);
    }
    write_config(cfg, p->H);
    kill(d.pid, SIGHUP);
    CHECK_MSG(wait_version(&d, false, "c", 1, "READY", 30) >= 0,
              "c did not turn READY with its options back");
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    unlink(cfg);
}

/* --------------------------------------------------- 4. directory names */

static void test_dir_names(const params *p) {
    CHECK_INT_EQ(put_weights("m", p, SEEDS[0]), 0);
    const char *odd[] = {"bad name.safetensors", ".hidden.safetensors", "notes.txt",
                         ".safetensors"};
    char path[256];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", moddir, odd[i]);
        CHECK_INT_EQ(write_mha_weights(path, p->E, p->H, 9u), 0);
    }
    const char *args[] = {"--model-dir", moddir, "--model", "demo=config/weights/demo.safetensors",
                          NULL};
    daemon_proc d;
    if (daemon_start(&d, args) == 0) {
        http_resp r;
        post(&d, "/v2/repository/index", NULL, false, &r);
        CHECK_INT_EQ(r.status, 200);
        json_t *root = json_loadb(r.body, r.len, 0, NULL);
        CHECK_INT_EQ(json_array_size(root), 2);
        CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(root, 0), "name")), "demo");
        CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(root, 1), "name")), "m");
        json_decref(root);
        http_resp_free(&r);
        char *log = daemon_log(&d);
        CHECK_STR_CONTAINS(log, "bad name.safetensors is not served");
        free(log);
        CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    } else {
        CHECK_MSG(0, "daemon did not start with a model directory");
    }
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", moddir, odd[i]);
        unlink(path);
    }

    /* the same name from the directory and from --model: exit 1, both named */
    const char *bin =
        getenv("ATTN_SERVER_BIN") ? getenv("ATTN_SERVER_BIN") : "bin/attention-server";
    char cmd[1024], out[4096] = "";
    snprintf(cmd, sizeof cmd,
             "%s --model-dir %s --model m=config/weights/demo.safetensors --port 0 2>&1", bin,
             moddir);
    FILE *f = popen(cmd, "r");
    size_t got = fread(out, 1, sizeof out - 1, f);
    out[got] = '\0';
    int st = pclose(f);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "a name given twice: exit status %d", st);
    CHECK_STR_CONTAINS(out, "model 'm' is given twice");
    CHECK_STR_CONTAINS(out, model_file);
    CHECK_STR_CONTAINS(out, "config/weights/demo.safetensors");
    CHECK_STR_CONTAINS(out, "--model-dir");
}

/* ------------------------------------------------ 5. the repository API */

static void test_repository_api(const params *p) {
    CHECK_INT_EQ(put_weights("m", p, SEEDS[0]), 0);
    char keyfile[256];
    snprintf(keyfile, sizeof keyfile, "%s/key", moddir);
    FILE *kf = fopen(keyfile, "w");
    fputs("reload-test-key\n", kf);
    fclose(kf);
    const char *args[] = {"--model-dir",
                          moddir,
                          "--model",
                          "demo=config/weights/demo.safetensors",
                          "--model-control",
                          "explicit",
                          "--api-key-file",
                          keyfile,
                          NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon did not start");
        return;
    }
    const char *keyed[] = {KEY_HDR, "Content-Type: application/json", NULL};
    http_resp r;

    /* the key: on the index, load and unload */
    CHECK_INT_EQ(post(&d, "/v2/repository/index", NULL, false, &r), 401);
    http_resp_free(&r);
    CHECK_INT_EQ(post(&d, "/v2/repository/models/m/unload", NULL, false, &r), 401);
    http_resp_free(&r);
    CHECK_INT_EQ(post(&d, "/v2/repository/models/m/load", NULL, false, &r), 401);
    http_resp_free(&r);

    /* the index, whole and ready-only; its body is checked */
    CHECK_INT_EQ(post(&d, "/v2/repository/index", NULL, true, &r), 200);
    CHECK_STR_CONTAINS(r.body,
                       "{\"name\":\"demo\",\"version\":\"1\",\"state\":\"READY\",\"reason\":\"\"");
    http_resp_free(&r);
    post_expect(&d, "/v2/repository/index", "{\"ready\":\"yes\"}", true, 400, "invalid_request",
                "ready");
    post_expect(&d, "/v2/repository/index", "{\"repository\":\"x\"}", true, 400, "invalid_request",
                "'repository'");

    /* unload: 404 for infer and metadata; SIGHUP leaves it unloaded */
    CHECK_INT_EQ(post(&d, "/v2/repository/models/m/unload",
                      "{\"parameters\":{\"unload_dependents\":true}}", true, &r),
                 200);
    CHECK_STR_CONTAINS(r.body, "\"state\":\"UNAVAILABLE\"");
    http_resp_free(&r);
    const char *infer_paths[] = {"/attend", "/v2/models/m/infer"};
    for (int k = 0; k < 2; k++) {
        http_do(&d, "POST", infer_paths[k], keyed, k ? v2_body : attend_body,
                strlen(k ? v2_body : attend_body), &r);
        check_error(&r, 404, "model_not_found", "unloaded");
        http_resp_free(&r);
    }
    const char *meta_paths[] = {"/v2/models/m", "/v2/models/m/ready", "/v1/models/m",
                                "/v2/models/m/versions/1"};
    for (int k = 0; k < 4; k++) {
        http_do(&d, "GET", meta_paths[k], keyed, NULL, 0, &r);
        check_error(&r, 404, "model_not_found", "'m'");
        http_resp_free(&r);
    }
    char state[32], reason[512];
    long v;
    CHECK(index_entry(&d, true, "m", state, reason, sizeof reason, &v));
    CHECK_STR_EQ(state, "UNAVAILABLE");
    CHECK_STR_CONTAINS(reason, "unloaded");
    CHECK_INT_EQ(v, 0);
    post(&d, "/v2/repository/index", "{\"ready\":true}", true, &r);
    CHECK_MSG(!strstr(r.body, "\"m\""), "ready index lists m: %s", r.body);
    http_resp_free(&r);
    kill(d.pid, SIGHUP);
    usleep(300000);
    http_do(&d, "POST", "/attend", keyed, attend_body, strlen(attend_body), &r);
    CHECK_INT_EQ(r.status, 404);
    http_resp_free(&r);

    /* load brings it back, as the next version, with its numbers */
    CHECK_INT_EQ(post(&d, "/v2/repository/models/m/load", NULL, true, &r), 200);
    CHECK_STR_CONTAINS(r.body, "\"state\":\"READY\"");
    CHECK_STR_CONTAINS(r.body, "\"version\":2");
    http_resp_free(&r);
    http_do(&d, "POST", "/attend", keyed, attend_body, strlen(attend_body), &r);
    CHECK_INT_EQ(r.status == 200 ? classify(p, r.body, r.len, false, 2) : -2, 0);
    http_resp_free(&r);

    /* no model at all: not ready, until one is loaded again */
    post(&d, "/v2/repository/models/m/unload", NULL, true, &r);
    http_resp_free(&r);
    post(&d, "/v2/repository/models/demo/unload", NULL, true, &r);
    http_resp_free(&r);
    http_do(&d, "GET", "/readyz", NULL, NULL, 0, &r);
    check_error(&r, 503, "not_ready", "no model is loaded");
    http_resp_free(&r);
    CHECK_INT_EQ(post(&d, "/v2/repository/models/demo/load", "{}", true, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/readyz", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);

    /* what a load refuses: unknown names, paths, files or settings in the request */
    post_expect(&d, "/v2/repository/models/nosuch/load", NULL, true, 404, "model_not_found",
                "nosuch.safetensors");
    post_expect(&d, "/v2/repository/models/nosuch/unload", NULL, true, 404, "model_not_found",
                "'nosuch'");
    const char *pathy[] = {"..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "a%2Fb", "..", "."};
    for (int k = 0; k < 5; k++) {
        char path[256];
        snprintf(path, sizeof path, "/v2/repository/models/%s/load", pathy[k]);
        struct curl_slist *h = curl_slist_append(NULL, KEY_HDR);
        CURL *c = http_easy(&d, "POST", path, h, "", 0, &r);
        curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L); /* send "..", not what it resolves to */
        http_finish(c, &r, curl_easy_perform(c));
        curl_slist_free_all(h);
        check_error(&r, 400, "invalid_request", "model (in the path)");
        http_resp_free(&r);
    }
    /* a body of 64 KiB and more is no repository request */
    char *huge = malloc(70000);
    memset(huge, ' ', 69998);
    memcpy(huge, "{}", 2);
    huge[69999] = '\0';
    huge[69998] = ' ';
    post_expect(&d, "/v2/repository/index", huge, true, 413, "payload_too_large", "at most 65536");
    free(huge);
    post_expect(&d, "/v2/repository/models/m/load", "{\"parameters\":{\"config\":\"{}\"}}", true,
                400, "invalid_request", "parameters.config");
    post_expect(&d, "/v2/repository/models/m/load",
                "{\"parameters\":{\"file:1/model.safetensors\":\"AAAA\"}}", true, 400,
                "invalid_request", "parameters.file:1/model.safetensors");
    post_expect(&d, "/v2/repository/models/m/load", "[1]", true, 400, "invalid_request",
                "request body");

    /* a load that fails: 400 model_load_failed, and the index says why */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/.m.tmp", moddir);
    FILE *f = fopen(tmp, "w");
    fputs("not a safetensors file", f);
    fclose(f);
    rename(tmp, model_file);
    post_expect(&d, "/v2/repository/models/m/load", NULL, true, 400, "model_load_failed",
                model_file);
    CHECK(index_entry(&d, true, "m", state, reason, sizeof reason, &v));
    CHECK_STR_EQ(state, "UNAVAILABLE");
    check_promtool(&d);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);

    /* without --model-control explicit: 403, the index still answers */
    CHECK_INT_EQ(put_weights("m", p, SEEDS[0]), 0);
    const char *args2[] = {"--model-dir", moddir, NULL};
    if (daemon_start(&d, args2)) {
        CHECK_MSG(0, "daemon did not start");
        return;
    }
    post_expect(&d, "/v2/repository/models/m/load", NULL, false, 403, "forbidden",
                "--model-control explicit");
    post_expect(&d, "/v2/repository/models/m/unload", NULL, false, 403, "forbidden",
                "explicit model load / unload is not allowed");
    CHECK_INT_EQ(post(&d, "/v2/repository/index", NULL, false, &r), 200);
    http_resp_free(&r);
    http_do(&d, "GET", "/v2", NULL, NULL, 0, &r);
    CHECK_STR_CONTAINS(r.body, "\"model_repository\"");
    http_resp_free(&r);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    unlink(keyfile);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    curl_global_init(CURL_GLOBAL_ALL);
    const char *b = getenv("ATTN_RELOAD_BENCH");
    params p = {.E = 64, .H = 4, .n = 4, .clients = 8, .swaps = 6};
    if (b && *b && strcmp(b, "0"))
        p = (params){.E = 1024, .H = 16, .n = 8, .clients = 64, .swaps = 20, .bench = true};
    char tmpdir[96];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn-reload-%d", (int)getpid());
    snprintf(moddir, sizeof moddir, "%s/models", tmpdir);
    snprintf(model_file, sizeof model_file, "%s/m.safetensors", moddir);
    mkdir(tmpdir, 0700);
    mkdir(moddir, 0700);
    make_bodies(&p);
    for (int i = 0; i < 3; i++) {
        ref[i] = malloc((size_t)p.n * (size_t)p.E * sizeof **ref);
        if (reference(&p, SEEDS[i], ref[i])) return check_exit();
    }

    CHECK_INT_EQ(put_weights("m", &p, SEEDS[0]), 0);
    const char *args[] = {"--model-dir", moddir, "--threads", "2", "--max-queue", "4096", NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon did not start");
        return check_exit();
    }
    CHECK_INT_EQ(probe_numbers(&d, &p, 2), 0);
    if (p.bench) test_idle_swaps(&p, &d, 5);
    test_under_load(&p, &d);
    if (!p.bench) test_truncated(&p, &d);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 60), 0);
    if (!p.bench) {
        test_poll(&p);
        test_option_change(&p);
        test_dir_names(&p);
        test_repository_api(&p);
    }
    unlink(model_file);
    rmdir(moddir);
    rmdir(tmpdir);
    free(X);
    free(attend_body);
    free(v2_body);
    for (int i = 0; i < 3; i++) free(ref[i]);
    curl_global_cleanup();
    return check_exit();
}
