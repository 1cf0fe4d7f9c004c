/* weights.c - one multi-head attention layer's weights, loaded from safetensors.
 *
 * Loading goes in the order a reader would check by hand:
 *   1. find the layer: which naming layout the tensors under the prefix use
 *   2. gather its tensors: required ones present, biases all or none,
 *      bias_k/bias_v both or neither
 *   3. shapes: E, kdim and vdim from the query/key/value weights, every other
 *      tensor consistent with them
 *   4. num_heads and add_zero_attn from the options or __metadata__ (both
 *      must agree where both are given), and every other layer option the
 *      metadata states checked against the tensors
 *   5. allocate the weight set and convert every tensor to float32 once
 * Nothing is allocated for the layer before all checks pass, so most errors
 * leave nothing to unwind but the file.
 */
#include "weights.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "hugemem.h"
#include "safetensors.h"

/* ---- layouts ----------------------------------------------------------- */

/* Roles a tensor can play in a layer. */
enum {
    R_WQKV,   /* [3E, E] packed query/key/value weight */
    R_BQKV,   /* [3E] packed biases */
    R_WQ,     /* [E, E] */
    R_WK,     /* [E, kdim] */
    R_WV,     /* [E, vdim] */
    R_BQ,     /* [E] */
    R_BK,     /* [E] */
    R_BV,     /* [E] */
    R_WO,     /* [E, E] */
    R_BO,     /* [E] */
    R_BIAS_K, /* [1, 1, E] */
    R_BIAS_V, /* [1, 1, E] */
    R_COUNT
};

typedef struct {
    const char *layout;          /* reported in attn_weights.layout */
    const char *names[R_COUNT];  /* name after the prefix; NULL = not in this layout */
    const char *alt_wo, *alt_bo; /* second spelling of the out projection (HF o_proj) */
} layout_def;

