/* base64.c - the base64 codec of numfmt.h, with vector kernels.
 *
 * The file has four parts:
 *   1. tables and the choice of kernel, made once (pthread_once);
 *   2. the portable scalar code: the whole contract, and the tail and the
 *      error path of every vector kernel;
 *   3. the AVX2 and AVX-512 VBMI blocks (x86-64, GCC or Clang only), each
 *      compiled for its instruction set with a target attribute, so the
 *      build needs no -m flag and one binary runs on every x86-64 CPU;
 *   4. the public entry points.
 *
 * The vector code follows the method of Mula and Lemire ("Faster Base64
 * Encoding and Decoding Using AVX2 Instructions", ACM TOWeb 2018, and its
 * AVX-512 VBMI sequel): encode by spreading 3 bytes over a 32-bit lane and
 * cutting out four 6-bit fields, then mapping 0..63 to ASCII; decode by
 * classifying and translating the characters, then merging four 6-bit
 * values into 24 bits with multiply-adds and packing the bytes.
 *
 * How a vector kernel keeps the scalar contract exactly: it only ever does
 * whole blocks that lie entirely before the last group of four characters
 * (the only group that may hold padding or stop short), and it stops at the
 * first block that holds any character outside the alphabet. The scalar
 * code then carries on from there, so it sees the first error itself and
 * reports the same bad_at, and it does every tail. The blocks read only
 * inside [src, src+len) and write only inside the output the caller
 * provides: each loop's condition checks the full width of its load and its
 * store.
 */
#include "base64_kernels.h"
#include "numfmt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* -DATTN_BASE64_SCALAR builds the portable code only, as on other CPUs. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute) &&                        \
    !defined(ATTN_BASE64_SCALAR)
#if __has_attribute(target)
#define B64_X86 1
#include <immintrin.h>
#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_VBMI __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vbmi")))
#endif
#endif

/* ------------------------------------------------------- tables, choice */

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Encode: the two characters of every 12-bit value. */
static char enc_pair[4096][2];

/* Decode: dec_val[c] is the 6-bit value of character c, -1 outside the
 * alphabet. dec_tab[k][c] is what c as the k-th character of a group
 * contributes to the group's 3 bytes, laid out in memory order (so that the
 * OR of a group's four entries, stored with a 4-byte memcpy, writes its 3
 * bytes and one spare), with 0xFF in the fourth byte for a character
 * outside the alphabet: the OR has a bit of dec_bad set. */
static signed char dec_val[256];
static uint32_t dec_tab[4][256], dec_bad;

#ifdef B64_X86
/* vpermb indices: spread 48 bytes as [b1 b0 b2 b1] per 32-bit lane (encode);
 * gather bytes 2, 1, 0 of each 32-bit lane into 48 bytes (decode). */
static _Alignas(64) unsigned char vbmi_spread[64], vbmi_pack[64];
/* vpermi2b table: value of each ASCII character, 0x80 when outside */
static _Alignas(64) unsigned char vbmi_dec[128];
#endif

static const char *const kernel_names[] = {
#define BASE64_KERNEL_NAME(e, name) name,
    BASE64_KERNELS(BASE64_KERNEL_NAME)
#undef BASE64_KERNEL_NAME
};

static bool kernel_ok[BASE64_KERNEL_COUNT];
static base64_kernel kernel_chosen;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_int init_done;

static void b64_init(void) {
    for (unsigned v = 0; v < 4096; v++) {
        enc_pair[v][0] = alphabet[v >> 6];
        enc_pair[v][1] = alphabet[v & 63];
    }
    memset(dec_val, -1, sizeof dec_val);
    for (int v = 0; v < 64; v++) dec_val[(unsigned char)alphabet[v]] = (signed char)v;
    const unsigned char bad[4] = {0, 0, 0, 0xFF};
    memcpy(&dec_bad, bad, 4);
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 256; c++) {
            uint32_t bits = (uint32_t)dec_val[c] << (18 - 6 * k);
            unsigned char b[4] = {(unsigned char)(bits >> 16), (unsigned char)(bits >> 8),
                                  (unsigned char)bits, 0};
            if (dec_val[c] < 0)
                memcpy(&dec_tab[k][c], bad, 4);
            else
                memcpy(&dec_tab[k][c], b, 4);
        }
    kernel_ok[BASE64_SCALAR] = true;
    kernel_chosen = BASE64_SCALAR;
