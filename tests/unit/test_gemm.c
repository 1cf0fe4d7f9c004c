/* test_gemm: the engine's own matrix product (core/gemm.c), on every kernel
 * this CPU can run.
 *
 * For shapes around every edge (rows 1..13 around the tile heights, columns
 * around the panel widths, depths 0, 1, odd, one and several depth blocks,
 * rows over more than a row block, row strides wider than the rows), each
 * kernel's C = A W^T must be within a forward-error bound of the product
 * summed in double (K * 2^-24 * sum |a||w|, the bound of a sum of K
 * products in float), must leave the
 * columns and rows past C alone, and must give each row the same bits when
 * computed alone (what ragged batching relies on). Then the AVX2 and
 * AVX-512 kernels must give the same bits as each other, since they do the
 * same arithmetic. And the rounding error must not be worse than OpenBLAS's
 * on the same products (RMS over random inputs), since the engine swapped
 * one for the other under golden tests that compare with float64.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "blas.h"
#include "check.h"
#include "gemm.h"

static uint64_t rng = 88172645463325252ull;
static float urand(void) { /* xorshift64*, uniform in [-1, 1) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((double)((rng * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0);
}

static float *packed(const float *W, int K, int N) {
    size_t f = attn_gemm_packed_floats(K, N);
    float *p = aligned_alloc(64, (f * sizeof *p + 63) / 64 * 64);
    if (p) {
        memset(p, 0xff, f * sizeof *p); /* NaN: the padding must be written */
        attn_gemm_pack_linear(p, K, N, 0, W, N);
    }
    return p;
}

/* 293 and 600 rows: more than a row block of the kernel (96 to 288 rows
 * a block, from L2). A last block under a quarter of a block joins the one
 * before it, a longer one stays on its own: on a 1 MiB L2 (252-row
 * blocks), 293 rows are one block and 600 are 252 + 252 + 96. */
enum { NSHAPES = 13 };
static const int shapes[NSHAPES][3] = {/* M, N, K */
                                       {1, 1, 1},    {5, 192, 64},  {6, 32, 256},  {7, 33, 257},
                                       {13, 100, 3}, {3, 17, 0},    {97, 64, 513}, {12, 31, 2},
                                       {2, 48, 1},   {130, 96, 40}, {4, 16, 768},  {293, 40, 300},
                                       {600, 24, 70}};

/* One kernel over every shape; results[s] keeps C for the cross-kernel
 * comparison. */
static void run_kernel(const char *name, float *results[NSHAPES]) {
    rng = 88172645463325252ull; /* the same inputs for every kernel */
    for (int s = 0; s < NSHAPES; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const int lda = K + 3, ldc = N + 5;
        float *A = malloc(sizeof(float) * (size_t)M * (size_t)lda + 4);
        float *W = malloc(sizeof(float) * (size_t)N * (size_t)(K > 0 ? K : 1));
        float *C = malloc(sizeof(float) * (size_t)(M + 1) * (size_t)ldc);
        float *row = malloc(sizeof(float) * (size_t)ldc);
        if (!A || !W || !C || !row) {
            CHECK(!"out of memory");
            return;
        }
        for (int i = 0; i < M * lda; i++) A[i] = urand();
        for (int i = 0; i < N * K; i++) W[i] = urand();
        for (int i = 0; i < (M + 1) * ldc; i++) C[i] = 12345.0f;
        float *Wp = packed(W, K, N);
        CHECK(Wp != NULL || K == 0);
        if (!Wp && K > 0) continue;
        attn_gemm(M, N, K, A, lda, Wp, C, ldc);
        int bad = 0, untouched = 1, same = 1;
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double sum = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    sum += (double)A[i * lda + k] * W[j * K + k];
                    mag += fabs((double)A[i * lda + k] * W[j * K + k]);
                }
                if (fabs(C[i * ldc + j] - sum) > (K + 1) * 0x1p-24 * mag) bad++;
            }
            for (int j = N; j < ldc; j++) untouched &= C[i * ldc + j] == 12345.0f;
            attn_gemm(1, N, K, A + (size_t)i * (size_t)lda, lda, Wp, row, ldc);
            same &= memcmp(row, C + (size_t)i * (size_t)ldc, (size_t)N * sizeof *row) == 0;
        }
        for (int j = 0; j < ldc; j++) untouched &= C[M * ldc + j] == 12345.0f;
        CHECK_MSG(bad == 0, "%s %dx%dx%d: %d elements outside the error bound", name, M, N, K, bad);
        CHECK_MSG(untouched, "%s %dx%dx%d: wrote past C", name, M, N, K);
        CHECK_MSG(same, "%s %dx%dx%d: a row alone differs from the same row among others", name, M,
                  N, K);
        if (results) {
            results[s] = malloc(sizeof(float) * (size_t)M * (size_t)N);
            if (results[s])
                for (int i = 0; i < M; i++)
                    memcpy(results[s] + (size_t)i * N, C + (size_t)i * ldc, sizeof(float) * N);
        }
        free(A);
        free(W);
        free(C);
        free(row);
        free(Wp);
    }
}

