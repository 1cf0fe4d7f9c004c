/* bench_fma_peak.c - the FMA peak of a pool of THREADS (default: the CPUs
 * online, as the daemon's pool), for bench-http.sh to put an end-to-end
 * rate over HTTP beside the physical limit measured in the same run.
 *
 *   bench_fma_peak [THREADS]   ->  "PEAK <GFLOPS> <ISA> <CPU name>"
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fma_peak.h"
#include "pool.h"

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    attn_pool *pool;
    char err[256];
    if (attn_pool_create(threads, &pool, err, sizeof err)) {
        fprintf(stderr, "bench_fma_peak: %s\n", err);
        return 1;
    }
    char cpu[128];
    fma_cpu_name(cpu, sizeof cpu);
    fma_peak p = fma_peak_measure(pool, NULL, 0.05, 5);
    printf("PEAK %.1f %s %s\n", p.gflops, p.isa, cpu);
    attn_pool_destroy(pool);
    return p.gflops > 0 ? 0 : 1;
}