static const layout_def layouts[] = {
    {"torch-packed",
     {[R_WQKV] = "in_proj_weight",
      [R_BQKV] = "in_proj_bias",
      [R_WO] = "out_proj.weight",
      [R_BO] = "out_proj.bias",
      [R_BIAS_K] = "bias_k",
      [R_BIAS_V] = "bias_v"},
     NULL,
     NULL},
    {"torch-separate",
     {[R_WQ] = "q_proj_weight",
      [R_WK] = "k_proj_weight",
      [R_WV] = "v_proj_weight",
      [R_BQKV] = "in_proj_bias",
      [R_WO] = "out_proj.weight",
      [R_BO] = "out_proj.bias",
      [R_BIAS_K] = "bias_k",
      [R_BIAS_V] = "bias_v"},
     NULL,
     NULL},
    {"hf",
     {[R_WQ] = "q_proj.weight",
      [R_WK] = "k_proj.weight",
      [R_WV] = "v_proj.weight",
      [R_BQ] = "q_proj.bias",
      [R_BK] = "k_proj.bias",
      [R_BV] = "v_proj.bias",
      [R_WO] = "out_proj.weight",
      [R_BO] = "out_proj.bias"},
     "o_proj.weight",
     "o_proj.bias"},
    {"bert",
     {[R_WQ] = "attention.self.query.weight",
      [R_WK] = "attention.self.key.weight",
      [R_WV] = "attention.self.value.weight",
      [R_BQ] = "attention.self.query.bias",
      [R_BK] = "attention.self.key.bias",
      [R_BV] = "attention.self.value.bias",
      [R_WO] = "attention.output.dense.weight",
      [R_BO] = "attention.output.dense.bias"},
     NULL,
     NULL},
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

/* Roles whose presence identifies a layout. */
static const int signature_roles[] = {R_WQKV, R_WQ, R_WK, R_WV};
/* Roles that are biases: all present or all absent in PyTorch layouts. */
static const int bias_roles[] = {R_BQKV, R_BQ, R_BK, R_BV, R_BO};

#define MAX_SUFFIX 40 /* longer than any name after the prefix above */

/* State of one load. */
typedef struct {
    const st_file *f;
    const char *label;           /* the file, for messages */
    char *prefix;                /* effective prefix ("" for none), owned */
    char *name;                  /* scratch: prefix + suffix, owned */
    size_t namecap;              /* bytes at name */
    const layout_def *def;       /* detected layout */
    const char *names[R_COUNT];  /* suffixes used, NULL for roles not in the layout */
    const st_tensor *t[R_COUNT]; /* tensors found, NULL if absent */
    size_t E, kdim, vdim;        /* geometry from the shapes */
    int H;                       /* heads */
    bool zero_attn;              /* add_zero_attn */
    const char *heads_from;      /* where H came from, for messages */
    char *err;
    size_t errlen;
} loader;

/* Format "label: <message>" with status st. */
__attribute__((format(printf, 3, 4))) static attn_status l_fail(loader *L, attn_status st,
                                                                const char *fmt, ...) {
    char msg[ATTN_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn_fail(L->err, L->errlen, st, "%s: %s", L->label, msg);
}

/* The tensor named prefix + suffix, or NULL; L->name holds the full name. */
static const st_tensor *l_find(loader *L, const char *suffix) {
    snprintf(L->name, L->namecap, "%s%s", L->prefix, suffix);
    return st_find(L->f, L->name);
}

/* Append up to five tensor names (those starting with prefix, when given)
 * to buf as "a, b, c (and N more)"; "none" when there are none. */
static void list_names(const st_file *f, const char *prefix, char *buf, size_t len) {
    size_t used = 0, shown = 0, matching = 0, plen = prefix ? strlen(prefix) : 0;
    buf[0] = '\0';
    for (size_t i = 0; i < st_count(f); i++) {
        const char *nm = st_get(f, i)->name;
        if (plen && strncmp(nm, prefix, plen) != 0) continue;
        matching++;
        if (shown < 5 && used < len) {
            int n = snprintf(buf + used, len - used, "%s\"%s\"", shown ? ", " : "", nm);
            if (n > 0) used += (size_t)n;
            shown++;
        }
    }
    if (!matching)
        snprintf(buf, len, "none");
    else if (matching > shown && used < len)
        snprintf(buf + used, len - used, " (and %zu more)", matching - shown);
}

static size_t count_prefixed(const st_file *f, const char *prefix) {
    size_t n = 0, plen = strlen(prefix);
    for (size_t i = 0; i < st_count(f); i++)
        if (strncmp(st_get(f, i)->name, prefix, plen) == 0) n++;
    return n;
}

/* ---- 1. find the layer ------------------------------------------------- */

/* The prefixes of the attention layers the file holds, wherever they are:
 * each tensor whose name ends in a layout's query weight (after a '.' or
 * at the start) marks one. Up to eight are written to buf as
 * "enc.0." (torch-packed), ...; the count of all of them is returned. */
static size_t list_layer_prefixes(const st_file *f, char *buf, size_t len) {
    size_t count = 0, used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < st_count(f); i++) {
        const char *nm = st_get(f, i)->name;
        size_t nl = strlen(nm);
        for (size_t k = 0; k < NLAYOUTS; k++) {
            const char *q =
                layouts[k].names[R_WQKV] ? layouts[k].names[R_WQKV] : layouts[k].names[R_WQ];
            size_t ql = strlen(q), pl = nl - ql;
            if (nl < ql || strcmp(nm + pl, q) != 0 || (pl && nm[pl - 1] != '.')) continue;
            /* torch-separate's "q_proj_weight" never ends hf's "q_proj.weight":
             * one layout per tensor at most */
            if (count++ < 8 && used < len) {
                int w = pl ? snprintf(buf + used, len - used, "%s\"%.*s\" (%s)",
                                      count > 1 ? ", " : "", (int)pl, nm, layouts[k].layout)
                           : snprintf(buf + used, len - used, "%sthe top level, no prefix (%s)",
                                      count > 1 ? ", " : "", layouts[k].layout);
                if (w > 0) used += (size_t)w;
            }
            break;
        }
    }
    if (count > 8 && used < len) snprintf(buf + used, len - used, ", ...");
    return count;
}

/* Set L->def from the signature tensors under L->prefix; *matched is 1 when
 * one layout matched, 0 when none did. Fails (ATTN_ERR_LAYER) when tensors
 * of two layouts are present. */
static attn_status detect_under(loader *L, int *matched) {
    const layout_def *found = NULL;
    const char *found_name = NULL;
    *matched = 0;
    for (size_t k = 0; k < NLAYOUTS; k++) {
        for (size_t r = 0; r < sizeof signature_roles / sizeof signature_roles[0]; r++) {
            const char *suffix = layouts[k].names[signature_roles[r]];
            if (!suffix || !l_find(L, suffix)) continue;
            if (found && found != &layouts[k]) {
                char a[256];
                snprintf(a, sizeof a, "%s%s", L->prefix, found_name);
                return l_fail(L, ATTN_ERR_LAYER,
                              "ambiguous layer: \"%s\" (%s layout) and \"%s\" (%s layout) are both "
                              "present",
                              a, found->layout, L->name, layouts[k].layout);
            }
            found = &layouts[k];
            found_name = suffix;
            break;
        }
    }
    L->def = found;
    *matched = found != NULL;
    return ATTN_OK;
}

/* Try the prefix as given, then with a '.' appended ("encoder.layer.0"
 * selects "encoder.layer.0.in_proj_weight"). */
static attn_status detect_layout(loader *L, const char *prefix) {
    size_t plen = prefix ? strlen(prefix) : 0;
    char names[400];
    int matched;
    attn_status st;

    if (!(L->prefix = malloc(plen + 2)) || !(L->name = malloc(plen + 2 + MAX_SUFFIX)))
        return l_fail(L, ATTN_ERR_NOMEM, "out of memory");
    L->namecap = plen + 2 + MAX_SUFFIX;
    if (plen) memcpy(L->prefix, prefix, plen);
    L->prefix[plen] = '\0';

    if ((st = detect_under(L, &matched))) return st;
    if (!matched && plen && prefix[plen - 1] != '.') {
        L->prefix[plen] = '.';
        L->prefix[plen + 1] = '\0';
        if ((st = detect_under(L, &matched))) return st;
        if (!matched) L->prefix[plen] = '\0';
    }
    if (matched) return ATTN_OK;

    if (st_count(L->f) == 0) return l_fail(L, ATTN_ERR_LAYER, "the file holds no tensors");
    char layers[600], where[300];
    size_t nlayers = list_layer_prefixes(L->f, layers, sizeof layers);
    bool none_under = plen && count_prefixed(L->f, L->prefix) == 0;
    if (none_under)
        snprintf(where, sizeof where, "no tensor name starts with the prefix \"%s\"", L->prefix);
    else
        snprintf(where, sizeof where, "no attention layer %s%s%s",
                 plen ? "under the prefix \"" : "at the top level", plen ? L->prefix : "",
                 plen ? "\"" : "");
    if (nlayers > 0)
        return l_fail(L, ATTN_ERR_LAYER,
                      "%s; the file holds %zu attention layer%s, choose one with a prefix (config "
                      "\"prefix\", or --model NAME=PATH:prefix=PREFIX): %s",
                      where, nlayers, nlayers == 1 ? "" : "s", layers);
    if (none_under) {
        list_names(L->f, NULL, names, sizeof names);
        return l_fail(L, ATTN_ERR_LAYER, "%s; the file has %zu tensors: %s", where, st_count(L->f),
                      names);
    }
    list_names(L->f, plen ? L->prefix : NULL, names, sizeof names);
    return l_fail(L, ATTN_ERR_LAYER,
                  "%s: expected in_proj_weight, q_proj_weight, q_proj.weight or "
                  "attention.self.query.weight%s; found %s",
                  where, plen ? " after the prefix" : "", names);
}

/* ---- 2. gather the tensors --------------------------------------------- */

static attn_status gather(loader *L) {
    const layout_def *def = L->def;
    char a[256];
    int present = 0, total = 0, first_present = -1, first_missing = -1;

    for (int r = 0; r < R_COUNT; r++) {
        L->names[r] = def->names[r];
        L->t[r] = def->names[r] ? l_find(L, def->names[r]) : NULL;
    }
    if (def->alt_wo) { /* HF: out_proj or o_proj, never both */
        const st_tensor *alt = l_find(L, def->alt_wo);
        if (alt && L->t[R_WO]) {
            snprintf(a, sizeof a, "%s%s", L->prefix, def->names[R_WO]);
            return l_fail(L, ATTN_ERR_LAYER, "ambiguous layer: both \"%s\" and \"%s\" are present",
                          a, alt->name);
        }
        if (alt) {
            L->names[R_WO] = def->alt_wo;
            L->names[R_BO] = def->alt_bo;
            L->t[R_WO] = alt;
            L->t[R_BO] = l_find(L, def->alt_bo);
        }
    }

    for (int r = 0; r < R_COUNT; r++) {
        if (L->t[r] || !L->names[r]) continue;
        if (r != R_WQKV && r != R_WQ && r != R_WK && r != R_WV && r != R_WO) continue;
        l_find(L, L->names[r]);
        if (r == R_WO && def->alt_wo) {
            snprintf(a, sizeof a, "%s%s", L->prefix, def->alt_wo);
            return l_fail(L, ATTN_ERR_LAYER, "missing tensor \"%s\" or \"%s\" (%s layout)", L->name,
                          a, def->layout);
        }
        return l_fail(L, ATTN_ERR_LAYER, "missing tensor \"%s\" (%s layout)", L->name, def->layout);
    }

    for (size_t i = 0; i < sizeof bias_roles / sizeof bias_roles[0]; i++) {
        int r = bias_roles[i];
        if (!L->names[r]) continue;
        total++;
        if (L->t[r]) {
            present++;
            if (first_present < 0) first_present = r;
        } else if (first_missing < 0) {
            first_missing = r;
        }
    }
    /* PyTorch layouts have all biases or none (bias=True/False). Hugging
     * Face and BERT layers may lack single ones (Whisper's k_proj has no
     * bias): a missing projection bias is zero there. */
    if (present && present != total && L->names[R_BQKV]) {
        snprintf(a, sizeof a, "%s%s", L->prefix, L->names[first_present]);
        l_find(L, L->names[first_missing]);
        return l_fail(L, ATTN_ERR_LAYER,
                      "biases must be all present or all absent: \"%s\" is present but \"%s\" is "
                      "missing",
                      a, L->name);
    }

    if (L->names[R_BIAS_K] && !L->t[R_BIAS_K] != !L->t[R_BIAS_V]) {
        int have = L->t[R_BIAS_K] ? R_BIAS_K : R_BIAS_V;
        snprintf(a, sizeof a, "%s%s", L->prefix, L->names[have]);
        l_find(L, L->names[have == R_BIAS_K ? R_BIAS_V : R_BIAS_K]);
        return l_fail(L, ATTN_ERR_LAYER,
                      "\"%s\" is present but \"%s\" is missing (add_bias_kv needs both)", a,
                      L->name);
    }
    return ATTN_OK;
}

/* ---- 3. shapes --------------------------------------------------------- */

static attn_status shape_fail(loader *L, const st_tensor *t, const char *expected) {
    char found[160];
    st_format_shape(t->shape, t->ndim, found, sizeof found);
    return l_fail(L, ATTN_ERR_LAYER, "tensor \"%s\": expected shape %s, found %s", t->name,
                  expected, found);
}

/* t must have exactly the dims given (ndim of them). sym is the shape in
 * the project's vocabulary, e.g. "[3E]". */
static attn_status expect_shape(loader *L, int role, const char *sym, int ndim, size_t d0,
                                size_t d1, size_t d2) {
    const st_tensor *t = L->t[role];
    size_t want[3] = {d0, d1, d2};
    char expected[160], num[80];
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (ok) return ATTN_OK;
    st_format_shape(want, ndim, num, sizeof num);
    snprintf(expected, sizeof expected, "%s = %s with E = %zu", sym, num, L->E);
    return shape_fail(L, t, expected);
}

/* [E, in] with E known and in > 0 free: the key and value weights. */
static attn_status expect_proj(loader *L, int role, const char *in_name, size_t *in) {
    const st_tensor *t = L->t[role];
    char expected[160];
    if (t->ndim == 2 && t->shape[0] == L->E && t->shape[1] > 0 && t->shape[1] <= INT_MAX) {
        *in = t->shape[1];
        return ATTN_OK;
    }
    snprintf(expected, sizeof expected, "[E, %s] = [%zu, %s] with 0 < %s <= %d", in_name, L->E,
             in_name, in_name, INT_MAX);
    return shape_fail(L, t, expected);
}

static attn_status check_shapes(loader *L) {
    /* 3E must fit an int: the forward pass indexes columns of wqkv_t with ints. */
    const size_t max_e = INT_MAX / 3;
    attn_status st;
    if (L->t[R_WQKV]) {
        const st_tensor *t = L->t[R_WQKV];
        if (t->ndim != 2 || t->shape[1] == 0 || t->shape[1] > max_e ||
            t->shape[0] != 3 * t->shape[1])
            return shape_fail(L, t, "[3E, E] with E > 0");
        L->E = L->kdim = L->vdim = t->shape[1];
    } else {
        const st_tensor *t = L->t[R_WQ];
        if (t->ndim != 2 || t->shape[0] == 0 || t->shape[0] > max_e || t->shape[1] != t->shape[0])
            return shape_fail(L, t, "[E, E] with E > 0");
        L->E = t->shape[0];
        if ((st = expect_proj(L, R_WK, "kdim", &L->kdim))) return st;
        if ((st = expect_proj(L, R_WV, "vdim", &L->vdim))) return st;
    }
    if ((st = expect_shape(L, R_WO, "[E, E]", 2, L->E, L->E, 0))) return st;
    if (L->t[R_BQKV] && (st = expect_shape(L, R_BQKV, "[3E]", 1, 3 * L->E, 0, 0))) return st;
    if (L->t[R_BQ] && (st = expect_shape(L, R_BQ, "[E]", 1, L->E, 0, 0))) return st;
    if (L->t[R_BK] && (st = expect_shape(L, R_BK, "[E]", 1, L->E, 0, 0))) return st;
    if (L->t[R_BV] && (st = expect_shape(L, R_BV, "[E]", 1, L->E, 0, 0))) return st;
    if (L->t[R_BO] && (st = expect_shape(L, R_BO, "[E]", 1, L->E, 0, 0))) return st;
    if (L->t[R_BIAS_K] && (st = expect_shape(L, R_BIAS_K, "[1, 1, E]", 3, 1, 1, L->E))) return st;
    if (L->t[R_BIAS_V] && (st = expect_shape(L, R_BIAS_V, "[1, 1, E]", 3, 1, 1, L->E))) return st;

    for (int r = 0; r < R_COUNT; r++) {
        const st_tensor *t = L->t[r];
        if (t && t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 &&
            t->dtype != ST_F64)
            return l_fail(L, ATTN_ERR_LAYER,
                          "tensor \"%s\": expected dtype F32, F16, BF16 or F64, found %s", t->name,
                          st_dtype_name(t->dtype));
    }
    return ATTN_OK;
}

/* ---- 4. heads and add_zero_attn ---------------------------------------- */

/* A positive decimal integer that fits an int, nothing else around it. */
static int parse_positive_int(const char *s, int *out) {
    long long v = 0;
    if (!*s) return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return 0;
        v = v * 10 + (*s - '0');
        if (v > INT_MAX) return 0;
    }
    if (v == 0) return 0;
    *out = (int)v;
    return 1;
}