/* The attention products' entry points: K^T packed from rows with a wider
 * stride (attn_gemm_pack_t), V packed as it is (attn_gemm_pack_n), panels
 * further apart than K * nr, a call on depth rows k0.. of every panel, and
 * C += A B. Each against the same product with attn_gemm on a B packed by
 * attn_gemm_pack_linear, bit for bit (the same arithmetic). */
static void strided_and_add(const char *name) {
    const int nr = attn_gemm_nr(), K = 70, N = 45, M = 9, ldw = 83, k0 = 2 * nr > K ? 0 : nr;
    const size_t pstride = (size_t)(K + 7) * (size_t)nr, panels = (size_t)(N + nr - 1) / nr;
    float *W = malloc(sizeof(float) * N * ldw), *Wc = malloc(sizeof(float) * N * K);
    float *Bn = malloc(sizeof(float) * K * N), *A = malloc(sizeof(float) * M * K);
    float *pt = aligned_alloc(64, sizeof(float) * panels * pstride);
    float *pn = aligned_alloc(64, sizeof(float) * panels * pstride);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    if (!W || !Wc || !Bn || !A || !pt || !pn || !C1 || !C2) {
        CHECK(!"out of memory");
        return;
    }
    for (int i = 0; i < N * ldw; i++) W[i] = urand();
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++) Wc[j * K + k] = Bn[k * N + j] = W[j * ldw + k];
    for (int i = 0; i < M * K; i++) A[i] = urand();
    memset(pt, 0xff, sizeof(float) * panels * pstride); /* padding must be written */
    memset(pn, 0xff, sizeof(float) * panels * pstride);
    attn_gemm_pack_t(pt, pstride, K, N, W, ldw);
    attn_gemm_pack_n(pn, pstride, K, N, Bn, N);
    float *ref = packed(Wc, K, N);
    if (!ref) return;
    int same_t = 1, same_n = 1;
    for (size_t p = 0; p < panels; p++)
        for (int k = 0; k < K; k++) {
            same_t &= !memcmp(pt + p * pstride + (size_t)k * nr, ref + (p * K + k) * nr,
                              sizeof(float) * nr);
            same_n &= !memcmp(pn + p * pstride + (size_t)k * nr, ref + (p * K + k) * nr,
                              sizeof(float) * nr);
        }
    CHECK_MSG(same_t && same_n, "%s: packed K^T %s, packed V %s", name, same_t ? "ok" : "wrong",
              same_n ? "ok" : "wrong");
    /* rows k0.. of every panel: the product of A's columns k0.. with B's rows k0.. */
    float *Wk = malloc(sizeof(float) * N * (K - k0));
    if (!Wk) return;
    for (int j = 0; j < N; j++)
        for (int k = k0; k < K; k++) Wk[j * (K - k0) + (k - k0)] = W[j * ldw + k];
    float *refk = packed(Wk, K - k0, N);
    if (!refk) return;
    attn_gemm(M, N, K - k0, A + k0, K, refk, C1, N);
    attn_gemm_ex(M, N, K - k0, A + k0, K, pt + (size_t)k0 * nr, pstride, C2, N, 0);
    CHECK_MSG(!memcmp(C1, C2, sizeof(float) * M * N), "%s: a product on rows %d.. differs", name,
              k0);
    /* C += A B: the sums of A B (one depth block here), then C added */
    for (int i = 0; i < M * N; i++) C2[i] = C1[i] = urand();
    float *AB = malloc(sizeof(float) * M * N);
    if (!AB) return;
    attn_gemm(M, N, K, A, K, ref, AB, N);
    for (int i = 0; i < M * N; i++) C1[i] = C1[i] + AB[i];
    attn_gemm_ex(M, N, K, A, K, pn, pstride, C2, N, 1);
    CHECK_MSG(!memcmp(C1, C2, sizeof(float) * M * N), "%s: C += A B differs from C + (A B)", name);
    free(W), free(Wc), free(Bn), free(A), free(pt), free(pn), free(C1), free(C2);
    free(ref), free(Wk), free(refk), free(AB);
}

