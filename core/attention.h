/* attention.h - the multi-head attention forward pass, exactly
 * torch.nn.MultiheadAttention in eval mode (batch_first layout, no dropout).
 *
 * Shapes, in the project's vocabulary:
 *   B batch entries, n query tokens, m key/value tokens as given,
 *   M = m + add_bias_kv + add_zero_attn key positions actually attended,
 *   E embed dim, H heads, d = E/H head dim, kdim/vdim key/value widths.
 *
 *   query [B,n,E], key [B,m,kdim], value [B,m,vdim]  (self-attention: the
 *   same pointer for all three, with kdim == vdim == E)
 *   out [B,n,E]; weights [B,H,n,M], or [B,n,M] averaged over heads.
 *
 * The steps, for batch entry b and head h:
 *   Q = query W_q^T + b_q, K = key W_k^T + b_k, V = value W_v^T + b_v
 *   (bias_k/bias_v then a zero row appended to K and V when configured),
 *   S_ij = Q_i . K_j / sqrt(d) + mask_ij,  W_ij = softmax_j(S_ij),
 *   Y_i  = sum_j W_ij V_j,  heads concatenated, out = Y W_o^T + b_o.
 * Masks are additive: a boolean true is -inf, a float is added. The causal
 * flag masks key j > query i (top-left aligned) among the m given keys; the
 * appended bias_kv / zero positions are never masked, as in PyTorch. A query
 * row whose every key is masked gets zero weights and a zero attention
 * result, so its output is b_o (PyTorch yields NaN there).
 *
 * Two paths: with dense weights requested, each (b, query block)
 * materialises the scores of one head at a time; otherwise a tiled online
 * softmax keeps the working memory O(block x d) per worker whatever m is.
 *
 * Weights come in one of three forms (or none), each per head or averaged
 * over heads (average_heads):
 *   need_weights  every row, dense: [B,H,n,M] ([B,n,M] averaged);
 *   topk = k      per row the k largest weights, sorted by weight
 *                 (descending, equal weights by lower key index), with
 *                 their key indices in [0, M): values and indices
 *                 [B,H,n,k] ([B,n,k]). An appended bias_kv / zero key has
 *                 an index too: m, then m+1. A row whose keys are all
 *                 masked gives k zero weights at indices 0..k-1 (the ties
 *                 rule), as does any row for its masked keys;
 *   rows          dense rows only for the query rows listed, in the list's
 *                 order: [B,H,r,M] ([B,r,M]).
 * The last two come from the online-softmax path (O(block) memory besides
 * the answer): see core/topk.h for how they stay exact.
 *
 *     attn_input in = { .B = 1, .n = 5, .m = 5, .query = x, .key = x, .value = x,
 *                       .need_weights = true };
 *     attn_forward(w, &in, out, weights, pool, err, sizeof err);
 *
 *     in.need_weights = false, in.topk = 2;      // values [H,5,2], indices [H,5,2]
 *     attn_result res = { .out = out, .weights = values, .indices = idx };
 *     attn_run(w, &in, &res, pool, err, sizeof err);
 */
#ifndef ATTN_ATTENTION_H
#define ATTN_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "status.h"
#include "weights.h"

typedef enum {
    ATTN_MASK_NONE,  /* no mask */
    ATTN_MASK_BOOL,  /* uint8_t values, nonzero = masked (-inf) */
    ATTN_MASK_FLOAT, /* float values added to the scores (may be -inf) */
} attn_mask_kind;

typedef struct attn_input {
    int B, n, m;        /* batch entries, query tokens, key tokens (>= 1 each) */
    const float *query; /* [B,n,E] */
    const float *key;   /* [B,m,kdim] */
    const float *value; /* [B,m,vdim] */

    attn_mask_kind kpm_kind; /* key_padding_mask */
    const void *kpm;         /* [m] (kpm_batched false) or [B,m] */
    bool kpm_batched;

    attn_mask_kind mask_kind; /* attn_mask */
    const void *attn_mask;    /* [n,m] (mask_dims 2), [H,n,m] (3) or [B,H,n,m] (4) */
    int mask_dims;

    bool causal;        /* mask key j > query i */
    bool need_weights;  /* dense weights, every row */
    bool average_heads; /* weights (whichever form) averaged over heads */
    int topk;           /* > 0: the topk largest weights of each row instead (1..M) */
    const int *rows;    /* non-NULL: dense weights of these query rows only (unique, in [0,n)) */
    int nrows;          /* entries of rows (>= 1 when rows is given) */
} attn_input;

