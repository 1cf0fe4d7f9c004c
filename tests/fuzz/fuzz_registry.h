/* fuzz_registry.h - the weight sets the request fuzz targets decode against
 * (included by fuzz_attend.c and fuzz_v2.c, each defining DIE first):
 *   "demo"  config/weights/demo.safetensors (E=64, H=4, kdim = vdim = E),
 *           the default model; loaded once from ATTN_FUZZ_WEIGHTS, or from
 *           the path relative to the working directory (the repo root under
 *           `make fuzz`), or relative to the binary in build/<dir>/fuzz/;
 *   "cross" built in memory: E=8, H=2, kdim=4, vdim=6, biases, bias_k/v and
 *           add_zero_attn, so cross-attention with kdim != vdim and the
 *           appended key positions are reachable.
 * and a 1-thread pool. fuzz_registry_init fills g_reg, g_models and g_pool. */
#ifndef ATTN_FUZZ_REGISTRY_H
#define ATTN_FUZZ_REGISTRY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models.h"
#include "pool.h"
#include "weights.h"

void openblas_set_num_threads(int num_threads); /* OpenBLAS: parallelism is the pool's */

static registry *g_reg;
static model_entry *g_models[2]; /* a reference each, held for the whole run */
static attn_pool *g_pool;


static attn_weights *load_demo(const char *argv0) {
    char err[ATTN_ERRLEN], path[4096];
    attn_weights *w = NULL;
    const char *env = getenv("ATTN_FUZZ_WEIGHTS");
    const char *rel = "config/weights/demo.safetensors";
    if (env && *env) {
        if (attn_weights_load(env, NULL, &w, err, sizeof err)) DIE("ATTN_FUZZ_WEIGHTS: %s", err);
        return w;
    }
    if (access(rel, R_OK) == 0) {
        if (attn_weights_load(rel, NULL, &w, err, sizeof err)) DIE("%s", err);
        return w;
    }
    /* build/<dir>/fuzz/fuzz_attend -> <repo>/config/weights/demo.safetensors */
    if (argv0 && strlen(argv0) < sizeof path - 64) {
        snprintf(path, sizeof path, "%s", argv0);
        char *slash = strrchr(path, '/');
        if (slash) {
            snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "../../../%s", rel);
            if (attn_weights_load(path, NULL, &w, err, sizeof err) == ATTN_OK) return w;
        }
    }
    DIE("cannot find %s: run from the repository root or set ATTN_FUZZ_WEIGHTS", rel);
    return NULL;
}

/* Deterministic small weights in [-0.5, 0.5). */
static void fill(float *p, size_t n, uint32_t *seed) {
    if (!p) return;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)(*seed >> 8) / (float)(1u << 24) - 0.5f;
    }
}

static attn_weights *make_cross(void) {
    char err[ATTN_ERRLEN];
    attn_weights *w;
    const int E = 8, H = 2, kdim = 4, vdim = 6;
    if (attn_weights_alloc(E, H, kdim, vdim, true, true, true, &w, err, sizeof err))
        DIE("attn_weights_alloc: %s", err);
    uint32_t seed = 12345;
    size_t e = (size_t)E;
    fill(w->wq, e * e, &seed);
    fill(w->wk, e * (size_t)kdim, &seed);
    fill(w->wv, e * (size_t)vdim, &seed);
    fill(w->wo, e * e, &seed);
    fill(w->bq, e, &seed);
    fill(w->bk, e, &seed);
    fill(w->bv, e, &seed);
    fill(w->bo, e, &seed);
    fill(w->bias_k, e, &seed);
    fill(w->bias_v, e, &seed);
    attn_weights_finish(w);
    snprintf(w->layout, sizeof w->layout, "torch-separate");
    snprintf(w->source, sizeof w->source, "<fuzz>");
    return w;
}

static void fuzz_registry_init(char ***argv) {
    char err[ATTN_ERRLEN];
    openblas_set_num_threads(1);
    if (!(g_reg = registry_create())) DIE("registry_create: out of memory");
    model_entry *demo = model_from_weights("demo", load_demo(argv && *argv ? (*argv)[0] : NULL));
    model_entry *cross = model_from_weights("cross", make_cross());
    if (!demo || !cross) DIE("model_from_weights: out of memory");
    registry_publish(g_reg, demo);
    registry_publish(g_reg, cross);
    registry_set_default(g_reg, "demo");
    g_models[0] = registry_acquire(g_reg, "demo");
    g_models[1] = registry_acquire(g_reg, "cross");
    if (attn_pool_create(1, &g_pool, err, sizeof err)) DIE("attn_pool_create: %s", err);
}

#endif
