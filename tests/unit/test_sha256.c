/* test_sha256.c - SHA-256 against the examples of FIPS 180-4 (and the
 * well-known digest of a million 'a's), fed whole and in odd pieces. */
#include <string.h>

#include "check.h"
#include "sha256.h"

static void digest(const void *p, size_t n, size_t piece, char out[65]) {
    sha256 s;
    sha256_init(&s);
    for (size_t i = 0; i < n; i += piece)
        sha256_update(&s, (const char *)p + i, n - i < piece ? n - i : piece);
    sha256_hex(&s, out);
}

int main(void) {
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char out[65];
    size_t pieces[] = {1, 3, 63, 64, 65, 1000};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
            digest(v[i].msg, strlen(v[i].msg), pieces[k], out);
            CHECK_STR_EQ(out, v[i].hex);
        }
    static char a[1000000];
    memset(a, 'a', sizeof a);
    digest(a, sizeof a, 4096, out);
    CHECK_STR_EQ(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    return check_exit();
}
