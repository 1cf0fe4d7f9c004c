/* numfmt.c - float32 text in and out, for the /attend codec (numfmt.h's
 * base64 functions live in base64.c, with their vector kernels).
 *
 * The file has three parts:
 *   1. tables: powers of five (exact, unsigned __int128), powers of ten as
 *      doubles and as truncated 128-bit significands, floor(log10(2^e)).
 *      All are computed once, at first use, with exact integer arithmetic
 *      (pthread_once; about a millisecond).
 *   2. num_parse: decimal text -> correctly rounded double and float:
 *      Clinger's exact fast path, then an Eisel-Lemire step that settles all
 *      but about 2^-72 of the rest, then strtod/strtof.
 *   3. fmt_f32_shortest / fmt_f32_digits: float -> decimal text.
 *
 * Locale: nothing here depends on LC_NUMERIC. The fast paths never call the C
 * library; the slow path hands strtod/strtof a rewritten token of the form
 * "[-]DIGITSe[-]EXP", which has no radix character, so it reads the same in
 * every locale (the daemon never calls setlocale anyway).
 *
 * Floating point environment: the code assumes the default one (round to
 * nearest, no flush-to-zero / denormals-are-zero, as without -ffast-math) and
 * FLT_EVAL_METHOD == 0 (SSE2 on x86-64, every AArch64), checked below.
 */
#include "numfmt.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Explicit exponents stop accumulating here. It must exceed any digit count a
 * token can have (the digits shift the decimal exponent by up to their
 * number), so a huge exponent can never be offset back into range wrongly:
 * 10^15 digits do not fit in memory. */
#define EXP_CAP INT64_C(1000000000000000)

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the SWAR digit code assumes a little-endian machine"
#endif
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "num_parse's fast path needs double arithmetic done in double (FLT_EVAL_METHOD == 0)"
#endif

__extension__ typedef unsigned __int128 u128;

/* for the per-number helpers of the hot loops (GCC and Clang) */
#define HOT_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------ tables */

/* Scaled float32 binary exponents (see fmt_f32_shortest) run over
 * [E2_MIN, E2_MAX]. */
#define E2_MIN   (-151)
#define E2_MAX   102
#define POW5_MAX 55 /* 5^55 < 2^128; the smallest scale needs 5^47 */

static u128 pow5_tab[POW5_MAX + 1];
static double pow10_tab[23]; /* 10^0..10^22: every one exact in a double */
static signed char log10_pow2_tab[E2_MAX - E2_MIN + 1]; /* floor(log10(2^e)) */

/* fmt_f32_shortest's common case, per scaled exponent e < 0 whose 5^s
 * fits 64 bits: floor(X * 5^s / 2^k) for X < 2^26 is the high word of the
 * 64x64 product (X << shl) * mul, where mul = 5^s << (64 - k - shl), and the
 * division is exact when the low word is 0 (the shifts bring in zeros). One
 * multiply and no variable 128-bit shift per value. ok == 0: use the
 * general path. */
typedef struct {
    uint64_t mul;
    uint8_t shl, ok;
} scale64;
static scale64 scale64_tab[-E2_MIN];

/* 10^q ~= (el_pow10[q] + delta) * 2^el_pow10_e2[q], 0 <= delta < 1, with
 * el_pow10[q] normalized to [2^127, 2^128): the truncated 128-bit
 * significand of every power of ten a double can need. */
#define EL_QMIN (-342)
#define EL_QMAX 308
static u128 el_pow10[EL_QMAX - EL_QMIN + 1];
static int16_t el_pow10_e2[EL_QMAX - EL_QMIN + 1];

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static atomic_int tables_ready;

/* A minimal bignum, for the table above only: little-endian 32-bit limbs. */
#define BIG_LIMBS 28 /* 5^342 has 795 bits */
typedef struct {
    uint32_t l[BIG_LIMBS];
    int n;
} big;

static int big_bits(const big *b) {
    int top = b->n - 1;
    return top * 32 + (32 - __builtin_clz(b->l[top]));
}

static int big_cmp(const big *a, const big *b) {
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->l[i] != b->l[i]) return a->l[i] < b->l[i] ? -1 : 1;
    return 0;
}