#ifdef B64_X86
    for (int j = 0; j < 64; j++) {
        static const unsigned char lane[4] = {1, 0, 2, 1};
        vbmi_spread[j] = (unsigned char)(3 * (j / 4) + lane[j % 4]);
        vbmi_pack[j] = j < 48 ? (unsigned char)(4 * (j / 3) + 2 - j % 3) : 0;
    }
    for (int c = 0; c < 128; c++) vbmi_dec[c] = dec_val[c] < 0 ? 0x80 : (unsigned char)dec_val[c];
    /* libgcc's checks include the OS's: AVX state enabled in XCR0 */
    __builtin_cpu_init();
    kernel_ok[BASE64_AVX2] = __builtin_cpu_supports("avx2");
    /* (the VBMI kernel does its tails with the AVX2 blocks) */
    kernel_ok[BASE64_AVX512VBMI] =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vbmi");
    if (kernel_ok[BASE64_AVX2]) kernel_chosen = BASE64_AVX2;
    if (kernel_ok[BASE64_AVX512VBMI]) kernel_chosen = BASE64_AVX512VBMI;
#endif
    atomic_store_explicit(&init_done, 1, memory_order_release);
}

static inline void b64_ready(void) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) pthread_once(&init_once, b64_init);
}

/* --------------------------------------------------------------- scalar */

/* The 8 bytes at p as a big-endian number (GCC and Clang make this one
 * load and a byte swap). */
static inline uint64_t load_be64(const unsigned char *p) {
    return (uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 |
           (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
           (uint64_t)p[6] << 8 | p[7];
}

/* Encode n bytes of s to dst: the whole of base64_encode's contract. */
static size_t encode_scalar(char *dst, const unsigned char *s, size_t n) {
    char *o = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 6) {
        const uint64_t x = load_be64(s + i);
        memcpy(o, enc_pair[x >> 52], 2);
        memcpy(o + 2, enc_pair[(x >> 40) & 0xFFF], 2);
        memcpy(o + 4, enc_pair[(x >> 28) & 0xFFF], 2);
        memcpy(o + 6, enc_pair[(x >> 16) & 0xFFF], 2);
        o += 8;
    }
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        memcpy(o, enc_pair[v >> 12], 2);
        memcpy(o + 2, enc_pair[v & 0xFFF], 2);
        o += 4;
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        o[0] = alphabet[v >> 18];
        o[1] = alphabet[(v >> 12) & 63];
        o[2] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        o[3] = '=';
        o += 4;
    }
    return (size_t)(o - dst);
}

/* Characters before the last group of four (which may hold padding, or
 * stop short): the part any kernel may decode as plain groups. */
static size_t decode_body(size_t len) {
    return len == 0 ? 0 : (len - 1) / 4 * 4;
}

/* Decode s[i..len) into dst + i/4*3, i a multiple of 4 with s[0..i) already
 * decoded (by a vector kernel; i = 0 for the scalar kernel alone). Returns
 * the total bytes written, or (size_t)-1 with *bad_at as numfmt.h says. */
