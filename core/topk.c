/* topk.c - a row's k best keys as its key blocks stream by (topk.h): in
 * 16 sorted slots held in AVX-512 or AVX2 registers while a block is
 * offered, or in a heap.
 */
#include "topk.h"

#include "attention.h"
#include "isa.h"
#include "vec.h"
#include "vexp.h"

#include <math.h>
#include <string.h>
/* A (value, key index) pair as one integer key, larger = better: the
 * value's bits made monotonic as an unsigned number above, the index's
 * complement below (a lower index is better among equal values). Every
 * comparison of the heap is then one integer compare the compiler turns
 * into a conditional move: measured on rows of 2,048 keys, the sift-down of
 * float-and-index pairs took 8% of a top-k pass in branch mispredictions. */
static inline uint64_t tk_key(float v, int j) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (uint64_t)u << 32 | (uint32_t) ~(uint32_t)j;
}
static inline float tk_value(uint64_t key) {
    uint32_t u = (uint32_t)(key >> 32);
    u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}
static inline int32_t tk_index(uint64_t key) {
    return (int32_t) ~(uint32_t)key;
}

/* A min-heap of cnt keys (the root is the worst): sift h[i] down. */
static void tk_down(uint64_t *h, int cnt, int i) {
    const uint64_t x = h[i];
    for (;;) {
        int ch = 2 * i + 1;
        if (ch >= cnt) break;
        if (ch + 1 < cnt) ch += h[ch + 1] < h[ch];
        if (h[ch] >= x) break;
        h[i] = h[ch];
        i = ch;
    }
    h[i] = x;
}

/* Append key to a heap of *cnt < k keys. */
static void tk_heap_push(uint64_t *h, int *cnt, uint64_t key) {
    int i = (*cnt)++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (h[up] <= key) break;
        h[i] = h[up];
        i = up;
    }
    h[i] = key;
}

/* s[j] into a full heap of k keys if it beats the root's value t (equal
 * to it, it has the higher index: keys come in ascending order); returns
 * the root's value after. */
static inline float tk_try(uint64_t *h, int k, float t, const float *s, size_t j, int j0) {
    if (!(s[j] > t)) return t;
    h[0] = tk_key(s[j], j0 + (int)j);
    tk_down(h, k, 0);
    return tk_value(h[0]);
}

/* k <= TK_LANES on a CPU with AVX-512 or AVX2: a row's keys ascending in TK_LANES
 * slots, the k kept in the last k (the worst at slot TK_LANES - k), the
 * slots before them and the kept slots not yet filled holding 0, which no
 * key is (a key's index part is the complement of an index below 2^31).
 * The 16 slots are two registers while a block is offered. Inserting key
 * x, better than the worst, drops that slot and moves the ones below x's
 * place down by one, all at once: two compares, two permutes and four
 * masked moves, and no branch that depends on the keys. Measured on rows
 * of 8,192 scores from a pool of 256 random rows (so the branch predictor
 * cannot learn them), one thread: the heap 0.48-0.56 ns a score, most of it
 * mispredicted branches in its sift-down, two AVX-512 registers 0.36-0.37,
 * four AVX2 ones 0.45-0.49 (AVX2 code on the same CPU); a top-k pass at
 * 8,192 tokens over the pass without weights 1.26-1.34 -> 1.13-1.28 with
 * AVX-512 (three alternated rounds of three), 1.27-1.34 -> 1.18-1.30 with
 * AVX2 (two rounds of three). */
static int tk_lanes_mode = 1; /* attn_topk_lanes: 0 heaps, 1 the best the CPU has, 2 AVX2 */

int attn_topk_lanes(int mode) {
    const int was = tk_lanes_mode;
    tk_lanes_mode = mode;
    return was;
}

/* Which slots a top-k of at most TK_LANES keys uses: 512 (AVX-512), 2
 * (AVX2) or 0 (heaps). */
static int tk_lanes_isa(void) {
#ifdef ATTN_VEXP
    const attn_isa isa = isa_now();
    if (tk_lanes_mode == 1 && isa == ATTN_ISA_AVX512) return 512;
    if (tk_lanes_mode != 0 && isa >= ATTN_ISA_AVX2) return 2;
#endif
    return 0;
}

/* The slots a top-k of k keys uses: tk_lanes_isa()'s, or 0 (a heap). */
static int tk_lanes_for(int k) {
    return k <= TK_LANES ? tk_lanes_isa() : 0;
}

static int tk_lanes_ok(int k) {
    return tk_lanes_for(k) != 0;
}

