/* test_json.c - the strict JSON parser, against tables of documents and,
 * differentially, against jansson (JSON_DECODE_ANY | JSON_REJECT_DUPLICATES)
 * on randomly generated and mutated documents. JSON_SEED overrides the seed,
 * JSON_N the number of random documents.
 *
 * Known jansson 2.14 departures from RFC 8259, skipped in the comparison:
 * it refuses integers beyond long long and reals beyond DBL_MAX, and it
 * silently drops a NUL byte right after a number or literal ("[1\0]" loads).
 */
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "json.h"
#include "numfmt.h"

/* ASan and TSan reserve terabytes of shadow memory: an address-space
 * limit cannot be used under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static unsigned rnd_below(unsigned n) { return (unsigned)(rnd() % n); }

static jdoc_status parse_len(const char *s, size_t len, const jdoc_limits *lim, jdoc **doc,
                             char *err, size_t errlen) {
    /* a private copy with no slack, so ASan sees any read past the end */
    char *copy = malloc(len ? len : 1);
    memcpy(copy, s, len);
    jdoc_status st = jdoc_parse(copy, len, lim, doc, err, errlen);
    free(copy);
    return st;
}

static jdoc_status parse_str(const char *s, jdoc **doc, char *err, size_t errlen) {
    return parse_len(s, strlen(s), NULL, doc, err, errlen);
}

/* ------------------------------------------------------------ the tables */