/* The phases of a pass, in order: the projections Q, K, V; packing each
 * head's K and V for the kernel; the listed weight rows; attention (scores,
 * softmax, weights, P V); the second pass of top-k of the head average; the
 * out-projection. */
typedef enum {
    ATTN_PH_PROJ,
    ATTN_PH_PACK,
    ATTN_PH_ROWS,
    ATTN_PH_ATTN,
    ATTN_PH_AVG,
    ATTN_PH_OUT,
    ATTN_PH_COUNT
} attn_phase_id;

/* A pass's time in each phase (attn_run_timed), seconds: from the previous
 * phase's end (for the first, from the start of the phases, after the
 * pass's setup) to the phase's last task returning, the wait for its
 * slowest worker included; 0 for a phase the pass had no work in. total:
 * the whole call. */
typedef struct attn_phase_times {
    double s[ATTN_PH_COUNT];
    double total;
} attn_phase_times;

/* "projections", "pack", "rows", "attention", "top-k average",
 * "out-projection"; "?" out of range. */
const char *attn_phase_name(attn_phase_id ph);

/* Where attn_run writes. */
typedef struct attn_result {
    float *out;       /* [B,n,E] */
    float *weights;   /* need_weights: [B,H,n,M]; rows: [B,H,r,M]; topk: the values [B,H,n,k]
                       * (H left out when averaged); NULL without weights */
    int32_t *indices; /* topk: the key indices, as many as the values; else unused */
} attn_result;

/* The input asks for weights in some form (need_weights, topk or rows). */
bool attn_wants_weights(const attn_input *in);

/* M, the number of key positions attended: m plus the appended ones. */
int attn_key_positions(const attn_weights *w, int m);

/* Floats the caller must provide for out ([B,n,E]) and for weights (dense,
 * rows or top-k values; 0 without weights); with topk, indices takes as
 * many int32 as weight_floats. Returns 0 on size_t overflow, else 1. */
int attn_output_sizes(const attn_weights *w, const attn_input *in, size_t *out_floats,
                      size_t *weight_floats);

/* What a caller needs to know of one input before running it, from one
 * check: a service asks attn_plan_input once per request instead of the
 * separate geometry calls below, each of which checks the input again. */
typedef struct attn_plan {
    int M;                /* key positions attended (attn_key_positions) */
    size_t out_floats;    /* out: [B,n,E] */
    size_t weight_floats; /* weights in their form (attn_output_sizes); 0 without */
    size_t index_count;   /* topk: the int32 indices (as many as weight_floats); else 0 */
    size_t scratch_bytes; /* attn_forward's working memory (attn_forward_scratch_bytes) */
    double flops;         /* attn_forward_flops */
    bool ragged_ok;       /* may join a ragged batch (attn_ragged_ok) */
} attn_plan;

/* Check the input as attn_input_check does (the same statuses and
 * messages), then fill *plan for a pool of nworkers (1 for a NULL pool).
 * Also ATTN_ERR_LIMIT when the working memory's size overflows size_t.
 * On failure *plan is all zero. */
attn_status attn_plan_input(const attn_weights *w, const attn_input *in, int nworkers,
                            attn_plan *plan, char *err, size_t errlen);

/* Bytes of scratch attn_forward will allocate for this input on a pool of
 * nworkers (from a megabyte on, rounded up to whole huge pages: hugemem.h),
 * so a caller can refuse a request before running it: attn_plan_input's
 * scratch_bytes. Returns 0 on size_t overflow. (Also 0 for an input
 * attn_input_check rejects; pass nworkers = 1 for a NULL pool.) */
size_t attn_forward_scratch_bytes(const attn_weights *w, const attn_input *in, int nworkers);

/* Floating-point operations of the forward pass for this input (the GEMMs
 * and the two attention products), to judge its cost before running it.
 * The input must have passed attn_input_check. */
double attn_forward_flops(const attn_weights *w, const attn_input *in);

