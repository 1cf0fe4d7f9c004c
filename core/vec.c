/* vec.c - the forward pass's vector kernels (vec.h): max, exp-and-sum,
 * scale, axpy, masking, a row's softmax, and the exponentials behind them,
 * written once for one lane (exp_lane, the portable kernels) and with
 * AVX-512 and AVX2 intrinsics (vexp.h), which give the same bits.
 */
#include "vec.h"

#include "attention.h"
#include "isa.h"
#include "vexp.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float bits_to_float(int32_t i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

/* e^x for one lane. Range reduction x = k ln2 + r, |r| <= ln2/2 (ln2 split in
 * two so k*ln2_hi is exact), e^r by its Taylor series to degree 7 (truncation
 * below 1e-8 relative), then 2^k applied as two factors 2^(k/2) and 2^(k-k/2)
 * so that results near overflow and in the subnormal range get exactly one
 * rounding. x is clamped to [-110, 89]: below -104 e^x rounds to 0 (so -inf
 * gives exactly 0), above 88.73 it is inf. NaN is passed through. (The
 * selects vectorise because vec.c is built with -fno-trapping-math.) */
static inline __attribute__((always_inline)) float exp_lane(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f;     /* 355/512, 9 significant bits */
    const float ln2_lo = -2.12194440e-4f;  /* ln2 - ln2_hi */
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x > -110.0f ? x : -110.0f;  /* NaN becomes -110 here, and x again at the end */
    xc = xc < 89.0f ? xc : 89.0f;
    const float kf = (xc * log2e + round_magic) - round_magic;
    float r = xc - kf * ln2_hi;
    r = r - kf * ln2_lo;
    float q = 1.0f / 5040.0f;
    q = q * r + 1.0f / 720.0f;
    q = q * r + 1.0f / 120.0f;
    q = q * r + 1.0f / 24.0f;
    q = q * r + 1.0f / 6.0f;
    q = q * r + 0.5f;
    const float p = 1.0f + (r + (r * r) * q);
    const int32_t k = (int32_t)kf;
    const int32_t k1 = k / 2, k2 = k - k1; /* each in [-80, 64]: normal powers of two */
    const float y =
        p * bits_to_float((k1 + 127) * (1 << 23)) * bits_to_float((k2 + 127) * (1 << 23));
    return isunordered(x, x) ? x : y;
}

