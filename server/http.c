/* http.c - see http.h.
 *
 * The file is divided as: per-connection records and the watchdog that cuts
 * connections which take too long to send a request; per-request state;
 * responses; the GET routes; POST /attend (headers, body, hand-off to the
 * compute queue, the job itself); libmicrohttpd callbacks; start/drain/stop.
 *
 * Threads: libmicrohttpd's I/O threads run the callbacks; they read, decode,
 * validate and write, and never compute. Compute and response encoding run
 * on the queue's dispatcher threads (which fan the forward pass out over the
 * engine's pool). A request's connection is suspended while its job is in
 * the queue and resumed by the dispatcher with the response prepared, so an
 * attend request's state is touched by one thread at a time, handed over by
 * MHD_suspend_connection / cqueue_push and MHD_resume_connection.
 */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "assets.h"
#include "attend.h"
#include "budget.h"
#include "buf.h"
#include "compress.h"
#include "errors.h"
#include "gz.h"
#include "linger.h"
#include "log.h"
#include "mem.h"
#include "metrics.h"
#include "queue.h"
#include "reload.h"
#include "v2.h"

#define CSP                                                                                        \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* ------------------------------------------------ connections, watchdog */

/* One per TCP connection: lets the watchdog cut a connection that has not
 * delivered a whole request within body_timeout_ms (libmicrohttpd's own
 * timeout only counts inactivity, so a client dripping a byte at a time
 * would otherwise never be cut off). */
typedef struct conn_rec {
    struct conn_rec *prev, *next;
    int fd;
    double deadline; /* monotonic seconds; 0 while a request is being processed */
    bool linger;     /* answered before its body was read: drain it before closing */
} conn_rec;

struct http_server {
    const attn_config *cfg;
    registry *reg; /* locked inside: safe from every thread */
    reloader *rl;  /* runs the repository API's loads and unloads */
    attn_pool *pool;
    const attn_blas_info *blas;
    struct MHD_Daemon *d;
    cqueue *q;
    attend_limits lim;
    compress_policy compress;
    int port;
    atomic_int ready;
    atomic_int draining;
    atomic_long requests; /* requests between URI callback and completion */
    atomic_long admitted; /* /attend requests past the header checks, not yet completed */
    atomic_ullong next_id;
    atomic_ullong completed; /* requests completed, for the idle trim */
    unsigned long long id_seed;
    pthread_mutex_t conn_mu; /* guards the conn_rec list */
    conn_rec *conns;
    lingerer *ling;     /* closes answered connections without a reset (linger.h) */
    atomic_long nconns; /* connection slots taken: reserved at accept, freed at close */
    pthread_t watchdog;
    atomic_int watchdog_stop;
    bool watchdog_started;
};

static conn_rec *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_set_deadline(http_server *s, struct MHD_Connection *c, double deadline) {
    conn_rec *r = conn_of(c);
    if (!r) return;
    pthread_mutex_lock(&s->conn_mu);
    r->deadline = deadline;
    pthread_mutex_unlock(&s->conn_mu);
}

/* An answer is about to go before the request's body was read:
 * libmicrohttpd will close the connection after it, which should linger
 * first (on_connection reads the flag when the connection closes). */
static void conn_set_linger(http_server *s, struct MHD_Connection *c) {
    conn_rec *r = conn_of(c);
    if (!r) return;
    pthread_mutex_lock(&s->conn_mu);
    r->linger = true;
    pthread_mutex_unlock(&s->conn_mu);
}

/* The request announces a body (Content-Length above 0, or chunked). */
static bool body_declared(struct MHD_Connection *c) {
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding") ||
           (cl && strspn(cl, "0") != strlen(cl));
}

/* How long a spare block (the engine's scratch, a body's or an output's)
 * outlives its last use (hugemem.h): long enough for a client that sends
 * one request after another with pauses (measured, n = 512 requests 0.3 s
 * apart: 10 page faults each when the spare went as soon as the server was
 * idle, 1 with this), short enough that memory goes back soon after large
 * requests stop. */
#define SPARE_KEEP_S 1.0

static void *watchdog_main(void *arg) {
    http_server *s = arg;
    thread_name("attn-watchdog");
    struct timespec nap = {0, 200 * 1000 * 1000};
    unsigned long long trimmed_at = 0;
    int ticks = 0;
    while (!atomic_load(&s->watchdog_stop)) {
        nanosleep(&nap, NULL);
        log_flush(); /* access lines written at most 200 ms late */
        /* give freed request buffers back to the system (mem.h): at once
         * when idle after some requests, else once a second while requests
         * come and go (slow clients can keep a server from ever being idle) */
        unsigned long long seen = atomic_load(&s->completed);
        if (seen != trimmed_at && (atomic_load(&s->requests) == 0 || ++ticks >= 5)) {
            mem_trim();
            trimmed_at = seen;
            ticks = 0;
        }
        mem_reuse_expire(SPARE_KEEP_S);
        double now = mono_now();
        int cut = 0;
        pthread_mutex_lock(&s->conn_mu);
        for (conn_rec *r = s->conns; r; r = r->next)
            if (r->deadline > 0 && now > r->deadline) {
                shutdown(r->fd, SHUT_RDWR); /* libmicrohttpd sees the close and cleans up */
                r->deadline = 0;
                cut++;
            }
        pthread_mutex_unlock(&s->conn_mu);
        if (cut)
            log_warn("closed %d connection(s) that did not send a whole request within "
                     "body_timeout_ms=%ld",
                     cut, s->cfg->body_timeout_ms);
    }
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_rec *r = calloc(1, sizeof *r);
        if (!r) return;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        r->fd = ci ? ci->connect_fd : -1;
        r->deadline = mono_now() + (double)s->cfg->body_timeout_ms / 1000.0;
        pthread_mutex_lock(&s->conn_mu);
        r->next = s->conns;
        if (s->conns) s->conns->prev = r;
        s->conns = r;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = r;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn_rec *r = *socket_context;
        pthread_mutex_lock(&s->conn_mu);
        if (r->prev)
            r->prev->next = r->next;
        else
            s->conns = r->next;
        if (r->next) r->next->prev = r->prev;
        bool linger = r->linger;
        pthread_mutex_unlock(&s->conn_mu);
        /* libmicrohttpd closes its descriptor right after this: a duplicate
         * keeps the socket open while the lingerer drains what the client
         * still sends (a body its early answer left unread, or bytes that
         * are already waiting), so the answer is not lost to a reset */
        int unread = 0;
        if (r->fd >= 0 && (linger || (ioctl(r->fd, FIONREAD, &unread) == 0 && unread > 0)))
            linger_add(s->ling, fcntl(r->fd, F_DUPFD_CLOEXEC, 0));
        free(r);
        *socket_context = NULL;
        atomic_fetch_sub(&s->nconns, 1);
    }
}

/* libmicrohttpd 0.9.75 stops accept()ing at its connection limit, leaving
 * new clients hanging in the listen backlog; accept them and close at once
 * instead (its own limit is set a little higher), so they fail fast. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    http_server *s = cls;
    (void)addr, (void)addrlen;
    /* Reserve the slot here, atomically: each I/O thread accepts from the
     * listening socket, so a check-then-count would let two threads both
     * take the last slot. The slot is given back when the connection closes
     * (libmicrohttpd notifies every connection it set up; one it fails to
     * set up after this point, out of memory, would keep its slot). */
    if (atomic_fetch_add(&s->nconns, 1) >= s->cfg->max_connections) {
        atomic_fetch_sub(&s->nconns, 1);
        return MHD_NO;
    }
    return MHD_YES;
}

/* ---------------------------------------------------------- requests */

/* Text tensors from this many bytes are encoded as the client reads them,
 * a piece at a time on the pool's workers when it is idle (encoding.h): a
 * slow reader holds the raw tensor and one piece, and a fast one gets the
 * first bytes while the rest is encoded. Measured against encoding all of
 * it at once on both cores (n=512, E=768, 12 heads, per-head weights, one
 * request at a time, wall / compute, two alternations): float JSON
 * 3.85/4.06 against 3.80/3.64, base64 1.55/1.54 against 2.01/1.95. */
#define STREAM_MIN_BYTES ((size_t)4 << 20)

/* libmicrohttpd's memory per connection: the request's headers (so at most
 * about this much of them; more gets 431, as nginx's default of 4 x 8 KiB
 * does) and its read buffer. libmicrohttpd 0.9.75 clears all of it between
 * the requests of a keep-alive connection: at 64 KiB that memset was 4% of
 * the server's CPU on small requests, and small float requests ran 5%
 * faster at 32 KiB (five alternated pairs, four won; a 1.5 MB v2 upload
 * no slower). */
#define CONN_MEMORY_BYTES ((size_t)32 << 10)

