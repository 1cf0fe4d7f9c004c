/* test_slow.c - slow and vanishing clients.
 *
 * 1. Slowloris: clients that send headers, or a body, one byte every
 *    100 ms, re-connecting as soon as they are cut, while good requests run
 *    from the main thread. Good requests keep their latency (p95 under
 *    10 x the quiet median + 0.5 s, none stalled) and their exact answer;
 *    every slow connection is cut by body_timeout_ms (2 s here) + 1.5 s.
 * 2. Clients that disconnect mid-body and mid-compute, a thousand times:
 *    afterwards the in-flight gauge is back to its quiet value and the
 *    daemon's RSS grew by less than 20 MB.
 * 3. More idle connections than --max-connections: the extra ones are
 *    refused or closed, idle ones are cut at the deadline, and after they
 *    are gone the daemon serves again.
 *
 * Cases that once failed because of daemon or libmicrohttpd bugs were
 * fixed in the daemon since; the checks stay.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "check.h"
#include "harness.h"
#include "rawsock.h"

#define BODY_TIMEOUT_S 2.0
#define CUT_SLACK_S 1.5


/* ------------------------------------------------------------ helpers */

static char *make_request(int n, int E) {
    size_t cap = (size_t)n * (size_t)E * 16 + 256, k = 0;
    char *p = malloc(cap);
    k += (size_t)snprintf(p + k, cap - k, "{\"model\":\"demo\",\"need_weights\":false,\"embeddings\":[");
    for (int i = 0; i < n; i++) {
        p[k++] = i ? ',' : '[';
        if (i) p[k++] = '[';
        for (int j = 0; j < E; j++)
            k += (size_t)snprintf(p + k, cap - k, j ? ",%.4g" : "%.4g", ((i * 31 + j * 7) % 19 - 9) / 7.0);
        p[k++] = ']';
    }
    k += (size_t)snprintf(p + k, cap - k, "]}");
    return p;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? v[n / 2] : 0;
}

static double metric(const daemon_proc *d, const char *name) { return daemon_metric(d, name, NULL); }

static long rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* Is the daemon still running? (reaps it, and forgets its pid, if not) */
static bool alive(daemon_proc *d) {
    int st;
    if (d->pid && waitpid(d->pid, &st, WNOHANG) == d->pid) {
        char *log = daemon_log(d);
        size_t n = strlen(log);
        fprintf(stderr, "daemon died (status %d); log tail:\n%s\n", st, log + (n > 3000 ? n - 3000 : 0));
        free(log);
        d->pid = 0;
    }
    return d->pid != 0;
}

/* ---------------------------------------------------------- slowloris */

#define NSLOW 16

typedef struct slow_conn {
    int fd;
    bool body;       /* drips a body (else drips header lines) */
    double t_open;   /* when connected */
    size_t sent;
} slow_conn;

typedef struct slow_stats {
    const daemon_proc *d;
    atomic_int stop;
    int cut;             /* connections the server closed */
    double worst_life;   /* longest time a connection lived before the server cut it */
    int late;            /* connections alive past the deadline + slack */
    int connect_fail;
    int bytes;
} slow_stats;

static void slow_open(slow_stats *st, slow_conn *c, bool body) {
    c->fd = raw_connect(st->d->port);
    c->body = body;
    c->t_open = h_now();
    c->sent = 0;
    if (c->fd < 0) {
        st->connect_fail++;
        return;
    }
    if (body)
        raw_send_str(c->fd, "POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: 100000\r\n\r\n");
    else
        raw_send_str(c->fd, "POST /attend HTTP/1.1\r\nHost: x\r\n");
}

