/* test_numfmt.c - float32 text in and out, and base64.
 *
 * The references are the C library's: strtof/strtod for reading (glibc rounds
 * correctly), printf's %.{p}g / %.{p}e for digits (glibc prints exact
 * digits). base64: the scalar kernel against RFC 4648's vectors and a naive
 * codec written here from the RFC, then every vector kernel this CPU has
 * against the scalar kernel, bad_at included. Random inputs come from a
 * fixed seed (NUMFMT_SEED overrides it; NUMFMT_N the number of random
 * floats, default ten million).
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64_kernels.h"
#include "check.h"
#include "numfmt.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state;

/* Everything here is single-threaded code: ThreadSanitizer can find nothing
 * in it and makes the sweeps 12-fold slower (150 s), so under it the large
 * sweeps and random loops take every g_sample-th case (15). Every other
 * build, ASan and UBSan included, runs them whole. */
static int g_sample = 1;

static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static unsigned rnd_below(unsigned n) { return (unsigned)(rnd() % n); }

static uint32_t f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static uint64_t d2u(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

/* Significant digits of a decimal string: from the first nonzero digit to the
 * last nonzero digit of the mantissa. */
static int sig_digits(const char *s) {
    int first = -1, last = -1, i = 0;
    for (const char *p = s; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p < '0' || *p > '9') continue;
        if (*p != '0') {
            if (first < 0) first = i;
            last = i;
        }
        i++;
    }
    return first < 0 ? 1 : last - first + 1;
}

/* The format promised by numfmt.h: JSON number syntax; plain when the
 * leading digit's exponent E is in [-5, 9), else d[.ddd]e[+-]XX with at
 * least two exponent digits; no trailing zeros after a '.'; no '+' on the
 * mantissa. Returns NULL when fine, else what is wrong. */
static const char *format_problem(const char *s) {
    const char *p = s;
    if (*p == '-') p++;
    if (*p < '0' || *p > '9') return "no leading digit";
    if (*p == '0' && p[1] >= '0' && p[1] <= '9') return "leading zero";
    const char *mant = p;
    while (*p >= '0' && *p <= '9') p++;
    size_t intlen = (size_t)(p - mant);
    const char *dot = NULL;
    if (*p == '.') {
        dot = p++;
        if (*p < '0' || *p > '9') return "no digit after '.'";
        while (*p >= '0' && *p <= '9') p++;
        if (p[-1] == '0') return "trailing zero after '.'";
    }
    if (*p == 'e') {
        p++;
        if (*p != '+' && *p != '-') return "no exponent sign";
        int neg = *p == '-';
        p++;
        const char *ed = p;
        while (*p >= '0' && *p <= '9') p++;
        if (p - ed < 2) return "fewer than two exponent digits";
        if (*p) return "garbage after exponent";
        int E = atoi(ed) * (neg ? -1 : 1);
        if (intlen != 1 || *mant == '0') return "scientific mantissa not d.ddd";
        if (E >= -5 && E < 9) return "scientific form inside [-5, 9)";
        return NULL;
    }
    if (*p) return "garbage";
    /* plain: leading digit exponent */
    int E;
    if (*mant != '0') {
        E = (int)intlen - 1;
    } else {
        if (!dot) return NULL; /* "0" */
        const char *q = dot + 1;
        E = -1;
        while (*q == '0') {
            q++;
            E--;
        }
    }
    if (E < -5 || E >= 9) return "plain form outside [-5, 9)";
    return NULL;
}

/* ------------------------------------------------- fmt_f32_shortest */

static long n_checked, n_shortness;

/* Round trip (always), format (always), and on request the shortness and
 * closeness against printf: no %.{p}g with p < ours reads back, and when
 * %.{ours}g reads back it is the same decimal value as ours. */
static void check_shortest(float x, int deep) {
    char buf[FMT_F32_MAX + 1];
    size_t n = fmt_f32_shortest(buf, x);
    buf[n] = '\0';
    n_checked++;
    float r = strtof(buf, NULL);
    if (f2u(r) != f2u(x)) {
        CHECK_MSG(0, "shortest(%a = %.9g) = \"%s\" reads back as %.9g", (double)x, (double)x, buf,
                  (double)r);
        return;
    }
    const char *fp = format_problem(buf);
    if (fp) {
        CHECK_MSG(0, "shortest(%.9g) = \"%s\": %s", (double)x, buf, fp);
        return;
    }
    if (n > 16) CHECK_MSG(0, "shortest(%.9g) = \"%s\" longer than 16", (double)x, buf);
    if (!deep) return;
    n_shortness++;
    int nd = sig_digits(buf);
    char alt[320];
    int minp = 0;
    for (int p = 1; p <= 9; p++) {
        snprintf(alt, sizeof alt, "%.*g", p, (double)x);
        if (f2u(strtof(alt, NULL)) == f2u(x)) {
            minp = p;
            break;
        }
    }
    if (minp == 0 || nd > minp) {
        CHECK_MSG(0, "shortest(%.9g) = \"%s\" has %d digits, %%.%dg round-trips", (double)x, buf, nd,
                  minp);
        return;
    }
    /* nothing shorter round-trips (printf's p digits are the closest p-digit
     * decimal, so if none of those reads back, no p-digit decimal does,
     * except at a power of two whose interval is lopsided, where ours may be
     * even shorter than printf's: then minp > nd and we checked nd <= minp) */
    for (int p = 1; p < nd; p++) {
        snprintf(alt, sizeof alt, "%.*g", p, (double)x);
        if (f2u(strtof(alt, NULL)) == f2u(x)) {
            CHECK_MSG(0, "shortest(%.9g) = \"%s\" but \"%s\" also reads back", (double)x, buf, alt);
            return;
        }
    }
    if (nd == minp) {
        snprintf(alt, sizeof alt, "%.*g", nd, (double)x);
        if (strtod(alt, NULL) != strtod(buf, NULL))
            CHECK_MSG(0, "shortest(%.9g) = \"%s\" is not the closest %d-digit decimal \"%s\"",
                      (double)x, buf, nd, alt);
    }
}

