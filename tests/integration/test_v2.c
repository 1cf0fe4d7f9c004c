/* test_v2.c - the Open Inference Protocol routes over real HTTP (libcurl),
 * against the real daemon on the demo weight set (E=64, H=4).
 *
 * What the numbers must be is fixed by /attend on the same daemon (itself
 * checked against PyTorch by test_api and the golden tests; check-v2 runs
 * PyTorch's cases through v2 directly): a v2 answer must hold exactly the
 * float32 values /attend gives for the same input, in JSON and in binary.
 * Then: metadata and health routes, output selection, every refusal of bad
 * binary framing naming what is wrong, gzip and deflate both ways, the
 * compression policy's thresholds, CORS, the API key, metrics by route, and
 * the long-context forms of weights (weights_topk, weights_rows: /attend's
 * numbers, INT32 indices, and every 400).
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <zlib.h>

#include "buf.h"
#include "check.h"
#include "harness.h"
#include "rawsock.h"
#include "numfmt.h"

static const char *DEMO[] = {"--model", "demo=config/weights/demo.safetensors", NULL};
#define E 64

/* ------------------------------------------------------------ helpers */

static void make_input(float *x, int n, unsigned seed) {
    for (int i = 0; i < n * E; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((double)(seed >> 8) / (1u << 24) - 0.5);
    }
}

/* /attend with base64 answers: the reference values. */
static bool attend_ref(const daemon_proc *d, const float *x, int n, const char *extra, float *out,
                       float *weights) {
    buf b;
    buf_init(&b, 1u << 24);
    size_t bytes = (size_t)n * E * 4;
    char *b64 = malloc(base64_encoded_len(bytes) + 1);
    b64[base64_encode(b64, x, bytes)] = '\0';
    buf_printf(&b,
               "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[%d,%d],\"base64\":\"%s\"},"
               "\"encoding_format\":\"base64\"%s}",
               n, E, b64, extra ? extra : "");
    free(b64);
    http_resp r;
    http_post_json(d, "/attend", b.data, &r);
    buf_free(&b);
    bool ok = r.status == 200;
    json_t *root = ok ? json_loads(r.body, 0, NULL) : NULL;
    const char *names[2] = {"output", "attention_weights"};
    float *dst[2] = {out, weights};
    for (int i = 0; ok && i < 2 && dst[i]; i++) {
        const char *s = json_string_value(json_object_get(json_object_get(root, names[i]), "base64"));
        size_t bad;
        ok = s && base64_decode(dst[i], s, strlen(s), &bad) != (size_t)-1;
    }
    CHECK_MSG(ok, "/attend reference: %ld %.300s", r.status, r.body);
    json_decref(root);
    http_resp_free(&r);
    return ok;
}

/* A v2 JSON request for n tokens of x, with extra top-level members. */
static char *v2_json(const float *x, int n, const char *extra) {
    buf b;
    buf_init(&b, 1u << 24);
    buf_printf(&b, "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
                   "\"data\":[",
               n, E);
    for (int i = 0; i < n * E; i++) buf_printf(&b, i ? ",%.9g" : "%.9g", (double)x[i]);
    buf_printf(&b, "]}]%s}", extra ? extra : "");
    return buf_take(&b, NULL);
}

/* Header then raw bytes; *len gets the body's length, hlen the header's. */
static char *v2_binary(const char *header, const void *raw, size_t rawlen, size_t *len) {
    size_t hl = strlen(header);
    char *body = malloc(hl + rawlen + 1);
    memcpy(body, header, hl);
    if (rawlen) memcpy(body + hl, raw, rawlen);
    *len = hl + rawlen;
    return body;
}

static long post_v2(const daemon_proc *d, const char *path, const char *body, size_t len,
                    long header_len, const char *extra_header, http_resp *r) {
    char hl[96];
    const char *h[4] = {"Content-Type: application/octet-stream", NULL, NULL, NULL};
    int k = 1;
    if (header_len >= 0) {
        snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %ld", header_len);
        h[k++] = hl;
    }
    if (extra_header) h[k++] = extra_header;
    return http_do(d, "POST", path, h, body, len, r);
}

/* The JSON data array of output `name` in a v2 answer, as floats. */
static size_t json_output(json_t *root, const char *name, float *dst, size_t max) {
    json_t *outs = json_object_get(root, "outputs"), *o;
    size_t i, k = 0;
    json_array_foreach(outs, i, o) {
        if (strcmp(json_string_value(json_object_get(o, "name")), name)) continue;
        json_t *data = json_object_get(o, "data"), *v;
        size_t j;
        json_array_foreach(data, j, v) {
            if (k < max) dst[k] = (float)json_number_value(v);
            k++;
        }
    }
    return k;
}

/* --------------------------------------------------------------- tests */

/* A binary FP32 embeddings tensor of rows x E (x's 2 rows repeated) whose
 * element at is v, not finite: refused with 400 naming the element. */
static void bad_binary_element(const daemon_proc *d, const char *path, const float *x, int rows,
                               int at, float v) {
    float *xs = malloc(sizeof(float) * (size_t)(rows * E));
    for (int i = 0; i < rows * E; i++) xs[i] = x[i % (2 * E)];
    xs[at] = v;
    char head[512], want[32];
    snprintf(head, sizeof head,
             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
             "\"parameters\":{\"binary_data_size\":%zu}}]}",
             rows, E, sizeof(float) * (size_t)(rows * E));
    size_t len;
    char *body = v2_binary(head, xs, sizeof(float) * (size_t)(rows * E), &len);
    http_resp r;
    post_v2(d, path, body, len, (long)strlen(head), NULL, &r);
    snprintf(want, sizeof want, "element %d", at);
    check_error(&r, 400, "invalid_request", want);
    http_resp_free(&r);
    free(body);
    free(xs);
}