/* The packed layout itself, element by element from its definition (not
 * from another packing call): lane l of depth row k of panel p holds
 * B[k][p * nr + l] = W[p * nr + l][k], and the last panel's lanes past N
 * hold 0. K^T from rows with a wider stride (attn_gemm_pack_t), and a
 * stacked matrix written by attn_gemm_pack_linear in two calls whose split
 * is not a multiple of 8, over depths and widths around the 8 x 8 blocks
 * the packing transposes whole. */
static void packing_layout(const char *name) {
    const int nr = attn_gemm_nr();
    static const int layouts[][3] = {{1, 1, 1},    {7, 9, 3},    {8, 8, 8},     {16, 33, 13},
                                     {17, 64, 40}, {64, 45, 21}, {70, 100, 37}, {256, 31, 5}};
    int bad = 0;
    for (size_t t = 0; t < sizeof layouts / sizeof *layouts; t++) {
        const int K = layouts[t][0], N = layouts[t][1], split = layouts[t][2], ldw = K + 5;
        const size_t panels = (size_t)(N + nr - 1) / nr, pstride = (size_t)K * nr;
        float *W = malloc(sizeof(float) * N * ldw), *Wl = malloc(sizeof(float) * N * K);
        float *pt = aligned_alloc(64, sizeof(float) * panels * pstride);
        float *pl = aligned_alloc(64, sizeof(float) * panels * pstride);
        if (!W || !Wl || !pt || !pl) {
            CHECK(!"out of memory");
            return;
        }
        for (int i = 0; i < N * ldw; i++) W[i] = urand();
        for (int j = 0; j < N; j++)
            memcpy(Wl + (size_t)j * K, W + (size_t)j * ldw, sizeof(float) * K);
        memset(pt, 0xff, sizeof(float) * panels * pstride); /* every lane must be written */
        memset(pl, 0xff, sizeof(float) * panels * pstride);
        attn_gemm_pack_t(pt, pstride, K, N, W, ldw);
        attn_gemm_pack_linear(pl, K, N, 0, Wl, split);
        attn_gemm_pack_linear(pl, K, N, split, Wl + (size_t)split * K, N - split);
        for (size_t p = 0; p < panels; p++)
            for (int k = 0; k < K; k++)
                for (int l = 0; l < nr; l++) {
                    const size_t j = p * nr + (size_t)l, at = p * pstride + (size_t)k * nr + l;
                    const float want = j < (size_t)N ? W[j * ldw + (size_t)k] : 0.0f;
                    bad += memcmp(&pt[at], &want, sizeof want) != 0;
                    bad += memcmp(&pl[at], &want, sizeof want) != 0;
                }
        free(W), free(Wl), free(pt), free(pl);
    }
    CHECK_MSG(bad == 0, "%s: %d packed lanes differ from the layout's definition", name, bad);
}

/* RMS error against double sums, ours and OpenBLAS's, over random inputs
 * shaped like the projections (inputs x4, weights ~1/sqrt(K)). */
