/* json.c - the strict JSON parser of json.h.
 *
 * The file has four parts:
 *   1. the arena: a jdoc owns a chain of large blocks; every node, string and
 *      packed array lives in them, so jdoc_free is one free per block.
 *   2. scratch stacks: while a container is open its elements collect on
 *      growable stacks shared by all nesting levels (values, members, and for
 *      a still-all-numbers array, floats/doubles/offsets); when it closes they
 *      are copied into the arena at their final size and popped.
 *   3. lexing helpers: whitespace, strings (UTF-8 validation, escapes),
 *      numbers (num_scan_json: syntax and value in one pass), error messages.
 *   4. the parser: an explicit state machine with a stack of open containers
 *      (no recursion, so nesting depth costs heap, not C stack), with a tight
 *      loop for arrays of numbers.
 *
 * What is accepted is what jansson 2.14 accepts with JSON_DECODE_ANY |
 * JSON_REJECT_DUPLICATES, except:
 *   - resource limits (depth, value count) fail with their own codes;
 *   - integers beyond long long and numbers beyond DBL_MAX, which jansson
 *     refuses ("too big integer", "real number overflow"), are valid RFC 8259
 *     and are accepted here: the double is rounded (or +-inf, the float too),
 *     and the caller rejects non-finite values where it needs finite ones;
 *   - jansson silently drops a NUL byte right after a number or literal
 *     ("[1\0]" loads); here it is the syntax error RFC 8259 makes it;
 *   - with a syntax error and a duplicate key in one document, the code
 *     reported may differ (duplicates are checked when the object closes).
 * Like jansson without JSON_ALLOW_NUL, "\u0000" is rejected in strings and
 * keys, so every string is free of NUL bytes.
 */
#include "json.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "numfmt.h"

/* ------------------------------------------------------------------ arena */

typedef struct arena_block {
    struct arena_block *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} arena_block;

struct jdoc {
    arena_block *blocks; /* newest first; this jdoc lives in the oldest */
    size_t next_cap;     /* size of the next block to allocate */
    jv root;
    /* while parsing: jdoc_limits' reserve (NULL: none), and whether it
     * refused */
    bool (*reserve)(void *ctx, size_t n);
    void *reserve_ctx;
    bool refused;
};

/* Ask the caller's reserve for n bytes; false (and refused set) when it
 * says no. */
static bool doc_take(jdoc *doc, size_t n) {
    if (!doc->reserve || doc->reserve(doc->reserve_ctx, n)) return true;
    doc->refused = true;
    return false;
}

#define ARENA_ALIGN 16

/* Allocate n bytes (aligned to 16) from the document's arena; NULL when
 * malloc fails or n is absurd. */
