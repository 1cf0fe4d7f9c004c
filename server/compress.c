/* compress.c - see compress.h. */
#include "compress.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The q-value of coding `name` in an Accept-Encoding list: -1 when absent
 * (and no "*"), else 0..1. */
static double qvalue(const char *ae, const char *name) {
    double star = -1, q = -1;
    size_t nl = strlen(name);
    const char *p = ae;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        const char *tok = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t') p++;
        size_t tl = (size_t)(p - tok);
        double v = 1;
        while (*p == ' ' || *p == '\t') p++;
        while (*p == ';') { /* parameters: only q matters */
            p++;
            while (*p == ' ' || *p == '\t') p++;
            if ((*p == 'q' || *p == 'Q') && p[1] == '=') v = strtod(p + 2, NULL);
            while (*p && *p != ',' && *p != ';') p++;
        }
        if (tl == nl && !strncasecmp(tok, name, nl))
            q = v;
        else if (tl == 1 && *tok == '*')
            star = v;
        if (*p && *p != ',') p++;
    }
    return q >= 0 ? q : star;
}

bool compress_negotiate(const char *ae, gz_format *f) {
    if (!ae) return false;
    double g = qvalue(ae, "gzip"), d = qvalue(ae, "deflate");
    if (g <= 0 && d <= 0) return false;
    *f = g >= d ? GZ_GZIP : GZ_DEFLATE;
    return true;
}

/* Bytes per second; seeded low (zlib level 1 on JSON numbers runs at
 * 60-200 MB/s on these machines), then an average of what was seen. */
static _Atomic double rate = 60e6;

void compress_observe(size_t bytes, double seconds) {
    if (bytes < 65536 || seconds <= 0) return; /* too small to time */
    double r = (double)bytes / seconds, old = atomic_load(&rate);
    atomic_store(&rate, 0.75 * old + 0.25 * r);
}

double compress_rate(void) {
    return atomic_load(&rate);
}

bool compress_pays(const compress_policy *p, size_t bytes, bool text, double server_s) {
    if (bytes < p->min_bytes) return false;
    if (bytes <= p->always_bytes) return true;
    if (!text) return false;
    return (double)bytes / compress_rate() <= p->budget * server_s;
}
