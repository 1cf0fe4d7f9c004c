/* gemm.h - the engine's own matrix product for weights known in advance.
 *
 * The projections multiply token rows by the same weight matrices on every
 * request. attn_gemm keeps those matrices packed once, at load, in the layout
 * its micro-kernel streams (panels of attn_gemm_nr() columns, k-major), and
 * reads the token rows where they lie; OpenBLAS packs the whole weight matrix
 * again on every call. The attention products pack each head's K and V once
 * per forward pass (attn_gemm_pack_t, attn_gemm_pack_n) for all its rows. Kernels: AVX-512F (6 x 32
 * tiles) and AVX2+FMA (3 x 16), the same arithmetic and bits; the widest the CPU has and the vector
 * code's level allows (isa.h) is chosen. Without either (a CPU without AVX2, ATTN_ISA=portable, or
 * ATTN_GEMM=blas) attn_gemm_nr() is 0 and the engine calls cblas_sgemm.
 *
 * Every row of C is computed the same way wherever it sits among the rows of
 * the call (missing rows of a tile are zeros, never neighbours' data), so
 * rows come out bit for bit the same whatever rows share the call: the
 * property ragged batching needs (see attn_blas_rows_invariant).
 *
 *     size_t f = attn_gemm_packed_floats(K, N);      // 0 when no kernel
 *     float *Wp = aligned_alloc(64, f * sizeof *Wp);  // (rounded to 64 bytes)
 *     attn_gemm_pack_linear(Wp, K, N, 0, W, N);       // W [N, K], torch's Linear
 *     attn_gemm(M, N, K, x, ldx, Wp, y, ldy);         // y = x W^T, x [M, K]
 */
#ifndef ATTN_GEMM_H
#define ATTN_GEMM_H

#include <stddef.h>

/* Columns per packed panel of the kernel in use: 32 (AVX-512), 16 (AVX2),
 * or 0 when there is none (see above): then use cblas_sgemm. The choice is
 * made once, at the first call of any function here. */
int attn_gemm_nr(void);

/* Bytes of a core's L2 cache (the C library's figure, else 1 MiB): the
 * engine splits products by columns when their packed B is larger. */
size_t attn_gemm_l2_bytes(void);

/* The kernel's name: "avx512", "avx2" or "none". */
const char *attn_gemm_kernel(void);

/* For tests: switch the whole process to kernel "avx512", "avx2" or "none"
 * (0 when this CPU cannot run it; nothing changes then). Matrices packed
 * before the switch are packed for the other kernel: use them with it only.
 * Not thread-safe. */
int attn_gemm_use(const char *name);

/* Floats a packed copy of a [K, N] matrix takes (N rounded up to whole
 * panels), or 0 when there is no kernel or the size overflows. */
size_t attn_gemm_packed_floats(int K, int N);

/* Write columns j0 .. j0+ncols-1 of a packed B [K, N] (dst: 64-byte aligned,
 * attn_gemm_packed_floats(K, N) floats) from W [ncols, K], a torch Linear
 * weight: B[k][j0+c] = W[c][k]. Panel p of dst holds, for k = 0..K-1,
 * columns p*nr .. p*nr+nr-1 of row k; the call that reaches column N also
 * writes zeros past it. Several calls fill a B stacked from several weights
 * (Wq; Wk; Wv). */
void attn_gemm_pack_linear(float *dst, int K, int N, int j0, const float *W, int ncols);

/* Products whose B changes per call (attention's K_h^T and V_h): pack into
 * panels pstride floats apart (at least K * nr; a larger stride lets a call
 * use rows k0.. of every panel, Bp + k0 * nr), padding lanes zeroed.
 * attn_gemm_pack_t: B = W^T, W [N, K] with row stride ldw.
 * attn_gemm_pack_n: B [K, N] itself, row stride ldb.
 * Panels: ceil(N / attn_gemm_nr()). */
void attn_gemm_pack_t(float *dst, size_t pstride, int K, int N, const float *W, int ldw);
void attn_gemm_pack_n(float *dst, size_t pstride, int K, int N, const float *B, int ldb);

/* attn_gemm with panels pstride floats apart, adding to C when add != 0
 * (C += A B: the product's sums, then C added, as sgemm with beta = 1). */
void attn_gemm_ex(int M, int N, int K, const float *A, int lda, const float *Bp, size_t pstride,
                  float *C, int ldc, int add);

/* An epilogue for attn_gemm_ex_post: after each element's sum (and C added,
 * with add), + bias[j] where bias is given, then * scale for the columns j <
 * scale_cols; the same float operations, in that order, as adding the bias
 * and scaling the columns in passes over C afterwards, so the same bits. */
typedef struct attn_gemm_post {
    const float *bias; /* [N] or NULL */
    float scale;
    int scale_cols; /* 0: no scaling */
    /* The online softmax's exponentials (attention without weights), where
     * shift is given, after the steps above: each tile's piece of row r
     * (attn_gemm_nr() columns) whose every element is <= limit[r] is
     * stored as e^(C - shift[r]) (core/vexp.h) and added into that row's
     * 16 lanes, lane l adding columns l, l + 16, l + 32, ... in column
     * order, as attention's exp-and-sum kernels add a row (the caller
     * zeroes them first). A piece with an element above the limit, or NaN,
     * sets over[r] and is stored as the product itself (so a row whose
     * limit is -inf comes out plain, flagged). N must be a multiple of
     * attn_gemm_nr(): pieces narrower than nr are stored plain and their
     * rows flagged. */
    const float *shift;  /* [M], or NULL: no exponentials */
    const float *limit;  /* [M] */
    float *lanes;        /* [M][16] */
    unsigned char *over; /* [M] */
    /* Each row's largest element, where vmax is given (the softmax's max,
     * taken while the tile is in registers instead of in a pass over the
     * row): after the bias and the scale, before any exponentials, lane l
     * of row r (vmax[r * 16 + l]) keeps the largest of the row's elements
     * in columns l, l + 16, l + 32, ..., as m = x > m ? x : m keeps it (a
     * NaN never wins). The caller sets the lanes first (to -inf). */
    float *vmax; /* [M][16], or NULL */
} attn_gemm_post;

/* attn_gemm_ex with the epilogue post (NULL: none), applied while the
 * tiles of the last depth block are in registers instead of in passes over
 * C afterwards. */
void attn_gemm_ex_post(int M, int N, int K, const float *A, int lda, const float *Bp,
                       size_t pstride, float *C, int ldc, int add, const attn_gemm_post *post);

/* Element (k, j) of a packed B [K, N]. */
float attn_gemm_packed_at(const float *Bp, int K, int k, int j);

/* C [M, N] (row stride ldc) = A [M, K] (row stride lda) times the packed B.
 * Overwrites C. Thread-safe. */
void attn_gemm(int M, int N, int K, const float *A, int lda, const float *Bp, float *C, int ldc);

#endif
