/* numfmt.c - float32 text in and out, for the /attend codec (numfmt.h's
 * base64 functions live in base64.c, with their vector kernels).
 *
 * The file has three parts:
 *   1. tables: powers of ten as doubles and as truncated 128-bit
 *      significands, and fmt_f32_shortest's scales per float32 exponent.
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

static double pow10_tab[23]; /* 10^0..10^22: every one exact in a double */
/* fmt_fixed's input: d * FIXED_M, for nine digits d (10^8 <= d < 10^9), is
 * d / 10^8 in fixed point with 57 bits of fraction (FIXED_M = ceil(2^57 /
 * 10^8)); digit_pairs: "00" to "99" */
#define FIXED_M UINT64_C(1441151881)
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";
static const uint32_t pow10_u32[10] = {1,      10,      100,      1000,      10000,
                                       100000, 1000000, 10000000, 100000000, 1000000000};

/* fmt_f32_shortest's scales (see sf_candidates) per float32 biased
 * exponent (0..254), and again (index + 256) for the narrower interval of a
 * power of two: g = ceil(10^-k / 2^r) with 2^63 <= g < 2^64, sh = h + 2 and
 * d = 2^(h+1) with h in [1, 4]. For normal floats (c >= 2^23), s =
 * floor(x / 10^k) has N or N + 1 digits, N + 1 when s >= thr = 10^N; pm[0]
 * and pm[1] turn N and N + 1 digits into fmt_fixed's input (10^(9-N) and
 * 10^(8-N) times FIXED_M), and e0 = k + N - 1 is the exponent of the first
 * of N digits. */
typedef struct {
    uint64_t g, pm[2];
    uint32_t d, thr;
    int16_t k, e0;
    uint8_t sh;
} sf_scale;
static sf_scale sf_tab[512];

/* 10^q ~= (el_pow10[q] + delta) * 2^el_pow10_e2[q], 0 <= delta < 1, with
 * el_pow10[q] normalized to [2^127, 2^128): the truncated 128-bit
 * significand of every power of ten a double can need. */
#define EL_QMIN (-342)
#define EL_QMAX 308
static u128 el_pow10[EL_QMAX - EL_QMIN + 1];
static int16_t el_pow10_e2[EL_QMAX - EL_QMIN + 1];

/* floor(g * cp / 2^32): X = g * cp / 2^64 in fixed point with 32 bits of
 * fraction, of which only the integer part, and whether the fraction is 0 or
 * 1 in its last place (X exact) or more, are to be trusted: see
 * sf_candidates */
