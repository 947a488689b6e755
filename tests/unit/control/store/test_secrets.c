/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/store/test_secrets.c - the encryption key (from text, the environment and a
 * file), key file generation, sealing and opening values, tokens and UUIDs.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/mem.h"
#include "control/store/secrets.h"
#include "tests/support/tmpdir.h"

/* base64 of the 32 bytes 0x00 .. 0x1f. */
#define KEY_A "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
/* base64 of 32 bytes of 0xff. */
#define KEY_B "//////////////////////////////////////////8="

struct fixture {
    char dir[64];
};

static int setup(void **state)
{
    struct fixture *f = sl_calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(sl_test_tmpdir(f->dir, sizeof(f->dir), "sl-secrets"), 0);
    assert_int_equal(unsetenv(SL_SECRETS_KEY_ENV), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(sl_test_rmtree(f->dir), 0);
    assert_int_equal(unsetenv(SL_SECRETS_KEY_ENV), 0);
    sl_free(f);
    return 0;
}

static void key_path(const struct fixture *f, char *out, size_t cap)
{
    assert_int_equal(sl_test_join(out, cap, f->dir, SL_SECRETS_KEY_FILE), 0);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_int_not_equal(fd, -1);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    assert_int_equal(close(fd), 0);
}

/* Asserts that no 8-character piece of `secret` appears in `msg`. */
static void assert_no_piece_of(const char *msg, const char *secret)
{
    size_t n = strlen(secret);
    char piece[9];

    for (size_t i = 0; i + 8 <= n; i++) {
        memcpy(piece, secret + i, 8);
        piece[8] = '\0';
        if (strstr(msg, piece) != NULL) {
            fail_msg("message \"%s\" contains \"%s\" from the key", msg, piece);
        }
    }
}

/* Asserts that `text` is refused as a key with SL_EINVAL, a message containing `expect`, and
 * nothing of the text itself in the message. */
static void assert_key_refused(const char *text, const char *expect)
{
    struct sl_secrets *s = NULL;
    char err[512] = "";

    assert_int_equal(sl_secrets_create_from_base64(text, &s, err, sizeof(err)), SL_EINVAL);
    assert_null(s);
    if (strstr(err, expect) == NULL) {
        fail_msg("message \"%s\" lacks \"%s\"", err, expect);
    }
    assert_no_piece_of(err, text);
}

static void key_from_valid_base64_is_accepted(void **state)
{
    struct sl_secrets *s = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(sl_secrets_create_from_base64(KEY_A, &s, err, sizeof(err)), 0);
    assert_non_null(s);
    sl_secrets_destroy(s);
    sl_secrets_destroy(NULL);
}

static void key_of_wrong_length_is_refused_saying_so(void **state)
{
    (void)state;
    /* 16 and 33 bytes. */
    assert_key_refused("QUJDREVGR0hJSktMTU5PUA==", "decodes to 16 bytes");
    assert_key_refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g", "decodes to 33 bytes");
    assert_key_refused("", "is empty");
    char long_text[400];
    memset(long_text, 'A', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    assert_key_refused(long_text, "too long");
}

static void key_that_is_not_base64_is_refused_saying_so(void **state)
{
    (void)state;
    assert_key_refused("not*base64*at*all!!", "not valid base64");
    /* The right length but no padding, url-safe characters, inner whitespace, a newline. */
    assert_key_refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", "not valid base64");
    assert_key_refused("__________________________________________8=", "not valid base64");
    assert_key_refused("AAECAwQFBgcICQoLDA0ODxAREh MUFRYXGBkaGxwdHh8=", "not valid base64");
    assert_key_refused(KEY_A "\n", "not valid base64");
    /* Non-canonical: the last character carries bits that the padding says are unused. */
    assert_key_refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=", "not valid base64");
}

static void key_loads_from_the_environment_first(void **state)
{
    struct fixture *f = *state;
    enum sl_secrets_source source = SL_SECRETS_SOURCE_FILE;
    struct sl_secrets *s = NULL;
    char path[PATH_MAX];
    char err[256] = "";

    key_path(f, path, sizeof(path));
    write_file(path, "garbage\n", 0600);
    assert_int_equal(setenv(SL_SECRETS_KEY_ENV, KEY_A, 1), 0);
    assert_int_equal(sl_secrets_load(f->dir, &s, &source, err, sizeof(err)), 0);
    assert_int_equal(source, SL_SECRETS_SOURCE_ENV);
    sl_secrets_destroy(s);

    s = NULL;
    assert_int_equal(setenv(SL_SECRETS_KEY_ENV, "QUJDREVGR0hJSktMTU5PUA==", 1), 0);
    assert_int_equal(sl_secrets_load(f->dir, &s, &source, err, sizeof(err)), SL_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, SL_SECRETS_KEY_ENV));
    assert_non_null(strstr(err, "decodes to 16 bytes"));
    assert_no_piece_of(err, "QUJDREVGR0hJSktMTU5PUA==");

    /* Set but empty is still the variable speaking, not a fallback to the file. */
    assert_int_equal(setenv(SL_SECRETS_KEY_ENV, "", 1), 0);
    assert_int_equal(sl_secrets_load(f->dir, &s, &source, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "is empty"));
}

static void key_loads_from_the_file_with_or_without_a_newline(void **state)
{
    struct fixture *f = *state;
    enum sl_secrets_source source = SL_SECRETS_SOURCE_ENV;
    struct sl_secrets *s = NULL;
    char path[PATH_MAX];
    char err[256] = "";

    key_path(f, path, sizeof(path));
    write_file(path, KEY_A "\n", 0600);
    assert_int_equal(sl_secrets_load(f->dir, &s, &source, err, sizeof(err)), 0);
    assert_int_equal(source, SL_SECRETS_SOURCE_FILE);
    sl_secrets_destroy(s);

    write_file(path, KEY_A, 0400);
    assert_int_equal(sl_secrets_load_file(path, &s, err, sizeof(err)), 0);
    sl_secrets_destroy(s);

    s = NULL;
    write_file(path, KEY_A "\n\n", 0600);
    assert_int_equal(sl_secrets_load_file(path, &s, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "not valid base64"));
    assert_no_piece_of(err, KEY_A);

    write_file(path, "QUJDREVGR0hJSktMTU5PUA==\n", 0600);
    assert_int_equal(sl_secrets_load_file(path, &s, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "decodes to 16 bytes"));
    assert_null(s);
}

static void key_file_open_to_group_or_others_is_refused(void **state)
{
    static const mode_t modes[] = { 0644, 0640, 0604, 0620, 0602, 0610 };
    struct fixture *f = *state;
    struct sl_secrets *s = NULL;
    char path[PATH_MAX];
    char err[512] = "";

    key_path(f, path, sizeof(path));
    for (size_t i = 0; i < SL_ARRAY_LEN(modes); i++) {
        write_file(path, KEY_A "\n", modes[i]);
        assert_int_equal(sl_secrets_load(f->dir, &s, NULL, err, sizeof(err)), SL_EINVAL);
        assert_null(s);
        assert_non_null(strstr(err, path));
        assert_non_null(strstr(err, "group or others"));
        assert_no_piece_of(err, KEY_A);
    }
}

static void key_missing_everywhere_is_not_found(void **state)
{
    struct fixture *f = *state;
    struct sl_secrets *s = NULL;
    char err[512] = "";

    assert_int_equal(sl_secrets_load(f->dir, &s, NULL, err, sizeof(err)), SL_ENOTFOUND);
    assert_null(s);
    assert_non_null(strstr(err, SL_SECRETS_KEY_ENV));
    assert_non_null(strstr(err, SL_SECRETS_KEY_FILE));
}

static void generated_key_file_is_private_loadable_and_never_replaced(void **state)
{
    struct fixture *f = *state;
    struct sl_secrets *s = NULL;
    char path[PATH_MAX];
    char first[128] = "";
    char again[128] = "";
    char err[512] = "";
    struct stat st;
    struct dirent *e;
    int entries = 0;
    DIR *d;
    FILE *fp;

    key_path(f, path, sizeof(path));
    assert_int_equal(sl_secrets_generate_key_file(path, err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_size, SL_SECRETS_KEY_TEXT_LEN + 1);
    assert_int_equal(sl_secrets_load(f->dir, &s, NULL, err, sizeof(err)), 0);
    sl_secrets_destroy(s);

    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(first, sizeof(first), fp));
    assert_int_equal(fclose(fp), 0);

    assert_int_equal(sl_secrets_generate_key_file(path, err, sizeof(err)), SL_EEXIST);
    assert_non_null(strstr(err, path));
    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(again, sizeof(again), fp));
    assert_int_equal(fclose(fp), 0);
    assert_string_equal(first, again);

    /* No temporary file is left behind, whether the link succeeded or not. */
    d = opendir(f->dir);
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        entries += e->d_name[0] != '.';
    }
    assert_int_equal(closedir(d), 0);
    assert_int_equal(entries, 1);
}