static void *slow_main(void *arg) {
    slow_stats *st = arg;
    slow_conn c[NSLOW];
    for (int i = 0; i < NSLOW; i++) slow_open(st, &c[i], i % 2 == 1);
    while (!atomic_load(&st->stop)) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double now = h_now();
        for (int i = 0; i < NSLOW; i++) {
            if (c[i].fd < 0) {
                slow_open(st, &c[i], c[i].body);
                continue;
            }
            bool closed = raw_peer_closed(c[i].fd);
            if (!closed) {
                /* one byte: a space in the body, or part of "X-a: b\r\n" */
                static const char hdr[] = "X-a: b\r\n";
                char b = c[i].body ? ' ' : hdr[c[i].sent % (sizeof hdr - 1)];
                closed = raw_send(c[i].fd, &b, 1) != 0;
                if (!closed) {
                    c[i].sent++;
                    st->bytes++;
                }
            }
            double life = now - c[i].t_open;
            if (closed) {
                st->cut++;
                if (life > st->worst_life) st->worst_life = life;
                if (life > BODY_TIMEOUT_S + CUT_SLACK_S) st->late++;
                close(c[i].fd);
                slow_open(st, &c[i], c[i].body);
            }
        }
    }
    double now = h_now();
    for (int i = 0; i < NSLOW; i++) {
        if (c[i].fd < 0) continue;
        double life = now - c[i].t_open;
        if (!raw_peer_closed(c[i].fd) && life > BODY_TIMEOUT_S + CUT_SLACK_S) st->late++;
        close(c[i].fd);
    }
    return NULL;
}