static size_t decode_scalar(unsigned char *dst, const unsigned char *s, size_t len, size_t i,
                            size_t *bad_at) {
    unsigned char *o = i ? dst + i / 4 * 3 : dst; /* dst may be NULL when len is 0 */
    size_t body = decode_body(len), bad;
    /* Two groups a step while a whole group follows them (its bytes in dst
     * take the spare byte of each 4-byte store, and a later store rewrites
     * it), then one at a time with exact stores. */
    size_t roomy = len >= 8 ? len / 4 * 4 - 4 : 0; /* <= body */
    for (; i + 8 <= roomy; i += 8) {
        const uint32_t a =
            dec_tab[0][s[i]] | dec_tab[1][s[i + 1]] | dec_tab[2][s[i + 2]] | dec_tab[3][s[i + 3]];
        const uint32_t b = dec_tab[0][s[i + 4]] | dec_tab[1][s[i + 5]] | dec_tab[2][s[i + 6]] |
                           dec_tab[3][s[i + 7]];
        if ((a | b) & dec_bad) break; /* the loop below finds the character */
        memcpy(o, &a, 4);
        memcpy(o + 3, &b, 4);
        o += 6;
    }
    for (; i < body; i += 4) {
        const uint32_t a =
            dec_tab[0][s[i]] | dec_tab[1][s[i + 1]] | dec_tab[2][s[i + 2]] | dec_tab[3][s[i + 3]];
        if (a & dec_bad) {
            bad = i;
            while (dec_val[s[bad]] >= 0) bad++;
            goto fail;
        }
        unsigned char b[4];
        memcpy(b, &a, 4);
        memcpy(o, b, 3);
        o += 3;
    }
    if (i == len) return (size_t)(o - dst);
    /* the last group: complete or not, padded or not */
    size_t rem = len - i;
    int v4[4] = {0, 0, 0, 0};
    int npad = 0;
    for (size_t j = 0; j < rem; j++) {
        unsigned char ch = s[i + j];
        if (ch == '=' && j >= 2 && rem == 4) {
            if (j == 2 && s[i + 3] != '=') {
                bad = i + 3;
                goto fail;
            }
            npad = (int)(4 - j);
            break;
        }
        v4[j] = dec_val[ch];
        if (v4[j] < 0) {
            bad = i + j;
            goto fail;
        }
    }
    if (rem != 4) {
        bad = len;
        goto fail;
    }
    if (npad == 2 && (v4[1] & 0xF)) {
        bad = i + 1;
        goto fail;
    }
    if (npad == 1 && (v4[2] & 0x3)) {
        bad = i + 2;
        goto fail;
    }
    uint32_t v =
        (uint32_t)v4[0] << 18 | (uint32_t)v4[1] << 12 | (uint32_t)v4[2] << 6 | (uint32_t)v4[3];
    o[0] = (unsigned char)(v >> 16);
    if (npad < 2) o[1] = (unsigned char)(v >> 8);
    if (npad < 1) o[2] = (unsigned char)v;
    o += 3 - npad;
    return (size_t)(o - dst);
fail:
    if (bad_at) *bad_at = bad;
    return (size_t)-1;
}

/* ----------------------------------------------------------------- AVX2 */

#ifdef B64_X86
/* Encode s[i..) in blocks of 24 bytes -> 32 characters while a 32-byte
 * load stays inside s[0..n); returns where it stopped (i + a multiple of
 * 24). dst + i/3*4 receives the characters. */
TARGET_AVX2 static size_t encode_avx2(char *dst, const unsigned char *s, size_t i, size_t n) {
    /* 32-bit lanes 0-2 (bytes 0..11) to the low half, 3-5 to the high */
    const __m256i halves = _mm256_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0);
    /* each 3 bytes b0 b1 b2 as the lane [b1 b0 b2 b1]: its low 16 bits are
     * b0:b1 (fields 0 and 1 at bits 10 and 4), its high 16 bits b1:b2
     * (fields 2 and 3 at bits 6 and 0) */
    const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10, //
                                            1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
    /* fields 0 and 2, moved to bytes 0 and 2 by a high multiply (>>10, >>6);
     * fields 1 and 3, to bytes 1 and 3 by a low multiply (<<4, <<8) */
    const __m256i mask02 = _mm256_set1_epi32(0x0FC0FC00), mul02 = _mm256_set1_epi32(0x04000040);
    const __m256i mask13 = _mm256_set1_epi32(0x003F03F0), mul13 = _mm256_set1_epi32(0x01000010);
    /* 6-bit value -> ASCII: add an offset chosen by the value's range.
     * Range index: 0 for 26..51 (saturating subtract of 51), 1..12 for
     * 52..63, and 13 for 0..25 (marked by a compare). */
    const __m256i offsets =
        _mm256_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                         '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0, //
                         'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                         '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
    const __m256i c51 = _mm256_set1_epi8(51), c26 = _mm256_set1_epi8(26),
                  c13 = _mm256_set1_epi8(13);
    for (; i + 32 <= n; i += 24) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(s + i));
        x = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(x, halves), spread);
        const __m256i f02 = _mm256_mulhi_epu16(_mm256_and_si256(x, mask02), mul02);
        const __m256i f13 = _mm256_mullo_epi16(_mm256_and_si256(x, mask13), mul13);
        const __m256i v = _mm256_or_si256(f02, f13);
        __m256i range = _mm256_subs_epu8(v, c51);
        range = _mm256_or_si256(range, _mm256_and_si256(_mm256_cmpgt_epi8(c26, v), c13));
        const __m256i ascii = _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, range));
        _mm256_storeu_si256((__m256i *)(dst + i / 3 * 4), ascii);
    }
    return i;
}

/* Decode s[i..body) in blocks of 32 characters -> 24 bytes while the
 * 32-byte store stays inside dst[0..cap), stopping before a block that
 * holds a character outside the alphabet; returns where it stopped. */