static void test_shortest_examples(void) {
    static const struct {
        float x;
        const char *s;
    } ex[] = {
        {1.0f, "1"},
        {0.5f, "0.5"},
        {1234567.0f, "1234567"},
        {1e10f, "1e+10"},
        {3.4028235e38f, "3.4028235e+38"},
        {1.2e-6f, "1.2e-06"},
        {1e-7f, "1e-07"},
        {0.1f, "0.1"},
        {-0.0f, "-0"},
        {0.0f, "0"},
        {-1.5f, "-1.5"},
        {1e-5f, "0.00001"},
        {123456789.0f, "123456790"},
        {1e9f, "1e+09"},
        {100.0f, "100"},
        {1e-45f, "1e-45"},
        {1.17549435e-38f, "1.1754944e-38"},
        {33554472.0f, "33554470"}, /* lower end of the interval is exact */
        {16777216.0f, "16777216"},
        {0.3f, "0.3"},
        {-2.5e-3f, "-0.0025"},
        {1e38f, "1e+38"},
        {9.999999e-6f, "9.999999e-06"},
    };
    char buf[FMT_F32_MAX + 1];
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        size_t n = fmt_f32_shortest(buf, ex[i].x);
        buf[n] = '\0';
        CHECK_STR_EQ(buf, ex[i].s);
    }
    CHECK_INT_EQ(fmt_f32_shortest(buf, INFINITY), 0);
    CHECK_INT_EQ(fmt_f32_shortest(buf, -INFINITY), 0);
    CHECK_INT_EQ(fmt_f32_shortest(buf, NAN), 0);
}

static void test_shortest_special_classes(void) {
    long before = n_checked;
    check_shortest(0.0f, 1);
    check_shortest(-0.0f, 1);
    check_shortest(FLT_MIN, 1);
    check_shortest(-FLT_MIN, 1);
    check_shortest(FLT_MAX, 1);
    check_shortest(-FLT_MAX, 1);
    check_shortest(FLT_TRUE_MIN, 1);
    check_shortest(u2f(0x007FFFFF), 1); /* largest subnormal */
    check_shortest(nextafterf(FLT_MIN, 1), 1);
    check_shortest(nextafterf(FLT_MAX, 0), 1);
    /* subnormals: every 3rd, and every one near the ends, both signs */
    for (uint32_t m = 1; m < 0x800000;
         m += (m < 4096 || m > 0x800000 - 4096) ? 1 : 3 * (uint32_t)g_sample) {
        check_shortest(u2f(m), (m & 1023) == 1 || m < 64);
        check_shortest(u2f(m | 0x80000000u), 0);
    }
    /* powers of ten 1e-45 .. 1e38 as strtof reads them, and their neighbours */
    for (int k = -45; k <= 38; k++) {
        char t[16];
        snprintf(t, sizeof t, "1e%d", k);
        float x = strtof(t, NULL);
        check_shortest(x, 1);
        check_shortest(nextafterf(x, 0), 1);
        check_shortest(nextafterf(x, INFINITY), 1);
    }
    /* powers of two 2^-149 .. 2^127 and their neighbours (the lopsided
     * intervals) */
    for (int k = -149; k <= 127; k++) {
        float x = ldexpf(1.0f, k);
        check_shortest(x, 1);
        check_shortest(-x, 1);
        check_shortest(nextafterf(x, 0), 1);
        check_shortest(nextafterf(x, INFINITY), 1);
    }
    /* every integer up to 2^24 + 4096 (exact in float below 2^24) */
    for (uint32_t i = 0; i <= (1u << 24) + 4096; i += (uint32_t)g_sample)
        check_shortest((float)i, (i % 4099) == 0);
    /* large integers: every representable float from 2^24 to 2^27 region, sampled */
    for (uint32_t u = f2u(16777216.0f); u < f2u(134217728.0f); u += 97 * (uint32_t)g_sample)
        check_shortest(u2f(u), 0);
    /* every float with a short decimal: d.ddd x 10^k for 1..4 digits */
    for (int k = -45; k <= 38; k++)
        for (int m = 1; m < 10000; m += (m < 1000 ? 1 : 7)) {
            char t[32];
            snprintf(t, sizeof t, "%de%d", m, k);
            float x = strtof(t, NULL);
            if (isfinite(x) && x != 0) check_shortest(x, (m % 13) == 0);
        }
    printf("shortest: %ld special-class floats checked\n", n_checked - before);
}