size_t tk_stride(int k) {
    return tk_lanes_ok(k) ? (size_t)TK_LANES : (size_t)k;
}

#ifdef ATTN_VEXP
__attribute__((target("avx512f"))) static inline void tk_lanes_insert(__m512i *lo, __m512i *hi,
                                                                      int w, uint64_t x) {
    const __m512i X = _mm512_set1_epi64((long long)x);
    const unsigned m =
        (unsigned)_mm512_cmplt_epu64_mask(*lo, X) | (unsigned)_mm512_cmplt_epu64_mask(*hi, X) << 8;
    const int p = __builtin_popcount(m); /* slots below x: x goes to slot p - 1 */
    const unsigned sm = ((1u << (p - 1)) - 1u) & ~((1u << w) - 1u), xm = 1u << (p - 1);
    const __m512i shlo =
        _mm512_permutex2var_epi64(*lo, _mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 8), *hi);
    const __m512i shhi = _mm512_permutexvar_epi64(_mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 7), *hi);
    *lo = _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(*lo, (__mmask8)sm, shlo), (__mmask8)xm, X);
    *hi = _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(*hi, (__mmask8)(sm >> 8), shhi),
                                (__mmask8)(xm >> 8), X);
}

/* The key in slot w. */
__attribute__((target("avx512f"))) static inline uint64_t tk_lanes_at(__m512i lo, __m512i hi,
                                                                      int w) {
    const __m512i v = _mm512_permutexvar_epi64(_mm512_set1_epi64(w & 7), w < 8 ? lo : hi);
    return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(v));
}

__attribute__((target("avx512f"))) static void tk_lanes_push(uint64_t *h, int k, uint64_t key) {
    __m512i lo = _mm512_loadu_si512(h), hi = _mm512_loadu_si512(h + 8);
    tk_lanes_insert(&lo, &hi, TK_LANES - k, key);
    _mm512_storeu_si512(h, lo);
    _mm512_storeu_si512(h + 8, hi);
}

/* tk_offer's contract on the slots, whatever holds them: st is the
 * registers (loaded by the caller, stored after), insert/at/above the
 * instruction set's functions, all inlined into each caller. */
static inline __attribute__((always_inline)) void
tk_lanes_offer_with(void *st, int *cnt, int k, const float *s, size_t len, int j0,
                    void (*insert)(void *st, int w, uint64_t x),
                    uint64_t (*at)(const void *st, int w),
                    unsigned (*above)(const float *s, float t)) {
    const int w = TK_LANES - k;
    size_t j = 0;
    for (; *cnt < k && j < len; j++, (*cnt)++) insert(st, w, tk_key(s[j], j0 + (int)j));
    float t = tk_value(at(st, w));
    for (; j < len && j % 16; j++)
        if (s[j] > t) {
            insert(st, w, tk_key(s[j], j0 + (int)j));
            t = tk_value(at(st, w));
        }
    for (; j + 16 <= len; j += 16)
        for (unsigned m = above(s + j, t); m; m &= m - 1) {
            const size_t i = j + (size_t)__builtin_ctz(m);
            if (!(s[i] > t)) continue; /* the worst rose past it */
            insert(st, w, tk_key(s[i], j0 + (int)i));
            t = tk_value(at(st, w));
        }
    for (; j < len; j++)
        if (s[j] > t) {
            insert(st, w, tk_key(s[j], j0 + (int)j));
            t = tk_value(at(st, w));
        }
}

__attribute__((target("avx512f"))) static inline void tk_lanes_insert_st(void *st, int w,
                                                                         uint64_t x) {
    __m512i *r = st;
    tk_lanes_insert(&r[0], &r[1], w, x);
}
__attribute__((target("avx512f"))) static inline uint64_t tk_lanes_at_st(const void *st, int w) {
    const __m512i *r = st;
    return tk_lanes_at(r[0], r[1], w);
}
__attribute__((target("avx512f"))) static inline unsigned tk_lanes_above(const float *s, float t) {
    return _mm512_cmp_ps_mask(_mm512_loadu_ps(s), _mm512_set1_ps(t), _CMP_GT_OQ);
}
__attribute__((target("avx512f"))) static void tk_lanes_offer(uint64_t *h, int *cnt, int k,
                                                              const float *s, size_t len, int j0) {
    __m512i r[2] = {_mm512_loadu_si512(h), _mm512_loadu_si512(h + 8)};
    tk_lanes_offer_with(r, cnt, k, s, len, j0, tk_lanes_insert_st, tk_lanes_at_st, tk_lanes_above);
    _mm512_storeu_si512(h, r[0]);
    _mm512_storeu_si512(h + 8, r[1]);
}

