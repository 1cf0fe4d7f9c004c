/* numfmt.h - float32 text in and out, and base64, for the /attend codec.
 *
 * fmt_f32_shortest writes the shortest decimal that reads back (strtof) to
 * exactly the same float: 0.1f -> "0.1", 1e-7f -> "1e-07"... (format below),
 * -0.0f -> "-0". fmt_f32_digits writes a given number of significant digits.
 * Both need a buffer of at least FMT_F32_MAX bytes (they may scribble on all
 * of it, past the length they return) and never write NaN or Infinity (the
 * caller must not pass them; they return 0 then).
 *
 * fmt_f32_shortest picks, among the shortest decimals inside x's rounding
 * interval, the one nearest x (ties to even digit), like Ryu. Thread-safe
 * (tables are built once, on first use, under pthread_once).
 *
 * Output format (valid JSON, like %g): plain decimal when the decimal
 * exponent is in [-5, 9), else d.ddde[+-]XX; no trailing zeros, no '+' on
 * mantissa. Examples: 1 -> "1", 0.5 -> "0.5", 1234567 -> "1234567",
 * 1e10 -> "1e+10", 3.4028235e38 -> "3.4028235e+38", 1.2e-6 -> "1.2e-06".
 */
#ifndef ATTN_NUMFMT_H
#define ATTN_NUMFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FMT_F32_MAX 32

size_t fmt_f32_shortest(char *buf, float x);           /* returns length, no NUL written */
size_t fmt_f32_digits(char *buf, float x, int digits); /* digits 1..9 significant
                                                          (clamped), correctly rounded */

/* Parse one JSON number token s[0..len) (already validated as JSON number
 * syntax) to the correctly rounded double and float32 (same as strtod and
 * strtof on the token, bit for bit, overflow to +-inf and underflow to
 * subnormals or 0 included). Returns false only if len is 0. Text that is not
 * JSON number syntax gets the C library's reading (memory-safe, otherwise
 * unspecified). Locale-independent: LC_NUMERIC does not matter. d or f may be
 * NULL. Thread-safe. */
bool num_parse(const char *s, size_t len, double *d, float *f);

/* Scan the JSON number that starts at s (s < end), check its syntax (RFC
 * 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?) and convert it as
 * num_parse does, in one pass. Returns its length; 0 on a syntax error, with
 * *bad = offset from s of the offending byte and *why a short description
 * ("expected a digit after '-'", "leading zeros are not allowed in numbers",
 * ...). What follows the number is the caller's business. */
size_t num_scan_json(const char *s, const char *end, double *d, float *f, size_t *bad,
                     const char **why);

/* base64 (RFC 4648, '=' padding, no line breaks). In base64.c, with vector
 * kernels chosen for the CPU at first use; base64_kernels.h runs each one.
 * Thread-safe. */
size_t base64_encoded_len(size_t n);                        /* 4*ceil(n/3) */
size_t base64_encode(char *dst, const void *src, size_t n); /* returns bytes written */
/* Decode; returns bytes written or (size_t)-1 on a bad character, bad padding
 * or a length not a multiple of 4 (*bad_at = offset of the problem). dst
 * must hold base64_decoded_max(len) bytes.
 * Strict: only A-Z a-z 0-9 + / (no whitespace, no base64url), '=' only as
 * the last one or two characters of the text, and the bits the padding
 * leaves unused must be zero ("Zh==" is refused, "Zg==" is "f"), so every
 * byte string has exactly one accepted text. *bad_at is the offending
 * character, or len when the text stops inside a group of four. The empty
 * text decodes to 0 bytes. */
size_t base64_decoded_max(size_t len);
size_t base64_decode(void *dst, const char *src, size_t len, size_t *bad_at);

#endif
