/* gemm.c - C = A B for a B packed in advance (see gemm.h).
 *
 * Blocking: columns in groups, and inside each group depth in blocks of
 * KC, so that a group's KC-deep piece of B (256 KiB) stays in L2 while
 * every block of MC rows of A (MC set by L2's size) passes over it (B
 * comes from L3 once per row block) and the block's part of C stays in
 * L2 between depth blocks. A is
 * read where it lies, MR rows at a time (a tile broadcasts one element of
 * each of its rows per step), and each KC x NR piece of a B panel (32 KiB
 * at NR = 32) is read by every tile of a row block in turn, so it stays in
 * L1. Grouping the columns took 2-5% off whole passes (n = 512 and 2048,
 * in-process, alternated) where each row block had streamed all of B
 * again. Packing A as well
 * (k-major tiles, as BLAS libraries do) cost 12% of a forward pass's time
 * in the attention products, whose A (the scores) is used by few panels,
 * and gained nothing on the projections (measured: [128,64]x[64,512] 218
 * GFLOPS packed, 231 in place; [128,768]x[768,2304] 211 and 207).
 *
 * The arithmetic, the same for every element of C on every kernel: over a
 * depth block, two chains of fused multiply-adds in k order, one over even
 * k and one over odd k, then their sum; the first depth block stores that
 * and each later one adds its own to C; after the last, the epilogue
 * (attn_gemm_ex_post) adds a bias and multiplies by a scale, while the
 * tile is still in registers. Two chains halve the rounding error
 * of one (measured: RMS error 25% below OpenBLAS's sgemm at K = 32..768)
 * and keep the FMA units as busy. The micro-kernel holds an MR x NR tile of
 * C, two registers of sums per row and chain (AVX-512: 6 x 32, 24 of its 32
 * registers; AVX2: 3 x 16, 12 of 16). Each step loads the panel's even-k
 * row, runs the even chains of every row, then loads the odd-k row: the
 * AVX2 kernel then needs only two registers for B, so it loads each B
 * vector once (10 loads per 12 FMAs, against 14 when all four were live;
 * one thread, [512,768]x[768,2304] at 0.80x of OpenBLAS's Haswell sgemm
 * before, 0.95x after). While the tiles of a block read one piece of a
 * panel, they prefetch the next panel's piece a part each, so it comes
 * from L2 rather than L3 (AVX2 0.95x -> 1.05x on that shape, 0.98x ->
 * 1.11x at 96 rows; AVX-512 unchanged). The last tile of a block has the rows
 * that are left (a kernel per height) and columns past N are zeros in the
 * packed B and never stored: every element of C gets the same arithmetic
 * wherever it sits, so rows do not depend on their neighbours, and the
 * AVX2 and AVX-512 kernels give the same bits. A row block's tiles over a
 * panel are one call of the AVX2 kernel (its small tile made a call a
 * tile cost 3-4% of the score products) and a call a tile of the AVX-512
 * one (panel_fn).
 */
#include "gemm.h"

#include "isa.h"
#include "vexp.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86 1
#include <immintrin.h>
#endif

enum { KC = 256, GROUP_BYTES = 256 << 10 };
/* Rows of A per row block (mc_rows): a quarter of L2 for their KC-deep A
 * and as much for their part of C, a multiple of both kernels' tile
 * heights, within the range measured (see attn_gemm_ex_post). */
enum { MC_MIN = 96, MC_MAX = 288 };
enum { GEMM_NONE, GEMM_AVX2, GEMM_AVX512 };

static int kernel_id = GEMM_NONE;
static size_t l2_bytes = 1 << 20; /* a core's L2, where the C library tells */
static int mc_rows = 252;         /* rows per row block, from l2_bytes */
static pthread_once_t kernel_once = PTHREAD_ONCE_INIT;

/* The instruction set kernel id needs. */
static attn_isa kernel_isa(int id) {
    return id == GEMM_AVX512 ? ATTN_ISA_AVX512
           : id == GEMM_AVX2 ? ATTN_ISA_AVX2
                             : ATTN_ISA_PORTABLE;
}

static int cpu_has(int id) {
    return isa_cpu_has(kernel_isa(id));
}

/* Whether the engine may run kernel id by default: the CPU has it, and
 * the level the vector code starts at (isa.h) reaches it. */
static int allowed(int id) {
    return cpu_has(id) && kernel_isa(id) <= isa_start();
}