HOT_INLINE uint64_t sf_fixed(uint64_t g, uint64_t cp) {
    return (uint64_t)(((u128)g * cp) >> 32);
}

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
    /* 10^k for k <= 22 is an integer below 2^53 * 2^22 with at most 53
     * significant bits (10^k = 5^k 2^k and 5^22 < 2^52): converting the exact
     * integer to double is exact. */
    u128 t = 1;
    for (int i = 0; i <= 22; i++) {
        pow10_tab[i] = (double)t;
        t *= 10;
    }
    /* Schubfach's scale for x = c 2^q: k = floor(log10(2^q)), or
     * floor(log10(3/4 2^q)) when the interval below x is half as wide (x a
     * power of two above the smallest normal), both by the usual
     * multiply-shift approximations (exact for |q| <= 1500; floor division
     * written out, as >> of a negative int is implementation-defined), and
     * g = the top 64 bits of el_pow10[-k] rounded up (they hold 10^-k's
     * significand exactly when -k >= 0, as 5^45 < 2^128, and anything
     * below them counts). */
    for (int i = 0; i < 512; i++) {
        int be = i & 255, closer = i >> 8;
        if (be == 255 || (closer && be <= 1)) continue;
        int q = (be ? be : 1) - 150;
        int64_t num = (int64_t)q * 1262611 - (closer ? 524031 : 0);
        int k = (int)(num >= 0 ? num >> 22 : -((-num + (1 << 22) - 1) >> 22));
        int j = -k;
        u128 T = el_pow10[j - EL_QMIN];
        uint64_t g = (uint64_t)(T >> 64) + (j < 0 || (uint64_t)T != 0);
        int h = q + (el_pow10_e2[j - EL_QMIN] + 127) + 1; /* + floor(log2(10^j)) */
        /* the smallest s of a normal float: its digit count, by the same
         * arithmetic as at run time (s grows with c) */
        uint64_t smin = sf_fixed(g, (uint64_t)1 << (23 + h + 2)) >> 34;
        int N = 1;
        while (N < 9 && smin >= pow10_u32[N]) N++;
        sf_tab[i] = (sf_scale){g,
                               {pow10_u32[9 - N] * FIXED_M, pow10_u32[9 - N] / 10 * FIXED_M},
                               UINT32_C(2) << h,
                               pow10_u32[N],
                               (int16_t)k,
                               (int16_t)(k + N - 1),
                               (uint8_t)(h + 2)};
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

/* Write d * 10^(E-8) (10^8 <= d < 10^9: nine digits, the first one's
 * exponent E; trailing zeros are dropped), given as y = d * FIXED_M, in the
 * header's format; buf has FMT_F32_MAX bytes, of which up to 18 may be
 * scribbled on. Returns the length.
 *
 * y is d / 10^8 in fixed point with 57 bits of fraction: the integer part
 * is the first digit, and each multiplication of the fraction by 100 brings
 * the next two up (Jeon's Dragonbox printer, after jeaiii; exact for every
 * such d: checked). With exactly nine digits, the first digit and the eight
 * after it sit at fixed places, and every '0' past the significant ones is a
 * real '0' character: the text is a few fixed-size stores at offsets that
 * depend on the exponent, with no 128-bit or byte-count shifts and few
 * branches (the digit count of real data is too random to predict; the
 * layout case, from the magnitude, mostly is). Composing it in a memory
 * buffer and copying pieces out costs store-forwarding stalls (measured: a
 * third of the time). */
HOT_INLINE size_t fmt_fixed(char *buf, bool neg, uint64_t y, int E) {
    char *o = buf;
    *o = '-';
    o += neg;
    const uint64_t frac57 = (UINT64_C(1) << 57) - 1;
    char c0 = (char)('0' + (y >> 57));
    /* times 25 rather than 100, the point moving 2 bits down each time
     * instead: the same numbers (divided by 4, 16, ...), one instruction
     * fewer each (GCC multiplies by 100 with two LEAs and a shift) */
    uint16_t p1, p2, p3, p4; /* (written out: GCC -O2 keeps such a loop) */
    y = (y & frac57) * 25;
    memcpy(&p1, digit_pairs + 2 * (y >> 55), 2);
    y = (y & frac57 >> 2) * 25;
    memcpy(&p2, digit_pairs + 2 * (y >> 53), 2);
    y = (y & frac57 >> 4) * 25;
    memcpy(&p3, digit_pairs + 2 * (y >> 51), 2);
    y = (y & frac57 >> 6) * 25;
    memcpy(&p4, digit_pairs + 2 * (y >> 49), 2);
    /* the 8 digits after c0 */
    uint64_t ta = p1 | (uint64_t)p2 << 16 | (uint64_t)p3 << 32 | (uint64_t)p4 << 48;
    uint64_t lo = ta ^ UINT64_C(0x3030303030303030); /* their values */
    /* the digit count without the trailing zeros, from the top zero bytes
     * of lo: ctz of the byte-reversed word, as x86's bsr (clz without LZCNT)
     * keeps its output register's old value for a zero input, so depends on
     * it, which chained each number to the one before through the output
     * pointer (measured: the text took twice as long) */
    int n = 9 - (int)(lo ? (unsigned)__builtin_ctzll(__builtin_bswap64(lo)) / 8 : 8);
    if (E >= 0 && E < 9) {
        o[0] = c0;
        memcpy(o + 1, &ta, 8);
        if (n > E + 1) { /* ddd.dd (E <= 7) */
            uint64_t tail = ta >> (8 * E);
            o[E + 1] = '.';
            memcpy(o + E + 2, &tail, 8);
            o += n + 1;
        } else { /* an integer, '0's included */
            o += E + 1;
        }
    } else if (E < 0 && E >= -5) { /* 0.000ddd */
        memcpy(o, "0.000000", 8);
        o[1 - E] = c0;
        memcpy(o + 2 - E, &ta, 8);
        o += 1 - E + n;
    } else { /* d.ddde+XX */
        o[0] = c0;
        o[1] = '.';
        memcpy(o + 2, &ta, 8);
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

/* Write digits * 10^exp10 (0 < digits < 10^9) in the header's format, like
 * fmt_fixed. For the less travelled paths. */
static size_t fmt_decimal(char *buf, bool neg, uint32_t digits, int exp10) {
    int nd = 1;
    while (nd < 9 && digits >= pow10_u32[nd]) nd++;
    return fmt_fixed(buf, neg, digits * pow10_u32[9 - nd] * FIXED_M, exp10 + nd - 1);
}

/* Shortest digits by Schubfach (Giulietti, "The Schubfach way to render
 * doubles", 2020), for float32 with a 64-bit scale, as in Bolz's float32
 * version (Drachennest, 2020):
 *
 * x = c * 2^q. Its rounding interval, in units of 2^(q-2), is [cbl, cbr]
 * around cb = 4c (cbr = cb + 2; cbl = cb - 2, or cb - 1 when x is a power of
 * two whose lower neighbour is closer); the ends belong to it when c is even
 * (ties round to even). Any decimal inside reads back as x. With k =
 * floor(log10) of its width (2^q, or 3/4 2^q), the interval holds at least
 * one multiple of 10^k and at most one of 10^(k+1).
 *
 * X = 4x / 10^k, the value in units of 10^k / 4, and likewise Xl, Xr for the
 * ends come from one 64x64 product each: g * (cb << h) / 2^64, with g =
 * ceil(10^-k / 2^r), r = floor(log2(10^-k)) - 63, and h = q + 1 +
 * floor(log2(10^-k)). Giulietti shows that rounding 10^-k up this way keeps
 * floor(X) and whether X is an integer, here told by the next 32 bits (0 or
 * 1, else at least 2); he proves it for doubles with a 126-bit g, and the
 * check over all 2^32 floats confirms 64 bits for float32. That is all the
 * comparisons below need: sf_fixed's W = floor(product / 2^32) is X in
 * fixed point, and for an integer m, X <= m iff W <= (m << 32) + 1, X >= m
 * iff W >= m << 32.
 *
 * Then, with s = floor(x / 10^k): if a multiple of 10^(k+1) is inside (at
 * most one is, and it can only be 10 floor(s/10) or the next), it is the
 * shortest decimal (any trailing zeros it has, which a still shorter one
 * would show, are for fmt_fixed to drop). Otherwise the answer is x / 10^k
 * rounded to the nearest integer, ties to even, times 10^k: for a normal x
 * other than a power of two, the interval reaches 2^(q-1) >= 10^k / 2 on
 * either side, so the nearer of s and s + 1 is always inside (on an end only
 * if 2^q = 10^k, q = 0: then x is an integer, its own nearest); for the
 * narrower intervals it may be outside, and the other one is taken. That is
 * the decimal Ryu (Adams, 2018) and the exact algorithm this replaced pick:
 * shortest, then nearest, then even. Checked identical to it for all 2^32
 * bit patterns.
 *
 * No loop and no data-dependent branch: whether the shorter candidate exists
 * is a coin toss for real data, so everything is computed and selected. */

/* The candidates for c * 2^q with the scale sc of q's exponent and the
 * lower half-width dl (sc->d, or sc->d / 2 for the narrower interval: then
 * narrow is set), in units of 2^(q-2) << h: s = floor(x / 10^k); one, x /
 * 10^k rounded to the nearest admissible integer (ties to even); up, the
 * largest multiple of 10^(k+1) (divided by it) not above the interval, and
 * two: whether it is inside. */
typedef struct {
    uint64_t s, one;
    uint32_t up;
    bool two;
} sf_cand;

HOT_INLINE sf_cand sf_candidates(uint32_t c, const sf_scale *sc, uint32_t dl, bool narrow) {
    uint64_t cb = (uint64_t)c << sc->sh, g = sc->g;
    uint64_t wl = sf_fixed(g, cb - dl), wb = sf_fixed(g, cb), wr = sf_fixed(g, cb + sc->d);
    /* an integer m (in units of 10^k / 4) is admissible, inside the
     * interval (ends included when c is even), iff lo <= m << 32 <= hi
     * (wl >= 2^33: no wrap) */
    uint64_t odd = c & 1, lo = wl + 2 * odd - 1, hi = wr - 2 * odd;
    uint32_t up = (uint32_t)(hi >> 32) / 40;
    bool two = (uint64_t)(40 * up) << 32 >= lo;
    /* floor(X / 4 + 1/2), or one less on an exact tie with s even: X / 4 is
     * s + f / 2^34, f >= 2^33 + 2 above the midpoint, 2^33 or 2^33 + 1 on it */
    uint64_t r = (wb + (UINT64_C(1) << 33) - 2 + ((wb >> 33) & 2)) >> 34;
    if (narrow) { /* the other neighbour when outside (one is inside) */
        uint64_t m = r << 34;
        r = r + (m < lo) - (m > hi);
    }
    return (sf_cand){wb >> 34, r, up, two};
}

/* Subnormals and powers of two (the narrower interval): rare in real data,
 * kept out of the hot path. be < 255, and x is not zero. */
static __attribute__((noinline)) size_t fmt_f32_rare(char *buf, bool neg, uint32_t be,
                                                     uint32_t frac) {
    uint32_t c = be ? frac | UINT32_C(1) << 23 : frac;
    uint32_t closer = frac == 0 && be > 1;
    const sf_scale *sc = &sf_tab[be | closer << 8];
    sf_cand v = sf_candidates(c, sc, closer ? sc->d / 2 : sc->d, true);
    return fmt_decimal(buf, neg, (uint32_t)(v.two ? v.up : v.one), sc->k + v.two);
}

/* The digits (above), scaled to nine with their exponent from the table (no
 * digit count to compute), then the text (fmt_fixed), all inlined here.
 * Measured: over 1.5 times the speed of the previous code (Ryu-like exact
 * arithmetic: three products, then up to nine divisions by constants), whose
 * output it matches for all 2^32 bit patterns. */
size_t fmt_f32_shortest(char *buf, float x) {
    tables();
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bool neg = bits >> 31;
    uint32_t be = (bits >> 23) & 0xFF, frac = bits & 0x7FFFFF;
    if (__builtin_expect(frac == 0 || be - 1 >= 254, 0)) {
        if (be == 0xFF) return 0; /* not finite */
        if (be == 0 && frac == 0) {
            buf[0] = '-';
            buf[neg] = '0';
            return 1u + neg;
        }
        return fmt_f32_rare(buf, neg, be, frac);
    }
    /* normal, not a power of two */
    const sf_scale *sc = &sf_tab[be];
    sf_cand v = sf_candidates(frac | UINT32_C(1) << 23, sc, sc->d, false);
    /* a mask, not ?: (GCC makes that a branch, mispredicted half the time:
     * measured 1.3 times slower) */
    uint64_t base = v.one + ((10 * v.up - v.one) & -(uint64_t)v.two); /* digits of one */
    bool more = v.s >= sc->thr; /* s, so one and 10 up, have N + 1 digits */
    uint64_t y = base * sc->pm[more];
    int E = sc->e0 + more;
    /* 10 up = 10^(N+more) exactly: rounded up to one digit more */
    if (__builtin_expect(y >= UINT64_C(10) << 57, 0)) {
        y = 100000000 * FIXED_M;
        E++;
    }
    return fmt_fixed(buf, neg, y, E);
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
    return fmt_decimal(buf, neg, (uint32_t)dg, ex);
}