static struct sl_secrets *key(const char *text)
{
    struct sl_secrets *s = NULL;
    char err[256];

    assert_int_equal(sl_secrets_create_from_base64(text, &s, err, sizeof(err)), 0);
    return s;
}

static void sealed_values_open_to_the_same_bytes(void **state)
{
    static const size_t sizes[] = { 0, 1, 2, 3, 23, 24, 100, 4096, 100000 };
    struct sl_secrets *s = key(KEY_A);
    struct sl_buf sealed;
    struct sl_buf plain;
    uint8_t *data = sl_malloc(100000);

    (void)state;
    assert_non_null(data);
    randombytes_buf(data, 100000);
    for (size_t i = 0; i < SL_ARRAY_LEN(sizes); i++) {
        sl_buf_init(&sealed, 1 << 20);
        sl_buf_init(&plain, 1 << 20);
        assert_int_equal(sl_secrets_seal(s, sizes[i] == 0 ? NULL : data, sizes[i], &sealed), 0);
        /* base64 of nonce, MAC and value. */
        assert_int_equal(sealed.len, (24 + 16 + sizes[i] + 2) / 3 * 4);
        assert_int_equal(sl_secrets_open(s, sl_buf_cstr(&sealed), sealed.len, &plain), 0);
        assert_int_equal(plain.len, sizes[i]);
        if (sizes[i] > 0) {
            assert_memory_equal(plain.p, data, sizes[i]);
        }
        sl_buf_finish(&sealed);
        sl_buf_finish(&plain);
    }
    /* Appends to what the buffer holds. */
    sl_buf_init(&sealed, 1024);
    sl_buf_init(&plain, 1024);
    assert_int_equal(sl_secrets_seal(s, "value", 5, &sealed), 0);
    assert_int_equal(sl_buf_append_str(&plain, "kept:"), 0);
    assert_int_equal(sl_secrets_open(s, sl_buf_cstr(&sealed), sealed.len, &plain), 0);
    assert_string_equal(sl_buf_cstr(&plain), "kept:value");
    sl_buf_finish(&sealed);
    sl_buf_finish(&plain);
    sl_free(data);
    sl_secrets_destroy(s);
}