/* __metadata__[key] as "true"/"false" into *v (1/0); *v untouched when
 * the key is absent. */
static attn_status metadata_bool(loader *L, const char *key, int *v) {
    const char *s = st_metadata(L->f, key);
    if (!s) return ATTN_OK;
    if (strcmp(s, "true") == 0)
        *v = 1;
    else if (strcmp(s, "false") == 0)
        *v = 0;
    else
        return l_fail(L, ATTN_ERR_LAYER,
                      "__metadata__[\"%s\"]: expected \"true\" or \"false\", found \"%s\"", key, s);
    return ATTN_OK;
}

static attn_status resolve_options(loader *L, const attn_weights_opts *opts) {
    int nh = opts ? opts->num_heads : 0, za = opts ? opts->add_zero_attn : -1;
    if (nh < 0)
        return l_fail(L, ATTN_ERR_INVALID,
                      "num_heads option must be > 0 (or 0: from the file), got %d", nh);
    if (za < -1 || za > 1)
        return l_fail(L, ATTN_ERR_INVALID,
                      "add_zero_attn option must be 0, 1 or -1 (from the file), got %d", za);
    /* The file's word and the options' word must agree where both speak:
     * the wrong head count or zero-attention flag gives every number wrong
     * with no other sign. */
    const char *s = st_metadata(L->f, "num_heads");
    int file_h = 0;
    if (s && !parse_positive_int(s, &file_h))
        return l_fail(L, ATTN_ERR_LAYER,
                      "__metadata__[\"num_heads\"]: expected a positive decimal integer, found "
                      "\"%s\"",
                      s);
    if (nh > 0 && file_h > 0 && nh != file_h)
        return l_fail(L, ATTN_ERR_LAYER,
                      "num_heads: %d given (config num_heads or --model NAME=PATH:HEADS) but the "
                      "file's __metadata__[\"num_heads\"] is %d; drop the option or export the "
                      "file again",
                      nh, file_h);
    if (nh > 0) {
        L->H = nh;
        L->heads_from = "the options";
    } else if (file_h > 0) {
        L->H = file_h;
        L->heads_from = "__metadata__";
    } else {
        return l_fail(L, ATTN_ERR_LAYER,
                      "num_heads not given: set it in __metadata__, the config (num_heads) or "
                      "--model NAME=PATH:HEADS");
    }
    if (L->E % (size_t)L->H != 0)
        return l_fail(L, ATTN_ERR_LAYER,
                      "embed dim E = %zu is not divisible by num_heads H = %d (from %s)", L->E,
                      L->H, L->heads_from);
    int file_za = -1;
    attn_status st = metadata_bool(L, "add_zero_attn", &file_za);
    if (st) return st;
    if (za >= 0 && file_za >= 0 && za != file_za)
        return l_fail(L, ATTN_ERR_LAYER,
                      "add_zero_attn: %s given (config add_zero_attn or --model "
                      "...:add_zero_attn=) but the file's __metadata__[\"add_zero_attn\"] is "
                      "\"%s\"; drop the option or export the file again",
                      za ? "true" : "false", file_za ? "true" : "false");
    L->zero_attn = za >= 0 ? za == 1 : file_za == 1;
    return ATTN_OK;
}

