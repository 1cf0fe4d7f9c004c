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

/* Each kernel below runs its copy for the instruction set of isa_now()
 * (isa.h): AVX-512, AVX2 with FMA (the same bits), or portable code. */

/* Largest value of x[0..len), -inf when every value is -inf (len >= 1). */
float vec_max(const float *x, size_t len);

/* y[i] = e^(x[i] - shift) for i in [0, len), returning the sum of the y;
 * y may equal x (in place). At AVX-512 and AVX2, intrinsics kernels (the
 * same bits), not the compiler's copies. */
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