static void *arena_alloc(jdoc *doc, size_t n) {
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (n == 0) n = ARENA_ALIGN;
    arena_block *b = doc->blocks;
    if (b->cap - b->used < n) {
        size_t cap = doc->next_cap;
        if (cap < n) cap = n;
        if (cap > SIZE_MAX / 2 - sizeof(arena_block)) return NULL;
        if (!doc_take(doc, mem_alloc_size(sizeof(arena_block) + cap))) return NULL;
        arena_block *nb = mem_alloc(sizeof(arena_block) + cap);
        if (!nb) return NULL;
        nb->cap = cap;
        nb->used = 0;
        /* keep the partly used block first if it has more room left */
        if (b->cap - b->used > cap - n) {
            nb->next = b->next;
            b->next = nb;
            b = nb;
        } else {
            nb->next = b;
            doc->blocks = nb;
            b = nb;
        }
        if (doc->next_cap < (size_t)1 << 30) doc->next_cap *= 2;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static jdoc *jdoc_create(size_t input_len, const jdoc_limits *lim, bool *refused) {
    /* Sized so that typical documents fit in one block: packed numbers take
     * 12 bytes for a number that needs at least 2 bytes of input (usually
     * 8-12), strings take at most their input size. */
    size_t cap = 4096;
    if (input_len < SIZE_MAX / 4) cap += input_len + input_len / 4;
    cap = (cap + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (lim->reserve &&
        !lim->reserve(lim->reserve_ctx, mem_alloc_size(sizeof(arena_block) + cap))) {
        *refused = true;
        return NULL;
    }
    arena_block *b = mem_alloc(sizeof(arena_block) + cap); /* huge pages when large: hugemem.h */
    if (!b) return NULL;
    b->next = NULL;
    b->cap = cap;
    b->used = 0;
    jdoc *doc = (jdoc *)b->data;
    b->used = (sizeof(jdoc) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    doc->blocks = b;
    doc->next_cap = cap < 65536 ? 65536 : cap;
    memset(&doc->root, 0, sizeof doc->root);
    doc->reserve = lim->reserve;
    doc->reserve_ctx = lim->reserve_ctx;
    doc->refused = false;
    return doc;
}

void jdoc_free(jdoc *doc) {
    if (!doc) return;
    arena_block *b = doc->blocks, *oldest = NULL;
    while (b) {
        arena_block *next = b->next;
        if ((unsigned char *)doc == b->data)
            oldest = b; /* holds doc itself: free last */
        else
            free(b);
        b = next;
    }
    free(oldest);
}

const jv *jdoc_root(const jdoc *doc) {
    return doc ? &doc->root : NULL;
}

/* --------------------------------------------------------- scratch stacks */

/* One open array or object. */
typedef struct {
    jv_type type;  /* JV_ARRAY or JV_OBJECT */
    bool packed;   /* array whose elements so far are all numbers */
    size_t offset; /* of the '[' or '{' */
    size_t start;  /* first element on vals (array) or mems (object) */
    size_t nstart; /* first number on the numeric stacks (packed array) */
} frame;

typedef struct {
    const char *buf; /* the input */
    const char *end;
    jdoc *doc;
    int max_depth;
    size_t max_values, nvalues;

    frame *frames;
    size_t nframes, capframes;
    jv *vals; /* elements of open non-packed arrays */
    size_t nvals, capvals;
    jv_member *mems; /* members of open objects */
    size_t *keyoffs; /* byte offset of each member's key, for messages */
    size_t nmems, capmems;
    float *nf; /* numbers of open packed arrays */
    double *nd;
    size_t *noff;
    size_t nnum, capnum;

    char *err;
    size_t errlen;
} parser;

/* Grow *arr (element size sz) to hold at least need elements; the bytes
 * added are asked of the document's reserve first. */
static bool grow(parser *ps, void **arr, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / sz) return false;
        c *= 2;
    }
    if (!doc_take(ps->doc, (c - *cap) * sz)) return false;
    void *p = realloc(*arr, c * sz);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

/* The three numeric stacks grow together. */
static bool grow_nums(parser *ps, size_t need) {
    if (need <= ps->capnum) return true;
    size_t c = ps->capnum, c1 = c, c2 = c;
    if (!grow(ps, (void **)&ps->nf, &c, need, sizeof(float))) return false;
    if (!grow(ps, (void **)&ps->nd, &c1, need, sizeof(double))) return false;
    if (!grow(ps, (void **)&ps->noff, &c2, need, sizeof(size_t))) return false;
    ps->capnum = c;
    return true;
}

static bool grow_mems(parser *ps, size_t need) {
    if (need <= ps->capmems) return true;
    size_t c = ps->capmems, c1 = c;
    if (!grow(ps, (void **)&ps->mems, &c, need, sizeof(jv_member))) return false;
    if (!grow(ps, (void **)&ps->keyoffs, &c1, need, sizeof(size_t))) return false;
    ps->capmems = c;
    return true;
}

static void parser_release(parser *ps) {
    free(ps->frames);
    free(ps->vals);
    free(ps->mems);
    free(ps->keyoffs);
    free(ps->nf);
    free(ps->nd);
    free(ps->noff);
}

/* ---------------------------------------------------------------- errors */

static size_t off_of(const parser *ps, const char *p) {
    return (size_t)(p - ps->buf);
}

static jdoc_status fail(parser *ps, jdoc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static jdoc_status fail(parser *ps, jdoc_status st, const char *fmt, ...) {
    if (ps->err && ps->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err, ps->errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Describe the byte at p (or the end of input) for "found ..." */
static const char *found(const parser *ps, const char *p, char tmp[16]) {
    if (p >= ps->end) return "end of input";
    unsigned char c = (unsigned char)*p;
    if (c >= 0x20 && c < 0x7F)
        snprintf(tmp, 16, "'%c'", c);
    else
        snprintf(tmp, 16, "byte 0x%02X", c);
    return tmp;
}

/* "invalid JSON at byte N: <what>, found <x>" */
static jdoc_status syntax(parser *ps, const char *p, const char *what) {
    char tmp[16];
    return fail(ps, JDOC_ERR_SYNTAX, "invalid JSON at byte %zu: %s, found %s", off_of(ps, p), what,
                found(ps, p, tmp));
}

static jdoc_status nomem(parser *ps, const char *p) {
    if (!ps->doc || ps->doc->refused)
        return fail(ps, JDOC_ERR_NOMEM,
                    "the server's memory budget (max_memory_bytes) cannot take the memory "
                    "parsing this JSON needs now (at byte %zu); retry later",
                    off_of(ps, p));
    return fail(ps, JDOC_ERR_NOMEM, "out of memory parsing JSON at byte %zu", off_of(ps, p));
}

static jdoc_status too_many(parser *ps, const char *p) {
    return fail(ps, JDOC_ERR_TOOBIG, "JSON has more than %zu values (limit) at byte %zu",
                ps->max_values, off_of(ps, p));
}

/* ---------------------------------------------------------------- lexing */

static inline const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Four hex digits at p (p + 4 <= end checked by the caller), or -1. */
static int hex4(const unsigned char *p) {
    int a = hexval(p[0]), b = hexval(p[1]), c = hexval(p[2]), d = hexval(p[3]);
    if ((a | b | c | d) < 0) return -1;
    return a << 12 | b << 8 | c << 4 | d;
}

/* Length of the valid UTF-8 sequence (RFC 3629: no overlongs, no UTF-16
 * surrogates, nothing above U+10FFFF) starting at p, or 0. */
static int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t avail = (size_t)(end - p);
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return avail >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3) return 0;
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4) return 0;
        unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        return 4;
    }
    return 0;
}

static char *put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* Parse the string whose '"' is at *pp into the arena; on success advance
 * *pp past the closing quote. The unescaped text is never longer than the
 * raw text, so the raw length bounds the allocation. */
/* The first byte at or after q (before end) that a string scan must look
 * at: '"', '\\', a control byte or a non-ASCII byte; end if none. Sixteen
 * bytes at a time where SSE2 is there (every x86-64): long strings are
 * base64 tensors, megabytes of plain ASCII. */
static inline const char *skip_plain(const char *q, const char *end) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    while (end - q >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
        /* signed compare: bytes >= 0x80 are negative, so "< 0x20" takes them too */
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                         _mm_cmplt_epi8(v, space));
        int m = _mm_movemask_epi8(hit);
        if (m) return q + __builtin_ctz((unsigned)m);
        q += 16;
    }
#endif
    while (q < end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return q;
        q++;
    }
    return end;
}