static int kernel_by_name(const char *name) {
    if (strcmp(name, "avx512") == 0) return GEMM_AVX512;
    if (strcmp(name, "avx2") == 0) return GEMM_AVX2;
    if (strcmp(name, "blas") == 0 || strcmp(name, "none") == 0) return GEMM_NONE;
    return -1;
}

/* The widest kernel the CPU has and the vector code's level allows (isa.h):
 * AVX-512, else AVX2 (the same bits; in whole passes the same time as
 * OpenBLAS's Haswell sgemm or less where it could be measured,
 * docs/DESIGN.md), else OpenBLAS for every product. ATTN_GEMM=avx512|avx2|blas
 * overrides, where allowed. */
static void kernel_choose(void) {
    const char *force = getenv("ATTN_GEMM");
    int id = force ? kernel_by_name(force) : -1;
    if (id >= 0 && allowed(id))
        kernel_id = id;
    else if (allowed(GEMM_AVX512))
        kernel_id = GEMM_AVX512;
    else if (allowed(GEMM_AVX2))
        kernel_id = GEMM_AVX2;
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 > 0) l2_bytes = (size_t)l2;
#endif
    size_t mc = l2_bytes / 4 / (KC * sizeof(float)) / 6 * 6;
    mc_rows = mc < MC_MIN ? MC_MIN : mc > MC_MAX ? MC_MAX : (int)mc;
}

static int kernel(void) {
    pthread_once(&kernel_once, kernel_choose);
    return kernel_id;
}

int attn_gemm_use(const char *name) {
    int id = kernel_by_name(name);
    kernel();
    if (id < 0 || !cpu_has(id)) return 0;
    kernel_id = id;
    return 1;
}

int attn_gemm_nr(void) {
    switch (kernel()) {
    case GEMM_AVX512: return 32;
    case GEMM_AVX2: return 16;
    default: return 0;
    }
}

size_t attn_gemm_l2_bytes(void) {
    kernel();
    return l2_bytes;
}

const char *attn_gemm_kernel(void) {
    switch (kernel()) {
    case GEMM_AVX512: return "avx512";
    case GEMM_AVX2: return "avx2";
    default: return "none";
    }
}

size_t attn_gemm_packed_floats(int K, int N) {
    const int nr = attn_gemm_nr();
    if (nr == 0 || K <= 0 || N <= 0) return 0;
    size_t panels = ((size_t)N + (size_t)nr - 1) / (size_t)nr;
    if (panels > SIZE_MAX / (size_t)nr / (size_t)K) return 0;
    return panels * (size_t)nr * (size_t)K;
}

#ifdef GEMM_X86
/* d[k * ldd + l] = s[l * lds + k] for k, l in 0..7: an 8 x 8 block
 * transposed in registers (24 shuffles for 64 floats, where a scalar copy
 * stores one float at a time a panel row apart). Every CPU with a kernel
 * here has AVX2. */
__attribute__((target("avx2"))) static void transpose8x8(float *d, size_t ldd, const float *s,
                                                         size_t lds) {
    const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds),
                 r2 = _mm256_loadu_ps(s + 2 * lds), r3 = _mm256_loadu_ps(s + 3 * lds),
                 r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds),
                 r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
    /* pairs of rows interleaved, then quads, then the 128-bit halves */
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/* Columns j0 .. j0+ncols-1 of a packed B [K, N] whose panels lie pstride
 * floats apart, from W [ncols, K] (row stride ldw): B[k][j0+c] = W[c][k],
 * lane l of row k of a panel at panel[k * nr + l]. Eight columns at a time
 * as 8 x 8 blocks transposed in registers, the rest one by one. A call that
 * reaches column N also zeroes the last panel's lanes past it. */
static void pack_cols(float *dst, size_t pstride, int K, int N, int j0, const float *W, int ldw,
                      int ncols) {
    const int nr = attn_gemm_nr();
    if (nr == 0) return;
    const int j1 = ncols < N - j0 ? j0 + ncols : N;
    for (int p = j0 / nr; p * nr < j1; p++) {
        const int c0 = p * nr > j0 ? p * nr : j0, c1 = (p + 1) * nr < j1 ? (p + 1) * nr : j1;
        const int pad = j1 == N && c1 == N ? (p + 1) * nr - N : 0;
        float *d = dst + (size_t)p * pstride; /* lane l of row k at d[k * nr + l] */
        int j = c0;
#ifdef GEMM_X86
        for (; j + 8 <= c1; j += 8) {
            const float *w = W + (size_t)(j - j0) * (size_t)ldw;
            float *dj = d + (j - p * nr);
            int k = 0;
            for (; k + 8 <= K; k += 8)
                transpose8x8(dj + (size_t)k * (size_t)nr, (size_t)nr, w + k, (size_t)ldw);
            for (; k < K; k++)
                for (int l = 0; l < 8; l++)
                    dj[(size_t)k * (size_t)nr + (size_t)l] = w[(size_t)l * (size_t)ldw + k];
        }
#endif
        for (; j < c1; j++) {
            const float *w = W + (size_t)(j - j0) * (size_t)ldw;
            for (int k = 0; k < K; k++) d[(size_t)k * (size_t)nr + (size_t)(j - p * nr)] = w[k];
        }
        if (pad)
            for (int k = 0; k < K; k++)
                memset(d + (size_t)k * (size_t)nr + (size_t)(nr - pad), 0, (size_t)pad * sizeof *d);
    }
}

