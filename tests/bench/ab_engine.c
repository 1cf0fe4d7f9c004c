/* ab_engine.c - the engine at another commit against the working tree's,
 * both linked into this one process and alternated pass by pass (make
 * bench-ab BASE=<commit>; tests/bench/ab-build.sh links it).
 *
 *     build/ab/ab_engine [n E H [threads [weights [seconds]]]]
 *
 * Defaults: 512 768 12, a pool thread per online CPU for each copy, no
 * dense weights (weights 1: per head, [H, n, n]; 2: averaged over the
 * heads, [n, n], as make bench asks for them; 3: top-16 per head; 4:
 * top-16 of the head average; 5: per head for 256 rows spread over the
 * sequence), 10 s; AB_CAUSAL=1 in the environment
 * asks both copies for the causal mask; AB_PHASES=1 times each pass by
 * phase (attn_run_timed) and adds the median of the pairs' ratios for
 * each phase, so a change to one phase is read without the others'
 * noise. Each copy has its
 * own pool; while one computes, the other's workers sleep. Pairs of
 * passes run base-then-work and work-then-base in turn, so neither side
 * always follows the other, in ROUNDS rounds that set both copies up
 * afresh, base first or work first in turn (the copy set up first ran
 * 1-2% faster in a comparison of one build with itself, whichever copy it
 * was).
 * Prints each side's median pass time, the median of the pairs' ratios,
 * the share of pairs the working tree won, and whether the two outputs
 * (and weights, when asked) are the same bits.
 *
 * Built twice (ab-build.sh): with BASE's engine in the first slot (the
 * ab_base_* functions) and, with AB_SWAPPED, the working tree's there
 * instead. The two slots are not alike: on 2026-12-04 a build against
 * itself ran its second slot 2-7% slower in some minutes. The swapped
 * build prints the same labels and ratio as the other (base / work), so
 * the two runs' ratios carry the slots' difference in opposite directions
 * and their geometric mean cancels it (ab-both.sh).
 *
 * Why: two builds timed in separate processes, minutes apart, on a shared
 * machine differ by more than most changes do, and a build that switches
 * between two code paths at run time is itself a third build (its own
 * kernel was 5-7% slower here once, and favoured the wrong path).
 *
 * OpenBLAS runs one thread a call, as in the server (attn_blas_init): the
 * engine's pools own the cores. Left to its own team, every sgemm the
 * engine hands it (attention products of heads too narrow to pack, d =
 * 16 on the AVX-512 kernel; small inputs) went through exec_blas_async
 * and the team's sched_yield: n = 512, E = 256, H = 16 took 38-41 ms
 * instead of 5.5. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

void *ab_base_setup(int n, int E, int H, int threads, int weights);
int ab_base_pass(void *c);
int ab_base_phases(void *c, double *s, const char **name, int max);
const float *ab_base_output(void *c, size_t *len, double *flops);
void ab_base_free(void *c);
void *ab_work_setup(int n, int E, int H, int threads, int weights);
int ab_work_pass(void *c);
int ab_work_phases(void *c, double *s, const char **name, int max);
const float *ab_work_output(void *c, size_t *len, double *flops);
void ab_work_free(void *c);

#define MAX_PAIRS 100000
#define MAX_PHASES 16 /* as ab_shim.c's AB_PHASES_MAX */
#define ROUNDS    4 /* set-ups of both copies, in alternating order */

/* one timed pass, seconds, or -1 */
static double timed(int (*pass)(void *), void *c) {
    double t0 = bench_now_s();
    if (pass(c)) return -1;
    return bench_now_s() - t0;
}

#ifdef AB_SWAPPED
#define SLOT1 "work"
#define SLOT2 "base"
#else
#define SLOT1 "base"
#define SLOT2 "work"
#endif

void openblas_set_num_threads(int num_threads);

