/* safetensors.c - a strict reader of the safetensors file format.
 *
 * The file is divided into:
 *   1. dtypes and small byte helpers
 *   2. UTF-8 validation of the header
 *   3. the header parser: a small strict JSON parser that follows the shape of
 *      a safetensors header (object of tensor entries and __metadata__) and,
 *      when something else is there, says what it expected and what it found
 *   4. validation of the tensor table (duplicates, sizes, offsets), st_parse
 *      and st_open
 *   5. lookups
 *   6. conversion to float32
 *
 * Ownership: an st_file owns one copy of the file's bytes, one arena holding
 * every decoded string of the header (tensor names, metadata keys and values)
 * and the tables that point into both. Nothing is shared between st_files, so
 * parsing is thread-safe and a parsed file is read-only.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- 1. dtypes and byte helpers ---------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtype_info[ST_DTYPE_COUNT] = {
    [ST_F64] = {"F64", 8}, [ST_F32] = {"F32", 4},   [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
    [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4},   [ST_I16] = {"I16", 2}, [ST_I8] = {"I8", 1},
    [ST_U8] = {"U8", 1},   [ST_BOOL] = {"BOOL", 1},
};

/* 0 for an out-of-range dtype. */
size_t st_dtype_size(st_dtype dt) {
    if ((unsigned)dt >= ST_DTYPE_COUNT) return 0;
    return dtype_info[dt].size;
}

const char *st_dtype_name(st_dtype dt) {
    if ((unsigned)dt >= ST_DTYPE_COUNT) return "UNKNOWN";
    return dtype_info[dt].name;
}

static uint16_t le16(const unsigned char *p) {
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* "[3, 4]", truncated to len. */
void st_format_shape(const size_t *shape, int ndim, char *buf, size_t len) {
    size_t used = 0;
    if (!buf || !len) return;
    buf[0] = '\0';
    for (int i = -1; i <= ndim && used < len; i++) {
        int n;
        if (i < 0)
            n = snprintf(buf + used, len - used, "[");
        else if (i == ndim)
            n = snprintf(buf + used, len - used, "]");
        else
            n = snprintf(buf + used, len - used, "%s%zu", i ? ", " : "", shape[i]);
        if (n < 0) return;
        used += (size_t)n;
    }
}

/* Copy of a C string, or NULL when out of memory. */
static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Double *cap until it holds need elements of elem bytes, reallocating *arr.
 * Returns 0 (arr untouched) on overflow or allocation failure. */
static int grow_array(void **arr, size_t *cap, size_t need, size_t elem) {
    size_t ncap = *cap ? *cap : 16, bytes;
    void *n;
    if (need <= *cap) return 1;
    while (ncap < need)
        if (!attn_mul_size(ncap, 2, &ncap)) return 0;
    if (!attn_mul_size(ncap, elem, &bytes)) return 0;
    n = realloc(*arr, bytes);
    if (!n) return 0;
    *arr = n;
    *cap = ncap;
    return 1;
}

/* ---- the st_file ------------------------------------------------------- */

typedef struct {
    st_tensor t;       /* public view; first member, st_get returns &entry->t */
    size_t begin, end; /* data_offsets, relative to the first data byte */
} st_entry;

typedef struct {
    const char *key;   /* in the string arena */
    const char *value; /* in the string arena */
} st_meta;

struct st_file {
    char *label;              /* path or "<memory>", for messages */
    unsigned char *bytes;     /* the whole file */
    size_t len;               /* bytes in the file */
    bool mapped;              /* bytes is an anonymous mapping (bytes_alloc) */
    char *strings;            /* arena of decoded header strings */
    st_entry *entries;        /* tensors in header order */
    size_t count, cap;        /* used and allocated entries */
    const st_entry **by_name; /* count pointers sorted by name, for st_find */
    st_meta *meta;            /* __metadata__ sorted by key */
    size_t nmeta, meta_cap;   /* used and allocated meta */
};

/* ---- 2. UTF-8 ---------------------------------------------------------- */

/* Offset of the first byte that is not part of well-formed UTF-8 (no
 * overlong forms, no surrogates, nothing above U+10FFFF), or n if all is. */
static size_t utf8_bad_offset(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t more;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return i;
        }
        if (n - i <= more) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += more + 1;
    }
    return n;
}

/* ---- 3. the header parser ---------------------------------------------- */

/* The parser reads the header [begin, end) once, front to back. Decoded
 * strings go to the arena: a decoded string plus its NUL is never longer than
 * its quoted form in the header, so an arena of header length + 8 bytes can
 * not overflow (checked anyway). */