/* The same 16 slots in four AVX2 registers: AVX2 compares 64-bit lanes only
 * as signed numbers, so both sides have their top bit flipped first. */
__attribute__((target("avx2"))) static inline void tk_lanes2_insert(__m256i r[4], int w,
                                                                    uint64_t x) {
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ULL);
    const __m256i X = _mm256_set1_epi64x((long long)x), Xs = _mm256_xor_si256(X, sign);
    unsigned m = 0;
    for (int q = 0; q < 4; q++)
        m |= (unsigned)_mm256_movemask_pd(
                 _mm256_castsi256_pd(_mm256_cmpgt_epi64(Xs, _mm256_xor_si256(r[q], sign))))
             << (4 * q);
    const int p = __builtin_popcount(m); /* slots below x: x goes to slot p - 1 */
    const __m256i W1 = _mm256_set1_epi64x(w - 1), P1 = _mm256_set1_epi64x(p - 1);
    for (int q = 0; q < 4; q++) { /* r[q + 1] is read before it is written */
        const __m256i ix = _mm256_setr_epi64x(4 * q, 4 * q + 1, 4 * q + 2, 4 * q + 3);
        __m256i sh = _mm256_permute4x64_epi64(r[q], _MM_SHUFFLE(3, 3, 2, 1));
        if (q < 3) sh = _mm256_blend_epi32(sh, _mm256_permute4x64_epi64(r[q + 1], 0), 0xC0);
        const __m256i msh =
            _mm256_and_si256(_mm256_cmpgt_epi64(ix, W1), _mm256_cmpgt_epi64(P1, ix));
        r[q] = _mm256_blendv_epi8(r[q], sh, msh);
        r[q] = _mm256_blendv_epi8(r[q], X, _mm256_cmpeq_epi64(ix, P1));
    }
}

/* The key in slot w. */
__attribute__((target("avx2"))) static inline uint64_t tk_lanes2_at(const __m256i r[4], int w) {
    const __m256i v = (w >> 2) == 0 ? r[0] : (w >> 2) == 1 ? r[1] : (w >> 2) == 2 ? r[2] : r[3];
    const int e = 2 * (w & 3);
    const __m256i one =
        _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(e, e + 1, 0, 0, 0, 0, 0, 0));
    return (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(one));
}

/* Bit l set when s[l] > t, for s[0..16). */
__attribute__((target("avx2"))) static inline unsigned tk_lanes2_above(const float *s, float t) {
    const __m256 tv = _mm256_set1_ps(t);
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(s), tv, _CMP_GT_OQ)) |
           (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(s + 8), tv, _CMP_GT_OQ)) << 8;
}

__attribute__((target("avx2"))) static void tk_lanes2_push(uint64_t *h, int k, uint64_t key) {
    __m256i r[4];
    for (int q = 0; q < 4; q++) r[q] = _mm256_loadu_si256((const __m256i *)(h + 4 * q));
    tk_lanes2_insert(r, TK_LANES - k, key);
    for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(h + 4 * q), r[q]);
}

__attribute__((target("avx2"))) static inline void tk_lanes2_insert_st(void *st, int w,
                                                                       uint64_t x) {
    tk_lanes2_insert(st, w, x);
}
__attribute__((target("avx2"))) static inline uint64_t tk_lanes2_at_st(const void *st, int w) {
    return tk_lanes2_at(st, w);
}
/* tk_lanes_offer on AVX2. */
__attribute__((target("avx2"))) static void tk_lanes2_offer(uint64_t *h, int *cnt, int k,
                                                            const float *s, size_t len, int j0) {
    __m256i r[4];
    for (int q = 0; q < 4; q++) r[q] = _mm256_loadu_si256((const __m256i *)(h + 4 * q));
    tk_lanes_offer_with(r, cnt, k, s, len, j0, tk_lanes2_insert_st, tk_lanes2_at_st,
                        tk_lanes2_above);
    for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(h + 4 * q), r[q]);
}
#endif

/* Add key to a row's kept keys while fewer than k are kept. */
static void tk_push(uint64_t *h, int *cnt, int k, uint64_t key) {
#ifdef ATTN_VEXP
    const int isa = tk_lanes_for(k);
    if (isa) {
        if (isa == 512)
            tk_lanes_push(h, k, key);
        else
            tk_lanes2_push(h, k, key);
        (*cnt)++;
        return;
    }
#endif
    tk_heap_push(h, cnt, key);
}