/* Room a body may start into its buffer, for body_align. */
#define BODY_ALIGN ((size_t)64)

/* At most this many closed connections linger at once (linger.h); past
 * it one closes at once, as libmicrohttpd would. */
#define LINGER_MAX 64

typedef enum { PH_NEW, PH_GET, PH_BODY, PH_QUEUED, PH_READY, PH_DONE } req_phase;

typedef struct req req;
typedef struct route route;

/* What a route pattern captured from the path. */
typedef struct route_args {
    char model[64];   /* {model} */
    char version[32]; /* {version}; "" when the path has none */
    const char *rest; /* {asset}: the asset's name */
} route_args;

/* POST bodies: which front end decodes them. */
typedef enum { API_ATTEND, API_V2, API_REPO_INDEX, API_REPO_LOAD, API_REPO_UNLOAD } post_api;

struct req {
    http_server *s;
    struct MHD_Connection *conn;
    req_phase phase;
    double t_start;
    char id[72];
    char method[16];
    char path[256];
    const route *rt;   /* the route matched, or NULL */
    route_args args;   /* what its pattern captured */
    const char *label; /* metrics label: the route's pattern, or "other" */
    char model[64];
    char remote[64];
    /* body */
    buf body;
    size_t body_lead; /* bytes before the body in body.data (BODY_ALIGN) */
    bool discarding;  /* over max_body_bytes: read and drop the rest, then 413 */
    bool in_coded;    /* Content-Encoding gzip or deflate */
    gz_format in_coding;
    bool out_coded; /* the client accepts gzip or deflate */
    gz_format out_coding;
    size_t header_len;   /* v2: Inference-Header-Content-Length, (size_t)-1 if absent */
    model_entry *target; /* the model named in the path: a reference, dropped when completed */
    size_t held_in;      /* budget held until compute ends: body, inputs, working memory */
    size_t held_out;     /* budget held until the answer is sent: outputs, its text */
    bool over_budget;    /* the body would pass the memory budget: drop it, answer 503 */
    bool admitted;       /* counted in http_server.admitted */
    bool compute;        /* a POST whose front end computes (post_front.compute) */
    bool close;          /* answer with Connection: close */
    size_t bytes_in;
    /* compute */
    char *plain; /* the inflated body: inputs may point into it until compute ends */
    attend_req ar;
    cjob job;
    reload_job rjob; /* a repository load or unload, on the reload thread */
    double decode_s, queue_s, compute_s, encode_s;
    double t_body;    /* when the body began to be read (headers accepted), 0 if never */
    double receive_s; /* from then to its last byte */
    double t_answer;  /* when the answer was queued to libmicrohttpd, 0 if never */
    /* the prepared answer (set by the dispatcher before resuming) */
    int status;
    http_error herr;
    answer ans;
    bool ans_coded; /* the answer is the compressed whole body */
    size_t bytes_out;
    bool page;             /* the playground's page: its security headers */
    struct stream *stream; /* an answer sent as it is read, shared with its response */
};

/* An answer with lazy pieces, sent as libmicrohttpd asks for more (chunked
 * transfer encoding: its length is not known). Shared by the response and
 * the request: the one that lets go last frees it. */
typedef struct stream {
    answer a;
    int piece;  /* the piece being sent */
    size_t off; /* bytes of it sent (known pieces) */
    req *r;     /* for bytes_out; NULL once the request is complete */
    atomic_int refs;
} stream;

static void stream_release(stream *st) {
    if (atomic_fetch_sub(&st->refs, 1) == 1) {
        answer_free(&st->a);
        free(st);
    }
}

typedef enum MHD_Result (*get_handler)(req *r, buf *out);

/* What a POST API does: checks of its own on the headers, after the common
 * ones (NULL: none; it answers and sets PH_DONE to refuse), and its whole
 * body (inflated; t0: when the body was complete). compute: the request
 * goes through the compute queue (refused from the headers when it is full;
 * Server-Timing on its answer). */
typedef struct post_front {
    enum MHD_Result (*headers)(req *r);
    enum MHD_Result (*body)(req *r, char *body, size_t len, double t0);
    bool compute;
} post_front;

/* One row per route: the router, the Allow header, the 404/405 answers, the
 * CORS preflight and the metrics labels all read this table. */
struct route {
    const char *method;  /* "GET" (HEAD too) or "POST" */
    const char *pattern; /* segments; {model}, {version} and {asset} capture one */
    get_handler get;     /* GET: writes the answer */
    post_api api;        /* POST: the body's front end */
    bool auth;           /* needs the API key when one is set */
};

static void req_id(http_server *s, struct MHD_Connection *c, char *out, size_t n) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (h) {
        size_t len = strlen(h), i = 0;
        for (; i < len; i++)
            if (!isalnum((unsigned char)h[i]) && !strchr("._:-", h[i])) break;
        if (len >= 1 && len <= 64 && i == len) {
            snprintf(out, n, "%s", h);
            return;
        }
    }
    unsigned long long k = atomic_fetch_add(&s->next_id, 1);
    snprintf(out, n, "%016llx", s->id_seed ^ (k * 0x9e3779b97f4a7c15ull));
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    http_server *s = cls;
    req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    r->conn = c;
    r->t_start = mono_now();
    r->label = "other";
    r->header_len = (size_t)-1;
    snprintf(r->path, sizeof r->path, "%s", uri);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, r->remote,
                      sizeof r->remote);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, r->remote,
                      sizeof r->remote);
    }
    if (!r->remote[0]) snprintf(r->remote, sizeof r->remote, "-");
    buf_init(&r->body, s->cfg->max_body_bytes + BODY_ALIGN);
    answer_init(&r->ans);
    atomic_fetch_add(&s->requests, 1);
    metrics_in_flight_add(1);
    return r;
}

/* Reserve n bytes of the memory budget for r (see budget.h). */
static bool req_take(req *r, size_t n, bool until_answered, const char *cause) {
    if (!budget_take(n)) {
        metrics_budget_refusal(cause);
        return false;
    }
    if (until_answered)
        r->held_out += n;
    else
        r->held_in += n;
    return true;
}

static bool plan_reserve(void *ctx, size_t n, bool until_answered) {
    return req_take(ctx, n, until_answered, "decode");
}

/* Give back n of the bytes r holds until compute ends (freed early). */
static void plan_release(void *ctx, size_t n) {
    req *r = ctx;
    if (n > r->held_in) n = r->held_in;
    budget_give(n);
    r->held_in -= n;
}

/* Free the body's buffer, and the lead body_align put before it. */
static void body_free(req *r) {
    buf_free(&r->body);
    r->body_lead = 0;
}

/* What compute needs no more: inputs, the body they may point into. */
static void req_release_inputs(req *r) {
    attend_free(&r->ar);
    free(r->plain);
    r->plain = NULL;
    body_free(r);
    budget_give(r->held_in);
    r->held_in = 0;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    http_server *s = cls;
    req *r = *con_cls;
    if (!r) return;
    const double now = mono_now(), total = now - r->t_start;
    /* the answer's own time on the wire: until its last byte went to the
     * kernel (or the client went away) */
    const double send = r->t_answer > 0 ? now - r->t_answer : 0.0;
    if (r->t_answer > 0 && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        metrics_observe(MH_SEND, send);
    metrics_observe(MH_TOTAL, total);
    metrics_request(r->label, r->model, r->status, r->bytes_in, r->bytes_out);
    if (r->compute && r->model[0]) metrics_observe_model(r->model, total, r->compute_s);
    log_access_rec a = {
        .request_id = r->id[0] ? r->id : "-",
        .remote = r->remote,
        .method = r->method[0] ? r->method : "-",
        .path = r->path,
        .model = r->model,
        .status = r->status,
        .error_type = r->herr ? http_error_type(r->herr) : NULL,
        .bytes_in = r->bytes_in,
        .bytes_out = r->bytes_out,
        .total_ms = total * 1e3,
        .decode_ms = r->decode_s * 1e3,
        .queue_ms = r->queue_s * 1e3,
        .compute_ms = r->compute_s * 1e3,
        .encode_ms = r->encode_s * 1e3,
        /* a body cut short: the time it was read for */
        .receive_ms = (r->receive_s > 0 || r->t_body <= 0 ? r->receive_s : now - r->t_body) * 1e3,
        .send_ms = send * 1e3};
    log_access(&a);
    bool admitted = r->admitted;
    model_release(r->target);
    if (r->stream) { /* done with it (the response may still hold it) */
        r->stream->r = NULL;
        stream_release(r->stream);
    }
    req_release_inputs(r);
    answer_free(&r->ans);
    budget_give(r->held_out); /* the answer is sent (or the client is gone) */
    free(r);
    *con_cls = NULL;
    /* The connection may carry another request: give it a fresh deadline
     * that also covers the keep-alive idle time. */
    conn_set_deadline(s, c,
                      mono_now() + (double)s->cfg->connection_timeout_s +
                          (double)s->cfg->body_timeout_ms / 1000.0);
    metrics_in_flight_add(-1);
    atomic_fetch_add(&s->completed, 1);
    if (admitted) atomic_fetch_sub(&s->admitted, 1);
    if (atomic_fetch_sub(&s->requests, 1) == 1) log_flush(); /* the last one in flight */
}

/* ---------------------------------------------------------- responses */

static void free_answer(void *cls) {
    answer *a = cls;
    answer_free(a);
    free(a);
}

/* The Allow header's value for the path of r: every method a route with a
 * matching pattern takes. */
static void allowed_methods(const req *r, char *out, size_t n);

static void add_cors(const req *r, struct MHD_Response *resp) {
    const char *origin = r->s->cfg->cors_allow_origin;
    if (!origin[0]) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    if (strcmp(origin, "*")) MHD_add_response_header(resp, "Vary", "Origin");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                            "X-Request-Id, Server-Timing, Retry-After, "
                            "Inference-Header-Content-Length");
}