typedef struct {
    const unsigned char *begin, *p, *end; /* header text and read position */
    char *arena;                          /* decoded strings */
    size_t used, cap;                     /* arena bytes used and allocated */
    st_file *f;                           /* receives entries and metadata */
    const char *label;                    /* for messages */
    char found[24];                       /* scratch for j_found() */
    char *err;
    size_t errlen;
} jparse;

/* Fail with ATTN_ERR_FORMAT: "label: <message> (header byte K)". */
__attribute__((format(printf, 2, 3))) static attn_status j_fail(jparse *j, const char *fmt, ...) {
    char msg[ATTN_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn_fail(j->err, j->errlen, ATTN_ERR_FORMAT, "%s: %s (header byte %zu)", j->label, msg,
                     (size_t)(j->p - j->begin));
}

static attn_status j_nomem(jparse *j) {
    return attn_fail(j->err, j->errlen, ATTN_ERR_NOMEM, "%s: out of memory reading the header",
                     j->label);
}

static void j_ws(jparse *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int j_peek(const jparse *j) {
    return j->p < j->end ? *j->p : -1;
}

static int j_literal(const jparse *j, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(j->end - j->p) >= n && memcmp(j->p, lit, n) == 0;
}

static const char *j_found(jparse *j);

/* What kind of JSON value starts at the read position, for "found ..." */
static const char *j_describe(jparse *j) {
    int c = j_peek(j);
    if (c < 0) return "the end of the header";
    if (c == '{') return "an object";
    if (c == '[') return "an array";
    if (c == '"') return "a string";
    if (c == '-' || (c >= '0' && c <= '9')) return "a number";
    if (j_literal(j, "true") || j_literal(j, "false")) return "a boolean";
    if (j_literal(j, "null")) return "null";
    return j_found(j);
}

/* The character at the read position, for syntax errors. */
static const char *j_found(jparse *j) {
    int c = j_peek(j);
    if (c < 0) return "the end of the header";
    if (c >= 0x20 && c < 0x7f)
        snprintf(j->found, sizeof j->found, "'%c'", c);
    else
        snprintf(j->found, sizeof j->found, "byte 0x%02x", (unsigned)c);
    return j->found;
}

/* Consume ch (after whitespace) or fail naming where it was expected. */
static attn_status j_expect(jparse *j, int ch, const char *where) {
    j_ws(j);
    if (j_peek(j) != ch) return j_fail(j, "expected '%c' %s, found %s", ch, where, j_found(j));
    j->p++;
    return ATTN_OK;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits after "\u". */
static attn_status j_hex4(jparse *j, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = j->p < j->end ? hexval(*j->p) : -1;
        if (h < 0) return j_fail(j, "\\u escape needs four hex digits, found %s", j_found(j));
        v = v << 4 | (unsigned)h;
        j->p++;
    }
    *out = v;
    return ATTN_OK;
}

/* Decode the string at the read position into the arena. Strings holding
 * U+0000 are refused: names and metadata are handed out as C strings, where
 * a NUL would silently cut them short. */
static attn_status j_string(jparse *j, const char *what, const char **out) {
    char *w;
    attn_status st;
    if (j_peek(j) != '"') return j_fail(j, "expected %s (a string), found %s", what, j_describe(j));
    j->p++;
    w = j->arena + j->used;
    for (;;) {
        unsigned c, cp = 0;
        if (j->p >= j->end) return j_fail(j, "unterminated string");
        if ((size_t)(w - j->arena) + 5 > j->cap)
            return attn_fail(j->err, j->errlen, ATTN_ERR_INTERNAL, "%s: string arena overflow",
                             j->label);
        c = *j->p;
        if (c == '"') {
            j->p++;
            break;
        }
        if (c < 0x20) return j_fail(j, "unescaped control character 0x%02x in a string", c);
        j->p++;
        if (c != '\\') {
            *w++ = (char)c;
            continue;
        }
        if (j->p >= j->end) return j_fail(j, "unterminated string");
        c = *j->p++;
        switch (c) {
        case '"':
        case '\\':
        case '/': *w++ = (char)c; continue;
        case 'b': *w++ = '\b'; continue;
        case 'f': *w++ = '\f'; continue;
        case 'n': *w++ = '\n'; continue;
        case 'r': *w++ = '\r'; continue;
        case 't': *w++ = '\t'; continue;
        case 'u': break;
        default: j->p--; return j_fail(j, "invalid escape '\\%c' in a string", c);
        }
        if ((st = j_hex4(j, &cp))) return st;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return j_fail(j, "unpaired surrogate \\u%04X in a string", cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo = 0;
            if (!j_literal(j, "\\u"))
                return j_fail(j, "unpaired surrogate \\u%04X in a string", cp);
            j->p += 2;
            if ((st = j_hex4(j, &lo))) return st;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return j_fail(j, "unpaired surrogate \\u%04X in a string", cp);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) return j_fail(j, "\\u0000 in a string (names and values cannot hold NUL)");
        if (cp < 0x80) {
            *w++ = (char)cp;
        } else if (cp < 0x800) {
            *w++ = (char)(0xC0 | cp >> 6);
            *w++ = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            *w++ = (char)(0xE0 | cp >> 12);
            *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
            *w++ = (char)(0x80 | (cp & 0x3F));
        } else {
            *w++ = (char)(0xF0 | cp >> 18);
            *w++ = (char)(0x80 | (cp >> 12 & 0x3F));
            *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
            *w++ = (char)(0x80 | (cp & 0x3F));
        }
    }
    *w++ = '\0';
    *out = j->arena + j->used;
    j->used = (size_t)(w - j->arena);
    return ATTN_OK;
}

/* A non-negative integer that fits size_t, as the reference reads a usize:
 * no sign, fraction or exponent. name/field give the context. */
static attn_status j_size(jparse *j, const char *name, const char *field, size_t *out) {
    size_t v = 0;
    int c = j_peek(j);
    if (c == '-')
        return j_fail(j,
                      "tensor \"%s\": %s: expected a non-negative integer, found a negative number",
                      name, field);
    if (c < '0' || c > '9')
        return j_fail(j, "tensor \"%s\": %s: expected a non-negative integer, found %s", name,
                      field, j_describe(j));
    if (c == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return j_fail(j, "tensor \"%s\": %s: number with a leading zero", name, field);
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        size_t d = (size_t)(*j->p - '0');
        if (v > (SIZE_MAX - d) / 10)
            return j_fail(j, "tensor \"%s\": %s: integer too large", name, field);
        v = v * 10 + d;
        j->p++;
    }
    c = j_peek(j);
    if (c == '.' || c == 'e' || c == 'E')
        return j_fail(j,
                      "tensor \"%s\": %s: expected a non-negative integer, found a number with a "
                      "fraction or exponent",
                      name, field);
    *out = v;
    return ATTN_OK;
}

/* "shape": [d0, d1, ...] with at most ST_MAX_DIMS entries. */
static attn_status j_shape(jparse *j, const char *name, st_tensor *t) {
    attn_status st;
    if (j_peek(j) != '[')
        return j_fail(j, "tensor \"%s\": shape: expected an array of integers, found %s", name,
                      j_describe(j));
    j->p++;
    j_ws(j);
    if (j_peek(j) == ']') {
        j->p++;
        t->ndim = 0;
        return ATTN_OK;
    }
    for (;;) {
        j_ws(j);
        if (t->ndim == ST_MAX_DIMS)
            return j_fail(j, "tensor \"%s\": shape has more than %d dimensions", name, ST_MAX_DIMS);
        if ((st = j_size(j, name, "shape", &t->shape[t->ndim]))) return st;
        t->ndim++;
        j_ws(j);
        if (j_peek(j) == ',') {
            j->p++;
            continue;
        }
        if (j_peek(j) == ']') {
            j->p++;
            return ATTN_OK;
        }
        return j_fail(j, "tensor \"%s\": shape: expected ',' or ']', found %s", name, j_found(j));
    }
}

/* "data_offsets": [begin, end]. */
static attn_status j_offsets(jparse *j, const char *name, st_entry *e) {
    attn_status st;
    if (j_peek(j) != '[')
        return j_fail(j, "tensor \"%s\": data_offsets: expected [begin, end], found %s", name,
                      j_describe(j));
    j->p++;
    j_ws(j);
    if ((st = j_size(j, name, "data_offsets", &e->begin))) return st;
    j_ws(j);
    if (j_peek(j) != ',')
        return j_fail(j, "tensor \"%s\": data_offsets: expected [begin, end], found %s after begin",
                      name, j_found(j));
    j->p++;
    j_ws(j);
    if ((st = j_size(j, name, "data_offsets", &e->end))) return st;
    j_ws(j);
    if (j_peek(j) != ']')
        return j_fail(j,
                      "tensor \"%s\": data_offsets: expected [begin, end] (two integers), found %s "
                      "after end",
                      name, j_found(j));
    j->p++;
    return ATTN_OK;
}

/* Sizes of one complete entry: numel, nbytes, and that its offsets hold
 * exactly that many bytes. Where the bytes lie is checked once all are read. */
static attn_status entry_sizes(jparse *j, st_entry *e) {
    st_tensor *t = &e->t;
    char shape[160];
    st_format_shape(t->shape, t->ndim, shape, sizeof shape);
    if (!attn_mul_sizes(t->shape, (size_t)t->ndim, &t->numel) ||
        !attn_mul_size(t->numel, st_dtype_size(t->dtype), &t->nbytes))
        return attn_fail(j->err, j->errlen, ATTN_ERR_FORMAT,
                         "%s: tensor \"%s\": shape %s of %s overflows the size of memory", j->label,
                         t->name, shape, st_dtype_name(t->dtype));
    if (e->end < e->begin)
        return attn_fail(j->err, j->errlen, ATTN_ERR_FORMAT,
                         "%s: tensor \"%s\": data_offsets [%zu, %zu] end before they begin",
                         j->label, t->name, e->begin, e->end);
    if (e->end - e->begin != t->nbytes)
        return attn_fail(j->err, j->errlen, ATTN_ERR_FORMAT,
                         "%s: tensor \"%s\": data_offsets [%zu, %zu] hold %zu bytes, but shape %s "
                         "of %s needs %zu",
                         j->label, t->name, e->begin, e->end, e->end - e->begin, shape,
                         st_dtype_name(t->dtype), t->nbytes);
    return ATTN_OK;
}

/* One tensor entry: an object with exactly dtype, shape and data_offsets. */
static attn_status j_entry(jparse *j, const char *name, st_entry *e) {
    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    attn_status st;
    memset(e, 0, sizeof *e);
    e->t.name = name;
    if (j_peek(j) != '{')
        return j_fail(j, "tensor \"%s\": expected an object {dtype, shape, data_offsets}, found %s",
                      name, j_describe(j));
    j->p++;
    j_ws(j);
    if (j_peek(j) == '}') {
        j->p++;
    } else {
        for (;;) {
            const char *key;
            j_ws(j);
            if ((st = j_string(j, "a key", &key))) return st;
            if ((st = j_expect(j, ':', "after a key"))) return st;
            j_ws(j);
            if (strcmp(key, "dtype") == 0) {
                const char *dt;
                int k;
                if (have_dtype) return j_fail(j, "tensor \"%s\": duplicate key \"dtype\"", name);
                have_dtype = 1;
                if (j_peek(j) != '"')
                    return j_fail(j, "tensor \"%s\": dtype: expected a string, found %s", name,
                                  j_describe(j));
                if ((st = j_string(j, "a dtype", &dt))) return st;
                for (k = 0; k < ST_DTYPE_COUNT; k++)
                    if (strcmp(dt, dtype_info[k].name) == 0) break;
                if (k == ST_DTYPE_COUNT)
                    return j_fail(j,
                                  "tensor \"%s\": unknown dtype \"%s\" (known: F64, F32, F16, "
                                  "BF16, I64, I32, I16, I8, U8, BOOL)",
                                  name, dt);
                e->t.dtype = (st_dtype)k;
            } else if (strcmp(key, "shape") == 0) {
                if (have_shape) return j_fail(j, "tensor \"%s\": duplicate key \"shape\"", name);
                have_shape = 1;
                if ((st = j_shape(j, name, &e->t))) return st;
            } else if (strcmp(key, "data_offsets") == 0) {
                if (have_offsets)
                    return j_fail(j, "tensor \"%s\": duplicate key \"data_offsets\"", name);
                have_offsets = 1;
                if ((st = j_offsets(j, name, e))) return st;
            } else {
                return j_fail(j,
                              "tensor \"%s\": unknown key \"%s\" (expected dtype, shape, "
                              "data_offsets)",
                              name, key);
            }
            j_ws(j);
            if (j_peek(j) == ',') {
                j->p++;
                continue;
            }
            if (j_peek(j) == '}') {
                j->p++;
                break;
            }
            return j_fail(j, "tensor \"%s\": expected ',' or '}', found %s", name, j_found(j));
        }
    }
    if (!have_dtype) return j_fail(j, "tensor \"%s\": missing \"dtype\"", name);
    if (!have_shape) return j_fail(j, "tensor \"%s\": missing \"shape\"", name);
    if (!have_offsets) return j_fail(j, "tensor \"%s\": missing \"data_offsets\"", name);
    return entry_sizes(j, e);
}

/* "__metadata__": an object mapping strings to strings. */
static attn_status j_metadata(jparse *j) {
    st_file *f = j->f;
    attn_status st;
    if (j_peek(j) != '{')
        return j_fail(j, "__metadata__: expected an object of strings, found %s", j_describe(j));
    j->p++;
    j_ws(j);
    if (j_peek(j) == '}') {
        j->p++;
        return ATTN_OK;
    }
    for (;;) {
        const char *key, *value;
        j_ws(j);
        if ((st = j_string(j, "a __metadata__ key", &key))) return st;
        if ((st = j_expect(j, ':', "after a key"))) return st;
        j_ws(j);
        if (j_peek(j) != '"')
            return j_fail(j, "__metadata__[\"%s\"]: expected a string value, found %s", key,
                          j_describe(j));
        if ((st = j_string(j, "a value", &value))) return st;
        if (!grow_array((void **)&f->meta, &f->meta_cap, f->nmeta + 1, sizeof *f->meta))
            return j_nomem(j);
        f->meta[f->nmeta].key = key;
        f->meta[f->nmeta].value = value;
        f->nmeta++;
        j_ws(j);
        if (j_peek(j) == ',') {
            j->p++;
            continue;
        }
        if (j_peek(j) == '}') {
            j->p++;
            return ATTN_OK;
        }
        return j_fail(j, "__metadata__: expected ',' or '}', found %s", j_found(j));
    }
}

/* The whole header: '{' first (as the reference insists), entries, '}', then
 * only whitespace (writers pad the header with spaces to 8 bytes). */
static attn_status j_header(jparse *j) {
    st_file *f = j->f;
    int have_meta = 0;
    attn_status st;
    if (j_peek(j) != '{')
        return j_fail(j, "header must be a JSON object starting with '{', found %s", j_found(j));
    j->p++;
    j_ws(j);
    if (j_peek(j) == '}') {
        j->p++;
    } else {
        for (;;) {
            const char *key;
            j_ws(j);
            if ((st = j_string(j, "a tensor name", &key))) return st;
            if ((st = j_expect(j, ':', "after a key"))) return st;
            j_ws(j);
            if (strcmp(key, "__metadata__") == 0) {
                if (have_meta) return j_fail(j, "duplicate key \"__metadata__\"");
                have_meta = 1;
                if ((st = j_metadata(j))) return st;
            } else {
                if (!grow_array((void **)&f->entries, &f->cap, f->count + 1, sizeof *f->entries))
                    return j_nomem(j);
                if ((st = j_entry(j, key, &f->entries[f->count]))) return st;
                f->count++;
            }
            j_ws(j);
            if (j_peek(j) == ',') {
                j->p++;
                continue;
            }
            if (j_peek(j) == '}') {
                j->p++;
                break;
            }
            return j_fail(j, "expected ',' or '}' after the entry \"%s\", found %s", key,
                          j_found(j));
        }
    }
    j_ws(j);
    if (j->p != j->end)
        return j_fail(j,
                      "unexpected %s after the header's JSON object (only whitespace may pad it)",
                      j_found(j));
    return ATTN_OK;
}

/* ---- 4. validation, st_parse, st_open ----------------------------------- */

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->t.name, (*(const st_entry *const *)b)->t.name);
}