static jdoc_status lex_string(parser *ps, const char **pp, const char **out, size_t *out_len) {
    const char *start = *pp + 1, *end = ps->end, *q = start;
    bool simple = true; /* no escapes, no control or non-ASCII bytes */
    while ((q = skip_plain(q, end)) < end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"') break;
        if (c == '\\') {
            simple = false;
            q += 2;
            continue;
        }
        if (c < 0x20 || c >= 0x80) simple = false;
        q++;
    }
    if (q > end) q = end;
    size_t raw = (size_t)(q - start);
    char *s = arena_alloc(ps->doc, raw + 1);
    if (!s) return nomem(ps, *pp);
    if (simple && q < end) {
        memcpy(s, start, raw);
        s[raw] = '\0';
        *out = s;
        *out_len = raw;
        *pp = q + 1;
        return JDOC_OK;
    }
    /* slow path: validate and unescape; errors name the exact byte */
    char *o = s;
    const char *p = start;
    for (;;) {
        if (p >= end)
            return fail(ps, JDOC_ERR_SYNTAX,
                        "invalid JSON at byte %zu: unterminated string (opened at byte "
                        "%zu), found end of input",
                        off_of(ps, p), off_of(ps, *pp));
        unsigned char c = (unsigned char)*p;
        if (c == '"') break;
        if (c < 0x20)
            return fail(ps, JDOC_ERR_SYNTAX,
                        "invalid JSON at byte %zu: control character 0x%02X in string (must be "
                        "escaped)",
                        off_of(ps, p), c);
        if (c >= 0x80) {
            int n = utf8_seq((const unsigned char *)p, (const unsigned char *)end);
            if (n == 0)
                return fail(ps, JDOC_ERR_SYNTAX,
                            "invalid JSON at byte %zu: invalid UTF-8 in string (byte 0x%02X)",
                            off_of(ps, p), c);
            memcpy(o, p, (size_t)n);
            o += n;
            p += n;
            continue;
        }
        if (c != '\\') {
            *o++ = (char)c;
            p++;
            continue;
        }
        const char *esc = p;
        if (p + 1 >= end) {
            p++;
            continue; /* reported as unterminated */
        }
        char e = p[1];
        p += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            int cp = end - p >= 4 ? hex4((const unsigned char *)p) : -1;
            if (cp < 0)
                return fail(ps, JDOC_ERR_SYNTAX,
                            "invalid JSON at byte %zu: expected 4 hex digits after \\u",
                            off_of(ps, esc));
            p += 4;
            if (cp == 0)
                return fail(ps, JDOC_ERR_SYNTAX,
                            "invalid JSON at byte %zu: \\u0000 is not allowed in strings",
                            off_of(ps, esc));
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(ps, JDOC_ERR_SYNTAX,
                            "invalid JSON at byte %zu: unpaired low surrogate \\u%04X in string",
                            off_of(ps, esc), (unsigned)cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = end - p >= 6 && p[0] == '\\' && p[1] == 'u'
                             ? hex4((const unsigned char *)p + 2)
                             : -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(ps, JDOC_ERR_SYNTAX,
                                "invalid JSON at byte %zu: high surrogate \\u%04X not followed "
                                "by a low surrogate escape",
                                off_of(ps, esc), (unsigned)cp);
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            o = put_utf8(o, (unsigned)cp);
            break;
        }
        default:
            return fail(ps, JDOC_ERR_SYNTAX, "invalid JSON at byte %zu: invalid escape '\\%c'",
                        off_of(ps, esc), e >= 0x20 && e < 0x7F ? e : '?');
        }
    }
    *o = '\0';
    *out = s;
    *out_len = (size_t)(o - s);
    *pp = p + 1;
    return JDOC_OK;
}