static void metadata_and_health(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    http_resp r;
    char hv[256];
    CHECK_INT_EQ(http_do(&d, "GET", "/v2", NULL, NULL, 0, &r), 200);
    CHECK_STR_CONTAINS(r.body, "\"name\":\"attention-server\"");
    CHECK_STR_CONTAINS(r.body, "\"binary_tensor_data\"");
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/health/live", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/health/ready", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "HEAD", "/v2/health/ready", NULL, NULL, 0, &r), 200);
    CHECK_INT_EQ(r.len, 0);
    http_resp_free(&r);
    const char *meta_paths[] = {"/v2/models/demo", "/v2/models/demo/versions/1"};
    for (int i = 0; i < 2; i++) {
        CHECK_INT_EQ(http_do(&d, "GET", meta_paths[i], NULL, NULL, 0, &r), 200);
        json_t *root = json_loads(r.body, 0, NULL);
        CHECK_STR_EQ(json_string_value(json_object_get(root, "name")), "demo");
        CHECK_STR_EQ(json_string_value(json_array_get(json_object_get(root, "versions"), 0)), "1");
        CHECK_STR_EQ(json_string_value(json_object_get(root, "platform")), "attention-server");
        json_t *in0 = json_array_get(json_object_get(root, "inputs"), 0);
        CHECK_STR_EQ(json_string_value(json_object_get(in0, "name")), "embeddings");
        CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(in0, "shape"), 2)), E);
        CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(in0, "shape"), 0)), -1);
        json_t *o1 = json_array_get(json_object_get(root, "outputs"), 1);
        CHECK_STR_EQ(json_string_value(json_object_get(o1, "name")), "attention_weights");
        CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(o1, "shape"), 1)), 4);
        json_decref(root);
        http_resp_free(&r);
    }
    /* which file is serving: its SHA-256 as sha256sum computes it */
    char sum[80] = "";
    FILE *p = popen("sha256sum config/weights/demo.safetensors", "r");
    if (p) {
        if (!fgets(sum, sizeof sum, p)) sum[0] = '\0';
        pclose(p);
    }
    sum[64] = '\0';
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/models/demo", NULL, NULL, 0, &r), 200);
    json_t *meta = json_loads(r.body, 0, NULL), *prm = json_object_get(meta, "parameters");
    CHECK_STR_EQ(json_string_value(json_object_get(prm, "sha256")), sum);
    CHECK_INT_EQ(json_integer_value(json_object_get(prm, "file_bytes")), 67080);
    CHECK_INT_EQ(json_integer_value(json_object_get(prm, "version")), 1);
    json_decref(meta);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v1/models/demo", NULL, NULL, 0, &r), 200);
    CHECK_STR_CONTAINS(r.body, sum);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/metrics", NULL, NULL, 0, &r), 200);
    char info[200];
    snprintf(info, sizeof info, "attention_server_model_info{model=\"demo\",sha256=\"%s\",version=\"1\"} 1",
             sum);
    CHECK_STR_CONTAINS(r.body, info);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/models/demo/ready", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/models/demo/versions/1/ready", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    http_do(&d, "GET", "/v2/models/nope", NULL, NULL, 0, &r);
    check_error(&r, 404, "model_not_found", "'demo'");
    http_resp_free(&r);
    http_do(&d, "GET", "/v2/models/nope/ready", NULL, NULL, 0, &r);
    check_error(&r, 404, "model_not_found", "nope");
    http_resp_free(&r);
    http_do(&d, "GET", "/v2/models/demo/versions/2", NULL, NULL, 0, &r);
    check_error(&r, 404, "model_not_found", "version '2'");
    http_resp_free(&r);
    http_do(&d, "POST", "/v2/models/nope/infer", NULL, "{}", 2, &r);
    check_error(&r, 404, "model_not_found", "nope");
    http_resp_free(&r);
    /* methods: 405 with Allow from the route table; OPTIONS answers 204 */
    http_do(&d, "POST", "/v2/health/live", NULL, "{}", 2, &r);
    check_error(&r, 405, "method_not_allowed", "GET");
    CHECK(resp_header(&r, "Allow", hv, sizeof hv) && !strcmp(hv, "GET, HEAD, OPTIONS"));
    http_resp_free(&r);
    http_do(&d, "GET", "/v2/models/demo/infer", NULL, NULL, 0, &r);
    check_error(&r, 405, "method_not_allowed", "POST");
    CHECK(resp_header(&r, "Allow", hv, sizeof hv) && !strcmp(hv, "POST, OPTIONS"));
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "OPTIONS", "/v2/models/demo/infer", NULL, NULL, 0, &r), 204);
    CHECK(resp_header(&r, "Access-Control-Allow-Origin", hv, sizeof hv) == NULL);
    http_resp_free(&r);
    http_do(&d, "GET", "/v2/nothing", NULL, NULL, 0, &r);
    check_error(&r, 404, "not_found", "/v2/nothing");
    http_resp_free(&r);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

