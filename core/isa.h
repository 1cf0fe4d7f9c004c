/* isa.h - the instruction set the engine's vector code runs at, and the
 * kernels written once and compiled for each (vec.c, topk.c).
 *
 * The level (attn_isa, attention.h) is chosen once: the widest the CPU has
 * (AVX-512F; AVX2 with FMA; else portable code), at most what ATTN_ISA
 * names (avx512, avx2, portable: a run here measures and tests what such a
 * CPU runs; ATTN_GEMM=avx2 alone also means avx2). Each kernel is one
 * always-inline body and three copies of it, each built for its set
 * (ISA_COPIES), and a call runs the level's copy: the copies are chosen at
 * run time, not by the loader (no ifunc), so tests can run each of them on
 * one machine, sanitizer builds included. Both vector copies are built
 * with FMA, so with -ffp-contract=fast a product and a sum fuse in both
 * alike and they give the same bits; the portable copy may differ in the
 * last bit (it has no FMA).
 */
#ifndef ATTN_ISA_H
#define ATTN_ISA_H

#include "attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_ISA_X86 1
#define ISA_AVX512   __attribute__((target("avx512f")))
#define ISA_AVX2     __attribute__((target("avx2,fma")))
#else /* one instruction set: three copies of the same code */
#define ISA_AVX512
#define ISA_AVX2
#endif

/* The body each copy inlines. */
#define ISA_BODY static inline __attribute__((always_inline))

/* The level now, ATTN_ISA_PORTABLE .. ATTN_ISA_AVX512; chosen at the
 * first call (isa_choose). */
extern int isa_level_;
attn_isa isa_choose(void);
static inline attn_isa isa_now(void) {
    const int l = __atomic_load_n(&isa_level_, __ATOMIC_RELAXED);
    return l >= 0 ? (attn_isa)l : isa_choose();
}

/* The level chosen at start (CPU and environment), whatever
 * attn_isa_use has switched to since. */
attn_isa isa_start(void);

/* Whether this CPU can run code built for isa. */
int isa_cpu_has(attn_isa isa);

/* name##_portable, name##_avx2 and name##_avx512: name##_body (an
 * ISA_BODY function) built for each set, and name##_by_isa[], the three
 * indexed by attn_isa. ISA_COPIES for a body that returns ret,
 * ISA_COPIES_VOID for one that returns nothing. A caller runs
 * name##_by_isa[isa_now()]. */
#define ISA_COPIES(ret, name, params, args)                                                        \
    static ret name##_portable params {                                                            \
        return name##_body args;                                                                   \
    }                                                                                              \
    ISA_AVX2 static ret name##_avx2 params {                                                       \
        return name##_body args;                                                                   \
    }                                                                                              \
    ISA_AVX512 static ret name##_avx512 params {                                                   \
        return name##_body args;                                                                   \
    }                                                                                              \
    static ret(*const name##_by_isa[]) params = {name##_portable, name##_avx2, name##_avx512}
#define ISA_COPIES_VOID(name, params, args)                                                        \
    static void name##_portable params {                                                           \
        name##_body args;                                                                          \
    }                                                                                              \
    ISA_AVX2 static void name##_avx2 params {                                                      \
        name##_body args;                                                                          \
    }                                                                                              \
    ISA_AVX512 static void name##_avx512 params {                                                  \
        name##_body args;                                                                          \
    }                                                                                              \
    static void(*const name##_by_isa[]) params = {name##_portable, name##_avx2, name##_avx512}

#endif