/* Scan, check and convert the number at *pp (known to start with '-' or a
 * digit); advance *pp past it. */
static inline jdoc_status lex_number(parser *ps, const char **pp, double *d, float *f) {
    size_t bad;
    const char *why;
    size_t n = num_scan_json(*pp, ps->end, d, f, &bad, &why);
    if (n == 0) return syntax(ps, *pp + bad, why);
    *pp += n;
    return JDOC_OK;
}

/* ---------------------------------------------------------------- parser */

static inline bool count_value(parser *ps, size_t n) {
    if (ps->nvalues > ps->max_values || ps->max_values - ps->nvalues < n) return false;
    ps->nvalues += n;
    return true;
}

/* The innermost frame is a packed array that received something other than
 * a number: turn its numbers into nodes. */
static jdoc_status unpack(parser *ps, frame *fr, const char *p) {
    size_t n = ps->nnum - fr->nstart;
    fr->packed = false;
    if (!count_value(ps, n)) return too_many(ps, p);
    if (!grow(ps, (void **)&ps->vals, &ps->capvals, ps->nvals + n, sizeof(jv))) return nomem(ps, p);
    for (size_t i = 0; i < n; i++) {
        jv *v = &ps->vals[ps->nvals++];
        memset(v, 0, sizeof *v);
        v->type = JV_NUMBER;
        v->offset = ps->noff[fr->nstart + i];
        v->u.num.d = ps->nd[fr->nstart + i];
        v->u.num.f = ps->nf[fr->nstart + i];
    }
    ps->nnum = fr->nstart;
    return JDOC_OK;
}

