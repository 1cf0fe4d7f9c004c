/* fuzz_json_diff.c - libFuzzer target: server/json.c against jansson.
 *
 * The same bytes go to jdoc_parse and to jansson's
 *   json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
 *              JSON_DECODE_INT_AS_REAL, &e)
 * (json.h promises to accept exactly what jansson accepts with the first two
 * flags; the third makes jansson read every number as a double, so numbers
 * compare exactly instead of failing on integers beyond json_int_t).
 *
 * Accept/reject must agree, except where json.c documents a difference:
 *   - its resource limits: JDOC_ERR_DEPTH, JDOC_ERR_TOOBIG (and NOMEM);
 *   - jansson's own depth limit (2048 levels, json_error_stack_overflow);
 *   - numbers beyond DBL_MAX: jansson refuses them ("real number overflow"),
 *     json.c accepts them as +-inf; allowed only when our tree really holds
 *     a non-finite number;
 *   - a jansson quirk: one NUL byte right after a number or a literal
 *     ("1\0", "[true\0]") is swallowed by its lexer (its look-ahead byte is
 *     lost when it is NUL) and the document accepted. json.c rejects NUL
 *     outside strings (json.h), which is right. When jansson accepts and we
 *     do not, the input is parsed again by us without those NUL bytes, and
 *     that must be accepted and match jansson's tree.
 * "\u0000" needs no exception: json.c rejects it as jansson does without
 * JSON_ALLOW_NUL.
 * When both accept, the trees must match: same types, string bytes, object
 * keys in the same order (jansson keeps insertion order), and every number
 * bitwise equal to jansson's json_real_value. Our own invariants are checked
 * on the way (strings NUL-free and NUL-terminated, packed arrays consistent).
 */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define MAX_DEPTH 2048 /* the same as jansson's JSON_PARSER_MAX_DEPTH */

static const char *g_input;
static size_t g_len;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_json_diff: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n--- input (%zu bytes) ---\n%.*s\n---\n", g_len,
            (int)(g_len < 2000 ? g_len : 2000), g_input);
    abort();
}