static int cmp_entry_offsets(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

/* No duplicate names; offsets contiguous from 0 (sorted by begin, as the
 * reference does), ending exactly at the end of the file; data pointers set. */
static attn_status validate_table(st_file *f, const unsigned char *data, size_t data_len, char *err,
                                  size_t errlen) {
    const st_entry **order = NULL;
    size_t bytes, pos = 0;
    attn_status st;

    if (!attn_mul_size(f->count ? f->count : 1, sizeof *order, &bytes) ||
        !(f->by_name = malloc(bytes)) || !(order = malloc(bytes))) {
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM, "%s: out of memory indexing %zu tensors",
                       f->label, f->count);
        goto err;
    }
    for (size_t i = 0; i < f->count; i++) f->by_name[i] = order[i] = &f->entries[i];

    qsort(f->by_name, f->count, sizeof *f->by_name, cmp_entry_name);
    for (size_t i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->t.name, f->by_name[i]->t.name) == 0) {
            st = attn_fail(err, errlen, ATTN_ERR_FORMAT, "%s: duplicate tensor name \"%s\"",
                           f->label, f->by_name[i]->t.name);
            goto err;
        }
    if (f->nmeta) qsort(f->meta, f->nmeta, sizeof *f->meta, cmp_meta);
    for (size_t i = 1; i < f->nmeta; i++)
        if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0) {
            st = attn_fail(err, errlen, ATTN_ERR_FORMAT, "%s: __metadata__: duplicate key \"%s\"",
                           f->label, f->meta[i].key);
            goto err;
        }

    qsort(order, f->count, sizeof *order, cmp_entry_offsets);
    for (size_t i = 0; i < f->count; i++) {
        const st_entry *e = order[i];
        if (e->begin > pos) {
            st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                           "%s: tensor \"%s\": data_offsets [%zu, %zu] leave a gap of %zu bytes "
                           "after %s%s%s (which ends at %zu)",
                           f->label, e->t.name, e->begin, e->end, e->begin - pos,
                           i ? "tensor \"" : "the start of the data", i ? order[i - 1]->t.name : "",
                           i ? "\"" : "", pos);
            goto err;
        }
        if (e->begin < pos) {
            st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                           "%s: tensor \"%s\": data_offsets [%zu, %zu] overlap tensor \"%s\" [%zu, "
                           "%zu]",
                           f->label, e->t.name, e->begin, e->end, order[i - 1]->t.name,
                           order[i - 1]->begin, order[i - 1]->end);
            goto err;
        }
        pos = e->end;
    }
    if (pos > data_len) {
        st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                       "%s: tensor \"%s\" ends at data byte %zu, but the file holds only %zu data "
                       "bytes (truncated?)",
                       f->label, order[f->count - 1]->t.name, pos, data_len);
        goto err;
    }
    if (pos < data_len) {
        st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                       "%s: %zu trailing bytes after the last tensor (data ends at %zu, the file "
                       "holds %zu data bytes)",
                       f->label, data_len - pos, pos, data_len);
        goto err;
    }
    for (size_t i = 0; i < f->count; i++) f->entries[i].t.data = data + f->entries[i].begin;
    free(order);
    return ATTN_OK;