/* The epilogue (attn_gemm_ex_post) gives the bits of the product followed
 * by the bias added and the first scale_cols columns scaled in passes over
 * C, on every shape, with and without adding to C, with the scale ending
 * inside a panel, before N and past it, and with no bias; and its row max
 * (vmax) is each row's lanes of maxima over those results, lane l over
 * columns l, l + 16, ..., bit for bit, a NaN never winning (column 3 is
 * NaN wherever K > 0). */
static void epilogue(const char *name) {
    static const int cut[4] = {0, 5, 40, 1000}; /* scale_cols */
    int bad = 0, runs = 0, bad_max = 0;
    for (int s = 0; s < NSHAPES; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 3;
        const size_t pstride = (size_t)(K > 0 ? K : 1) * (size_t)attn_gemm_nr();
        float *A = malloc(sizeof(float) * (size_t)M * (size_t)(K > 0 ? K : 1));
        float *W = malloc(sizeof(float) * (size_t)N * (size_t)(K > 0 ? K : 1));
        float *bias = malloc(sizeof(float) * (size_t)N);
        float *C0 = malloc(sizeof(float) * (size_t)M * (size_t)ldc);
        float *C1 = malloc(sizeof(float) * (size_t)M * (size_t)ldc);
        float *C2 = malloc(sizeof(float) * (size_t)M * (size_t)ldc);
        for (size_t i = 0; i < (size_t)M * (size_t)K; i++) A[i] = urand();
        for (size_t i = 0; i < (size_t)N * (size_t)K; i++) W[i] = urand();
        for (int j = 0; j < N; j++) bias[j] = urand();
        for (size_t i = 0; i < (size_t)M * (size_t)ldc; i++) C0[i] = urand();
        if (K > 0 && N > 3) W[3 * (size_t)K] = NAN;
        float *vm = malloc(sizeof(float) * (size_t)M * 16), *want = malloc(sizeof(float) * (size_t)M * 16);
        float *Wp = packed(W, K, N);
        for (int add = 0; add < 2; add++)
            for (int c = 0; c < 4; c++)
                for (int wb = 0; wb < 2; wb++) {
                    const attn_gemm_post post = {.bias = wb ? bias : NULL,
                                                 .scale = 0.125f + urand() * 0.01f,
                                                 .scale_cols = cut[c],
                                                 .vmax = vm};
                    for (int i = 0; i < M * 16; i++) vm[i] = want[i] = -INFINITY;
                    memcpy(C1, C0, sizeof(float) * (size_t)M * (size_t)ldc);
                    memcpy(C2, C0, sizeof(float) * (size_t)M * (size_t)ldc);
                    attn_gemm_ex(M, N, K, A, K, Wp, pstride, C1, ldc, add);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            float *v = C1 + (size_t)i * (size_t)ldc + j;
                            if (post.bias) *v = *v + post.bias[j];
                            if (j < post.scale_cols) *v = *v * post.scale;
                        }
                    attn_gemm_ex_post(M, N, K, A, K, Wp, pstride, C2, ldc, add, &post);
                    runs++;
                    if (memcmp(C1, C2, sizeof(float) * (size_t)M * (size_t)ldc)) bad++;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            const float v = C1[(size_t)i * (size_t)ldc + j];
                            float *m = &want[i * 16 + j % 16];
                            *m = v > *m ? v : *m;
                        }
                    if (memcmp(vm, want, sizeof(float) * (size_t)M * 16)) bad_max++;
                }
        free(A), free(W), free(bias), free(C0), free(C1), free(C2), free(Wp), free(vm), free(want);
    }
    CHECK_MSG(bad == 0, "%s: the epilogue differs from passes after the product in %d of %d runs",
              name, bad, runs);
    CHECK_MSG(bad_max == 0, "%s: the epilogue's row max differs from the product's in %d of %d runs",
              name, bad_max, runs);
}

