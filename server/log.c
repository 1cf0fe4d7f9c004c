/* log.c - see log.h. Each line is formatted into a local buffer and written
 * with one write(2) to fd 2, which is atomic for lines under PIPE_BUF and in
 * practice unbroken for the short lines written here. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"

static log_format log_fmt = LOG_TEXT;

void log_init(log_format fmt) {
    log_fmt = fmt;
}

/* "2026-01-02T03:04:05.678Z" into out (n >= 25). The part up to the
 * seconds is kept per thread and made again only when the second changes:
 * gmtime_r and strftime on every access line were 2% of a small request. */
static void log_timestamp(char *out, size_t n) {
    static _Thread_local time_t cached_sec = (time_t)-1;
    static _Thread_local char cached[32];
    static _Thread_local size_t cached_len;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        cached_len = strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_sec = ts.tv_sec;
    }
    if (n < cached_len + 6) {
        if (n) out[0] = '\0';
        return;
    }
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
    memcpy(out, cached, cached_len);
    char *o = out + cached_len;
    o[0] = '.';
    o[1] = (char)('0' + ms / 100);
    o[2] = (char)('0' + ms / 10 % 10);
    o[3] = (char)('0' + ms % 10);
    o[4] = 'Z';
    o[5] = '\0';
}

static void write_all(const char *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(2, p + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

/* Access lines wait here while requests keep coming (one write(2) per line
 * was 5-10% of the time of a small request under load); log_flush writes
 * them: when the server has no request in flight, every 200 ms, when 32 KiB
 * are pending, and before any event line (which keeps the order). */
#define PENDING_MAX 32768
static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;
static char pending[PENDING_MAX];
static size_t pending_len;

static void flush_locked(void) {
    write_all(pending, pending_len);
    pending_len = 0;
}

void log_flush(void) {
    pthread_mutex_lock(&pending_mu);
    flush_locked();
    pthread_mutex_unlock(&pending_mu);
}

static void log_write(buf *b) {
    if (b->failed || !b->data) return;
    pthread_mutex_lock(&pending_mu);
    flush_locked();
    write_all(b->data, b->len);
    pthread_mutex_unlock(&pending_mu);
}

static void log_pend(buf *b) {
    if (b->failed || !b->data) return;
    pthread_mutex_lock(&pending_mu);
    if (pending_len + b->len > PENDING_MAX) flush_locked();
    if (b->len > PENDING_MAX)
        write_all(b->data, b->len);
    else {
        memcpy(pending + pending_len, b->data, b->len);
        pending_len += b->len;
    }
    pthread_mutex_unlock(&pending_mu);
}

static void log_v(const char *level, const char *fmt, va_list ap) {
    char msg[2048], ts[40];
    vsnprintf(msg, sizeof msg, fmt, ap);
    log_timestamp(ts, sizeof ts);
    buf b;
    buf_init(&b, 8192);
    if (log_fmt == LOG_JSON) {
        buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", ts, level);
        buf_json_string(&b, msg);
        buf_puts(&b, "}\n");
    } else {
        buf_printf(&b, "%s %s %s\n", ts, level, msg);
    }
    log_write(&b);
    buf_free(&b);
}

#define LOG_FN(fn, level)                                                                          \
    void fn(const char *fmt, ...) {                                                                \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        log_v(level, fmt, ap);                                                                     \
        va_end(ap);                                                                                \
    }
LOG_FN(log_info, "info")
LOG_FN(log_warn, "warn")
LOG_FN(log_error, "error")

/* %d without printf. */
static void put_int(buf *b, int v) {
    if (v < 0) buf_putc(b, '-');
    buf_put_u64(b, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);
}

/* The access line's durations, in the order printed: "name=1.234ms" in
 * text, "name_ms":1.234 in JSON. One table for both formats. */
#define ACCESS_PHASES 7
static const char *const access_phase[ACCESS_PHASES] = {"total",  "decode",  "queue", "compute",
                                                        "encode", "receive", "send"};

static void access_ms(const log_access_rec *r, double ms[ACCESS_PHASES]) {
    const double v[ACCESS_PHASES] = {r->total_ms,  r->decode_ms,  r->queue_ms, r->compute_ms,
                                     r->encode_ms, r->receive_ms, r->send_ms};
    memcpy(ms, v, sizeof v);
}

void log_access(const log_access_rec *r) {
    char ts[40];
    log_timestamp(ts, sizeof ts);
    double ms[ACCESS_PHASES];
    access_ms(r, ms);
    buf b;
    buf_init(&b, 8192);
    if (log_fmt == LOG_JSON) {
        buf_puts(&b, "{\"ts\":\"");
        buf_puts(&b, ts);
        buf_puts(&b, "\",\"level\":\"info\",\"msg\":\"access\",\"request_id\":");
        buf_json_string(&b, r->request_id);
        buf_puts(&b, ",\"remote\":");
        buf_json_string(&b, r->remote);
        buf_puts(&b, ",\"method\":");
        buf_json_string(&b, r->method);
        buf_puts(&b, ",\"path\":");
        buf_json_string(&b, r->path);
        buf_puts(&b, ",\"model\":");
        buf_json_string(&b, r->model);
        buf_puts(&b, ",\"status\":");
        put_int(&b, r->status);
        if (r->error_type) {
            buf_puts(&b, ",\"error_type\":");
            buf_json_string(&b, r->error_type);
        }
        buf_puts(&b, ",\"bytes_in\":");
        buf_put_u64(&b, r->bytes_in);
        buf_puts(&b, ",\"bytes_out\":");
        buf_put_u64(&b, r->bytes_out);
        for (int i = 0; i < ACCESS_PHASES; i++) {
            buf_puts(&b, ",\"");
            buf_puts(&b, access_phase[i]);
            buf_puts(&b, "_ms\":");
            buf_put_ms(&b, ms[i]);
        }
        buf_puts(&b, "}\n");
    } else {
        /* The path is the client's: print it with %.200s and no control bytes. */
        char path[201];
        size_t i = 0;
        for (; r->path[i] && i < 200; i++)
            path[i] = (unsigned char)r->path[i] < 0x20 || r->path[i] == 0x7f ? '?' : r->path[i];
        path[i] = '\0';
        /* the "%s access %s %s \"%s %s\" %d%s%s in=%zu out=%zu" of before,
         * without printf (a fifth of the access line's cost) */
        const char *head[] = {ts,    " access ", r->request_id, " ",  r->remote,
                              " \"", r->method,  " ",           path, "\" "};
        for (size_t k = 0; k < sizeof head / sizeof head[0]; k++) buf_puts(&b, head[k]);
        put_int(&b, r->status);
        if (r->error_type) {
            buf_putc(&b, ' ');
            buf_puts(&b, r->error_type);
        }
        const char *sizes[2] = {" in=", " out="};
        const size_t bytes[2] = {r->bytes_in, r->bytes_out};
        for (int k = 0; k < 2; k++) {
            buf_puts(&b, sizes[k]);
            buf_put_u64(&b, bytes[k]);
        }
        for (int k = 0; k < ACCESS_PHASES; k++) {
            buf_putc(&b, ' ');
            buf_puts(&b, access_phase[k]);
            buf_putc(&b, '=');
            buf_put_ms(&b, ms[k]);
            buf_puts(&b, "ms");
        }
        buf_puts(&b, " model=");
        buf_puts(&b, r->model[0] ? r->model : "-");
        buf_putc(&b, '\n');
    }
    log_pend(&b);
    buf_free(&b);
}
