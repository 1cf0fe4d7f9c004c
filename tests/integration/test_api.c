/* test_api.c - the contract of API.md over real HTTP.
 *
 * Part 1: every PyTorch golden case (the .safetensors files in tests/golden) sent to a
 * daemon that loads all their layers, in float JSON and base64, with
 * weights per head, averaged and not requested; answers compared with
 * PyTorch's numbers within 1e-4 x max(1, max|torch|). Then the long-context
 * forms: weights_topk (the true top-k of PyTorch's dense weights up to
 * ties, values within 1e-6) and weights_rows (PyTorch's rows within 1e-6),
 * each per head or averaged, in both encodings by turns.
 * Part 2: every endpoint, every reachable row of the error table, the API
 * key, gzip both ways, precision, request ids, Server-Timing, promtool. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <zlib.h>

#include "buf.h"
#include "check.h"
#include "harness.h"
#include "rawsock.h"
#include "topk_check.h"
#include "numfmt.h"
#include "safetensors.h"

/* ------------------------------------------------------------ helpers */

static const char *meta(const st_file *f, const char *k, const char *dflt) {
    const char *v = st_metadata(f, k);
    return v ? v : dflt;
}

/* Append a tensor to b as nested JSON arrays (JSON numbers printed with %.9g,
 * which reads back to the same float32) or as a base64 object. */
static void put_tensor(buf *b, const st_tensor *t, bool b64) {
    size_t n = t->numel;
    bool is_bool = t->dtype == ST_BOOL;
    float *f = NULL;
    if (!is_bool) {
        f = malloc(n * sizeof *f);
        memcpy(f, t->data, n * sizeof *f); /* F32 in the golden files */
    }
    if (b64) {
        buf_printf(b, "{\"dtype\":\"%s\",\"shape\":[", is_bool ? "bool" : "float32");
        for (int i = 0; i < t->ndim; i++) buf_printf(b, i ? ",%zu" : "%zu", t->shape[i]);
        buf_puts(b, "],\"base64\":\"");
        size_t bytes = is_bool ? n : n * 4;
        char *p = buf_reserve(b, base64_encoded_len(bytes));
        buf_commit(b, base64_encode(p, is_bool ? (const void *)t->data : (const void *)f, bytes));
        buf_puts(b, "\"}");
    } else {
        size_t inner = t->shape[t->ndim - 1];
        for (size_t i = 0; i < n; i++) {
            if (i % inner == 0) {
                size_t k = i;
                for (int d = t->ndim - 1; d >= 0 && k % t->shape[d] == 0; d--) {
                    buf_putc(b, '[');
                    k /= t->shape[d];
                    if (i > 0 && d == t->ndim - 1) { /* only the opening for this row */ }
                }
            }
            if (is_bool) buf_puts(b, t->data[i] ? "true" : "false");
            else buf_printf(b, "%.9g", (double)f[i]);
            size_t k = i + 1;
            int closes = 0;
            for (int d = t->ndim - 1; d >= 0 && k % t->shape[d] == 0; d--, closes++) k /= t->shape[d];
            for (int c = 0; c < closes; c++) buf_putc(b, ']');
            if (i + 1 < n) buf_putc(b, ',');
        }
    }
    free(f);
}

/* Flatten a response tensor (nested arrays or a base64 object, whose
 * dtype must be float32, or int32 when ints) into out: 4-byte floats, or
 * int32 when ints. Returns the count. */
static size_t get_numbers(json_t *v, void *out, size_t cap, bool ints) {
    if (json_is_object(v)) {
        const char *s = json_string_value(json_object_get(v, "base64"));
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        if (!s || !dt || strcmp(dt, ints ? "int32" : "float32")) return 0;
        size_t len = strlen(s), bad;
        unsigned char *tmp = malloc(base64_decoded_max(len) + 4);
        size_t n = base64_decode(tmp, s, len, &bad);
        if (n == (size_t)-1 || n / 4 > cap) {
            free(tmp);
            return 0;
        }
        memcpy(out, tmp, n);
        free(tmp);
        return n / 4;
    }
    if (json_is_number(v)) {
        if (cap < 1) return 0;
        if (ints)
            ((int32_t *)out)[0] = (int32_t)json_integer_value(v);
        else
            ((float *)out)[0] = (float)json_number_value(v);
        return 1;
    }
    size_t k = 0, i;
    json_t *e;
    json_array_foreach(v, i, e) k += get_numbers(e, (char *)out + 4 * k, cap - k, ints);
    return k;
}

static size_t get_floats(json_t *v, float *out, size_t cap) {
    return get_numbers(v, out, cap, false);
}

static size_t get_ints(json_t *v, int32_t *out, size_t cap) {
    return get_numbers(v, out, cap, true);
}

/* The rank and dims of a response tensor (nested arrays or a base64
 * object). */
static int shape_of(json_t *v, size_t *dim) {
    int rk = 0;
    if (json_is_object(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(v, "shape"), i, e) dim[rk++] = (size_t)json_integer_value(e);
        return rk;
    }
    for (; json_is_array(v) && rk < 4; v = json_array_get(v, 0)) dim[rk++] = json_array_size(v);
    return rk;
}