int main(int argc, char **argv) {
    openblas_set_num_threads(1);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n = argc > 1 ? atoi(argv[1]) : 512, E = argc > 2 ? atoi(argv[2]) : 768,
        H = argc > 3 ? atoi(argv[3]) : 12, threads = argc > 4 ? atoi(argv[4]) : (int)ncpu,
        weights = argc > 5 ? atoi(argv[5]) : 0;
    double seconds = argc > 6 ? atof(argv[6]) : 10.0;
    if (n < 1 || E < 1 || H < 1 || threads < 1 || weights < 0 || weights > 5 || !(seconds > 0)) {
        fprintf(stderr, "usage: ab_engine [n E H [threads [weights (0-5) [seconds]]]]\n");
        return 2;
    }
    static double tb[MAX_PAIRS], tw[MAX_PAIRS], ratio[MAX_PAIRS];
    static double pratio[MAX_PHASES][MAX_PAIRS]; /* AB_PHASES=1: base / work, each phase */
    const char *pname[MAX_PHASES];
    int k = 0, won = 0, nph = 0, phk = 0, busy[MAX_PHASES] = {0};
    void *base = NULL, *work = NULL;
    for (int round = 0; round < ROUNDS; round++) {
        /* fresh copies each round, set up in turn in either order: the
         * copy set up first was 1-2% faster, whichever it was */
        ab_base_free(base);
        ab_work_free(work);
        if (round % 2 == 0) {
            base = ab_base_setup(n, E, H, threads, weights);
            work = ab_work_setup(n, E, H, threads, weights);
        } else {
            work = ab_work_setup(n, E, H, threads, weights);
            base = ab_base_setup(n, E, H, threads, weights);
        }
        if (!base || !work) return 1;
        for (int i = 0; i < 3; i++)
            if (ab_base_pass(base) || ab_work_pass(work)) return 1;
        const double t_end = bench_now_s() + seconds / ROUNDS;
        for (int j = 0; k < MAX_PAIRS && (j < 4 || bench_now_s() < t_end); j++, k++) {
            double b, w;
            if (k % 2 == 0) {
                b = timed(ab_base_pass, base);
                w = timed(ab_work_pass, work);
            } else {
                w = timed(ab_work_pass, work);
                b = timed(ab_base_pass, base);
            }
            if (b < 0 || w < 0) return 1;
#ifdef AB_SWAPPED /* the first slot holds the working tree */
            const double t = b;
            b = w;
            w = t;
#endif
            tb[k] = b;
            tw[k] = w;
            ratio[k] = b / w;
            won += w < b;
            double pb[MAX_PHASES], pw[MAX_PHASES];
            const char *nw[MAX_PHASES];
            nph = ab_base_phases(base, pb, pname, MAX_PHASES);
            if (nph > 0 && ab_work_phases(work, pw, nw, MAX_PHASES) == nph) {
                for (int p = 0; p < nph; p++) {
#ifdef AB_SWAPPED
                    const double t = pb[p];
                    pb[p] = pw[p];
                    pw[p] = t;
#endif
                    busy[p] |= pb[p] > 0 && pw[p] > 0;
                    pratio[p][phk] = pw[p] > 0 ? pb[p] / pw[p] : 1.0;
                }
                phk++;
            }
        }
    }
    size_t lb, lw;
    double flops;
    const float *ob = ab_base_output(base, &lb, &flops), *ow = ab_work_output(work, &lw, &flops);
    double maxdiff = 0.0;
    int same = lb == lw && memcmp(ob, ow, lb * sizeof *ob) == 0;
    if (lb == lw)
        for (size_t i = 0; i < lb; i++) {
            double d = fabs((double)ob[i] - (double)ow[i]);
            if (!(d <= maxdiff)) maxdiff = d; /* NaN counts */
        }
    const double mb = bench_median(tb, k), mw = bench_median(tw, k), mr = bench_median(ratio, k);
    static const char *const forms[] = {"off", "per head", "averaged", "top-16 per head",
                                        "top-16 of the head average", "256 weight rows per head"};
    const char *form = forms[weights]; /* 0..5, checked above */
    printf("n=%d E=%d H=%d weights=%s threads=%d: %d pairs, alternated in one process; the "
           "first slot %s, the second %s\n",
           n, E, H, form, threads, k, SLOT1, SLOT2);
    printf("| build | median ms | GFLOPS |\n|---|---:|---:|\n");
    printf("| base | %.3f | %.1f |\n| work | %.3f | %.1f |\n", mb * 1e3, flops / mb * 1e-9,
           mw * 1e3, flops / mw * 1e-9);
    printf("base / work, median of the pairs' ratios: %.3f (above 1: the working tree is faster); "
           "the working tree faster in %d of %d pairs\n",
           mr, won, k);
    if (phk > 0) { /* only the phases the pass has work in */
        printf("phases, base / work, median of the pairs' ratios (%d pairs):", phk);
        for (int p = 0, first = 1; p < nph; p++)
            if (busy[p]) {
                printf("%s %s %.3f", first ? "" : ",", pname[p], bench_median(pratio[p], phk));
                first = 0;
            }
        printf("\n");
    }
    if (lb != lw)
        printf("outputs%s: different sizes (%zu against %zu floats)\n",
               weights ? " and weights" : "", lb, lw);
    else
        printf("outputs%s: %s (max abs diff %.3g)\n", weights ? " and weights" : "",
               same ? "the same bits" : "different bits", maxdiff);
    ab_base_free(base);
    ab_work_free(work);
    return 0;
}