/* The layer options the exporter also writes (tools/export_attention.py),
 * each checked against what the tensors say when the file states it: a file
 * that claims a layout or geometry it does not hold was written by a tool
 * that misunderstood the layer, and serving it would mean guessing which
 * of the two is right. Keys not listed here are other tools' business. */
static attn_status check_metadata(loader *L) {
    bool has_bias = L->t[R_BO] || L->t[R_BQKV] || L->t[R_BQ] || L->t[R_BK] || L->t[R_BV];
    const struct {
        const char *key;
        bool value;
    } flags[] = {{"bias", has_bias}, {"add_bias_kv", L->t[R_BIAS_K] != NULL}};
    const struct {
        const char *key;
        size_t value;
    } dims[] = {{"embed_dim", L->E}, {"kdim", L->kdim}, {"vdim", L->vdim}};
    attn_status st;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int v = -1;
        if ((st = metadata_bool(L, flags[i].key, &v))) return st;
        if (v >= 0 && v != flags[i].value)
            return l_fail(L, ATTN_ERR_LAYER,
                          "__metadata__[\"%s\"] is \"%s\" but the tensors %s; the file is "
                          "inconsistent: export it again",
                          flags[i].key, v ? "true" : "false",
                          flags[i].value ? "include them" : "do not include them");
    }
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        const char *s = st_metadata(L->f, dims[i].key);
        int v = 0;
        if (!s) continue;
        if (!parse_positive_int(s, &v))
            return l_fail(L, ATTN_ERR_LAYER,
                          "__metadata__[\"%s\"]: expected a positive decimal integer, found "
                          "\"%s\"",
                          dims[i].key, s);
        if ((size_t)v != dims[i].value)
            return l_fail(L, ATTN_ERR_LAYER,
                          "__metadata__[\"%s\"] is %d but the tensors' shapes give %zu; the file "
                          "is inconsistent: export it again",
                          dims[i].key, v, dims[i].value);
    }
    /* layout: the exporter's short names, or the names attn_weights reports */
    const char *lay = st_metadata(L->f, "layout");
    if (lay) {
        const char *want = !strcmp(lay, "packed")     ? "torch-packed"
                           : !strcmp(lay, "separate") ? "torch-separate"
                                                      : lay;
        if (strcmp(want, L->def->layout) != 0)
            return l_fail(L, ATTN_ERR_LAYER,
                          "__metadata__[\"layout\"] is \"%s\" but the tensor names are the %s "
                          "layout; the file is inconsistent: export it again",
                          lay, L->def->layout);
    }
    return ATTN_OK;
}