static double max_rel_diff(const float *got, const st_tensor *want, size_t n, double *maxabs) {
    const float *w = (const float *)want->data;
    double md = 0, mv = 1;
    for (size_t i = 0; i < n; i++) {
        float wi;
        memcpy(&wi, w + i, 4);
        md = fmax(md, fabs((double)got[i] - wi));
        mv = fmax(mv, fabs((double)wi));
    }
    *maxabs = md;
    return md / mv;
}

/* --------------------------------------------------------- part 1 */

/* The opening of a golden case's /attend body: model and inputs, no
 * closing brace. */
static void golden_body(buf *b, const char *name, bool self, const st_tensor *q,
                        const st_tensor *k, const st_tensor *v, const st_tensor *kpm,
                        const st_tensor *mask, bool b64) {
    buf_init(b, 1u << 30);
    buf_printf(b, "{\"model\":\"%s\",", name);
    if (self || !k) {
        buf_puts(b, "\"embeddings\":");
        put_tensor(b, q, b64);
    } else {
        buf_puts(b, "\"query\":");
        put_tensor(b, q, b64);
        buf_puts(b, ",\"key\":");
        put_tensor(b, k, b64);
        buf_puts(b, ",\"value\":");
        put_tensor(b, v, b64);
    }
    /* float masks may hold -inf, which JSON cannot: send those as base64 */
    if (kpm) {
        buf_puts(b, ",\"key_padding_mask\":");
        put_tensor(b, kpm, b64 || kpm->dtype != ST_BOOL);
    }
    if (mask) {
        buf_puts(b, ",\"attn_mask\":");
        put_tensor(b, mask, b64 || mask->dtype != ST_BOOL);
    }
}

/* weights_topk (k of min(4, M)) or weights_rows (the last and first query
 * rows) for golden case `name`, per head or averaged, against PyTorch's
 * dense weights `want` ([B,H,n,M] or [B,n,M]); true when it matches. */
static bool golden_form(const daemon_proc *d, const char *name, bool self, bool causal,
                        const st_tensor *q, const st_tensor *k, const st_tensor *v,
                        const st_tensor *kpm, const st_tensor *mask, const st_tensor *want,
                        bool topk, bool avg, bool b64, double *worst) {
    const size_t M = want->shape[want->ndim - 1], n = q->shape[1], planes = want->numel / (n * M);
    const int kk = M < 4 ? (int)M : 4;
    const int rows[2] = {(int)n - 1, 0}, nr = n > 1 ? 2 : 1;
    buf b;
    golden_body(&b, name, self, q, k, v, kpm, mask, b64);
    if (topk)
        buf_printf(&b, ",\"weights_topk\":%d", kk);
    else if (nr == 2)
        buf_printf(&b, ",\"weights_rows\":[%d,%d]", rows[0], rows[1]);
    else
        buf_printf(&b, ",\"weights_rows\":[%d]", rows[0]);
    buf_printf(&b, ",\"causal\":%s,\"average_heads\":%s,\"encoding_format\":\"%s\"}",
               causal ? "true" : "false", avg ? "true" : "false", b64 ? "base64" : "float");
    http_resp r;
    http_post_json(d, "/attend", b.data, &r);
    buf_free(&b);
    char what[200];
    snprintf(what, sizeof what, "%.120s %s %s %s", name, topk ? "weights_topk" : "weights_rows",
             avg ? "averaged" : "per head", b64 ? "base64" : "float");
    CHECK_MSG(r.status == 200, "%s: status %ld: %.300s", what, r.status, r.body);
    json_t *root = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    http_resp_free(&r);
    if (!root) return false;
    float *dense = malloc(want->numel * sizeof *dense); /* F32 in the golden files */
    memcpy(dense, want->data, want->numel * sizeof *dense);
    size_t cnt = planes * n * (size_t)kk + planes * (size_t)nr * M, dim[4];
    float *val = malloc((cnt + 1) * sizeof *val);
    int32_t *idx = malloc((cnt + 1) * sizeof *idx);
    bool ok = false;
    json_t *tk = json_object_get(root, "attention_topk");
    json_t *aw = json_object_get(root, "attention_weights");
    if (topk) {
        size_t want_n = planes * n * (size_t)kk;
        size_t nv = get_floats(json_object_get(tk, "values"), val, cnt);
        size_t ni = get_ints(json_object_get(tk, "indices"), idx, cnt);
        int rk = shape_of(json_object_get(tk, "indices"), dim);
        bool shaped = aw == NULL && nv == want_n && ni == want_n && rk == (avg ? 3 : 4) &&
                      dim[rk - 1] == (size_t)kk && dim[rk - 2] == n;
        CHECK_MSG(shaped, "%s: %zu values, %zu indices of rank %d (want %zu of rank %d), weights %s",
                  what, nv, ni, rk, want_n, avg ? 3 : 4, aw ? "present" : "absent");
        if (shaped) {
            double dd = check_topk(what, dense, val, idx, planes * n, (int)M, kk, 1e-6, true);
            ok = isfinite(dd); /* check_topk's own rule: 1e-6 + 4e-6 of the weight */
            if (ok && dd > *worst) *worst = dd;
        }
    } else {
        size_t want_n = planes * (size_t)nr * M;
        size_t nv = get_floats(aw, val, cnt);
        int rk = shape_of(aw, dim);
        bool shaped = tk == NULL && nv == want_n && rk == (avg ? 3 : 4) && dim[rk - 2] == (size_t)nr;
        CHECK_MSG(shaped, "%s: %zu numbers of rank %d, want %zu of rank %d", what, nv, rk, want_n,
                  avg ? 3 : 4);
        double dd = shaped ? 0.0 : INFINITY;
        for (size_t p = 0; p < planes && shaped; p++)
            for (int s = 0; s < nr; s++)
                for (size_t j = 0; j < M; j++)
                    dd = fmax(dd, fabs((double)val[(p * (size_t)nr + (size_t)s) * M + j] -
                                       dense[(p * n + (size_t)rows[s]) * M + j]));
        CHECK_MSG(dd <= 1e-6, "%s: rows differ from PyTorch's by %.3g", what, dd);
        ok = dd <= 1e-6;
        if (ok && dd > *worst) *worst = dd;
    }
    free(dense);
    free(val);
    free(idx);
    json_decref(root);
    return ok;
}