/* Check the input's geometry against the weight set (sizes >= 1, pointers
 * present, mask dims valid, at most one form of weights, topk in 1..M, rows
 * unique and in [0,n)). ATTN_ERR_INVALID / ATTN_ERR_SHAPE with a message
 * naming the field. attn_forward calls it too.
 * (Also ATTN_ERR_LIMIT when a buffer size of this input would overflow
 * size_t or a dimension int, and ATTN_ERR_NOMEM when the bitmap that checks
 * a long rows list for repeats cannot be had.) */
attn_status attn_input_check(const attn_weights *w, const attn_input *in, char *err, size_t errlen);

/* Run the forward pass on the pool: out must hold [B,n,E] floats, weights
 * the attn_output_sizes count when in->need_weights (else may be NULL).
 * Thread-safe: any number of calls may share w and pool. Fails with
 * ATTN_ERR_INVALID/SHAPE (bad input, nothing computed) or ATTN_ERR_NOMEM
 * (scratch allocation). Inputs are not modified.
 * (Also: ATTN_ERR_LIMIT as attn_input_check. pool may be NULL: the pass then
 * runs on the calling thread alone. Small inputs, under about 0.1 ms of work,
 * run as one pool task; larger ones as three rounds of tasks - projections,
 * attention, out-projection. Scratch is one allocation per call, freed
 * before returning.) */
attn_status attn_forward(const attn_weights *w, const attn_input *in, float *out, float *weights,
                         attn_pool *pool, char *err, size_t errlen);

/* Ragged batches: several inputs (different lengths, no padding) in one
 * pass of three pool phases. Attention runs input by input (each with its
 * own masks); the projections run either on the inputs' tokens
 * concatenated (taller GEMMs) or input by input exactly as attn_forward
 * splits them. Each out[i] receives exactly the bits attn_forward gives for
 * ins[i] alone on the same pool: always with ATTN_RAGGED_SEPARATE, and with
 * CONCAT only where the projections' rows do not depend on their
 * neighbours (attn_proj_rows_invariant). AUTO picks CONCAT where the
 * projections run on such an sgemm (it packs W once for all the rows
 * then); on the engine's kernel (W packed at load) only for a batch small
 * enough to run on the calling thread, whose short inputs would each read
 * all of W for a few rows, and SEPARATE on the pool, where concatenating
 * would only add copies. A batch whose work adds up to no more than one
 * small pass runs on the calling thread, as attn_forward runs one.
 *
 * attn_ragged_ok: whether an input may join a batch: self-attention (query,
 * key and value the same pointer, n == m) without weights, on a layer with
 * packed projections (kdim == vdim == E) and neither add_bias_kv nor
 * add_zero_attn. Others run alone.
 * attn_ragged_scratch_bytes: the scratch attn_forward_ragged allocates (0
 * on overflow): QKV for all the tokens (concatenated: also a copy of the
 * inputs and of the outputs) plus per-worker slots.
 * attn_forward_ragged: fails like attn_forward, naming the input by its
 * index; ATTN_ERR_INVALID when one is not attn_ragged_ok. Thread-safe. */
typedef enum {
    ATTN_RAGGED_AUTO,     /* whichever of the two is faster there, same bits */
    ATTN_RAGGED_CONCAT,   /* one GEMM job over all the tokens */
    ATTN_RAGGED_SEPARATE, /* each input's own GEMM calls, in shared phases (or whole,
                             one worker each, where W fits in L2) */
} attn_ragged_mode;
int attn_ragged_ok(const attn_weights *w, const attn_input *in);
/* Whether w's projections compute each row the same whatever rows share the
 * call: always with the engine's own kernel (w packed for attn_gemm,
 * core/gemm.h), else where the BLAS probe says so (attn_blas_rows_invariant). */
int attn_proj_rows_invariant(const attn_weights *w);
size_t attn_ragged_scratch_bytes(const attn_weights *w, const attn_input *const *ins, int k,
                                 int nworkers, attn_ragged_mode mode);
attn_status attn_forward_ragged(const attn_weights *w, const attn_input *const *ins, int k,
                                float *const *outs, attn_ragged_mode mode, attn_pool *pool,
                                char *err, size_t errlen);

/* The result pointers an input needs: out always, weights when it wants
 * any, indices with topk; ATTN_ERR_INVALID naming the one missing.
 * attn_run and attn_run_naive call it. */
attn_status attn_result_check(const attn_input *in, const attn_result *res, char *err,
                              size_t errlen);

/* attn_forward for every form of weights: res->out always, res->weights
 * when attn_wants_weights, res->indices with topk. Same contract. */