static jdoc_status close_array(parser *ps, const char *p, jv *out) {
    frame *fr = &ps->frames[ps->nframes - 1];
    memset(out, 0, sizeof *out);
    out->type = JV_ARRAY;
    out->offset = fr->offset;
    if (fr->packed) {
        size_t n = ps->nnum - fr->nstart;
        float *f = arena_alloc(ps->doc, n * sizeof(float));
        double *d = arena_alloc(ps->doc, n * sizeof(double));
        if (!f || !d) return nomem(ps, p);
        if (n) { /* the stacks are NULL until the first number */
            memcpy(f, ps->nf + fr->nstart, n * sizeof(float));
            memcpy(d, ps->nd + fr->nstart, n * sizeof(double));
        }
        out->u.arr.len = n;
        out->u.arr.f = f;
        out->u.arr.d = d;
        ps->nnum = fr->nstart;
    } else {
        size_t n = ps->nvals - fr->start;
        jv *items = arena_alloc(ps->doc, n * sizeof(jv));
        if (!items) return nomem(ps, p);
        if (n) memcpy(items, ps->vals + fr->start, n * sizeof(jv));
        out->u.arr.len = n;
        out->u.arr.items = items;
        ps->nvals = fr->start;
    }
    ps->nframes--;
    return JDOC_OK;
}

static uint64_t key_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static bool key_eq(const jv_member *a, const jv_member *b) {
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* The key, escaped for a message, at most about 60 bytes. */
static void key_for_message(char *dst, size_t cap, const char *key, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)key[i];
        if (o > 60 && (c & 0xC0) != 0x80) {
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '"' || c == '\\') {
            dst[o++] = '\\';
            dst[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(dst + o, cap - o, "\\u%04X", c);
        } else {
            dst[o++] = (char)c;
        }
    }
    dst[o] = '\0';
}

/* Index of the first member whose key repeats an earlier one, or n. Small
 * objects compare pairwise; large ones go through a hash table, so a body
 * with many keys costs linear time. *nomem on allocation failure. */
static size_t find_duplicate(const jv_member *m, size_t n, bool *oom) {
    *oom = false;
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (key_eq(&m[i], &m[j])) return i;
        return n;
    }
    size_t cap = 64;
    while (cap < 2 * n) cap *= 2;
    size_t *tab = malloc(cap * sizeof *tab); /* member index + 1, 0 = empty */
    if (!tab) {
        *oom = true;
        return n;
    }
    memset(tab, 0, cap * sizeof *tab);
    size_t dup = n;
    for (size_t i = 0; i < n && dup == n; i++) {
        size_t h = (size_t)key_hash(m[i].key, m[i].key_len) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            if (tab[h] == 0) {
                tab[h] = i + 1;
                break;
            }
            if (key_eq(&m[tab[h] - 1], &m[i])) {
                dup = i;
                break;
            }
        }
    }
    free(tab);
    return dup;
}

static jdoc_status close_object(parser *ps, const char *p, jv *out) {
    frame *fr = &ps->frames[ps->nframes - 1];
    size_t n = ps->nmems - fr->start;
    /* ps->mems is NULL until the first member: no pointer arithmetic on it */
    const jv_member *m = n ? ps->mems + fr->start : NULL;
    bool oom;
    size_t dup = find_duplicate(m, n, &oom);
    if (oom) return nomem(ps, p);
    if (dup < n) {
        char k[80];
        key_for_message(k, sizeof k, m[dup].key, m[dup].key_len);
        return fail(ps, JDOC_ERR_DUPKEY, "invalid JSON at byte %zu: duplicate key \"%s\" in object",
                    ps->keyoffs[fr->start + dup], k);
    }
    jv_member *mm = arena_alloc(ps->doc, n * sizeof(jv_member));
    if (!mm) return nomem(ps, p);
    if (n) memcpy(mm, m, n * sizeof(jv_member));
    memset(out, 0, sizeof *out);
    out->type = JV_OBJECT;
    out->offset = fr->offset;
    out->u.obj.len = n;
    out->u.obj.members = mm;
    ps->nmems = fr->start;
    ps->nframes--;
    return JDOC_OK;
}

static jdoc_status open_container(parser *ps, const char *p, jv_type type) {
    if ((long long)ps->nframes >= (long long)ps->max_depth)
        return fail(ps, JDOC_ERR_DEPTH, "JSON nested deeper than %d levels at byte %zu",
                    ps->max_depth, off_of(ps, p));
    if (!count_value(ps, 1)) return too_many(ps, p);
    if (!grow(ps, (void **)&ps->frames, &ps->capframes, ps->nframes + 1, sizeof(frame)))
        return nomem(ps, p);
    frame *fr = &ps->frames[ps->nframes++];
    fr->type = type;
    fr->packed = type == JV_ARRAY;
    fr->offset = off_of(ps, p);
    fr->start = type == JV_ARRAY ? ps->nvals : ps->nmems;
    fr->nstart = ps->nnum;
    return JDOC_OK;
}