static void test_valid(void) {
    static const struct {
        const char *doc;
        jv_type type;
    } ok[] = {
        {"0", JV_NUMBER},
        {"-0", JV_NUMBER},
        {" 1.5e+3 ", JV_NUMBER},
        {"-1E-2", JV_NUMBER},
        {"123456789012345678901234567890", JV_NUMBER},
        {"1e400", JV_NUMBER}, /* jansson refuses (overflow); RFC 8259 allows */
        {"true", JV_TRUE},
        {"false", JV_FALSE},
        {"null", JV_NULL},
        {"\"\"", JV_STRING},
        {"\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", JV_STRING},
        {"\"\\u00e9\\u20AC\\ud83d\\ude00\"", JV_STRING},
        {"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"", JV_STRING},
        {"\"\xed\x9f\xbf\xee\x80\x80\"", JV_STRING}, /* U+D7FF, U+E000 around the surrogates */
        {"[]", JV_ARRAY},
        {" [ ] ", JV_ARRAY},
        {"[1,2,3]", JV_ARRAY},
        {"[[1,2],[3,4]]", JV_ARRAY},
        {"[1,\"a\",null,true,false,{},[]]", JV_ARRAY},
        {"{}", JV_OBJECT},
        {"{\"a\":1,\"b\":[1,2],\"c\":{\"a\":2}}", JV_OBJECT},
        {"{\"a\":{\"a\":{\"a\":1}}}", JV_OBJECT}, /* same key in different objects */
        {"{\"a\":1,\"A\":2,\"a \":3}", JV_OBJECT},
        {"\t\r\n {\"k\" \t:\n 1 } \n", JV_OBJECT},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        jdoc *doc = NULL;
        char err[256] = "";
        jdoc_status st = parse_str(ok[i].doc, &doc, err, sizeof err);
        CHECK_MSG(st == JDOC_OK, "valid %s rejected: %s", ok[i].doc, err);
        if (st == JDOC_OK) CHECK_INT_EQ(jdoc_root(doc)->type, ok[i].type);
        jdoc_free(doc);
    }
}

static void test_invalid(void) {
    static const struct {
        const char *doc;
        size_t len; /* 0: strlen */
        jdoc_status st;
        const char *msg; /* must appear in the message */
    } bad[] = {
        {"", 0, JDOC_ERR_SYNTAX, "at byte 0: expected a value, found end of input"},
        {"   ", 0, JDOC_ERR_SYNTAX, "at byte 3: expected a value"},
        {"-", 0, JDOC_ERR_SYNTAX, "at byte 1: expected a digit after '-'"},
        {"-a", 0, JDOC_ERR_SYNTAX, "at byte 1: expected a digit after '-', found 'a'"},
        {"1.", 0, JDOC_ERR_SYNTAX, "at byte 2: expected a digit after the decimal point"},
        {"1.e5", 0, JDOC_ERR_SYNTAX, "at byte 2"},
        {".5", 0, JDOC_ERR_SYNTAX, "at byte 0: expected a value, found '.'"},
        {"1e", 0, JDOC_ERR_SYNTAX, "at byte 2: expected a digit in the exponent"},
        {"1e+", 0, JDOC_ERR_SYNTAX, "at byte 3: expected a digit in the exponent"},
        {"+1", 0, JDOC_ERR_SYNTAX, "at byte 0: expected a value, found '+'"},
        {"01", 0, JDOC_ERR_SYNTAX, "at byte 1: leading zeros are not allowed"},
        {"-012", 0, JDOC_ERR_SYNTAX, "at byte 2: leading zeros"},
        {"[00]", 0, JDOC_ERR_SYNTAX, "at byte 2"},
        {"NaN", 0, JDOC_ERR_SYNTAX, "found 'N'"},
        {"Infinity", 0, JDOC_ERR_SYNTAX, "found 'I'"},
        {"-Infinity", 0, JDOC_ERR_SYNTAX, "at byte 1"},
        {"[1,2,]", 0, JDOC_ERR_SYNTAX, "at byte 5: expected a value after ','"},
        {"{\"a\":1,}", 0, JDOC_ERR_SYNTAX, "at byte 7: expected a string key after ','"},
        {"[1 2]", 0, JDOC_ERR_SYNTAX, "at byte 3: expected ',' or ']' after array element, found '2'"},
        {"[1,2x]", 0, JDOC_ERR_SYNTAX, "at byte 4: expected ',' or ']' after array element, found 'x'"},
        {"[\"a\" \"b\"]", 0, JDOC_ERR_SYNTAX, "at byte 5: expected ',' or ']'"},
        {"[1,2", 0, JDOC_ERR_SYNTAX, "at byte 4: expected ',' or ']' after array element, found end of input"},
        {"[", 0, JDOC_ERR_SYNTAX, "at byte 1: expected a value"},
        {"{", 0, JDOC_ERR_SYNTAX, "at byte 1: expected a string key or '}'"},
        {"{1:2}", 0, JDOC_ERR_SYNTAX, "at byte 1: expected a string key or '}', found '1'"},
        {"{\"a\" 1}", 0, JDOC_ERR_SYNTAX, "at byte 5: expected ':' after object key, found '1'"},
        {"{\"a\":1 \"b\":2}", 0, JDOC_ERR_SYNTAX, "at byte 7: expected ',' or '}' after object member"},
        {"{\"a\":}", 0, JDOC_ERR_SYNTAX, "at byte 5: expected a value, found '}'"},
        {"[1]]", 0, JDOC_ERR_SYNTAX, "at byte 3: expected end of input after the value, found ']'"},
        {"1 2", 0, JDOC_ERR_SYNTAX, "at byte 2: expected end of input"},
        {"true false", 0, JDOC_ERR_SYNTAX, "at byte 5"},
        {"tru", 0, JDOC_ERR_SYNTAX, "at byte 0: expected a value, found 't'"},
        {"nul", 0, JDOC_ERR_SYNTAX, "at byte 0"},
        {"trUe", 0, JDOC_ERR_SYNTAX, "at byte 0"},
        {"truex", 0, JDOC_ERR_SYNTAX, "at byte 4: expected end of input after the value, found 'x'"},
        {"[1]x", 0, JDOC_ERR_SYNTAX, "at byte 3"},
        {"// c\n1", 0, JDOC_ERR_SYNTAX, "at byte 0"},
        {"'a'", 0, JDOC_ERR_SYNTAX, "found '''"},
        {"\xef\xbb\xbf" "1", 0, JDOC_ERR_SYNTAX, "at byte 0: expected a value, found byte 0xEF"}, /* BOM */
        {"\"abc", 0, JDOC_ERR_SYNTAX, "at byte 4: unterminated string (opened at byte 0)"},
        {"\"abc\\", 0, JDOC_ERR_SYNTAX, "unterminated string"},
        {"\"a\tb\"", 0, JDOC_ERR_SYNTAX, "at byte 2: control character 0x09 in string"},
        {"\"a\nb\"", 0, JDOC_ERR_SYNTAX, "at byte 2: control character 0x0A"},
        {"\"a\x1f\"", 0, JDOC_ERR_SYNTAX, "control character 0x1F"},
        {"\"a\0b\"", 5, JDOC_ERR_SYNTAX, "at byte 2: control character 0x00"},
        {"[1,\0]", 5, JDOC_ERR_SYNTAX, "at byte 3: expected a value, found byte 0x00"},
        {"1\0", 2, JDOC_ERR_SYNTAX, "at byte 1: expected end of input"},
        {"\"\\u0000\"", 0, JDOC_ERR_SYNTAX, "at byte 1: \\u0000 is not allowed"},
        {"{\"\\u0000\":1}", 0, JDOC_ERR_SYNTAX, "\\u0000 is not allowed"},
        {"\"\\x41\"", 0, JDOC_ERR_SYNTAX, "at byte 1: invalid escape '\\x'"},
        {"\"\\U0041\"", 0, JDOC_ERR_SYNTAX, "invalid escape '\\U'"},
        {"\"\\u12\"", 0, JDOC_ERR_SYNTAX, "at byte 1: expected 4 hex digits after \\u"},
        {"\"\\u12G4\"", 0, JDOC_ERR_SYNTAX, "expected 4 hex digits"},
        {"\"\\ud800\"", 0, JDOC_ERR_SYNTAX, "at byte 1: high surrogate \\uD800 not followed"},
        {"\"x\\uD83D\\u0041\"", 0, JDOC_ERR_SYNTAX, "at byte 2: high surrogate \\uD83D"},
        {"\"\\uD83D\\uD83D\"", 0, JDOC_ERR_SYNTAX, "high surrogate"},
        {"\"\\uD83Dx\"", 0, JDOC_ERR_SYNTAX, "high surrogate"},
        {"\"\\udc00\"", 0, JDOC_ERR_SYNTAX, "at byte 1: unpaired low surrogate \\uDC00"},
        {"\"\\ude00\\ud83d\"", 0, JDOC_ERR_SYNTAX, "unpaired low surrogate"},
        {"\"\xc0\x80\"", 0, JDOC_ERR_SYNTAX, "at byte 1: invalid UTF-8 in string (byte 0xC0)"}, /* overlong NUL */
        {"\"\xc1\xbf\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},          /* overlong */
        {"\"\xe0\x80\xaf\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},      /* overlong '/' */
        {"\"\xf0\x80\x80\xaf\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},  /* overlong */
        {"\"\xed\xa0\x80\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},      /* U+D800 in UTF-8 */
        {"\"\xed\xbf\xbf\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},      /* U+DFFF */
        {"\"\xf4\x90\x80\x80\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},  /* U+110000 */
        {"\"\xf5\x80\x80\x80\"", 0, JDOC_ERR_SYNTAX, "byte 0xF5"},
        {"\"\xff\"", 0, JDOC_ERR_SYNTAX, "byte 0xFF"},
        {"\"\x80\"", 0, JDOC_ERR_SYNTAX, "at byte 1: invalid UTF-8 in string (byte 0x80)"}, /* lone continuation */
        {"\"ab\xc3\"", 0, JDOC_ERR_SYNTAX, "at byte 3: invalid UTF-8"}, /* truncated sequence */
        {"\"\xe2\x82\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},
        {"\"\xe2\x82" "a\"", 0, JDOC_ERR_SYNTAX, "invalid UTF-8"},
        {"[\xc3\xa9]", 0, JDOC_ERR_SYNTAX, "at byte 1: expected a value, found byte 0xC3"},
        {"{\"a\":1,\"a\":2}", 0, JDOC_ERR_DUPKEY, "at byte 7: duplicate key \"a\""},
        {"{\"a\":1,\"b\":{\"x\":1,\"x\":2}}", 0, JDOC_ERR_DUPKEY, "at byte 18: duplicate key \"x\""},
        {"{\"\\u0061\":1,\"a\":2}", 0, JDOC_ERR_DUPKEY, "duplicate key \"a\""}, /* after unescaping */
        {"{\"q\\\"\":1,\"q\\\"\":2}", 0, JDOC_ERR_DUPKEY, "duplicate key \"q\\\"\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].doc);
        jdoc *doc = (jdoc *)&doc; /* must be reset to NULL */
        char err[256] = "";
        jdoc_status st = parse_len(bad[i].doc, len, NULL, &doc, err, sizeof err);
        CHECK_MSG(st == bad[i].st, "case %zu (%.*s): status %d, expected %d (%s)", i, (int)len,
                  bad[i].doc, st, bad[i].st, err);
        CHECK_MSG(doc == NULL, "case %zu: *out not NULL on failure", i);
        CHECK_MSG(strstr(err, bad[i].msg) != NULL, "case %zu (%.*s): message \"%s\" lacks \"%s\"", i,
                  (int)len, bad[i].doc, err, bad[i].msg);
    }
    /* no error buffer: still fails cleanly */
    jdoc *doc;
    CHECK_INT_EQ(jdoc_parse("[1,", 3, NULL, &doc, NULL, 0), JDOC_ERR_SYNTAX);
    CHECK(doc == NULL);
    char tiny[8];
    CHECK_INT_EQ(jdoc_parse("[1,", 3, NULL, &doc, tiny, sizeof tiny), JDOC_ERR_SYNTAX);
    CHECK_INT_EQ(strlen(tiny), 7);
    CHECK_INT_EQ(jdoc_parse(NULL, 0, NULL, &doc, NULL, 0), JDOC_ERR_SYNTAX);
    jdoc_free(NULL);
}

/* ----------------------------------------------- structure and accessors */

static void test_structure(void) {
    jdoc *doc;
    char err[256];
    const char *s = "{\"model\": \"demo\", \"x\": [[1, 2.5, -3e-2], [4, 5, 6]], "
                    "\"mixed\": [1, \"two\", [3], 4e0], \"e\": [], \"t\": true, \"n\": null, "
                    "\"u\": \"\\u00e9\\ud83d\\ude00\\n\", \"o\": {\"k\": false}}";
    CHECK_INT_EQ(parse_str(s, &doc, err, sizeof err), JDOC_OK);
    if (!doc) return;
    const jv *root = jdoc_root(doc);
    CHECK_INT_EQ(root->type, JV_OBJECT);
    CHECK_INT_EQ(root->u.obj.len, 8);
    CHECK_STR_EQ(root->u.obj.members[0].key, "model");
    CHECK_STR_EQ(root->u.obj.members[7].key, "o");
    const jv *m = jv_get(root, "model");
    CHECK(m && m->type == JV_STRING);
    if (m) {
        CHECK_STR_EQ(m->u.str.s, "demo");
        CHECK_INT_EQ(m->u.str.len, 4);
        CHECK_INT_EQ(m->offset, 10);
    }
    CHECK(jv_get(root, "nope") == NULL);
    CHECK(jv_get(root, "mode") == NULL);
    CHECK(jv_get(m, "model") == NULL); /* not an object */

    const jv *x = jv_get(root, "x");
    CHECK(x && x->type == JV_ARRAY && x->u.arr.len == 2);
    if (x) {
        CHECK(x->u.arr.items != NULL && x->u.arr.f == NULL && x->u.arr.d == NULL); /* mixed */
        CHECK_INT_EQ(x->offset, 23);
        jv tmp;
        const jv *row = jv_at(x, 0, &tmp);
        CHECK(row && row->type == JV_ARRAY && row->u.arr.len == 3);
        if (row) {
            CHECK(row->u.arr.items == NULL && row->u.arr.f && row->u.arr.d); /* packed */
            CHECK_INT_EQ(row->offset, 24);
            CHECK(row->u.arr.f[1] == 2.5f && row->u.arr.d[2] == -3e-2 &&
                  row->u.arr.f[2] == -3e-2f);
            const jv *e = jv_at(row, 2, &tmp);
            CHECK(e == &tmp && e->type == JV_NUMBER && e->u.num.d == -0.03 &&
                  e->u.num.f == -0.03f && e->offset == 24);
            CHECK(jv_at(row, 3, &tmp) == NULL);
        }
        CHECK(jv_at(x, 2, &tmp) == NULL);
    }
    const jv *mx = jv_get(root, "mixed");
    CHECK(mx && mx->type == JV_ARRAY && mx->u.arr.len == 4 && mx->u.arr.items && !mx->u.arr.f);
    if (mx && mx->u.arr.items) {
        const jv *it = mx->u.arr.items;
        CHECK(it[0].type == JV_NUMBER && it[0].u.num.d == 1 && it[0].offset == 63);
        CHECK(it[1].type == JV_STRING && strcmp(it[1].u.str.s, "two") == 0 && it[1].offset == 66);
        CHECK(it[2].type == JV_ARRAY && it[2].u.arr.f && it[2].u.arr.len == 1 &&
              it[2].u.arr.f[0] == 3.0f);
        CHECK(it[3].type == JV_NUMBER && it[3].u.num.d == 4 && it[3].offset == 78);
    }
    const jv *e = jv_get(root, "e");
    CHECK(e && e->type == JV_ARRAY && e->u.arr.len == 0 && e->u.arr.f && e->u.arr.d &&
          !e->u.arr.items);
    CHECK(jv_get(root, "t")->type == JV_TRUE);
    CHECK(jv_get(root, "n")->type == JV_NULL);
    const jv *u = jv_get(root, "u");
    CHECK(u && u->type == JV_STRING && u->u.str.len == 7);
    if (u) CHECK_STR_EQ(u->u.str.s, "\xc3\xa9\xf0\x9f\x98\x80\n");
    const jv *o = jv_get(root, "o");
    CHECK(o && jv_get(o, "k") && jv_get(o, "k")->type == JV_FALSE);
    CHECK_STR_EQ(jv_type_name(JV_NULL), "null");
    CHECK_STR_EQ(jv_type_name(JV_TRUE), "boolean");
    CHECK_STR_EQ(jv_type_name(JV_FALSE), "boolean");
    CHECK_STR_EQ(jv_type_name(JV_NUMBER), "number");
    CHECK_STR_EQ(jv_type_name(JV_STRING), "string");
    CHECK_STR_EQ(jv_type_name(JV_ARRAY), "array");
    CHECK_STR_EQ(jv_type_name(JV_OBJECT), "object");
    jdoc_free(doc);

    /* an array that stops being all-numbers late keeps every number */
    CHECK_INT_EQ(parse_str("[1,2,3,4,5,6,7,8,9,10,{\"a\":[1]},11]", &doc, err, sizeof err),
                 JDOC_OK);
    if (doc) {
        root = jdoc_root(doc);
        CHECK(root->u.arr.len == 12 && root->u.arr.items && !root->u.arr.f);
        double sum = 0;
        for (size_t i = 0; i < root->u.arr.len; i++)
            if (root->u.arr.items[i].type == JV_NUMBER) sum += root->u.arr.items[i].u.num.d;
        CHECK_NEAR(sum, 66, 0);
        CHECK_INT_EQ(root->u.arr.items[9].offset, 19);
        jdoc_free(doc);
    }
    /* a string with escapes is unescaped; its length counts bytes */
    CHECK_INT_EQ(parse_str("\"a\\u0041\\\\\\\"\\/\"", &doc, err, sizeof err), JDOC_OK);
    if (doc) {
        CHECK_STR_EQ(jdoc_root(doc)->u.str.s, "aA\\\"/");
        jdoc_free(doc);
    }
}

/* A packed array's numbers are those of num_parse: strtof/strtod exactly. */
static void test_numbers(void) {
    char *buf = malloc(1 << 20), tok[64][40];
    char *o = buf;
    *o++ = '[';
    for (int i = 0; i < 64; i++) {
        uint32_t u = (uint32_t)rnd();
        if (((u >> 23) & 0xFF) == 0xFF) u ^= 0x40000000u;
        float x;
        memcpy(&x, &u, 4);
        switch (i % 4) {
        case 0: snprintf(tok[i], sizeof tok[i], "%.9g", (double)x); break;
        case 1: tok[i][fmt_f32_shortest(tok[i], x)] = '\0'; break;
        case 2: snprintf(tok[i], sizeof tok[i], "%.17g", (double)x * 1.0000001); break;
        default: snprintf(tok[i], sizeof tok[i], "%d", (int)(rnd() % 2000000) - 1000000); break;
        }
        o += sprintf(o, "%s%s", i ? (i % 3 ? "," : " ,\n ") : "", tok[i]);
    }
    *o++ = ']';
    jdoc *doc;
    char err[256];
    CHECK_INT_EQ(jdoc_parse(buf, (size_t)(o - buf), NULL, &doc, err, sizeof err), JDOC_OK);
    if (doc) {
        const jv *r = jdoc_root(doc);
        CHECK(r->u.arr.f && r->u.arr.len == 64);
        for (int i = 0; i < 64 && r->u.arr.f; i++) {
            CHECK_MSG(r->u.arr.f[i] == strtof(tok[i], NULL) && r->u.arr.d[i] == strtod(tok[i], NULL),
                      "number %d \"%s\": %a %a", i, tok[i], (double)r->u.arr.f[i], r->u.arr.d[i]);
        }
        jdoc_free(doc);
    }
    /* overflow: accepted, d and f infinite; float-only overflow */
    CHECK_INT_EQ(parse_str("[1e400, -1e400, 1e39, 1e-400]", &doc, err, sizeof err), JDOC_OK);
    if (doc) {
        const jv *r = jdoc_root(doc);
        CHECK(isinf(r->u.arr.d[0]) && r->u.arr.d[0] > 0 && isinf(r->u.arr.f[0]));
        CHECK(isinf(r->u.arr.d[1]) && r->u.arr.d[1] < 0);
        CHECK(r->u.arr.d[2] == 1e39 && isinf(r->u.arr.f[2]));
        CHECK(r->u.arr.d[3] == 0 && r->u.arr.f[3] == 0);
        jdoc_free(doc);
    }
    free(buf);
}

/* ------------------------------------------------------------ the limits */

static char *repeat(const char *a, int n, const char *mid, const char *b) {
    size_t la = strlen(a), lb = strlen(b), lm = strlen(mid);
    char *s = malloc(la * (size_t)n + lm + lb * (size_t)n + 1), *o = s;
    for (int i = 0; i < n; i++, o += la) memcpy(o, a, la);
    memcpy(o, mid, lm);
    o += lm;
    for (int i = 0; i < n; i++, o += lb) memcpy(o, b, lb);
    *o = '\0';
    return s;
}

static void test_limits(void) {
    jdoc *doc;
    char err[256];
    jdoc_limits lim = JDOC_LIMITS_DEFAULT;
    CHECK_INT_EQ(lim.max_depth, 64);

    char *d64 = repeat("[", 64, "1", "]"), *d65 = repeat("[", 65, "1", "]");
    CHECK_INT_EQ(parse_str(d64, &doc, err, sizeof err), JDOC_OK);
    jdoc_free(doc);
    CHECK_INT_EQ(parse_str(d65, &doc, err, sizeof err), JDOC_ERR_DEPTH);
    CHECK_STR_CONTAINS(err, "deeper than 64 levels at byte 64");
    free(d64);
    free(d65);
    char *o64 = repeat("{\"a\":", 64, "1", "}"), *o65 = repeat("{\"a\":", 65, "1", "}");
    CHECK_INT_EQ(parse_str(o64, &doc, err, sizeof err), JDOC_OK);
    jdoc_free(doc);
    CHECK_INT_EQ(parse_str(o65, &doc, err, sizeof err), JDOC_ERR_DEPTH);
    CHECK_STR_CONTAINS(err, "at byte 320");
    free(o64);
    free(o65);
    /* deep nesting is heap, not stack: 100000 levels with a raised limit */
    char *deep = repeat("[", 100000, "", "]");
    lim.max_depth = 100000;
    CHECK_INT_EQ(parse_len(deep, strlen(deep), &lim, &doc, err, sizeof err), JDOC_OK);
    jdoc_free(doc);
    lim.max_depth = 99999;
    CHECK_INT_EQ(parse_len(deep, strlen(deep), &lim, &doc, err, sizeof err), JDOC_ERR_DEPTH);
    free(deep);
    lim.max_depth = 0;
    CHECK_INT_EQ(parse_len("[]", 2, &lim, &doc, err, sizeof err), JDOC_ERR_DEPTH);
    CHECK_INT_EQ(parse_len("7", 1, &lim, &doc, err, sizeof err), JDOC_OK);
    jdoc_free(doc);

    /* value count: nodes count, packed numbers do not */
    lim = (jdoc_limits)JDOC_LIMITS_DEFAULT;
    lim.max_values = 5;
    const char *five = "{\"a\":[1,2,3,4,5,6,7,8,9],\"b\":\"s\",\"c\":[true]}"; /* obj, arr, str, arr, true */
    CHECK_INT_EQ(parse_len(five, strlen(five), &lim, &doc, err, sizeof err), JDOC_OK);
    jdoc_free(doc);
    lim.max_values = 4;
    CHECK_INT_EQ(parse_len(five, strlen(five), &lim, &doc, err, sizeof err), JDOC_ERR_TOOBIG);
    CHECK_STR_CONTAINS(err, "more than 4 values");
    CHECK_STR_CONTAINS(err, "at byte 38"); /* the 5th value, true */
    /* numbers that stop being packed count, all at once */
    lim.max_values = 11;
    CHECK_INT_EQ(parse_len("[1,2,3,4,5,6,7,8,9,\"x\"]", 23, &lim, &doc, err, sizeof err), JDOC_OK);
    jdoc_free(doc);
    lim.max_values = 10;
    CHECK_INT_EQ(parse_len("[1,2,3,4,5,6,7,8,9,\"x\"]", 23, &lim, &doc, err, sizeof err),
                 JDOC_ERR_TOOBIG);
    lim.max_values = 0;
    CHECK_INT_EQ(parse_len("1", 1, &lim, &doc, err, sizeof err), JDOC_ERR_TOOBIG);

    /* a big packed array costs one value */
    size_t n = 200000;
    char *big = malloc(n * 12 + 2), *o = big;
    *o++ = '[';
    for (size_t i = 0; i < n; i++) o += sprintf(o, "%s%zu.5", i ? "," : "", i);
    *o++ = ']';
    lim.max_values = 1;
    CHECK_INT_EQ(parse_len(big, (size_t)(o - big), &lim, &doc, err, sizeof err), JDOC_OK);
    if (doc) {
        const jv *r = jdoc_root(doc);
        CHECK(r->u.arr.len == n && r->u.arr.f && r->u.arr.d[n - 1] == (double)(n - 1) + 0.5);
        jdoc_free(doc);
    }
    free(big);

    /* duplicate keys in a large object go through the hash table */
    size_t nk = 5000;
    char *obj = malloc(nk * 24 + 64);
    for (int withdup = 0; withdup < 2; withdup++) {
        o = obj;
        *o++ = '{';
        size_t dup_at = 0;
        for (size_t i = 0; i < nk; i++) {
            if (withdup && i == nk - 3) dup_at = (size_t)(o - obj) + (i ? 1 : 0);
            o += sprintf(o, "%s\"key%zu\":%zu", i ? "," : "", withdup && i == nk - 3 ? 1234 : i, i);
        }
        *o++ = '}';
        jdoc_status st = parse_len(obj, (size_t)(o - obj), NULL, &doc, err, sizeof err);
        if (!withdup) {
            CHECK_INT_EQ(st, JDOC_OK);
            if (doc) {
                CHECK_INT_EQ(jdoc_root(doc)->u.obj.len, nk);
                const jv *v = jv_get(jdoc_root(doc), "key4321");
                CHECK(v && v->u.num.d == 4321);
            }
            jdoc_free(doc);
        } else {
            CHECK_INT_EQ(st, JDOC_ERR_DUPKEY);
            char want[64];
            snprintf(want, sizeof want, "at byte %zu: duplicate key \"key1234\"", dup_at);
            CHECK_STR_CONTAINS(err, want);
        }
    }
    free(obj);
}

/* Allocation failure: a parse under an address-space limit fails with
 * JDOC_ERR_NOMEM instead of crashing. (In a child process; not under ASan,
 * whose shadow memory needs the address space.) */
static void test_nomem(void) {
#ifdef UNDER_ASAN
    printf("nomem: skipped under AddressSanitizer/ThreadSanitizer\n");
#else
    size_t n = 3u << 20;
    char *s = malloc(n * 3 + 2), *o = s;
    *o++ = '[';
    for (size_t i = 0; i < n; i++) {
        memcpy(o, i ? ",[]" : "[]", i ? 3 : 2);
        o += i ? 3 : 2;
    }
    *o++ = ']';
    size_t len = (size_t)(o - s);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1) _exit(3);
        fclose(f);
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (64u << 20);
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(4);
        jdoc_limits lim = {64, SIZE_MAX, NULL, NULL};
        jdoc *doc;
        char err[256];
        jdoc_status st = jdoc_parse(s, len, &lim, &doc, err, sizeof err);
        if (st == JDOC_OK) _exit(5);
        _exit(st == JDOC_ERR_NOMEM && strstr(err, "out of memory") && doc == NULL ? 0 : 6);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nomem child: status 0x%x", status);
    free(s);
#endif
}

/* The reserve callback (the server's memory budget): every byte of heap
 * the parse takes is asked for first. An array of n numbers needs its
 * stacks (float, double and offset: 20 bytes a number while it is open) and
 * its packed copy (12): at least 32n asked. With less granted than that the
 * parse fails cleanly (JDOC_ERR_NOMEM naming the budget, no document),
 * wherever the refusal falls; ASan checks that nothing leaks. */
typedef struct {
    size_t taken, limit;
    int calls;
} tally;

static bool tally_reserve(void *ctx, size_t n) {
    tally *t = ctx;
    t->calls++;
    if (n > t->limit - t->taken) return false;
    t->taken += n;
    return true;
}

static void test_reserve(void) {
    const size_t n = 200000;
    char *s = malloc(n * 2 + 32), *o = s;
    o += sprintf(o, "{\"x\":[");
    for (size_t i = 0; i < n; i++) *o++ = '0', *o++ = ',';
    o[-1] = ']';
    *o++ = '}';
    size_t len = (size_t)(o - s);
    tally t = {0, SIZE_MAX, 0};
    jdoc_limits lim = {64, SIZE_MAX, tally_reserve, &t};
    jdoc *doc = NULL;
    char err[256];
    CHECK_INT_EQ(parse_len(s, len, &lim, &doc, err, sizeof err), JDOC_OK);
    const size_t need = t.taken;
    CHECK_MSG(need >= 32 * n, "%zu numbers: %zu bytes asked, expected at least %zu", n, need,
              32 * n);
    CHECK_MSG(need <= 80 * n, "%zu numbers: %zu bytes asked, more than 80 a number", n, need);
    printf("reserve: %zu numbers (%zu bytes of JSON) asked for %zu bytes (%.1f a number) in %d "
           "calls\n",
           n, len, need, (double)need / n, t.calls);
    jdoc_free(doc);
    /* refused at every stage: before the document, in the stacks, in the arena */
    for (int k = 0; k < 24; k++) {
        t = (tally){0, k == 0 ? 0 : need * (size_t)k / 24, 0};
        doc = (jdoc *)1;
        jdoc_status st = parse_len(s, len, &lim, &doc, err, sizeof err);
        CHECK_MSG(st == JDOC_ERR_NOMEM && doc == NULL && strstr(err, "memory budget"),
                  "granted %zu of %zu: status %d, '%s'", t.limit, need, (int)st, err);
    }
    free(s);
}

/* ------------------------------------------------- differential, jansson */

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void gen_ws(sbuf *b) {
    static const char *const ws[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    sb_puts(b, ws[rnd_below(7)]);
}

static void gen_number(sbuf *b) {
    char t[64];
    /* each rnd() in its own statement: argument evaluation order is
     * unspecified, and the documents must not depend on the compiler */
    unsigned r1 = rnd_below(1000000), r2 = rnd_below(1000);
    switch (rnd_below(8)) {
    case 0: snprintf(t, sizeof t, "%d", (int)rnd_below(2000) - 1000); break;
    case 1: snprintf(t, sizeof t, "%.9g", (double)(int32_t)rnd() / 7777.0); break;
    case 2: snprintf(t, sizeof t, "%.17g", (double)(int64_t)rnd() * 1e-300); break;
    case 3: snprintf(t, sizeof t, "%" PRId64, (int64_t)rnd() >> (r2 % 63)); break;
    case 4: snprintf(t, sizeof t, "%ue%d", r1 % 100, (int)(r2 % 80) - 40); break;
    case 5: snprintf(t, sizeof t, "-0.%06uE+%u", r1, r2 % 30); break;
    case 6: {
        uint32_t u = (uint32_t)rnd() & 0xBF7FFFFF;
        float x;
        memcpy(&x, &u, 4);
        t[fmt_f32_shortest(t, x)] = '\0';
        break;
    }
    default: snprintf(t, sizeof t, "%u.%u", r1 % 100, r2); break;
    }
    sb_puts(b, t);
}

static void gen_string(sbuf *b, bool key) {
    static const char *const pieces[] = {
        "a", "b", "key", "x", " ", "\\n", "\\\"", "\\\\", "\\/", "\\t", "\\b", "\\f", "\\r",
        "\\u0041", "\\u00e9", "\\u20ac", "\\uD83D\\uDE00", "\\udbff\\udfff", "\xc3\xa9",
        "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80",
        "\\u0001", "\\u001f", "\\u007F", "\\uFFFF", "0", "-", "e",
    };
    sb_puts(b, "\"");
    int n = key ? (int)rnd_below(2) : (int)rnd_below(5);
    for (int i = 0; i < n; i++)
        sb_puts(b, pieces[key ? rnd_below(4) : rnd_below(sizeof pieces / sizeof pieces[0])]);
    sb_puts(b, "\"");
}

static void gen_value(sbuf *b, int depth) {
    unsigned k = depth > 5 ? rnd_below(5) : rnd_below(9);
    switch (k) {
    case 0:
    case 1: gen_number(b); break;
    case 2: gen_string(b, false); break;
    case 3: sb_puts(b, rnd() & 1 ? "true" : "false"); break;
    case 4: sb_puts(b, "null"); break;
    case 5:
    case 6: { /* array, often all numbers */
        bool nums = rnd() & 1;
        int n = (int)rnd_below(7);
        sb_puts(b, "[");
        for (int i = 0; i < n; i++) {
            if (i) sb_puts(b, ",");
            gen_ws(b);
            if (nums)
                gen_number(b);
            else
                gen_value(b, depth + 1);
            gen_ws(b);
        }
        sb_puts(b, "]");
        break;
    }
    default: { /* object, keys from a small set so duplicates happen */
        int n = (int)rnd_below(5);
        sb_puts(b, "{");
        for (int i = 0; i < n; i++) {
            if (i) sb_puts(b, ",");
            gen_ws(b);
            gen_string(b, true);
            gen_ws(b);
            sb_puts(b, ":");
            gen_ws(b);
            gen_value(b, depth + 1);
        }
        sb_puts(b, "}");
        break;
    }
    }
}

static void mutate(sbuf *b) {
    static const char special[] = "[]{},:\"\\-+.eE0123456789 \t\nutfnlrsa/";
    static const char *const inserts[] = {
        "\\u", "\\ud800", "\\udc00", "\\u0000", "1e", "-", "01", ",]", ",}", "\xed\xa0\x80",
        "\xf4\x90\x80\x80", "\xc0\x80", "\xe0\x80\x80", "\xc3", "\x80", "\xff", "NaN", "1.",
        ".5", "+1", "1e999", "-1e999", "99999999999999999999", "\"a\":1,\"a\":2", "\x7f", "\x01",
        "\\x", "//", "[[[[", "]]]", "\"", "\\\"", "true", "nul",
    };
    if (b->len == 0) return;
    size_t pos = rnd_below((unsigned)b->len + 1);
    switch (rnd_below(7)) {
    case 0: /* replace a byte with anything */
        if (pos < b->len) b->p[pos] = (char)rnd();
        break;
    case 1: /* replace a byte with a JSON-significant one */
        if (pos < b->len) b->p[pos] = special[rnd_below(sizeof special - 1)];
        break;
    case 2: /* delete a byte */
        if (pos < b->len) {
            memmove(b->p + pos, b->p + pos + 1, b->len - pos);
            b->len--;
        }
        break;
    case 3: /* truncate */
        b->len = pos;
        b->p[pos] = '\0';
        break;
    case 4: { /* duplicate a span */
        size_t a = rnd_below((unsigned)b->len), n = rnd_below(8);
        if (a + n > b->len) n = b->len - a;
        char tmp[8];
        memcpy(tmp, b->p + a, n);
        sbuf t = {0};
        sb_put(&t, b->p, pos);
        sb_put(&t, tmp, n);
        sb_put(&t, b->p + pos, b->len - pos);
        free(b->p);
        *b = t;
        break;
    }
    default: { /* insert a troublesome piece */
        const char *ins = inserts[rnd_below(sizeof inserts / sizeof inserts[0])];
        sbuf t = {0};
        sb_put(&t, b->p, pos);
        sb_puts(&t, ins);
        sb_put(&t, b->p + pos, b->len - pos);
        free(b->p);
        *b = t;
        break;
    }
    }
}

/* Same tree? Numbers: our double against jansson's value (real, or integer
 * converted to double). Returns NULL or what differs. */
static const char *same_tree(const jv *a, const json_t *j) {
    jv tmp;
    switch (a->type) {
    case JV_NULL: return json_is_null(j) ? NULL : "null";
    case JV_TRUE: return json_is_true(j) ? NULL : "true";
    case JV_FALSE: return json_is_false(j) ? NULL : "false";
    case JV_NUMBER:
        if (json_is_real(j)) return a->u.num.d == json_real_value(j) ? NULL : "real value";
        if (json_is_integer(j))
            return a->u.num.d == (double)json_integer_value(j) ? NULL : "integer value";
        return "number type";
    case JV_STRING:
        if (!json_is_string(j)) return "string type";
        if (json_string_length(j) != a->u.str.len) return "string length";
        return memcmp(json_string_value(j), a->u.str.s, a->u.str.len) ? "string bytes" : NULL;
    case JV_ARRAY:
        if (!json_is_array(j)) return "array type";
        if (json_array_size(j) != a->u.arr.len) return "array length";
        for (size_t i = 0; i < a->u.arr.len; i++) {
            const char *w = same_tree(jv_at(a, i, &tmp), json_array_get(j, i));
            if (w) return w;
        }
        return NULL;
    case JV_OBJECT:
        if (!json_is_object(j)) return "object type";
        if (json_object_size(j) != a->u.obj.len) return "object size";
        for (size_t i = 0; i < a->u.obj.len; i++) {
            const jv_member *m = &a->u.obj.members[i];
            const json_t *jm = json_object_getn(j, m->key, m->key_len);
            if (!jm) return "object key";
            const char *w = same_tree(&m->value, jm);
            if (w) return w;
        }
        return NULL;
    }
    return "type";
}

static void print_doc(const char *what, const sbuf *b) {
    fprintf(stderr, "%s: \"", what);
    for (size_t i = 0; i < b->len && i < 400; i++) {
        unsigned char c = (unsigned char)b->p[i];
        if (c >= 0x20 && c < 0x7F && c != '\\')
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "\"\n");
}

static void test_differential(long ndocs) {
    long accepted = 0, rejected = 0, skipped = 0, limits = 0, disagree = 0, nul_quirk = 0;
    long by_code[8] = {0};
    jdoc_limits lim = {1000, SIZE_MAX, NULL, NULL};
    for (long it = 0; it < ndocs; it++) {
        sbuf b = {0};
        sb_puts(&b, "");
        gen_ws(&b);
        gen_value(&b, 0);
        gen_ws(&b);
        int nmut = it % 5 == 0 ? 0 : 1 + (int)rnd_below(3);
        for (int m = 0; m < nmut; m++) mutate(&b);

        json_error_t jerr;
        json_t *j = json_loadb(b.p, b.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        jdoc *doc = NULL;
        char err[256];
        jdoc_status st = parse_len(b.p, b.len, &lim, &doc, err, sizeof err);
        if (st < 8) by_code[st]++;
        if (!j && (strstr(jerr.text, "too big") || strstr(jerr.text, "overflow"))) {
            skipped++; /* jansson's number range, not JSON's */
        } else if (j && st == JDOC_ERR_SYNTAX && strstr(err, "found byte 0x00")) {
            nul_quirk++; /* jansson drops a NUL byte just after a token ("[1\0]") */
        } else if (st == JDOC_ERR_DEPTH || st == JDOC_ERR_TOOBIG) {
            limits++;
        } else if ((j != NULL) != (st == JDOC_OK)) {
            disagree++;
            if (disagree <= 10) {
                print_doc("disagreement on", &b);
                fprintf(stderr, "  jansson: %s (pos %d); ours: %d %s\n", j ? "accepted" : jerr.text,
                        jerr.position, st, st ? err : "accepted");
            }
        } else if (j) {
            accepted++;
            const char *w = same_tree(jdoc_root(doc), j);
            if (w) {
                disagree++;
                if (disagree <= 10) {
                    print_doc("different trees for", &b);
                    fprintf(stderr, "  differs in: %s\n", w);
                }
            }
        } else {
            rejected++;
            CHECK_MSG(strstr(err, "at byte ") != NULL, "message without offset: %s", err);
        }
        json_decref(j);
        jdoc_free(doc);
        free(b.p);
    }
    CHECK_INT_EQ(disagree, 0);
    CHECK(accepted > ndocs / 10 && rejected > ndocs / 10);
    printf("differential: %ld documents, %ld accepted by both (same trees), %ld rejected by both "
           "(%ld duplicate keys), %ld skipped (jansson number range), %ld skipped (jansson accepts a "
           "NUL after a token), %ld limits, %ld disagree\n",
           ndocs, accepted, rejected, by_code[JDOC_ERR_DUPKEY], skipped, nul_quirk, limits,
           disagree);
}

int main(void) {
    const char *seed = getenv("JSON_SEED"), *ns = getenv("JSON_N");
    rng_state = seed ? strtoull(seed, NULL, 0) : 0x15017ABCDEFull;
    printf("seed 0x%" PRIx64 "\n", rng_state);
    test_valid();
    test_invalid();
    test_structure();
    test_numbers();
    test_limits();
    test_nomem();
    test_reserve();
    test_differential(ns ? atol(ns) : 50000);
    return check_exit();
}