static const char *jt_name(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

static bool same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void cmp_number(double ours, const json_t *j, const char *path) {
    if (!json_is_real(j))
        die("%s: ours is a number (%.17g), jansson has %s", path, ours, jt_name(j));
    double theirs = json_real_value(j);
    if (!same_double(ours, theirs))
        die("%s: ours %a (%.17g), jansson %a (%.17g)", path, ours, ours, theirs, theirs);
}

static void cmp(const jv *v, const json_t *j, char *path, size_t plen);

#define PATH_MAX_LEN 256

/* path grows as "$[3].key" (in a PATH_MAX_LEN buffer); past 200 bytes it
 * stops growing, which only shortens messages. */
static size_t path_push(char *path, size_t plen, const char *key, size_t idx) {
    if (plen >= 200) return plen;
    int k = key ? snprintf(path + plen, PATH_MAX_LEN - plen, ".%.40s", key)
                : snprintf(path + plen, PATH_MAX_LEN - plen, "[%zu]", idx);
    if (k <= 0) return plen;
    return plen + (size_t)k < PATH_MAX_LEN - 1 ? plen + (size_t)k : PATH_MAX_LEN - 1;
}

static void cmp(const jv *v, const json_t *j, char *path, size_t plen) {
    path[plen] = '\0';
    switch (v->type) {
    case JV_NULL:
        if (!json_is_null(j)) die("%s: ours null, jansson %s", path, jt_name(j));
        return;
    case JV_TRUE:
        if (!json_is_true(j)) die("%s: ours true, jansson %s", path, jt_name(j));
        return;
    case JV_FALSE:
        if (!json_is_false(j)) die("%s: ours false, jansson %s", path, jt_name(j));
        return;
    case JV_NUMBER: cmp_number(v->u.num.d, j, path); return;
    case JV_STRING:
        if (!json_is_string(j)) die("%s: ours string, jansson %s", path, jt_name(j));
        if (!v->u.str.s || v->u.str.s[v->u.str.len] != '\0' || strlen(v->u.str.s) != v->u.str.len)
            die("%s: our string is not a NUL-free NUL-terminated string of len %zu", path,
                v->u.str.len);
        if (json_string_length(j) != v->u.str.len ||
            memcmp(json_string_value(j), v->u.str.s, v->u.str.len))
            die("%s: strings differ: ours \"%s\" (%zu bytes), jansson \"%s\" (%zu bytes)", path,
                v->u.str.s, v->u.str.len, json_string_value(j), json_string_length(j));
        return;
    case JV_ARRAY: {
        if (!json_is_array(j)) die("%s: ours array, jansson %s", path, jt_name(j));
        size_t n = v->u.arr.len;
        if (json_array_size(j) != n)
            die("%s: array of %zu elements, jansson %zu", path, n, json_array_size(j));
        bool packed = v->u.arr.f != NULL;
        if (packed == (v->u.arr.items != NULL) || packed != (v->u.arr.d != NULL))
            die("%s: array is neither packed nor itemised (f %p, d %p, items %p)", path,
                (const void *)v->u.arr.f, (const void *)v->u.arr.d, (const void *)v->u.arr.items);
        for (size_t i = 0; i < n; i++) {
            size_t pl = path_push(path, plen, NULL, i);
            const json_t *ji = json_array_get(j, i);
            if (packed) {
                path[pl] = '\0';
                cmp_number(v->u.arr.d[i], ji, path);
                /* the float is the double's value rounded to float32, except
                 * where double rounding could differ (checked in fuzz_numfmt) */
                float f = v->u.arr.f[i];
                double d = v->u.arr.d[i];
                if ((fabs(d) <= FLT_MAX && !isfinite(f)) || (isinf(d) && !isinf(f)) ||
                    (fabs(d) >= FLT_MIN && fabs(d) <= FLT_MAX &&
                     fabs((double)f - d) > fabs(d) * 0x1p-23))
                    die("%s: packed float %a for double %a", path, (double)f, d);
            } else {
                cmp(&v->u.arr.items[i], ji, path, pl);
            }
        }
        if (packed) {
            /* a packed array must have been all numbers */
            for (size_t i = 0; i < n; i++)
                if (!json_is_number(json_array_get(j, i)))
                    die("%s: packed array holds a non-number", path);
        } else {
            bool all_numbers = n > 0;
            for (size_t i = 0; i < n; i++)
                if (v->u.arr.items[i].type != JV_NUMBER) all_numbers = false;
            if (all_numbers) die("%s: an array of %zu numbers was not packed", path, n);
        }
        path[plen] = '\0';
        return;
    }
    case JV_OBJECT: {
        if (!json_is_object(j)) die("%s: ours object, jansson %s", path, jt_name(j));
        size_t n = v->u.obj.len;
        if (json_object_size(j) != n)
            die("%s: object of %zu members, jansson %zu", path, n, json_object_size(j));
        void *it = json_object_iter((json_t *)j);
        for (size_t i = 0; i < n; i++, it = json_object_iter_next((json_t *)j, it)) {
            const jv_member *m = &v->u.obj.members[i];
            if (!it) die("%s: jansson's iteration ends before member %zu", path, i);
            const char *jk = json_object_iter_key(it);
            size_t jklen = json_object_iter_key_len(it);
            if (!m->key || m->key[m->key_len] != '\0' || strlen(m->key) != m->key_len)
                die("%s: our key %zu is not a NUL-free NUL-terminated string", path, i);
            if (jklen != m->key_len || memcmp(jk, m->key, jklen))
                die("%s: member %zu: our key \"%s\", jansson \"%s\" (order or bytes differ)", path,
                    i, m->key, jk);
            if (jv_get(v, m->key) != &m->value)
                die("%s: jv_get(\"%s\") does not find member %zu", path, m->key, i);
            size_t pl = path_push(path, plen, m->key, 0);
            cmp(&m->value, json_object_iter_value(it), path, pl);
        }
        path[plen] = '\0';
        return;
    }
    }
    die("%s: our value has type %d", path, (int)v->type);
}

/* Does the tree hold a non-finite number (a number beyond DBL_MAX)? */
static bool has_nonfinite(const jv *v) {
    switch (v->type) {
    case JV_NUMBER: return !isfinite(v->u.num.d);
    case JV_ARRAY:
        for (size_t i = 0; i < v->u.arr.len; i++)
            if (v->u.arr.items ? has_nonfinite(&v->u.arr.items[i]) : !isfinite(v->u.arr.d[i]))
                return true;
        return false;
    case JV_OBJECT:
        for (size_t i = 0; i < v->u.obj.len; i++)
            if (has_nonfinite(&v->u.obj.members[i].value)) return true;
        return false;
    default: return false;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy: ASan catches a read past the end */
    char *buf = malloc(size ? size : 1), *data_copy = malloc(size ? size : 1);
    if (!buf || !data_copy) {
        free(buf);
        free(data_copy);
        return 0;
    }
    if (size) memcpy(buf, data, size);
    g_input = buf;
    g_len = size;

    jdoc_limits lim = {.max_depth = MAX_DEPTH, .max_values = 4u << 20};
    jdoc *doc = NULL;
    char err[256];
    err[0] = '\0';
    jdoc_status st = jdoc_parse(buf, size, &lim, &doc, err, sizeof err);

    json_error_t je;
    json_t *j = json_loadb(buf, size,
                           JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);

    if (st == JDOC_ERR_DEPTH || st == JDOC_ERR_TOOBIG || st == JDOC_ERR_NOMEM) goto out;
    if (!j && json_error_code(&je) == json_error_stack_overflow) goto out;

    if (st == JDOC_OK && !doc) die("jdoc_parse OK without a document");
    if (st != JDOC_OK && doc) die("jdoc_parse failed but returned a document");
    if (st != JDOC_OK && !err[0]) die("jdoc_parse failed (%d) without a message", (int)st);

    if (st == JDOC_OK && !j) {
        if (json_error_code(&je) == json_error_numeric_overflow && has_nonfinite(jdoc_root(doc)))
            goto out; /* documented: beyond DBL_MAX is +-inf here */
        die("we accept, jansson rejects: %s (line %d, column %d, position %d)", je.text, je.line,
            je.column, je.position);
    }
    if (st != JDOC_OK && j) {
        /* jansson's NUL quirk (see the top): drop each NUL that directly
         * follows the last byte of a number or literal, parse again */
        size_t k = 0;
        for (size_t i = 0; i < size; i++) {
            unsigned char c = (unsigned char)buf[i], prev = i ? (unsigned char)buf[i - 1] : 0;
            if (c == 0 && ((prev >= '0' && prev <= '9') || prev == 'e' || prev == 'l')) continue;
            data_copy[k++] = (char)c;
        }
        if (k == size) die("jansson accepts, we reject (%d): %s", (int)st, err);
        char err2[256];
        jdoc_status st2 = jdoc_parse(data_copy, k, &lim, &doc, err2, sizeof err2);
        if (st2 != JDOC_OK)
            die("jansson accepts, we reject (%d): %s; without the NUL bytes jansson skips, still "
                "(%d): %s",
                (int)st, err, (int)st2, err2);
        st = st2;
    }
    /* both reject: the reasons may differ when a document has several
     * problems (json.c says so), so only accept/reject is compared */
    if (st != JDOC_OK) goto out;
    char path[PATH_MAX_LEN] = "$";
    cmp(jdoc_root(doc), j, path, 1);

out:
    json_decref(j);
    jdoc_free(doc);
    free(buf);
    free(data_copy);
    return 0;
}
