/* check.h - a tiny assert header for the project's tests.
 *
 * Each CHECK prints both operands and the location when it fails, counts the
 * failure and carries on; a test binary returns check_exit() from main, which
 * prints "N passed, N failed" and exits non-zero on any failure.
 *
 *     CHECK_INT_EQ(st, ATTN_OK);
 *     CHECK_STR_CONTAINS(err, "in_proj_weight");
 *     CHECK_NEAR(max_diff, 0.0, 1e-5);
 */
#ifndef ATTN_CHECK_H
#define ATTN_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK_REPORT(ok, ...)                                              \
    do {                                                                   \
        if (ok) {                                                          \
            check_passed++;                                                \
        } else {                                                           \
            check_failed++;                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

#define CHECK(cond) CHECK_REPORT((cond), "%s", #cond)
#define CHECK_MSG(cond, ...) CHECK_REPORT((cond), __VA_ARGS__)
#define CHECK_INT_EQ(a, b)                                                          \
    do {                                                                            \
        long long ca_ = (long long)(a), cb_ = (long long)(b);                       \
        CHECK_REPORT(ca_ == cb_, "%s == %s: %lld != %lld", #a, #b, ca_, cb_);       \
    } while (0)
#define CHECK_STR_EQ(a, b)                                                                  \
    do {                                                                                    \
        const char *ca_ = (a), *cb_ = (b);                                                  \
        CHECK_REPORT(ca_ && cb_ && strcmp(ca_, cb_) == 0, "%s == %s: \"%s\" != \"%s\"", #a, \
                     #b, ca_ ? ca_ : "(null)", cb_ ? cb_ : "(null)");                       \
    } while (0)
#define CHECK_STR_CONTAINS(hay, needle)                                                     \
    do {                                                                                    \
        const char *ch_ = (hay), *cn_ = (needle);                                           \
        CHECK_REPORT(ch_ && strstr(ch_, cn_), "%s contains \"%s\": got \"%s\"", #hay, cn_, \
                     ch_ ? ch_ : "(null)");                                                 \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                              \
    do {                                                                                   \
        double ca_ = (double)(a), cb_ = (double)(b);                                       \
        CHECK_REPORT(fabs(ca_ - cb_) <= (tol), "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, \
                     ca_, cb_, (double)(tol));                                             \
    } while (0)

static inline int check_exit(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
