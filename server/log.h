/* log.h - event and access logging to stderr, as text or JSON lines.
 *
 * Lines from several threads never interleave: each is whole in one write(2)
 * (access lines, under load, several in one). Text: "2026-11-29T10:00:00.123Z info message".
 * JSON: {"ts":"...","level":"info","msg":"..."}; access lines carry fields.
 * Thread-safe after log_init.
 */
#ifndef ATTN_LOG_H
#define ATTN_LOG_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { LOG_TEXT, LOG_JSON } log_format;

void log_init(log_format fmt);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

typedef struct log_access_rec {
    const char *request_id;
    const char *remote; /* client address */
    const char *method;
    const char *path;
    const char *model; /* "" when none */
    int status;
    const char *error_type; /* NULL on success */
    size_t bytes_in, bytes_out;
    double total_ms, decode_ms, queue_ms, compute_ms, encode_ms;
    double receive_ms; /* the body's upload, from the end of the headers */
    double send_ms;    /* the answer's, from queued to its last byte sent */
} log_access_rec;

/* Access lines may wait (in order) until log_flush, which the server calls
 * when no request is in flight and every 200 ms; event lines flush first. */
void log_access(const log_access_rec *r);
void log_flush(void);

#endif