static void infer_matches_attend(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    enum { N = 7 };
    float x[N * E], ref_out[N * E], ref_w[4 * N * N], got[4 * N * N + N * E];
    make_input(x, N, 11);
    if (!attend_ref(&d, x, N, NULL, ref_out, ref_w)) goto done;
    http_resp r;
    char hv[256];

    /* JSON in, JSON out, with an id: the same float32 values */
    char *body = v2_json(x, N, ",\"id\":\"req-42\"");
    const char *hj[] = {"Content-Type: application/json", NULL};
    CHECK_INT_EQ(http_do(&d, "POST", "/v2/models/demo/infer", hj, body, strlen(body), &r), 200);
    free(body);
    json_t *root = json_loads(r.body, 0, NULL);
    CHECK_STR_EQ(json_string_value(json_object_get(root, "id")), "req-42");
    CHECK_STR_EQ(json_string_value(json_object_get(root, "model_name")), "demo");
    CHECK_STR_EQ(json_string_value(json_object_get(root, "model_version")), "1");
    CHECK_INT_EQ(json_output(root, "output", got, N * E), N * E);
    CHECK(!memcmp(got, ref_out, sizeof ref_out));
    CHECK_INT_EQ(json_output(root, "attention_weights", got, 4 * N * N), 4 * N * N);
    CHECK(!memcmp(got, ref_w, sizeof ref_w));
    json_t *o0 = json_array_get(json_object_get(root, "outputs"), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(o0, "datatype")), "FP32");
    CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(o0, "shape"), 0)), N);
    json_decref(root);
    CHECK(resp_header(&r, "Server-Timing", hv, sizeof hv) && strstr(hv, "compute;dur="));
    http_resp_free(&r);

    /* binary in, binary out: exactly /attend's bytes, output then weights */
    char head[512];
    snprintf(head, sizeof head,
             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
             "\"parameters\":{\"binary_data_size\":%zu}}],"
             "\"parameters\":{\"binary_data_output\":true}}",
             N, E, sizeof x);
    size_t len;
    body = v2_binary(head, x, sizeof x, &len);
    CHECK_INT_EQ(post_v2(&d, "/v2/models/demo/infer", body, len, (long)strlen(head), NULL, &r),
                 200);
    long hl = resp_header(&r, "Inference-Header-Content-Length", hv, sizeof hv) ? atol(hv) : -1;
    CHECK(hl > 0 && (size_t)hl + sizeof ref_out + sizeof ref_w == r.len);
    if (hl > 0 && (size_t)hl + sizeof ref_out + sizeof ref_w == r.len) {
        CHECK(!memcmp(r.body + hl, ref_out, sizeof ref_out));
        CHECK(!memcmp(r.body + hl + sizeof ref_out, ref_w, sizeof ref_w));
        root = json_loadb(r.body, (size_t)hl, 0, NULL);
        json_t *w = json_array_get(json_object_get(root, "outputs"), 1);
        CHECK_STR_EQ(json_string_value(json_object_get(w, "name")), "attention_weights");
        CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(w, "parameters"),
                                                        "binary_data_size")),
                     sizeof ref_w);
        json_decref(root);
    }
    CHECK(resp_header(&r, "Content-Type", hv, sizeof hv) &&
          !strcmp(hv, "application/octet-stream"));
    http_resp_free(&r);
    free(body);

    /* the header at an odd length (binary tensors then unaligned in the
     * body), only the weights, in binary; and FP16 output in JSON */
    snprintf(head, sizeof head,
             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,%d,%d],\"datatype\":\"FP32\","
             "\"parameters\":{\"binary_data_size\":%zu}}],"
             "\"outputs\":[{\"name\":\"attention_weights\",\"parameters\":{\"binary_data\":true}}]"
             "} ",
             N, E, sizeof x);
    if (strlen(head) % 4 == 0) strcat(head, " ");
    body = v2_binary(head, x, sizeof x, &len);
    CHECK_INT_EQ(post_v2(&d, "/v2/models/demo/infer", body, len, (long)strlen(head), NULL, &r),
                 200);
    hl = resp_header(&r, "Inference-Header-Content-Length", hv, sizeof hv) ? atol(hv) : -1;
    CHECK(hl > 0 && (size_t)hl + sizeof ref_w == r.len);
    if (hl > 0 && (size_t)hl + sizeof ref_w == r.len)
        CHECK(!memcmp(r.body + hl, ref_w, sizeof ref_w));
    CHECK(strstr(r.body, "\"shape\":[1,4,7,7]") != NULL);
    CHECK(strstr(r.body, "\"name\":\"output\"") == NULL);
    http_resp_free(&r);
    free(body);

    /* the binary section at every offset from a cache line: the server
     * starts the body so that it lands aligned (or moves it where it could
     * not); the answer is the same bytes whatever the header's length */
    for (int pad = 0; pad < 64; pad++) {
        snprintf(head, sizeof head,
                 "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
                 "\"parameters\":{\"binary_data_size\":%zu}}],"
                 "\"parameters\":{\"binary_data_output\":true}}%*s",
                 N, E, sizeof x, pad, "");
        body = v2_binary(head, x, sizeof x, &len);
        long st = post_v2(&d, "/v2/models/demo/infer", body, len, (long)strlen(head), NULL, &r);
        hl = resp_header(&r, "Inference-Header-Content-Length", hv, sizeof hv) ? atol(hv) : -1;
        bool same = st == 200 && hl > 0 && (size_t)hl + sizeof ref_out + sizeof ref_w == r.len &&
                    !memcmp(r.body + hl, ref_out, sizeof ref_out) &&
                    !memcmp(r.body + hl + sizeof ref_out, ref_w, sizeof ref_w);
        CHECK_MSG(same, "header of %zu bytes (pad %d): HTTP %ld, not /attend's bytes",
                  strlen(head), pad, st);
        http_resp_free(&r);
        free(body);
    }

    /* cross-attention with a BOOL key_padding_mask in binary, against /attend */
    uint8_t kpm[N] = {0, 0, 1, 0, 1, 0, 0};
    const char *extra = ",\"key_padding_mask\":[false,false,true,false,true,false,false],"
                        "\"causal\":true";
    if (attend_ref(&d, x, N, extra, ref_out, ref_w)) {
        snprintf(head, sizeof head,
                 "{\"parameters\":{\"causal\":true,\"binary_data_output\":true},\"inputs\":["
                 "{\"name\":\"query\",\"shape\":[%d,%d],\"datatype\":\"FP32\",\"parameters\":"
                 "{\"binary_data_size\":%zu}},"
                 "{\"name\":\"key_padding_mask\",\"shape\":[%d],\"datatype\":\"BOOL\","
                 "\"parameters\":{\"binary_data_size\":%d}},"
                 "{\"name\":\"key\",\"shape\":[%d,%d],\"datatype\":\"FP32\",\"data\":[",
                 N, E, sizeof x, N, N, N, E);
        buf b;
        buf_init(&b, 1u << 22);
        buf_puts(&b, head);
        for (int i = 0; i < N * E; i++) buf_printf(&b, i ? ",%.9g" : "%.9g", (double)x[i]);
        buf_printf(&b, "]},{\"name\":\"value\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
                       "\"parameters\":{\"binary_data_size\":%zu}}]}",
                   N, E, sizeof x);
        size_t hlen = b.len;
        buf_append(&b, x, sizeof x);
        buf_append(&b, kpm, sizeof kpm);
        buf_append(&b, x, sizeof x);
        CHECK_INT_EQ(post_v2(&d, "/v2/models/demo/infer", b.data, b.len, (long)hlen, NULL, &r),
                     200);
        hl = resp_header(&r, "Inference-Header-Content-Length", hv, sizeof hv) ? atol(hv) : -1;
        CHECK(hl > 0 && (size_t)hl + sizeof ref_out + sizeof ref_w == r.len);
        if (hl > 0 && (size_t)hl + sizeof ref_out + sizeof ref_w == r.len) {
            CHECK(!memcmp(r.body + hl, ref_out, sizeof ref_out));
            CHECK(!memcmp(r.body + hl + sizeof ref_out, ref_w, sizeof ref_w));
        }
        http_resp_free(&r);
        buf_free(&b);
    }