static void stream_free_cb(void *cls) {
    stream_release(cls);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    stream *st = cls;
    (void)pos;
    size_t n = 0;
    while (n < max && st->piece < st->a.n) {
        answer_piece *p = &st->a.pieces[st->piece];
        if (p->fill) {
            size_t k = p->fill(p->ctx, out + n, max - n);
            if (k == (size_t)-1) return MHD_CONTENT_READER_END_WITH_ERROR; /* cut, not truncated */
            if (!k) st->piece++; /* done (fill gives 0 only then) */
            n += k;
        } else {
            size_t k = p->len - st->off < max - n ? p->len - st->off : max - n;
            memcpy(out + n, (const char *)p->p + st->off, k);
            st->off += k;
            n += k;
            if (st->off == p->len) {
                st->piece++;
                st->off = 0;
            }
        }
    }
    if (st->r) st->r->bytes_out += n;
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static enum MHD_Result finish_response(req *r, int status, struct MHD_Response *resp,
                                       const char *ctype, bool binary, size_t header_len,
                                       const char *cache, size_t len);

/* Queue the answer a (taken over) with the headers every answer gets. */
static enum MHD_Result send_answer(req *r, int status, answer *a, const char *cache) {
    if (a->lazy) {
        stream *st = calloc(1, sizeof *st);
        if (!st) {
            answer_free(a);
            return MHD_NO;
        }
        st->a = *a;
        memset(a, 0, sizeof *a);
        answer_seal(&st->a);
        st->r = r;
        atomic_store(&st->refs, 2); /* the response and the request */
        struct MHD_Response *resp = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st, stream_free_cb);
        if (!resp) {
            stream_release(st);
            stream_release(st);
            return MHD_NO;
        }
        r->stream = st;
        /* bytes_out is counted as the reader sends them */
        return finish_response(r, status, resp, st->a.content_type, false, 0, cache, 0);
    }
    answer *own = malloc(sizeof *own);
    if (!own) {
        answer_free(a);
        return MHD_NO;
    }
    *own = *a;
    memset(a, 0, sizeof *a);
    answer_seal(own);
    /* libmicrohttpd copies the vector; the pieces stay where they are */
    struct MHD_IoVec one = {"", 0}, *iov = own->n ? malloc((size_t)own->n * sizeof *iov) : &one;
    struct MHD_Response *resp = NULL;
    if (iov) {
        for (int i = 0; i < own->n; i++)
            iov[i] = (struct MHD_IoVec){own->pieces[i].p, own->pieces[i].len};
        resp = MHD_create_response_from_iovec(iov, own->n ? (unsigned)own->n : 1, free_answer, own);
        if (iov != &one) free(iov);
    }
    size_t len = answer_len(own);
    if (!resp) {
        free_answer(own);
        return MHD_NO;
    }
    return finish_response(r, status, resp, own->content_type, own->binary, own->header_len, cache,
                           len);
}

/* The headers every answer gets; queue resp (and let go of it). */
static enum MHD_Result finish_response(req *r, int status, struct MHD_Response *resp,
                                       const char *ctype, bool binary, size_t header_len,
                                       const char *cache, size_t len) {
    if (!ctype) ctype = "application/json";
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->ans_coded)
        MHD_add_response_header(resp, "Content-Encoding", gz_format_name(r->out_coding));
    if (binary) {
        char hl[32];
        /* compressed: the header's length in the uncompressed body */
        snprintf(hl, sizeof hl, "%zu", header_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", hl);
    }
    bool post = r->rt && r->rt->get == NULL;
    if (post || r->out_coded) MHD_add_response_header(resp, "Vary", "Accept-Encoding");
    if (r->close || atomic_load(&r->s->draining))
        MHD_add_response_header(resp, "Connection", "close");
    MHD_add_response_header(resp, "Cache-Control", cache ? cache : "no-store");
    if (r->phase >= PH_QUEUED && r->compute) {
        char t[200];
        buf st = {t, 0, sizeof t, sizeof t - 1, false, false}; /* on the stack: no allocation */
        const char *names[5] = {
            "decode;dur=", ", queue;dur=", ", compute;dur=", ", encode;dur=", ", receive;dur="};
        const double sec[5] = {r->decode_s, r->queue_s, r->compute_s, r->encode_s, r->receive_s};
        for (int i = 0; i < 5; i++) {
            buf_puts(&st, names[i]);
            buf_put_ms(&st, sec[i] * 1e3);
        }
        if (!st.failed) MHD_add_response_header(resp, "Server-Timing", t);
    }
    if (status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"attention-server\"");
    if (status == 503)
        MHD_add_response_header(resp, "Retry-After", r->herr == HERR_NOT_READY ? "5" : "1");
    if (status == 405) {
        char allow[64];
        allowed_methods(r, allow, sizeof allow);
        MHD_add_response_header(resp, "Allow", allow);
    }
    if (r->page) {
        MHD_add_response_header(resp, "Content-Security-Policy", CSP);
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    }
    add_cors(r, resp);
    if (r->phase == PH_NEW && body_declared(r->conn)) conn_set_linger(r->s, r->conn);
    r->t_answer = mono_now();
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->status = status;
    r->bytes_out = len;
    r->phase = PH_DONE;
    return ret;
}

static void error_answer(answer *a, http_error e, const char *msg) {
    answer_init(a);
    buf_puts(&a->text, "{\"error\":");
    buf_json_string(&a->text, msg);
    buf_puts(&a->text, ",\"error_type\":");
    buf_json_string(&a->text, http_error_type(e));
    buf_puts(&a->text, "}");
}

/* Prepare the error answer of a request whose answer is sent later (from
 * PH_READY, once its connection is resumed). */
static void prepare_error(req *r, http_error e, const char *msg) {
    r->herr = e;
    r->status = http_error_status(e);
    r->ans_coded = false;
    error_answer(&r->ans, e, msg);
}

static enum MHD_Result respond_error(req *r, http_error e, const char *msg) {
    answer a;
    error_answer(&a, e, msg);
    r->herr = e;
    r->ans_coded = false;
    return send_answer(r, http_error_status(e), &a, NULL);
}

/* Compress a's body when the client asked and the policy says it pays. */
static void maybe_compress(req *r, answer *a, double server_s) {
    http_server *s = r->s;
    size_t len = answer_len(a);
    r->ans_coded = false;
    /* an answer written as it is read is not compressed: it is large text,
     * which the time budget would refuse anyway */
    if (!r->out_coded || a->lazy || !compress_pays(&s->compress, len, !a->binary, server_s)) return;
    answer_seal(a);
    const void **pieces = malloc((size_t)(a->n + 1) * sizeof *pieces);
    size_t *lens = malloc((size_t)(a->n + 1) * sizeof *lens);
    char *z = NULL;
    size_t zlen;
    double t0 = mono_now();
    for (int i = 0; pieces && lens && i < a->n; i++) {
        pieces[i] = a->pieces[i].p;
        lens[i] = a->pieces[i].len;
    }
    gz_status g = pieces && lens
                      ? gz_deflate(pieces, lens, a->n, r->out_coding, s->compress.level, &z, &zlen)
                      : GZ_NOMEM;
    free(pieces);
    free(lens);
    if (g != GZ_OK) return; /* send it plain */
    compress_observe(len, mono_now() - t0);
    /* one piece now; header_len stays the plain body's, as the protocol says */
    for (int i = 0; i < a->n; i++) free(a->pieces[i].own);
    a->n = 0;
    answer_push(a, z, zlen, z);
    r->ans_coded = !a->failed;
}

