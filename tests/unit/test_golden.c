/* test_golden.c - the engine against PyTorch's own numbers.
 *
 * Every tests/golden/<case>.safetensors (made by tests/golden/make_golden.py;
 * tests/golden/check-live makes fresh random ones) holds one attention
 * layer's weights in the layout and dtype under test, the inputs and masks of
 * one call, and what torch.nn.MultiheadAttention computed for them in
 * float64: expect.output [B,n,E], expect.weights [B,H,n,M] and
 * expect.weights_avg [B,n,M]. For each case this test loads the layer with
 * attn_weights_load (options from the case's metadata), checks the geometry
 * the loader found, and runs attn_forward (on a pool of 2 workers) and
 * attn_forward_naive three ways each: per-head weights, averaged weights, and
 * no weights (the tiled online-softmax path). Each result must be within
 * 1e-4 x max(1, max|torch|) of PyTorch, per tensor. Then the long-context
 * forms, per head and averaged, fast and naive: top-k (k of min(3, M) and
 * M) must be the true top-k of PyTorch's dense weights up to ties, each
 * value within 1e-6 + 4e-6 w of PyTorch's weight w at its index; weight
 * rows (the last, first and middle query rows, in that order) within the
 * same of PyTorch's rows (topk_check.h's form_allowed says why).
 *
 * The directory is $ATTN_GOLDEN_DIR, else tests/golden (tests run from the
 * repository root); file arguments, when given, are the cases instead. One
 * line per case, "PASS name ..." or "FAIL name ...", with the largest
 * differences (check-live counts those lines); then check_exit()'s line.
 */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "blas.h"
#include "check.h"
#include "topk_check.h"
#include "pool.h"
#include "safetensors.h"
#include "weights.h"

#define TOL_REL 1e-4
#define TOL_FORMS 1e-6 /* top-k values and weight rows: form_allowed(TOL_FORMS, w) */

/* ------------------------------------------------------------ case reading */

static const char *meta_or(const st_file *f, const char *key, const char *def) {
    const char *v = st_metadata(f, key);
    return v ? v : def;
}

