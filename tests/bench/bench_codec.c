/* bench_codec.c - the /attend codec against jansson, on the same payloads.
 *
 * Decoding: a request body {"model":"demo","embeddings":[...]} holding a
 * [512,768] float32 tensor (x ~ N(0,1)), written two ways: shortest
 * round-trip text (what this server writes) and 17-digit text (what Python's
 * json.dumps(tensor.tolist()) writes). Ours is jdoc_parse; jansson's is
 * json_loadb with JSON_REJECT_DUPLICATES.
 *
 * Encoding: attention weights [12,512,512] (softmax rows) and an output
 * [512,768] written as nested JSON arrays. Ours is fmt_f32_shortest into one
 * buffer; jansson's is json_dumps(JSON_COMPACT | JSON_REAL_PRECISION(9)) of
 * a prebuilt array of reals (building the tree is not counted, which favours
 * jansson). Both texts read back to the same float32 values.
 *
 * MB/s are input bytes (decode) or output bytes (encode) per second; the
 * ratio compares times for the same tensor. Medians of BENCH_RUNS runs
 * (default 5; jansson gets at most 3), ours and jansson's alternating, timed
 * in thread CPU time.
 *
 * base64: the attention weights' 12.6 MB as bytes (beyond the caches: the
 * figure a large answer sees) and 64 KB of them 256 times a run (in L2: the
 * kernel's own speed), encoded and decoded by every kernel this CPU has and
 * by base64_encode/decode, in GB/s of both sides; medians of 2*BENCH_RUNS+1
 * runs (the kernels alternating), thread CPU time.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64_kernels.h"
#include "json.h"
#include "numfmt.h"
#include "stats.h"

/* CPU time of this (single) thread: on a machine shared with other work it
 * is far steadier than wall time, and the code measured is single-threaded,
 * so on an idle machine the two agree. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0xBE4C4C0DEull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}
static float gauss(void) {
    double u = uniform() + 1e-300, v = uniform();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

/* A tensor as nested JSON arrays, each number written by fmt: shape [dims]. */
typedef size_t (*fmt_fn)(char *, float);

static size_t fmt_17(char *buf, float x) { return (size_t)sprintf(buf, "%.17g", (double)x); }

static char *write_tensor(char *o, const float *x, const size_t *shape, int ndim, fmt_fn fmt) {
    *o++ = '[';
    if (ndim == 1) {
        for (size_t i = 0; i < shape[0]; i++) {
            if (i) *o++ = ',';
            o += fmt(o, x[i]);
        }
    } else {
        size_t inner = 1;
        for (int d = 1; d < ndim; d++) inner *= shape[d];
        for (size_t i = 0; i < shape[0]; i++) {
            if (i) *o++ = ',';
            o = write_tensor(o, x + i * inner, shape + 1, ndim - 1, fmt);
        }
    }
    *o++ = ']';
    return o;
}

static json_t *jansson_tensor(const float *x, const size_t *shape, int ndim) {
    json_t *a = json_array();
    size_t inner = 1;
    for (int d = 1; d < ndim; d++) inner *= shape[d];
    for (size_t i = 0; i < shape[0]; i++)
        json_array_append_new(a, ndim == 1 ? json_real(x[i])
                                           : jansson_tensor(x + i * inner, shape + 1, ndim - 1));
    return a;
}

static int runs = 5;

static void row(const char *what, size_t bytes_ours, double t_ours, size_t bytes_j, double t_j) {
    printf("%-44s %9.2f MB %9.1f MB/s %9.2f MB %9.1f MB/s   x%.1f\n", what, bytes_ours / 1e6,
           bytes_ours / t_ours / 1e6, bytes_j / 1e6, bytes_j / t_j / 1e6, t_j / t_ours);
    fflush(stdout);
}

/* Runs alternate ours / jansson, so that both see the same load on a
 * shared machine; jansson runs at most 3 times (it is slow). */