static enum MHD_Result refuse_budget(req *r, size_t n, const char *what) {
    char msg[300];
    snprintf(msg, sizeof msg,
             "%s: the server's memory budget cannot take %zu more bytes now (max_memory_bytes=%zu, "
             "%zu held); retry later",
             what, n, budget_limit(), budget_held());
    return respond_error(r, HERR_OVERLOADED, msg);
}

static enum MHD_Result respond_buf(req *r, const char *ctype, buf *b) {
    if (b->failed) {
        buf_free(b);
        return respond_error(r, HERR_INTERNAL, "response too large");
    }
    answer a;
    answer_init(&a);
    size_t n;
    char *p = buf_take(b, &n);
    answer_push(&a, p, n, p);
    a.content_type = ctype;
    maybe_compress(r, &a, 0);
    return send_answer(r, 200, &a, NULL);
}

/* ------------------------------------------------------------ access */

static bool authorized(http_server *s, struct MHD_Connection *c) {

    const char *key = s->cfg->api_key;
    if (!key[0]) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    /* Constant time in the key's length: compare every byte of both padded
     * to a fixed size, and fold the length difference in. */
    size_t hl = strlen(h), kl = strlen(key);
    unsigned char diff = (unsigned char)(hl != kl);
    for (size_t i = 0; i < 256; i++) {
        unsigned char a = i < hl ? (unsigned char)h[i] : 0, b = i < kl ? (unsigned char)key[i] : 0;
        diff |= a ^ b;
    }
    return diff == 0 && hl < 256;
}

static const char *asset_type(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html")) return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css")) return "text/css; charset=utf-8";
    if (!strcmp(dot, ".png")) return "image/png";
    if (!strcmp(dot, ".svg")) return "image/svg+xml";
    if (!strcmp(dot, ".yaml")) return "application/yaml; charset=utf-8";
    return "application/octet-stream";
}

static const attn_asset *asset_find(const char *name) {
    for (const attn_asset *a = attn_assets; a->name; a++)
        if (!strcmp(a->name, name)) return a;
    return NULL;
}

/* ------------------------------------------------------- GET handlers */

static enum MHD_Result get_healthz(req *r, buf *b) {
    buf_puts(b, "{\"status\":\"ok\"}");
    return respond_buf(r, "application/json", b);
}

/* 503 not_ready while starting or draining (b, if any, is freed). */
static enum MHD_Result respond_not_ready(req *r, buf *b, const char *draining) {
    if (b) buf_free(b);
    return respond_error(r, HERR_NOT_READY, atomic_load(&r->s->draining) ? draining : "starting");
}

/* 503 not_ready: every model was unloaded (or its file removed). */
static enum MHD_Result respond_no_model(req *r, buf *b) {
    buf_free(b);
    return respond_error(r, HERR_NOT_READY,
                         "no model is loaded (all unloaded, or their files removed)");
}