void attn_gemm_pack_linear(float *dst, int K, int N, int j0, const float *W, int ncols) {
    pack_cols(dst, (size_t)K * (size_t)attn_gemm_nr(), K, N, j0, W, K, ncols);
}

void attn_gemm_pack_t(float *dst, size_t pstride, int K, int N, const float *W, int ldw) {
    pack_cols(dst, pstride, K, N, 0, W, ldw, N);
}

void attn_gemm_pack_n(float *dst, size_t pstride, int K, int N, const float *B, int ldb) {
    const int nr = attn_gemm_nr();
    for (int p = 0; p * nr < N; p++) {
        const int j0 = p * nr, cols = N - j0 < nr ? N - j0 : nr;
        float *d = dst + (size_t)p * pstride;
        for (int k = 0; k < K; k++, d += nr) {
            memcpy(d, B + (size_t)k * (size_t)ldb + (size_t)j0, (size_t)cols * sizeof *d);
            if (cols < nr) memset(d + cols, 0, (size_t)(nr - cols) * sizeof *d);
        }
    }
}

float attn_gemm_packed_at(const float *Bp, int K, int k, int j) {
    const int nr = attn_gemm_nr();
    return Bp[((size_t)(j / nr) * (size_t)K + (size_t)k) * (size_t)nr + (size_t)(j % nr)];
}

#ifdef GEMM_X86
/* Each kernel's tile height: rows of C a tile holds (AVX-512 6 x 32,
 * AVX2 3 x 16); the panel functions step by it and the driver splits each
 * panel's prefetch into parts by it. */
enum { MR512 = 6, MR256 = 3 };

static int gemm_mr(int nr) {
    return nr == 32 ? MR512 : MR256;
}

/* Store (add, when acc) rows x cols of a tile held in tmp [rows][nr], then
 * add bias[j] and multiply by mul[j] where they are given: the full tile's
 * vector steps, one lane at a time. */
static void tile_out(const float *tmp, int nr, float *C, int ldc, int rows, int cols, int acc,
                     const float *bias, const float *mul) {
    for (int r = 0; r < rows; r++) {
        float *c = C + (size_t)r * (size_t)ldc;
        const float *t = tmp + (size_t)r * (size_t)nr;
        for (int j = 0; j < cols; j++) {
            float v = acc ? c[j] + t[j] : t[j];
            if (bias) v = v + bias[j];
            if (mul) v = v * mul[j];
            c[j] = v;
        }
    }
}

/* The epilogue's row arrays (attn_gemm_post: the exponentials', the row
 * max's) from a tile's first row on; NULL where the epilogue has no such
 * step. */
typedef struct tile_exp {
    const float *shift, *limit;
    float *lanes;
    unsigned char *over;
    float *vmax;
} tile_exp;

/* The row max's lanes (attn_gemm_post's vmax) over rows x cols of C, a
 * tile's first column at a multiple of 16, lane l taking columns l, l +
 * 16, ...: for the pieces the vector steps do not store. */
static void vmax_rows(const float *C, int ldc, int rows, int cols, float *vmax) {
    for (int r = 0; r < rows; r++) {
        const float *c = C + (size_t)r * (size_t)ldc;
        float *m = vmax + (size_t)r * 16;
        for (int j = 0; j < cols; j++) m[j % 16] = c[j] > m[j % 16] ? c[j] : m[j % 16];
    }
}

/* Prefetch bytes [o, o + len) of p (at most its size), one line at a time. */
static void prefetch_part(const char *p, size_t size, size_t o, size_t len) {
    for (size_t e = o + len < size ? o + len : size; o < e; o += 64)
        __builtin_prefetch(p + o, 0, 2);
}