static void test_shortest_random(long n) {
    long before = n_checked, deep_before = n_shortness;
    for (long i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rnd();
        if (((u >> 23) & 0xFF) == 0xFF) u ^= 0x40000000u; /* NaN/inf -> finite */
        check_shortest(u2f(u), (i & 63) == 0);
        if (check_failed > 20) {
            printf("stopping random shortest test after 20 failures\n");
            break;
        }
    }
    CHECK(n_checked - before >= n / 2);
    printf("shortest: %ld random floats round-tripped, %ld checked for shortness and closeness\n",
           n_checked - before, n_shortness - deep_before);
}

/* ---------------------------------------------------------- fmt_f32_digits */

static void test_digits(void) {
    char buf[FMT_F32_MAX + 1], ref[320];
    size_t n = fmt_f32_digits(buf, 3.14159265f, 3);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "3.14");
    n = fmt_f32_digits(buf, 0.1f, 9);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "0.100000001");
    n = fmt_f32_digits(buf, 9.99f, 2);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "10");
    n = fmt_f32_digits(buf, 1.5e-7f, 1);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "2e-07"); /* 1.5e-7f is slightly above 1.5e-7 */
    n = fmt_f32_digits(buf, 1e10f, 4);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "1e+10");
    n = fmt_f32_digits(buf, -0.0f, 5);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "-0");
    n = fmt_f32_digits(buf, 123456789.0f, 9);
    buf[n] = '\0';
    CHECK_STR_EQ(buf, "123456792");
    CHECK_INT_EQ(fmt_f32_digits(buf, NAN, 3), 0);
    CHECK_INT_EQ(fmt_f32_digits(buf, INFINITY, 3), 0);
    int bad = 0;
    for (int i = 0; i < 300000 / g_sample && bad < 10; i++) {
        uint32_t u = (uint32_t)rnd();
        if (((u >> 23) & 0xFF) == 0xFF) u ^= 0x40000000u;
        float x = u2f(u);
        int p = 1 + (int)rnd_below(9);
        n = fmt_f32_digits(buf, x, p);
        buf[n] = '\0';
        snprintf(ref, sizeof ref, "%.*g", p, (double)x);
        const char *fp = format_problem(buf);
        if (strtod(buf, NULL) != strtod(ref, NULL) || fp || sig_digits(buf) > p) {
            CHECK_MSG(0, "digits(%.9g, %d) = \"%s\", %%.%dg = \"%s\" %s", (double)x, p, buf, p, ref,
                      fp ? fp : "");
            bad++;
        }
    }
    CHECK(bad == 0);
}

/* ------------------------------------------------------------- num_parse */

static long n_parsed;

static void check_parse(const char *s) {
    double d, dr = strtod(s, NULL);
    float f, fr = strtof(s, NULL);
    n_parsed++;
    if (!num_parse(s, strlen(s), &d, &f)) {
        CHECK_MSG(0, "num_parse(\"%s\") returned false", s);
        return;
    }
    if (d2u(d) != d2u(dr) || f2u(f) != f2u(fr))
        CHECK_MSG(0, "num_parse(\"%.80s\"): double %a (strtod %a), float %a (strtof %a)", s, d, dr,
                  (double)f, (double)fr);
}

/* A random JSON number: 1-25 significant digits, a decimal point somewhere
 * (or none), maybe leading zeros, an exponent from one of several ranges. */
static void random_number(char *out, size_t cap) {
    char *o = out;
    if (rnd() & 1) *o++ = '-';
    int nd = 1 + (int)rnd_below(25);
    char dg[32];
    for (int i = 0; i < nd; i++) dg[i] = (char)('0' + rnd_below(10));
    if (rnd_below(4) == 0) dg[nd - 1] = '5'; /* more ties */
    int point = (int)rnd_below((unsigned)nd + 1); /* digits before the point */
    if (point == 0) {
        *o++ = '0';
        if (rnd_below(3) == 0) {
            *o++ = '.';
            int z = (int)rnd_below(6);
            while (z--) *o++ = '0';
            memcpy(o, dg, (size_t)nd);
            o += nd;
            point = -1;
        }
    }
    if (point > 0) {
        if (dg[0] == '0') dg[0] = '1'; /* no leading zero in the integer part */
        memcpy(o, dg, (size_t)point);
        o += point;
        if (point < nd) {
            *o++ = '.';
            memcpy(o, dg + point, (size_t)(nd - point));
            o += nd - point;
        }
    } else if (point == 0) {
        *o++ = '.';
        memcpy(o, dg, (size_t)nd);
        o += nd;
    }
    int ex = 0, has_e = 1;
    switch (rnd_below(8)) {
    case 0: has_e = 0; break;
    case 1: ex = (int)rnd_below(45) - 22; break;
    case 2: ex = 280 + (int)rnd_below(40); break;   /* double overflow */
    case 3: ex = -300 - (int)rnd_below(50); break;  /* double underflow */
    case 4: ex = 30 + (int)rnd_below(15); break;    /* float overflow */
    case 5: ex = -30 - (int)rnd_below(25); break;   /* float underflow */
    case 6: ex = (int)rnd_below(700) - 350; break;
    default: ex = (int)rnd_below(90) - 45; break;
    }
    if (has_e) {
        const char *e = rnd() & 1 ? "e" : "E"; /* one rnd() a statement: */
        const char *plus = ex >= 0 && (rnd() & 1) ? "+" : ""; /* same strings on any compiler */
        o += snprintf(o, cap - (size_t)(o - out), "%s%s%d", e, plus, ex);
    }
    *o = '\0';
}