static void bench_decode(const char *what, const char *body, size_t len, const float *x, size_t n) {
    double t[32], tj[32];
    int jr = runs < 3 ? runs : 3;
    jdoc_limits lim = JDOC_LIMITS_DEFAULT;
    for (int r = 0; r < runs; r++) {
        jdoc *doc;
        char err[256];
        double t0 = now();
        jdoc_status st = jdoc_parse(body, len, &lim, &doc, err, sizeof err);
        t[r] = now() - t0;
        if (st) {
            fprintf(stderr, "jdoc_parse: %s\n", err);
            exit(1);
        }
        if (r == 0) { /* same floats as written */
            const jv *e = jv_get(jdoc_root(doc), "embeddings");
            size_t k = 0, bad = 0;
            for (size_t i = 0; i < e->u.arr.len; i++) {
                const jv *rowv = &e->u.arr.items[i];
                for (size_t j = 0; j < rowv->u.arr.len; j++, k++) bad += rowv->u.arr.f[j] != x[k];
            }
            if (bad || k != n) {
                fprintf(stderr, "decode mismatch: %zu of %zu\n", bad, k);
                exit(1);
            }
        }
        jdoc_free(doc);
        if (r >= jr) continue;
        json_error_t jerr;
        t0 = now();
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        tj[r] = now() - t0;
        if (!j) {
            fprintf(stderr, "json_loadb: %s\n", jerr.text);
            exit(1);
        }
        json_decref(j);
    }
    row(what, len, bench_median(t, runs), len, bench_median(tj, jr));
}

static void bench_encode(const char *what, const float *x, const size_t *shape, int ndim) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    char *buf = malloc(n * (FMT_F32_MAX + 1) + 1024);
    double t[32], tj[32];
    int jr = runs < 3 ? runs : 3;
    size_t len = 0, jlen = 0;
    json_t *tree = jansson_tensor(x, shape, ndim);
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        len = (size_t)(write_tensor(buf, x, shape, ndim, fmt_f32_shortest) - buf);
        t[r] = now() - t0;
        if (r >= jr) continue;
        t0 = now();
        char *s = json_dumps(tree, JSON_COMPACT | JSON_REAL_PRECISION(9));
        tj[r] = now() - t0;
        jlen = strlen(s);
        free(s);
    }
    json_decref(tree);
    /* check: ours reads back to the same floats */
    jdoc_limits lim = {.max_depth = 64, .max_values = SIZE_MAX};
    jdoc *doc;
    char err[256];
    if (jdoc_parse(buf, len, &lim, &doc, err, sizeof err)) {
        fprintf(stderr, "re-parse: %s\n", err);
        exit(1);
    }
    const jv *a = jdoc_root(doc);
    size_t k = 0, bad = 0;
    for (int d = 0; d < ndim - 1; d++) a = &a->u.arr.items[0];
    for (size_t i = 0; i < a->u.arr.len; i++, k++) bad += a->u.arr.f[i] != x[i];
    jdoc_free(doc);
    if (bad) {
        fprintf(stderr, "encode mismatch: %zu\n", bad);
        exit(1);
    }
    row(what, len, bench_median(t, runs), jlen, bench_median(tj, jr));
    free(buf);
}

/* ---------------------------------------------------------------- base64 */