static int golden_names(char names[][128], int max) {
    DIR *d = opendir("tests/golden");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < max) {
        size_t l = strlen(e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) {
            snprintf(names[n], 128, "%.*s", (int)(l - 12), e->d_name);
            n++;
        }
    }
    if (d) closedir(d);
    return n;
}

static void golden_over_http(void) {
    static char names[128][128];
    int nc = golden_names(names, 128);
    CHECK_MSG(nc >= 10, "found %d golden cases in tests/golden", nc);
    /* one config file loading every case's layer with its loader options */
    char cfgpath[] = "/tmp/attn-golden-cfg-XXXXXX";
    int fd = mkstemp(cfgpath);
    FILE *cf = fdopen(fd, "w");
    char cwd[1000];
    if (!getcwd(cwd, sizeof cwd)) return;
    fprintf(cf, "{\"models\":[");
    for (int i = 0; i < nc; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%.1000s/tests/golden/%.127s.safetensors", cwd, names[i]);
        st_file *f;
        char err[512];
        if (st_open(path, &f, err, sizeof err)) continue;
        fprintf(cf, "%s{\"name\":\"%s\",\"path\":\"%s\"", i ? "," : "", names[i], path);
        int h = atoi(meta(f, "case.num_heads", "0"));
        if (h > 0) fprintf(cf, ",\"num_heads\":%d", h);
        if (st_metadata(f, "case.prefix")) fprintf(cf, ",\"prefix\":\"%s\"", st_metadata(f, "case.prefix"));
        if (st_metadata(f, "case.add_zero_attn"))
            fprintf(cf, ",\"add_zero_attn\":%s", atoi(st_metadata(f, "case.add_zero_attn")) ? "true" : "false");
        fprintf(cf, "}");
        st_close(f);
    }
    fprintf(cf, "]}\n");
    fclose(cf);
    const char *args[] = {"--config", cfgpath, "--threads", "2", NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon with the golden layers did not start");
        unlink(cfgpath);
        return;
    }
    int cases_ok = 0;
    double worst = 0, worst_forms = 0;
    for (int i = 0; i < nc; i++) {
        char path[1400], err[512];
        snprintf(path, sizeof path, "tests/golden/%.127s.safetensors", names[i]);
        st_file *f;
        if (st_open(path, &f, err, sizeof err)) {
            CHECK_MSG(0, "%s: %s", names[i], err);
            continue;
        }
        bool self = !strcmp(meta(f, "case.self_attention", "false"), "true");
        bool causal = !strcmp(meta(f, "case.causal", "false"), "true");
        const st_tensor *q = st_find(f, "case.query"), *k = st_find(f, "case.key"),
                        *v = st_find(f, "case.value"), *kpm = st_find(f, "case.key_padding_mask"),
                        *mask = st_find(f, "case.attn_mask"), *eo = st_find(f, "expect.output"),
                        *ew = st_find(f, "expect.weights"), *ea = st_find(f, "expect.weights_avg");
        bool case_ok = q && eo;
        for (int mode = 0; mode < 3 && case_ok; mode++) { /* per head, averaged, no weights */
            bool b64 = (i + mode) % 2 == 1;
            buf b;
            golden_body(&b, names[i], self, q, k, v, kpm, mask, b64);
            buf_printf(&b, ",\"causal\":%s,\"need_weights\":%s,\"average_heads\":%s,\"encoding_format\":\"%s\"}",
                       causal ? "true" : "false", mode == 2 ? "false" : "true", mode == 1 ? "true" : "false",
                       b64 ? "base64" : "float");
            http_resp r;
            http_post_json(&d, "/attend", b.data, &r);
            buf_free(&b);
            CHECK_MSG(r.status == 200, "%s mode %d: status %ld: %.300s", names[i], mode, r.status, r.body);
            json_error_t je;
            json_t *root = r.status == 200 ? json_loads(r.body, 0, &je) : NULL;
            if (!root) {
                case_ok = false;
                http_resp_free(&r);
                break;
            }
            size_t cap = eo->numel + (ew ? ew->numel : 0) + 16;
            float *got = malloc(cap * sizeof *got);
            size_t n = get_floats(json_object_get(root, "output"), got, cap);
            double ad, rd = max_rel_diff(got, eo, eo->numel, &ad);
            CHECK_MSG(n == eo->numel && rd <= 1e-4, "%s mode %d: output %zu numbers (want %zu), max diff %g",
                      names[i], mode, n, eo->numel, ad);
            if (n != eo->numel || rd > 1e-4) case_ok = false;
            worst = fmax(worst, rd);
            const st_tensor *want = mode == 0 ? ew : mode == 1 ? ea : NULL;
            json_t *wj = json_object_get(root, "attention_weights");
            if (mode == 2) CHECK_MSG(wj == NULL, "%s: weights returned with need_weights false", names[i]);
            if (want) {
                n = wj ? get_floats(wj, got, cap) : 0;
                rd = max_rel_diff(got, want, want->numel, &ad);
                CHECK_MSG(n == want->numel && rd <= 1e-4, "%s mode %d: weights %zu numbers (want %zu), max diff %g",
                          names[i], mode, n, want->numel, ad);
                if (n != want->numel || rd > 1e-4) case_ok = false;
                worst = fmax(worst, rd);
            }
            free(got);
            json_decref(root);
            http_resp_free(&r);
        }
        /* the long-context forms, per head or averaged, float or base64 by turns */
        for (int mode = 0; mode < 4 && case_ok && ew && ea; mode++) {
            bool avg = mode % 2 == 1, b64 = (i + mode / 2) % 2 == 1;
            case_ok = golden_form(&d, names[i], self, causal, q, k, v, kpm, mask, avg ? ea : ew,
                                  mode < 2, avg, b64, &worst_forms);
        }
        cases_ok += case_ok;
        st_close(f);
    }
    printf("golden over HTTP: %d of %d cases match PyTorch in both encodings and all weight modes; "
           "largest relative difference %.3g; top-k and weight rows: largest difference %.3g\n",
           cases_ok, nc, worst, worst_forms);
    CHECK_INT_EQ(cases_ok, nc);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    unlink(cfgpath);
}