/* ex's arrays from `row` rows further on. */
static tile_exp tile_exp_at(const tile_exp *ex, size_t row) {
    return (tile_exp){ex->shift ? ex->shift + row : NULL, ex->limit ? ex->limit + row : NULL,
                      ex->lanes ? ex->lanes + row * 16 : NULL, ex->over ? ex->over + row : NULL,
                      ex->vmax ? ex->vmax + row * 16 : NULL};
}

/* The epilogue's row arrays of rows i0.. of post (attn_gemm_ex_post), the
 * steps it has not NULL. */
static tile_exp tile_exp_from(const attn_gemm_post *post, size_t i0) {
    const tile_exp all = {post->shift, post->limit, post->lanes, post->over, post->vmax};
    return tile_exp_at(&all, i0);
}

#define T512   __attribute__((target("avx512f")))
#define T256   __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* A tile of R rows x 2 vectors of columns (2L): row r of A at a + r*lda,
 * b [kc][2L] (a packed panel's rows). R is a constant in each instance (see
 * kern512/kern256), so the loops over rows unroll into registers. Two sums
 * per element of C, over even and over odd k, added at the end: half the
 * rounding error of one chain, at the same speed. Written once for both
 * vector widths, so both kernels do the same operations in the same order
 * and give the same bits. */
/* One k of a tile: row k0 of the panel piece (b + k0 * 2L) times element
 * k0 of each row of A, into the chains s0, s1. Its two B vectors are its
 * own, so the even step's registers are free again for the odd one. */
#define TILE_STEP(V, L, load, bcast, fmadd, k0, s0, s1)                                            \
    do {                                                                                           \
        const V b0 = load(b + (k0)*2 * L), b1 = load(b + (k0)*2 * L + L);                          \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                      \
            const V ak = bcast(a + r * lda + (k0));                                                \
            s0[r] = fmadd(ak, b0, s0[r]);                                                          \
            s1[r] = fmadd(ak, b1, s1[r]);                                                          \
        }                                                                                          \
    } while (0)

#define DEFINE_TILE(name, target, V, L, MAXR, zero, load, loadu, store, storeu, bcast, fmadd, add, \
                    mul, sub, set1, le_all, exp_pair, add_lanes, max_lanes)                        \
    target INLINE void name(const int R, int kc, const float *a, size_t lda, const float *b,       \
                            float *C, int ldc, int cols, int acc, const float *bias,               \
                            const float *mulv, const tile_exp *ex, const int exps) {               \
        V e0[MAXR], e1[MAXR], o0[MAXR], o1[MAXR];                                                  \
        /* C, added to at the end, on its way to L1 while the sums run */                          \
        if (acc) _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                             \
                __builtin_prefetch(C + (size_t)r * (size_t)ldc, 1, 3);                             \
                __builtin_prefetch(C + (size_t)r * (size_t)ldc + 2 * L - 1, 1, 3);                 \
            }                                                                                      \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) e0[r] = e1[r] = o0[r] = o1[r] =        \
            zero();                                                                                \
        int k = 0;                                                                                 \
        for (; k + 2 <= kc; k += 2) {                                                              \
            TILE_STEP(V, L, load, bcast, fmadd, 0, e0, e1);                                        \
            TILE_STEP(V, L, load, bcast, fmadd, 1, o0, o1);                                        \
            a += 2;                                                                                \
            b += 4 * L;                                                                            \
        }                                                                                          \
        if (k < kc) TILE_STEP(V, L, load, bcast, fmadd, 0, e0, e1);                                \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                      \
            e0[r] = add(e0[r], o0[r]);                                                             \
            e1[r] = add(e1[r], o1[r]);                                                             \
        }                                                                                          \
        if (cols == 2 * L) {                                                                       \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                  \
                float *c = C + (size_t)r * (size_t)ldc;                                            \
                if (acc) {                                                                         \
                    e0[r] = add(loadu(c), e0[r]);                                                  \
                    e1[r] = add(loadu(c + L), e1[r]);                                              \
                }                                                                                  \
                if (bias) {                                                                        \
                    e0[r] = add(e0[r], loadu(bias));                                               \
                    e1[r] = add(e1[r], loadu(bias + L));                                           \
                }                                                                                  \
                if (mulv) {                                                                        \
                    e0[r] = mul(e0[r], loadu(mulv));                                               \
                    e1[r] = mul(e1[r], loadu(mulv + L));                                           \
                }                                                                                  \
                if (ex && ex->vmax) /* the row's max, before any exponentials */                   \
                    max_lanes(ex->vmax + (size_t)r * 16, e0[r], e1[r]);                            \
                /* the exponentials, from the registers, or the plain product */                   \
                if (exps && ex->shift) {                                                           \
                    if (!le_all(e0[r], e1[r], set1(ex->limit[r]))) {                               \
                        ex->over[r] = 1;                                                           \
                    } else {                                                                       \
                        const V sh = set1(ex->shift[r]);                                           \
                        e0[r] = sub(e0[r], sh);                                                    \
                        e1[r] = sub(e1[r], sh);                                                    \
                        exp_pair(&e0[r], &e1[r]);                                                  \
                        add_lanes(ex->lanes + (size_t)r * 16, e0[r], e1[r]);                       \
                    }                                                                              \
                }                                                                                  \
                storeu(c, e0[r]);                                                                  \
                storeu(c + L, e1[r]);                                                              \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        if (exps && ex->shift) /* a narrow piece: not for the exponentials, stored plain */        \
            for (int r = 0; r < R; r++) ex->over[r] = 1;                                           \
        float tmp[MAXR * 2 * L] __attribute__((aligned(64)));                                      \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                      \
            store(tmp + r * 2 * L, e0[r]);                                                         \
            store(tmp + r * 2 * L + L, e1[r]);                                                     \
        }                                                                                          \
        tile_out(tmp, 2 * L, C, ldc, R, cols, acc, bias, mulv);                                    \
        if (ex && ex->vmax) vmax_rows(C, ldc, R, cols, ex->vmax);                                  \
    }