err:
    free(order);
    return st;
}

/* What a file that is not safetensors is, from its first bytes, for a
 * message that says how to export instead: NULL when unrecognised. */
static const char *foreign_format(const unsigned char *b, size_t len) {
    if (len >= 4 && !memcmp(b, "PK\x03\x04", 4)) {
        /* a zip: torch.save's format holds data.pkl, numpy.savez's .npy members */
        size_t look = len < 65536 ? len : 65536;
        for (size_t i = 0; i + 8 <= look; i++) {
            if (!memcmp(b + i, "data.pkl", 8))
                return "a PyTorch checkpoint (torch.save, zip format)";
            if (i + 4 <= look && !memcmp(b + i, ".npy", 4)) return "a NumPy .npz archive";
        }
        return "a zip archive";
    }
    if (len >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
        return "a Python pickle (torch.save's legacy format, or pickle.dump)";
    if (len >= 4 && !memcmp(b, "GGUF", 4)) return "a GGUF file (llama.cpp)";
    if (len >= 6 && !memcmp(b, "\x93NUMPY", 6)) return "a NumPy .npy array";
    return NULL;
}

/* The file's bytes: a large file in an anonymous mapping of its own, so
 * that closing it gives its pages back to the system at once. From the
 * heap, they could stay resident after free (a thread's malloc arena keeps
 * them), and a loader that then allocates the weight set's copies would
 * hold the file twice over (a reload at E = 1024: 16 MiB more). Anonymous
 * memory, read into: a file truncated under us is a short read, never a
 * SIGBUS. */
#define ST_MAP_MIN ((size_t)1 << 20)

static unsigned char *bytes_alloc(size_t len, bool *mapped) {
    *mapped = len >= ST_MAP_MIN;
    if (!*mapped) return malloc(len ? len : 1);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void bytes_free(unsigned char *p, size_t len, bool mapped) {
    if (!p) return;
    if (mapped)
        munmap(p, len);
    else
        free(p);
}

/* Parse buf (from bytes_alloc), which the new st_file takes over whatever
 * happens. */
static attn_status parse_owned(unsigned char *buf, size_t len, bool mapped, const char *label,
                               st_file **out, char *err, size_t errlen) {
    st_file *f = NULL;
    jparse j;
    uint64_t hlen;
    size_t n, bad;
    attn_status st;

    *out = NULL;
    if (!label) label = "<memory>";
    if (!(f = calloc(1, sizeof *f)) || !(f->label = dup_string(label))) {
        bytes_free(buf, len, mapped);
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM, "%s: out of memory", label);
        goto err;
    }
    f->bytes = buf;
    f->len = len;
    f->mapped = mapped;
    if (len < 8) {
        st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                       "%s: file is %zu bytes, too short for the 8-byte header length", label, len);
        goto err;
    }
    hlen = le64(buf);
    if (hlen > ST_MAX_HEADER || hlen > len - 8) {
        const char *what = foreign_format(buf, len);
        if (what) {
            st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                           "%s: this is %s, not a safetensors file. Export the attention layer's "
                           "state_dict as safetensors (safetensors.torch.save_file(layer."
                           "state_dict(), 'layer.safetensors', metadata={'num_heads': 'H'}), or "
                           "the recipe in the README)",
                           label, what);
            goto err;
        }
    }
    if (hlen > ST_MAX_HEADER) {
        st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                       "%s: header length %llu exceeds the limit of %u bytes", label,
                       (unsigned long long)hlen, ST_MAX_HEADER);
        goto err;
    }
    if (hlen > len - 8) {
        st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                       "%s: header length %llu runs past the end of the file (%zu bytes follow "
                       "the length)",
                       label, (unsigned long long)hlen, len - 8);
        goto err;
    }
    n = (size_t)hlen;
    if ((bad = utf8_bad_offset(buf + 8, n)) != n) {
        st = attn_fail(err, errlen, ATTN_ERR_FORMAT,
                       "%s: header is not valid UTF-8 (byte 0x%02x at header byte %zu)", label,
                       buf[8 + bad], bad);
        goto err;
    }
    if (!(f->strings = malloc(n + 8))) {
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM, "%s: out of memory for a %zu-byte header",
                       label, n);
        goto err;
    }
    memset(&j, 0, sizeof j);
    j.begin = j.p = buf + 8;
    j.end = buf + 8 + n;
    j.arena = f->strings;
    j.cap = n + 8;
    j.f = f;
    j.label = f->label;
    j.err = err;
    j.errlen = errlen;
    if ((st = j_header(&j))) goto err;
    if ((st = validate_table(f, buf + 8 + n, len - 8 - n, err, errlen))) goto err;
    *out = f;
    return ATTN_OK;