/* --------------------------------------------------------- part 2 */

static const char *DEMO[] = {"--model", "demo=config/weights/demo.safetensors", NULL};

static char *demo_body(int n, const char *extra) {
    buf b;
    buf_init(&b, 1u << 26);
    buf_puts(&b, "{\"embeddings\":[");
    unsigned s = 7;
    for (int i = 0; i < n; i++) {
        buf_puts(&b, i ? ",[" : "[");
        for (int j = 0; j < 64; j++) {
            s = s * 1664525u + 1013904223u;
            buf_printf(&b, j ? ",%.4f" : "%.4f", (double)(s >> 8) / (1u << 24) - 0.5);
        }
        buf_putc(&b, ']');
    }
    buf_printf(&b, "]%s}", extra ? extra : "");
    return buf_take(&b, NULL);
}

/* The milliseconds after `key` (as "receive=12.3ms" or "receive;dur=12.3")
 * in s, or -1. */
static double ms_after(const char *s, const char *key) {
    const char *p = s ? strstr(s, key) : NULL;
    return p ? atof(p + strlen(key)) : -1.0;
}

/* A body that arrives in two parts 300 ms apart: the time it took to
 * arrive is the request's receive time, in Server-Timing and in the access
 * line, beside the time its answer took to send. */
static void slow_upload_timed(const daemon_proc *d) {
    char *body = demo_body(5, NULL);
    size_t n = strlen(body), half = n / 2;
    char head[256];
    snprintf(head, sizeof head,
             "POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "X-Request-Id: slow-upload\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
             n);
    int fd = raw_connect(d->port);
    CHECK(fd >= 0);
    if (fd < 0) {
        free(body);
        return;
    }
    CHECK_INT_EQ(raw_send_str(fd, head), 0);
    CHECK_INT_EQ(raw_send(fd, body, half), 0);
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK_INT_EQ(raw_send(fd, body + half, n - half), 0);
    raw_reply rr;
    raw_read(fd, 10.0, 1, &rr);
    close(fd);
    char st[256];
    CHECK_INT_EQ(raw_status(&rr, 0), 200);
    double got = raw_header(&rr, 0, "Server-Timing", st, sizeof st) ? ms_after(st, "receive;dur=") : -1;
    CHECK_MSG(got >= 290 && got < 5000, "Server-Timing receive %.3f ms for a 300 ms pause", got);
    raw_reply_free(&rr);
    free(body);
    /* the access line (written within 200 ms of the answer) */
    char *line = NULL;
    for (int i = 0; i < 50 && !line; i++) {
        char *log = daemon_log(d);
        char *at = log ? strstr(log, " access slow-upload ") : NULL;
        if (at) line = strndup(at, strcspn(at, "\n"));
        free(log);
        if (!line) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    CHECK_MSG(line, "no access line for the slow upload");
    double rec = ms_after(line, " receive="), snd = ms_after(line, " send="),
           total = ms_after(line, " total=");
    CHECK_MSG(rec >= 290 && rec <= total, "access line receive %.3f ms (total %.3f)", rec, total);
    CHECK_MSG(snd >= 0 && snd < rec, "access line send %.3f ms", snd);
    free(line);
}

static void endpoints_and_errors(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    http_resp r;
    char hv[512];
    /* health, readiness, models, metrics, openapi, page */
    CHECK_INT_EQ(http_do(&d, "GET", "/healthz", NULL, NULL, 0, &r), 200);
    CHECK_STR_EQ(r.body, "{\"status\":\"ok\"}");
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "HEAD", "/healthz", NULL, NULL, 0, &r), 200);
    CHECK_INT_EQ(r.len, 0);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/readyz", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v1/models", NULL, NULL, 0, &r), 200);
    CHECK_STR_CONTAINS(r.body, "\"name\":\"demo\",\"embed_dim\":64,\"num_heads\":4,\"head_dim\":16");
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v1/models/demo", NULL, NULL, 0, &r), 200);
    CHECK_STR_CONTAINS(r.body, "\"parameters\":16640");
    http_resp_free(&r);
    http_do(&d, "GET", "/v1/models/nope", NULL, NULL, 0, &r);
    check_error(&r, 404, "model_not_found", "'demo'");
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/openapi.yaml", NULL, NULL, 0, &r), 200);
    CHECK(!strncmp(r.body, "openapi: 3", 10));
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/", NULL, NULL, 0, &r), 200);
    CHECK(resp_header(&r, "Content-Security-Policy", hv, sizeof hv) && strstr(hv, "default-src 'none'"));
    CHECK(resp_header(&r, "Content-Type", hv, sizeof hv) && strstr(hv, "text/html"));
    http_resp_free(&r);

    /* a good request: shape, usage, Server-Timing, request id */
    char *body = demo_body(5, NULL);
    const char *hdr_id[] = {"Content-Type: application/json", "X-Request-Id: test-123", NULL};
    CHECK_INT_EQ(http_do(&d, "POST", "/attend", hdr_id, body, strlen(body), &r), 200);
    CHECK(resp_header(&r, "X-Request-Id", hv, sizeof hv) && !strcmp(hv, "test-123"));
    CHECK(resp_header(&r, "Server-Timing", hv, sizeof hv) && strstr(hv, "queue;dur=") &&
          strstr(hv, "compute;dur=") && strstr(hv, "encode;dur=") && strstr(hv, "receive;dur="));
    CHECK_STR_CONTAINS(r.body, "\"usage\":{\"batch\":1,\"query_tokens\":5,\"key_tokens\":5");
    json_error_t je;
    json_t *root = json_loads(r.body, 0, &je);
    CHECK_INT_EQ(json_array_size(json_object_get(root, "output")), 5);
    CHECK_INT_EQ(json_array_size(json_object_get(root, "attention_weights")), 4);
    /* each weight row sums to 1 */
    json_t *w00 = json_array_get(json_array_get(json_object_get(root, "attention_weights"), 0), 0);
    double sum = 0;
    for (size_t j = 0; j < json_array_size(w00); j++) sum += json_number_value(json_array_get(w00, j));
    CHECK_NEAR(sum, 1.0, 1e-5);
    char *plain = strdup(r.body);
    json_decref(root);
    http_resp_free(&r);
    const char *hdr_gen[] = {"Content-Type: application/json", NULL};
    http_do(&d, "POST", "/attend", hdr_gen, body, strlen(body), &r);
    CHECK(resp_header(&r, "X-Request-Id", hv, sizeof hv) && strlen(hv) == 16);
    CHECK_STR_EQ(r.body, plain); /* deterministic */
    http_resp_free(&r);

    /* gzip out: the same bytes once inflated; gzip in: the same answer */
    const char *hdr_gz[] = {"Content-Type: application/json", "Accept-Encoding: gzip", NULL};
    http_do(&d, "POST", "/attend", hdr_gz, body, strlen(body), &r);
    CHECK(resp_header(&r, "Content-Encoding", hv, sizeof hv) && !strcmp(hv, "gzip"));
    {
        char *out = malloc(strlen(plain) + 64);
        z_stream z = {0};
        inflateInit2(&z, 16 + MAX_WBITS);
        z.next_in = (Bytef *)r.body;
        z.avail_in = (uInt)r.len;
        z.next_out = (Bytef *)out;
        z.avail_out = (uInt)strlen(plain) + 63;
        CHECK_INT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
        out[z.total_out] = '\0';
        inflateEnd(&z);
        CHECK_STR_EQ(out, plain);
        free(out);
    }
    http_resp_free(&r);
    {
        uLong bound = compressBound(strlen(body)) + 64;
        unsigned char *gz = malloc(bound);
        z_stream z = {0};
        deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        z.next_in = (Bytef *)body;
        z.avail_in = (uInt)strlen(body);
        z.next_out = gz;
        z.avail_out = (uInt)bound;
        deflate(&z, Z_FINISH);
        size_t gzlen = z.total_out;
        deflateEnd(&z);
        const char *hdr_ce[] = {"Content-Type: application/json", "Content-Encoding: gzip", NULL};
        CHECK_INT_EQ(http_do(&d, "POST", "/attend", hdr_ce, gz, gzlen, &r), 200);
        CHECK_STR_EQ(r.body, plain);
        http_resp_free(&r);
        /* a gzip bomb: 64 MiB of zeros in a small body, over a small limit below */
        free(gz);
    }
    free(body);

    /* precision: at most 3 significant digits, close to the full answer */
    body = demo_body(3, ",\"precision\":3,\"need_weights\":false");
    CHECK_INT_EQ(http_post_json(&d, "/attend", body, &r), 200);
    CHECK(strstr(r.body, "attention_weights") == NULL);
    {
        root = json_loads(r.body, 0, &je);
        json_t *row = json_array_get(json_object_get(root, "output"), 0);
        int bad = 0;
        for (size_t j = 0; j < json_array_size(row); j++) {
            double x = json_number_value(json_array_get(row, j));
            char t[64];
            snprintf(t, sizeof t, "%.3g", x);
            if (strtod(t, NULL) != x) bad++;
        }
        CHECK_INT_EQ(bad, 0);
        json_decref(root);
    }
    free(body);
    http_resp_free(&r);

    /* the error table */
    http_post_json(&d, "/attend", "{\"embeddings\":[[1,2]", &r);
    check_error(&r, 400, "invalid_json", "byte");
    http_resp_free(&r);
    http_post_json(&d, "/attend", "{\"model\":\"demo\"}", &r);
    check_error(&r, 400, "invalid_request", "embeddings");
    http_resp_free(&r);
    body = demo_body(2, NULL);
    {
        char *last = strrchr(body, ','); /* drop the last number of the last row */
        snprintf(last, 8, "]]}");
    }
    http_post_json(&d, "/attend", body, &r);
    check_error(&r, 400, "invalid_request", "embeddings[1]");
    http_resp_free(&r);
    free(body);
    {
        /* base64 of the right length without '=' padding (decodes 2 bytes
         * long): once a heap overflow, found by fuzzing */
        char b64body[600];
        char zeros[343];
        memset(zeros, 'A', sizeof zeros - 1);
        zeros[342] = '\0';
        snprintf(b64body, sizeof b64body,
                 "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[1,64],\"base64\":\"%sAA\"}}", zeros);
        http_post_json(&d, "/attend", b64body, &r);
        check_error(&r, 400, "invalid_request", "padding");
        http_resp_free(&r);
    }
    http_post_json(&d, "/attend", "{\"embeddings\":[[1,2,3]]}", &r);
    check_error(&r, 400, "invalid_request", "expects 64");
    http_resp_free(&r);
    http_post_json(&d, "/attend", "{\"embeddings\":[[1]],\"need_weight\":true}", &r);
    check_error(&r, 400, "invalid_request", "need_weight");
    http_resp_free(&r);
    body = demo_body(2, ",\"model\":\"nope\"");
    http_post_json(&d, "/attend", body, &r);
    check_error(&r, 404, "model_not_found", "'demo'");
    http_resp_free(&r);
    free(body);
    http_do(&d, "GET", "/attend", NULL, NULL, 0, &r);
    check_error(&r, 405, "method_not_allowed", "POST");
    CHECK(resp_header(&r, "Allow", hv, sizeof hv) && !strcmp(hv, "POST, OPTIONS"));
    http_resp_free(&r);
    http_do(&d, "DELETE", "/healthz", NULL, NULL, 0, &r);
    check_error(&r, 405, "method_not_allowed", NULL);
    http_resp_free(&r);
    http_do(&d, "GET", "/nope", NULL, NULL, 0, &r);
    check_error(&r, 404, "not_found", "/nope");
    http_resp_free(&r);
    const char *hdr_text[] = {"Content-Type: text/plain", NULL};
    http_do(&d, "POST", "/attend", hdr_text, "{}", 2, &r);
    check_error(&r, 415, "unsupported_media_type", "Content-Type");
    http_resp_free(&r);
    const char *hdr_br[] = {"Content-Type: application/json", "Content-Encoding: br", NULL};
    http_do(&d, "POST", "/attend", hdr_br, "{}", 2, &r);
    check_error(&r, 415, "unsupported_media_type", "Content-Encoding");
    http_resp_free(&r);
    body = demo_body(9000, NULL);
    http_post_json(&d, "/attend", body, &r);
    check_error(&r, 413, "payload_too_large", "max_tokens");
    http_resp_free(&r);
    free(body);

    slow_upload_timed(&d);

    /* metrics: counted requests, and promtool accepts the format */
    CHECK_INT_EQ(http_do(&d, "GET", "/metrics", NULL, NULL, 0, &r), 200);
    CHECK_STR_CONTAINS(r.body, "attention_server_requests_total{route=\"/attend\",model=\"demo\",status=\"200\"}");
    CHECK_STR_CONTAINS(r.body, "attention_server_compute_seconds_bucket");
    CHECK_STR_CONTAINS(r.body, "attention_server_receive_seconds_bucket");
    CHECK_STR_CONTAINS(r.body, "attention_server_send_seconds_bucket");
    CHECK_STR_CONTAINS(r.body, "attention_server_build_info{version=");
    /* the daemon's own choice (under valgrind, whose CPU has no AVX-512,
     * it differs from this process's) */
    const char *gk = r.body ? strstr(r.body, "gemm_kernel=\"") : NULL;
    CHECK_MSG(gk && (!strncmp(gk + 13, "avx512\"", 7) || !strncmp(gk + 13, "avx2\"", 5) ||
                     !strncmp(gk + 13, "none\"", 5)),
              "build_info without a known gemm_kernel: %.80s", gk ? gk : "(none)");
    if (access("/usr/bin/promtool", X_OK) == 0) {
        FILE *p = popen("/usr/bin/promtool check metrics >/tmp/attn-promtool.out 2>&1", "w");
        fwrite(r.body, 1, r.len, p);
        int rc = pclose(p);
        CHECK_MSG(rc == 0, "promtool check metrics failed (see /tmp/attn-promtool.out)");
    } else {
        CHECK_MSG(0, "promtool not installed (Debian package prometheus; make test installs it)");
    }
    http_resp_free(&r);
    free(plain);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);

    /* limits and the API key on a second daemon */
    char keyfile[] = "/tmp/attn-key-XXXXXX";
    int kfd = mkstemp(keyfile);
    CHECK(write(kfd, "s3cret-key\n", 11) == 11);
    close(kfd);
    const char *args2[] = {"--model", "demo=config/weights/demo.safetensors", "--api-key-file", keyfile,
                           "--max-body-bytes", "100000", NULL};
    if (daemon_start(&d, args2)) {
        CHECK_MSG(0, "daemon with an API key did not start");
        return;
    }
    body = demo_body(2, NULL);
    http_post_json(&d, "/attend", body, &r);
    check_error(&r, 401, "unauthorized", "Bearer");
    CHECK(resp_header(&r, "WWW-Authenticate", hv, sizeof hv) && !strncmp(hv, "Bearer", 6));
    http_resp_free(&r);
    const char *hdr_bad[] = {"Content-Type: application/json", "Authorization: Bearer s3cret-kez", NULL};
    http_do(&d, "POST", "/attend", hdr_bad, body, strlen(body), &r);
    check_error(&r, 401, "unauthorized", NULL);
    http_resp_free(&r);
    const char *hdr_ok[] = {"Content-Type: application/json", "Authorization: Bearer s3cret-key", NULL};
    CHECK_INT_EQ(http_do(&d, "POST", "/attend", hdr_ok, body, strlen(body), &r), 200);
    http_resp_free(&r);
    http_do(&d, "GET", "/v1/models", NULL, NULL, 0, &r);
    check_error(&r, 401, "unauthorized", NULL);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/healthz", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/metrics", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    free(body);
    body = demo_body(400, NULL); /* ~ 190 kB, over the 100 kB cap */
    http_do(&d, "POST", "/attend", hdr_ok, body, strlen(body), &r);
    check_error(&r, 413, "payload_too_large", "max_body_bytes");
    http_resp_free(&r);
    {
        /* a gzip bomb: 8 MiB of spaces compress to a few kB, and inflate past the cap */
        size_t big = 8u << 20;
        char *zeros = malloc(big);
        memset(zeros, ' ', big);
        zeros[0] = '{';
        uLong bound = compressBound(big);
        unsigned char *gz = malloc(bound);
        z_stream z = {0};
        deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        z.next_in = (Bytef *)zeros;
        z.avail_in = (uInt)big;
        z.next_out = gz;
        z.avail_out = (uInt)bound;
        deflate(&z, Z_FINISH);
        size_t gzlen = z.total_out;
        deflateEnd(&z);
        const char *hdr_bomb[] = {"Content-Type: application/json", "Content-Encoding: gzip",
                                  "Authorization: Bearer s3cret-key", NULL};
        http_do(&d, "POST", "/attend", hdr_bomb, gz, gzlen, &r);
        check_error(&r, 413, "payload_too_large", "gzip");
        http_resp_free(&r);
        free(gz);
        free(zeros);
    }
    free(body);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
    unlink(keyfile);
}

