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

static void log_timestamp(char *out, size_t n) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
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

void log_access(const log_access_rec *r) {
    char ts[40];
    log_timestamp(ts, sizeof ts);
    buf b;
    buf_init(&b, 8192);
    if (log_fmt == LOG_JSON) {
        buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"access\",\"request_id\":", ts);
        buf_json_string(&b, r->request_id);
        buf_puts(&b, ",\"remote\":");
        buf_json_string(&b, r->remote);
        buf_puts(&b, ",\"method\":");
        buf_json_string(&b, r->method);
        buf_puts(&b, ",\"path\":");
        buf_json_string(&b, r->path);
        buf_puts(&b, ",\"model\":");
        buf_json_string(&b, r->model);
        buf_printf(&b, ",\"status\":%d", r->status);
        if (r->error_type) {
            buf_puts(&b, ",\"error_type\":");
            buf_json_string(&b, r->error_type);
        }
        buf_printf(&b, ",\"bytes_in\":%zu,\"bytes_out\":%zu", r->bytes_in, r->bytes_out);
        const char *names[5] = {"total_ms", "decode_ms", "queue_ms", "compute_ms", "encode_ms"};
        const double ms[5] = {r->total_ms, r->decode_ms, r->queue_ms, r->compute_ms, r->encode_ms};
        for (int i = 0; i < 5; i++) {
            buf_printf(&b, ",\"%s\":", names[i]);
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
        buf_printf(&b, "%s access %s %s \"%s %s\" %d%s%s in=%zu out=%zu", ts, r->request_id,
                   r->remote, r->method, path, r->status, r->error_type ? " " : "",
                   r->error_type ? r->error_type : "", r->bytes_in, r->bytes_out);
        const char *names[5] = {" total=", "ms decode=", "ms queue=", "ms compute=", "ms encode="};
        const double ms[5] = {r->total_ms, r->decode_ms, r->queue_ms, r->compute_ms, r->encode_ms};
        for (int k = 0; k < 5; k++) {
            buf_puts(&b, names[k]);
            buf_put_ms(&b, ms[k]);
        }
        buf_puts(&b, "ms model=");
        buf_puts(&b, r->model[0] ? r->model : "-");
        buf_putc(&b, '\n');
    }
    log_pend(&b);
    buf_free(&b);
}
