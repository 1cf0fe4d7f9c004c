/* weights.h - one multi-head attention layer's weights, loaded from safetensors.
 *
 * Layouts recognised (names after an optional prefix such as
 * "encoder.layer.0."):
 *   PyTorch nn.MultiheadAttention: in_proj_weight [3E,E] or q_proj_weight [E,E],
 *     k_proj_weight [E,kdim], v_proj_weight [E,vdim]; in_proj_bias [3E];
 *     out_proj.weight [E,E], out_proj.bias [E]; bias_k, bias_v [1,1,E].
 *   Hugging Face: q_proj/k_proj/v_proj + out_proj or o_proj, each .weight and
 *     optional .bias.
 *   BERT: attention.self.{query,key,value} + attention.output.dense (.weight,
 *     .bias).
 * Every tensor is converted to float32 once, checked finite, and the result is
 * immutable: share one attn_weights read-only between any number of threads.
 * __metadata__ may state num_heads, add_zero_attn, add_bias_kv, bias,
 * embed_dim, kdim, vdim and layout; each one stated is checked against the
 * options and the tensors, and a disagreement is an error naming both.
 *
 *     attn_weights_opts o = { .num_heads = 0, .add_zero_attn = -1, .prefix = NULL };
 *     attn_weights *w;
 *     if (attn_weights_load("demo.safetensors", &o, &w, err, sizeof err)) ...
 *     ... attn_forward(w, ...) ...
 *     attn_weights_destroy(w);
 *
 * Shapes use the project's vocabulary: E embed dim, H heads, d = E/H head dim,
 * kdim/vdim key/value input widths. Matrices are row-major [out, in], so a
 * projection is y = x W^T + b exactly as torch.nn.Linear.
 */
#ifndef ATTN_WEIGHTS_H
#define ATTN_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

typedef struct attn_weights {
    int E;               /* embed dim (query width and output width) */
    int H;               /* number of heads */
    int d;               /* head dim, E / H */
    int kdim;            /* key input width */
    int vdim;            /* value input width */
    bool bias;           /* projections have biases (bq, bk, bv, bo non-NULL) */
    bool add_bias_kv;    /* bias_k, bias_v appended as one extra key position */
    bool add_zero_attn;  /* a zero key/value appended after bias_kv */
    float *wq;           /* [E, E] */
    float *wk;           /* [E, kdim] */
    float *wv;           /* [E, vdim] */
    float *wqkv_t;       /* [E, 3E] (Wq;Wk;Wv) transposed when kdim == vdim == E and
                            the CPU has no attn_gemm kernel, else NULL: column c is
                            row c of the stacked [3E, E] (lets self-attention
                            project with one GEMM, x times it) */
    float *wqkv_p;       /* the same [E, 3E] packed for attn_gemm (core/gemm.h) when
                            the CPU has its kernel, else NULL; one of the two is set
                            when kdim == vdim == E */
    float *bq, *bk, *bv; /* [E] each, NULL without bias */
    float *bqkv;         /* [3E] packed biases or NULL */
    float *wo;           /* [E, E] out_proj.weight */
    float *wo_t;         /* [E, E] wo transposed, without an attn_gemm kernel */
    float *wo_p;         /* [E, E] wo transposed and packed for attn_gemm, with one */
    float *bo;           /* [E] out_proj.bias or NULL */
    float *bias_k;       /* [E] or NULL */
    float *bias_v;       /* [E] or NULL */
    char layout[16];     /* "torch-packed", "torch-separate", "hf", "bert" */
    char dtype[8];       /* dtype of the file's tensors: "F32", "F16", ... */
    char source[256];    /* path it was loaded from */
    size_t parameters;   /* number of scalar parameters */
    size_t bytes;        /* memory its arrays hold, in bytes (huge pages rounded up) */
} attn_weights;

typedef struct attn_weights_opts {
    int num_heads;      /* > 0: the heads, for a file whose __metadata__ has no num_heads (an
                           error when it has another); 0 = from the file */
    int add_zero_attn;  /* 0/1: likewise for __metadata__["add_zero_attn"]; -1 = from the file
                           (default false) */
    const char *prefix; /* tensor-name prefix selecting one layer; NULL or "" = none */
} attn_weights_opts;

/* Load and fully validate the layer stored at path. opts may be NULL (heads
 * and add_zero_attn from metadata, no prefix). On success *out is a new
 * weight set owned by the caller (attn_weights_destroy). Fails with
 * ATTN_ERR_IO, ATTN_ERR_FORMAT (the file) or ATTN_ERR_LAYER (the tensors),
 * the message naming the file, the tensor or metadata key, what was expected
 * and what was found. Thread-safe (no shared state). */
attn_status attn_weights_load(const char *path, const attn_weights_opts *opts, attn_weights **out,
                              char *err, size_t errlen);

/* The same from bytes in memory (label names them in messages). */
attn_status attn_weights_load_mem(const void *buf, size_t len, const char *label,
                                  const attn_weights_opts *opts, attn_weights **out, char *err,
                                  size_t errlen);

/* A zero-filled weight set with every array allocated for the given
 * geometry, for tests and tools that fill the numbers in themselves; call
 * attn_weights_finish() after filling to build the packed copies (wqkv_t or
 * wqkv_p, wo_t or wo_p, bqkv: undefined until then). Fails
 * with ATTN_ERR_LAYER on an impossible geometry (E % H != 0, ...). */
attn_status attn_weights_alloc(int E, int H, int kdim, int vdim, bool bias, bool add_bias_kv,
                               bool add_zero_attn, attn_weights **out, char *err, size_t errlen);
void attn_weights_finish(attn_weights *w);

void attn_weights_destroy(attn_weights *w); /* accepts NULL */

#endif