done:
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* Answers large enough to be encoded in chunks on the pool's workers: the
 * chunks must join into the same values (JSON commas and brackets, base64
 * groups) as one writer's. */
/* One large answer three ways: /attend base64 (the reference; under the
 * lazy threshold, encoded at once in row chunks on the pool's workers), v2
 * JSON (flat) and /attend float JSON (nested), both above the threshold,
 * so written as the client reads them (chunked transfer encoding), a piece
 * at a time. All must hold the same float32 values: chunks and pieces join
 * into the text one writer would write (commas, brackets, base64 groups). */
static void large_answers(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    for (int N = 299; N <= 301; N++) { /* rows of 3-float multiples or not */
        size_t nw = (size_t)4 * N * N;
        float *x = malloc((size_t)N * E * 4), *ref_out = malloc((size_t)N * E * 4),
              *ref_w = malloc(nw * 4), *got = malloc(nw * 4);
        make_input(x, N, 17 + (unsigned)N);
        if (attend_ref(&d, x, N, NULL, ref_out, ref_w)) {
            const char *hj[] = {"Content-Type: application/json", NULL};
            http_resp r;
            char hv[64];
            /* v2 JSON */
            char *body = v2_json(x, N, NULL);
            CHECK_INT_EQ(http_do(&d, "POST", "/v2/models/demo/infer", hj, body, strlen(body), &r),
                         200);
            CHECK_MSG(resp_header(&r, "Transfer-Encoding", hv, sizeof hv) && strstr(hv, "chunked"),
                      "N=%d: a large v2 JSON answer not written as read", N);
            json_t *root = json_loads(r.body, 0, NULL);
            CHECK_MSG(root != NULL, "N=%d: the v2 answer does not parse", N);
            CHECK_INT_EQ(json_output(root, "output", got, (size_t)N * E), (size_t)N * E);
            CHECK(!memcmp(got, ref_out, (size_t)N * E * 4));
            CHECK_INT_EQ(json_output(root, "attention_weights", got, nw), nw);
            CHECK_MSG(!memcmp(got, ref_w, nw * 4), "N=%d: v2 weights differ", N);
            json_decref(root);
            http_resp_free(&r);
            free(body);
            /* /attend float JSON, nested [H, n, n] */
            buf b; /* the same numbers, as /attend embeddings */
            buf_init(&b, 1u << 24);
            buf_puts(&b, "{\"embeddings\":[");
            for (int i = 0; i < N; i++) {
                buf_puts(&b, i ? ",[" : "[");
                for (int j = 0; j < E; j++) buf_printf(&b, j ? ",%.9g" : "%.9g", (double)x[i * E + j]);
                buf_putc(&b, ']');
            }
            buf_puts(&b, "]}");
            CHECK_INT_EQ(http_do(&d, "POST", "/attend", hj, b.data, b.len, &r), 200);
            root = json_loads(r.body, 0, NULL);
            json_t *aw = json_object_get(root, "attention_weights");
            size_t k = 0, bad = 0;
            for (size_t h = 0; h < json_array_size(aw); h++)
                for (size_t i = 0; i < json_array_size(json_array_get(aw, h)); i++) {
                    json_t *row = json_array_get(json_array_get(aw, h), i);
                    for (size_t j = 0; j < json_array_size(row); j++, k++)
                        if (k >= nw || (float)json_number_value(json_array_get(row, j)) != ref_w[k])
                            bad++;
                }
            CHECK_MSG(k == nw && bad == 0, "N=%d: /attend float weights: %zu of %zu, %zu differ",
                      N, k, nw, bad);
            json_decref(root);
            http_resp_free(&r);
            buf_free(&b);
        }
        free(x);
        free(ref_out);
        free(ref_w);
        free(got);
    }
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* Each malformed request: 400 (or the status given) naming the problem. */
static void hostile_framing(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    float x[2 * E];
    make_input(x, 2, 5);
    const char *P = "/v2/models/demo/infer";
    struct {
        const char *header; /* %zu = sizeof x */
        long raw_bytes;     /* raw bytes after the header */
        long header_len;    /* -2: the header's true length; -1: none sent */
        const char *needle;
        const char *extra_header;
    } cases[] = {
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         512, 100000, "Inference-Header-Content-Length", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         520, -2, "add up", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         100, -2, "binary_data_size", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":256}}]}",
         256, -2, "shape [2,64] of FP32 needs", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":-512}}]}",
         512, -2, "binary_data_size", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":1e300}}]}",
         512, -2, "binary_data_size", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":18446744073709551615}}]}",
         512, -2, "binary_data_size", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         512, -1, "needs the Inference-Header-Content-Length header", NULL},
        {"{\"inputs\":[{\"name\":\"embedding\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         512, -2, "unknown input 'embedding'", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"INT8\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         512, -2, "INT8", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"BOOL\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         512, -2, "BOOL is only for masks", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}],\"outputs\":[{\"name\":\"scores\"}]}",
         512, -2, "unknown output 'scores'", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu},\"data\":[1]}]}",
         512, -2, "not both", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}],\"parameters\":{\"causl\":true}}",
         512, -2, "unknown parameter 'causl'", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}],\"parameters\":{\"output_datatype\":"
         "\"FP64\"}}",
         512, -2, "output_datatype", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,32],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":256}}]}",
         256, -2, "expects 64", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"data\":[1,2,3]}]}",
         0, -1, "3 elements; shape [2,64] holds 128", NULL},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}}]}",
         512, -2, "Inference-Header-Content-Length", "Inference-Header-Content-Length: 12abc"},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":%zu}},{\"name\":\"embeddings\",\"shape\":[2,64],"
         "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":%zu}}]}",
         1024, -2, "given twice", NULL},
    };
    char head[1024], raw[1024];
    memcpy(raw, x, sizeof x);
    memcpy(raw + sizeof x, x, sizeof x);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(head, sizeof head, cases[i].header, sizeof x, sizeof x);
        size_t len;
        char *body = v2_binary(head, raw, (size_t)cases[i].raw_bytes, &len);
        long hl = cases[i].header_len == -2 ? (long)strlen(head) : cases[i].header_len;
        http_resp r;
        if (cases[i].extra_header) /* a header length that is not a number */
            post_v2(&d, P, body, len, -1, cases[i].extra_header, &r);
        else
            post_v2(&d, P, body, len, hl, NULL, &r);
        /* without the header the body is all JSON, and not valid JSON */
        check_error(&r, 400, cases[i].header_len == -1 && cases[i].raw_bytes ? "invalid_json"
                                                                              : "invalid_request",
                    cases[i].needle);
        http_resp_free(&r);
        free(body);
    }
    /* a BOOL byte that is neither 0 nor 1 */
    snprintf(head, sizeof head,
             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
             "\"parameters\":{\"binary_data_size\":%zu}},{\"name\":\"key_padding_mask\","
             "\"shape\":[2],\"datatype\":\"BOOL\",\"parameters\":{\"binary_data_size\":2}}]}",
             sizeof x);
    memcpy(raw, x, sizeof x);
    raw[sizeof x] = 0;
    raw[sizeof x + 1] = 7;
    size_t len;
    char *body = v2_binary(head, raw, sizeof x + 2, &len);
    http_resp r;
    post_v2(&d, P, body, len, (long)strlen(head), NULL, &r);
    check_error(&r, 400, "invalid_request", "key_padding_mask: byte 1 is 7");
    http_resp_free(&r);
    free(body);
    /* a NaN in a binary FP32 tensor, and an inf past the finite scan's
     * first block of 256 elements */
    bad_binary_element(&d, P, x, 2, 70, NAN);
    bad_binary_element(&d, P, x, 8, 300, -INFINITY);
    /* an output beyond FP16's range (|y| > 65504; float32 holds it): never
     * an inf or an empty number, in JSON or binary; BF16 holds it */
    float xb[2 * E];
    for (int i = 0; i < 2 * E; i++) xb[i] = x[i] * 1e7f;
    static const char *const big[] = {"\"binary_data_output\":true,\"output_datatype\":\"FP16\"",
                                      "\"output_datatype\":\"FP16\"", "\"output_datatype\":\"BF16\""};
    for (int i = 0; i < 3; i++) {
        snprintf(head, sizeof head,
                 "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,64],\"datatype\":\"FP32\","
                 "\"parameters\":{\"binary_data_size\":%zu}}],\"parameters\":{%s}}",
                 sizeof xb, big[i]);
        body = v2_binary(head, xb, sizeof xb, &len);
        post_v2(&d, P, body, len, (long)strlen(head), NULL, &r);
        if (i < 2)
            check_error(&r, 400, "invalid_request", "output_datatype: FP16 cannot hold the output");
        else
            CHECK_INT_EQ(r.status, 200);
        http_resp_free(&r);
        free(body);
    }
    /* outputs: [] asks for nothing */
    body = v2_json(x, 2, ",\"outputs\":[]");
    post_v2(&d, P, body, strlen(body), -1, NULL, &r);
    check_error(&r, 400, "invalid_request", "outputs");
    http_resp_free(&r);
    free(body);
    /* the server is still fine */
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/health/live", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