attn_status attn_run(const attn_weights *w, const attn_input *in, const attn_result *res,
                     attn_pool *pool, char *err, size_t errlen);

/* attn_run, with the time of each of its phases in *times (make bench
 * reports them; the pass is the same). */
attn_status attn_run_timed(const attn_weights *w, const attn_input *in, const attn_result *res,
                           attn_pool *pool, attn_phase_times *times, char *err, size_t errlen);

/* The naive reference (naive.c): plain loops, double accumulation, one
 * thread. Same contract as attn_forward (pool not needed). For tests and
 * the self-test only: it is O(n m E) slow by design. Top-k ranks the double
 * weights, equal ones by lower index. */
attn_status attn_forward_naive(const attn_weights *w, const attn_input *in, float *out,
                               float *weights, char *err, size_t errlen);
attn_status attn_run_naive(const attn_weights *w, const attn_input *in, const attn_result *res,
                           char *err, size_t errlen);

/* The instruction sets the forward pass's own vector code is built for:
 * every row pass (max, exponentials, scaling, masks, top-k) exists in one
 * copy for each. It runs at the widest the CPU has, at most the one the
 * environment variable ATTN_ISA names ("avx512", "avx2", "portable"; with
 * ATTN_GEMM=avx2 and no ATTN_ISA, "avx2"), so that one machine can run
 * and measure what a CPU with less runs. The matrix kernel (gemm.h) is
 * chosen within it: none below AVX2. The AVX-512 and AVX2 copies give the
 * same bits; the portable ones may differ from them in the last bit. */
typedef enum { ATTN_ISA_PORTABLE, ATTN_ISA_AVX2, ATTN_ISA_AVX512 } attn_isa;

/* The set the vector code runs at now, and its name ("avx512", "avx2",
 * "portable"). */
attn_isa attn_isa_now(void);
const char *attn_isa_name(attn_isa isa);

/* For tests and benchmarks: run the vector code at isa from now on (the
 * matrix kernel stays: attn_gemm_use switches it); 0 where this CPU cannot
 * run it (nothing changes then). Call it only while no forward pass runs. */
int attn_isa_use(attn_isa isa);

/* Vectorised exp over x[0..len): y[i] = e^x[i], -inf -> 0, relative error
 * below 2e-7 over the float range; exposed for its unit test. attn_vexp
 * runs the kernel of attn_isa_now() (AVX-512 intrinsics, AVX2 ones, which
 * give the same bits, or portable code the compiler vectorises), and
 * attn_vexp_portable the portable one. attn_vexp_with runs the kernel
 * of isa, with the sum of the y in *sum (as the softmax sums them), and
 * returns 1; 0 (nothing run) where the CPU lacks it. */
void attn_vexp(float *y, const float *x, size_t len);
void attn_vexp_portable(float *y, const float *x, size_t len);
int attn_vexp_with(attn_isa isa, float *y, const float *x, size_t len, float *sum);

/* Top-k of at most 16 keys keeps each row's keys sorted in AVX-512
 * registers where the vector code runs at AVX-512, else in AVX2 ones at
 * AVX2, else (and for larger k) in a heap; the answers are the same.
 * attn_topk_lanes(0) makes every top-k use the heap, (2) AVX2 registers
 * where it runs at AVX2 or more,
 * (1) restores the default; returns the previous setting. For tests and
 * benchmarks: call it only while no forward pass runs. */
int attn_topk_lanes(int mode);

/* Without weights, a row's key blocks after its first take their
 * exponentials in the score product's epilogue where the engine's AVX-512
 * kernel runs (docs/DESIGN.md); attn_online_exp(0) makes every block take the
 * separate max and exp-and-sum passes instead (the same results within
 * rounding: another shift), (1) restores the default; returns the previous
 * setting. For tests and benchmarks: call it only while no forward pass
 * runs. */
int attn_online_exp(int on);

/* With the dense weights averaged over the heads, where no mask reaches a
 * task's rows and the engine's kernel computes the scores, each row's max
 * is kept in the score product's epilogue rather than found by a pass
 * over the row (docs/DESIGN.md); attn_epilogue_max(0) makes every row take
 * the pass (the same max, so the same bits), (1) restores the default;
 * returns the previous setting. For tests and benchmarks: call it only
 * while no forward pass runs. */
int attn_epilogue_max(int on);

#endif