static jdoc_status parse(parser *ps) {
    const char *p = ps->buf, *end = ps->end;
    jdoc_status st;
    jv v;
    frame *fr;

value: /* a value must start at p (after whitespace) */
    p = skip_ws(p, end);
    if (p == end) return syntax(ps, p, "expected a value");
    fr = ps->nframes ? &ps->frames[ps->nframes - 1] : NULL;
    if (*p == '-' || (unsigned)(*p - '0') <= 9) {
        if (fr && fr->packed) {
            /* the hot loop: numbers straight onto the numeric stacks */
            for (;;) {
                if (ps->nnum == ps->capnum && !grow_nums(ps, ps->nnum + 1)) return nomem(ps, p);
                size_t i = ps->nnum;
                ps->noff[i] = off_of(ps, p);
                if ((st = lex_number(ps, &p, &ps->nd[i], &ps->nf[i]))) return st;
                ps->nnum = i + 1;
                if (p < end && *p == ',') {
                    p++;
                } else {
                    p = skip_ws(p, end);
                    if (p < end && *p == ',') {
                        p++;
                    } else if (p < end && *p == ']') {
                        p++;
                        if ((st = close_array(ps, p, &v))) return st;
                        goto have_value;
                    } else {
                        return syntax(ps, p, "expected ',' or ']' after array element");
                    }
                }
                p = skip_ws(p, end);
                if (p == end || !(*p == '-' || (unsigned)(*p - '0') <= 9)) goto value;
            }
        }
        memset(&v, 0, sizeof v);
        v.type = JV_NUMBER;
        v.offset = off_of(ps, p);
        if ((st = lex_number(ps, &p, &v.u.num.d, &v.u.num.f))) return st;
        if (!count_value(ps, 1)) return too_many(ps, p);
        goto have_value;
    }
    if (fr && fr->packed && *p != ']' && (st = unpack(ps, fr, p))) return st;
    switch (*p) {
    case '[':
        if ((st = open_container(ps, p, JV_ARRAY))) return st;
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
            p++;
            if ((st = close_array(ps, p, &v))) return st;
            goto have_value;
        }
        goto value;
    case '{':
        if ((st = open_container(ps, p, JV_OBJECT))) return st;
        p = skip_ws(p + 1, end);
        if (p < end && *p == '}') {
            p++;
            if ((st = close_object(ps, p, &v))) return st;
            goto have_value;
        }
        if (p == end || *p != '"') return syntax(ps, p, "expected a string key or '}'");
        goto key;
    case '"':
        memset(&v, 0, sizeof v);
        v.type = JV_STRING;
        v.offset = off_of(ps, p);
        if (!count_value(ps, 1)) return too_many(ps, p);
        if ((st = lex_string(ps, &p, &v.u.str.s, &v.u.str.len))) return st;
        goto have_value;
    case 't':
    case 'f':
    case 'n': {
        static const char *const lit[3] = {"true", "false", "null"};
        static const jv_type lt[3] = {JV_TRUE, JV_FALSE, JV_NULL};
        int k = *p == 't' ? 0 : *p == 'f' ? 1 : 2;
        size_t n = strlen(lit[k]);
        if ((size_t)(end - p) < n || memcmp(p, lit[k], n) != 0)
            return syntax(ps, p, "expected a value");
        memset(&v, 0, sizeof v);
        v.type = lt[k];
        v.offset = off_of(ps, p);
        if (!count_value(ps, 1)) return too_many(ps, p);
        p += n;
        goto have_value;
    }
    default:
        if (*p == ']' && fr && fr->type == JV_ARRAY) /* "[1,]": '[]' was handled above */
            return syntax(ps, p, "expected a value after ',' (no trailing commas)");
        return syntax(ps, p, "expected a value");
    }