/* weights_topk and weights_rows on the demo model: shapes, the combination
 * rules with need_weights, every 400 naming its field, fully masked rows
 * (k zeros at keys 0..k-1, never NaN), and the response limit judged before
 * computing (413). */
/* POST /attend with demo_body(n, extra); returns the status. */
static long post_demo(const daemon_proc *d, int n, const char *extra, http_resp *r) {
    char *body = demo_body(n, extra);
    long st = http_post_json(d, "/attend", body, r);
    free(body);
    return st;
}

static void long_context_forms(void) {
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--max-response-bytes",
                          "200000", NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    http_resp r;
    /* shapes: [H,n,k] per head, [n,k] averaged; rows [H,r,M]; need_weights true is fine */
    CHECK_INT_EQ(post_demo(&d, 5, ",\"weights_topk\":3,\"need_weights\":true", &r), 200);
    json_t *root = json_loads(r.body, 0, NULL);
    json_t *tk = json_object_get(root, "attention_topk");
    size_t dim[4];
    CHECK(json_object_get(root, "attention_weights") == NULL);
    CHECK_INT_EQ(shape_of(json_object_get(tk, "indices"), dim), 3);
    CHECK(dim[0] == 4 && dim[1] == 5 && dim[2] == 3);
    CHECK_INT_EQ(shape_of(json_object_get(tk, "values"), dim), 3);
    json_decref(root);
    http_resp_free(&r);
    CHECK_INT_EQ(post_demo(&d, 5, ",\"weights_topk\":2,\"average_heads\":true,\"encoding_format\":\"base64\"", &r), 200);
    CHECK_STR_CONTAINS(r.body, "\"attention_topk\":{\"indices\":{\"dtype\":\"int32\",\"shape\":[5,2],");
    CHECK_STR_CONTAINS(r.body, ",\"values\":{\"dtype\":\"float32\",\"shape\":[5,2],");
    http_resp_free(&r);
    CHECK_INT_EQ(post_demo(&d, 5, ",\"weights_rows\":[4,1]", &r), 200);
    root = json_loads(r.body, 0, NULL);
    CHECK_INT_EQ(shape_of(json_object_get(root, "attention_weights"), dim), 3);
    CHECK(dim[0] == 4 && dim[1] == 2 && dim[2] == 5);
    json_decref(root);
    http_resp_free(&r);

    /* every key padded: k zero weights at keys 0..k-1 */
    CHECK_INT_EQ(post_demo(&d, 3, ",\"key_padding_mask\":[true,true,true],\"weights_topk\":2", &r), 200);
    CHECK_STR_CONTAINS(r.body, "\"attention_topk\":{\"indices\":[[[0,1],[0,1],[0,1]],[[0,1],");
    CHECK_STR_CONTAINS(r.body, "\"values\":[[[0,0],[0,0],[0,0]],[[0,0],");
    CHECK(strstr(r.body, "NaN") == NULL && strstr(r.body, "nan") == NULL);
    http_resp_free(&r);

    /* each mistake a 400 naming its field */
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {",\"weights_topk\":0", "weights_topk: expected a whole number"},
        {",\"weights_topk\":2.5", "weights_topk: expected a whole number"},
        {",\"weights_topk\":\"3\"", "weights_topk: expected a whole number"},
        {",\"weights_topk\":6", "weights_topk: 6 is more than the 5 keys"},
        {",\"weights_rows\":[]", "weights_rows: empty"},
        {",\"weights_rows\":3", "weights_rows: expected an array"},
        {",\"weights_rows\":[0,\"1\"]", "weights_rows[1]: expected a query row index, got string"},
        {",\"weights_rows\":[0,-1]", "weights_rows[1]: -1 is not a query row index"},
        {",\"weights_rows\":[1.5]", "weights_rows[0]: 1.5 is not a query row index"},
        {",\"weights_rows\":[0,5]", "weights_rows[1]: 5 is not a query row (the query has 5 tokens"},
        {",\"weights_rows\":[2,0,2]", "weights_rows[2]: row 2 is listed twice"},
        {",\"weights_topk\":2,\"weights_rows\":[0]", "weights_topk and weights_rows"},
        {",\"weights_topk\":2,\"need_weights\":false", "need_weights: false"},
        {",\"weights_rows\":[0],\"need_weights\":false", "weights_rows asks for some"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        post_demo(&d, 5, bad[i].extra, &r);
        check_error(&r, 400, "invalid_request", bad[i].needle);
        http_resp_free(&r);
        }

    /* the response limit (200 kB here), judged before computing */
    post_demo(&d, 60, ",\"weights_topk\":60", &r);
    check_error(&r, 413, "payload_too_large", "top-k weights with as many indices");
    http_resp_free(&r);
    post_demo(&d, 60, NULL, &r);
    check_error(&r, 413, "payload_too_large", "(weights_topk, weights_rows)");
    http_resp_free(&r);
    CHECK_INT_EQ(post_demo(&d, 60, ",\"weights_topk\":2", &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    golden_over_http();
    endpoints_and_errors();
    long_context_forms();
    curl_global_cleanup();
    return check_exit();
}
