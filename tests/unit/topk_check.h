/* topk_check.h - checks top-k answers against dense attention weights, for
 * the engine's tests (test_attention against its reference, test_golden
 * against PyTorch).
 *
 *     double d = check_topk("case", dense, val, idx, rows, M, k, 1e-6, true);
 */
#ifndef ATTN_TOPK_CHECK_H
#define ATTN_TOPK_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* How far a top-k value or a weight row's entry may be from the dense weight
 * w it stands for: tol, plus 4 tol w (0 when tol is 0: exact). In a nearly
 * one-hot row the scores are large, and their float32 rounding moves a heavy
 * weight by a few 1e-6 of itself: peaked_softmax on OpenBLAS's AVX-512
 * kernel gives 0.709971309 against PyTorch's 0.709972322. */
static inline double form_allowed(double tol, double w) {
    return tol > 0 ? tol + 4.0 * tol * fabs(w) : 0.0;
}

/* Rows of top-k pairs (val, idx: [nrows, k]) against the same rows of dense
 * weights ([nrows, M]): indices in range and distinct, each value within
 * form_allowed(tol, w) of the dense weight w at its index, the list sorted
 * by value (equal values by lower index, when strict), and nothing left out
 * heavier than the lightest one taken (up to tol): the true top-k up to
 * ties. Returns the largest |value - dense|. */
static inline double check_topk(const char *what, const float *dense, const float *val,
                         const int32_t *idx, size_t nrows, int M, int k, double tol, bool strict) {
    double worst = 0.0;
    uint8_t *taken = calloc((size_t)M, 1);
    int bad = 0;
    for (size_t r = 0; r < nrows && bad < 3; r++) {
        const float *D = dense + r * (size_t)M, *v = val + r * (size_t)k;
        const int32_t *ix = idx + r * (size_t)k;
        memset(taken, 0, (size_t)M);
        double lightest = INFINITY;
        for (int q = 0; q < k; q++) {
            if (ix[q] < 0 || ix[q] >= M || taken[ix[q]] || isnan(v[q])) {
                CHECK_MSG(0, "%s: row %zu entry %d: index %d (M=%d) value %g, out of range, "
                          "repeated or NaN", what, r, q, ix[q], M, v[q]);
                bad++;
                break;
            }
            taken[ix[q]] = 1;
            double dlt = fabs((double)v[q] - (double)D[ix[q]]);
            double allowed = form_allowed(tol, D[ix[q]]);
            if (dlt > worst) worst = dlt;
            if (dlt > allowed) {
                CHECK_MSG(0, "%s: row %zu entry %d (key %d): %.9g, dense %.9g", what, r, q, ix[q],
                          v[q], D[ix[q]]);
                bad++;
            }
            if (q && (v[q] > v[q - 1] || (strict && v[q] == v[q - 1] && ix[q] < ix[q - 1]))) {
                CHECK_MSG(0, "%s: row %zu not sorted at %d: (%g, %d) after (%g, %d)", what, r, q,
                          v[q], ix[q], v[q - 1], ix[q - 1]);
                bad++;
            }
            if (D[ix[q]] < lightest) lightest = D[ix[q]];
        }
        for (int j = 0; j < M && !bad; j++)
            if (!taken[j] && D[j] > lightest + tol) {
                CHECK_MSG(0, "%s: row %zu leaves out key %d (%.9g) but takes one of %.9g", what,
                          r, j, D[j], lightest);
                bad++;
            }
    }
    free(taken);
    return bad ? INFINITY : worst;
}

#endif
