/* test_tensor - the tensor scans the answer path runs before it writes an
 * answer (server/tensor.c): tensor_first_nonfinite against a plain isfinite
 * loop, for every position of a bad value in and around its chunks, every
 * kind of bad value, and every length near a chunk boundary. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor.h"

static size_t plain_first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_first_nonfinite(void) {
    enum { N = 1100 }; /* four chunks and a tail */
    float *x = malloc(N * sizeof *x);
    if (!x) abort();
    /* finite values of every magnitude, FLT_MAX and subnormals included */
    for (size_t i = 0; i < N; i++)
        x[i] = (i % 5 == 0)   ? 3.4028235e38f
               : (i % 5 == 1) ? -1e-45f
                              : (float)i * ((i % 2) ? -1.5f : 0.25f);
    const float bad[] = {
        INFINITY, -INFINITY, NAN, -NAN, from_bits(0x7f800001u), from_bits(0xffc00000u)};
    int wrong = 0;
    for (size_t len = 0; len <= N; len += (len < 300 || len > 1000) ? 1 : 37) {
        if (plain_first_nonfinite(x, len) != len || tensor_first_nonfinite(x, len) != len) wrong++;
        for (size_t b = 0; b < sizeof bad / sizeof *bad; b++)
            for (size_t at = 0; at < len; at += (len < 64 ? 1 : 13)) {
                const float keep = x[at];
                x[at] = bad[b];
                if (tensor_first_nonfinite(x, len) != at) wrong++;
                /* a second bad value after it: still the first */
                if (at + 300 < len) {
                    const float keep2 = x[at + 300];
                    x[at + 300] = bad[(b + 1) % 6];
                    if (tensor_first_nonfinite(x, len) != at) wrong++;
                    x[at + 300] = keep2;
                }
                x[at] = keep;
            }
    }
    CHECK_INT_EQ(wrong, 0);
    /* the last element of the last whole chunk, and the last of all */
    x[1023] = NAN;
    CHECK_INT_EQ(tensor_first_nonfinite(x, N), 1023);
    x[1023] = 1.0f;
    x[N - 1] = -INFINITY;
    CHECK_INT_EQ(tensor_first_nonfinite(x, N), N - 1);
    CHECK_INT_EQ(tensor_first_nonfinite(x, N - 1), N - 1);
    CHECK_INT_EQ(tensor_first_nonfinite(NULL, 0), 0);
    free(x);
}

int main(void) {
    test_first_nonfinite();
    return check_exit();
}