static void equal_values_seal_with_different_nonces(void **state)
{
    struct sl_secrets *s = key(KEY_A);
    struct sl_buf a;
    struct sl_buf b;

    (void)state;
    sl_buf_init(&a, 1024);
    sl_buf_init(&b, 1024);
    assert_int_equal(sl_secrets_seal(s, "same", 4, &a), 0);
    assert_int_equal(sl_secrets_seal(s, "same", 4, &b), 0);
    assert_int_equal(a.len, b.len);
    /* The first 32 characters encode the first 24 bytes: the nonce. */
    assert_memory_not_equal(a.p, b.p, 32);
    assert_string_not_equal(sl_buf_cstr(&a), sl_buf_cstr(&b));
    sl_buf_finish(&a);
    sl_buf_finish(&b);
    sl_secrets_destroy(s);
}

static void a_value_does_not_open_under_another_key(void **state)
{
    struct sl_secrets *a = key(KEY_A);
    struct sl_secrets *b = key(KEY_B);
    struct sl_buf sealed;
    struct sl_buf plain;

    (void)state;
    sl_buf_init(&sealed, 1024);
    sl_buf_init(&plain, 1024);
    assert_int_equal(sl_secrets_seal(a, "pypi-token", 10, &sealed), 0);
    assert_int_equal(sl_buf_append_str(&plain, "before"), 0);
    assert_int_equal(sl_secrets_open(b, sl_buf_cstr(&sealed), sealed.len, &plain), SL_ECRYPTO);
    assert_string_equal(sl_buf_cstr(&plain), "before");
    sl_buf_finish(&sealed);
    sl_buf_finish(&plain);
    sl_secrets_destroy(a);
    sl_secrets_destroy(b);
}

