/* fuzz_safetensors.c - libFuzzer target: the safetensors reader and the
 * weight-set loader on untrusted bytes.
 *
 * Each input is a whole file. st_parse must accept or refuse it with a
 * message; when it accepts, the tensor table must be self-consistent (sizes,
 * lookups by name, data inside the file, header + data = the whole file) and
 * every float tensor converts (or is refused) without touching memory it
 * does not own. Then attn_weights_load_mem runs four times: num_heads from
 * the file (0) and a fixed 2, each with no prefix and with "layer.". A
 * weight set it returns must be internally consistent. ASan/LSan catch
 * out-of-bounds accesses and leaks; anything else aborts with a message.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "safetensors.h"
#include "weights.h"

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "fuzz_safetensors: " __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static void check_file(const st_file *f, size_t len) {
    char err[ATTN_ERRLEN];
    size_t n = st_count(f), data_bytes = 0;
    if (len < 8) DIE("accepted a %zu-byte file", len);
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = st_get(f, i);
        if (!t || !t->name) DIE("st_get(%zu) is NULL", i);
        if (st_find(f, t->name) != t)
            DIE("st_find(\"%s\") does not return st_get(%zu)", t->name, i);
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) DIE("tensor %zu: ndim %d", i, t->ndim);
        size_t numel = 1;
        for (int k = 0; k < t->ndim; k++) numel *= t->shape[k]; /* checked by the reader */
        if (numel != t->numel)
            DIE("tensor \"%s\": numel %zu, shape gives %zu", t->name, t->numel, numel);
        if (t->nbytes != t->numel * st_dtype_size(t->dtype))
            DIE("tensor \"%s\": nbytes %zu for %zu elements of %s", t->name, t->nbytes, t->numel,
                st_dtype_name(t->dtype));
        if (t->nbytes > len)
            DIE("tensor \"%s\": %zu bytes in a %zu-byte file", t->name, t->nbytes, len);
        data_bytes += t->nbytes;
        /* touch every byte: ASan reports it if data points outside the copy */
        volatile unsigned char sink = 0;
        for (size_t b = 0; b < t->nbytes; b++) sink ^= t->data[b];
        (void)sink;
        if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64) {
            float *dst = malloc((t->numel ? t->numel : 1) * sizeof(float));
            if (!dst) continue;
            attn_status st = st_to_f32(t, dst, st_label(f), err, sizeof err);
            if (st == ATTN_OK) {
                for (size_t k = 0; k < t->numel; k++)
                    if (!isfinite(dst[k]))
                        DIE("st_to_f32(\"%s\") succeeded with a non-finite value at %zu", t->name,
                            k);
            } else if (st != ATTN_ERR_LAYER) {
                DIE("st_to_f32(\"%s\"): unexpected status %s: %s", t->name, attn_status_name(st),
                    err);
            }
            free(dst);
        }
    }
    if (data_bytes > len - 8) DIE("tensors hold %zu bytes in a %zu-byte file", data_bytes, len);
    (void)st_metadata(f, "num_heads");
    (void)st_metadata(f, "add_zero_attn");
    (void)st_find(f, "in_proj_weight");
}