/* Largest value of x[0..len), -inf when every value is -inf (len >= 1). */
ISA_BODY float vec_max_body(const float *x, size_t len) {
    /* four vectors of partial maxima, so the compares overlap rather than
     * wait on one register; the largest value is the same in any order */
    float p0[VL], p1[VL], p2[VL], p3[VL];
    for (int l = 0; l < VL; l++) p0[l] = p1[l] = p2[l] = p3[l] = -INFINITY;
    size_t i = 0;
    for (; i + 4 * VL <= len; i += 4 * VL) {
        const float *x0 = x + i, *x1 = x0 + VL, *x2 = x1 + VL, *x3 = x2 + VL;
        for (int l = 0; l < VL; l++) p0[l] = x0[l] > p0[l] ? x0[l] : p0[l];
        for (int l = 0; l < VL; l++) p1[l] = x1[l] > p1[l] ? x1[l] : p1[l];
        for (int l = 0; l < VL; l++) p2[l] = x2[l] > p2[l] ? x2[l] : p2[l];
        for (int l = 0; l < VL; l++) p3[l] = x3[l] > p3[l] ? x3[l] : p3[l];
    }
    for (; i + VL <= len; i += VL)
        for (int l = 0; l < VL; l++) p0[l] = x[i + l] > p0[l] ? x[i + l] : p0[l];
    for (int l = 0; l < VL; l++) {
        const float a = p0[l] > p1[l] ? p0[l] : p1[l], b = p2[l] > p3[l] ? p2[l] : p3[l];
        p0[l] = a > b ? a : b;
    }
    float mx = -INFINITY;
    for (int l = 0; l < VL; l++) mx = p0[l] > mx ? p0[l] : mx;
    for (; i < len; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

/* y[i] = e^(x[i] - shift) for i in [0, len), returning the sum of the y.
 * y may equal x (in place). */
static float vec_exp_sum_portable(float *y, const float *x, size_t len, float shift) {
    float part[VL];
    for (int l = 0; l < VL; l++) part[l] = 0.0f;
    size_t i = 0;
    for (; i + VL <= len; i += VL) {
        float t[VL]; /* a local copy keeps in-place calls vectorisable */
        for (int l = 0; l < VL; l++) t[l] = x[i + l] - shift;
        for (int l = 0; l < VL; l++) t[l] = exp_lane(t[l]);
        for (int l = 0; l < VL; l++) {
            y[i + l] = t[l];
            part[l] += t[l];
        }
    }
    float sum = 0.0f;
    for (; i < len; i++) {
        float e = exp_lane(x[i] - shift);
        y[i] = e;
        sum += e;
    }
    for (int l = 0; l < VL; l++) sum += part[l];
    return sum;
}

/* y[i] *= a for i in [0, len). */
ISA_BODY void vec_scale_body(float *y, size_t len, float a) {
    size_t i = 0;
    for (; i + VL <= len; i += VL)
        for (int l = 0; l < VL; l++) y[i + l] *= a;
    for (; i < len; i++) y[i] *= a;
}

/* s[i] *= inv, then avg[i] += a * s[i] (avg[i] = a * s[i] when first),
 * for i in [0, len): a softmax row's scaling and its share of the head
 * average in one pass while the row is in L1, with vec_scale's and
 * vec_axpy's rounding (on a zeroed avg, a * s[i] added to 0 rounds as
 * a * s[i] alone). s and avg do not overlap. */
ISA_BODY void vec_scale_avg_body(float *restrict s, float *restrict avg, size_t len, float inv,
                                 float a, int first) {
    size_t i = 0;
    if (first) {
        for (; i + VL <= len; i += VL)
            for (int l = 0; l < VL; l++) {
                const float t = s[i + l] * inv;
                s[i + l] = t;
                avg[i + l] = a * t;
            }
        for (; i < len; i++) {
            s[i] *= inv;
            avg[i] = a * s[i];
        }
        return;
    }
    for (; i + VL <= len; i += VL)
        for (int l = 0; l < VL; l++) {
            const float t = s[i + l] * inv;
            s[i + l] = t;
            avg[i + l] += a * t;
        }
    for (; i < len; i++) {
        s[i] *= inv;
        avg[i] += a * s[i];
    }
}

/* y[i] += a * x[i] for i in [0, len); x and y do not overlap. */
ISA_BODY void vec_axpy_body(float *restrict y, const float *restrict x, size_t len, float a) {
    size_t i = 0;
    for (; i + VL <= len; i += VL)
        for (int l = 0; l < VL; l++) y[i + l] += a * x[i + l];
    for (; i < len; i++) y[i] += a * x[i];
}

/* y[i] = -inf where mask[i] is nonzero, for i in [0, len). */
ISA_BODY void vec_mask_bool_body(float *restrict y, const uint8_t *restrict mask, size_t len) {
    size_t i = 0;
    for (; i + VL <= len; i += VL)
        for (int l = 0; l < VL; l++) y[i + l] = mask[i + l] ? -INFINITY : y[i + l];
    for (; i < len; i++) y[i] = mask[i] ? -INFINITY : y[i];
}

/* y[i] = -inf for i in [0, len). */
ISA_BODY void vec_fill_ninf_body(float *y, size_t len) {
    size_t i = 0;
    for (; i + VL <= len; i += VL)
        for (int l = 0; l < VL; l++) y[i + l] = -INFINITY;
    for (; i < len; i++) y[i] = -INFINITY;
}

/* Each kernel above in its three copies (isa.h), the level's run. */
ISA_COPIES(float, vec_max, (const float *x, size_t len), (x, len));
ISA_COPIES_VOID(vec_scale, (float *y, size_t len, float a), (y, len, a));
ISA_COPIES_VOID(vec_scale_avg,
                (float *restrict s, float *restrict avg, size_t len, float inv, float a, int first),
                (s, avg, len, inv, a, first));
ISA_COPIES_VOID(vec_axpy, (float *restrict y, const float *restrict x, size_t len, float a),
                (y, x, len, a));
ISA_COPIES_VOID(vec_mask_bool, (float *restrict y, const uint8_t *restrict mask, size_t len),
                (y, mask, len));
ISA_COPIES_VOID(vec_fill_ninf, (float *y, size_t len), (y, len));

float vec_max(const float *x, size_t len) {
    return vec_max_by_isa[isa_now()](x, len);
}

void vec_scale(float *y, size_t len, float a) {
    vec_scale_by_isa[isa_now()](y, len, a);
}

void vec_scale_avg(float *restrict s, float *restrict avg, size_t len, float inv, float a,
                   int first) {
    vec_scale_avg_by_isa[isa_now()](s, avg, len, inv, a, first);
}

void vec_axpy(float *restrict y, const float *restrict x, size_t len, float a) {
    vec_axpy_by_isa[isa_now()](y, x, len, a);
}

void vec_mask_bool(float *restrict y, const uint8_t *restrict mask, size_t len) {
    vec_mask_bool_by_isa[isa_now()](y, mask, len);
}

void vec_fill_ninf(float *y, size_t len) {
    vec_fill_ninf_by_isa[isa_now()](y, len);
}

#ifdef ATTN_VEXP
/* vec_exp_sum_portable's contract; the tail is one masked step. */
__attribute__((target("avx512f"))) static float vec_exp_sum_avx512(float *y, const float *x,
                                                                   size_t len, float shift) {
    const __m512 s = _mm512_set1_ps(shift);
    __m512 acc = _mm512_setzero_ps();
    size_t i = 0;
    /* two vectors a step: their exponentials overlap, and the sum still
     * adds one vector at a time in order (the same bits as one a step);
     * steps whose lanes are all in range (every step of a softmax row but
     * those with masked keys) skip the clamps, off the chain: 0.161 ->
     * 0.147 ns an exp on rows of 256 */
    for (; i + 32 <= len; i += 32) {
        __m512 e0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), s),
               e1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), s);
        exp16_pair(&e0, &e1);
        _mm512_storeu_ps(y + i, e0);
        _mm512_storeu_ps(y + i + 16, e1);
        acc = _mm512_add_ps(_mm512_add_ps(acc, e0), e1);
    }
    if (i + 16 <= len) {
        const __m512 e = exp16_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
        _mm512_storeu_ps(y + i, e);
        acc = _mm512_add_ps(acc, e);
        i += 16;
    }
    if (i < len) {
        const __mmask16 m = (__mmask16)((1u << (len - i)) - 1u);
        const __m512 e = exp16_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
        _mm512_mask_storeu_ps(y + i, m, e);
        acc = _mm512_mask_add_ps(acc, m, acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

/* vec_exp_sum_avx512 on AVX2, bit for bit, sum included: its 16 lanes of
 * partial sums as two vectors of 8, the tail added into the first lanes,
 * then _mm512_reduce_add_ps's order (GCC's: the halves, the quarters,
 * then pairs). Measured on rows of 512 on an AVX-512 CPU: 0.76 ns an
 * element for the compiler's avx2 clone of the portable code. */
__attribute__((target("avx2,fma"))) static float vec_exp_sum_avx2(float *y, const float *x,
                                                                  size_t len, float shift) {
    const __m256 s = _mm256_set1_ps(shift);
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m256 a = _mm256_sub_ps(_mm256_loadu_ps(x + i), s);
        __m256 b = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s);
        exp8_pair(&a, &b);
        _mm256_storeu_ps(y + i, a);
        _mm256_storeu_ps(y + i + 8, b);
        lo = _mm256_add_ps(lo, a);
        hi = _mm256_add_ps(hi, b);
    }
    for (int h = 0; h < 2 && i < len; h++, i += 8) { /* the tail: at most 15, 8 a step */
        const int rem = len - i < 8 ? (int)(len - i) : 8;
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), lane);
        const __m256 e = exp8_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), s));
        _mm256_maskstore_ps(y + i, m, e);
        const __m256 add = _mm256_and_ps(e, _mm256_castsi256_ps(m)); /* 0 past the tail */
        if (h == 0)
            lo = _mm256_add_ps(lo, add);
        else
            hi = _mm256_add_ps(hi, add);
    }
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, _MM_SHUFFLE(1, 1, 1, 1)));
}
#endif