/* floor(b / 2^sh) mod 2^128 */
static u128 big_shr128(const big *b, int sh) {
    u128 r = 0;
    for (int i = 0; i < 128; i += 32) {
        int bit = sh + i, li = bit / 32, off = bit % 32;
        uint64_t v = 0;
        if (li < b->n) v = b->l[li];
        if (li + 1 < b->n) v |= (uint64_t)b->l[li + 1] << 32;
        r |= (u128)(uint32_t)(v >> off) << i;
    }
    return r;
}

static void el_tables_init(void) {
    big p5 = {{1}, 1}; /* 5^k */
    for (int k = 0; k <= -EL_QMIN; k++) {
        int L = big_bits(&p5);
        if (k <= EL_QMAX) {
            /* 10^k = 5^k 2^k: the top 128 bits of 5^k (exact if it fits) */
            el_pow10[k - EL_QMIN] =
                L <= 128 ? big_shr128(&p5, 0) << (128 - L) : big_shr128(&p5, L - 128);
            el_pow10_e2[k - EL_QMIN] = (int16_t)(L - 128 + k);
        }
        if (k > 0) {
            /* 10^-k = 2^-k / 5^k: floor(2^(L+127) / 5^k) by long division,
             * starting from the remainder 2^(L-1) < 5^k */
            big r = {{0}, (L - 1) / 32 + 1};
            r.l[(L - 1) / 32] = UINT32_C(1) << ((L - 1) % 32);
            u128 qt = 0;
            for (int i = 127; i >= 0; i--) {
                uint32_t carry = 0; /* r <<= 1 */
                for (int j = 0; j < r.n; j++) {
                    uint32_t nc = r.l[j] >> 31;
                    r.l[j] = r.l[j] << 1 | carry;
                    carry = nc;
                }
                if (carry) r.l[r.n++] = carry;
                if (big_cmp(&r, &p5) >= 0) { /* r -= 5^k */
                    uint64_t borrow = 0;
                    for (int j = 0; j < r.n; j++) {
                        uint64_t sub = (uint64_t)(j < p5.n ? p5.l[j] : 0) + borrow;
                        borrow = r.l[j] < sub;
                        r.l[j] = (uint32_t)((uint64_t)r.l[j] - sub);
                    }
                    while (r.n > 1 && r.l[r.n - 1] == 0) r.n--;
                    qt |= (u128)1 << i;
                }
            }
            el_pow10[-k - EL_QMIN] = qt;
            el_pow10_e2[-k - EL_QMIN] = (int16_t)(-(L + 127) - k);
        }
        uint64_t carry = 0; /* p5 *= 5 */
        for (int j = 0; j < p5.n; j++) {
            uint64_t v = (uint64_t)p5.l[j] * 5 + carry;
            p5.l[j] = (uint32_t)v;
            carry = v >> 32;
        }
        if (carry) p5.l[p5.n++] = (uint32_t)carry;
    }
}

static void tables_init(void) {
    el_tables_init();
    u128 p = 1;
    for (int i = 0; i <= POW5_MAX; i++) {
        pow5_tab[i] = p;
        p *= 5;
    }
    /* 10^k for k <= 22 is an integer below 2^53 * 2^22 with at most 53
     * significant bits (10^k = 5^k 2^k and 5^22 < 2^52): converting the exact
     * integer to double is exact. */
    u128 t = 1;
    for (int i = 0; i <= 22; i++) {
        pow10_tab[i] = (double)t;
        t *= 10;
    }
    /* floor(log10(2^e)): the largest q with 10^q <= 2^e, found by exact
     * comparison. For e >= 0 compare 10^q with 2^e directly (both < 2^128);
     * for e < 0, 10^q <= 2^e with q = -s is 2^-e <= 10^s, i.e.
     * 2^(-e-s) <= 5^s, searched from the smallest s whose 2^(-e-s) fits. */
    for (int e = E2_MIN; e <= E2_MAX; e++) {
        int q;
        if (e >= 0) {
            u128 two = (u128)1 << e, ten = 1;
            q = 0;
            while (ten * 10 <= two) {
                ten *= 10;
                q++;
            }
        } else {
            int s = -e > 127 ? -e - 127 : 0;
            while (((u128)1 << (-e - s)) > pow5_tab[s]) s++;
            q = -s;
        }
        log10_pow2_tab[e - E2_MIN] = (signed char)q;
    }
    for (int e = E2_MIN; e < 0; e++) {
        int s = 1 - log10_pow2_tab[e - E2_MIN], k = -e - s;
        if (s > 27 || k < 0 || k > 64) continue;
        int bits = 0;
        while ((pow5_tab[s] >> bits) != 0) bits++;
        /* X < 2^26 takes up to 38 bits of shift, 5^s the rest */
        int shl = 64 - k < 38 ? 64 - k : 38, shm = 64 - k - shl;
        if (bits + shm > 64) continue;
        scale64_tab[e - E2_MIN] = (scale64){(uint64_t)pow5_tab[s] << shm, (uint8_t)shl, 1};
    }
    atomic_store_explicit(&tables_ready, 1, memory_order_release);
}

