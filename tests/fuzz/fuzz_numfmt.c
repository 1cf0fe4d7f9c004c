/* fuzz_numfmt.c - libFuzzer target: server/numfmt.c and base64.c against the C
 * library and against themselves.
 *
 * Three checks on every input:
 *   1. num_parse: when the whole input is a JSON number token, its double and
 *      float must be bitwise equal to strtod and strtof on a NUL-terminated
 *      copy (the C library rounds correctly; the locale is "C").
 *      num_scan_json on the input must find the same number (length, or
 *      error offset) as a plain reference scanner, with the same value.
 *   2. formatting: the input's bytes, 4 at a time, as floats. For each finite
 *      one, fmt_f32_shortest must give valid JSON number text in the header's
 *      format that strtof reads back bitwise equal, with no more significant
 *      digits than the fewest "%.*e" needs (and the same value as that when
 *      it has as many digits: the nearest); fmt_f32_digits(x, p) must read
 *      back equal to "%.{p-1}e" of x, and to x itself for p = 9.
 *   3. base64: decoding the input as base64 and encoding the bytes must give
 *      the input back (the decoder accepts one encoding per byte string);
 *      encoding the input and decoding it must give the input back. Every
 *      kernel this CPU has (base64_kernels.h) must give the scalar kernel's
 *      answer: the same text, the same bytes, the same bad_at.
 * Any disagreement aborts with both values.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64_kernels.h"
#include "numfmt.h"

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "fuzz_numfmt: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#define MAX_FLOATS 64 /* floats formatted per input, to keep each run short */

/* RFC 8259 number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool is_json_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i == n) return false;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return false;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i == n || s[i] < '0' || s[i] > '9') return false;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i == n || s[i] < '0' || s[i] > '9') return false;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    return i == n;
}

static uint32_t f32_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static uint64_t f64_bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* ---------------------------------------------------------- 1. num_parse */

/* A token for messages: whole when short, else its ends and its length. */
static const char *show(const char *z, size_t n) {
    static char out[160];
    if (n <= 100)
        snprintf(out, sizeof out, "%.*s", (int)n, z);
    else
        snprintf(out, sizeof out, "%.40s...%.40s (%zu bytes)", z, z + n - 40, n);
    return out;
}

static void check_parse(const uint8_t *data, size_t size) {
    if (size == 0 || !is_json_number((const char *)data, size)) return;
    char *z = malloc(size + 1);
    if (!z) return;
    memcpy(z, data, size);
    z[size] = '\0';
    double d = 0, want_d = strtod(z, NULL);
    float f = 0, want_f = strtof(z, NULL);
    /* num_parse gets exactly the token: no NUL after it */
    char *tok = malloc(size);
    if (!tok) {
        free(z);
        return;
    }
    memcpy(tok, data, size);
    if (!num_parse(tok, size, &d, &f)) DIE("num_parse refused \"%s\"", show(z, size));
    if (f64_bits(d) != f64_bits(want_d))
        DIE("num_parse(\"%s\"): double %a (%.17g), strtod gives %a (%.17g)", show(z, size), d, d,
            want_d, want_d);
    if (f32_bits(f) != f32_bits(want_f))
        DIE("num_parse(\"%s\"): float %a (%.9g), strtof gives %a (%.9g)", show(z, size), (double)f,
            (double)f, (double)want_f, (double)want_f);
    /* the double alone, and the float alone, must not differ either */
    double d2 = 0;
    float f2 = 0;
    num_parse(tok, size, &d2, NULL);
    num_parse(tok, size, NULL, &f2);
    if (f64_bits(d2) != f64_bits(want_d))
        DIE("num_parse(\"%s\", d only): %a, strtod %a", show(z, size), d2, want_d);
    if (f32_bits(f2) != f32_bits(want_f))
        DIE("num_parse(\"%s\", f only): %a, strtof %a", show(z, size), (double)f2, (double)want_f);
    free(tok);
    free(z);
}

/* num_scan_json on the input: its length and error offset must be those of
 * the reference scanner below, and the value that of strtod/strtof. */
