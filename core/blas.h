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

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

typedef struct attn_blas_info {
    char config[160];            /* openblas_get_config(): version and build options */
    char corename[32];           /* kernel in use, e.g. "SkylakeX" */
    char cpu_best[32];           /* best kernel the CPU supports by cpuid, e.g. "SkylakeX" */
    char reason[160];            /* why this kernel: "OPENBLAS_CORETYPE set by the user", ... */
    int threads;                 /* OpenBLAS threads (1: parallelism is the pool's) */
    double selftest_max_rel_err; /* largest relative difference of the self-test */
    bool rows_invariant;         /* sgemm rows come out the same bits whatever rows share
                                    the call (probed; see attn_blas_rows_invariant) */
} attn_blas_info;

/* Whether this sgemm kernel computes each row of C = A B the same, bit for
 * bit, whatever other rows of A share the call and wherever the row sits
 * among them. Some kernels do (OpenBLAS's SkylakeX family here), some do not
 * (its Haswell kernel splits rows into micro-tiles of 16, 8, 4, ... whose
 * sums round differently). Probed by attn_blas_init over a few shapes; 0
 * before that. A probe can prove the kernel varies, not that it never does:
 * the tests of the ragged forward check the bits on the machine they run on. */
int attn_blas_rows_invariant(void);

/* The kernel name the CPU supports best by cpuid ("SkylakeX", "Haswell",
 * "Sandybridge", or "" when none of these applies). */
const char *attn_blas_cpu_best(void);

/* If OPENBLAS_CORETYPE is unset and the loaded kernel is weaker than
 * attn_blas_cpu_best(), set OPENBLAS_CORETYPE (and ATTN_BLAS_REEXEC=reason
 * for the log) and execv /proc/self/exe with argv. Returns if nothing is to
 * be done or the exec failed (then the slow kernel is used and reported). */
void attn_blas_reexec_if_needed(char **argv);
/* Also: when OPENBLAS_NUM_THREADS is unset it is set to 1 and the program
 * re-executed once even if the kernel is kept (OpenBLAS starts a thread
 * team of its own at load otherwise; the pool owns the cores). */

/* The decision attn_blas_reexec_if_needed takes, as a pure function: 1 when
 * the kernel loaded (an openblas_get_corename() name) ranks below best (an
 * attn_blas_cpu_best() name), else 0. Kernels rank by the widest vector
 * unit their sgemm uses: SSE-era ones (Prescott, Core2, Nehalem, Atom,
 * Barcelona, Bobcat, ...) < AVX (Sandybridge, Bulldozer family) < AVX2 (Haswell,
 * Zen) < AVX-512 (SkylakeX, Cooperlake, SapphireRapids). Names compare
 * case-insensitively; a name not in the table (NULL, "", a kernel newer
 * than this list) never causes a switch. Thread-safe. */
int attn_blas_should_switch(const char *loaded, const char *best);

/* The body of attn_blas_reexec_if_needed with the kernel names given, so a
 * test can exercise the exec on any machine. Does nothing (returns 0) when
 * OPENBLAS_CORETYPE or ATTN_BLAS_REEXEC is already set, when
 * attn_blas_should_switch(loaded, best) is 0, or when the library is not a
 * DYNAMIC_ARCH build (it could not honour the variable). Otherwise sets both
 * variables and execs /proc/self/exe with argv; it returns -1 only if the
 * exec failed, after restoring the environment (the failure then shows in
 * attn_blas_init's reason). Not thread-safe: call before starting threads. */
int attn_blas_reexec_as(char **argv, const char *loaded, const char *best);

/* Set OpenBLAS to one thread, fill info, and run the sgemm self-test against
 * plain loops (several shapes, transposes and strides the engine uses).
 * Fails with ATTN_ERR_BLAS, naming the shape and the difference, when the
 * library computes wrong results. Call once at start-up. */
attn_status attn_blas_init(attn_blas_info *info, char *err, size_t errlen);

#endif
