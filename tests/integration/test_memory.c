/* test_memory.c - the memory budget against hostile and unlucky clients.
 *
 * The real daemon on the demo weights with --max-memory-bytes 256 MiB:
 *   - slow readers: 8 clients each ask for a 1024-token request's per-head
 *     weights as float JSON (a ~50 MB answer; ~85 MB reserved from its
 *     shapes) and never read a byte (their receive buffers are kept small);
 *   - stalled uploads: 8 clients announce 64 MiB bodies, send 2 MiB, stall;
 *   - both at once.
 * While they hang on: the bytes held (the /metrics gauge) never pass the
 * budget; the process's resident memory stays within the budget plus the
 * fixed allowance (budget.h) plus the weights; /healthz answers within a
 * second; a good client's request gets 200, or 503 with Retry-After, never a
 * hang; refusals are counted by cause. After they leave: the bytes held
 * return to exactly zero and a large request succeeds.
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "check.h"
#include "harness.h"
#include "rawsock.h"

#define BUDGET_MIB 256
#define ALLOWANCE_MIB 160 /* BUDGET_ALLOWANCE in server/budget.h */

static double metric_value(const daemon_proc *d, const char *name) {
    return daemon_metric(d, name, NULL);
}

/* A "Vm...:" field of /proc/PID/status in KiB ("VmRSS:", "VmHWM:"), or -1. */
static long status_kib(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl)) v = atol(line + fl);
    if (f) fclose(f);
    return v;
}

/* A connection with a small receive buffer, so an unread answer stays in
 * the server rather than in this process's socket. */