static void test_parse(void) {
    long before = n_parsed;
    static const char *const fixed[] = {
        "0", "-0", "0.0", "-0.0", "0e0", "0e-999999999999", "1", "-1", "1.5", "0.1", "1e22", "1e23",
        "9007199254740993", "9007199254740992", "18446744073709551615", "18446744073709551616",
        "9999999999999999999", "10000000000000000000", "123456789012345678901234567890",
        "1e308", "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
        "1e309", "-1e400", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
        /* 2^-1075 exactly: halfway between 0 and the smallest subnormal double */
        "2.470328229206232720882843964341106861825299013071623822127928412503377536351043"
        "75932649918180817996189898282347722858865463328355177969898199387398005390939063"
        "15035659515570226392290858392449105184435931802849936536152500319370457678249219"
        "36562366986365848075700158576926990370631192827955855133292783433840935197801553"
        "12465972635795746227664652728272200563740064854999770965994704540208281662262378"
        "57393450736339007967761930577506740176324673600968951340535537458516661134223766"
        "67860416215968046191446729184030053005753084904876539171138659164623952491262365"
        "38818796362393732804238910186723484976682350898633885879256283027559956575244555"
        "07255189313690836254779186948667994968324049705821028513185451396213837722826145"
        "437693412532098591327667236328125e-324",
        "1e-400", "1.4e-45", "1.401298464324817e-45", "7.006492321624085e-46",
        "7.0064923216240854e-46", "7.006492321624086e-46",
        "3.4028235e38", "3.40282356779733661637539395458142568448e38",
        "340282356779733661637539395458142568448", "340282356779733661637539395458142568449",
        "340282356779733661637539395458142568447", "3.4028236e38",
        "1.00000005960464477539062500", "1.000000059604644775390625000000000001",
        "1.0000000596046447753906249999999999", "1.00000017881393432617187500",
        "0.000000000000000000000000000000000000000000000000000000000000001",
        "1.17549435e-38", "1.1754942e-38", "1.1754943e-38", "1.1754944e-38",
        "5e-324", "2.2250738585072011e-308", "2.2250738585072012e-308",
        "1e-7", "1.2e-6", "123456789e-15", "0.30000001192092896", "8.589973e9",
        "7.038531e-26", "1E+2", "1e-0", "100000000000000000000000", "1e+37",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) check_parse(fixed[i]);
    double d = 1;
    float f = 1;
    CHECK(!num_parse("1", 0, &d, &f));

    /* long tokens: more digits than any halfway point has */
    static char big[4096];
    for (int rep = 0; rep < 200; rep++) {
        char *o = big;
        if (rep & 1) *o++ = '-';
        int pre = (int)rnd_below(1200), post = (int)rnd_below(1200);
        *o++ = (char)('1' + rnd_below(9));
        for (int i = 0; i < pre; i++) *o++ = (char)('0' + ((rep & 2) ? 0 : rnd_below(10)));
        *o++ = '.';
        for (int i = 0; i < post; i++) *o++ = (char)('0' + ((rep & 4) ? 0 : rnd_below(10)));
        if (rep & 8) *o++ = '1';
        snprintf(o, 32, "e%d", (int)rnd_below(700) - 350 - pre);
        check_parse(big);
    }

    /* halfway points between floats and between doubles, exactly, and just
     * below / above (last digit changed, or digits appended) */
    char buf[1400];
    for (int i = 0; i < 100000 / g_sample; i++) {
        uint32_t u = (uint32_t)rnd() & 0x7FFFFFFF;
        if ((u >> 23) == 0xFF) u ^= 0x40000000u;
        if (i < 300) u = (uint32_t)i; /* subnormals near 0, and 0..1 ulp */
        if (i >= 300 && i < 400) u = 0x7F7FFFFF; /* FLT_MAX to 2^128 */
        double lo = u2f(u), hi = u == 0x7F7FFFFF ? 0x1p128 : u2f(u + 1);
        double mid = (lo + hi) / 2; /* exact: 25 significant bits */
        int len = snprintf(buf, sizeof buf, "%.200e", mid);
        /* strip trailing zeros of the mantissa */
        char *e = strchr(buf, 'e');
        char *z = e;
        while (z[-1] == '0') z--;
        memmove(z, e, strlen(e) + 1);
        (void)len;
        check_parse(buf);
        /* nudge: change the last mantissa digit down or append digits */
        e = strchr(buf, 'e');
        char tail[16];
        snprintf(tail, sizeof tail, "%s", e);
        char *last = e - 1;
        if (*last > '0') {
            (*last)--;
            check_parse(buf);
            (*last)++;
        }
        snprintf(e, sizeof buf - (size_t)(e - buf), "0000001%s", tail);
        check_parse(buf);
    }
    for (int i = 0; i < 50000 / g_sample; i++) {
        uint64_t u = rnd() & 0x7FFFFFFFFFFFFFFFu;
        if ((u >> 52) == 0x7FF) u ^= 0x4000000000000000u;
        if (i < 100) u = (uint64_t)i;
        double a, b;
        memcpy(&a, &u, 8);
        uint64_t u1 = u + 1;
        memcpy(&b, &u1, 8);
        if (!isfinite(b)) continue;
        long double mid = ((long double)a + (long double)b) / 2; /* exact in x87 extended */
        snprintf(buf, sizeof buf, "%.800Le", mid);
        char *e = strchr(buf, 'e');
        char *z = e;
        while (z[-1] == '0') z--;
        memmove(z, e, strlen(e) + 1);
        check_parse(buf);
        e = strchr(buf, 'e');
        char tail[16];
        snprintf(tail, sizeof tail, "%s", e);
        snprintf(e, sizeof buf - (size_t)(e - buf), "1%s", tail);
        check_parse(buf);
    }

    /* what clients send: repr of doubles (17 digits, beyond 2^53) and of
     * float32 values widened to double, as Python's json.dumps writes them */
    for (int i = 0; i < 300000 / g_sample; i++) {
        uint64_t u = rnd();
        if ((u >> 52 & 0x7FF) == 0x7FF) u ^= UINT64_C(1) << 62;
        double x;
        memcpy(&x, &u, 8);
        uint32_t uf = (uint32_t)rnd();
        if (((uf >> 23) & 0xFF) == 0xFF) uf ^= 0x40000000u;
        snprintf(buf, sizeof buf, "%.17g", x);
        check_parse(buf);
        snprintf(buf, sizeof buf, "%.*g", 15 + (int)rnd_below(6), (double)u2f(uf));
        check_parse(buf);
        snprintf(buf, sizeof buf, "%.17g", (double)u2f(uf) * (1 + (rnd() & 1) * 0x1p-30));
        check_parse(buf);
    }

    /* random decimal strings */
    for (int i = 0; i < 2000000 / g_sample && check_failed < 50; i++) {
        random_number(buf, sizeof buf);
        check_parse(buf);
    }
    /* the shortest outputs read back: num_parse against strtof */
    char sb[FMT_F32_MAX + 1];
    for (int i = 0; i < 1000000 / g_sample; i++) {
        uint32_t u = (uint32_t)rnd();
        if (((u >> 23) & 0xFF) == 0xFF) u ^= 0x40000000u;
        size_t n = fmt_f32_shortest(sb, u2f(u));
        sb[n] = '\0';
        float fv;
        num_parse(sb, n, &d, &fv);
        if (f2u(fv) != u) {
            CHECK_MSG(0, "num_parse(shortest(%a) = \"%s\") = %a", (double)u2f(u), sb, (double)fv);
            break;
        }
        if (i % 8 == 0) check_parse(sb);
    }
    printf("num_parse: %ld strings compared with strtod and strtof\n", n_parsed - before);
}