TARGET_AVX2 static size_t decode_avx2(unsigned char *dst, const unsigned char *s, size_t i,
                                      size_t body, size_t cap) {
    /* Validity by nibbles: a character c is bad iff
     * lo_bad[c & 15] & hi_row[c >> 4] != 0. hi_row gives each high nibble
     * a bit (0x01: no character valid, 0x02: "+/", 0x04: digits, 0x08:
     * A-O and a-o, 0x10: P-Z and p-z); lo_bad[l] holds the rows in which
     * the low nibble l is not valid. */
    const __m256i lo_bad = _mm256_setr_epi8(0x0B, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
                                            0x03, 0x07, 0x15, 0x17, 0x17, 0x17, 0x15, //
                                            0x0B, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
                                            0x03, 0x07, 0x15, 0x17, 0x17, 0x17, 0x15);
    const __m256i hi_row = _mm256_setr_epi8(1, 1, 2, 4, 8, 16, 8, 16, 1, 1, 1, 1, 1, 1, 1, 1, //
                                            1, 1, 2, 4, 8, 16, 8, 16, 1, 1, 1, 1, 1, 1, 1, 1);
    /* Translation: value = c + shift[high nibble], except '/' whose index
     * is moved from 2 (shared with '+') to 1. */
    const __m256i shift = _mm256_setr_epi8(
        0, 63 - '/', 62 - '+', 52 - '0', -'A', -'A', 26 - 'a', 26 - 'a', 0, 0, 0, 0, 0, 0, 0, 0, //
        0, 63 - '/', 62 - '+', 52 - '0', -'A', -'A', 26 - 'a', 26 - 'a', 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i nib = _mm256_set1_epi8(0x0F), slash = _mm256_set1_epi8('/');
    /* 4 x 6 bits -> 2 x 12 bits (a*64 + b) -> 24 bits (ab*4096 + cd) */
    const __m256i merge6 = _mm256_set1_epi32(0x01400140), merge12 = _mm256_set1_epi32(0x00011000);
    /* bytes 2, 1, 0 of each lane, in order, to the first 12 bytes of each
     * half; then the two halves' 12 bytes next to each other */
    const __m256i pack = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1, //
                                          2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    const __m256i join = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
    for (; i + 32 <= body && i / 4 * 3 + 32 <= cap; i += 32) {
        const __m256i c = _mm256_loadu_si256((const __m256i *)(s + i));
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(c, 4), nib);
        const __m256i lo = _mm256_and_si256(c, nib);
        if (!_mm256_testz_si256(_mm256_shuffle_epi8(lo_bad, lo), _mm256_shuffle_epi8(hi_row, hi)))
            break;
        const __m256i idx = _mm256_add_epi8(hi, _mm256_cmpeq_epi8(c, slash));
        __m256i v = _mm256_add_epi8(c, _mm256_shuffle_epi8(shift, idx));
        v = _mm256_madd_epi16(_mm256_maddubs_epi16(v, merge6), merge12);
        v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pack), join);
        _mm256_storeu_si256((__m256i *)(dst + i / 4 * 3), v);
    }
    return i;
}

/* ------------------------------------------------------ AVX-512 VBMI */

/* Encode s[i..) in blocks of 48 bytes -> 64 characters while a 64-byte
 * load stays inside s[0..n); returns where it stopped. */
TARGET_VBMI static size_t encode_vbmi(char *dst, const unsigned char *s, size_t i, size_t n) {
    const __m512i spread = _mm512_load_si512((const void *)vbmi_spread);
    /* With each 3 bytes as the lane [b1 b0 b2 b1] (see encode_avx2), the
     * four fields start at bits 10, 4, 22, 16 of the 32-bit lane: one
     * multishift puts each field in the low 6 bits of its own byte (the
     * top 2 bits of each byte are neighbours' bits, which vpermb ignores). */
    const __m512i fields = _mm512_set1_epi64(0x3036242A1016040All);
    const __m512i ascii = _mm512_loadu_si512((const void *)alphabet);
    for (; i + 64 <= n; i += 48) {
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        x = _mm512_multishift_epi64_epi8(fields, _mm512_permutexvar_epi8(spread, x));
        _mm512_storeu_si512((void *)(dst + i / 3 * 4), _mm512_permutexvar_epi8(x, ascii));
    }
    return i;
}