have_value: /* v is complete; p is just after it */
    if (ps->nframes == 0) {
        ps->doc->root = v;
        p = skip_ws(p, end);
        if (p != end) return syntax(ps, p, "expected end of input after the value");
        return JDOC_OK;
    }
    fr = &ps->frames[ps->nframes - 1];
    p = skip_ws(p, end);
    if (fr->type == JV_ARRAY) {
        if (fr->packed && (st = unpack(ps, fr, p))) return st; /* not reached: unpacked at start */
        if (ps->nvals == ps->capvals &&
            !grow(ps, (void **)&ps->vals, &ps->capvals, ps->nvals + 1, sizeof(jv)))
            return nomem(ps, p);
        ps->vals[ps->nvals++] = v;
        if (p < end && *p == ',') {
            p++;
            goto value;
        }
        if (p < end && *p == ']') {
            p++;
            if ((st = close_array(ps, p, &v))) return st;
            goto have_value;
        }
        return syntax(ps, p, "expected ',' or ']' after array element");
    }
    ps->mems[ps->nmems - 1].value = v;
    if (p < end && *p == ',') {
        p = skip_ws(p + 1, end);
        if (p == end || *p != '"') return syntax(ps, p, "expected a string key after ','");
        goto key;
    }
    if (p < end && *p == '}') {
        p++;
        if ((st = close_object(ps, p, &v))) return st;
        goto have_value;
    }
    return syntax(ps, p, "expected ',' or '}' after object member");

key: /* p is at the '"' of a member's key */
    if (ps->nmems == ps->capmems && !grow_mems(ps, ps->nmems + 1)) return nomem(ps, p);
    {
        jv_member *m = &ps->mems[ps->nmems];
        ps->keyoffs[ps->nmems] = off_of(ps, p);
        if ((st = lex_string(ps, &p, &m->key, &m->key_len))) return st;
        memset(&m->value, 0, sizeof m->value);
        ps->nmems++;
    }
    p = skip_ws(p, end);
    if (p == end || *p != ':') return syntax(ps, p, "expected ':' after object key");
    p++;
    goto value;
}

jdoc_status jdoc_parse(const char *buf, size_t len, const jdoc_limits *lim, jdoc **out, char *err,
                       size_t errlen) {
    static const jdoc_limits defaults = JDOC_LIMITS_DEFAULT;
    if (!lim) lim = &defaults;
    if (err && errlen) err[0] = '\0';
    *out = NULL;
    if (!buf) buf = "";
    parser ps;
    memset(&ps, 0, sizeof ps);
    ps.buf = buf;
    ps.end = buf + len;
    ps.max_depth = lim->max_depth;
    ps.max_values = lim->max_values;
    ps.err = err;
    ps.errlen = errlen;
    bool refused = false;
    ps.doc = jdoc_create(len, lim, &refused);
    if (!ps.doc) {
        if (refused) return nomem(&ps, buf); /* no document: the budget's message */
        return fail(&ps, JDOC_ERR_NOMEM, "out of memory parsing JSON at byte 0");
    }
    jdoc_status st = parse(&ps);
    parser_release(&ps);
    ps.doc->reserve = NULL; /* the parse is over: nothing more is taken */
    if (st != JDOC_OK) {
        jdoc_free(ps.doc);
        return st;
    }
    *out = ps.doc;
    return JDOC_OK;
}

/* ------------------------------------------------------------- accessors */

const jv *jv_get(const jv *obj, const char *key) {
    if (!obj || obj->type != JV_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->u.obj.len; i++) {
        const jv_member *m = &obj->u.obj.members[i];
        if (m->key_len == n && memcmp(m->key, key, n) == 0) return &m->value;
    }
    return NULL;
}

const jv *jv_at(const jv *arr, size_t i, jv *tmp) {
    if (!arr || arr->type != JV_ARRAY || i >= arr->u.arr.len) return NULL;
    if (arr->u.arr.items) return &arr->u.arr.items[i];
    memset(tmp, 0, sizeof *tmp);
    tmp->type = JV_NUMBER;
    tmp->offset = arr->offset;
    tmp->u.num.d = arr->u.arr.d[i];
    tmp->u.num.f = arr->u.arr.f[i];
    return tmp;
}

const char *jv_type_name(jv_type t) {
    switch (t) {
    case JV_NULL: return "null";
    case JV_FALSE:
    case JV_TRUE: return "boolean";
    case JV_NUMBER: return "number";
    case JV_STRING: return "string";
    case JV_ARRAY: return "array";
    case JV_OBJECT: return "object";
    }
    return "unknown";
}
