/* rawsock.h - raw TCP for the integration tests: write exact bytes to the
 * daemon and read what comes back, for the HTTP framing cases libcurl will
 * not produce (duplicate Content-Length, runaway chunk sizes, pipelining,
 * bodies shorter or longer than announced, garbage instead of HTTP).
 *
 *     raw_reply r;
 *     int fd = raw_connect(d.port);
 *     raw_send(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
 *     raw_read(fd, 2.0, 1, &r);       // up to 2 s, stop after 1 whole response
 *     raw_status(&r, 0)                // 200
 *     raw_body(&r, 0, &len)            // pointer into r.data
 *     raw_reply_free(&r); close(fd);
 *
 * Responses are split by their framing (status line, headers, then exactly
 * Content-Length bytes, or chunked), so a response that does not frame
 * cleanly is visible as raw_wellformed() == false.
 */
#ifndef ATTN_RAWSOCK_H
#define ATTN_RAWSOCK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline double raw_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A blocking TCP connection to 127.0.0.1:port, or -1 (errno set). */
static inline int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Write all n bytes (no SIGPIPE). 0, or -1 when the peer is gone. */
static inline int raw_send(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static inline int raw_send_str(int fd, const char *s) { return raw_send(fd, s, strlen(s)); }

/* Close with an RST instead of a FIN (a client that vanishes). */
static inline void raw_abort(int fd) {
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

typedef enum { RAW_OPEN = 0, RAW_EOF, RAW_RESET } raw_end;

typedef struct raw_reply {
    char *data; /* everything read, NUL-terminated */
    size_t len;
    raw_end end; /* RAW_OPEN: stopped by the timeout or by want */
    double secs; /* from the start of raw_read to its end */
} raw_reply;

static inline void raw_reply_free(raw_reply *r) {
    free(r->data);
    r->data = NULL;
    r->len = 0;
}

/* Find the end of the header block starting at p (n bytes): offset just past
 * "\r\n\r\n", or 0 if incomplete. */
static inline size_t raw_head_end(const char *p, size_t n) {
    for (size_t i = 3; i < n; i++)
        if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r') return i + 1;
    return 0;
}

/* Value of header name in the header block [p, p+hn), copied into out. */
static inline bool raw_head_value(const char *p, size_t hn, const char *name, char *out, size_t outn) {
    size_t nl = strlen(name);
    const char *e = p + hn;
    const char *line = memchr(p, '\n', hn);
    while (line && line + 1 < e) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(e - line));
        if (!eol) break;
        if ((size_t)(eol - line) > nl && !strncasecmp(line, name, nl) && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t')) v++;
            size_t vl = (size_t)(eol - v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' ')) vl--;
            if (vl >= outn) vl = outn - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return true;
        }
        line = eol;
    }
    return false;
}

/* One response inside a reply. */
typedef struct raw_part {
    size_t start, head_len; /* offsets into data */
    size_t body_start, body_len;
    size_t end; /* just past the body */
    int status;
} raw_part;

/* Split data[off..len) into the response starting at off. Returns 1 on a
 * whole response, 0 when incomplete, -1 when it does not frame as HTTP
 * (does not start with "HTTP/1.", or a bad length). */
static inline int raw_parse_one(const char *d, size_t len, size_t off, raw_part *out) {
    memset(out, 0, sizeof *out);
    size_t n = len - off;
    const char *p = d + off;
    if (n < 8) return n == 0 || !strncmp(p, "HTTP/1.", n) ? 0 : -1;
    if (strncmp(p, "HTTP/1.", 7)) return -1;
    size_t h = raw_head_end(p, n);
    if (!h) return 0;
    out->start = off;
    out->head_len = h;
    out->status = atoi(p + 9);
    out->body_start = off + h;
    char v[64];
    if (raw_head_value(p, h, "Transfer-Encoding", v, sizeof v) && strcasestr(v, "chunked")) {
        size_t q = off + h;
        for (;;) {
            const char *eol = memchr(d + q, '\n', len - q);
            if (!eol) return 0;
            unsigned long long sz = strtoull(d + q, NULL, 16);
            size_t after = (size_t)(eol - d) + 1;
            if (sz == 0) {
                /* trailers end with an empty line */
                size_t t = after;
                for (;;) {
                    const char *e2 = memchr(d + t, '\n', len - t);
                    if (!e2) return 0;
                    bool empty = (size_t)(e2 - (d + t)) <= 1;
                    t = (size_t)(e2 - d) + 1;
                    if (empty) break;
                }
                out->body_len = t - out->body_start;
                out->end = t;
                return 1;
            }
            if (sz > len || after + sz + 2 > len) return 0;
            q = after + (size_t)sz + 2;
        }
    }
    size_t cl = 0;
    if (raw_head_value(p, h, "Content-Length", v, sizeof v)) {
        char *e;
        unsigned long long x = strtoull(v, &e, 10);
        if (e == v || *e) return -1;
        cl = (size_t)x;
    }
    /* HEAD and 1xx/204/304 carry no body; these tests do not send HEAD. */
    if (out->status < 200 || out->status == 204 || out->status == 304) cl = 0;
    if (n - h < cl) return 0;
    out->body_len = cl;
    out->end = off + h + cl;
    return 1;
}

/* Number of whole responses in r; *clean is false when bytes follow that
 * do not frame as a response (a malformed answer). */