static bool meta_true(const st_file *f, const char *key) {
    const char *v = st_metadata(f, key);
    return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/* The named F32/F16/BF16/F64 tensor as a new float array (caller frees), its
 * shape checked to have ndim dimensions; NULL (and a failed check) if absent
 * or unreadable. */
static float *read_f32(const st_file *f, const char *name, int ndim, const st_tensor **tp) {
    char err[ATTN_ERRLEN];
    const st_tensor *t = st_find(f, name);
    CHECK_MSG(t != NULL, "%s: tensor %s missing", st_label(f), name);
    if (!t)
        return NULL;
    CHECK_MSG(t->ndim == ndim, "%s: %s has %d dims, expected %d", st_label(f), name, t->ndim,
              ndim);
    float *dst = malloc((t->numel ? t->numel : 1) * sizeof *dst);
    if (!dst || t->ndim != ndim) {
        free(dst);
        return NULL;
    }
    attn_status st = st_to_f32(t, dst, st_label(f), err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "%s: st_to_f32(%s): %s: %s", st_label(f), name,
              attn_status_name(st), err);
    if (st) {
        free(dst);
        return NULL;
    }
    if (tp)
        *tp = t;
    return dst;
}

/* A mask tensor for attn_input: BOOL bytes are used in place; F32 is copied
 * by hand, not through st_to_f32, because a float mask legitimately holds
 * -inf and st_to_f32 refuses values that are not finite. */
static bool read_mask(const st_file *f, const char *name, attn_mask_kind *kind,
                      const void **data, float **owned, const st_tensor **tp) {
    const st_tensor *t = st_find(f, name);
    *kind = ATTN_MASK_NONE;
    *data = NULL;
    *owned = NULL;
    *tp = t;
    if (!t)
        return true;
    if (t->dtype == ST_BOOL || t->dtype == ST_U8) {
        *kind = ATTN_MASK_BOOL;
        *data = t->data;
        return true;
    }
    CHECK_MSG(t->dtype == ST_F32, "%s: %s must be BOOL or F32", st_label(f), name);
    if (t->dtype != ST_F32)
        return false;
    float *v = malloc((t->numel ? t->numel : 1) * sizeof *v);
    if (!v)
        return false;
    for (size_t i = 0; i < t->numel; i++) {
        uint32_t u = (uint32_t)t->data[4 * i] | (uint32_t)t->data[4 * i + 1] << 8 |
                     (uint32_t)t->data[4 * i + 2] << 16 | (uint32_t)t->data[4 * i + 3] << 24;
        memcpy(&v[i], &u, sizeof u);
    }
    *kind = ATTN_MASK_FLOAT;
    *data = v;
    *owned = v;
    return true;
}

/* ------------------------------------------------------------- comparison */

/* Largest |ours - torch| over count floats; NaN/inf in ours counts as an
 * infinite difference. On failure prints the worst element with its index
 * decoded along shape (ndim dims). Returns the difference; *ok cleared when
 * it is over 1e-4 x max(1, max|torch|). */
static double compare(const char *cname, const char *what, const float *ours,
                      const float *torch_v, const st_tensor *shape, bool *ok) {
    size_t count = shape->numel, worst = 0;
    double maxdiff = 0, maxabs = 0;
    for (size_t i = 0; i < count; i++) {
        double t = torch_v[i], o = ours[i];
        double d = isfinite(o) ? fabs(o - t) : INFINITY;
        if (fabs(t) > maxabs)
            maxabs = fabs(t);
        if (d > maxdiff) {
            maxdiff = d;
            worst = i;
        }
    }
    double tol = TOL_REL * (maxabs > 1 ? maxabs : 1);
    bool good = maxdiff <= tol;
    CHECK_MSG(good, "%s: %s differs", cname, what);
    if (!good) {
        char idx[128] = "";
        size_t rest = worst, pos = 0;
        size_t sub[ST_MAX_DIMS];
        for (int k = shape->ndim - 1; k >= 0; k--) {
            sub[k] = shape->shape[k] ? rest % shape->shape[k] : 0;
            rest = shape->shape[k] ? rest / shape->shape[k] : 0;
        }
        for (int k = 0; k < shape->ndim && pos < sizeof idx - 24; k++)
            pos += (size_t)snprintf(idx + pos, sizeof idx - pos, "%s%zu", k ? "," : "", sub[k]);
        fprintf(stderr,
                "    %s %s: max|ours - torch| = %.3g > tol %.3g at [%s]: ours %.9g, torch %.9g\n",
                cname, what, maxdiff, tol, idx, (double)ours[worst], (double)torch_v[worst]);
        *ok = false;
    }
    return maxdiff;
}

/* ---------------------------------------------------------------- one case */

typedef struct {
    double out, w, avg, out_nw; /* largest differences, per result */
} diffs;

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Top-k and weight rows, per head and averaged, fast and naive, against
 * PyTorch's dense weights e_w [B,H,n,M] and e_avg [B,n,M] (see the top).
 * Returns the largest difference; *ok cleared on any failure. */
static double check_forms(const char *cname, const attn_weights *w, const attn_input *in0,
                          attn_pool *pool, const float *e_out, const st_tensor *to,
                          const float *e_w, const float *e_avg, bool *ok) {
    char err[ATTN_ERRLEN], what[160];
    const int M = attn_key_positions(w, in0->m), n = in0->n;
    int rows[3] = {n - 1, 0, n / 2}, nrows = n >= 3 ? 3 : n;
    double worst = 0.0;
    float *out = malloc(to->numel * sizeof *out);
    const int before = check_failed;
    for (int avg = 0; avg < 2; avg++) {
        const float *dense = avg ? e_avg : e_w;
        const size_t planes = (size_t)in0->B * (size_t)(avg ? 1 : w->H);
        for (int form = 0; form < 3; form++) { /* k = min(3, M), k = M, rows */
            attn_input in = *in0;
            in.need_weights = false;
            in.average_heads = avg;
            if (form < 2)
                in.topk = form == 0 ? (M < 3 ? M : 3) : M;
            else
                in.rows = rows, in.nrows = nrows;
            size_t cnt = 0;
            attn_output_sizes(w, &in, NULL, &cnt);
            float *val = malloc(cnt * sizeof *val);
            int32_t *idx = malloc(cnt * sizeof *idx);
            for (int impl = 0; impl < 2 && val && idx && out; impl++) {
                snprintf(what, sizeof what, "%s %s %s %s", cname, impl ? "naive" : "fast",
                         avg ? "averaged" : "per head", form == 2 ? "weight rows" : "top-k");
                attn_result res = {out, val, form < 2 ? idx : NULL};
                attn_status st = impl ? attn_run_naive(w, &in, &res, err, sizeof err)
                                      : attn_run(w, &in, &res, pool, err, sizeof err);
                CHECK_MSG(st == ATTN_OK, "%s: %s: %s", what, attn_status_name(st), err);
                if (st) continue;
                compare(cname, what, out, e_out, to, ok);
                double d = 0.0;
                if (form < 2) {
                    d = check_topk(what, dense, val, idx, planes * (size_t)n, M, in.topk,
                                   TOL_FORMS, !impl);
                } else {
                    int bad = 0;
                    for (size_t pl = 0; pl < planes; pl++)
                        for (int r = 0; r < nrows; r++)
                            for (int j = 0; j < M; j++) {
                                double got = val[(pl * (size_t)nrows + (size_t)r) * M + j];
                                double want = dense[(pl * (size_t)n + (size_t)rows[r]) * M + j];
                                double dl = isfinite(got) ? fabs(got - want) : INFINITY;
                                if (dl > d) d = dl;
                                if (!(dl <= form_allowed(TOL_FORMS, want)) && bad++ < 3)
                                    CHECK_MSG(0, "%s: plane %zu row %d key %d: %.9g, PyTorch's %.9g",
                                              what, pl, rows[r], j, got, want);
                            }
                    CHECK_MSG(!bad, "%s: %d weights differ from PyTorch's beyond %g + %g w",
                              what, bad, TOL_FORMS, 4 * TOL_FORMS);
                }
                if (d > worst) worst = d;
            }
            free(val);
            free(idx);
        }
    }
    free(out);
    if (check_failed != before) *ok = false;
    return worst;
}

/* Runs one case file; returns true when every result matched. */
static bool run_case(const char *path, attn_pool *pool) {
    char err[ATTN_ERRLEN];
    const char *cname = base_name(path);
    st_file *f = NULL;
    attn_weights *w = NULL;
    float *q = NULL, *k = NULL, *v = NULL, *e_out = NULL, *e_w = NULL, *e_avg = NULL;
    float *kpm_owned = NULL, *mask_owned = NULL, *out = NULL, *wts = NULL;
    bool ok = true;
    diffs fast = {0, 0, 0, 0}, naive = {0, 0, 0, 0};

    attn_status st = st_open(path, &f, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "%s: st_open: %s: %s", cname, attn_status_name(st), err);
    if (st) {
        printf("FAIL %s: cannot open: %s\n", cname, err);
        return false;
    }

    /* The layer, with the options the case asks for. */
    attn_weights_opts o = {.num_heads = 0, .add_zero_attn = -1, .prefix = NULL};
    o.num_heads = atoi(meta_or(f, "case.num_heads", "0"));
    const char *za = st_metadata(f, "case.add_zero_attn");
    if (za)
        o.add_zero_attn = atoi(za);
    o.prefix = st_metadata(f, "case.prefix");
    st = attn_weights_load(path, &o, &w, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "%s: attn_weights_load: %s: %s", cname, attn_status_name(st),
              err);
    if (st) {
        printf("FAIL %s: attn_weights_load: %s: %s\n", cname, attn_status_name(st), err);
        ok = false;
        goto done;
    }
    int E = atoi(meta_or(f, "case.E", "0")), H = atoi(meta_or(f, "case.H", "0"));
    CHECK_MSG(w->E == E && w->H == H && w->d * H == E, "%s: loaded E=%d H=%d d=%d, expected E=%d H=%d",
              cname, w->E, w->H, w->d, E, H);
    CHECK_MSG(w->kdim == atoi(meta_or(f, "case.kdim", "0")) &&
                  w->vdim == atoi(meta_or(f, "case.vdim", "0")),
              "%s: loaded kdim=%d vdim=%d, expected %s %s", cname, w->kdim, w->vdim,
              meta_or(f, "case.kdim", "?"), meta_or(f, "case.vdim", "?"));
    CHECK_MSG(w->bias == meta_true(f, "case.bias") &&
                  w->add_bias_kv == meta_true(f, "case.add_bias_kv") &&
                  w->add_zero_attn == meta_true(f, "case.add_zero_attn_expected"),
              "%s: loaded bias=%d add_bias_kv=%d add_zero_attn=%d, expected %s %s %s", cname,
              w->bias, w->add_bias_kv, w->add_zero_attn, meta_or(f, "case.bias", "?"),
              meta_or(f, "case.add_bias_kv", "?"), meta_or(f, "case.add_zero_attn_expected", "?"));
    if (st_metadata(f, "case.layout"))
        CHECK_MSG(strcmp(w->layout, st_metadata(f, "case.layout")) == 0,
                  "%s: layout \"%s\", expected \"%s\"", cname, w->layout,
                  st_metadata(f, "case.layout"));
    if (st_metadata(f, "case.dtype"))
        CHECK_MSG(strcmp(w->dtype, st_metadata(f, "case.dtype")) == 0,
                  "%s: dtype \"%s\", expected \"%s\"", cname, w->dtype,
                  st_metadata(f, "case.dtype"));
    if (w->E != E || w->H != H) {
        printf("FAIL %s: wrong geometry loaded\n", cname);
        ok = false;
        goto done;
    }

    /* The inputs: query [B,n,E], key [B,m,kdim], value [B,m,vdim]. */
    const st_tensor *tq = NULL, *tk = NULL, *tv = NULL, *to = NULL, *tw = NULL, *ta = NULL;
    bool self_attn = meta_true(f, "case.self_attention");
    q = read_f32(f, "case.query", 3, &tq);
    if (!q)
        goto bad_file;
    attn_input in = {0};
    in.B = (int)tq->shape[0];
    in.n = (int)tq->shape[1];
    in.query = q;
    if (self_attn) {
        in.m = in.n;
        in.key = in.value = q; /* the same pointer: the engine's self-attention path */
    } else {
        k = read_f32(f, "case.key", 3, &tk);
        v = read_f32(f, "case.value", 3, &tv);
        if (!k || !v)
            goto bad_file;
        in.m = (int)tk->shape[1];
        in.key = k;
        in.value = v;
    }
    const st_tensor *tkpm, *tmask;
    if (!read_mask(f, "case.key_padding_mask", &in.kpm_kind, &in.kpm, &kpm_owned, &tkpm) ||
        !read_mask(f, "case.attn_mask", &in.mask_kind, &in.attn_mask, &mask_owned, &tmask))
        goto bad_file;
    in.kpm_batched = tkpm && tkpm->ndim == 2;
    in.mask_dims = tmask ? tmask->ndim : 0;
    in.causal = meta_true(f, "case.causal");

    e_out = read_f32(f, "expect.output", 3, &to);
    e_w = read_f32(f, "expect.weights", 4, &tw);
    e_avg = read_f32(f, "expect.weights_avg", 3, &ta);
    if (!e_out || !e_w || !e_avg)
        goto bad_file;
    int M = attn_key_positions(w, in.m);
    CHECK_MSG(M == (int)tw->shape[3], "%s: attn_key_positions %d, torch's M %zu", cname, M,
              tw->shape[3]);
    if (M != (int)tw->shape[3] || tw->numel != (size_t)in.B * H * in.n * M ||
        to->numel != (size_t)in.B * in.n * E || ta->numel != (size_t)in.B * in.n * M) {
        printf("FAIL %s: expect.* shapes do not match the inputs\n", cname);
        ok = false;
        goto done;
    }

    out = malloc(to->numel * sizeof *out);
    wts = malloc(tw->numel * sizeof *wts);
    if (!out || !wts) {
        CHECK_MSG(0, "%s: out of memory", cname);
        ok = false;
        goto done;
    }

    /* Three ways, each on both implementations. */
    for (int mode = 0; mode < 3; mode++) {
        in.need_weights = mode < 2;
        in.average_heads = mode == 1;
        size_t of = 0, wf = 0;
        attn_output_sizes(w, &in, &of, &wf);
        CHECK_MSG(of == to->numel, "%s: attn_output_sizes out %zu, expected %zu", cname, of,
                  to->numel);
        if (in.need_weights)
            CHECK_MSG(wf == (mode == 0 ? tw->numel : ta->numel),
                      "%s: attn_output_sizes weights %zu, expected %zu", cname, wf,
                      mode == 0 ? tw->numel : ta->numel);
        for (int impl = 0; impl < 2; impl++) {
            const char *iname = impl ? "naive" : "fast";
            diffs *dd = impl ? &naive : &fast;
            char what[64];
            for (size_t i = 0; i < to->numel; i++)
                out[i] = NAN; /* anything left unwritten shows */
            for (size_t i = 0; i < tw->numel; i++)
                wts[i] = NAN;
            float *wp = in.need_weights ? wts : NULL;
            st = impl ? attn_forward_naive(w, &in, out, wp, err, sizeof err)
                      : attn_forward(w, &in, out, wp, pool, err, sizeof err);
            CHECK_MSG(st == ATTN_OK, "%s: attn_forward %s (mode %d): %s: %s", cname, iname, mode,
                      attn_status_name(st), err);
            if (st) {
                fprintf(stderr, "    %s %s mode %d: %s: %s\n", cname, iname, mode,
                        attn_status_name(st), err);
                ok = false;
                continue;
            }
            static const char *modes[] = {"weights per head", "weights averaged", "no weights"};
            snprintf(what, sizeof what, "%s output (%s)", iname, modes[mode]);
            double d = compare(cname, what, out, e_out, to, &ok);
            if (mode == 2)
                dd->out_nw = d;
            else if (d > dd->out)
                dd->out = d;
            if (mode == 0) {
                snprintf(what, sizeof what, "%s weights [B,H,n,M]", iname);
                dd->w = compare(cname, what, wts, e_w, tw, &ok);
            } else if (mode == 1) {
                snprintf(what, sizeof what, "%s weights averaged [B,n,M]", iname);
                dd->avg = compare(cname, what, wts, e_avg, ta, &ok);
            }
        }
    }
    double forms = check_forms(cname, w, &in, pool, e_out, to, e_w, e_avg, &ok);
    printf("%s %s: B=%d n=%d m=%d E=%d H=%d | fast out %.2g w %.2g avg %.2g "
           "out(no weights) %.2g | naive out %.2g w %.2g avg %.2g out(no weights) %.2g | "
           "top-k and rows %.2g\n",
           ok ? "PASS" : "FAIL", cname, in.B, in.n, in.m, E, H, fast.out, fast.w, fast.avg,
           fast.out_nw, naive.out, naive.w, naive.avg, naive.out_nw, forms);
    if (!ok)
        printf("    %s: %s\n", cname, meta_or(f, "case.description", ""));
    goto done;

bad_file:
    printf("FAIL %s: the case file lacks a tensor or has a wrong shape\n", cname);
    ok = false;
done:
    free(q);
    free(k);
    free(v);
    free(e_out);
    free(e_w);
    free(e_avg);
    free(kpm_owned);
    free(mask_owned);
    free(out);
    free(wts);
    attn_weights_destroy(w);
    st_close(f);
    return ok;
}

/* --------------------------------------------------------------------- main */

static int is_case(const struct dirent *d) {
    size_t len = strlen(d->d_name);
    const char *ext = ".safetensors";
    size_t el = strlen(ext);
    return len > el && strcmp(d->d_name + len - el, ext) == 0;
}

int main(int argc, char **argv) {
    char err[ATTN_ERRLEN];
    attn_pool *pool = NULL;
    setvbuf(stdout, NULL, _IOLBF, 0); /* case lines and failure details in order */
    attn_blas_info blas; /* one OpenBLAS thread inside pool workers, as the daemon runs */
    CHECK_INT_EQ(attn_blas_init(&blas, err, sizeof err), ATTN_OK);
    attn_status st = attn_pool_create(2, &pool, err, sizeof err);
    CHECK_MSG(st == ATTN_OK, "attn_pool_create: %s", err);
    if (st)
        return check_exit();

    int ncases = 0, nfailed = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++, ncases++)
            nfailed += !run_case(argv[i], pool);
    } else {
        const char *dir = getenv("ATTN_GOLDEN_DIR");
        if (!dir || !*dir)
            dir = "tests/golden";
        struct dirent **list = NULL;
        int cnt = scandir(dir, &list, is_case, alphasort);
        CHECK_MSG(cnt >= 0, "cannot read the golden directory %s", dir);
        for (int i = 0; i < cnt; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
            nfailed += !run_case(path, pool);
            ncases++;
            free(list[i]);
        }
        free(list);
        CHECK_MSG(ncases > 0, "no *.safetensors case in %s (set ATTN_GOLDEN_DIR)", dir);
    }
    printf("golden cases: %d, failed %d\n", ncases, nfailed);
    attn_pool_destroy(pool);
    return check_exit();
}