/* The exponential epilogue's steps on each width: whether every lane of a
 * and b is <= lim (false for NaN), and a row's piece added into its 16
 * lanes (a then b on AVX-512, whose 32 columns both fall on the 16 lanes;
 * on AVX2 a is lanes 0-7 and b lanes 8-15), as attention's exp-and-sum
 * kernels add, so that a row's sum has their bits. */
INLINE T512 int le_all512(__m512 a, __m512 b, __m512 lim) {
    return (__mmask16)(_mm512_cmp_ps_mask(a, lim, _CMP_LE_OQ) &
                       _mm512_cmp_ps_mask(b, lim, _CMP_LE_OQ)) == (__mmask16)0xffff;
}
INLINE T512 void add_lanes512(float *s, __m512 a, __m512 b) {
    _mm512_storeu_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(s), a), b));
}
/* The row max's step (attn_gemm_post's vmax): each lane m = x > m ? x : m,
 * which _mm*_max_ps(x, m) is (it returns m where either is NaN). */
INLINE T512 void max_lanes512(float *s, __m512 a, __m512 b) {
    _mm512_storeu_ps(s, _mm512_max_ps(a, _mm512_max_ps(b, _mm512_loadu_ps(s))));
}
INLINE T256 int le_all256(__m256 a, __m256 b, __m256 lim) {
    return _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(a, lim, _CMP_LE_OQ),
                                            _mm256_cmp_ps(b, lim, _CMP_LE_OQ))) == 0xff;
}
INLINE T256 void add_lanes256(float *s, __m256 a, __m256 b) {
    _mm256_storeu_ps(s, _mm256_add_ps(_mm256_loadu_ps(s), a));
    _mm256_storeu_ps(s + 8, _mm256_add_ps(_mm256_loadu_ps(s + 8), b));
}
INLINE T256 void max_lanes256(float *s, __m256 a, __m256 b) {
    _mm256_storeu_ps(s, _mm256_max_ps(a, _mm256_loadu_ps(s)));
    _mm256_storeu_ps(s + 8, _mm256_max_ps(b, _mm256_loadu_ps(s + 8)));
}

#define BCAST512(p) _mm512_set1_ps(*(p))
DEFINE_TILE(tile512, T512, __m512, 16, MR512, _mm512_setzero_ps, _mm512_load_ps, _mm512_loadu_ps,
            _mm512_store_ps, _mm512_storeu_ps, BCAST512, _mm512_fmadd_ps, _mm512_add_ps,
            _mm512_mul_ps, _mm512_sub_ps, _mm512_set1_ps, le_all512, exp16_pair, add_lanes512,
            max_lanes512)
DEFINE_TILE(tile256, T256, __m256, 8, MR256, _mm256_setzero_ps, _mm256_load_ps, _mm256_loadu_ps,
            _mm256_store_ps, _mm256_storeu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_add_ps,
            _mm256_mul_ps, _mm256_sub_ps, _mm256_set1_ps, le_all256, exp8_pair, add_lanes256,
            max_lanes256)

