/* vec.h - the forward pass's vector kernels over rows of floats: max,
 * exp-and-sum, scale, axpy, masking, and the softmax of a row built on
 * them (vec.c). Internal to the engine: attention.c and topk.c call them,
 * the public attn_vexp* (attention.h) are their exponentials' test hooks.
 *
 * Each kernel walks its array in chunks of VL floats with inner loops of a
 * constant trip count, which GCC vectorises even under -O2's "very cheap"
 * cost model (no runtime trip-count epilogue needed), then finishes the tail
 * with the same per-lane code. Reductions (max, sum) keep VL partial results
 * so no float reassociation is needed: no -ffast-math anywhere, because masked
 * scores are -inf and must come out of exp as exactly 0. The files that hold
 * such kernels (vec.c, topk.c) and the arithmetic that must give the same
 * bits as them (attention.c) are built with the same two flags (Makefile):
 * -ffp-contract=fast and -fno-trapping-math.
 */
#ifndef ATTN_VEC_H
#define ATTN_VEC_H

#include <stddef.h>
#include <stdint.h>

/* The lanes of a kernel's chunk and of its partial results; also the
 * alignment, in floats, of the pass's scratch arrays. */
#define VL 16

/* Sanitizer runtimes are not initialised yet when the dynamic loader runs
 * ifunc resolvers, and GCC instruments the resolvers target_clones emits
 * (TSan crashes there): sanitizer builds, at -O1 anyway, get one plain copy. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ATTN_NO_CLONES 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define ATTN_NO_CLONES 1
#endif
#endif

/* A kernel compiled three times, for AVX-512, AVX2 and baseline x86-64,
 * the CPU's copy chosen when the program loads. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(ATTN_NO_CLONES)
#if __has_attribute(target_clones)
#define ATTN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef ATTN_CLONES
#define ATTN_CLONES
#endif

/* Largest value of x[0..len), -inf when every value is -inf (len >= 1). */
float vec_max(const float *x, size_t len);

/* y[i] = e^(x[i] - shift) for i in [0, len), returning the sum of the y;
 * y may equal x (in place). The CPU's kernel: AVX-512, else AVX2 with FMA
 * (the same bits), else portable code; the AVX2 one where the engine runs
 * its AVX2 matrix kernel (ATTN_GEMM=avx2). */
float vec_exp_sum(float *y, const float *x, size_t len, float shift);

/* y[i] *= a for i in [0, len). */
void vec_scale(float *y, size_t len, float a);

/* s[i] *= inv, then avg[i] += a * s[i] (avg[i] = a * s[i] when first),
 * for i in [0, len): a softmax row's scaling and its share of the head
 * average in one pass, with vec_scale's and vec_axpy's rounding. s and avg
 * do not overlap. */
void vec_scale_avg(float *restrict s, float *restrict avg, size_t len, float inv, float a,
                   int first);

/* y[i] += a * x[i] for i in [0, len); x and y do not overlap. */
void vec_axpy(float *restrict y, const float *restrict x, size_t len, float a);

/* y[i] = -inf where mask[i] is nonzero, for i in [0, len). */
void vec_mask_bool(float *restrict y, const uint8_t *restrict mask, size_t len);

/* y[i] = -inf for i in [0, len). */
void vec_fill_ninf(float *y, size_t len);

/* s[0..len) = softmax(s) in place; a row whose every score is -inf (every
 * key masked) becomes zeros. With avg, the row times a is also added into
 * avg[0..len) (stored there when first), in the same pass as the scaling.
 * vm: the row's 16 lanes of maxima from the matrix product's epilogue
 * (attn_gemm_post's vmax), or NULL (a pass finds its max). */
void softmax_row(float *s, size_t len, float *avg, float a, int first, const float *vm);

#endif
