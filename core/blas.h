/* blas.h - choosing, configuring and verifying the BLAS the engine runs on.
 *
 * OpenBLAS picks its kernel when the library loads, from cpuid, and 0.3.21
 * (Debian 12) falls back to the slow generic 'Prescott' kernel on CPUs it
 * does not know. OPENBLAS_CORETYPE overrides the choice but is only read at
 * load time, so a program that wants the right kernel calls
 * attn_blas_reexec_if_needed() first thing in main(): if the user has not set
 * OPENBLAS_CORETYPE and the loaded kernel is weaker than what the CPU
 * supports, it sets the variable and re-executes the program once.
 *
 *     int main(int argc, char **argv) {
 *         attn_blas_reexec_if_needed(argv);          // may not return
 *         attn_blas_info info;
 *         if (attn_blas_init(&info, err, sizeof err)) ...  // 1 thread + self-test
 *         log("BLAS %s, kernel %s (%s)", info.config, info.corename, info.reason);
 */
#ifndef ATTN_BLAS_H
#define ATTN_BLAS_H

#include <stddef.h>

#include "status.h"

typedef struct attn_blas_info {
    char config[160];   /* openblas_get_config(): version and build options */
    char corename[32];  /* kernel in use, e.g. "SkylakeX" */
    char cpu_best[32];  /* best kernel the CPU supports by cpuid, e.g. "SkylakeX" */
    char reason[160];   /* why this kernel: "OPENBLAS_CORETYPE set by the user", ... */
    int threads;        /* OpenBLAS threads (1: parallelism is the pool's) */
    double selftest_max_rel_err; /* largest relative difference of the self-test */
} attn_blas_info;

/* The kernel name the CPU supports best by cpuid ("SkylakeX", "Haswell",
 * "Sandybridge", or "" when none of these applies). */
const char *attn_blas_cpu_best(void);

/* If OPENBLAS_CORETYPE is unset and the loaded kernel is weaker than
 * attn_blas_cpu_best(), set OPENBLAS_CORETYPE (and ATTN_BLAS_REEXEC=reason
 * for the log) and execv /proc/self/exe with argv. Returns if nothing is to
 * be done or the exec failed (then the slow kernel is used and reported). */
void attn_blas_reexec_if_needed(char **argv);

/* Set OpenBLAS to one thread, fill info, and run the sgemm self-test against
 * plain loops (several shapes, transposes and strides the engine uses).
 * Fails with ATTN_ERR_BLAS, naming the shape and the difference, when the
 * library computes wrong results. Call once at start-up. */
attn_status attn_blas_init(attn_blas_info *info, char *err, size_t errlen);

#endif