static size_t ref_scan(const char *s, size_t n, size_t *bad) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i == n || s[i] < '0' || s[i] > '9') goto fail;
    if (s[i] == '0') {
        i++;
        if (i < n && s[i] >= '0' && s[i] <= '9') goto fail;
    } else {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i == n || s[i] < '0' || s[i] > '9') goto fail;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i == n || s[i] < '0' || s[i] > '9') goto fail;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    return i;
fail:
    *bad = i;
    return 0;
}

static void check_scan(const uint8_t *data, size_t size) {
    if (size == 0) return;
    char *tok = malloc(size), *z = malloc(size + 1); /* exact size: ASan sees a read past the end */
    if (!tok || !z) {
        free(tok);
        free(z);
        return;
    }
    memcpy(tok, data, size);
    size_t bad = (size_t)-1, want_bad = (size_t)-1;
    const char *why = NULL;
    double d = 0;
    float f = 0;
    size_t n = num_scan_json(tok, tok + size, &d, &f, &bad, &why);
    size_t want = ref_scan(tok, size, &want_bad);
    if (n != want) DIE("num_scan_json(\"%s\") = %zu, expected %zu", show(tok, size), n, want);
    if (n == 0) {
        if (bad != want_bad || !why || !*why)
            DIE("num_scan_json(\"%s\"): error at %zu (%s), expected at %zu", show(tok, size), bad,
                why ? why : "no reason", want_bad);
    } else {
        memcpy(z, tok, n);
        z[n] = '\0';
        double want_d = strtod(z, NULL);
        float want_f = strtof(z, NULL);
        if (f64_bits(d) != f64_bits(want_d) || f32_bits(f) != f32_bits(want_f))
            DIE("num_scan_json(\"%s\"): %a / %a, strtod/strtof give %a / %a", show(z, n), d,
                (double)f, want_d, (double)want_f);
    }
    free(tok);
    free(z);
}

/* ------------------------------------------------------ 2. formatting */

/* Significant digits of a number text: the digits before any exponent,
 * without leading and trailing zeros. */
static int sig_digits(const char *s, size_t n) {
    char dg[64];
    int k = 0;
    for (size_t i = 0; i < n && s[i] != 'e' && s[i] != 'E'; i++)
        if (s[i] >= '0' && s[i] <= '9' && k < (int)sizeof dg) dg[k++] = s[i];
    int a = 0, b = k;
    while (a < b && dg[a] == '0') a++;
    while (b > a && dg[b - 1] == '0') b--;
    return b - a;
}

/* The header's layout: plain decimal for a decimal exponent in [-5, 9),
 * else d.ddde[+-]XX, no '+' on the mantissa, no trailing zeros after a '.'. */
static void check_layout(const char *s, size_t n, float x, const char *what) {
    if (!is_json_number(s, n))
        DIE("%s(%a) = \"%.*s\" is not a JSON number", what, (double)x, (int)n, s);
    if (x == 0) {
        const char *want = signbit(x) ? "-0" : "0";
        if (n != strlen(want) || memcmp(s, want, n))
            DIE("%s(%a) = \"%.*s\", expected \"%s\"", what, (double)x, (int)n, s, want);
        return;
    }
    /* decimal exponent of the leading digit, read from the text */
    const char *e = memchr(s, 'e', n);
    const char *m = s[0] == '-' ? s + 1 : s;
    int e10;
    if (e) {
        e10 = atoi(e + 1);
    } else if (m[0] != '0') {
        e10 = -1;
        for (const char *q = m; q < s + n && *q != '.'; q++) e10++;
    } else {
        e10 = -1;
        for (const char *q = m + 2; q < s + n && *q == '0'; q++) e10--;
    }
    bool plain = e10 >= -5 && e10 < 9;
    if (e && plain)
        DIE("%s(%a) = \"%.*s\": exponent form for a plain-range value", what, (double)x, (int)n, s);
    if (!e && !plain)
        DIE("%s(%a) = \"%.*s\": plain form outside [1e-5, 1e9)", what, (double)x, (int)n, s);
    const char *dot = memchr(s, '.', n);
    const char *mant_end = e ? e : s + n;
    if (dot && mant_end[-1] == '0')
        DIE("%s(%a) = \"%.*s\": trailing zero", what, (double)x, (int)n, s);
    if (e) {
        /* e[+-]XX with at least two exponent digits, one digit before the '.' */
        size_t en = (size_t)(s + n - e);
        if (en < 4 || (e[1] != '+' && e[1] != '-'))
            DIE("%s(%a) = \"%.*s\": exponent is not e[+-]XX", what, (double)x, (int)n, s);
        if (!(m[0] >= '1' && m[0] <= '9') || (m + 1 != e && m[1] != '.'))
            DIE("%s(%a) = \"%.*s\": mantissa is not d.ddd", what, (double)x, (int)n, s);
    }
}

