/* base64_kernels.h - the base64 codec's kernels one by one, for tests and
 * benchmarks. The codec's contract (strict RFC 4648, bad_at) is numfmt.h's;
 * every kernel keeps it exactly, bad_at included.
 *
 * base64_encode and base64_decode run the fastest kernel this CPU has,
 * chosen once at first use (pthread_once, __builtin_cpu_supports): the
 * AVX-512 VBMI one, else the AVX2 one, else the portable scalar code. One
 * binary serves every x86-64 CPU; other architectures get the scalar code.
 * The functions below run a named kernel, so that tests can compare the
 * kernels with each other and the benchmark can time each one:
 *
 *     for (int k = 0; k < BASE64_KERNEL_COUNT; k++) {
 *         if (!base64_kernel_supported((base64_kernel)k)) continue;
 *         size_t m = base64_encode_kernel((base64_kernel)k, txt, bytes, n);
 *         ...
 *     }
 *
 * All of it is thread-safe.
 */
#ifndef ATTN_BASE64_KERNELS_H
#define ATTN_BASE64_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

/* X(enum, name): the kernels, slowest first. scalar: portable C, a 12-bit
 * table to encode, four 256-entry tables to decode. avx2: 24 bytes <-> 32
 * characters a step. avx512vbmi: 48 bytes <-> 64 characters a step (its
 * tails go through the AVX2 steps). */
#define BASE64_KERNELS(X)                                                                          \
    X(BASE64_SCALAR, "scalar")                                                                     \
    X(BASE64_AVX2, "avx2")                                                                         \
    X(BASE64_AVX512VBMI, "avx512vbmi")

typedef enum {
#define BASE64_KERNEL_ENUM(e, name) e,
    BASE64_KERNELS(BASE64_KERNEL_ENUM)
#undef BASE64_KERNEL_ENUM
        BASE64_KERNEL_COUNT
} base64_kernel;

/* "scalar", "avx2", "avx512vbmi"; "?" for a value out of range. */
const char *base64_kernel_name(base64_kernel k);
/* True if the kernel is compiled in and this CPU (and OS) can run it. The
 * scalar kernel is always supported. */
bool base64_kernel_supported(base64_kernel k);
/* The kernel base64_encode and base64_decode run. */
base64_kernel base64_kernel_chosen(void);

/* base64_encode and base64_decode with a named kernel. A kernel this CPU
 * cannot run (or a value out of range) runs the scalar code instead. */
size_t base64_encode_kernel(base64_kernel k, char *dst, const void *src, size_t n);
size_t base64_decode_kernel(base64_kernel k, void *dst, const char *src, size_t len,
                            size_t *bad_at);

#endif