/* Offer s[0..len), the values of keys j0, j0+1, ..., to a heap of *cnt
 * keys that holds at most k. Once it is full, whole chunks of VL values
 * are tested against the root at once (vectorised; a row of a long
 * sequence rarely holds a candidate), and a chunk that holds one lane by
 * lane, the root rising as candidates enter. */
ISA_BODY void tk_heap_offer_body(uint64_t *h, int *cnt, int k, const float *s, size_t len, int j0) {
    size_t j = 0;
    for (; *cnt < k && j < len; j++) tk_heap_push(h, cnt, tk_key(s[j], j0 + (int)j));
    if (j == len) return;
    float t = tk_value(h[0]);
    for (; j < len && j % VL; j++) t = tk_try(h, k, t, s, j, j0);
    for (; j + VL <= len; j += VL) {
        unsigned above = 0; /* the lanes over the root's value as the chunk starts */
        for (int l = 0; l < VL; l++) above |= (unsigned)(s[j + l] > t) << l;
        for (; above; above &= above - 1)
            t = tk_try(h, k, t, s, j + (size_t)__builtin_ctz(above), j0);
    }
    for (; j < len; j++) t = tk_try(h, k, t, s, j, j0);
}
ISA_COPIES_VOID(tk_heap_offer, (uint64_t * h, int *cnt, int k, const float *s, size_t len, int j0),
                (h, cnt, k, s, len, j0));

/* The worst of a full row's k kept keys' values: in the slots, the lowest
 * one in use (TK_LANES - k); in a heap, the root. */
float tk_worst(const uint64_t *h, int k) {
    return tk_value(tk_lanes_for(k) ? h[TK_LANES - k] : h[0]);
}

/* Offer s[0..len), the values of keys j0, j0+1, ..., to a row's kept keys
 * (at most k): its slots or its heap. */
void tk_offer(uint64_t *h, int *cnt, int k, const float *s, size_t len, int j0) {
#ifdef ATTN_VEXP
    const int isa = tk_lanes_for(k);
    if (isa) {
        if (isa == 512)
            tk_lanes_offer(h, cnt, k, s, len, j0);
        else
            tk_lanes2_offer(h, cnt, k, s, len, j0);
        return;
    }
#endif
    tk_heap_offer_by_isa[isa_now()](h, cnt, k, s, len, j0);
}

/* Keys [j0, j1) of a block skipped because it is fully masked: each is
 * offered as x, a masked key's score (-inf) or weight (0). */
void tk_pad(uint64_t *h, int *cnt, int k, int j0, int j1, float x) {
    for (int j = j0; j < j1 && *cnt < k; j++) tk_push(h, cnt, k, tk_key(x, j));
}

/* The full heap of k keys into the row's answer, best first (heapsort:
 * the root, the worst, goes last each time). */
void tk_emit(uint64_t *h, int k, float *v, int32_t *ix) {
    if (tk_lanes_ok(k)) { /* sorted already: the best is the last slot */
        for (int q = 0; q < k; q++) {
            v[q] = tk_value(h[TK_LANES - 1 - q]);
            ix[q] = tk_index(h[TK_LANES - 1 - q]);
        }
        return;
    }
    for (int end = k - 1; end > 0; end--) {
        const uint64_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        tk_down(h, end, 0);
    }
    for (int q = 0; q < k; q++) {
        v[q] = tk_value(h[q]);
        ix[q] = tk_index(h[q]);
    }
}

/* A row's k best scores into its weights, given the row's max and sum: the
 * dense path's arithmetic (exp(s - max), times 1/sum). exp is monotonic
 * but float rounding can make neighbours equal, so the order is settled
 * again on the weights themselves (an insertion sort of an almost sorted
 * list): weight descending, then lower index. */
void tk_finish(uint64_t *h, int k, float mx, float sum, float *v, int32_t *ix) {
    tk_emit(h, k, v, ix);
    if (mx == -INFINITY) { /* every key masked: zeros at 0..k-1, as sorted */
        memset(v, 0, (size_t)k * sizeof *v);
        return;
    }
    vec_exp_sum(v, v, (size_t)k, mx);
    vec_scale(v, (size_t)k, 1.0f / sum);
    for (int i = 1; i < k; i++) {
        const float x = v[i];
        const int32_t xi = ix[i];
        int j = i;
        for (; j > 0 && (v[j - 1] < x || (v[j - 1] == x && ix[j - 1] > xi)); j--) {
            v[j] = v[j - 1];
            ix[j] = ix[j - 1];
        }
        v[j] = x;
        ix[j] = xi;
    }
}