static char *zip(const char *in, size_t len, bool gzip, size_t *zlen) {
    z_stream z = {0};
    deflateInit2(&z, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&z, len) + 64;
    char *out = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    *zlen = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static char *unzip(const char *in, size_t len, size_t *outlen) {
    z_stream z = {0};
    inflateInit2(&z, 15 + 32); /* gzip or zlib */
    size_t cap = 1u << 24;
    char *out = malloc(cap + 1);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_FINISH);
    *outlen = cap - z.avail_out;
    out[*outlen] = '\0';
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

static void compression(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    enum { N = 5 };
    float x[N * E], ref_out[N * E], got[N * E];
    make_input(x, N, 3);
    /* only "output" asked: the memory-lean path, as /attend without weights */
    if (!attend_ref(&d, x, N, ",\"need_weights\":false", ref_out, NULL)) goto done;
    char *body = v2_json(x, N, ",\"outputs\":[{\"name\":\"output\"}]");
    for (int g = 0; g < 2; g++) { /* request gzip / deflate; answer the other way */
        size_t zlen;
        char *z = zip(body, strlen(body), g == 0, &zlen);
        const char *h[] = {"Content-Type: application/json",
                           g == 0 ? "Content-Encoding: gzip" : "Content-Encoding: deflate",
                           g == 0 ? "Accept-Encoding: deflate" : "Accept-Encoding: gzip;q=0.5, "
                                                                 "deflate;q=0, br",
                           NULL};
        http_resp r;
        char hv[64];
        CHECK_INT_EQ(http_do(&d, "POST", "/v2/models/demo/infer", h, z, zlen, &r), 200);
        const char *want = g == 0 ? "deflate" : "gzip";
        CHECK_MSG(resp_header(&r, "Content-Encoding", hv, sizeof hv) && !strcmp(hv, want),
                  "want Content-Encoding %s", want);
        size_t plen;
        char *plain = unzip(r.body, r.len, &plen);
        CHECK(plain != NULL);
        json_t *root = plain ? json_loads(plain, 0, NULL) : NULL;
        CHECK_INT_EQ(json_output(root, "output", got, N * E), N * E);
        CHECK(!memcmp(got, ref_out, sizeof ref_out));
        json_decref(root);
        free(plain);
        http_resp_free(&r);
        free(z);
    }
    /* a body that is not the stream it claims */
    const char *hbad[] = {"Content-Type: application/json", "Content-Encoding: deflate", NULL};
    http_resp r;
    http_do(&d, "POST", "/v2/models/demo/infer", hbad, "not deflate", 11, &r);
    check_error(&r, 400, "invalid_request", "deflate");
    http_resp_free(&r);
    /* small GET answers are compressed too; q=0 refuses */
    const char *hg[] = {"Accept-Encoding: gzip", NULL};
    char hv[64];
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/models/demo", hg, NULL, 0, &r), 200);
    CHECK(resp_header(&r, "Content-Encoding", hv, sizeof hv) && !strcmp(hv, "gzip"));
    http_resp_free(&r);
    const char *hq0[] = {"Accept-Encoding: gzip;q=0", NULL};
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/models/demo", hq0, NULL, 0, &r), 200);
    CHECK(resp_header(&r, "Content-Encoding", hv, sizeof hv) == NULL);
    http_resp_free(&r);
    free(body);
done:
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);

    /* the thresholds are settings: nothing compressed above 100 bytes, and
     * answers above always_bytes only within the time budget (0% here) */
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors",
                          "--compress-always-bytes", "100", "--compress-budget-pct", "0", NULL};
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon did not start");
        return;
    }
    char *b2 = v2_json(x, N, NULL);
    const char *h[] = {"Content-Type: application/json", "Accept-Encoding: gzip", NULL};
    CHECK_INT_EQ(http_do(&d, "POST", "/v2/models/demo/infer", h, b2, strlen(b2), &r), 200);
    CHECK_MSG(resp_header(&r, "Content-Encoding", hv, sizeof hv) == NULL,
              "a %zu-byte answer was compressed past the policy", r.len);
    http_resp_free(&r);
    free(b2);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