/* A row block's tiles over one panel's piece: rows 0 .. mc-1 of A (row r at
 * a + r*lda) times b [kc][nr], into C (row stride ldc), cols of its
 * columns, stored or (acc) added. bias, mul: the panel's columns of the
 * epilogue's vectors (attn_gemm_ex_post) or NULL, nr floats each, readable
 * whole. ex: the epilogue's row steps (the exponentials, the row max) from
 * the block's first row, or NULL. Each tile first prefetches its part (per
 * bytes) of the next panel's piece (piece bytes at next; none where next is
 * NULL), so that it comes from L2 rather than L3. */
typedef void panel_fn(int mc, int kc, const float *a, size_t lda, const float *b, float *C, int ldc,
                      int cols, int acc, const float *bias, const float *mul, const tile_exp *ex,
                      const char *next, size_t piece, size_t per);

/* Tile t's rows: tile512/tile256 with its height h a constant, so the loops
 * over rows unroll into registers; without the epilogue's row steps (EX
 * NULL, a constant there, so their code is not in these kernels' instances:
 * with the exponentials' code in them, the plain products ran 1.6% slower
 * at n = 512), with the exponentials (EXPS 1; and the row max where asked),
 * or with the row max alone (EXPS 0: without the exponentials' code). */
#define PANEL_TILE(tile, h, EX, EXPS)                                                              \
    tile(h, kc, a + (size_t)t * lda, lda, b, C + (size_t)t * (size_t)ldc, ldc, cols, acc, bias,    \
         mul, EX, EXPS)
/* ex (the tile's epilogue rows) and the prefetch, before tile t */
#define PANEL_BEFORE(MR)                                                                           \
    do {                                                                                           \
        if (ex0) te = tile_exp_at(ex0, (size_t)t), ex = &te;                                       \
        if (next) prefetch_part(next, piece, (size_t)(t / (MR)) * per, per);                       \
    } while (0)

/* AVX-512: a call a tile (its height from a switch), the panel's
 * loop over them outside it. */
#define KERN512_CASES(EX, EXPS)                                                                    \
    switch (h) {                                                                                   \
    case 1: tile512(1, kc, a, lda, b, C, ldc, cols, acc, bias, mul, EX, EXPS); break;              \
    case 2: tile512(2, kc, a, lda, b, C, ldc, cols, acc, bias, mul, EX, EXPS); break;              \
    case 3: tile512(3, kc, a, lda, b, C, ldc, cols, acc, bias, mul, EX, EXPS); break;              \
    case 4: tile512(4, kc, a, lda, b, C, ldc, cols, acc, bias, mul, EX, EXPS); break;              \
    case 5: tile512(5, kc, a, lda, b, C, ldc, cols, acc, bias, mul, EX, EXPS); break;              \
    default: tile512(6, kc, a, lda, b, C, ldc, cols, acc, bias, mul, EX, EXPS); break;             \
    }
#define DEFINE_PANEL512(name, kern, EX, EXPS)                                                      \
    T512 static void kern(int h, int kc, const float *a, size_t lda, const float *b, float *C,     \
                          int ldc, int cols, int acc, const float *bias, const float *mul,         \
                          const tile_exp *ex) {                                                    \
        (void)ex;                                                                                  \
        KERN512_CASES(EX, EXPS)                                                                    \
    }                                                                                              \
    static void name(int mc, int kc, const float *a, size_t lda, const float *b, float *C,         \
                     int ldc, int cols, int acc, const float *bias, const float *mul,              \
                     const tile_exp *ex0, const char *next, size_t piece, size_t per) {            \
        tile_exp te, *ex = NULL;                                                                   \
        for (int t = 0; t < mc; t += MR512) {                                                      \
            PANEL_BEFORE(MR512);                                                                   \
            kern(mc - t < MR512 ? mc - t : MR512, kc, a + (size_t)t * lda, lda, b,                 \
                 C + (size_t)t * (size_t)ldc, ldc, cols, acc, bias, mul, ex);                      \
        }                                                                                          \
    }
DEFINE_PANEL512(panel512, kern512, NULL, 0)
DEFINE_PANEL512(panel512_exp, kern512_exp, ex, 1)
DEFINE_PANEL512(panel512_max, kern512_max, ex, 0)