static void tampered_or_malformed_sealed_values_are_refused(void **state)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    struct sl_secrets *s = key(KEY_A);
    struct sl_buf sealed;
    struct sl_buf plain;
    char *copy;

    (void)state;
    sl_buf_init(&sealed, 1024);
    sl_buf_init(&plain, 1024);
    assert_int_equal(sl_secrets_seal(s, "a secret value", 14, &sealed), 0);
    copy = sl_strdup(sl_buf_cstr(&sealed));
    assert_non_null(copy);
    /* Every position but the last two (which carry padding bits): nonce, MAC and body. */
    for (size_t i = 0; i + 2 < sealed.len; i++) {
        char was = copy[i];
        const char *at = strchr(b64, was);

        assert_non_null(at);
        copy[i] = b64[((size_t)(at - b64) + 1) % 64];
        assert_int_equal(sl_secrets_open(s, copy, sealed.len, &plain), SL_ECRYPTO);
        copy[i] = was;
    }
    assert_int_equal(sl_secrets_open(s, copy, sealed.len, &plain), 0);
    sl_buf_reset(&plain);
    /* Cut short, not base64, too short to hold a nonce and a MAC, empty. */
    assert_int_equal(sl_secrets_open(s, copy, sealed.len - 4, &plain), SL_ECRYPTO);
    assert_int_equal(sl_secrets_open(s, copy, sealed.len - 1, &plain), SL_EINVAL);
    assert_int_equal(sl_secrets_open(s, "!!!!", 4, &plain), SL_EINVAL);
    assert_int_equal(sl_secrets_open(s, "AAAA", 4, &plain), SL_EINVAL);
    assert_int_equal(sl_secrets_open(s, "", 0, &plain), SL_EINVAL);
    assert_int_equal(plain.len, 0);
    sl_free(copy);
    sl_buf_finish(&sealed);
    sl_buf_finish(&plain);
    sl_secrets_destroy(s);
}

static void seal_and_open_fail_cleanly_without_memory(void **state)
{
    struct sl_secrets *s = key(KEY_A);
    struct sl_buf sealed;
    struct sl_buf plain;
    struct sl_buf small;

    (void)state;
    sl_buf_init(&sealed, 1024);
    sl_buf_init(&plain, 1024);
    sl_mem_fail_after(1);
    assert_int_equal(sl_secrets_seal(s, "v", 1, &sealed), SL_ENOMEM);
    sl_mem_fail_after(0);
    assert_int_equal(sealed.len, 0);
    assert_int_equal(sl_secrets_seal(s, "v", 1, &sealed), 0);
    sl_mem_fail_after(1);
    assert_int_equal(sl_secrets_open(s, sl_buf_cstr(&sealed), sealed.len, &plain), SL_ENOMEM);
    sl_mem_fail_after(0);
    assert_int_equal(plain.len, 0);
    /* A cap that the result would pass. */
    sl_buf_init(&small, 8);
    assert_int_equal(sl_secrets_seal(s, "v", 1, &small), SL_ETOOBIG);
    assert_int_equal(small.len, 0);
    sl_buf_finish(&small);
    sl_buf_finish(&sealed);
    sl_buf_finish(&plain);
    sl_secrets_destroy(s);
}