/* The exponential epilogue (attn_gemm_post's shift): against the plain
 * product, each row under its limit is attention's exponentials of C -
 * shift[r] (attn_vexp_with), bit for bit, its lanes the sums of columns l,
 * l + 16, ... in order, and its over flag clear; a row with an element
 * above its limit, or a NaN, is flagged; so is every row of a product
 * whose columns are not whole panels, whose last piece comes out as the
 * plain product. Rows of 13 (a last tile of one row),
 * one depth block and two. */
static void exp_epilogue(const char *name) {
    const attn_isa kind = attn_gemm_nr() == 32 ? ATTN_ISA_AVX512 : ATTN_ISA_AVX2;
    enum { M = 13 };
    static const int Ks[] = {64, 300};
    int bad_vals = 0, bad_lanes = 0, bad_over = 0, rows = 0, overs = 0;
    for (int ki = 0; ki < 2; ki++)
        for (int narrow = 0; narrow < 2; narrow++) {
            const int K = Ks[ki], N = narrow ? 40 : 96, ldc = N + 5;
            float *A = malloc(sizeof(float) * M * (size_t)K), *W = malloc(sizeof(float) * (size_t)N * K);
            float *C1 = malloc(sizeof(float) * M * (size_t)ldc), *C2 = malloc(sizeof(float) * M * (size_t)ldc);
            float *x = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)N);
            float shift[M], limit[M], lanes[M * 16];
            unsigned char over[M];
            if (!A || !W || !C1 || !C2 || !x || !y) {
                CHECK(!"out of memory");
                return;
            }
            for (int i = 0; i < M * K; i++) A[i] = 2.0f * urand();
            for (int i = 0; i < N * K; i++) W[i] = urand();
            A[5 * K + 7] = NAN; /* row 5 is all NaN */
            float *Wp = packed(W, K, N);
            const size_t pstride = (size_t)K * (size_t)attn_gemm_nr();
            attn_gemm_ex(M, N, K, A, K, Wp, pstride, C1, ldc, 0);
            for (int r = 0; r < M; r++) {
                float mx = -INFINITY;
                for (int j = 0; j < N; j++) mx = C1[r * ldc + j] > mx ? C1[r * ldc + j] : mx;
                /* some rows shifted by their max, some below it; every
                 * fourth row's limit just under its max */
                shift[r] = r % 2 ? mx : mx - 3.0f;
                limit[r] = r % 4 == 3 ? mx - 0.01f : shift[r] + 8.0f;
                over[r] = 0;
            }
            memset(lanes, 0, sizeof lanes);
            for (int i = 0; i < M * ldc; i++) C2[i] = urand();
            const attn_gemm_post post = {.shift = shift, .limit = limit, .lanes = lanes, .over = over};
            attn_gemm_ex_post(M, N, K, A, K, Wp, pstride, C2, ldc, 0, &post);
            for (int r = 0; r < M; r++) {
                const float *c = C1 + (size_t)r * (size_t)ldc;
                int above = narrow;
                for (int j = 0; j < N; j++) above |= !(c[j] <= limit[r]);
                rows++;
                overs += above;
                if (over[r] != above) bad_over++;
                const int whole = N / attn_gemm_nr() * attn_gemm_nr(); /* the narrow piece plain */
                if (memcmp(c + whole, C2 + (size_t)r * (size_t)ldc + whole,
                           sizeof(float) * (size_t)(N - whole)))
                    bad_vals++;
                if (above) continue;
                for (int j = 0; j < N; j++) x[j] = c[j] - shift[r];
                attn_vexp_with(kind, y, x, (size_t)N, NULL);
                if (memcmp(y, C2 + (size_t)r * (size_t)ldc, sizeof(float) * (size_t)N)) bad_vals++;
                for (int l = 0; l < 16; l++) {
                    float s = 0.0f;
                    for (int j = l; j < N; j += 16) s += y[j];
                    if (memcmp(&s, &lanes[r * 16 + l], sizeof s)) bad_lanes++;
                }
            }
            free(A), free(W), free(C1), free(C2), free(x), free(y), free(Wp);
        }
    CHECK_MSG(bad_over == 0, "%s: %d of %d rows flagged wrongly", name, bad_over, rows);
    CHECK_MSG(bad_vals == 0, "%s: %d rows' exponentials differ from attention's", name, bad_vals);
    CHECK_MSG(bad_lanes == 0, "%s: %d lanes' sums differ", name, bad_lanes);
    CHECK_MSG(overs > 0 && overs < rows, "%s: %d of %d rows over: both kinds wanted", name, overs,
              rows);
}