/* ---------------------------------------------------------------- base64 */

static void test_base64(void) {
    static const char *const vec[][2] = {
        {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
    };
    char enc[64];
    unsigned char dec[64];
    size_t bad = 12345;
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        size_t n = strlen(vec[i][0]);
        CHECK_INT_EQ(base64_encoded_len(n), strlen(vec[i][1]));
        size_t m = base64_encode(enc, vec[i][0], n);
        enc[m] = '\0';
        CHECK_STR_EQ(enc, vec[i][1]);
        size_t k = base64_decode(dec, vec[i][1], strlen(vec[i][1]), &bad);
        CHECK_INT_EQ(k, n);
        CHECK(k == n && memcmp(dec, vec[i][0], n) == 0);
    }
    CHECK_INT_EQ(base64_decoded_max(8), 6);
    CHECK_INT_EQ(base64_decoded_max(0), 0);

    /* round trip of random bytes, every length up to 300 */
    static unsigned char src[300], back[300];
    static char txt[404];
    int rt_bad = 0;
    for (size_t n = 0; n <= 300; n++) {
        for (size_t i = 0; i < n; i++) src[i] = (unsigned char)rnd();
        size_t m = base64_encode(txt, src, n);
        if (m != base64_encoded_len(n)) rt_bad++;
        size_t k = base64_decode(back, txt, m, &bad);
        if (k != n || memcmp(back, src, n) != 0) rt_bad++;
    }
    CHECK_INT_EQ(rt_bad, 0);

    /* every rejection, with its offset */
    static const struct {
        const char *s;
        size_t at;
    } rej[] = {
        {"Zm9v!mFy", 4},  /* outside the alphabet */
        {"Zm9vYmF\x80", 7},
        {"Zm9 YmFy", 3},  /* whitespace */
        {"Zm9v\nYmFy", 4}, /* line break (and a bad length) */
        {"Zm-_", 2},      /* base64url alphabet */
        {"Zg==Zm9v", 2},  /* padding in a group that is not the last */
        {"Z===", 1},      /* three padding characters */
        {"====", 0},
        {"Zg=a", 3},      /* data after padding */
        {"Zm9", 3},       /* length not a multiple of 4: offset = length */
        {"Zm9vY", 5},
        {"Zg=", 2},       /* truncated padding */
        {"Zh==", 1},      /* nonzero bits before "==" */
        {"Zm9=", 2},      /* nonzero bits before "=" */
    };
    for (size_t i = 0; i < sizeof rej / sizeof rej[0]; i++) {
        bad = 12345;
        size_t k = base64_decode(dec, rej[i].s, strlen(rej[i].s), &bad);
        CHECK_MSG(k == (size_t)-1, "base64_decode(\"%s\") accepted", rej[i].s);
        CHECK_MSG(bad == rej[i].at, "base64_decode(\"%s\"): bad_at %zu, expected %zu", rej[i].s,
                  bad, rej[i].at);
    }
    /* a bad character anywhere in a long valid text */
    for (size_t n = 3; n <= 120; n += 3) {
        size_t m = base64_encode(txt, src, n);
        for (size_t pos = 0; pos < m; pos += 5) {
            char keep = txt[pos];
            txt[pos] = '*';
            bad = 0;
            size_t k = base64_decode(back, txt, m, &bad);
            CHECK_MSG(k == (size_t)-1 && bad == pos, "'*' at %zu of %zu: k %zu bad %zu", pos, m, k,
                      bad);
            txt[pos] = keep;
        }
    }
}