/* AVX2: the whole panel in one call, its whole tiles in a loop and the rows
 * left after it. The 3 x 16 tile does a quarter of the AVX-512 tile's sums,
 * so what a call costs beside them weighs four times as much, most where
 * the depth is short (the score products: d = 32 or 64). ATTN_GEMM=avx2
 * make bench-ab against a call a tile, AB_PHASES=1, both orders, same bits,
 * Zen 4: the attention phase 1.037-1.041 at n = 128 (d = 32), 1.027-1.028
 * at n = 512, whole passes 1.009-1.016 (n = 2048 with the averaged weights
 * 1.015-1.016). The AVX-512 kernel keeps a call a tile, its loop over them
 * here: with the loop inside its call, its projections ran 1-2% slower
 * (0.978-0.992), and one tile a call through that loop 4% slower; as it is,
 * its passes ran 0.994-1.012. */
#define DEFINE_PANEL256(name, EX, EXPS)                                                            \
    T256 static void name(int mc, int kc, const float *a, size_t lda, const float *b, float *C,    \
                          int ldc, int cols, int acc, const float *bias, const float *mul,         \
                          const tile_exp *ex0, const char *next, size_t piece, size_t per) {       \
        tile_exp te, *ex = NULL;                                                                   \
        int t = 0;                                                                                 \
        for (; t + MR256 <= mc; t += MR256) {                                                      \
            PANEL_BEFORE(MR256);                                                                   \
            PANEL_TILE(tile256, MR256, EX, EXPS);                                                  \
        }                                                                                          \
        if (t < mc) {                                                                              \
            PANEL_BEFORE(MR256);                                                                   \
            if (mc - t == 2)                                                                       \
                PANEL_TILE(tile256, 2, EX, EXPS);                                                  \
            else                                                                                   \
                PANEL_TILE(tile256, 1, EX, EXPS);                                                  \
        }                                                                                          \
        (void)ex;                                                                                  \
    }
DEFINE_PANEL256(panel256, NULL, 0)
DEFINE_PANEL256(panel256_exp, ex, 1)
DEFINE_PANEL256(panel256_max, ex, 0)

/* Each kernel's panel functions: plain, with the exponentials, with the
 * row max alone. */
static panel_fn *const panels[][3] = {
    [GEMM_AVX2] = {panel256, panel256_exp, panel256_max},
    [GEMM_AVX512] = {panel512, panel512_exp, panel512_max},
};
#endif

static size_t round_line(size_t bytes) {
    return bytes / 64 * 64;
}

#ifdef GEMM_X86
/* The epilogue's vectors for the columns j0 .. j0+cols-1 of a panel nr
 * wide, into bias and mul (nr floats each, zeros and ones past cols);
 * *pb, *pm: them, or NULL where the epilogue has no such step there. */
static void post_panel(const attn_gemm_post *post, int j0, int cols, int nr, float *bias,
                       float *mul, const float **pb, const float **pm) {
    *pb = *pm = NULL;
    if (!post) return;
    if (post->bias) {
        for (int l = 0; l < nr; l++) bias[l] = l < cols ? post->bias[j0 + l] : 0.0f;
        *pb = bias;
    }
    if (j0 < post->scale_cols) {
        for (int l = 0; l < nr; l++) mul[l] = j0 + l < post->scale_cols ? post->scale : 1.0f;
        *pm = mul;
    }
}
#endif

void attn_gemm_ex(int M, int N, int K, const float *A, int lda, const float *Bp, size_t pstride,
                  float *C, int ldc, int add) {
    attn_gemm_ex_post(M, N, K, A, lda, Bp, pstride, C, ldc, add, NULL);
}