static inline int raw_count(const raw_reply *r, bool *clean) {
    size_t off = 0;
    int k = 0;
    raw_part p;
    if (clean) *clean = true;
    for (;;) {
        int rc = raw_parse_one(r->data, r->len, off, &p);
        if (rc == 1) {
            k++;
            off = p.end;
            continue;
        }
        if (rc < 0 && clean) *clean = false;
        if (rc == 0 && off < r->len && r->end != RAW_OPEN && clean) *clean = false; /* cut short */
        return k;
    }
}

static inline bool raw_wellformed(const raw_reply *r) {
    bool clean;
    raw_count(r, &clean);
    return clean;
}

/* Response i (0-based) of r, or false. */
static inline bool raw_part_at(const raw_reply *r, int i, raw_part *out) {
    size_t off = 0;
    for (int k = 0;; k++) {
        if (raw_parse_one(r->data, r->len, off, out) != 1) return false;
        if (k == i) return true;
        off = out->end;
    }
}

/* Status of response i, or 0 when there is no such whole response. */
static inline int raw_status(const raw_reply *r, int i) {
    raw_part p;
    return raw_part_at(r, i, &p) ? p.status : 0;
}

/* Body of response i (not NUL-terminated; *len set), or NULL. */
static inline const char *raw_body(const raw_reply *r, int i, size_t *len) {
    raw_part p;
    if (!raw_part_at(r, i, &p)) return NULL;
    *len = p.body_len;
    return r->data + p.body_start;
}

/* Header value of response i into out, or NULL. */
static inline const char *raw_header(const raw_reply *r, int i, const char *name, char *out, size_t n) {
    raw_part p;
    if (!raw_part_at(r, i, &p)) return NULL;
    return raw_head_value(r->data + p.start, p.head_len, name, out, n) ? out : NULL;
}

/* Read from fd until the peer closes, until `want` whole responses have
 * arrived (want > 0), or until timeout_s passes. */
static inline void raw_read(int fd, double timeout_s, int want, raw_reply *r) {
    memset(r, 0, sizeof *r);
    size_t cap = 4096;
    r->data = malloc(cap);
    r->data[0] = '\0';
    double t0 = raw_now(), until = t0 + timeout_s;
    for (;;) {
        if (want > 0 && raw_count(r, NULL) >= want) break;
        double left = until - raw_now();
        if (left <= 0) break;
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        if (r->len + 65536 + 1 > cap) {
            while (r->len + 65536 + 1 > cap) cap *= 2;
            r->data = realloc(r->data, cap);
        }
        ssize_t k = recv(fd, r->data + r->len, 65536, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) {
            r->end = RAW_EOF;
            break;
        }
        if (k < 0) {
            r->end = RAW_RESET;
            break;
        }
        r->len += (size_t)k;
        r->data[r->len] = '\0';
    }
    r->secs = raw_now() - t0;
}

/* After the responses: does the peer close within timeout_s? Returns the
 * seconds it took, or -1 when the connection is still open (bytes that
 * arrive meanwhile are appended to r when r is not NULL). */
static inline double raw_wait_close(int fd, double timeout_s, raw_reply *r) {
    double t0 = raw_now(), until = t0 + timeout_s;
    char tmp[4096];
    for (;;) {
        double left = until - raw_now();
        if (left <= 0) return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr <= 0) continue;
        ssize_t k = recv(fd, tmp, sizeof tmp, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            if (r) r->end = k == 0 ? RAW_EOF : RAW_RESET;
            return raw_now() - t0;
        }
        if (r) {
            r->data = realloc(r->data, r->len + (size_t)k + 1);
            memcpy(r->data + r->len, tmp, (size_t)k);
            r->len += (size_t)k;
            r->data[r->len] = '\0';
        }
    }
}

/* Has the peer closed fd (EOF or reset)? Does not block; data is dropped. */
static inline bool raw_peer_closed(int fd) {
    char tmp[4096];
    for (;;) {
        struct pollfd pf = {fd, POLLIN | POLLRDHUP, 0};
        int pr = poll(&pf, 1, 0);
        if (pr <= 0) return false;
        if (pf.revents & (POLLERR | POLLHUP)) return true;
        ssize_t k = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
        if (k == 0) return true;
        if (k < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
}

/* The first bytes of r on one line (CR, LF and other controls escaped),
 * for messages. Returns out. */
static inline const char *raw_escape(const raw_reply *r, char *out, size_t outn) {
    size_t o = 0;
    for (size_t i = 0; i < r->len && o + 5 < outn; i++) {
        unsigned char c = (unsigned char)r->data[i];
        if (c == '\r') o += (size_t)snprintf(out + o, outn - o, "\\r");
        else if (c == '\n') o += (size_t)snprintf(out + o, outn - o, "\\n");
        else if (c < 0x20 || c >= 0x7f) o += (size_t)snprintf(out + o, outn - o, "\\x%02x", c);
        else out[o++] = (char)c;
    }
    if (o >= outn) o = outn - 1;
    out[o] = '\0';
    return out;
}

/* Connect, send n bytes, read until want responses / close / timeout, and
 * close. Returns 0, or -1 when the connection could not be made. A failed
 * send is not an error: the daemon may answer and close before the client
 * is done writing. */
static inline int raw_exchange(int port, const void *req, size_t n, int want, double timeout_s,
                        raw_reply *r) {
    int fd = raw_connect(port);
    if (fd < 0) {
        memset(r, 0, sizeof *r);
        r->data = calloc(1, 1);
        return -1;
    }
    raw_send(fd, req, n);
    raw_read(fd, timeout_s, want, r);
    close(fd);
    return 0;
}

#endif