/* ------------------------------------------------------- base64 kernels */

/* The naive codec, straight from RFC 4648 and numfmt.h's strictness rules:
 * one character at a time, through strchr. */
static const char b64_abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t naive_encode(char *dst, const unsigned char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        dst[o++] = b64_abc[v >> 18];
        dst[o++] = b64_abc[v >> 12 & 63];
        dst[o++] = i + 1 < n ? b64_abc[v >> 6 & 63] : '=';
        dst[o++] = i + 2 < n ? b64_abc[v & 63] : '=';
    }
    return o;
}

static int naive_value(unsigned char c) {
    const char *p = c ? strchr(b64_abc, c) : NULL;
    return p ? (int)(p - b64_abc) : -1;
}

static size_t naive_decode(unsigned char *dst, const char *src, size_t len, size_t *bad_at) {
    const unsigned char *s = (const unsigned char *)src;
    size_t npad = 0;
    if (len % 4 == 0 && len > 0 && s[len - 1] == '=') npad = s[len - 2] == '=' ? 2 : 1;
    for (size_t i = 0; i < len - npad; i++) /* the first character outside the alphabet */
        if (naive_value(s[i]) < 0) {
            /* "x=y=": the '=' at len-2 is an error only because data follows */
            *bad_at = s[i] == '=' && len % 4 == 0 && i == len - 2 ? len - 1 : i;
            return (size_t)-1;
        }
    if (len % 4) {
        *bad_at = len;
        return (size_t)-1;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) {
            int x = naive_value(s[i + j]);
            v = v << 6 | (uint32_t)(x < 0 ? 0 : x);
        }
        if (npad == 2 && i + 4 == len && (v & 0xFFFF)) {
            *bad_at = len - 3;
            return (size_t)-1;
        }
        if (npad == 1 && i + 4 == len && (v & 0xFF)) {
            *bad_at = len - 2;
            return (size_t)-1;
        }
        dst[o++] = (unsigned char)(v >> 16);
        if (i + 4 < len || npad < 2) dst[o++] = (unsigned char)(v >> 8);
        if (i + 4 < len || npad < 1) dst[o++] = (unsigned char)v;
    }
    return o;
}

/* Mismatches of one kernel against the reference (the naive codec for the
 * scalar kernel, the scalar kernel for the others). */
typedef struct {
    long enc, dec, enc_bad, dec_bad, guard_bad;
    long first_len; /* length of the first mismatching input, -1 if none */
} b64_tally;

#define B64_GUARD 64 /* canary bytes after every output */

/* n bytes at offset off from a 64-byte boundary (off + n bytes allocated,
 * so ASan sees any access past the n), or with room for B64_GUARD canary
 * bytes after them when guard is set (set to 0xA5). Returns the block to
 * free; *at is the n bytes. */
static void *b64_block(size_t n, size_t off, int guard, unsigned char **at) {
    void *blk = NULL;
    size_t size = off + n + (guard ? B64_GUARD : 0);
    if (posix_memalign(&blk, 64, size ? size : 1)) abort();
    memset(blk, 0xA5, size);
    *at = (unsigned char *)blk + off;
    return blk;
}

static int b64_guard_hit(const unsigned char *end) {
    for (size_t i = 0; i < B64_GUARD; i++)
        if (end[i] != 0xA5) return 1;
    return 0;
}

/* Encode s[0..n) with kernel k into a buffer of exactly base64_encoded_len
 * bytes (plus canaries) at dst_off from a 64-byte boundary; compare text and
 * length with the reference. */