err:
    st_close(f);
    return st;
}

/* Copies buf and validates the copy: the caller keeps ownership of buf. */
attn_status st_parse(const void *buf, size_t len, const char *label, st_file **out, char *err,
                     size_t errlen) {
    unsigned char *copy;
    bool mapped;
    *out = NULL;
    if (!buf && len)
        return attn_fail(err, errlen, ATTN_ERR_INVALID, "%s: NULL buffer",
                         label ? label : "<memory>");
    if (!(copy = bytes_alloc(len, &mapped)))
        return attn_fail(err, errlen, ATTN_ERR_NOMEM, "%s: out of memory copying %zu bytes",
                         label ? label : "<memory>", len);
    if (len) memcpy(copy, buf, len);
    return parse_owned(copy, len, mapped, label, out, err, errlen);
}

/* Reads the whole file into memory (the st_file owns the copy) and hands it
 * to parse_owned. strerror: glibc's is thread-safe for known errno values (glibc >= 2.32). */
attn_status st_open(const char *path, st_file **out, char *err, size_t errlen) {
    unsigned char *buf = NULL;
    bool mapped = false;
    struct stat sb;
    size_t len = 0, got = 0;
    int fd = -1;
    attn_status st;

    *out = NULL;
    if (!path) return attn_fail(err, errlen, ATTN_ERR_INVALID, "st_open: NULL path");
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        st = attn_fail(err, errlen, ATTN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto err;
    }
    if (fstat(fd, &sb) != 0) {
        st = attn_fail(err, errlen, ATTN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto err;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = attn_fail(err, errlen, ATTN_ERR_IO, "%s: not a regular file", path);
        goto err;
    }
    if (sb.st_size < 0 || (uintmax_t)sb.st_size > SIZE_MAX) {
        st = attn_fail(err, errlen, ATTN_ERR_IO, "%s: file too large to read", path);
        goto err;
    }
    len = (size_t)sb.st_size;
    if (!(buf = bytes_alloc(len, &mapped))) {
        st = attn_fail(err, errlen, ATTN_ERR_NOMEM, "%s: out of memory reading %zu bytes", path,
                       len);
        goto err;
    }
    while (got < len) {
        size_t want = len - got > (1u << 30) ? (1u << 30) : len - got;
        ssize_t r = read(fd, buf + got, want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = attn_fail(err, errlen, ATTN_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            goto err;
        }
        if (r == 0) {
            st = attn_fail(err, errlen, ATTN_ERR_IO,
                           "%s: file shrank while reading (%zu of %zu bytes)", path, got, len);
            goto err;
        }
        got += (size_t)r;
    }
    close(fd);
    return parse_owned(buf, len, mapped, path, out, err, errlen);
err:
    if (fd >= 0) close(fd);
    bytes_free(buf, len, mapped);
    return st;
}

/* Frees the bytes, strings and tables; pointers from st_get/st_find/
 * st_metadata die with it. NULL is fine. */
void st_close(st_file *f) {
    if (!f) return;
    free(f->label);
    bytes_free(f->bytes, f->len, f->mapped);
    free(f->strings);
    free(f->entries);
    free(f->by_name);
    free(f->meta);
    free(f);
}

/* ---- 5. lookups -------------------------------------------------------- */

size_t st_count(const st_file *f) {
    return f ? f->count : 0;
}

const st_tensor *st_get(const st_file *f, size_t i) {
    if (!f || i >= f->count) return NULL;
    return &f->entries[i].t;
}

/* Binary search over the names sorted at parse time. */
const st_tensor *st_find(const st_file *f, const char *name) {
    size_t lo = 0, hi;
    if (!f || !name) return NULL;
    hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->by_name[mid]->t.name);
        if (c == 0) return &f->by_name[mid]->t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Binary search over the keys sorted at parse time. */
const char *st_metadata(const st_file *f, const char *key) {
    size_t lo = 0, hi;
    if (!f || !key) return NULL;
    hi = f->nmeta;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, f->meta[mid].key);
        if (c == 0) return f->meta[mid].value;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *st_label(const st_file *f) {
    return f ? f->label : NULL;
}

/* ---- 6. conversion to float32 ------------------------------------------ */

/* IEEE half to float, exactly: every half value (subnormals included) is a
 * float; inf and NaN stay inf and NaN. */
float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h >> 10 & 0x1F, mant = h & 0x3FF, bits;
    float v;
    if (exp == 0 && mant == 0) {
        bits = sign;
    } else if (exp == 0) { /* subnormal: mant x 2^-24, normalised for float */
        uint32_t e = 113;  /* float exponent field of 2^-14 */
        while (!(mant & 0x400)) {
            mant <<= 1;
            e--;
        }
        bits = sign | e << 23 | (mant & 0x3FF) << 13;
    } else if (exp == 0x1F) {
        bits = sign | 0x7F800000u | mant << 13;
    } else {
        bits = sign | (exp + 112) << 23 | mant << 13;
    }
    memcpy(&v, &bits, sizeof v);
    return v;
}

static float bits_to_f32(uint32_t bits) {
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* dst is t->numel floats. F64 values beyond FLT_MAX are refused rather than
 * converted: the conversion is undefined in C and would be inf in practice. */
attn_status st_to_f32(const st_tensor *t, float *dst, const char *label, char *err, size_t errlen) {
    return st_to_f32_range(t, 0, t->numel, dst, label, err, errlen);
}

attn_status st_to_f32_range(const st_tensor *t, size_t first, size_t count, float *dst,
                            const char *label, char *err, size_t errlen) {
    const unsigned char *s = t->data + first * st_dtype_size(t->dtype);
    if (!label) label = "<memory>";
    switch (t->dtype) {
    case ST_F32:
        for (size_t i = 0; i < count; i++) dst[i] = bits_to_f32(le32(s + 4 * i));
        break;
    case ST_F16:
        for (size_t i = 0; i < count; i++) dst[i] = st_f16_to_f32(le16(s + 2 * i));
        break;
    case ST_BF16:
        for (size_t i = 0; i < count; i++) dst[i] = bits_to_f32((uint32_t)le16(s + 2 * i) << 16);
        break;
    case ST_F64:
        for (size_t i = 0; i < count; i++) {
            uint64_t bits = le64(s + 8 * i);
            double d;
            memcpy(&d, &bits, sizeof d);
            if (isfinite(d) && fabs(d) > FLT_MAX)
                return attn_fail(err, errlen, ATTN_ERR_LAYER,
                                 "%s: tensor \"%s\": value %g at flat index %zu is beyond the "
                                 "float32 range",
                                 label, t->name, d, first + i);
            dst[i] = (float)d; /* in range, or inf/NaN (refused below) */
        }
        break;
    default:
        return attn_fail(err, errlen, ATTN_ERR_FORMAT,
                         "%s: tensor \"%s\" has dtype %s; only F32, F16, BF16 and F64 convert to "
                         "float32",
                         label, t->name, st_dtype_name(t->dtype));
    }
    for (size_t i = 0; i < count; i++)
        if (!isfinite(dst[i]))
            return attn_fail(err, errlen, ATTN_ERR_LAYER,
                             "%s: tensor \"%s\": value at flat index %zu is %s (weights must be "
                             "finite)",
                             label, t->name, first + i,
                             isnan(dst[i]) ? "NaN"
                             : dst[i] > 0  ? "inf"
                                           : "-inf");
    return ATTN_OK;
}