static void check_format(float x) {
    /* the functions may use all FMT_F32_MAX bytes (numfmt.h), no more: a
     * heap buffer of exactly that size lets ASan see one byte too many */
    static char *out;
    if (!out && !(out = malloc(FMT_F32_MAX))) DIE("out of memory");
    char z[FMT_F32_MAX + 8], tmp[64];
    size_t n = fmt_f32_shortest(out, x);
    if (!isfinite(x)) {
        if (n != 0)
            DIE("fmt_f32_shortest(%a) wrote %zu bytes for a non-finite value", (double)x, n);
        for (int p = 1; p <= 9; p++)
            if (fmt_f32_digits(out, x, p) != 0)
                DIE("fmt_f32_digits(%a, %d) wrote a non-finite value", (double)x, p);
        return;
    }
    if (n == 0 || n > FMT_F32_MAX) DIE("fmt_f32_shortest(%a): length %zu", (double)x, n);
    memcpy(z, out, n);
    z[n] = '\0';
    check_layout(z, n, x, "fmt_f32_shortest");
    float back = strtof(z, NULL);
    if (f32_bits(back) != f32_bits(x))
        DIE("fmt_f32_shortest(%a = %.9g) = \"%s\" reads back as %a", (double)x, (double)x, z,
            (double)back);
    int fewest = 9;
    for (int p = 1; p <= 9; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, (double)x);
        if (f32_bits(strtof(tmp, NULL)) == f32_bits(x)) {
            fewest = p;
            break;
        }
    }
    if (sig_digits(z, n) > fewest)
        DIE("fmt_f32_shortest(%a = %.9g) = \"%s\": %d significant digits, but %d suffice "
            "(\"%.*e\")",
            (double)x, (double)x, z, sig_digits(z, n), fewest, fewest - 1, (double)x);
    /* among the shortest, the nearest to x (numfmt.h): printf's correctly
     * rounded digits, whenever they read back */
    snprintf(tmp, sizeof tmp, "%.*e", fewest - 1, (double)x);
    if (sig_digits(z, n) == fewest && f32_bits(strtof(tmp, NULL)) == f32_bits(x) &&
        f64_bits(strtod(z, NULL)) != f64_bits(strtod(tmp, NULL)))
        DIE("fmt_f32_shortest(%a = %.9g) = \"%s\", but \"%s\" is as short and nearer", (double)x,
            (double)x, z, tmp);

    for (int p = 1; p <= 9; p++) {
        n = fmt_f32_digits(out, x, p);
        if (n == 0 || n > FMT_F32_MAX) DIE("fmt_f32_digits(%a, %d): length %zu", (double)x, p, n);
        memcpy(z, out, n);
        z[n] = '\0';
        check_layout(z, n, x, "fmt_f32_digits");
        if (sig_digits(z, n) > p)
            DIE("fmt_f32_digits(%a, %d) = \"%s\": too many digits", (double)x, p, z);
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, (double)x);
        double got = strtod(z, NULL), want = strtod(tmp, NULL);
        if (f64_bits(got) != f64_bits(want))
            DIE("fmt_f32_digits(%a, %d) = \"%s\", printf gives \"%s\"", (double)x, p, z, tmp);
        if (p == 9 && f32_bits(strtof(z, NULL)) != f32_bits(x))
            DIE("fmt_f32_digits(%a, 9) = \"%s\" does not read back", (double)x, z);
    }
}