static void tables_slow(void) {
    pthread_once(&tables_once, tables_init);
}

static inline void tables(void) {
    if (!atomic_load_explicit(&tables_ready, memory_order_acquire)) tables_slow();
}

/* ------------------------------------------------------------- num_parse */

#define SLOW_DIGITS 800 /* more than any double or float halfway point has */

/* True if d lies exactly halfway between two adjacent floats (or between
 * FLT_MAX and 2^128), where (float)d may round the other way than the exact
 * decimal would: a float's significand has 24 bits, a double's 53. */
static bool f32_halfway(double d) {
    double a = d < 0 ? -d : d;
    if (a >= 0x1p128) return false;
    if (a >= 0x1p-126) {
        uint64_t b;
        memcpy(&b, &a, sizeof b);
        return (b & 0x1FFFFFFFu) == 0x10000000u;
    }
    double t = a * 0x1p150; /* exact: halfway points below 2^-126 are odd multiples of 2^-150 */
    if (t >= 0x1p53) return false;
    uint64_t i = (uint64_t)t;
    return (double)i == t && (i & 1);
}

/* The correctly rounded double of w * 10^q (w > 0), in the manner of
 * Eisel-Lemire (Lemire, 2021): with w shifted to 64 significant bits and T
 * the truncated 128-bit significand of 10^q, the exact product X = w * 10^q
 * scaled lies in [P, P + 2^64) where P = w * T is computed exactly (192
 * bits). Let H = floor(P / 2^64): the top 53 bits of X, its round bit and
 * whether anything below is nonzero follow from H alone unless the bits of H
 * below the round bit are all ones (a carry from the unknown low part could
 * reach them) or all zeros with the round bit set (X could be an exact tie,
 * or just above one). Those cases, whose chance is about 2^-72, and results
 * outside the normal double range return false for the slow path. */
HOT_INLINE bool el_double(uint64_t w, int64_t q, double *out) {
    if (q < EL_QMIN || q > EL_QMAX) return false;
    u128 T = el_pow10[q - EL_QMIN];
    int lz = __builtin_clzll(w);
    uint64_t wn = w << lz;
    u128 lo = (u128)wn * (uint64_t)T;
    u128 H = (u128)wn * (uint64_t)(T >> 64) + (uint64_t)(lo >> 64); /* < 2^128 */
    int msb = 126 + (int)(H >> 127);                                /* H >= 2^126 */
    int rpos = msb - 53;                                            /* the round bit */
    uint64_t mant = (uint64_t)(H >> (rpos + 1));                    /* 53 bits */
    unsigned rbit = (unsigned)(H >> rpos) & 1;
    u128 mask = ((u128)1 << rpos) - 1, rest = H & mask;
    if (rest == mask || (rest == 0 && rbit)) return false;
    mant += rbit; /* rbit set and rest nonzero: above the halfway point */
    if (mant >> 53) {
        mant >>= 1;
        msb++;
    }
    int e2 = msb + 64 + el_pow10_e2[q - EL_QMIN] - lz; /* value in [2^e2, 2^(e2+1)) */
    if (e2 < -1022 || e2 > 1023) return false;
    uint64_t bits = (uint64_t)(e2 + 1023) << 52 | (mant & ((UINT64_C(1) << 52) - 1));
    memcpy(out, &bits, sizeof bits);
    return true;
}

/* Rewrite the token as "[-]DIGITSeEXP" (significant digits only, no radix
 * character, at most SLOW_DIGITS of them plus a sticky '1' standing for any
 * nonzero digits beyond) and let the C library round it. The rewrite keeps
 * the value's order against every double and float halfway point (they all
 * have fewer than SLOW_DIGITS significant digits), so the rounding is the
 * same as on the original token; the exponent is clamped far outside the
 * range where it could matter. */