static void versus_openblas(void) {
    const int M = 40, N = 96;
    static const int Ks[] = {32, 64, 256, 768};
    for (size_t t = 0; t < sizeof Ks / sizeof *Ks; t++) {
        const int K = Ks[t];
        float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K);
        float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
        double e_ours = 0, e_blas = 0;
        if (!A || !W || !C1 || !C2) {
            CHECK(!"out of memory");
            return;
        }
        for (int trial = 0; trial < 8; trial++) {
            for (int i = 0; i < M * K; i++) A[i] = 4 * urand();
            for (int i = 0; i < N * K; i++) W[i] = urand() / sqrtf((float)K);
            float *Wp = packed(W, K, N);
            if (!Wp) break;
            attn_gemm(M, N, K, A, K, Wp, C1, N);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f,
                        C2, N);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double sum = 0;
                    for (int k = 0; k < K; k++) sum += (double)A[i * K + k] * W[j * K + k];
                    e_ours += (C1[i * N + j] - sum) * (C1[i * N + j] - sum);
                    e_blas += (C2[i * N + j] - sum) * (C2[i * N + j] - sum);
                }
            free(Wp);
        }
        printf("  K=%d: RMS error, %s kernel %.3g, OpenBLAS %.3g\n", K, attn_gemm_kernel(),
               sqrt(e_ours / (8.0 * M * N)), sqrt(e_blas / (8.0 * M * N)));
        CHECK_MSG(e_ours <= e_blas, "K=%d: the kernel's rounding error is above OpenBLAS's", K);
        free(A);
        free(W);
        free(C1);
        free(C2);
    }
}

int main(void) {
    float *res[2][NSHAPES] = {{0}};
    static const char *names[2] = {"avx512", "avx2"};
    int ran[2] = {0, 0};
    /* OpenBLAS on one thread, as the engine runs it (its own threads are
     * not instrumented, so ThreadSanitizer would see their writes race) */
    attn_blas_info info;
    char err[256];
    CHECK_MSG(attn_blas_init(&info, err, sizeof err) == ATTN_OK, "BLAS: %s", err);
    printf("default kernel: %s\n", attn_gemm_kernel());
    for (int k = 0; k < 2; k++) {
        if (!attn_gemm_use(names[k])) {
            printf("%s: this CPU cannot run it, skipped\n", names[k]);
            continue;
        }
        ran[k] = 1;
        run_kernel(names[k], res[k]);
        strided_and_add(names[k]);
        packing_layout(names[k]);
        epilogue(names[k]);
        exp_epilogue(names[k]);
        versus_openblas();
        printf("%s: checked %d shapes\n", names[k], NSHAPES);
    }
    if (ran[0] && ran[1]) {
        int differ = 0;
        for (int s = 0; s < NSHAPES; s++) {
            size_t len = (size_t)shapes[s][0] * (size_t)shapes[s][1];
            if (res[0][s] && res[1][s] && memcmp(res[0][s], res[1][s], len * sizeof(float)))
                differ++;
        }
        CHECK_MSG(differ == 0, "the AVX2 and AVX-512 kernels differ on %d shapes", differ);
        if (!differ) printf("avx2 and avx512 give the same bits on all %d shapes\n", NSHAPES);
    }
    /* without a kernel nothing is packed: the engine uses OpenBLAS */
    CHECK(attn_gemm_use("none"));
    CHECK_INT_EQ(attn_gemm_nr(), 0);
    CHECK(attn_gemm_packed_floats(4, 4) == 0);
    CHECK(!attn_gemm_use("sse9"));
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < NSHAPES; s++) free(res[k][s]);
    return check_exit();
}