static void cors_auth_metrics(void) {
    daemon_proc d;
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors",
                          "--cors-allow-origin", "https://app.example", NULL};
    setenv("ATTN_API_KEY", "sekret", 1);
    int rc = daemon_start(&d, args);
    unsetenv("ATTN_API_KEY");
    if (rc) {
        CHECK_MSG(0, "daemon did not start");
        return;
    }
    http_resp r;
    char hv[256];
    const char *pre[] = {"Origin: https://app.example", "Access-Control-Request-Method: POST",
                         "Access-Control-Request-Headers: authorization, content-type", NULL};
    CHECK_INT_EQ(http_do(&d, "OPTIONS", "/v2/models/demo/infer", pre, NULL, 0, &r), 204);
    CHECK(resp_header(&r, "Access-Control-Allow-Origin", hv, sizeof hv) &&
          !strcmp(hv, "https://app.example"));
    CHECK(resp_header(&r, "Access-Control-Allow-Methods", hv, sizeof hv) && strstr(hv, "POST"));
    CHECK(resp_header(&r, "Access-Control-Allow-Headers", hv, sizeof hv) &&
          strstr(hv, "Authorization") && strstr(hv, "Inference-Header-Content-Length"));
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "OPTIONS", "/attend", pre, NULL, 0, &r), 204);
    http_resp_free(&r);
    /* the key guards models and infer, not health or server metadata */
    http_do(&d, "GET", "/v2/models/demo", NULL, NULL, 0, &r);
    check_error(&r, 401, "unauthorized", "Bearer");
    CHECK(resp_header(&r, "Access-Control-Allow-Origin", hv, sizeof hv) != NULL);
    http_resp_free(&r);
    http_do(&d, "POST", "/v2/models/demo/infer", NULL, "{}", 2, &r);
    check_error(&r, 401, "unauthorized", "Bearer");
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/health/live", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    CHECK_INT_EQ(http_do(&d, "GET", "/v2", NULL, NULL, 0, &r), 200);
    http_resp_free(&r);
    float x[3 * E];
    make_input(x, 3, 9);
    char *body = v2_json(x, 3, NULL);
    const char *h[] = {"Content-Type: application/json", "Authorization: Bearer sekret",
                       "Origin: https://app.example", NULL};
    CHECK_INT_EQ(http_do(&d, "POST", "/v2/models/demo/infer", h, body, strlen(body), &r), 200);
    CHECK(resp_header(&r, "Access-Control-Allow-Origin", hv, sizeof hv) &&
          !strcmp(hv, "https://app.example"));
    CHECK(resp_header(&r, "Access-Control-Expose-Headers", hv, sizeof hv) &&
          strstr(hv, "Inference-Header-Content-Length"));
    http_resp_free(&r);
    free(body);
    /* metrics are labelled by the route's pattern, never by the raw path;
     * a request is counted when its connection is done with it, which may
     * be just after its client has the answer: poll a little */
    const char *want[] = {"route=\"/v2/models/{model}/infer\",model=\"demo\",status=\"200\"",
                          "route=\"/v2/models/{model}\",model=\"\",status=\"401\"",
                          "route=\"/v2/health/live\",model=\"\",status=\"200\""};
    for (int tries = 0; tries < 100; tries++) {
        CHECK_INT_EQ(http_do(&d, "GET", "/metrics", NULL, NULL, 0, &r), 200);
        bool all = true;
        for (int i = 0; i < 3; i++) all = all && strstr(r.body, want[i]);
        if (all || tries == 99) break;
        http_resp_free(&r);
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    for (int i = 0; i < 3; i++) CHECK_STR_CONTAINS(r.body, want[i]);
    http_resp_free(&r);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* The raw bytes of a base64 tensor member of obj ("indices" or "values"),
 * into dst (cap bytes); the bytes decoded, or 0. */
static size_t b64_member(json_t *obj, const char *name, void *dst, size_t cap) {
    const char *s = json_string_value(json_object_get(json_object_get(obj, name), "base64"));
    if (!s) return 0;
    unsigned char *tmp = malloc(base64_decoded_max(strlen(s)) + 1);
    size_t bad, n = base64_decode(tmp, s, strlen(s), &bad);
    if (n == (size_t)-1 || n > cap) n = 0;
    memcpy(dst, tmp, n);
    free(tmp);
    return n;
}

/* The parameters weights_topk and weights_rows: the same numbers /attend
 * gives (JSON and binary, INT32 indices), outputs in the request's order,
 * the metadata, and every 400 naming the parameter or output. */
static void long_context_forms(void) {
    daemon_proc d;
    if (daemon_start(&d, DEMO)) {
        CHECK_MSG(0, "demo daemon did not start");
        return;
    }
    enum { N = 7, K = 3 };
    float x[N * E], got[4 * N * N];
    int32_t ref_idx[4 * N * K], ref_avg_idx[N * K];
    float ref_val[4 * N * K], ref_avg_val[N * K], ref_rows[4 * 2 * N];
    make_input(x, N, 23);
    http_resp r;
    char hv[256];
    const char *hj[] = {"Content-Type: application/json", NULL};
    /* the /attend references, base64 */
    static const char *const extras[3] = {",\"weights_topk\":3", ",\"weights_topk\":3,\"average_heads\":true",
                                          ",\"weights_rows\":[6,2]"};
    void *dst[3][2] = {{ref_idx, ref_val}, {ref_avg_idx, ref_avg_val}, {ref_rows, NULL}};
    const size_t bytes[3] = {sizeof ref_idx, sizeof ref_avg_idx, sizeof ref_rows};
    for (int q = 0; q < 3; q++) {
        buf b;
        buf_init(&b, 1u << 24);
        buf_puts(&b, "{\"embeddings\":[");
        for (int i = 0; i < N; i++)
            for (int j = 0; j < E; j++)
                buf_printf(&b, "%s%.9g%s", j ? "," : i ? ",[" : "[", (double)x[i * E + j], j == E - 1 ? "]" : "");
        buf_printf(&b, "],\"encoding_format\":\"base64\"%s}", extras[q]);
        http_post_json(&d, "/attend", b.data, &r);
        buf_free(&b);
        json_t *root = json_loads(r.body, 0, NULL), *tk = json_object_get(root, "attention_topk");
        bool ok = r.status == 200 &&
                  (q == 2 ? b64_member(root, "attention_weights", dst[q][0], bytes[q]) == bytes[q]
                          : b64_member(tk, "indices", dst[q][0], bytes[q]) == bytes[q] &&
                                b64_member(tk, "values", dst[q][1], bytes[q]) == bytes[q]);
        CHECK_MSG(ok, "/attend reference %d: %ld %.300s", q, r.status, r.body);
        json_decref(root);
        http_resp_free(&r);
        if (!ok) goto done;
    }

    /* JSON: output, then indices as integers, values as numbers */
    char *body = v2_json(x, N, ",\"parameters\":{\"weights_topk\":3}");
    CHECK_INT_EQ(http_do(&d, "POST", "/v2/models/demo/infer", hj, body, strlen(body), &r), 200);
    free(body);
    json_t *root = json_loads(r.body, 0, NULL), *outs = json_object_get(root, "outputs");
    CHECK_INT_EQ(json_array_size(outs), 3);
    json_t *oi = json_array_get(outs, 1);
    CHECK_STR_EQ(json_string_value(json_object_get(oi, "name")), "attention_topk_indices");
    CHECK_STR_EQ(json_string_value(json_object_get(oi, "datatype")), "INT32");
    CHECK_INT_EQ(json_array_size(json_object_get(oi, "shape")), 3);
    CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(oi, "shape"), 2)), K);
    int bad = 0;
    for (size_t i = 0; i < 4 * N * K; i++) {
        json_t *v = json_array_get(json_object_get(oi, "data"), i);
        bad += !json_is_integer(v) || json_integer_value(v) != ref_idx[i];
    }
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(json_output(root, "attention_topk_values", got, 4 * N * K), 4 * N * K);
    CHECK(!memcmp(got, ref_val, sizeof ref_val));
    json_decref(root);
    http_resp_free(&r);

    /* binary, averaged, values named first and no output: exactly /attend's bytes */
    char head[512];
    snprintf(head, sizeof head,
             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
             "\"parameters\":{\"binary_data_size\":%zu}}],"
             "\"parameters\":{\"weights_topk\":3,\"average_heads\":true,\"binary_data_output\":true},"
             "\"outputs\":[{\"name\":\"attention_topk_values\"},{\"name\":\"attention_topk_indices\"}]}",
             N, E, sizeof x);
    size_t len;
    body = v2_binary(head, x, sizeof x, &len);
    CHECK_INT_EQ(post_v2(&d, "/v2/models/demo/infer", body, len, (long)strlen(head), NULL, &r), 200);
    free(body);
    long hl = resp_header(&r, "Inference-Header-Content-Length", hv, sizeof hv) ? atol(hv) : -1;
    bool whole = hl > 0 && (size_t)hl + sizeof ref_avg_val + sizeof ref_avg_idx == r.len;
    CHECK_MSG(whole, "binary top-k answer: header %ld, %zu bytes", hl, r.len);
    if (whole) {
        CHECK(!memcmp(r.body + hl, ref_avg_val, sizeof ref_avg_val));
        CHECK(!memcmp(r.body + hl + sizeof ref_avg_val, ref_avg_idx, sizeof ref_avg_idx));
        CHECK(strstr(r.body, "\"name\":\"attention_topk_values\",\"datatype\":\"FP32\",\"shape\":[7,3]") <
              strstr(r.body, "\"name\":\"attention_topk_indices\",\"datatype\":\"INT32\",\"shape\":[7,3]"));
    }
    http_resp_free(&r);

    /* weight rows, binary attention_weights only */
    snprintf(head, sizeof head,
             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],\"datatype\":\"FP32\","
             "\"parameters\":{\"binary_data_size\":%zu}}],"
             "\"parameters\":{\"weights_rows\":[6,2]},"
             "\"outputs\":[{\"name\":\"attention_weights\",\"parameters\":{\"binary_data\":true}}]}",
             N, E, sizeof x);
    body = v2_binary(head, x, sizeof x, &len);
    CHECK_INT_EQ(post_v2(&d, "/v2/models/demo/infer", body, len, (long)strlen(head), NULL, &r), 200);
    free(body);
    hl = resp_header(&r, "Inference-Header-Content-Length", hv, sizeof hv) ? atol(hv) : -1;
    whole = hl > 0 && (size_t)hl + sizeof ref_rows == r.len;
    CHECK_MSG(whole, "binary rows answer: header %ld, %zu bytes", hl, r.len);
    if (whole) {
        CHECK(!memcmp(r.body + hl, ref_rows, sizeof ref_rows));
        CHECK_STR_CONTAINS(r.body, "\"shape\":[4,2,7]");
    }
    http_resp_free(&r);

    /* the metadata names the top-k outputs */
    CHECK_INT_EQ(http_do(&d, "GET", "/v2/models/demo", NULL, NULL, 0, &r), 200);
    CHECK_STR_CONTAINS(r.body, "{\"name\":\"attention_topk_indices\",\"datatype\":\"INT32\",\"shape\":[-1,4,-1,-1]}");
    CHECK_STR_CONTAINS(r.body, "{\"name\":\"attention_topk_values\",\"datatype\":\"FP32\"");
    http_resp_free(&r);

    /* each mistake a 400 naming the parameter or output */
    static const struct {
        const char *extra, *needle;
    } bads[] = {
        {",\"parameters\":{\"weights_topk\":0}", "parameters.weights_topk: expected a whole number"},
        {",\"parameters\":{\"weights_topk\":8}", "parameters.weights_topk: 8 is more than the 7 keys"},
        {",\"parameters\":{\"weights_topk\":true}", "parameters.weights_topk: expected a whole number"},
        {",\"parameters\":{\"weights_rows\":[]}", "parameters.weights_rows: empty"},
        {",\"parameters\":{\"weights_rows\":[7]}", "parameters.weights_rows[0]: 7 is not a query row"},
        {",\"parameters\":{\"weights_rows\":[1,3,1]}", "parameters.weights_rows[2]: row 1 is listed twice"},
        {",\"parameters\":{\"weights_rows\":[0.5]}", "parameters.weights_rows[0]"},
        {",\"parameters\":{\"weights_rows\":{\"a\":1}}", "parameters.weights_rows: expected an array"},
        {",\"parameters\":{\"weights_topk\":2,\"weights_rows\":[0]}",
         "parameters.weights_topk and parameters.weights_rows"},
        {",\"parameters\":{\"weights_topk\":2},\"outputs\":[{\"name\":\"attention_weights\"}]",
         "attention_weights with parameters.weights_topk"},
        {",\"parameters\":{\"weights_topk\":2},\"outputs\":[{\"name\":\"output\"}]",
         "outputs names neither attention_topk_indices nor attention_topk_values"},
        {",\"outputs\":[{\"name\":\"attention_topk_values\"}]",
         "attention_topk_values needs the request parameter weights_topk"},
        {",\"parameters\":{\"weights_rows\":[0]},\"outputs\":[{\"name\":\"output\"}]",
         "outputs leaves out attention_weights"},
        {",\"parameters\":{\"weights_topk\":2},\"outputs\":[{\"name\":\"attention_topk_indices\"},"
         "{\"name\":\"attention_topk_indices\"}]",
         "requested twice"},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        body = v2_json(x, N, bads[i].extra);
        http_do(&d, "POST", "/v2/models/demo/infer", hj, body, strlen(body), &r);
        check_error(&r, 400, "invalid_request", bads[i].needle);
        http_resp_free(&r);
        free(body);
    }
    const char *int_in = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,64],\"datatype\":\"INT32\","
                         "\"data\":[0]}]}";
    http_do(&d, "POST", "/v2/models/demo/infer", hj, int_in, strlen(int_in), &r);
    check_error(&r, 400, "invalid_request", "embeddings.datatype: 'INT32' is not supported");
    http_resp_free(&r);