static int small_conn(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

static char *big_request(int n, size_t *len) {
    size_t cap = (size_t)n * 64 * 8 + 256;
    char *b = malloc(cap), *p = b;
    p += sprintf(p, "{\"embeddings\":[");
    unsigned s = 1;
    for (int i = 0; i < n; i++) {
        *p++ = i ? ',' : '[';
        if (i) *p++ = '[';
        for (int j = 0; j < 64; j++) {
            s = s * 1664525u + 1013904223u;
            p += sprintf(p, j ? ",%.2f" : "%.2f", (double)(s >> 8) / (1u << 24) - 0.5);
        }
        *p++ = ']';
    }
    p += sprintf(p, "]}");
    *len = (size_t)(p - b);
    char *req = malloc(*len + 256);
    int h = sprintf(req,
                    "POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    *len);
    memcpy(req + h, b, *len);
    free(b);
    *len += (size_t)h;
    return req;
}

typedef struct pressure {
    int readers[8], uploads[8];
} pressure;

static void open_readers(const daemon_proc *d, pressure *p, const char *req, size_t len) {
    for (int i = 0; i < 8; i++) {
        p->readers[i] = small_conn(d->port);
        if (p->readers[i] >= 0) raw_send(p->readers[i], req, len);
    }
}

static void open_uploads(const daemon_proc *d, pressure *p) {
    static char chunk[1 << 16];
    memset(chunk, ' ', sizeof chunk);
    for (int i = 0; i < 8; i++) {
        p->uploads[i] = small_conn(d->port);
        if (p->uploads[i] < 0) continue;
        char head[256];
        snprintf(head, sizeof head,
                 "POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\n\r\n",
                 64 << 20);
        raw_send_str(p->uploads[i], head);
        for (int k = 0; k < 32; k++) /* 2 MiB, then nothing more */
            if (raw_send(p->uploads[i], chunk, sizeof chunk)) break;
    }
}

static void close_all(pressure *p) {
    for (int i = 0; i < 8; i++) {
        if (p->readers[i] >= 0) close(p->readers[i]);
        if (p->uploads[i] >= 0) close(p->uploads[i]);
        p->readers[i] = p->uploads[i] = -1;
    }
}

/* Under pressure: budget, RSS, liveness, a good client. */
static void check_under_pressure(const daemon_proc *d, const char *what) {
    double held = 0, peak = 0;
    long rss_peak = 0;
    for (int i = 0; i < 20; i++) { /* 2 s of watching */
        held = metric_value(d, "attention_server_memory_held_bytes");
        if (held > peak) peak = held;
        long rss = status_kib(d->pid, "VmRSS:");
        if (rss > rss_peak) rss_peak = rss;
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    CHECK_MSG(peak <= (double)BUDGET_MIB * 1048576.0, "%s: %.0f bytes held, over the budget", what,
              peak);
    CHECK_MSG(peak > 0, "%s: nothing held while clients hang on", what);
    bool sanitized = getenv("ATTN_SANITIZER") && *getenv("ATTN_SANITIZER");
    long limit_kib = (BUDGET_MIB + ALLOWANCE_MIB) * 1024L;
    if (sanitized) /* shadow memory and quarantine: the RSS bound is not the product's */
        printf("%s: peak RSS %ld MiB (not checked under a sanitizer)\n", what, rss_peak / 1024);
    else
        CHECK_MSG(rss_peak <= limit_kib, "%s: peak RSS %ld MiB, over budget + allowance (%ld MiB)",
                  what, rss_peak / 1024, limit_kib / 1024);
    http_resp r;
    double t0 = h_now();
    CHECK_INT_EQ(http_do(d, "GET", "/healthz", NULL, NULL, 0, &r), 200);
    double live = h_now() - t0;
    if (sanitized)
        printf("%s: /healthz in %.3f s\n", what, live);
    else
        CHECK_MSG(live < 1.0, "%s: /healthz took %.3f s", what, live);
    http_resp_free(&r);
    const char *small = "{\"embeddings\":[[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.1,0.2,0.3,0.4,0.5,"
                        "0.6,0.7,0.8,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.1,0.2,0.3,0.4,0.5,0.6,0.7,"
                        "0.8,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.1,"
                        "0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8]]}";
    long st = http_post_json(d, "/attend", small, &r);
    char ra[16];
    CHECK_MSG(st == 200 || (st == 503 && resp_header(&r, "Retry-After", ra, sizeof ra)),
              "%s: a good client got %ld", what, st);
    http_resp_free(&r);
    printf("%s: peak held %.1f MiB of %d, peak RSS %ld MiB, /healthz %.3f s, good client %ld\n",
           what, peak / 1048576.0, BUDGET_MIB, rss_peak / 1024, live, st);
}

/* The bytes the budget holds once they drop to 0, or after 10 s: a
 * request's bytes go back when the server has finished with its connection
 * (the last of the answer written, or the closed connection noticed),
 * which a client that has read the whole answer can see a moment before. */
static double held_settled(const daemon_proc *d) {
    double held = -1;
    for (int i = 0; i < 100; i++) {
        held = metric_value(d, "attention_server_memory_held_bytes");
        if (held == 0) break;
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return held;
}

static void check_recovery(const daemon_proc *d, const char *what, const char *req, size_t len) {
    const double held = held_settled(d);
    CHECK_MSG(held == 0, "%s: %.0f bytes still held after the clients left", what, held);
    /* a large request, read in full, now succeeds */
    raw_reply rep;
    int rc = raw_exchange(d->port, req, len, 1, 60, &rep);
    CHECK_MSG(rc == 0 && raw_status(&rep, 0) == 200, "%s: a large request after recovery: %d",
              what, rc ? -1 : raw_status(&rep, 0));
    raw_reply_free(&rep);
}

/* The text of an answer that also has a binary output is written at once
 * (its header's length goes first), so it must be reserved whole. A v2
 * request of [4096,8,64] binary embeddings asking for the output in JSON
 * (~24 MB of text; its raw floats 8 MiB) and top-1 indices: all in JSON,
 * the output is written as it is read and fits a 64 MiB budget; with the
 * indices in binary, the whole text would be held and does not: 503. All
 * binary fits again. (4096 sequences of 8 tokens: little to compute, so
 * that sanitizer builds run it in seconds.) */
static void check_small_budget(void) {
    daemon_proc d;
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--max-memory-bytes",
                          "67108864", "--threads", "2", "--max-batch", "4096", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon with a 64 MiB budget did not start");
        return;
    }
    const size_t count = (size_t)4096 * 8 * 64, raw = count * sizeof(float);
    float *x = malloc(raw);
    for (size_t i = 0; i < count; i++) x[i] = (float)((i * 7919) % 2001) * 1e-3f - 1.0f;
    static const char *const forms[3][2] = {{"", ""},
                                            {"", ",\"parameters\":{\"binary_data\":true}"},
                                            {",\"parameters\":{\"binary_data\":true}",
                                             ",\"parameters\":{\"binary_data\":true}"}};
    static const long want[3] = {200, 503, 200};
    static const char *const name[3] = {"all JSON", "JSON output, binary indices", "all binary"};
    for (int f = 0; f < 3; f++) {
        char head[1024], hl[96];
        int n = snprintf(head, sizeof head,
                         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4096,8,64],"
                         "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":%zu}}],"
                         "\"parameters\":{\"weights_topk\":1},\"outputs\":[{\"name\":\"output\"%s},"
                         "{\"name\":\"attention_topk_indices\"%s}]}",
                         raw, forms[f][0], forms[f][1]);
        char *body = malloc((size_t)n + raw);
        memcpy(body, head, (size_t)n);
        memcpy(body + n, x, raw);
        snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %d", n);
        const char *h[] = {"Content-Type: application/octet-stream", hl, NULL};
        http_resp r;
        long st = http_do(&d, "POST", "/v2/models/demo/infer", h, body, (size_t)n + raw, &r);
        CHECK_MSG(st == want[f], "%s, budget 64 MiB: status %ld, want %ld: %.200s", name[f], st,
                  want[f], r.body ? r.body : "");
        if (want[f] == 503 && st == 503) CHECK_STR_CONTAINS(r.body, "memory");
        http_resp_free(&r);
        free(body);
    }
    free(x);
    /* The JSON parse counts too (~40 bytes a number: the parser's stacks and
     * the document): 8 MiB of "0," (4 M numbers, ~170 MB to parse) is
     * refused by the 64 MiB budget, and the process never holds it; a
     * [512,64] float JSON request still passes. */
    const size_t zn = (size_t)4 << 20;
    char *zb = malloc(2 * zn + 32), *o = zb;
    o += sprintf(o, "{\"embeddings\":[");
    for (size_t i = 0; i < zn; i++) *o++ = '0', *o++ = ',';
    o[-1] = ']';
    *o++ = '}';
    const char *hj[] = {"Content-Type: application/json", NULL};
    http_resp r;
    http_do(&d, "POST", "/attend", hj, zb, (size_t)(o - zb), &r);
    check_error(&r, 503, "overloaded", "parsing this JSON");
    http_resp_free(&r);
    free(zb);
    char *big = malloc((size_t)512 * 64 * 12 + 64);
    o = big + sprintf(big, "{\"embeddings\":[");
    for (int i = 0; i < 512; i++) {
        *o++ = '[';
        for (int j = 0; j < 64; j++) o += sprintf(o, j ? ",%.4f" : "%.4f", 0.001 * ((i * 64 + j) % 997));
        *o++ = ']';
        *o++ = i < 511 ? ',' : ']';
    }
    *o++ = '}';
    CHECK_INT_EQ(http_do(&d, "POST", "/attend", hj, big, (size_t)(o - big), &r), 200);
    http_resp_free(&r);
    free(big);
    long hwm = status_kib(d.pid, "VmHWM:");
    printf("64 MiB budget: peak RSS %ld MiB after the mixed answers and the 8 MiB body of zeros\n",
           hwm / 1024);
    if (!(getenv("ATTN_SANITIZER") && *getenv("ATTN_SANITIZER"))) /* shadow memory: not ours */
        CHECK_MSG(hwm > 0 && hwm / 1024 <= 64 + ALLOWANCE_MIB, "peak RSS %ld MiB, over %d",
                  hwm / 1024, 64 + ALLOWANCE_MIB);
    const double held = held_settled(&d);
    CHECK_MSG(held == 0, "%.0f bytes held after the mixed answers", held);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 60), 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    daemon_proc d;
    char budget[32];
    snprintf(budget, sizeof budget, "%d", BUDGET_MIB << 20);
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--max-memory-bytes",
                          budget, "--threads", "2", "--body-timeout-ms", "120000", NULL};
    if (daemon_start(&d, args)) return check_exit();
    size_t len;
    char *req = big_request(1024, &len);
    pressure p;
    for (int i = 0; i < 8; i++) p.readers[i] = p.uploads[i] = -1;

    open_readers(&d, &p, req, len);
    check_under_pressure(&d, "8 slow readers of ~50 MB answers");
    close_all(&p);
    check_recovery(&d, "slow readers", req, len);

    open_uploads(&d, &p);
    check_under_pressure(&d, "8 stalled 64 MiB uploads");
    close_all(&p);
    check_recovery(&d, "stalled uploads", req, len);

    open_readers(&d, &p, req, len);
    open_uploads(&d, &p);
    check_under_pressure(&d, "both at once");
    close_all(&p);
    check_recovery(&d, "both", req, len);

    const double refused = held_settled(&d);
    CHECK_MSG(refused == 0, "held %.0f at the end", refused);
    http_resp r;
    http_do(&d, "GET", "/metrics", NULL, NULL, 0, &r);
    CHECK_STR_CONTAINS(r.body, "attention_server_memory_budget_bytes 268435456");
    CHECK_MSG(strstr(r.body, "attention_server_memory_refusals_total{cause=\"body\"} 0") == NULL,
              "the stalled uploads were never refused");
    http_resp_free(&r);
    free(req);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 60), 0);
    check_small_budget();
    curl_global_cleanup();
    return check_exit();
}