/* The exp-and-sum kernel of isa (one the CPU has). */
static inline __attribute__((always_inline)) float exp_run(attn_isa isa, float *y, const float *x,
                                                           size_t len, float shift) {
    switch (isa) {
#ifdef ATTN_VEXP
    case ATTN_ISA_AVX512: return vec_exp_sum_avx512(y, x, len, shift);
    case ATTN_ISA_AVX2: return vec_exp_sum_avx2(y, x, len, shift);
#endif
    default: return vec_exp_sum_portable(y, x, len, shift);
    }
}

float vec_exp_sum(float *y, const float *x, size_t len, float shift) {
    return exp_run(isa_now(), y, x, len, shift);
}

void attn_vexp(float *y, const float *x, size_t len) {
    vec_exp_sum(y, x, len, 0.0f);
}

void attn_vexp_portable(float *y, const float *x, size_t len) {
    vec_exp_sum_portable(y, x, len, 0.0f);
}

int attn_vexp_with(attn_isa isa, float *y, const float *x, size_t len, float *sum) {
    if (!isa_cpu_has(isa)) return 0;
    const float s = exp_run(isa, y, x, len, 0.0f);
    if (sum) *sum = s;
    return 1;
}

/* The largest of a row's 16 lanes of maxima (attn_gemm_post's vmax), as
 * vec_max keeps it: the row's max. */
static float lanes_max(const float *l) {
    float mx = -INFINITY;
    for (int i = 0; i < 16; i++) mx = l[i] > mx ? l[i] : mx;
    return mx;
}

/* s[0..len) = softmax(s) in place; a row whose every score is -inf (every
 * key masked) becomes zeros. With avg, the row times a is also added into
 * avg[0..len) (stored there when first), in the same pass as the scaling.
 * vm: the row's 16 lanes of maxima from the product's epilogue, or NULL
 * (a pass finds its max). */
void softmax_row(float *s, size_t len, float *avg, float a, int first, const float *vm) {
    float mx = vm ? lanes_max(vm) : vec_max(s, len);
    if (mx == -INFINITY) {
        memset(s, 0, len * sizeof *s);
        if (avg && first) memset(avg, 0, len * sizeof *avg);
        return;
    }
    float sum = vec_exp_sum(s, s, len, mx);
    if (avg)
        vec_scale_avg(s, avg, len, 1.0f / sum, a, first);
    else
        vec_scale(s, len, 1.0f / sum);
}