/* Decode s[i..body) in blocks of 64 characters -> 48 bytes while the
 * 64-byte store stays inside dst[0..cap), stopping before a bad block;
 * returns where it stopped. */
TARGET_VBMI static size_t decode_vbmi(unsigned char *dst, const unsigned char *s, size_t i,
                                      size_t body, size_t cap) {
    /* one two-table permute translates every character below 128 (0x80 for
     * those outside the alphabet); characters from 128 up index the same
     * table by their low 7 bits, so they are caught by their own top bit */
    const __m512i dec_lo = _mm512_load_si512((const void *)vbmi_dec);
    const __m512i dec_hi = _mm512_load_si512((const void *)(vbmi_dec + 64));
    const __m512i merge6 = _mm512_set1_epi32(0x01400140), merge12 = _mm512_set1_epi32(0x00011000);
    const __m512i pack = _mm512_load_si512((const void *)vbmi_pack);
    for (; i + 64 <= body && i / 4 * 3 + 64 <= cap; i += 64) {
        /* two 32-byte loads, not one of 64: on the Zen 5 here, over text
         * offsets 0, 1, 16, 32, 48 mod 64, 12.6 MB decoded at 17-24 GB/s
         * with 64-byte loads and 20-27 with these (28-34 against 18-19 at
         * offset 16 on a quieter machine); 64 KB in L2 at 39-77 against
         * 52-70: a better worst case */
        const __m512i c =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(s + i))),
                               _mm256_loadu_si256((const __m256i *)(s + i + 32)), 1);
        __m512i v = _mm512_permutex2var_epi8(dec_lo, c, dec_hi);
        if (_mm512_movepi8_mask(_mm512_or_si512(v, c))) break;
        v = _mm512_madd_epi16(_mm512_maddubs_epi16(v, merge6), merge12);
        _mm512_storeu_si512((void *)(dst + i / 4 * 3), _mm512_permutexvar_epi8(pack, v));
    }
    return i;
}
#endif

/* ------------------------------------------------------- entry points */

const char *base64_kernel_name(base64_kernel k) {
    return (unsigned)k < BASE64_KERNEL_COUNT ? kernel_names[k] : "?";
}

bool base64_kernel_supported(base64_kernel k) {
    b64_ready();
    return (unsigned)k < BASE64_KERNEL_COUNT && kernel_ok[k];
}

base64_kernel base64_kernel_chosen(void) {
    b64_ready();
    return kernel_chosen;
}

size_t base64_encode_kernel(base64_kernel k, char *dst, const void *src, size_t n) {
    b64_ready();
    const unsigned char *s = src;
    size_t i = 0;
    if ((unsigned)k >= BASE64_KERNEL_COUNT || !kernel_ok[k]) k = BASE64_SCALAR;
#ifdef B64_X86
    if (k == BASE64_AVX512VBMI) i = encode_vbmi(dst, s, i, n);
    if (k == BASE64_AVX512VBMI || k == BASE64_AVX2) i = encode_avx2(dst, s, i, n);
#endif
    if (i == 0) return encode_scalar(dst, s, n); /* (dst and src may be NULL when n is 0) */
    return i / 3 * 4 + encode_scalar(dst + i / 3 * 4, s + i, n - i);
}

size_t base64_decode_kernel(base64_kernel k, void *dst, const char *src, size_t len,
                            size_t *bad_at) {
    b64_ready();
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0;
    if ((unsigned)k >= BASE64_KERNEL_COUNT || !kernel_ok[k]) k = BASE64_SCALAR;
#ifdef B64_X86
    size_t body = decode_body(len), cap = base64_decoded_max(len);
    if (k == BASE64_AVX512VBMI) i = decode_vbmi(dst, s, i, body, cap);
    if (k == BASE64_AVX512VBMI || k == BASE64_AVX2) i = decode_avx2(dst, s, i, body, cap);
#endif
    return decode_scalar(dst, s, len, i, bad_at);
}

size_t base64_encoded_len(size_t n) {
    return (n / 3 + (n % 3 != 0)) * 4;
}

size_t base64_decoded_max(size_t len) {
    return len / 4 * 3;
}

size_t base64_encode(char *dst, const void *src, size_t n) {
    return base64_encode_kernel(base64_kernel_chosen(), dst, src, n);
}

size_t base64_decode(void *dst, const char *src, size_t len, size_t *bad_at) {
    return base64_decode_kernel(base64_kernel_chosen(), dst, src, len, bad_at);
}