void attn_gemm_ex_post(int M, int N, int K, const float *A, int lda, const float *Bp,
                       size_t pstride, float *C, int ldc, int add, const attn_gemm_post *post) {
#ifdef GEMM_X86
    const int id = kernel();
    if (id == GEMM_NONE || M <= 0 || N <= 0) return;
    const int nr = attn_gemm_nr(), mr = gemm_mr(nr);
    panel_fn *const *pf = panels[id];
    float pbias[32] __attribute__((aligned(64))), pmul[32] __attribute__((aligned(64)));
    const float *tb, *tm;
    if (K <= 0) { /* a product of zeros: C untouched when added to, as sgemm with beta = 1 */
        if (post && post->shift) { /* not for the exponentials */
            memset(post->over, 1, (size_t)M);
            return;
        }
        if (add && !post) return;
        static const float zero[32 * MR512];
        for (int j0 = 0; j0 < N; j0 += nr) {
            const int cols = N - j0 < nr ? N - j0 : nr;
            post_panel(post, j0, cols, nr, pbias, pmul, &tb, &tm);
            for (int i = 0; i < M; i += mr)
                tile_out(zero, nr, C + (size_t)i * (size_t)ldc + j0, ldc, M - i < mr ? M - i : mr,
                         cols, add, tb, tm);
        }
        if (post && post->vmax) vmax_rows(C, ldc, M, N, post->vmax);
        return;
    }
    /* Row blocks of MC (mc_rows) outermost, then groups of NG columns,
     * then depth blocks (each element still adds them in order): a KC x NG
     * piece of B (GROUP_BYTES) stays in L2 while the row block's tiles pass
     * over it, and the block's part of C (MC x NG, MC KiB) stays in L2 from
     * one depth block to the next, beside its A (MC x KC, as much). B comes
     * from L3 once per row block, a stream the prefetchers keep ahead of:
     * row blocks of a quarter of L2 each for A and C (252 rows on a 1 MiB
     * L2) rather than 96 read it 2.6 times less often, and took 1-4% off
     * whole passes (n = 512 to 2048, Zen 5, make bench-ab, same bits);
     * 480 rows there lost most of that again. Groups
     * outermost (B from L3 once per call, but the group's C over all the
     * call's rows, 512 KiB at 512 rows, and that many rows of A sharing L2
     * with it) were 1.7-3.2% slower at n = 2048 on the Xeon (make bench-ab,
     * same bits); depth blocks outermost (C back from L3 for each) 2-5%
     * slower, n = 128..2048. A last block shorter than a quarter of MC
     * joins the one before it rather than streaming B again for a few
     * rows (512 rows had been 252 + 252 + 8, 1024 rows 4 x 252 + 16):
     * make bench-ab, both orders, same bits, Zen 4: n = 512 1.009-1.010,
     * n = 1024 1.003-1.004, n = 2048 1.005-1.016 without weights and
     * 1.012-1.020 with the averaged ones; the AVX2 kernel at n = 512
     * 1.004-1.007. */
    const int ng = GROUP_BYTES / (KC * (int)sizeof(float)) / nr * nr;
    const int mcr = mc_rows;
    for (int i0 = 0, mc; i0 < M; i0 += mc) {
        mc = M - i0 < mcr ? M - i0 : mcr;
        if (M - i0 - mc < mcr / 4) mc = M - i0; /* a short last block joins this one */
        for (int g0 = 0; g0 < N; g0 += ng) {
            const int g1 = N - g0 < ng ? N : g0 + ng;
            for (int k0 = 0; k0 < K; k0 += KC) {
                const int kc = K - k0 < KC ? K - k0 : KC;
                const size_t piece = (size_t)kc * (size_t)nr * sizeof(float); /* of a panel */
                const float *ab = A + (size_t)i0 * (size_t)lda + (size_t)k0;
                /* each tile prefetches its part of the next panel's piece */
                const size_t per = round_line(piece / (size_t)((mc + mr - 1) / mr) + 63);
                for (int j0 = g0; j0 < g1; j0 += nr) {
                    const int cols = N - j0 < nr ? N - j0 : nr;
                    const float *b = Bp + (size_t)(j0 / nr) * pstride + (size_t)k0 * (size_t)nr;
                    float *c = C + (size_t)i0 * (size_t)ldc + (size_t)j0;
                    const char *next = (const char *)(b + pstride);
                    /* the epilogue after the last depth block's sums */
                    const attn_gemm_post *last = k0 + kc == K ? post : NULL;
                    post_panel(last, j0, cols, nr, pbias, pmul, &tb, &tm);
                    /* plain, the exponentials, the row max alone (panels) */
                    const int steps = !last ? 0 : last->shift ? 1 : last->vmax ? 2 : 0;
                    const tile_exp te0 = steps ? tile_exp_from(last, (size_t)i0) : (tile_exp){0};
                    pf[steps](mc, kc, ab, (size_t)lda, b, c, ldc, cols, add || k0 > 0, tb, tm,
                              steps ? &te0 : NULL, j0 + nr < N ? next : NULL, piece, per);
                }
            }
        }
    }
#else
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)Bp, (void)pstride, (void)C, (void)ldc,
        (void)add, (void)post;
#endif
}

void attn_gemm(int M, int N, int K, const float *A, int lda, const float *Bp, float *C, int ldc) {
    attn_gemm_ex(M, N, K, A, lda, Bp, (size_t)K * (size_t)attn_gemm_nr(), C, ldc, 0);
}