done:
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

/* A binary body of exactly --max-body-bytes whose header length makes the
 * server start it into its buffer (to align the tensors) is still within
 * the limit; one byte more is not. The buffer is malloc's (16-byte
 * aligned) and the header 8 bytes past a multiple of 16, so the tensors
 * never start on a cache line without a lead. A small pass: the test
 * runs under valgrind too. */
static void body_at_the_limit(void) {
    enum { N = 64, HEAD = 168, LIMIT = N * E * 4 + HEAD };
    char limit[32];
    snprintf(limit, sizeof limit, "%d", LIMIT);
    const char *args[] = {"--model", "demo=config/weights/demo.safetensors", "--max-body-bytes",
                          limit, NULL};
    daemon_proc d;
    if (daemon_start(&d, args)) {
        CHECK_MSG(0, "daemon with --max-body-bytes did not start");
        return;
    }
    float *x = malloc((size_t)N * E * sizeof *x);
    make_input(x, N, 5);
    for (int extra = 0; extra < 2; extra++) {
        char head[512];
        int n = snprintf(head, sizeof head,
                         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[%d,%d],"
                         "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":%zu}}],"
                         "\"outputs\":[{\"name\":\"output\"}]}",
                         N, E, (size_t)N * E * sizeof *x);
        while (n < HEAD + extra) head[n++] = ' ';
        head[n] = '\0';
        size_t len;
        char *body = v2_binary(head, x, (size_t)N * E * sizeof *x, &len);
        CHECK_INT_EQ(len, (size_t)LIMIT + (size_t)extra);
        http_resp r;
        long st = post_v2(&d, "/v2/models/demo/infer", body, len, n, NULL, &r);
        if (extra)
            check_error(&r, 413, "payload_too_large", "max_body_bytes");
        else
            CHECK_INT_EQ(st, 200);
        http_resp_free(&r);
        free(body);
    }
    free(x);
    CHECK_INT_EQ(daemon_stop(&d, SIGTERM, 30), 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    metadata_and_health();
    infer_matches_attend();
    body_at_the_limit();
    large_answers();
    hostile_framing();
    compression();
    cors_auth_metrics();
    long_context_forms();
    curl_global_cleanup();
    return check_exit();
}