/* ---- 5. convert -------------------------------------------------------- */

/* Convert a packed [3E, ...] tensor into its three equal parts, each
 * straight into its destination (no packed copy: at E = 1024 that was 12 MiB
 * more at every load). */
static attn_status convert_split(loader *L, const st_tensor *t, float *a, float *b, float *c) {
    size_t part = t->numel / 3;
    float *dst[3] = {a, b, c};
    for (size_t k = 0; k < 3; k++) {
        attn_status st = st_to_f32_range(t, k * part, part, dst[k], L->label, L->err, L->errlen);
        if (st) return st;
    }
    return ATTN_OK;
}

static attn_status convert_all(loader *L, attn_weights *w) {
    struct {
        int role;
        float *dst;
    } plain[] = {{R_WQ, w->wq},         {R_WK, w->wk},        {R_WV, w->wv}, {R_BQ, w->bq},
                 {R_BK, w->bk},         {R_BV, w->bv},        {R_WO, w->wo}, {R_BO, w->bo},
                 {R_BIAS_K, w->bias_k}, {R_BIAS_V, w->bias_v}};
    attn_status st;
    if (L->t[R_WQKV] && (st = convert_split(L, L->t[R_WQKV], w->wq, w->wk, w->wv))) return st;
    if (L->t[R_BQKV] && (st = convert_split(L, L->t[R_BQKV], w->bq, w->bk, w->bv))) return st;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const st_tensor *t = L->t[plain[i].role];
        if (t && (st = st_to_f32(t, plain[i].dst, L->label, L->err, L->errlen))) return st;
    }
    return ATTN_OK;
}