static enum MHD_Result get_readyz(req *r, buf *b) {
    if (!atomic_load(&r->s->ready)) return respond_not_ready(r, b, "draining: shutting down");
    if (!registry_serving(r->s->reg)) return respond_no_model(r, b);
    buf_puts(b, "{\"status\":\"ready\"}");
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_metrics(req *r, buf *b) {
    http_server *s = r->s;
    metrics_render(b, cqueue_depth(s->q), registry_serving(s->reg), atomic_load(&s->ready));
    registry_metrics(s->reg, b);
    unsigned long long lingered, at_once;
    linger_counts(s->ling, &lingered, &at_once);
    buf_printf(b,
               "# HELP attention_server_lingering_connections Connections closed with a body "
               "(or other bytes) unread, whose rest is being read and dropped so the client "
               "gets its answer, not a reset.\n"
               "# TYPE attention_server_lingering_connections gauge\n"
               "attention_server_lingering_connections %d\n"
               "# HELP attention_server_lingering_closes_total Connections closed with a body "
               "(or other bytes) unread, by how: lingered, or at once (the client may see a "
               "reset) because %d were lingering already.\n"
               "# TYPE attention_server_lingering_closes_total counter\n"
               "attention_server_lingering_closes_total{how=\"lingered\"} %llu\n"
               "attention_server_lingering_closes_total{how=\"at_once\"} %llu\n",
               linger_held(s->ling), LINGER_MAX, lingered, at_once);
    return respond_buf(r, "text/plain; version=0.0.4; charset=utf-8", b);
}

static enum MHD_Result serve_asset(req *r, const attn_asset *as, bool page) {
    answer a;
    answer_init(&a);
    a.content_type = asset_type(as->name);
    answer_push(&a, as->data, as->len, NULL); /* static: nothing to free */
    r->ans_coded = false;
    r->page = page;
    return send_answer(r, 200, &a, page ? "no-cache" : "public, max-age=300");
}

static enum MHD_Result get_openapi(req *r, buf *b) {
    buf_free(b);
    const attn_asset *a = asset_find("openapi.yaml");
    if (!a) return respond_error(r, HERR_NOT_FOUND, "no OpenAPI document in this build");
    return serve_asset(r, a, false);
}

static enum MHD_Result get_asset(req *r, buf *b) {
    buf_free(b);
    const char *name = r->args.rest && r->args.rest[0] ? r->args.rest : "index.html";
    return serve_asset(r, asset_find(name), !strcmp(name, "index.html"));
}

/* The model a path names (r->target holds the reference until the request
 * completes), or an answer saying it is not loaded. */
static const model_entry *path_model(req *r, buf *b) {
    model_entry *e = r->target = registry_acquire(r->s->reg, r->args.model);
    char msg[1024];
    if (!e) {
        buf_free(b);
        registry_missing_message(r->s->reg, r->args.model, msg, sizeof msg);
        respond_error(r, HERR_MODEL_NOT_FOUND, msg);
        return NULL;
    }
    http_error err =
        v2_check_version(e, r->args.version[0] ? r->args.version : NULL, msg, sizeof msg);
    if (err) {
        buf_free(b);
        respond_error(r, err, msg);
        return NULL;
    }
    snprintf(r->model, sizeof r->model, "%s", e->name);
    return e;
}

static enum MHD_Result get_v1_models(req *r, buf *b) {
    registry_models_json(r->s->reg, b);
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_v1_model(req *r, buf *b) {
    const model_entry *e = path_model(r, b);
    if (!e) return MHD_YES;
    registry_model_json(e, b);
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_v2_server(req *r, buf *b) {
    v2_server_json(b);
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_v2_live(req *r, buf *b) {
    buf_puts(b, "{\"live\":true}");
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_v2_ready(req *r, buf *b) {
    if (!atomic_load(&r->s->ready)) return respond_not_ready(r, b, "draining: shutting down");
    if (!registry_serving(r->s->reg)) return respond_no_model(r, b);
    buf_puts(b, "{\"ready\":true}");
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_v2_model(req *r, buf *b) {
    const model_entry *e = path_model(r, b);
    if (!e) return MHD_YES;
    v2_model_json(e, b);
    return respond_buf(r, "application/json", b);
}

static enum MHD_Result get_v2_model_ready(req *r, buf *b) {
    const model_entry *e = path_model(r, b);
    if (!e) return MHD_YES;
    if (!atomic_load(&r->s->ready)) return respond_not_ready(r, b, "draining: shutting down");
    buf_puts(b, "{\"name\":");
    buf_json_string(b, e->name);
    buf_puts(b, ",\"ready\":true}");
    return respond_buf(r, "application/json", b);
}

/* ------------------------------------------------------------ routes */

static const route routes[] = {
    {"GET", "/healthz", get_healthz, 0, false},
    {"GET", "/readyz", get_readyz, 0, false},
    {"GET", "/metrics", get_metrics, 0, false},
    {"GET", "/openapi.yaml", get_openapi, 0, false},
    {"GET", "/v1/models", get_v1_models, 0, true},
    {"GET", "/v1/models/{model}", get_v1_model, 0, true},
    {"POST", "/attend", NULL, API_ATTEND, true},
    {"GET", "/v2", get_v2_server, 0, false},
    {"GET", "/v2/health/live", get_v2_live, 0, false},
    {"GET", "/v2/health/ready", get_v2_ready, 0, false},
    {"GET", "/v2/models/{model}", get_v2_model, 0, true},
    {"GET", "/v2/models/{model}/versions/{version}", get_v2_model, 0, true},
    {"GET", "/v2/models/{model}/ready", get_v2_model_ready, 0, true},
    {"GET", "/v2/models/{model}/versions/{version}/ready", get_v2_model_ready, 0, true},
    {"POST", "/v2/models/{model}/infer", NULL, API_V2, true},
    {"POST", "/v2/models/{model}/versions/{version}/infer", NULL, API_V2, true},
    {"POST", "/v2/repository/index", NULL, API_REPO_INDEX, true},
    {"POST", "/v2/repository/models/{model}/load", NULL, API_REPO_LOAD, true},
    {"POST", "/v2/repository/models/{model}/unload", NULL, API_REPO_UNLOAD, true},
    {"GET", "/", get_asset, 0, false},
    {"GET", "/{asset}", get_asset, 0, false},
};
#define NROUTES (sizeof routes / sizeof routes[0])

/* Does path match pattern? Fills the captures. {asset} matches only a file
 * the playground has (and not while it is disabled). */
static bool route_match(const http_server *s, const char *pattern, const char *path,
                        route_args *a) {
    memset(a, 0, sizeof *a);
    const char *p = pattern, *u = path;
    while (*p && *u) {
        if (*p == '{') {
            const char *pe = strchr(p, '}'), *ue = strchr(u, '/');
            size_t plen = (size_t)(pe - p) + 1, ulen = ue ? (size_t)(ue - u) : strlen(u);
            if (ulen == 0) return false;
            if (!strncmp(p, "{model}", plen)) {
                if (ulen >= sizeof a->model) return false;
                memcpy(a->model, u, ulen);
            } else if (!strncmp(p, "{version}", plen)) {
                if (ulen >= sizeof a->version) return false;
                memcpy(a->version, u, ulen);
            } else { /* {asset} */
                if (ue || s->cfg->no_ui || !strcmp(u, "openapi.yaml") || !asset_find(u))
                    return false;
                a->rest = u;
            }
            p += plen;
            u += ulen;
            continue;
        }
        if (*p != *u) return false;
        p++, u++;
    }
    if (*p || *u) return false;
    if (!strcmp(pattern, "/") && s->cfg->no_ui) return false;
    return true;
}

static bool method_fits(const route *rt, const char *method) {
    return !strcmp(rt->method, method) || (!strcmp(rt->method, "GET") && !strcmp(method, "HEAD"));
}

static void allowed_methods(const req *r, char *out, size_t n) {
    bool get = false, post = false;
    route_args a;
    for (size_t i = 0; i < NROUTES; i++)
        if (route_match(r->s, routes[i].pattern, r->path, &a)) {
            if (routes[i].get)
                get = true;
            else
                post = true;
        }
    snprintf(out, n, "%s%s%s, OPTIONS", get ? "GET, HEAD" : "", get && post ? ", " : "",
             post ? "POST" : "");
}

/* Find the route of r's path and method: 0 found; 404 no route has this
 * path; 405 some route has it, not with this method. */
static int route_find(req *r, const char *method) {
    bool path_known = false;
    route_args a;
    for (size_t i = 0; i < NROUTES; i++) {
        if (!route_match(r->s, routes[i].pattern, r->path, &a)) continue;
        path_known = true;
        if (method_fits(&routes[i], method)) {
            r->rt = &routes[i];
            r->args = a;
            r->label = routes[i].pattern;
            return 0;
        }
    }
    return path_known ? 405 : 404;
}

/* OPTIONS: a CORS preflight (or a plain question about the methods). */
static enum MHD_Result answer_options(req *r) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    char allow[64];
    allowed_methods(r, allow, sizeof allow);
    MHD_add_response_header(resp, "Allow", allow);
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    const char *origin = r->s->cfg->cors_allow_origin;
    if (origin[0]) {
        add_cors(r, resp);
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow);
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type, Content-Encoding, X-Request-Id, "
                                "Inference-Header-Content-Length");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    enum MHD_Result ret = MHD_queue_response(r->conn, 204, resp);
    MHD_destroy_response(resp);
    r->status = 204;
    r->phase = PH_DONE;
    return ret;
}
typedef struct header_scan {
    int content_length_count;
    int transfer_encoding_count;
    const char *transfer_encoding; /* the first, which libmicrohttpd uses */
    bool bad_name;                 /* a header name that is not an RFC 7230 token */
} header_scan;

static bool is_token(const char *k) {
    if (!*k) return false;
    for (; *k; k++)
        if (!isalnum((unsigned char)*k) && !strchr("!#$%&'*+-.^_`|~", *k)) return false;
    return true;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    header_scan *h = cls;
    (void)kind;
    /* libmicrohttpd 0.9.75 keeps "Content-Length " (space before the colon)
     * as a header of that name and frames the body without it: a request
     * smuggling vector, so any name that is not a token is refused. */
    if (!key || !is_token(key))
        h->bad_name = true;
    else if (!strcasecmp(key, "Content-Length"))
        h->content_length_count++;
    else if (!strcasecmp(key, "Transfer-Encoding")) {
        if (!h->transfer_encoding_count++) h->transfer_encoding = value ? value : "";
    }
    return MHD_YES;
}

/* Framing problems: answered with Connection: close, since the rest of the
 * stream cannot be trusted to hold request boundaries. */
static enum MHD_Result framing_error(req *r, http_error e, const char *msg) {
    r->close = true;
    return respond_error(r, e, msg);
}

static enum MHD_Result check_framing(req *r) {
    header_scan h = {0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, scan_header, &h);
    if (h.bad_name)
        return framing_error(
            r, HERR_INVALID_REQUEST,
            "malformed header name (a header name is a token: no spaces before the colon)");
    if (h.transfer_encoding_count && h.content_length_count)
        return framing_error(r, HERR_INVALID_REQUEST,
                             "Transfer-Encoding and Content-Length must not both be sent");
    if (h.content_length_count > 1)
        return framing_error(r, HERR_INVALID_REQUEST, "Content-Length sent more than once");
    if (h.transfer_encoding_count > 1)
        return framing_error(r, HERR_INVALID_REQUEST, "Transfer-Encoding sent more than once");
    if (h.transfer_encoding && strcasecmp(h.transfer_encoding, "chunked"))
        return framing_error(r, HERR_NOT_IMPLEMENTED,
                             "Transfer-Encoding: only chunked is supported");
    return MHD_YES;
}

/* Content-Type of a POST body: JSON for /attend and v2; a v2 body with
 * binary tensors may also say application/octet-stream (or nothing). */
static bool content_type_ok(const req *r, const char *ct) {
    if (!ct) return true;
    size_t n = strcspn(ct, ";");
    while (n && ct[n - 1] == ' ') n--;
    bool json =
        (n == 16 && !strncasecmp(ct, "application/json", 16)) ||
        (n > 5 && !strncasecmp(ct + n - 5, "+json", 5) && !strncasecmp(ct, "application/", 12));
    bool octets = n == 24 && !strncasecmp(ct, "application/octet-stream", 24);
    return json || (octets && r->rt->api == API_V2);
}

/* After compute (e: its outcome, compute_err its message; t1 when it
 * ended): encode and compress r's answer into r->ans and r->status on the
 * pool (NULL: on this thread), then release the inputs. */
static void answer_request(req *r, http_error e, const char *compute_err, attn_pool *pool,
                           double t1) {
    char err[1024];
    answer a;
    answer_init(&a);
    snprintf(err, sizeof err, "%s", e ? compute_err : "");
    if (!e)
        e = r->rt->api == API_V2 ? v2_encode(&r->ar, &a, pool, err, sizeof err)
                                 : attend_encode(&r->ar, &a, pool, err, sizeof err);
    if (!e) maybe_compress(r, &a, r->decode_s + r->compute_s + (mono_now() - t1));
    r->encode_s = mono_now() - t1;
    metrics_observe(MH_ENCODE, r->encode_s);
    req_release_inputs(r); /* inputs, and the body they may point into */
    if (e) {
        answer_free(&a);
        prepare_error(r, e, err);
    } else {
        r->status = 200;
        r->ans = a;
    }
}

/* Compute, encode and compress r's request into r->ans and r->status, on
 * the pool (NULL: on this thread), then release the inputs. */
static void run_request(req *r, attn_pool *pool) {
    char err[1024];
    double t0 = mono_now();
    http_error e = attend_compute(&r->ar, pool, err, sizeof err);
    double t1 = mono_now();
    r->compute_s = t1 - t0;
    metrics_observe(MH_COMPUTE, r->compute_s);
    answer_request(r, e, err, pool, t1);
}

/* The memory budget for a batch's pass, beyond what its requests reserved
 * for passes of their own (attend_plan: each plan's scratch_bytes): one
 * ragged pass can need more (its single block rounded up to whole huge
 * pages, or the concatenated copies AUTO picks where the projections run
 * on OpenBLAS). Returns the bytes to give back after the pass, or
 * (size_t)-1 when the pass cannot have them now. */
static size_t batch_take(const attn_weights *w, const attn_input *const *ins, req *const *rs, int k,
                         const attn_pool *pool) {
    const size_t need =
        attn_ragged_scratch_bytes(w, ins, k, pool ? attn_pool_size(pool) : 1, ATTN_RAGGED_AUTO);
    if (need == 0) return (size_t)-1; /* no size: the pass would fail anyway */
    size_t held = 0;
    for (int i = 0; i < k; i++)
        if (!attn_add_size(held, rs[i]->ar.plan.scratch_bytes, &held)) held = (size_t)-1;
    const size_t extra = need > held ? need - held : 0;
    return budget_take(extra) ? extra : (size_t)-1;
}

/* A batch the queue took together (queue.h): the requests' turn, one pass
 * of the engine for all of them (attn_forward_ragged: each gets the bits
 * it would get alone), then each answer in turn. If the batch cannot run
 * (its scratch: more than the budget has now, or out of memory), each
 * request runs alone. */
#define BATCH_MAX 1024
static void run_batch(cjob *head, attn_pool *pool) {
    req *rs[BATCH_MAX];
    const attn_input *ins[BATCH_MAX];
    float *outs[BATCH_MAX];
    int k = 0;
    long tokens = 0;
    double now = mono_now();
    for (cjob *j = head; j && k < BATCH_MAX; j = j->batch_next, k++) {
        req *r = rs[k] = j->ctx;
        r->queue_s = now - j->enqueued;
        metrics_observe(MH_QUEUE, r->queue_s);
        ins[k] = &r->ar.in;
        outs[k] = r->ar.out;
        tokens += j->batch_tokens;
    }
    char err[ATTN_ERRLEN];
    double t0 = mono_now();
    const attn_weights *w = ((req *)head->ctx)->ar.model->w; /* the batch key: all share it */
    const size_t extra = batch_take(w, ins, rs, k, pool);
    attn_status st = ATTN_ERR_NOMEM;
    if (extra != (size_t)-1) {
        st = attn_forward_ragged(w, ins, k, outs, ATTN_RAGGED_AUTO, pool, err, sizeof err);
        budget_give(extra);
    }
    double t1 = mono_now();
    if (!st) metrics_batch(k, tokens); /* the passes as they ran: else one a request */
    for (int i = 0; i < k; i++) {
        req *r = rs[i];
        if (st) {
            metrics_batch(1, (long)r->ar.in.B * r->ar.in.n);
            run_request(r, pool);
        } else {
            char e2[1024];
            r->compute_s = t1 - t0; /* the batch's: each waited for all of it */
            metrics_observe(MH_COMPUTE, r->compute_s);
            http_error e = attend_check_outputs(&r->ar, e2, sizeof e2);
            answer_request(r, e, e2, pool, mono_now());
        }
        r->phase = PH_READY;
        MHD_resume_connection(r->conn);
    }
}

/* On a dispatcher thread: the request's turn (or its expiry); then resume. */
static void attend_job(cjob *j, cjob_why why, double waited) {
    req *r = j->ctx;
    http_server *s = r->s;
    char err[256];
    if (why == CJOB_RUN && j->batch_next) {
        run_batch(j, s->pool);
        return;
    }
    r->queue_s = waited;
    metrics_observe(MH_QUEUE, waited);
    if (why == CJOB_RUN) {
        metrics_batch(1, (long)r->ar.in.B * r->ar.in.n);
        run_request(r, s->pool);
    } else {
        if (why == CJOB_EXPIRED)
            snprintf(err, sizeof err,
                     "waited %.0f ms for a compute slot (request_timeout_ms=%ld); retry later",
                     waited * 1e3, s->cfg->request_timeout_ms);
        else
            snprintf(err, sizeof err,
                     "shutting down before this request could run; retry on another replica");
        req_release_inputs(r);
        prepare_error(r, why == CJOB_EXPIRED ? HERR_OVERLOADED : HERR_NOT_READY, err);
    }
    r->phase = PH_READY;
    MHD_resume_connection(r->conn);
}

/* A request this small is computed and answered on the I/O thread that read
 * it: the hand-off through the queue (two thread wake-ups and a connection
 * suspend/resume) costs more than the work. About 20 us of compute, and an
 * answer that encodes in a few more. Only while the compute queue is idle:
 * a request never overtakes queued ones, and never competes with the pool
 * for the cores. */
#define INLINE_FLOPS        2.0e6
#define INLINE_ANSWER_BYTES ((size_t)64 << 10)

static bool run_inline(const req *r) {
    return r->ar.plan.flops < INLINE_FLOPS && r->ar.response_estimate <= INLINE_ANSWER_BYTES &&
           cqueue_idle(r->s->q);
}

/* An inference request's whole body is in: decode, validate, compute
 * (here, when it is tiny) or queue. */
static enum MHD_Result post_infer(req *r, char *body, size_t len, double t0) {
    http_server *s = r->s;
    char err[1024];
    attend_limits lim = s->lim;
    lim.reserve = plan_reserve;
    lim.release = plan_release;
    lim.reserve_ctx = r;
    lim.stream_min = STREAM_MIN_BYTES;
    http_error e =
        r->rt->api == API_V2
            ? v2_decode(&r->ar, body, len, r->header_len, r->target, &lim, err, sizeof err)
            : attend_decode(&r->ar, body, len, s->reg, &lim, err, sizeof err);
    r->decode_s = mono_now() - t0;
    metrics_observe(MH_DECODE, r->decode_s);
    if (r->ar.model) snprintf(r->model, sizeof r->model, "%s", r->ar.model->name);
    if (e) {
        req_release_inputs(r);
        return respond_error(r, e, err);
    }
    if (run_inline(r)) {
        r->phase = PH_QUEUED; /* for Server-Timing: it went the whole way */
        run_request(r, NULL);
        answer a = r->ans;
        memset(&r->ans, 0, sizeof r->ans);
        return send_answer(r, r->status, &a, NULL);
    }
    r->phase = PH_QUEUED;
    r->job.fn = attend_job;
    r->job.ctx = r;
    /* requests that can share one engine pass with others of the same
     * weights (the same loaded version: the key is the weights) */
    r->job.batch_key = r->ar.plan.ragged_ok ? r->ar.model->w : NULL;
    r->job.batch_tokens = (long)r->ar.in.B * r->ar.in.n;
    /* Suspend before queueing: the job may finish before we would return. */
    MHD_suspend_connection(r->conn);
    cqueue_status rc = cqueue_push(s->q, &r->job);
    if (rc != CQ_OK) {
        req_release_inputs(r);
        snprintf(err, sizeof err,
                 rc == CQ_FULL ? "compute queue full (max_queue=%ld); retry later"
                               : "shutting down (max_queue=%ld)",
                 s->cfg->max_queue);
        prepare_error(r, http_error_from_cqueue(rc), err);
        r->phase = PH_READY;
        MHD_resume_connection(r->conn);
    }
    return MHD_YES;
}

/* v2 infer: the model is in the path, so an unknown one is refused before
 * the body is read. */
static enum MHD_Result v2_headers(req *r) {
    buf none;
    buf_init(&none, 0);
    path_model(r, &none);
    return MHD_YES;
}

/* ------------------------------------- the model repository extension */

static enum MHD_Result post_repo_index(req *r, char *body, size_t len, double t0) {
    char err[512];
    bool ready_only;
    (void)t0;
    http_error e = v2_index_request(body, len, &ready_only, err, sizeof err);
    if (e) return respond_error(r, e, err);
    int n;
    model_status *m = registry_snapshot(r->s->reg, NULL, &n);
    buf b;
    buf_init(&b, 64u << 20);
    v2_index_json(m, n, ready_only, &b);
    registry_snapshot_free(m, n);
    return respond_buf(r, "application/json", &b);
}

/* Load and unload: refused unless --model-control explicit (403, where
 * Triton answers 503 UNAVAILABLE: sending it again will fail again), and
 * for a name that is not a model name (a path, say). */
static enum MHD_Result repo_control_headers(req *r) {
    char msg[400];
    if (r->s->cfg->model_control != MODEL_CONTROL_EXPLICIT)
        return respond_error(r, HERR_FORBIDDEN,
                             "explicit model load / unload is not allowed: the server runs with "
                             "--model-control none (start it with --model-control explicit)");
    if (!model_name_check(r->args.model, "model (in the path)", msg, sizeof msg))
        return respond_error(r, HERR_INVALID_REQUEST, msg);
    return MHD_YES;
}

/* On the reload thread: the load or unload is done; answer with the
 * model's index entry (or the error) and resume the connection. */
static void repo_job_done(reload_job *j) {
    req *r = j->ctx;
    if (j->herr) {
        prepare_error(r, j->herr, j->msg);
    } else {
        int n;
        model_status *m = registry_snapshot(r->s->reg, j->name, &n);
        /* (only this thread removes names, so the name is there) */
        model_status gone = {.state = MODEL_UNAVAILABLE};
        snprintf(gone.name, sizeof gone.name, "%s", j->name);
        answer_init(&r->ans);
        v2_index_entry_json(n ? m : &gone, &r->ans.text);
        registry_snapshot_free(m, n);
        snprintf(r->model, sizeof r->model, "%s", j->name); /* a name the repository knows */
        r->herr = HERR_NONE;
        r->ans_coded = false;
        r->status = 200;
    }
    r->phase = PH_READY;
    MHD_resume_connection(r->conn);
}

/* Load and unload run on the reload thread, never on this one: the
 * connection waits suspended, as for a compute job. */
static enum MHD_Result post_repo_control(req *r, char *body, size_t len, double t0) {
    char err[512];
    bool load = r->rt->api == API_REPO_LOAD;
    (void)t0;
    http_error e = v2_control_request(body, len, load, err, sizeof err);
    if (e) return respond_error(r, e, err);
    reload_job *j = &r->rjob;
    j->op = load ? RELOAD_LOAD : RELOAD_UNLOAD;
    snprintf(j->name, sizeof j->name, "%s", r->args.model);
    j->done = repo_job_done;
    j->ctx = r;
    r->phase = PH_QUEUED;
    MHD_suspend_connection(r->conn); /* before: the job may be done before we return */
    if (!reloader_submit(r->s->rl, j)) {
        prepare_error(r, HERR_NOT_READY, "shutting down; retry on another replica");
        r->phase = PH_READY;
        MHD_resume_connection(r->conn);
    }
    return MHD_YES;
}

/* The front ends of POST bodies, by post_api. */
static const post_front post_fronts[] = {
    [API_ATTEND] = {NULL, post_infer, true},
    [API_V2] = {v2_headers, post_infer, true},
    [API_REPO_INDEX] = {NULL, post_repo_index, false},
    [API_REPO_LOAD] = {repo_control_headers, post_repo_control, false},
    [API_REPO_UNLOAD] = {repo_control_headers, post_repo_control, false},
};

/* A v2 body with binary tensors starts BODY_ALIGN bytes or fewer into its
 * buffer (reserved whole from Content-Length), so that its binary section,
 * after the JSON header's header_len bytes, lies on a cache line: FP32
 * tensors are then used where they arrived, where a header of any other
 * length had v2_decode move the whole section down to 4-byte alignment
 * (1.5 MB at n = 512, E = 768; decode took 0.21 ms with the move, 0.15
 * without). A compressed body is inflated elsewhere, so it keeps none. */
static void body_align(req *r) {
    if (r->in_coded || !r->body.data || r->body.len) return;
    size_t lead = (size_t)(-((uintptr_t)r->body.data + r->header_len)) & (BODY_ALIGN - 1);
    /* the lead fits the Content-Length reservation, or the buffer would
     * move and the lead be wrong: then none */
    if (lead + 1 > r->body.cap) return;
    char *p = buf_reserve(&r->body, lead);
    if (!p) return;
    memset(p, ' ', lead);
    buf_commit(&r->body, lead);
    r->body_lead = lead;
}

/* Checks made on the headers alone, before any body byte is read. */
static enum MHD_Result post_headers(req *r) {
    http_server *s = r->s;
    struct MHD_Connection *c = r->conn;
    char msg[400];
    if (!atomic_load(&s->ready))
        return respond_not_ready(r, NULL, "draining: shutting down; retry on another replica");
    if (!authorized(s, c))
        return respond_error(r, HERR_UNAUTHORIZED, "Authorization: Bearer API key required");
    const post_front *front = &post_fronts[r->rt->api];
    r->compute = front->compute;
    if (front->headers) {
        enum MHD_Result ret = front->headers(r);
        if (r->phase == PH_DONE) return ret;
    }
    /* A full queue is answered from the headers: reading and decoding a
     * body only to refuse it would keep the I/O threads (and the health
     * probes that share them) busy exactly when the server is overloaded. */
    if (front->compute && cqueue_depth(s->q) >= s->cfg->max_queue) {
        snprintf(msg, sizeof msg, "compute queue full (max_queue=%ld); retry later",
                 s->cfg->max_queue);
        return respond_error(r, HERR_OVERLOADED, msg);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl) {
        char *end;
        unsigned long long v = strtoull(cl, &end, 10);
        if (end == cl || *end)
            return respond_error(r, HERR_INVALID_REQUEST, "Content-Length is not a number");
        if (v > s->cfg->max_body_bytes) {
            snprintf(msg, sizeof msg, "body of %llu bytes; the limit is %zu (max_body_bytes)", v,
                     s->cfg->max_body_bytes);
            return respond_error(r, HERR_PAYLOAD_TOO_LARGE, msg);
        }
        /* the whole body at once: no doubling and copying as it arrives
         * (pages are only taken as they are written) */
        if (v && !req_take(r, (size_t)v, false, "body")) return refuse_budget(r, (size_t)v, "body");
        if (v && !buf_reserve(&r->body, (size_t)v + BODY_ALIGN))
            return respond_error(r, HERR_OVERLOADED, "not enough memory for the body now");
    }
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!content_type_ok(r, ct)) {
        snprintf(msg, sizeof msg, "Content-Type '%.100s' is not supported; send application/json%s",
                 ct,
                 r->rt->api == API_V2 ? " (or application/octet-stream with binary tensors)" : "");
        return respond_error(r, HERR_UNSUPPORTED_MEDIA_TYPE, msg);
    }
    const char *ce = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    if (ce && strcasecmp(ce, "identity")) {
        if (!strcasecmp(ce, "gzip") || !strcasecmp(ce, "x-gzip"))
            r->in_coding = GZ_GZIP;
        else if (!strcasecmp(ce, "deflate"))
            r->in_coding = GZ_DEFLATE;
        else {
            snprintf(msg, sizeof msg,
                     "Content-Encoding '%.100s' is not supported; send gzip, deflate or identity",
                     ce);
            return respond_error(r, HERR_UNSUPPORTED_MEDIA_TYPE, msg);
        }
        r->in_coded = true;
    }
    const char *hl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    if (hl) {
        char *end;
        unsigned long long v = strtoull(hl, &end, 10);
        if (r->rt->api != API_V2)
            return respond_error(r, HERR_INVALID_REQUEST,
                                 "Inference-Header-Content-Length: binary tensors are for the v2 "
                                 "infer routes, not /attend");
        if (end == hl || *end || hl[0] == '-' || hl[0] == '+' || v > s->cfg->max_body_bytes)
            return respond_error(r, HERR_INVALID_REQUEST,
                                 "Inference-Header-Content-Length: expected the JSON header's "
                                 "length in bytes, at most the body's");
        r->header_len = (size_t)v;
        body_align(r);
    }
    r->phase = PH_BODY;
    r->t_body = mono_now();
    r->admitted = true; /* from here on, a drain waits for this request */
    atomic_fetch_add(&s->admitted, 1);
    return MHD_YES;
}

/* The whole body is in: inflate it and hand it to its front end. */
static enum MHD_Result post_body_done(req *r) {
    http_server *s = r->s;
    char err[1024];
    r->receive_s = mono_now() - r->t_body;
    metrics_observe(MH_RECEIVE, r->receive_s);
    conn_set_deadline(s, r->conn,
                      0); /* the whole request is in: decoding is our time, not the client's */
    if (r->over_budget) return refuse_budget(r, r->bytes_in, "body");
    if (r->discarding) {
        snprintf(err, sizeof err, "body larger than %zu bytes (max_body_bytes)",
                 s->cfg->max_body_bytes);
        return respond_error(r, HERR_PAYLOAD_TOO_LARGE, err);
    }
    char *body = r->body.data ? r->body.data + r->body_lead : (char *)"";
    size_t len = r->body.len - r->body_lead;
    double t0 = mono_now();
    if (r->in_coded) {
        gz_status g = gz_inflate(body, len, s->cfg->max_body_bytes, r->in_coding, &r->plain, &len);
        if (g != GZ_OK) {
            const char *coding = gz_format_name(r->in_coding);
            if (g == GZ_TOO_BIG)
                snprintf(err, sizeof err, "%s body inflates past %zu bytes (max_body_bytes)",
                         coding, s->cfg->max_body_bytes);
            else if (g == GZ_NOMEM)
                snprintf(err, sizeof err, "not enough memory to inflate the body now");
            else
                snprintf(err, sizeof err,
                         "body: Content-Encoding is %s but the body is not a valid %s stream",
                         coding, coding);
            return respond_error(r, http_error_from_gz(g), err);
        }
        /* the inflated body is in memory already; it counts from here on
         * (at most max_body_bytes per request over the budget, briefly) */
        body_free(r);
        if (!req_take(r, len, false, "inflate")) return refuse_budget(r, len, "inflated body");
        body = r->plain;
    }
    return post_fronts[r->rt->api].body(r, body, len, t0);
}

/* ------------------------------------------------- the access handler */

/* Route r (r->rt set), or answer what stops it: 404 for a path no route
 * has, 405 for a method its routes do not take, and OPTIONS at once. */
static enum MHD_Result route_or_refuse(req *r, const char *method) {
    bool options = !strcmp(method, "OPTIONS");
    int found = route_find(r, options ? "GET" : method);
    if (options && found == 405) found = route_find(r, "POST");
    if (found == 404) {
        char msg[400];
        snprintf(msg, sizeof msg, "no such path: %.200s%s", r->path,
                 !strcmp(r->path, "/") ? " (the playground is disabled: --no-ui)" : "");
        return respond_error(r, HERR_NOT_FOUND, msg);
    }
    if (options) return answer_options(r);
    if (found == 405) {
        char msg[160], allow[64];
        allowed_methods(r, allow, sizeof allow);
        snprintf(msg, sizeof msg, "method %.16s not allowed here; use %s", method, allow);
        return respond_error(r, HERR_METHOD_NOT_ALLOWED, msg);
    }
    return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upsize, void **con_cls) {
    http_server *s = cls;
    req *r = *con_cls;
    (void)version, (void)url;
    if (!r) { /* the URI callback could not allocate */
        r = on_uri(s, url, c);
        if (!r) return MHD_NO;
        *con_cls = r;
    }
    switch (r->phase) {
    case PH_NEW: {
        snprintf(r->method, sizeof r->method, "%s", method);
        req_id(s, c, r->id, sizeof r->id);
        enum MHD_Result framing = check_framing(r);
        if (r->phase == PH_DONE) return framing; /* answered a framing error */
        r->out_coded = compress_negotiate(
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept-Encoding"), &r->out_coding);
        if (!strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "OPTIONS")) {
            /* Answer on the next call: libmicrohttpd 0.9.75 closes the
             * connection after a response queued in this first call. */
            r->phase = PH_GET;
            return MHD_YES;
        }
        enum MHD_Result routed = route_or_refuse(r, method);
        if (r->phase == PH_DONE) return routed;
        return post_headers(r);
    }
    case PH_GET: {
        if (*upsize) { /* a body on a GET: read and ignore it */
            r->bytes_in += *upsize;
            *upsize = 0;
            return MHD_YES;
        }
        enum MHD_Result routed = route_or_refuse(r, method);
        if (r->phase == PH_DONE) return routed;
        if (!r->rt->get) return respond_error(r, HERR_INTERNAL, "a POST route reached PH_GET");
        if (r->rt->auth && !authorized(s, r->conn))
            return respond_error(r, HERR_UNAUTHORIZED, "Authorization: Bearer API key required");
        buf b;
        buf_init(&b, 64u << 20);
        return r->rt->get(r, &b);
    }
    case PH_BODY:
        if (*upsize) {
            if (!r->discarding) {
                size_t need = r->body.len + *upsize;
                if (*upsize > s->cfg->max_body_bytes - (r->body.len - r->body_lead)) {
                    r->discarding = true; /* keep reading (the deadline bounds it), answer 413 */
                    body_free(r);
                } else if (need > r->held_in && !req_take(r, need - r->held_in, false, "body")) {
                    r->discarding = r->over_budget = true; /* keep reading, answer 503 */
                    body_free(r);
                } else {
                    buf_append(&r->body, upload, *upsize);
                    if (r->body.failed) r->discarding = true;
                }
            }
            r->bytes_in += *upsize;
            *upsize = 0;
            return MHD_YES;
        }
        return post_body_done(r);
    case PH_READY: {
        answer a = r->ans;
        memset(&r->ans, 0, sizeof r->ans);
        return send_answer(r, r->status, &a, NULL);
    }
    case PH_QUEUED: /* should not be called while suspended */
    case PH_DONE: *upsize = 0; return MHD_YES;
    }
    return MHD_NO;
}

/* -------------------------------------------------- start, drain, stop */

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
    log_warn("libmicrohttpd: %s", msg);
}

http_server *http_start(const attn_config *cfg, registry *reg, reloader *rl, attn_pool *pool,
                        const attn_blas_info *blas, char *err, size_t errlen) {
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = cfg;
    s->reg = reg;
    s->rl = rl;
    s->pool = pool;
    s->blas = blas;
    pthread_mutex_init(&s->conn_mu, NULL);
    /* Sockets answered early are drained as long as a client may take to
     * send a body (body_timeout_ms), at most 30 s as nginx's lingering_time;
     * 64 at a time, past which one is closed at once as before. */
    double hold_ms = cfg->body_timeout_ms < 30000 ? (double)cfg->body_timeout_ms : 30000.0;
    s->ling = linger_new(LINGER_MAX, hold_ms / 1000.0);
    if (getrandom(&s->id_seed, sizeof s->id_seed, 0) != sizeof s->id_seed)
        s->id_seed = (unsigned long long)time(NULL) * 2654435761u;
    s->lim = (attend_limits){.max_tokens = cfg->max_tokens,
                             .max_batch = cfg->max_batch,
                             .max_response_bytes = cfg->max_response_bytes,
                             .max_compute_bytes = cfg->max_compute_bytes,
                             .nworkers = attn_pool_size(pool)};
    s->compress = (compress_policy){.min_bytes = cfg->compress_min_bytes,
                                    .always_bytes = cfg->compress_always_bytes,
                                    .budget = (double)cfg->compress_budget_pct / 100.0,
                                    .level = (int)cfg->compress_level};
    /* As many dispatchers as workers: enough requests in compute at once
     * to keep every worker busy with small ones, no more. */
    const cqueue_batching batching = {(int)cfg->batch_max_requests, cfg->batch_max_tokens,
                                      cfg->batch_delay_us};
    s->q = cqueue_create(attn_pool_size(pool), cfg->max_queue, cfg->request_timeout_ms, &batching);
    if (!s->q) {
        snprintf(err, errlen, "cannot start the compute queue threads");
        goto fail;
    }
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM},
                    *ai = NULL;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%ld", cfg->port);
    int gai = getaddrinfo(cfg->host, portstr, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "host '%s': not a numeric IPv4 or IPv6 address (%s)", cfg->host,
                 gai_strerror(gai));
        goto fail;
    }
    /* poll, not epoll: libmicrohttpd 0.9.75's epoll mode leaves connections
     * that the client closed with FIN mid-request in CLOSE_WAIT until a
     * timeout (measured: 29 of 50 with epoll, 0 of 50 with poll), and
     * connections are bounded by max_connections anyway. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, on_accept, s, on_access, s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->io_threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections + 16,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY_BYTES, MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%ld (in use, or not allowed)", cfg->host,
                 cfg->port);
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : (int)cfg->port;
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s) == 0) s->watchdog_started = true;
    atomic_store(&s->ready, 1);
    return s;
fail:
    http_stop(s);
    return NULL;
}

int http_port(const http_server *s) {
    return s->port;
}

void http_drain(http_server *s) {
    /* Keep listening: probes must see /readyz answer 503, and a new /attend
     * gets 503 not_ready (with Connection: close) so a load balancer retries
     * it elsewhere. Wait only for the /attend requests already admitted. */
    atomic_store(&s->ready, 0);
    atomic_store(&s->draining, 1);
    double deadline = mono_now() + (double)s->cfg->shutdown_grace_ms / 1000.0;
    struct timespec nap = {0, 20 * 1000 * 1000};
    long left;
    while ((left = atomic_load(&s->admitted)) > 0 && mono_now() < deadline) nanosleep(&nap, NULL);
    if (left > 0) log_warn("drain: grace period over with %ld request(s) in flight", left);
    cqueue_stop(s->q);    /* 503 to what still waits; running computations finish */
    reloader_stop(s->rl); /* the same for loads and unloads */
    /* let resumed connections send their answers */
    double flush = mono_now() + 2.0;
    while (atomic_load(&s->admitted) > 0 && mono_now() < flush) nanosleep(&nap, NULL);
    /* Only now stop accepting: a client connecting from here on is refused
     * (a load balancer retries that safely), and the requests already read
     * on open connections get their 503 before the daemon stops. */
    MHD_socket lfd = MHD_quiesce_daemon(s->d);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    flush = mono_now() + 1.0;
    while (atomic_load(&s->requests) > 0 && mono_now() < flush) nanosleep(&nap, NULL);
}

void http_stop(http_server *s) {
    if (!s) return;
    log_flush();
    if (s->q) cqueue_stop(s->q);
    if (s->d) MHD_stop_daemon(s->d);
    linger_free(s->ling); /* after the daemon: it hands over sockets until it stops */
    if (s->watchdog_started) {
        atomic_store(&s->watchdog_stop, 1);
        pthread_join(s->watchdog, NULL);
    }
    cqueue_destroy(s->q);
    pthread_mutex_destroy(&s->conn_mu);
    free(s);
}