static void num_parse_slow(const char *s, size_t len, bool want_double, double *d, float *f) {
    char buf[SLOW_DIGITS + 40];
    const char *p = s, *end = s + len;
    char *o = buf;
    if (p < end && *p == '-') *o++ = *p++;
    char *digits = o;
    int64_t exp10 = 0; /* value = DIGITS * 10^exp10 */
    int nd = 0;
    bool sticky = false;
    for (int frac = 0; frac < 2; frac++) {
        for (; p < end && (unsigned)(*p - '0') < 10; p++) {
            if (nd == 0 && *p == '0') {
                if (frac) exp10--;
                continue;
            }
            if (nd < SLOW_DIGITS) {
                *o++ = *p;
                nd++;
                if (frac) exp10--;
            } else {
                if (*p != '0') sticky = true;
                if (!frac) exp10++;
            }
        }
        if (frac || p == end || *p != '.') break;
        p++;
    }
    if (sticky) {
        *o++ = '1';
        exp10--;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        bool eneg = false;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        int64_t ev = 0;
        for (; p < end && (unsigned)(*p - '0') < 10; p++)
            if (ev < EXP_CAP) ev = ev * 10 + (*p - '0');
        exp10 += eneg ? -ev : ev;
    }
    if (o == digits) *o++ = '0';
    if (exp10 > 1000000) exp10 = 1000000;
    if (exp10 < -1000000) exp10 = -1000000;
    o += snprintf(o, 16, "e%d", (int)exp10);
    *o = '\0';

    int saved = errno;
    if (want_double) *d = strtod(buf, NULL);
    if (f) *f = strtof(buf, NULL);
    errno = saved;
}

/* The double and float of (-1)^neg * w * 10^e10, where `inexact` says that
 * nonzero digits beyond w's 19 were dropped (the value is then a little
 * above w * 10^e10). s[0..len) is the token, for the slow path. */
HOT_INLINE void num_convert(uint64_t w, int64_t e10, bool neg, bool inexact, const char *s,
                            size_t len, double *d, float *f) {
    double v;
    if (w == 0 && !inexact) {
        v = 0.0;
        goto done;
    }
    tables();
    if (inexact) {
        /* more than 19 digits: the value lies strictly between w and w + 1
         * (times 10^e10); if both round alike, so does it */
        double v1;
        if (el_double(w, e10, &v) && el_double(w + 1, e10, &v1) && v == v1) goto done;
        goto slow;
    }
    /* Clinger's fast path: w and 10^|e10| are exact doubles, so one IEEE
     * multiply or divide rounds the exact value once. (Measured: faster
     * than el_double even with the division.) */
    if (w <= (UINT64_C(1) << 53)) {
        if (e10 >= 0 && e10 <= 22) {
            v = (double)w * pow10_tab[e10];
            goto done;
        }
        if (e10 < 0 && e10 >= -22) {
            v = (double)w / pow10_tab[-e10];
            goto done;
        }
        if (e10 > 22 && e10 <= 22 + 16) {
            /* 123e30: move zeros into w while it stays exact */
            uint64_t ww = w;
            int64_t ee = e10;
            while (ee > 22 && ww <= (UINT64_C(1) << 53) / 10) {
                ww *= 10;
                ee--;
            }
            if (ee <= 22) {
                v = (double)ww * pow10_tab[ee];
                goto done;
            }
        }
    } else if (e10 == 0) {
        v = (double)w; /* integer conversion rounds once, to nearest even */
        goto done;
    }
    if (el_double(w, e10, &v)) goto done;
slow:
    num_parse_slow(s, len, true, &v, f); /* strtof directly: no double rounding */
    if (d) *d = v;
    return;
done:
    if (neg) v = -v;
    if (d) *d = v;
    if (f) {
        if (f32_halfway(v))
            num_parse_slow(s, len, false, NULL, f);
        else
            *f = (float)v;
    }
}