/* "F32" when every tensor has that dtype, "mixed" otherwise. */
static const char *common_dtype(const loader *L) {
    const char *name = NULL;
    for (int r = 0; r < R_COUNT; r++) {
        if (!L->t[r]) continue;
        if (name && strcmp(name, st_dtype_name(L->t[r]->dtype)) != 0) return "mixed";
        name = st_dtype_name(L->t[r]->dtype);
    }
    return name ? name : "F32";
}

/* All checks, then allocation and conversion. On failure nothing of the
 * weight set survives; the caller still owns f. */
static attn_status load_file(const st_file *f, const attn_weights_opts *opts, attn_weights **out,
                             char *err, size_t errlen) {
    loader L;
    attn_weights *w = NULL;
    char aerr[ATTN_ERRLEN];
    attn_status st;

    memset(&L, 0, sizeof L);
    L.f = f;
    L.label = st_label(f);
    L.err = err;
    L.errlen = errlen;
    if ((st = detect_layout(&L, opts ? opts->prefix : NULL))) goto err;
    if ((st = gather(&L))) goto err;
    if ((st = check_shapes(&L))) goto err;
    if ((st = resolve_options(&L, opts))) goto err;
    if ((st = check_metadata(&L))) goto err;
    if ((st = attn_weights_alloc((int)L.E, L.H, (int)L.kdim, (int)L.vdim,
                                 L.t[R_BO] || L.t[R_BQKV] || L.t[R_BQ] || L.t[R_BK] || L.t[R_BV],
                                 L.t[R_BIAS_K] != NULL, L.zero_attn, &w, aerr, sizeof aerr))) {
        st = l_fail(&L, st, "%s", aerr);
        goto err;
    }
    if ((st = convert_all(&L, w))) goto err;
    /* attn_weights_finish is the caller's, once the file's bytes are freed */
    snprintf(w->layout, sizeof w->layout, "%s", L.def->layout);
    snprintf(w->dtype, sizeof w->dtype, "%s", common_dtype(&L));
    snprintf(w->source, sizeof w->source, "%s", L.label);
    free(L.prefix);
    free(L.name);
    *out = w;
    return ATTN_OK;
err:
    attn_weights_destroy(w);
    free(L.prefix);
    free(L.name);
    return st;
}