static void b64_check_encode(base64_kernel k, const unsigned char *s, size_t n, size_t dst_off,
                             b64_tally *t) {
    size_t cap = base64_encoded_len(n);
    char *ref = malloc(cap + 1);
    unsigned char *dst;
    void *blk = b64_block(cap, dst_off, 1, &dst);
    size_t m_ref = k == BASE64_SCALAR ? naive_encode(ref, s, n)
                                      : base64_encode_kernel(BASE64_SCALAR, ref, s, n);
    size_t m = base64_encode_kernel(k, (char *)dst, s, n);
    t->enc++;
    if (m != m_ref || m != cap || memcmp(dst, ref, m) != 0) {
        if (t->first_len < 0) t->first_len = (long)n;
        t->enc_bad++;
    }
    t->guard_bad += b64_guard_hit(dst + cap);
    free(ref);
    free(blk);
}

/* Decode txt[0..len) with kernel k (dst of exactly base64_decoded_max
 * bytes, plus canaries, at dst_off from a 64-byte boundary) and compare
 * result, bad_at and bytes with the reference. */
static void b64_check_decode(base64_kernel k, const char *txt, size_t len, size_t dst_off,
                             b64_tally *t) {
    size_t cap = base64_decoded_max(len);
    unsigned char *ref = malloc(cap + 1), *dst;
    void *blk = b64_block(cap, dst_off, 1, &dst);
    size_t bad_ref = 7777, bad = 8888;
    size_t r_ref = k == BASE64_SCALAR
                       ? naive_decode(ref, txt, len, &bad_ref)
                       : base64_decode_kernel(BASE64_SCALAR, ref, txt, len, &bad_ref);
    size_t r = base64_decode_kernel(k, dst, txt, len, &bad);
    t->dec++;
    int same = r == r_ref && (r == (size_t)-1 ? bad == bad_ref : memcmp(dst, ref, r) == 0);
    if (!same) {
        if (t->first_len < 0) t->first_len = (long)len;
        t->dec_bad++;
    }
    t->guard_bad += b64_guard_hit(dst + cap);
    free(ref);
    free(blk);
}