/* The first "model name" of /proc/cpuinfo, or "unknown CPU". */
static void cpu_model(char *out, size_t cap) {
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

static void b64_header(void) {
    char model[256];
    cpu_model(model, sizeof model);
    printf("\nbase64 on %s; kernels this CPU runs:", model);
    for (int k = 0; k < BASE64_KERNEL_COUNT; k++)
        if (base64_kernel_supported((base64_kernel)k))
            printf(" %s", base64_kernel_name((base64_kernel)k));
    printf("; base64_encode/decode use %s\n", base64_kernel_name(base64_kernel_chosen()));
    printf("GB/s, medians of %d runs, thread CPU time; encode of the bytes read and of the text "
           "written, decode of the text read and of the bytes written\n",
           2 * runs + 1);
}

/* Encode and decode nb bytes reps times a run with every kernel this CPU
 * has, then through base64_encode/decode (the server's path); the kernels
 * alternate within a run, so all see the same load. Each kernel's text and
 * bytes are checked against the scalar kernel's and the input. */
static void bench_base64(const char *what, const void *bytes, size_t nb, int reps) {
    static int header;
    if (!header++) b64_header();
    enum { NK = BASE64_KERNEL_COUNT + 1 }; /* the kernels, then the chosen path */
    int nr = 2 * runs + 1;
    size_t m = base64_encoded_len(nb);
    char *ref = malloc(m), *txt = malloc(m);
    unsigned char *back = malloc(base64_decoded_max(m));
    double te[NK][64], td[NK][64];
    base64_encode_kernel(BASE64_SCALAR, ref, bytes, nb);
    for (int r = 0; r < nr; r++) {
        for (int k = 0; k < NK; k++) {
            if (k < BASE64_KERNEL_COUNT && !base64_kernel_supported((base64_kernel)k)) continue;
            size_t mk = 0, nk = 0, bad = 0;
            double t0 = now();
            for (int i = 0; i < reps; i++)
                mk = k < BASE64_KERNEL_COUNT
                         ? base64_encode_kernel((base64_kernel)k, txt, bytes, nb)
                         : base64_encode(txt, bytes, nb);
            te[k][r] = now() - t0;
            t0 = now();
            for (int i = 0; i < reps; i++)
                nk = k < BASE64_KERNEL_COUNT
                         ? base64_decode_kernel((base64_kernel)k, back, txt, mk, &bad)
                         : base64_decode(back, txt, mk, &bad);
            td[k][r] = now() - t0;
            if (mk != m || memcmp(txt, ref, m) != 0 || nk != nb || memcmp(back, bytes, nb) != 0) {
                fprintf(stderr, "base64 kernel %d: round trip mismatch\n", k);
                exit(1);
            }
        }
    }
    printf("base64 %s: %.2f MB of bytes, %.2f MB of text\n", what, nb / 1e6, m / 1e6);
    printf("  %-22s %12s %12s %14s %12s\n", "kernel", "enc bytes/s", "enc text/s", "dec text/s",
           "dec bytes/s");
    for (int k = 0; k < NK; k++) {
        if (k < BASE64_KERNEL_COUNT && !base64_kernel_supported((base64_kernel)k)) continue;
        char name[64];
        if (k < BASE64_KERNEL_COUNT)
            snprintf(name, sizeof name, "%s", base64_kernel_name((base64_kernel)k));
        else
            snprintf(name, sizeof name, "server (%s)", base64_kernel_name(base64_kernel_chosen()));
        double e = bench_median(te[k], nr) / reps, d = bench_median(td[k], nr) / reps;
        printf("  %-22s %12.2f %12.2f %14.2f %12.2f\n", name, nb / e / 1e9, m / e / 1e9,
               m / d / 1e9, nb / d / 1e9);
    }
    fflush(stdout);
    free(ref);
    free(txt);
    free(back);
}

int main(void) {
    const char *rs = getenv("BENCH_RUNS");
    if (rs) runs = atoi(rs);
    if (runs < 1) runs = 1;
    if (runs > 31) runs = 31;
    printf("codec benchmark: medians of %d runs (jansson: %d), thread CPU time\n", runs,
           runs < 3 ? runs : 3);
    printf("%-44s %12s %14s %12s %14s   %s\n", "", "ours", "", "jansson", "", "speed-up");

    /* decode: [512,768] embeddings */
    size_t emb_shape[2] = {512, 768}, ne = 512 * 768;
    float *emb = malloc(ne * sizeof *emb);
    for (size_t i = 0; i < ne; i++) emb[i] = gauss();
    char *body = malloc(ne * 26 + 256);
    fmt_fn fmts[2] = {fmt_f32_shortest, fmt_17};
    const char *names[2] = {"decode [512,768] embeddings, shortest text",
                            "decode [512,768] embeddings, 17-digit text"};
    for (int k = 0; k < 2; k++) {
        char *o = body + sprintf(body, "{\"model\": \"demo\", \"embeddings\": ");
        o = write_tensor(o, emb, emb_shape, 2, fmts[k]);
        o += sprintf(o, "}");
        bench_decode(names[k], body, (size_t)(o - body), emb, ne);
    }
    free(body);

    /* encode: output [512,768] and attention weights [12,512,512] */
    bench_encode("encode [512,768] output", emb, emb_shape, 2);
    size_t w_shape[3] = {12, 512, 512}, nw = 12 * 512 * 512;
    float *w = malloc(nw * sizeof *w);
    for (size_t r = 0; r < 12 * 512; r++) { /* softmax of N(0,1) scores */
        float *wr = w + r * 512;
        double sum = 0;
        for (int j = 0; j < 512; j++) sum += wr[j] = expf(gauss());
        for (int j = 0; j < 512; j++) wr[j] = (float)(wr[j] / sum);
    }
    bench_encode("encode [12,512,512] attention weights", w, w_shape, 3);

    /* base64 (no jansson counterpart): the same weights as bytes */
    bench_base64("[12,512,512] float32", w, nw * sizeof *w, 2);
    bench_base64("64 KB (in L2), x256 a run", w, 1 << 16, 256);
    free(w);
    free(emb);
    return 0;
}