/* Read the file, then load_file(); the st_file is closed either way. */
attn_status attn_weights_load(const char *path, const attn_weights_opts *opts, attn_weights **out,
                              char *err, size_t errlen) {
    st_file *f;
    attn_status st;
    *out = NULL;
    if ((st = st_open(path, &f, err, errlen))) return st;
    st = load_file(f, opts, out, err, errlen);
    st_close(f);
    /* the transposed copies only now: the file's bytes and both copies of
     * the weights are never in memory at once (a reload beside the serving
     * version then holds one more copy of the layer, no more) */
    if (!st) attn_weights_finish(*out);
    return st;
}

/* st_parse() copies buf, so the caller keeps ownership of it. */
attn_status attn_weights_load_mem(const void *buf, size_t len, const char *label,
                                  const attn_weights_opts *opts, attn_weights **out, char *err,
                                  size_t errlen) {
    st_file *f;
    attn_status st;
    *out = NULL;
    if ((st = st_parse(buf, len, label, &f, err, errlen))) return st;
    st = load_file(f, opts, out, err, errlen);
    st_close(f);
    if (!st) attn_weights_finish(*out);
    return st;
}

/* ---- allocation -------------------------------------------------------- */

/* n floats aligned to a cache line (BLAS likes it), zeroed when zero is
 * set, or NULL; w->bytes counts what it holds. Unzeroed arrays of this size
 * come from fresh mappings whose pages cost no memory until written (the
 * transposed copies, written by attn_weights_finish after the file's bytes
 * are freed). From a megabyte on, on huge pages (core/hugemem.h): every
 * pass reads the weights, and on the virtual machines this runs on a 4 KiB
 * page touched after the process was idle costs microseconds again
 * (measured: a [512, 768] pass after a second of idle took 23-25 ms with
 * 4 KiB-paged weights, 14 ms on huge pages, 10-12 ms back to back). */
static float *alloc_floats(attn_weights *w, size_t a, size_t b, bool zero) {
    size_t n, bytes;
    float *p;
    if (!attn_mul_size(a, b, &n) || !attn_mul_size(n, sizeof(float), &bytes) ||
        !attn_add_size(bytes, 63, &bytes))
        return NULL;
    bytes &= ~(size_t)63; /* aligned_alloc wants a multiple of the alignment */
    if (!bytes) bytes = 64;
    const bool huge = bytes >= MEM_HUGE_MIN;
    if (!(p = huge ? mem_alloc(bytes) : aligned_alloc(64, bytes))) return NULL;
    if (zero) memset(p, 0, bytes);
    w->bytes += huge ? mem_alloc_size(bytes) : bytes;
    return p;
}

/* Room for a [K, N] matrix packed for attn_gemm (its padding is written by
 * attn_gemm_pack_linear), or NULL. */
static float *alloc_packed(attn_weights *w, int K, int N) {
    size_t f = attn_gemm_packed_floats(K, N);
    return f ? alloc_floats(w, f, 1, false) : NULL;
}

/* Everything zeroed; wqkv_t/bqkv only when kdim == vdim == E. parameters
 * counts what torch's sum(p.numel()) would. */