/* ---------------------------------------------------------- 3. base64 */

/* Every kernel against the scalar one, decoding data as text and encoding
 * it as bytes, into buffers of exactly the documented size. */
static void check_base64_kernels(const uint8_t *data, size_t size) {
    size_t dmax = base64_decoded_max(size), elen = base64_encoded_len(size);
    unsigned char *ref = malloc(dmax + 1), *got = malloc(dmax + 1);
    char *eref = malloc(elen + 1), *egot = malloc(elen + 1);
    if (!ref || !got || !eref || !egot) DIE("out of memory");
    size_t bad_ref = (size_t)-2;
    size_t n_ref = base64_decode_kernel(BASE64_SCALAR, ref, (const char *)data, size, &bad_ref);
    size_t m_ref = base64_encode_kernel(BASE64_SCALAR, eref, data, size);
    for (int k = 1; k < BASE64_KERNEL_COUNT; k++) {
        if (!base64_kernel_supported((base64_kernel)k)) continue;
        const char *name = base64_kernel_name((base64_kernel)k);
        size_t bad = (size_t)-3;
        size_t n = base64_decode_kernel((base64_kernel)k, got, (const char *)data, size, &bad);
        if (n != n_ref || (n == (size_t)-1 ? bad != bad_ref : memcmp(got, ref, n) != 0))
            DIE("base64 %s decode of %zu characters: %zu (bad at %zu), scalar %zu (bad at %zu)",
                name, size, n, bad, n_ref, bad_ref);
        size_t m = base64_encode_kernel((base64_kernel)k, egot, data, size);
        if (m != m_ref || memcmp(egot, eref, m) != 0)
            DIE("base64 %s encode of %zu bytes differs from scalar", name, size);
    }
    free(ref);
    free(got);
    free(eref);
    free(egot);
}

static void check_base64(const uint8_t *data, size_t size) {
    check_base64_kernels(data, size);
    /* decode, then encode back */
    unsigned char *dec = malloc(base64_decoded_max(size) + 1);
    if (!dec) return;
    size_t bad = (size_t)-2;
    size_t n = base64_decode(dec, (const char *)data, size, &bad);
    if (n != (size_t)-1) {
        if (n > base64_decoded_max(size))
            DIE("base64_decode wrote %zu bytes for %zu characters", n, size);
        if (base64_encoded_len(n) != size)
            DIE("base64_decode accepted %zu characters for %zu bytes", size, n);
        char *enc = malloc(size + 1);
        if (!enc) DIE("out of memory");
        size_t m = base64_encode(enc, dec, n);
        if (m != size || memcmp(enc, data, size))
            DIE("base64: \"%.*s\" decodes to %zu bytes that encode as \"%.*s\"", (int)size,
                (const char *)data, n, (int)m, enc);
        free(enc);
    } else if (bad > size) {
        DIE("base64_decode refused %zu characters with bad_at %zu", size, bad);
    }
    free(dec);

    /* encode, then decode back */
    size_t elen = base64_encoded_len(size);
    char *enc = malloc(elen + 1);
    unsigned char *back = malloc(base64_decoded_max(elen) + 1);
    if (!enc || !back) DIE("out of memory");
    if (base64_encode(enc, data, size) != elen)
        DIE("base64_encode length is not base64_encoded_len");
    size_t m = base64_decode(back, enc, elen, &bad);
    if (m != size || memcmp(back, data, size))
        DIE("base64 of %zu bytes does not decode back (got %zu bytes, bad at %zu)", size, m, bad);
    free(enc);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_parse(data, size);
    check_scan(data, size);
    for (size_t i = 0; i + 4 <= size && i / 4 < MAX_FLOATS; i += 4) {
        float x;
        memcpy(&x, data + i, sizeof x);
        check_format(x);
    }
    check_base64(data, size);
    return 0;
}