static void check_weights(const attn_weights *w, const attn_weights_opts *o) {
    if (w->E < 1 || w->H < 1 || w->d < 1 || w->d * w->H != w->E || w->kdim < 1 || w->vdim < 1)
        DIE("inconsistent geometry E=%d H=%d d=%d kdim=%d vdim=%d", w->E, w->H, w->d, w->kdim,
            w->vdim);
    if (o->num_heads > 0 && w->H != o->num_heads)
        DIE("H=%d but num_heads option %d", w->H, o->num_heads);
    if (!w->wq || !w->wk || !w->wv || !w->wo || (!w->wo_t && !w->wo_p))
        DIE("a projection weight is NULL");
    if (w->bias != (w->bq && w->bk && w->bv && w->bo)) DIE("bias flag and bias arrays disagree");
    if (w->add_bias_kv != (w->bias_k && w->bias_v)) DIE("add_bias_kv and bias_k/bias_v disagree");
    if ((w->wqkv_t || w->wqkv_p) != (w->kdim == w->E && w->vdim == w->E))
        DIE("wqkv_t / wqkv_p presence is wrong");
    size_t e = (size_t)w->E;
    const struct {
        const float *p;
        size_t n;
    } arr[] = {{w->wq, e * e},
               {w->wk, e * (size_t)w->kdim},
               {w->wv, e * (size_t)w->vdim},
               {w->wo, e * e},
               {w->bq, e},
               {w->bk, e},
               {w->bv, e},
               {w->bo, e},
               {w->bias_k, e},
               {w->bias_v, e},
               {w->wqkv_t, 3 * e * e},
               {w->wo_t, e * e}};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
        if (arr[i].p)
            for (size_t k = 0; k < arr[i].n; k++)
                if (!isfinite(arr[i].p[k]))
                    DIE("weight array %zu holds a non-finite value at %zu", i, k);
    for (size_t r = 0; r < e; r++)
        for (size_t c = 0; c < e; c++) {
            if (w->wqkv_t && w->wqkv_t[c * 3 * e + r] != w->wq[r * e + c])
                DIE("wqkv_t is not wq transposed at (%zu, %zu)", r, c);
            if (w->wqkv_p && attn_gemm_packed_at(w->wqkv_p, w->E, (int)c, (int)r) != w->wq[r * e + c])
                DIE("wqkv_p is not wq packed at (%zu, %zu)", r, c);
            if (w->wo_t && w->wo_t[c * e + r] != w->wo[r * e + c])
                DIE("wo_t is not wo transposed at (%zu, %zu)", r, c);
            if (w->wo_p && attn_gemm_packed_at(w->wo_p, w->E, (int)c, (int)r) != w->wo[r * e + c])
                DIE("wo_p is not wo packed at (%zu, %zu)", r, c);
        }
}

static int g_verbose = -1; /* ATTN_FUZZ_VERBOSE=1: say what each input gave (to check seeds) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[ATTN_ERRLEN];
    if (g_verbose < 0) {
        const char *v = getenv("ATTN_FUZZ_VERBOSE");
        g_verbose = v && *v == '1';
    }
    st_file *f = NULL;
    err[0] = '\0';
    attn_status st = st_parse(data, size, "<fuzz>", &f, err, sizeof err);
    if (g_verbose)
        fprintf(stderr, "fuzz_safetensors: st_parse: %s %s\n", attn_status_name(st), st ? err : "");
    if (st == ATTN_OK) {
        if (!f) DIE("st_parse OK without a file");
        check_file(f, size);
        st_close(f);
    } else {
        if (f) DIE("st_parse failed but returned a file");
        if (!err[0]) DIE("st_parse failed (%s) without a message", attn_status_name(st));
        if (st != ATTN_ERR_FORMAT && st != ATTN_ERR_NOMEM)
            DIE("st_parse: unexpected status %s: %s", attn_status_name(st), err);
    }

    static const int heads[2] = {0, 2};
    static const char *const prefixes[2] = {NULL, "layer."};
    for (int h = 0; h < 2; h++)
        for (int p = 0; p < 2; p++) {
            attn_weights_opts o = {
                .num_heads = heads[h], .add_zero_attn = -1, .prefix = prefixes[p]};
            attn_weights *w = NULL;
            err[0] = '\0';
            attn_status ws = attn_weights_load_mem(data, size, "<fuzz>", &o, &w, err, sizeof err);
            if (g_verbose)
                fprintf(stderr, "fuzz_safetensors:   heads %d prefix %s: %s %s\n", heads[h],
                        prefixes[p] ? prefixes[p] : "-", attn_status_name(ws),
                        ws ? err : w->layout);
            if (ws == ATTN_OK) {
                if (st != ATTN_OK) DIE("attn_weights_load_mem accepted a file st_parse refused");
                if (!w) DIE("attn_weights_load_mem OK without a weight set");
                check_weights(w, &o);
                attn_weights_destroy(w);
            } else {
                if (w) DIE("attn_weights_load_mem failed but returned a weight set");
                if (!err[0])
                    DIE("attn_weights_load_mem failed (%s) without a message",
                        attn_status_name(ws));
            }
            if (st != ATTN_OK) return 0; /* the same parse error four times teaches nothing */
        }
    return 0;
}
