/* isa.c - the instruction set the engine's vector code runs at (isa.h). */
#include "isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int isa_level_ = -1;
static attn_isa isa_picked; /* isa_start's */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

int isa_cpu_has(attn_isa isa) {
#ifdef ATTN_ISA_X86
    __builtin_cpu_init();
    if (isa == ATTN_ISA_AVX512) return __builtin_cpu_supports("avx512f");
    if (isa == ATTN_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == ATTN_ISA_PORTABLE;
}

static int isa_by_name(const char *name) {
    for (int i = ATTN_ISA_PORTABLE; i <= ATTN_ISA_AVX512; i++)
        if (strcmp(name, attn_isa_name((attn_isa)i)) == 0) return i;
    return -1;
}

/* The widest set the CPU has, at most ATTN_ISA's (else, with ATTN_GEMM=avx2,
 * AVX2: what an AVX2-only CPU runs). */
static void isa_pick(void) {
    attn_isa l = isa_cpu_has(ATTN_ISA_AVX512) ? ATTN_ISA_AVX512
                 : isa_cpu_has(ATTN_ISA_AVX2) ? ATTN_ISA_AVX2
                                              : ATTN_ISA_PORTABLE;
    const char *cap = getenv("ATTN_ISA"), *gemm = getenv("ATTN_GEMM");
    if ((!cap || !*cap) && gemm && strcmp(gemm, "avx2") == 0) cap = "avx2";
    const int c = cap ? isa_by_name(cap) : -1;
    if (c >= 0 && c < (int)l) l = (attn_isa)c;
    isa_picked = l;
    __atomic_store_n(&isa_level_, (int)l, __ATOMIC_RELAXED);
}

attn_isa isa_start(void) {
    pthread_once(&isa_once, isa_pick);
    return isa_picked;
}

attn_isa isa_choose(void) {
    isa_start();
    return (attn_isa)__atomic_load_n(&isa_level_, __ATOMIC_RELAXED);
}

attn_isa attn_isa_now(void) {
    return isa_now();
}

int attn_isa_use(attn_isa isa) {
    isa_start();
    if ((int)isa < ATTN_ISA_PORTABLE || isa > ATTN_ISA_AVX512 || !isa_cpu_has(isa)) return 0;
    __atomic_store_n(&isa_level_, (int)isa, __ATOMIC_RELAXED);
    return 1;
}

const char *attn_isa_name(attn_isa isa) {
    switch (isa) {
    case ATTN_ISA_AVX512: return "avx512";
    case ATTN_ISA_AVX2: return "avx2";
    default: return "portable";
    }
}