bool num_parse(const char *s, size_t len, double *d, float *f) {
    if (len == 0) return false;
    const char *p = s, *end = s + len;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    /* Up to 19 significant digits in w (10^19 < 2^64); value = w * 10^e10
     * exactly unless `inexact` (a nonzero digit was dropped). */
    uint64_t w = 0;
    int nd = 0;
    int64_t e10 = 0;
    bool inexact = false;
    for (; p < end && (unsigned)(*p - '0') < 10; p++) {
        unsigned c = (unsigned)(*p - '0');
        if (nd < 19) {
            w = w * 10 + c;
            nd += w != 0;
        } else {
            e10++;
            inexact |= c != 0;
        }
    }
    if (p < end && *p == '.') {
        for (p++; p < end && (unsigned)(*p - '0') < 10; p++) {
            unsigned c = (unsigned)(*p - '0');
            if (nd < 19) {
                w = w * 10 + c;
                nd += w != 0;
                e10--;
            } else {
                inexact |= c != 0;
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        bool eneg = false;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        int64_t ev = 0;
        for (; p < end && (unsigned)(*p - '0') < 10; p++)
            if (ev < EXP_CAP) ev = ev * 10 + (*p - '0');
        e10 += eneg ? -ev : ev;
    }
    if (p != end) { /* not JSON number syntax: the C library's reading */
        double v;
        num_parse_slow(s, len, true, &v, f);
        if (d) *d = v;
        return true;
    }
    num_convert(w, e10, neg, inexact, s, len, d, f);
    return true;
}

/* Eight ASCII digits at p (8 bytes readable) as a number, or -1 if they are
 * not all digits: SWAR on a little-endian 64-bit word, first digit in the
 * low byte. */
HOT_INLINE int64_t eight_digits(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    v -= UINT64_C(0x3030303030303030); /* each byte: digit value if a digit */
    /* a byte is a digit iff its value is <= 9: adding 0x76 sets no high bit
     * and the subtraction above borrowed from none (bytes >= '0') */
    if (((v + UINT64_C(0x7676767676767676)) | v) & UINT64_C(0x8080808080808080)) return -1;
    v = v * 10 + (v >> 8); /* bytes 0,2,4,6: two-digit numbers */
    v = ((v & UINT64_C(0x000000FF000000FF)) * (100 + (UINT64_C(1000000) << 32)) +
         ((v >> 16) & UINT64_C(0x000000FF000000FF)) * (1 + (UINT64_C(10000) << 32))) >>
        32;
    return (int64_t)(uint32_t)v;
}

/* Accumulate the digits at *pp into *w (mod 2^64), eight at a time when the
 * input allows. */
HOT_INLINE void scan_digits(const char **pp, const char *end, uint64_t *w) {
    const char *p = *pp;
    uint64_t x = *w;
    while (end - p >= 8) {
        int64_t e = eight_digits(p);
        if (e < 0) break;
        x = x * 100000000 + (uint64_t)e;
        p += 8;
    }
    while (p < end && (unsigned)(*p - '0') <= 9) x = x * 10 + (unsigned)(*p++ - '0');
    *pp = p;
    *w = x;
}

size_t num_scan_json(const char *s, const char *end, double *d, float *f, size_t *bad,
                     const char **why) {
    const char *p = s;
    bool neg = p < end && *p == '-';
    p += neg;
    if (p == end || (unsigned)(*p - '0') > 9) {
        *why = neg ? "expected a digit after '-'" : "expected a number";
        goto fail;
    }
    uint64_t w = 0;
    const char *ds = p;
    if (*p == '0') {
        p++;
        if (p < end && (unsigned)(*p - '0') <= 9) {
            *why = "leading zeros are not allowed in numbers";
            goto fail;
        }
    } else {
        scan_digits(&p, end, &w);
    }
    size_t ndig = (size_t)(p - ds);
    int64_t e10 = 0;
    if (p < end && *p == '.') {
        const char *fs = ++p;
        scan_digits(&p, end, &w);
        if (p == fs) {
            *why = "expected a digit after the decimal point";
            goto fail;
        }
        ndig += (size_t)(p - fs);
        e10 = -(int64_t)(p - fs);
    }
    if (p < end && (*p | 0x20) == 'e') {
        p++;
        bool eneg = false;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p == end || (unsigned)(*p - '0') > 9) {
            *why = "expected a digit in the exponent";
            goto fail;
        }
        int64_t ev = 0;
        for (; p < end && (unsigned)(*p - '0') <= 9; p++)
            if (ev < EXP_CAP) ev = ev * 10 + (*p - '0');
        e10 += eneg ? -ev : ev;
    }
    size_t len = (size_t)(p - s);
    if (ndig > 19) /* w overflowed, or leading zeros: count digits properly */
        num_parse(s, len, d, f);
    else
        num_convert(w, e10, neg, false, s, len, d, f);
    return len;
fail:
    *bad = (size_t)(p - s);
    return 0;
}

/* ------------------------------------------------------- float formatting */

/* v < 10^8 as eight decimal digit values (leading zeros included), one a
 * byte, the first in the low byte: SWAR, splitting into 4+4 digits in two
 * 32-bit lanes, then 2+2 in 16-bit lanes, then 1+1 in bytes. The divisions
 * by 100 and 10 are multiply-shifts exact for lanes below 10000 and 100
 * respectively (checked exhaustively for all v < 10^8 when written). */
static inline uint64_t eight_digit_values(uint32_t v) {
    uint64_t y = (v / 10000) | (uint64_t)(v % 10000) << 32;
    uint64_t z = ((y * 10486) >> 20) & UINT64_C(0x0000007F0000007F);
    z |= (y - z * 100) << 16;
    uint64_t t = ((z * 103) >> 10) & UINT64_C(0x000F000F000F000F);
    t |= (z - t * 10) << 8;
    return t;
}

/* Write digits * 10^exp10 (0 < digits < 10^9, no trailing zeros) in the
 * header's format; buf has FMT_F32_MAX bytes, of which up to 27 may be
 * scribbled on. Returns the length.
 *
 * The text is assembled in registers (S: the digit characters of a u128,
 * first in the low byte) and stored with fixed 16-byte stores, with few
 * branches: the digit count and the exponent of real data are too random to
 * predict, and composing it in a memory buffer and copying pieces out costs
 * store-forwarding stalls (measured: a third of the time). */
static size_t fmt_decimal(char *buf, bool neg, uint64_t digits, int exp10) {
    char *o = buf;
    *o = '-';
    o += neg;
    uint32_t hi = (uint32_t)(digits / 100000000);
    uint64_t t = eight_digit_values((uint32_t)(digits % 100000000));
    uint64_t ta = t + UINT64_C(0x3030303030303030);
    int lz = hi ? 0 : 1 + __builtin_ctzll(t | (UINT64_C(1) << 63)) / 8; /* of 9 digits */
    int n = 9 - lz;
    u128 S = lz ? (u128)(ta >> (8 * (lz - 1))) : ((u128)ta << 8 | (uint8_t)('0' + hi));
    const u128 zeros = (u128)UINT64_C(0x3030303030303030) << 64 | UINT64_C(0x3030303030303030);
    int E = exp10 + n - 1; /* exponent of the leading digit */
    if (E >= 0 && E < 9) {
        if (n > E + 1) { /* ddd.dd */
            u128 tail = S >> (8 * (E + 1));
            memcpy(o, &S, 16);
            o[E + 1] = '.';
            memcpy(o + E + 2, &tail, 16);
            o += n + 1;
        } else { /* an integer: the digits, then '0's */
            u128 Z = S | zeros << (8 * n);
            memcpy(o, &Z, 16);
            o += E + 1;
        }
    } else if (E < 0 && E >= -5) { /* 0.000ddd */
        memcpy(o, "0.000000", 8);
        memcpy(o + 1 - E, &S, 16);
        o += 1 - E + n;
    } else { /* d.ddde+XX */
        u128 tail = S >> 8;
        o[0] = (char)(uint8_t)S;
        o[1] = '.';
        memcpy(o + 2, &tail, 16);
        o += n > 1 ? n + 1 : 1;
        *o++ = 'e';
        *o++ = E < 0 ? '-' : '+';
        unsigned ae = (unsigned)(E < 0 ? -E : E);
        if (ae >= 100) {
            *o++ = (char)('0' + ae / 100);
            ae %= 100;
        }
        o[0] = (char)('0' + ae / 10);
        o[1] = (char)('0' + ae % 10);
        o += 2;
    }
    return (size_t)(o - buf);
}

/* floor(m * p5 / 2^k) for m < 2^32, p5 < 2^128, exactly (the product has up
 * to 160 bits; the result is known to fit 64); *exact tells whether the
 * division left no remainder. k may be -1 (then it multiplies by 2). */
static inline uint64_t mul_shift_exact(uint32_t m, u128 p5, int k, bool *exact) {
    u128 lo = (u128)m * (uint64_t)p5;
    u128 mid = (u128)m * (uint64_t)(p5 >> 64) + (uint64_t)(lo >> 64);
    uint64_t a0 = (uint64_t)lo; /* product = mid * 2^64 + a0 */
    if (k <= 0) {
        *exact = true;
        return a0 << -k;
    }
    if (k < 64) {
        *exact = (a0 & ((UINT64_C(1) << k) - 1)) == 0;
        return (a0 >> k) | ((uint64_t)mid << (64 - k));
    }
    if (k == 64) {
        *exact = a0 == 0;
        return (uint64_t)mid;
    }
    *exact = a0 == 0 && (mid & (((u128)1 << (k - 64)) - 1)) == 0;
    return (uint64_t)(mid >> (k - 64));
}

typedef struct {
    uint32_t digits; /* kind 0: the value is digits * 10^q */
    int16_t q;
    uint8_t neg, kind; /* kind 1: a zero; 2: not finite */
} f32_dec;

static f32_dec f32_shortest(float x);

/* The digits first (f32_shortest, below), the text after. Kept apart, and
 * with scale64_tab, the compiler makes markedly better code: 1.22x the
 * speed on softmax rows and on uniform values (either change alone gained
 * nothing). Output checked identical to the previous code for all 2^32
 * bit patterns. */
size_t fmt_f32_shortest(char *buf, float x) {
    tables();
    f32_dec v = f32_shortest(x);
    if (__builtin_expect(v.kind == 0, 1)) return fmt_decimal(buf, v.neg, v.digits, v.q);
    if (v.kind == 2) return 0;
    buf[0] = '-';
    buf[v.neg] = '0';
    return 1u + v.neg;
}

/* Shortest digits, in the manner of Ryu (Adams, 2018) but with exact
 * arithmetic instead of truncated multipliers, which float32 can afford:
 *
 * x = m2 * 2^e2. Its rounding interval, in units of 2^e (e = e2 - 2), is
 * [mm, mp] around mv = 4*m2 (mp = mv + 2; mm = mv - 2, or mv - 1 when x is a
 * power of two whose lower neighbour is closer); the ends belong to it when
 * m2 is even (ties round to even). Any decimal inside reads back as x.
 *
 * Start one digit below a decimal scale 10^q0 <= 2^e (the interval, at
 * least 3*2^e wide, holds several multiples of 10^q0, so at least one digit
 * is dropped below and the last dropped digit is known) and compute
 * floor(X * 2^e / 10^q) for X in mm, mv, mp exactly, with flags telling
 * whether they were exact. Then drop decimal digits while the interval still
 * contains a multiple of the next power of ten, and finally round the
 * value's own digits to nearest (ties to even), which stays inside the
 * interval. The values stay below mp * 100 < 2^33. */
HOT_INLINE f32_dec f32_shortest(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bool neg = bits >> 31;
    uint32_t ieee_exp = (bits >> 23) & 0xFF, frac = bits & 0x7FFFFF;
    if (ieee_exp == 0xFF) return (f32_dec){0, 0, neg, 2};
    if (ieee_exp == 0 && frac == 0) return (f32_dec){0, 0, neg, 1};
    uint32_t m2;
    int e2;
    if (ieee_exp == 0) {
        m2 = frac;
        e2 = -149;
    } else {
        m2 = frac | (UINT32_C(1) << 23);
        e2 = (int)ieee_exp - 150;
    }
    bool accept = (m2 & 1) == 0;
    uint32_t mv = 4 * m2, mp = mv + 2;
    uint32_t mm = mv - 1 - (frac != 0 || ieee_exp <= 1);
    int e = e2 - 2;
    int q = log10_pow2_tab[e - E2_MIN] - 1;

    uint64_t vm, vr, vp;
    bool vm_exact, vr_exact, vp_exact;
    if (e >= 0) {
        /* x >= 2^25: X * 2^(e-q) < 2^98 divided by 5^q; rare in tensors, so
         * the 128-bit division is acceptable. */
        if (q < 0) q = 0; /* e < 4: the values are integers, all exact */
        u128 div = pow5_tab[q];
        int sh = e - q;
        u128 a = (u128)mm << sh, b = (u128)mv << sh, c = (u128)mp << sh;
        vm = (uint64_t)(a / div);
        vm_exact = a % div == 0;
        vr = (uint64_t)(b / div);
        vr_exact = b % div == 0;
        vp = (uint64_t)(c / div);
        vp_exact = c % div == 0;
    } else {
        int s = -q, k = -e - s;
        u128 p5 = pow5_tab[s];
        const scale64 *sc = &scale64_tab[e - E2_MIN];
        if (sc->ok) {
            /* most tensor values, whose magnitudes are within a few decades
             * of 1, end here */
            u128 a = (u128)((uint64_t)mm << sc->shl) * sc->mul,
                 b = (u128)((uint64_t)mv << sc->shl) * sc->mul,
                 c = (u128)((uint64_t)mp << sc->shl) * sc->mul;
            vm = (uint64_t)(a >> 64);
            vm_exact = (uint64_t)a == 0;
            vr = (uint64_t)(b >> 64);
            vr_exact = (uint64_t)b == 0;
            vp = (uint64_t)(c >> 64);
            vp_exact = (uint64_t)c == 0;
        } else {
            vm = mul_shift_exact(mm, p5, k, &vm_exact);
            vr = mul_shift_exact(mv, p5, k, &vr_exact);
            vp = mul_shift_exact(mp, p5, k, &vp_exact);
        }
    }
    if (!accept && vp_exact) vp--; /* the upper end itself is excluded */

    uint64_t last = 0;
    bool vm_tz = vm_exact, vr_tz = vr_exact;
    if (!vm_tz && !vr_tz) {
        /* common case: only the digit removed last decides the rounding.
         * At least one digit goes (see above); whether a second one can is
         * a coin toss for real data, so both are computed and one is picked
         * without a branch; a third is rare. */
        uint64_t vr10 = vr / 10, vr100 = vr / 100, vp100 = vp / 100, vm100 = vm / 100;
        bool two = vp100 > vm100;
        last = two ? vr10 % 10 : vr % 10;
        vr = two ? vr100 : vr10;
        vp = two ? vp100 : vp / 10;
        vm = two ? vm100 : vm / 10;
        q += 1 + two;
        while (vp / 10 > vm / 10) {
            last = vr % 10;
            vr /= 10;
            vp /= 10;
            vm /= 10;
            q++;
        }
        uint64_t out = vr + (vr == vm || last >= 5);
        return (f32_dec){(uint32_t)out, (int16_t)q, neg, 0};
    }
    while (vp / 10 > vm / 10) {
        vm_tz &= vm % 10 == 0;
        vr_tz &= last == 0;
        last = vr % 10;
        vr /= 10;
        vp /= 10;
        vm /= 10;
        q++;
    }
    if (accept && vm_tz) {
        /* the lower end is an exact, admissible decimal: more digits may go */
        while (vm != 0 && vm % 10 == 0) {
            vr_tz &= last == 0;
            last = vr % 10;
            vr /= 10;
            vp /= 10;
            vm /= 10;
            q++;
        }
    }
    if (vr_tz && last == 5 && vr % 2 == 0) last = 4; /* exact tie: to even */
    uint64_t out = vr + ((vr == vm && !(accept && vm_tz)) || last >= 5);
    return (f32_dec){(uint32_t)out, (int16_t)q, neg, 0};
}

size_t fmt_f32_digits(char *buf, float x, int digits) {
    if (x != x || x - x != 0) return 0; /* NaN or infinity */
    if (digits < 1) digits = 1;
    if (digits > 9) digits = 9;
    if (x == 0) {
        char *o = buf;
        if (signbit(x)) *o++ = '-';
        *o++ = '0';
        return (size_t)(o - buf);
    }
    /* glibc's %e is correctly rounded from the exact binary value; take its
     * digits and exponent and lay them out in our format. */
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.*e", digits - 1, (double)x);
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    uint64_t dg = 0;
    int nfrac = 0;
    for (; *p >= '0' && *p <= '9'; p++) dg = dg * 10 + (uint64_t)(*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, nfrac++) dg = dg * 10 + (uint64_t)(*p - '0');
    int ex = 0;
    if (*p == 'e') ex = atoi(p + 1);
    ex -= nfrac;
    while (dg % 10 == 0) { /* dg > 0: x != 0 */
        dg /= 10;
        ex++;
    }
    return fmt_decimal(buf, neg, dg, ex);
}