static void tokens_are_prefixed_base64url_and_hash_with_blake2b(void **state)
{
    /* BLAKE2b-256("abc"), RFC 7693 parameters with a 32-byte digest. */
    static const uint8_t abc[32] = { 0xbd, 0xdd, 0x81, 0x3c, 0x63, 0x42, 0x39, 0x72,
                                     0x31, 0x71, 0xef, 0x3f, 0xee, 0x98, 0x57, 0x9b,
                                     0x94, 0x96, 0x4e, 0x3b, 0xb1, 0xcb, 0x3e, 0x42,
                                     0x72, 0x62, 0xc8, 0xc0, 0x68, 0xd5, 0x23, 0x19 };
    char t1[SL_TOKEN_SIZE];
    char t2[SL_TOKEN_SIZE];
    uint8_t h1[SL_TOKEN_HASH_BYTES];
    uint8_t h1again[SL_TOKEN_HASH_BYTES];
    uint8_t h2[SL_TOKEN_HASH_BYTES];

    (void)state;
    assert_int_equal(sl_token_new(t1), 0);
    assert_int_equal(sl_token_new(t2), 0);
    assert_int_equal(strlen(t1), SL_TOKEN_LEN);
    assert_int_equal(strlen(t1), 46);
    assert_memory_equal(t1, "sl_", 3);
    assert_int_equal(
            strspn(t1 + 3, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), 43);
    assert_true(sl_token_is_wellformed(t1));
    assert_string_not_equal(t1, t2);

    assert_int_equal(sl_token_hash(t1, h1), 0);
    assert_int_equal(sl_token_hash(t1, h1again), 0);
    assert_int_equal(sl_token_hash(t2, h2), 0);
    assert_true(sl_token_hash_equal(h1, h1again));
    assert_false(sl_token_hash_equal(h1, h2));
    assert_int_equal(sl_token_hash("abc", h1), 0);
    assert_memory_equal(h1, abc, sizeof(abc));

    assert_false(sl_token_is_wellformed(""));
    assert_false(sl_token_is_wellformed("sl_"));
    assert_false(sl_token_is_wellformed("sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_true(sl_token_is_wellformed("sl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_false(sl_token_is_wellformed("sl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_false(sl_token_is_wellformed("sl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_false(sl_token_is_wellformed("sl_AAAAAAAAAAAAAAAAAAAAA+AAAAAAAAAAAAAAAAAAAAA"));
    assert_false(sl_token_is_wellformed("sl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
}

static void uuids_are_random_version_4_text(void **state)
{
    char a[SL_UUID_LEN + 1];
    char b[SL_UUID_LEN + 1];

    (void)state;
    for (int round = 0; round < 100; round++) {
        assert_int_equal(sl_uuid_v4(a), 0);
        assert_int_equal(strlen(a), 36);
        for (size_t i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23) {
                assert_int_equal(a[i], '-');
            } else {
                assert_non_null(strchr("0123456789abcdef", a[i]));
            }
        }
        assert_int_equal(a[14], '4');
        assert_non_null(strchr("89ab", a[19]));
    }
    assert_int_equal(sl_uuid_v4(b), 0);
    assert_string_not_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_from_valid_base64_is_accepted),
        cmocka_unit_test(key_of_wrong_length_is_refused_saying_so),
        cmocka_unit_test(key_that_is_not_base64_is_refused_saying_so),
        cmocka_unit_test_setup_teardown(key_loads_from_the_environment_first, setup, teardown),
        cmocka_unit_test_setup_teardown(key_loads_from_the_file_with_or_without_a_newline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(key_file_open_to_group_or_others_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(key_missing_everywhere_is_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(generated_key_file_is_private_loadable_and_never_replaced,
                                        setup, teardown),
        cmocka_unit_test(sealed_values_open_to_the_same_bytes),
        cmocka_unit_test(equal_values_seal_with_different_nonces),
        cmocka_unit_test(a_value_does_not_open_under_another_key),
        cmocka_unit_test(tampered_or_malformed_sealed_values_are_refused),
        cmocka_unit_test(seal_and_open_fail_cleanly_without_memory),
        cmocka_unit_test(tokens_are_prefixed_base64url_and_hash_with_blake2b),
        cmocka_unit_test(uuids_are_random_version_4_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