static void test_base64_kernels(void) {
    const size_t step = (size_t)(g_sample > 1 ? 23 : 1);
    const int reps = 300 / g_sample;
    printf("base64 kernels on this CPU:");
    for (int k = 0; k < BASE64_KERNEL_COUNT; k++)
        if (base64_kernel_supported((base64_kernel)k))
            printf(" %s", base64_kernel_name((base64_kernel)k));
    printf(" (base64_encode/decode use %s)\n", base64_kernel_name(base64_kernel_chosen()));
    CHECK(base64_kernel_supported(BASE64_SCALAR));
    CHECK(base64_kernel_supported(base64_kernel_chosen()));
    CHECK(!base64_kernel_supported(BASE64_KERNEL_COUNT));
    CHECK_STR_EQ(base64_kernel_name(BASE64_KERNEL_COUNT), "?");

    const size_t big = 1 << 20;
    unsigned char *bytes = malloc(big + 2);
    char *txt = malloc(base64_encoded_len(big + 2) + 1);
    for (int ki = 0; ki < BASE64_KERNEL_COUNT; ki++) {
        base64_kernel k = (base64_kernel)ki;
        if (!base64_kernel_supported(k)) continue;
        b64_tally t = {0, 0, 0, 0, 0, -1};

        /* random bytes, every length 0..300, every source offset mod 64
         * (with the source ending where its allocation ends) and a
         * destination offset for each */
        for (size_t n = 0; n <= 300; n++) {
            for (size_t i = 0; i < n; i++) bytes[i] = (unsigned char)rnd();
            size_t m = base64_encode_kernel(BASE64_SCALAR, txt, bytes, n);
            for (size_t off = 0; off < 64; off++) {
                unsigned char *src, *tsrc;
                void *blk = b64_block(n, off, 0, &src), *tblk = b64_block(m, off, 0, &tsrc);
                if (n) memcpy(src, bytes, n);
                if (m) memcpy(tsrc, txt, m);
                b64_check_encode(k, src, n, (off * 7) % 64, &t);
                b64_check_decode(k, (const char *)tsrc, m, (off * 5) % 64, &t);
                free(tblk);
                free(blk);
            }
        }
        /* large: 1 MB and its neighbours, random and constant bytes */
        for (size_t n = big - 1; n <= big + 2; n++) {
            for (size_t i = 0; i < n; i++) bytes[i] = n == big ? 0xFF : (unsigned char)rnd();
            b64_check_encode(k, bytes, n, 0, &t);
            size_t m = base64_encode_kernel(BASE64_SCALAR, txt, bytes, n);
            b64_check_decode(k, txt, m, 3, &t);
        }
        /* every byte value at every position of a 3-byte group, in a
         * stretch long enough for every vector block */
        for (size_t i = 0; i < 3 * 256 + 1; i++) bytes[i] = (unsigned char)(i / 3 + 85 * (i % 3));
        for (size_t n = 3 * 256 - 2; n <= 3 * 256 + 1; n++) {
            b64_check_encode(k, bytes, n, 0, &t);
            size_t m = base64_encode_kernel(BASE64_SCALAR, txt, bytes, n);
            b64_check_decode(k, txt, m, 0, &t);
        }
        /* decode: every character value at every position of a 256-char
         * text (inside vector blocks, at their edges and in the tail) */
        for (size_t i = 0; i < 192; i++) bytes[i] = (unsigned char)rnd();
        size_t m256 = base64_encode_kernel(BASE64_SCALAR, txt, bytes, 192);
        for (size_t pos = 0; pos < m256; pos += step) {
            char keep = txt[pos];
            for (int c = 0; c < 256; c++) {
                txt[pos] = (char)c;
                b64_check_decode(k, txt, m256, 0, &t);
            }
            txt[pos] = keep;
        }
        /* decode: one bad character at every position of 300 valid texts */
        static const unsigned char badc[] = {'=', ' ', '\n', '\r', '-', '_', '*', ':', '@', '[',
                                             '`', '{', '.', ',', 0,   0x7F, 0x80, 0xAB, 0xFF};
        for (int rep = 0; rep < reps; rep++) {
            size_t n = rep < 200 ? (size_t)rep : 200 + rnd_below(3000);
            for (size_t i = 0; i < n; i++) bytes[i] = (unsigned char)rnd();
            size_t m = base64_encode_kernel(BASE64_SCALAR, txt, bytes, n);
            for (size_t pos = 0; pos < m; pos++) {
                char keep = txt[pos];
                txt[pos] = (char)badc[rnd_below(sizeof badc)];
                b64_check_decode(k, txt, m, 0, &t);
                txt[pos] = keep;
            }
            /* and two bad characters: the first one counts */
            if (m >= 8) {
                size_t p1 = rnd_below((unsigned)m / 2);
                size_t p2 = p1 + 1 + rnd_below((unsigned)(m - p1 - 1));
                char k1 = txt[p1], k2 = txt[p2];
                txt[p1] = '!';
                txt[p2] = '~';
                b64_check_decode(k, txt, m, 0, &t);
                txt[p1] = k1;
                txt[p2] = k2;
            }
        }
        /* decode: padding and length, after a valid stretch of every whole
         * number of groups up to 400 characters (so the end meets the vector
         * blocks at every phase) */
        for (size_t pre = 0; pre <= 400; pre += 4) {
            for (size_t i = 0; i < pre / 4 * 3; i++) bytes[i] = (unsigned char)rnd();
            base64_encode_kernel(BASE64_SCALAR, txt, bytes, pre / 4 * 3);
            static const char *const ends[] = {"Zg==", "Zh==", "Zm8=", "Zm9=", "Z===", "====",
                                               "Zg=a", "=Zm9", "Zm=v", "Zg=",  "Zm9",  "Z",
                                               "Zm",   "Zg== ", "Zm9vZ", "Zg==Zm9v", ""};
            for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
                size_t el = strlen(ends[e]);
                memcpy(txt + pre, ends[e], el);
                b64_check_decode(k, txt, pre + el, 0, &t);
            }
            /* nonzero unused bits: every last character before "=" and "==" */
            for (int v = 0; v < 64; v++) {
                memcpy(txt + pre, "ZZ", 2);
                txt[pre + 2] = b64_abc[v];
                txt[pre + 3] = '=';
                b64_check_decode(k, txt, pre + 4, 0, &t);
                txt[pre + 1] = b64_abc[v];
                txt[pre + 2] = '=';
                b64_check_decode(k, txt, pre + 4, 0, &t);
            }
            /* lengths not a multiple of 4: a valid text cut short */
            for (size_t cut = 1; cut <= 3; cut++) {
                memcpy(txt + pre, "Zm9v", 4);
                b64_check_decode(k, txt, pre + 4 - cut, 0, &t);
            }
        }
        printf("base64 %-10s against %-6s: %ld encodes, %ld decodes; mismatches: %ld encodes, %ld "
               "decodes (bad_at included), %ld writes past the end",
               base64_kernel_name(k), k == BASE64_SCALAR ? "naive" : "scalar", t.enc, t.dec,
               t.enc_bad, t.dec_bad, t.guard_bad);
        if (t.first_len >= 0) printf(" (first mismatch at length %ld)", t.first_len);
        printf("\n");
        CHECK_INT_EQ(t.enc_bad, 0);
        CHECK_INT_EQ(t.dec_bad, 0);
        CHECK_INT_EQ(t.guard_bad, 0);
    }
    free(bytes);
    free(txt);
}

int main(void) {
    const char *seed = getenv("NUMFMT_SEED"), *ns = getenv("NUMFMT_N");
    rng_state = seed ? strtoull(seed, NULL, 0) : 0x5EED1234ABCDull;
    const char *san = getenv("ATTN_SANITIZER");
    if (san && strstr(san, "thread")) g_sample = 15;
    long n = ns ? atol(ns) : 10000000L / g_sample;
    printf("seed 0x%" PRIx64 "\n", rng_state);
    test_shortest_examples();
    test_digits();
    test_base64();
    test_base64_kernels();
    test_parse();
    test_shortest_special_classes();
    test_shortest_random(n);
    return check_exit();
}