attn_status attn_weights_alloc(int E, int H, int kdim, int vdim, bool bias, bool add_bias_kv,
                               bool add_zero_attn, attn_weights **out, char *err, size_t errlen) {
    attn_weights *w = NULL;
    size_t e, params, x;
    *out = NULL;
    if (E <= 0 || H <= 0 || kdim <= 0 || vdim <= 0)
        return attn_fail(err, errlen, ATTN_ERR_LAYER,
                         "impossible geometry: E = %d, H = %d, kdim = %d, vdim = %d (all must be "
                         "> 0)",
                         E, H, kdim, vdim);
    if (E > INT_MAX / 3)
        return attn_fail(err, errlen, ATTN_ERR_LAYER, "embed dim E = %d is too large (max %d)", E,
                         INT_MAX / 3);
    if (E % H != 0)
        return attn_fail(err, errlen, ATTN_ERR_LAYER,
                         "embed dim E = %d is not divisible by num_heads H = %d", E, H);
    e = (size_t)E;
    /* parameters as torch counts them: E*E + E*kdim + E*vdim + E*E weights,
     * 4E biases, 2E bias_k/bias_v */
    if (!attn_mul_size(e, (size_t)kdim + (size_t)vdim, &x) || !attn_mul_size(e, 2 * e, &params) ||
        !attn_add_size(params, x, &params) ||
        !attn_add_size(params, (bias ? 4 * e : 0) + (add_bias_kv ? 2 * e : 0), &params))
        return attn_fail(err, errlen, ATTN_ERR_LIMIT,
                         "geometry E = %d, kdim = %d, vdim = %d too large", E, kdim, vdim);
    if (!(w = calloc(1, sizeof *w))) goto nomem;
    w->E = E;
    w->H = H;
    w->d = E / H;
    w->kdim = kdim;
    w->vdim = vdim;
    w->bias = bias;
    w->add_bias_kv = add_bias_kv;
    w->add_zero_attn = add_zero_attn;
    w->parameters = params;
    snprintf(w->dtype, sizeof w->dtype, "F32");
    if (!(w->wq = alloc_floats(w, e, e, true)) ||
        !(w->wk = alloc_floats(w, e, (size_t)kdim, true)) ||
        !(w->wv = alloc_floats(w, e, (size_t)vdim, true)) || !(w->wo = alloc_floats(w, e, e, true)))
        goto nomem;
    /* the copies the projections multiply by: packed for the engine's own
     * kernel when the CPU has one, else transposed for OpenBLAS */
    const int packed = attn_gemm_nr() > 0;
    if (packed ? !(w->wo_p = alloc_packed(w, E, E)) : !(w->wo_t = alloc_floats(w, e, e, false)))
        goto nomem;
    if (bias && (!(w->bq = alloc_floats(w, e, 1, true)) || !(w->bk = alloc_floats(w, e, 1, true)) ||
                 !(w->bv = alloc_floats(w, e, 1, true)) || !(w->bo = alloc_floats(w, e, 1, true))))
        goto nomem;
    if (add_bias_kv &&
        (!(w->bias_k = alloc_floats(w, e, 1, true)) || !(w->bias_v = alloc_floats(w, e, 1, true))))
        goto nomem;
    if (kdim == E && vdim == E) {
        if (packed ? !(w->wqkv_p = alloc_packed(w, E, 3 * E))
                   : !(w->wqkv_t = alloc_floats(w, e, 3 * e, false)))
            goto nomem;
        if (bias && !(w->bqkv = alloc_floats(w, 3 * e, 1, true))) goto nomem;
    }
    *out = w;
    return ATTN_OK;
nomem:
    attn_weights_destroy(w);
    return attn_fail(err, errlen, ATTN_ERR_NOMEM,
                     "out of memory for a weight set with E = %d, kdim = %d, vdim = %d", E, kdim,
                     vdim);
}

/* dst[c * ldd + r] = src[r * cols + c] for r < rows, c < cols, in tiles so
 * that both sides stay in cache. */
static void transpose(float *dst, size_t ldd, const float *src, size_t rows, size_t cols) {
    const size_t T = 32;
    for (size_t r0 = 0; r0 < rows; r0 += T)
        for (size_t c0 = 0; c0 < cols; c0 += T)
            for (size_t r = r0; r < rows && r < r0 + T; r++)
                for (size_t c = c0; c < cols && c < c0 + T; c++)
                    dst[c * ldd + r] = src[r * cols + c];
}

/* The forward pass multiplies by transposed weights: OpenBLAS packs a plain
 * right-hand matrix faster than a transposed one (measured for the layer's
 * shapes, docs/DESIGN.md). Columns 0..E-1 of wqkv_t are Wq transposed,
 * E..2E-1 Wk, 2E..3E-1 Wv; bqkv is bq;bk;bv. */
void attn_weights_finish(attn_weights *w) {
    size_t e;
    if (!w) return;
    e = (size_t)w->E;
    if (w->wqkv_t) {
        transpose(w->wqkv_t, 3 * e, w->wq, e, e);
        transpose(w->wqkv_t + e, 3 * e, w->wk, e, e);
        transpose(w->wqkv_t + 2 * e, 3 * e, w->wv, e, e);
    }
    if (w->wqkv_p) {
        attn_gemm_pack_linear(w->wqkv_p, w->E, 3 * w->E, 0, w->wq, w->E);
        attn_gemm_pack_linear(w->wqkv_p, w->E, 3 * w->E, w->E, w->wk, w->E);
        attn_gemm_pack_linear(w->wqkv_p, w->E, 3 * w->E, 2 * w->E, w->wv, w->E);
    }
    if (w->wo_t) transpose(w->wo_t, e, w->wo, e, e);
    if (w->wo_p) attn_gemm_pack_linear(w->wo_p, w->E, w->E, 0, w->wo, w->E);
    if (w->bqkv && w->bq) {
        memcpy(w->bqkv, w->bq, e * sizeof(float));
        memcpy(w->bqkv + e, w->bk, e * sizeof(float));
        memcpy(w->bqkv + 2 * e, w->bv, e * sizeof(float));
    }
}

/* Frees every array and w itself; NULL is fine. */
void attn_weights_destroy(attn_weights *w) {
    if (!w) return;
    free(w->wq);
    free(w->wk);
    free(w->wv);
    free(w->wqkv_t);
    free(w->wqkv_p);
    free(w->bq);
    free(w->bk);
    free(w->bv);
    free(w->bqkv);
    free(w->wo);
    free(w->wo_t);
    free(w->wo_p);
    free(w->bo);
    free(w->bias_k);
    free(w->bias_v);
    free(w);
}