static void test_slowloris(const daemon_proc *d, const char *good, const http_resp *ref) {
    /* quiet baseline */
    double lat[20];
    int nq = 0;
    for (int i = 0; i < 20; i++) {
        http_resp r;
        http_post_json(d, "/attend", good, &r);
        CHECK_INT_EQ(r.status, 200);
        lat[nq++] = r.total_s;
        http_resp_free(&r);
    }
    double base = median(lat, nq);

    slow_stats st;
    memset(&st, 0, sizeof st);
    st.d = d;
    pthread_t th;
    pthread_create(&th, NULL, slow_main, &st);
    /* good traffic for 6 s: three deadlines' worth of slow clients */
    enum { MAXL = 4096 };
    double *under_lat = malloc(MAXL * sizeof *under_lat), until = h_now() + 6.0, worst = 0;
    int n = 0, bad = 0;
    while (h_now() < until && n < MAXL) {
        http_resp r;
        http_post_json(d, "/attend", good, &r);
        bool same = r.status == 200 && r.len == ref->len && !memcmp(r.body, ref->body, r.len);
        if (!same) bad++;
        if (r.total_s > worst) worst = r.total_s;
        under_lat[n++] = r.total_s;
        http_resp_free(&r);
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    atomic_store(&st.stop, 1);
    pthread_join(th, NULL);
    double under = median(under_lat, n), p95 = n ? under_lat[(n * 95) / 100] : 0; /* sorted by median() */
    double bound = 10 * base + 0.5;
    printf("slowloris: quiet median %.1f ms; under %d slow clients: %d requests, median %.1f ms, p95 %.1f ms, "
           "worst %.1f ms; %d slow connections cut (longest lived %.2f s), %d bytes dripped\n",
           base * 1e3, NSLOW, n, under * 1e3, p95 * 1e3, worst * 1e3, st.cut, st.worst_life, st.bytes);
    CHECK_MSG(n >= 10, "only %d good requests in 6 s", n);
    CHECK_MSG(bad == 0, "%d of %d good requests failed or changed under slow clients", bad, n);
    /* p95 against the bound; the single worst only against a stall (one
     * unlucky scheduling slice on a shared 2-core machine is not a bug) */
    CHECK_MSG(p95 < bound, "p95 good latency %.3f s under slow clients (bound %.3f s = 10 x quiet median %.4f s + 0.5 s)",
              p95, bound, base);
    CHECK_MSG(worst < bound + 1.5, "a good request took %.3f s under slow clients", worst);
    free(under_lat);
    CHECK_MSG(st.cut >= NSLOW, "the server cut %d slow connections in 6 s (expected >= %d)", st.cut, NSLOW);
    CHECK_MSG(st.late == 0, "%d slow connections lived past body_timeout + %.1f s (longest %.2f s)", st.late,
              CUT_SLACK_S, st.worst_life);
    CHECK_MSG(st.worst_life > BODY_TIMEOUT_S - 0.5,
              "slow connections were cut after %.2f s, before the %.1f s deadline", st.worst_life,
              BODY_TIMEOUT_S);
    CHECK_INT_EQ(st.connect_fail, 0);
}

/* -------------------------------------------------------- disconnects */

/* A whole HTTP request (headers + body) for POST /attend. */
typedef struct wire_req {
    char *p;
    size_t len, head_len;
} wire_req;

static wire_req wire(int n, int E) {
    char *body = make_request(n, E), head[256];
    size_t bl = strlen(body);
    int hl = snprintf(head, sizeof head,
                      "POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n", bl);
    wire_req w = {malloc((size_t)hl + bl), (size_t)hl + bl, (size_t)hl};
    memcpy(w.p, head, (size_t)hl);
    memcpy(w.p + hl, body, bl);
    free(body);
    return w;
}

typedef struct churn_arg {
    const daemon_proc *d;
    const wire_req *big;   /* left mid-body */
    const wire_req *small; /* sent whole, left while it computes */
    int rounds;
    int seed;
    int connect_fail;
} churn_arg;

/* Each round: one client that leaves mid-body, one that sends everything and
 * leaves while its request computes; half with a FIN, half with an RST. */
static void *churn_main(void *arg) {
    churn_arg *a = arg;
    unsigned s = (unsigned)a->seed * 2654435761u + 1;
    for (int i = 0; i < a->rounds; i++) {
        s = s * 1103515245u + 12345u;
        int fd = raw_connect(a->d->port);
        if (fd < 0) {
            a->connect_fail++;
            continue;
        }
        size_t cut = a->big->head_len + (s >> 8) % (a->big->len - a->big->head_len);
        raw_send(fd, a->big->p, cut);
        if (i % 2) raw_abort(fd);
        else close(fd);

        fd = raw_connect(a->d->port);
        if (fd < 0) {
            a->connect_fail++;
            continue;
        }
        raw_send(fd, a->small->p, a->small->len);
        if (i % 3 == 1) {
            struct timespec nap = {0, (long)((s >> 4) % 3000) * 1000};
            nanosleep(&nap, NULL);
        }
        if (i % 2) raw_abort(fd);
        else close(fd);
    }
    return NULL;
}

/* Seconds until the in-flight gauge is back to `quiet` (polled every
 * 50 ms), or -1 after `limit` seconds; *last gets the last value seen. */
static double settle(const daemon_proc *d, double quiet, double limit, double *last) {
    double t0 = h_now();
    while (h_now() - t0 < limit) {
        *last = metric(d, "attention_server_in_flight_requests");
        if (*last == quiet) return h_now() - t0;
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return -1;
}

/* 4 threads x rounds x 2 clients; returns connect failures. */
static int churn(const daemon_proc *d, const wire_req *big, const wire_req *small, int rounds, int seed) {
    enum { NT = 4 };
    churn_arg a[NT];
    pthread_t th[NT];
    int fails = 0;
    for (int i = 0; i < NT; i++) {
        a[i] = (churn_arg){d, big, small, rounds, seed + i, 0};
        pthread_create(&th[i], NULL, churn_main, &a[i]);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        fails += a[i].connect_fail;
    }
    return fails;
}

/* Is the process built with a sanitizer runtime (its RSS means little)? */
static bool sanitized(pid_t pid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    bool san = false;
    while (f && !san && fgets(line, sizeof line, f)) san = strstr(line, "libasan") || strstr(line, "libtsan");
    if (f) fclose(f);
    return san;
}

static void test_disconnects(daemon_proc *d, const char *good, const http_resp *ref, double quiet) {
    /* mid-body clients leave a body of ~45 KB (320 tokens of E=64) part
     * way; mid-compute clients send 48 tokens whole and leave */
    wire_req big = wire(320, 64), small = wire(48, 64);
    /* the slow clients of the previous test must be gone first */
    double last = -1;
    CHECK_MSG(settle(d, quiet, BODY_TIMEOUT_S + 3, &last) >= 0, "in-flight gauge %.0f before the disconnects",
              last);
    long rss0 = rss_kb(d->pid);
    const double limit = BODY_TIMEOUT_S + 8;

    /* Round 1 (500 clients) brings the allocator to its high-water mark;
     * round 2 (500 more) must not add to it. */
    double t0 = h_now();
    CHECK_INT_EQ(churn(d, &big, &small, 63, 1), 0);
    double churn1 = h_now() - t0;
    double s1 = settle(d, quiet, limit, &last);
    CHECK_MSG(s1 >= 0, "round 1: in-flight gauge still %.0f %.1f s after 500 clients left (quiet: %.0f)", last,
              limit, quiet);
    long rss1 = rss_kb(d->pid);
    t0 = h_now();
    CHECK_INT_EQ(churn(d, &big, &small, 62, 11), 0);
    double churn2 = h_now() - t0;
    double s2 = settle(d, quiet, limit, &last);
    CHECK_MSG(s2 >= 0, "round 2: in-flight gauge still %.0f %.1f s after 500 clients left (quiet: %.0f)", last,
              limit, quiet);
    long rss2 = rss_kb(d->pid);
    /* SLOW_EXTRA_ROUNDS=N: more rounds, printing RSS (to tell a leak from
     * the allocator's high-water mark by hand) */
    for (int k = 0, extra = getenv("SLOW_EXTRA_ROUNDS") ? atoi(getenv("SLOW_EXTRA_ROUNDS")) : 0; k < extra; k++) {
        churn(d, &big, &small, 62, 100 + k);
        settle(d, quiet, limit, &last);
        printf("  extra round %d: RSS %ld kB\n", k, rss_kb(d->pid));
    }
    CHECK_MSG(alive(d), "the daemon died during the disconnects");
    bool san = alive(d) && sanitized(d->pid);
    printf("disconnects: 2 x 500 clients in %.1f + %.1f s; in-flight back to %.0f after %.2f s and %.2f s; "
           "RSS %ld -> %ld -> %ld kB%s\n",
           churn1, churn2, quiet, s1, s2, rss0, rss1, rss2, san ? " (sanitizer build: RSS not checked)" : "");
    if (!san)
        CHECK_MSG(rss1 > 0 && rss2 - rss1 < 20 * 1024, "RSS grew by %ld kB over 500 more vanishing clients",
                  rss2 - rss1);
    /* A client that closes (FIN) in the middle of its headers or body is
     * released at once, not when body_timeout_ms cuts it (libmicrohttpd
     * 0.9.75's epoll mode left such sockets in CLOSE_WAIT; the daemon polls). */
    CHECK_MSG(s1 >= 0 && s1 < BODY_TIMEOUT_S - 0.5 && s2 >= 0 && s2 < BODY_TIMEOUT_S - 0.5,
                  "vanished clients were released only after %.2f s / %.2f s (body_timeout %.1f s)", s1,
                  s2, BODY_TIMEOUT_S);
    CHECK_INT_EQ(metric(d, "attention_server_queue_depth"), 0);

    /* and it still answers right */
    http_resp r;
    http_post_json(d, "/attend", good, &r);
    CHECK_MSG(r.status == 200 && r.len == ref->len && !memcmp(r.body, ref->body, r.len),
              "good request after the disconnects: %ld", r.status);
    http_resp_free(&r);
    free(big.p);
    free(small.p);
}

/* --------------------------------------------------- max connections */

static void test_max_connections(void) {
    daemon_proc d;
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--max-connections", "10",
                          "--body-timeout-ms", "2000", "--connection-timeout-s", "2", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "max-connections daemon did not start");
        return;
    }
    enum { N = 20, LIMIT = 10 };
    int fd[N], refused = 0;
    for (int i = 0; i < N; i++) {
        fd[i] = raw_connect(d.port);
        if (fd[i] < 0) refused++;
    }
    struct timespec nap = {0, 500 * 1000 * 1000};
    nanosleep(&nap, NULL);
    int closed = 0;
    for (int i = 0; i < N; i++)
        if (fd[i] >= 0 && raw_peer_closed(fd[i])) closed++;
    /* what a new client sees meanwhile (informational: it may be refused) */
    http_resp r;
    CURL *c = http_easy(&d, "GET", "/healthz", NULL, NULL, 0, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
    http_finish(c, &r, curl_easy_perform(c));
    printf("max-connections 10: %d idle clients: %d refused, %d closed within 0.5 s; a new /healthz "
           "meanwhile: status %ld after %.2f s\n",
           N, refused, closed, r.status, r.total_s);
    http_resp_free(&r);
    /* Connections past the limit are closed at once (an accept policy), not
     * left hanging in the listen backlog as libmicrohttpd would. */
    CHECK_MSG(refused + closed >= N - LIMIT,
                  "%d idle connections with --max-connections %d: only %d refused and %d closed", N,
                  LIMIT, refused, closed);
    for (int i = 0; i < N; i++)
        if (fd[i] >= 0) close(fd[i]);
    /* after they are gone the daemon serves again, within 1 s */
    double t0 = h_now();
    long st = 0;
    while (h_now() - t0 < 1.0 && st != 200) {
        c = http_easy(&d, "GET", "/healthz", NULL, NULL, 0, &r);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 500L);
        http_finish(c, &r, curl_easy_perform(c));
        st = r.status;
        http_resp_free(&r);
    }
    CHECK_MSG(st == 200, "/healthz %ld within 1 s after closing the idle connections", st);

    /* idle connections up to the limit are cut at the deadline, then the
     * daemon serves again */
    for (int i = 0; i < LIMIT; i++) fd[i] = raw_connect(d.port);
    t0 = h_now();
    int cut = 0;
    double last = 0;
    bool done[LIMIT] = {false};
    while (h_now() - t0 < BODY_TIMEOUT_S + CUT_SLACK_S && cut < LIMIT) {
        for (int i = 0; i < LIMIT; i++)
            if (!done[i] && fd[i] >= 0 && raw_peer_closed(fd[i])) {
                done[i] = true;
                cut++;
                last = h_now() - t0;
            }
        struct timespec tick = {0, 20 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    CHECK_MSG(cut == LIMIT, "%d of %d idle connections cut within %.1f s", cut, LIMIT,
              BODY_TIMEOUT_S + CUT_SLACK_S);
    CHECK_MSG(cut < LIMIT || last > BODY_TIMEOUT_S - 0.5, "idle connections cut after %.2f s (deadline %.1f s)",
              last, BODY_TIMEOUT_S);
    for (int i = 0; i < LIMIT; i++)
        if (fd[i] >= 0) close(fd[i]);
    http_do(&d, "GET", "/healthz", NULL, NULL, 0, &r);
    CHECK_INT_EQ(r.status, 200);
    http_resp_free(&r);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    curl_global_init(CURL_GLOBAL_ALL);
    daemon_proc d;
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--body-timeout-ms", "2000",
                          "--connection-timeout-s", "2", "--threads", "2", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon did not start");
        return check_exit();
    }
    /* the in-flight gauge of an idle daemon (the scrape may count itself) */
    double quiet = metric(&d, "attention_server_in_flight_requests");
    CHECK_MSG(quiet >= 0 && quiet <= 1, "idle in-flight gauge is %.0f", quiet);
    char *good = make_request(16, 64);
    http_resp ref;
    http_post_json(&d, "/attend", good, &ref);
    CHECK_INT_EQ(ref.status, 200);
    char ct[64];
    CHECK_MSG(resp_header(&ref, "Content-Type", ct, sizeof ct) && !strncmp(ct, "application/json", 16),
              "good answer's Content-Type");

    double t0 = h_now();
    test_slowloris(&d, good, &ref);
    printf("slowloris      %5.1f s\n", h_now() - t0);
    t0 = h_now();
    if (alive(&d)) test_disconnects(&d, good, &ref, quiet);
    printf("disconnects    %5.1f s\n", h_now() - t0);
    CHECK_MSG(alive(&d), "the daemon died");
    if (d.pid) CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    t0 = h_now();
    test_max_connections();
    printf("max-conns      %5.1f s\n", h_now() - t0);

    http_resp_free(&ref);
    free(good);
    curl_global_cleanup();
    return check_exit();
}
