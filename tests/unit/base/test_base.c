/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/base/test_base.c - the capped buffer, the arena, the allocation hook, error names and
 * messages, the error list of validators, the JSON nesting-depth scan, the member lists of
 * messages and hexadecimal digits.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/errlist.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/hex.h"
#include "base/jdepth.h"
#include "base/jpath.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/text.h"
#include "base/time.h"
#include "tests/support/tmpdir.h"

/* Storage handed in and taken out again: the buffer uses it as its own, grows it by realloc
 * when it must, and gives back whatever it holds then (a pool recycles blocks of one size). */
static void buf_adopts_and_gives_back_storage(void **state)
{
    struct sl_buf b;
    uint8_t *block = sl_malloc(64);
    uint8_t *p;
    size_t cap = 1;

    (void)state;
    assert_non_null(block);
    sl_buf_init(&b, 4096);
    sl_buf_adopt(&b, block, 64);
    assert_true(sl_buf_is_valid(&b));
    assert_int_equal(sl_buf_append_str(&b, "abc"), 0);
    assert_ptr_equal(b.p, block);
    p = sl_buf_take(&b, &cap);
    assert_ptr_equal(p, block);
    assert_int_equal(cap, 64);
    assert_memory_equal(p, "abc", 4);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    assert_true(sl_buf_is_valid(&b));
    /* Adopted again, then grown past it: what comes back is the grown storage. */
    sl_buf_adopt(&b, p, 64);
    for (int i = 0; i < 30; i++) {
        assert_int_equal(sl_buf_append_str(&b, "0123456789"), 0);
    }
    assert_int_equal(b.len, 300);
    p = sl_buf_take(&b, &cap);
    assert_true(cap > 300);
    assert_memory_equal(p, "0123456789", 10);
    sl_free(p);
    /* A buffer that holds nothing gives back nothing. */
    assert_null(sl_buf_take(&b, &cap));
    assert_int_equal(cap, 0);
    assert_int_equal(b._max, 4096);
}

/* Room reserved in a buffer that never grew leaves it a valid (empty) string, and a builder
 * that failed half-way cuts it back with the terminator in place. */
static void buf_reserves_and_truncates_as_a_string(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, 4096);
    assert_non_null(sl_buf_reserve(&b, 100));
    assert_true(sl_buf_is_valid(&b));
    assert_string_equal(sl_buf_cstr(&b), "");
    assert_int_equal(sl_buf_append_str(&b, "head,tail"), 0);
    sl_buf_truncate(&b, 4);
    assert_true(sl_buf_is_valid(&b));
    assert_string_equal(sl_buf_cstr(&b), "head");
    assert_int_equal(sl_buf_append_str(&b, "!"), 0);
    assert_string_equal(sl_buf_cstr(&b), "head!");
    sl_buf_truncate(&b, 0);
    assert_true(sl_buf_is_valid(&b));
    assert_int_equal(b.len, 0);
    sl_buf_finish(&b);
}

static void buf_appends_decimal_numbers(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, 1024);
    assert_int_equal(sl_buf_append_u64(&b, 0), 0);
    assert_int_equal(sl_buf_append(&b, " ", 1), 0);
    assert_int_equal(sl_buf_append_u64(&b, 9), 0);
    assert_int_equal(sl_buf_append(&b, " ", 1), 0);
    assert_int_equal(sl_buf_append_u64(&b, 10), 0);
    assert_int_equal(sl_buf_append(&b, " ", 1), 0);
    assert_int_equal(sl_buf_append_u64(&b, 443), 0);
    assert_int_equal(sl_buf_append(&b, " ", 1), 0);
    assert_int_equal(sl_buf_append_u64(&b, UINT64_MAX), 0);
    assert_string_equal(sl_buf_cstr(&b), "0 9 10 443 18446744073709551615");
    sl_buf_finish(&b);
    /* Past the cap: refused, nothing written. */
    sl_buf_init(&b, 3);
    assert_int_equal(sl_buf_append_u64(&b, 1234), SL_ETOOBIG);
    assert_int_equal(b.len, 0);
    sl_buf_finish(&b);
}

static void buf_appends_and_stays_terminated(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, 1024);
    assert_string_equal(sl_buf_cstr(&b), "");
    assert_int_equal(sl_buf_append_str(&b, "hello"), 0);
    assert_int_equal(sl_buf_printf(&b, " %s %d", "world", 42), 0);
    assert_string_equal(sl_buf_cstr(&b), "hello world 42");
    assert_int_equal(b.len, 14);
    assert_true(sl_buf_is_valid(&b));
    sl_buf_consume(&b, 6);
    assert_string_equal(sl_buf_cstr(&b), "world 42");
    sl_buf_consume(&b, 100);
    assert_int_equal(b.len, 0);
    assert_true(sl_buf_is_valid(&b));
    sl_buf_finish(&b);
    assert_null(b.p);
}

static void buf_refuses_to_grow_past_its_cap(void **state)
{
    struct sl_buf b;
    char big[100];

    (void)state;
    memset(big, 'x', sizeof(big));
    sl_buf_init(&b, 100);
    assert_int_equal(sl_buf_append(&b, big, 60), 0);
    assert_int_equal(sl_buf_append(&b, big, 41), SL_ETOOBIG);
    assert_int_equal(b.len, 60);
    assert_int_equal(sl_buf_append(&b, big, 40), 0);
    assert_int_equal(b.len, 100);
    assert_int_equal(sl_buf_append(&b, big, 1), SL_ETOOBIG);
    assert_int_equal(sl_buf_printf(&b, "%s", "y"), SL_ETOOBIG);
    assert_int_equal(sl_buf_append(&b, big, SIZE_MAX), SL_ETOOBIG);
    assert_true(sl_buf_is_valid(&b));
    sl_buf_finish(&b);
}

static void buf_survives_allocation_failure_unchanged(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, 1 << 20);
    assert_int_equal(sl_buf_append_str(&b, "keep"), 0);
    sl_mem_fail_after(1);
    assert_int_equal(sl_buf_append(&b, NULL, 0), 0);
    char chunk[4096] = { 0 };
    assert_int_equal(sl_buf_append(&b, chunk, sizeof(chunk)), SL_ENOMEM);
    sl_mem_fail_after(0);
    assert_int_equal(sl_mem_failures(), 0);
    assert_string_equal(sl_buf_cstr(&b), "keep");
    sl_buf_finish(&b);
}

static void arena_aligns_and_respects_its_cap(void **state)
{
    struct sl_arena a;
    char *s;

    (void)state;
    sl_arena_init(&a, 256, 4096);
    for (int i = 0; i < 10; i++) {
        void *p = sl_arena_alloc(&a, (size_t)i * 3 + 1);

        assert_non_null(p);
        assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
    }
    s = sl_arena_strndup(&a, "abcdef", 3);
    assert_string_equal(s, "abc");
    assert_null(sl_arena_alloc(&a, 8192));
    assert_true(sl_arena_held_bytes(&a) <= 4096);
    /* A large allocation gets its own chunk when it fits under the cap. */
    assert_non_null(sl_arena_alloc(&a, 1000));
    assert_true(sl_arena_held_bytes(&a) <= 4096);
    sl_arena_reset(&a);
    assert_true(sl_arena_held_bytes(&a) > 0);
    assert_non_null(sl_arena_alloc(&a, 16));
    sl_arena_finish(&a);
    assert_int_equal(sl_arena_held_bytes(&a), 0);
    sl_arena_finish(&a);
}

static void arena_fails_cleanly_when_memory_is_short(void **state)
{
    struct sl_arena a;

    (void)state;
    sl_arena_init(&a, 128, 1 << 20);
    sl_mem_fail_after(1);
    assert_null(sl_arena_alloc(&a, 10));
    assert_int_equal(sl_mem_failures(), 1);
    sl_mem_fail_after(0);
    assert_non_null(sl_arena_alloc(&a, 10));
    sl_arena_finish(&a);
}

static void mem_hook_fails_the_nth_allocation(void **state)
{
    void *p1;
    void *p2;
    void *p3;

    (void)state;
    sl_mem_fail_after(3);
    p1 = sl_malloc(8);
    p2 = sl_calloc(2, 8);
    p3 = sl_strdup("x");
    assert_non_null(p1);
    assert_non_null(p2);
    assert_null(p3);
    assert_int_equal(sl_mem_failures(), 1);
    sl_mem_fail_after(0);
    sl_free(p1);
    sl_free(p2);
    sl_free(NULL);
}

static void mem_hook_countdown_pauses_and_goes_on(void **state)
{
    void *p;
    long left;

    (void)state;
    assert_int_equal(sl_mem_fail_suspend(), 0);
    sl_mem_fail_after(2);
    p = sl_malloc(8);
    assert_non_null(p);
    sl_free(p);
    left = sl_mem_fail_suspend();
    assert_int_equal(left, 1);
    /* Suspended: allocations succeed and the countdown keeps what it had. */
    p = sl_malloc(8);
    assert_non_null(p);
    sl_free(p);
    sl_mem_fail_resume(left);
    assert_null(sl_malloc(8));
    assert_null(sl_malloc(8));
    assert_int_equal(sl_mem_failures(), 2);
    /* Once tripped, it stays tripped across a pause. */
    sl_mem_fail_resume(sl_mem_fail_suspend());
    assert_null(sl_malloc(8));
    assert_int_equal(sl_mem_failures(), 3);
    sl_mem_fail_resume(0);
    p = sl_malloc(8);
    assert_non_null(p);
    sl_free(p);
    sl_mem_fail_after(0);
}

static void strerror_names_ours_and_libuv_codes(void **state)
{
    (void)state;
    assert_string_equal(sl_strerror(0), "success");
    assert_string_equal(sl_strerror(SL_ETOOBIG), "limit exceeded");
    assert_string_equal(sl_strerror(UV_ECONNRESET), uv_strerror(UV_ECONNRESET));
    assert_string_equal(sl_strerror(-4999), "unknown error");
}

static void log_levels_parse_by_name(void **state)
{
    enum sl_log_level level;

    (void)state;
    assert_int_equal(sl_log_level_parse("debug", &level), 0);
    assert_int_equal(level, SL_LOG_DEBUG);
    assert_int_equal(sl_log_level_parse("verbose", &level), SL_EINVAL);
    sl_log_set_level(SL_LOG_WARN);
    assert_false(sl_log_enabled(SL_LOG_INFO));
    assert_true(sl_log_enabled(SL_LOG_ERROR));
    sl_log_set_level(SL_LOG_INFO);
}

static void file_read_takes_regular_files_within_the_cap(void **state)
{
    char dir[64];
    char path[64];
    char err[256];
    struct sl_buf b;

    (void)state;
    assert_int_equal(sl_test_tmpdir(dir, sizeof(dir), "sluice-file"), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "f"), 0);
    assert_int_equal(sl_test_write_text(path, "0123456789"), 0);
    sl_buf_init(&b, 64);
    assert_int_equal(sl_file_read(path, &b, err, sizeof(err)), 0);
    assert_int_equal(b.len, 10);
    assert_string_equal(sl_buf_cstr(&b), "0123456789");
    /* Appends, and the cap holds. */
    sl_buf_finish(&b);
    sl_buf_init(&b, 15);
    assert_int_equal(sl_buf_append(&b, "abc", 3), 0);
    assert_int_equal(sl_file_read(path, &b, err, sizeof(err)), 0);
    assert_string_equal(sl_buf_cstr(&b), "abc0123456789");
    assert_int_equal(sl_file_read(path, &b, err, sizeof(err)), SL_ETOOBIG);
    assert_non_null(strstr(err, path));
    sl_buf_finish(&b);
    sl_buf_init(&b, 64);
    assert_int_equal(sl_file_read(dir, &b, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "missing"), 0);
    assert_int_equal(sl_file_read(path, &b, err, sizeof(err)), SL_ENOTFOUND);
    assert_non_null(strstr(err, path));
    assert_int_equal(sl_file_read(path, &b, NULL, 0), SL_ENOTFOUND);
    sl_buf_finish(&b);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "f"), 0);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void file_ensure_dir_makes_a_private_directory_once(void **state)
{
    char dir[64];
    char path[64];
    char err[256];
    struct stat st;

    (void)state;
    assert_int_equal(sl_test_tmpdir(dir, sizeof(dir), "sluice-dir"), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "d"), 0);
    assert_int_equal(sl_file_ensure_dir(path, "the data directory", err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    /* An existing one is kept as it is. */
    assert_int_equal(chmod(path, 0750), 0);
    assert_int_equal(sl_file_ensure_dir(path, "the data directory", err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0750);
    assert_int_equal(rmdir(path), 0);
    /* A file in its place, or no parent: refused, with the name. */
    assert_int_equal(sl_test_write_text(path, ""), 0);
    assert_int_equal(sl_file_ensure_dir(path, "the data directory", err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, "the data directory"));
    assert_non_null(strstr(err, "is not a directory"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "no/d"), 0);
    assert_int_equal(sl_file_ensure_dir(path, "the data directory", err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, "cannot create the data directory"));
    assert_non_null(strstr(err, path));
    assert_int_equal(sl_file_ensure_dir(path, "x", NULL, 0), SL_EIO);
    assert_int_equal(rmdir(dir), 0);
}

static void siphash_matches_the_reference_vectors(void **state)
{
    uint8_t key[SL_HASH_KEY_BYTES];
    uint8_t msg[15];
    uint8_t k1[SL_HASH_KEY_BYTES];
    uint8_t k2[SL_HASH_KEY_BYTES];

    (void)state;
    for (size_t i = 0; i < sizeof(key); i++) {
        key[i] = (uint8_t)i;
    }
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = (uint8_t)i;
    }
    /* The vectors of the SipHash paper's reference implementation. */
    assert_true(sl_siphash24(key, msg, sizeof(msg)) == 0xa129ca6149be45e5ULL);
    assert_true(sl_siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ULL);
    assert_int_equal(sl_hash_key_random(k1), 0);
    assert_int_equal(sl_hash_key_random(k2), 0);
    assert_memory_not_equal(k1, k2, sizeof(k1));
}

static void errf_fills_the_caller_buffer_cut_to_fit(void **state)
{
    char err[8];

    (void)state;
    sl_errf(err, sizeof(err), "%s %d", "abc", 42);
    assert_string_equal(err, "abc 42");
    /* Cut to fit, always terminated. */
    sl_errf(err, sizeof(err), "cannot open %s", "/var/lib/sluice");
    assert_string_equal(err, "cannot ");
    /* No buffer or no room: nothing is written. */
    memcpy(err, "kept", 5);
    sl_errf(err, 0, "%s", "x");
    assert_string_equal(err, "kept");
    sl_errf(NULL, 64, "%s", "x");
}

/* Appends through the va_list entry point as a validator does. */
static int errlist_add(struct sl_errlist_item **items, size_t *count, bool *truncated, size_t max,
                       const char *path, const char *fmt, ...) SL_PRINTF(6, 7);

static int errlist_add(struct sl_errlist_item **items, size_t *count, bool *truncated, size_t max,
                       const char *path, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = sl_errlist_vadd(items, count, truncated, max, path, fmt, ap);
    va_end(ap);
    return rc;
}

static void errlist_keeps_errors_in_order_up_to_its_cap(void **state)
{
    struct sl_errlist_item *items = NULL;
    char long_path[SL_ERRLIST_PATH_MAX + 100];
    size_t count = 0;
    bool truncated = false;

    (void)state;
    assert_int_equal(errlist_add(&items, &count, &truncated, 3, "$.a", "bad %s", "a"), 0);
    assert_int_equal(errlist_add(&items, &count, &truncated, 3, "env[1].name", "%d", 7), 0);
    memset(long_path, 'p', sizeof(long_path) - 1);
    long_path[sizeof(long_path) - 1] = '\0';
    assert_int_equal(errlist_add(&items, &count, &truncated, 3, long_path, "long"), 0);
    assert_int_equal(count, 3);
    assert_false(truncated);
    assert_string_equal(items[0].path, "$.a");
    assert_string_equal(items[0].message, "bad a");
    assert_string_equal(items[1].path, "env[1].name");
    assert_string_equal(items[1].message, "7");
    /* A long path is cut, never overrun. */
    assert_int_equal(strlen(items[2].path), SL_ERRLIST_PATH_MAX - 1);
    /* Past the cap: nothing more is kept, and the list says so. */
    assert_int_equal(errlist_add(&items, &count, &truncated, 3, "$.d", "d"), 0);
    assert_int_equal(count, 3);
    assert_true(truncated);
    sl_free(items);
    /* Out of memory: the list is left as it was. */
    items = NULL;
    count = 0;
    truncated = false;
    assert_int_equal(errlist_add(&items, &count, &truncated, 3, "$.a", "a"), 0);
    sl_mem_fail_after(1);
    assert_int_equal(errlist_add(&items, &count, &truncated, 3, "$.b", "b"), SL_ENOMEM);
    sl_mem_fail_after(0);
    assert_int_equal(count, 1);
    assert_string_equal(items[0].path, "$.a");
    assert_false(truncated);
    sl_free(items);
}

static void jdepth_counts_brackets_outside_strings(void **state)
{
    static const char two[] = "{\"a\":[1,{}]}";
    static const char quoted[] = "{\"[[[[\":\"{{{{\\\"[[[\"}";

    (void)state;
    assert_false(sl_jdepth_is_over(two, strlen(two), 3));
    assert_true(sl_jdepth_is_over(two, strlen(two), 2));
    assert_false(sl_jdepth_is_over("[][][][]", 8, 1));
    assert_true(sl_jdepth_is_over("[[", 2, 1));
    /* Brackets inside strings, escaped quotes included, do not count. */
    assert_false(sl_jdepth_is_over(quoted, strlen(quoted), 1));
    /* Stray closing brackets do not lower the count below zero. */
    assert_true(sl_jdepth_is_over("]]}}[[", 6, 1));
    assert_false(sl_jdepth_is_over("", 0, 0));
}

static void hex_values_are_the_digits_of_either_case(void **state)
{
    static const char digits[] = "0123456789abcdef";

    (void)state;
    for (int i = 0; i < 16; i++) {
        assert_int_equal(sl_hex_value(digits[i]), i);
        assert_int_equal(sl_hex_value(toupper((unsigned char)digits[i])), i);
    }
    assert_int_equal(sl_hex_value('g'), -1);
    assert_int_equal(sl_hex_value('G'), -1);
    assert_int_equal(sl_hex_value('/'), -1);
    assert_int_equal(sl_hex_value(':'), -1);
    assert_int_equal(sl_hex_value('\0'), -1);
    assert_int_equal(sl_hex_value(-1), -1);
    assert_int_equal(sl_hex_value('a' + 256), -1);
    assert_int_equal(sl_hex_value((char)0xe1), -1);
    /* Fixed-width decimal fields. */
    assert_int_equal(sl_dec_digits("2026", 4), 2026);
    assert_int_equal(sl_dec_digits("0930", 2), 9);
    assert_int_equal(sl_dec_digits("999999999", 9), 999999999);
    assert_int_equal(sl_dec_digits("", 0), 0);
    assert_int_equal(sl_dec_digits("1a", 2), -1);
    assert_int_equal(sl_dec_digits("-1", 2), -1);
    assert_int_equal(sl_dec_digits("+1", 2), -1);
    assert_int_equal(sl_dec_digits("1 ", 2), -1);
}

static void text_finds_controls_and_counts_characters(void **state)
{
    (void)state;
    assert_false(sl_text_has_control("plain name", 10, ""));
    assert_false(sl_text_has_control("caf\xc3\xa9 \xe2\x82\xac", 9, ""));
    assert_true(sl_text_has_control("a\nb", 3, ""));
    assert_false(sl_text_has_control("a\nb", 3, "\t\n\r"));
    assert_true(sl_text_has_control("a\x1b[2J", 5, "\t\n\r"));
    assert_true(sl_text_has_control("a\x7f", 2, ""));
    assert_true(sl_text_has_control("a\0b", 3, "\t"));
    /* U+0085 (NEL) and U+009B (CSI) are C1 controls; U+00A0 and U+00C2 are not. */
    assert_true(sl_text_has_control("x\xc2\x85", 3, ""));
    assert_true(sl_text_has_control("\xc2\x9b", 2, ""));
    assert_false(sl_text_has_control("\xc2\xa0\xc3\x82", 4, ""));
    /* Invisible and reordering characters: U+200B, U+202E, U+2066, U+FEFF, U+00AD, U+061C,
     * U+180E, U+FFFB; not U+2010 (a hyphen), U+2065 (unassigned), U+00A0, U+202F, U+FFFC,
     * U+2070 (superscript zero). */
    static const char *const hidden[] = { "a\xe2\x80\x8b",
                                          "\xe2\x80\xae"
                                          "abc",
                                          "x\xe2\x81\xa6y",
                                          "\xef\xbb\xbf"
                                          "n",
                                          "so\xc2\xad"
                                          "ft",
                                          "\xd8\x9c",
                                          "\xe1\xa0\x8e",
                                          "\xef\xbf\xbb" };
    static const char *const shown[] = { "a\342\200\220b", "\xe2\x81\xa5", "\xc2\xa0",
                                         "\xe2\x80\xaf",   "\xef\xbf\xbc", "plain",
                                         "caf\xc3\xa9",    "x\xe2\x81\xb0" };
    for (size_t i = 0; i < SL_ARRAY_LEN(hidden); i++) {
        assert_true(sl_text_has_invisible(hidden[i], strlen(hidden[i])));
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(shown); i++) {
        assert_false(sl_text_has_invisible(shown[i], strlen(shown[i])));
    }
    assert_int_equal(sl_text_chars("", 0), 0);
    assert_int_equal(sl_text_chars("abc", 3), 3);
    assert_int_equal(sl_text_chars("caf\xc3\xa9", 5), 4);
    assert_int_equal(sl_text_chars("\xe2\x82\xac\xf0\x9f\x98\x80", 7), 2);
}

static void jpath_join_lists_names_cut_to_fit(void **state)
{
    static const char *const names[] = { "host", "methods", "credential" };
    char out[32];
    char small[12];

    (void)state;
    sl_jpath_join(out, sizeof(out), names, 3);
    assert_string_equal(out, "host, methods, credential");
    sl_jpath_join(out, sizeof(out), names, 0);
    assert_string_equal(out, "");
    /* Cut, never overrun, always terminated. */
    sl_jpath_join(small, sizeof(small), names, 3);
    assert_string_equal(small, "host, metho");
}

/* RFC 3339 date-times: instants in milliseconds, offsets, fractions, the calendar's edges. */
static void rfc3339_reads_instants_and_refuses_the_rest(void **state)
{
    struct sl_rfc3339 t;
    static const char *const bad[] = {
        "",
        "2026-11-30",
        "2026-11-30T02:07:42",
        "2026-11-30T02:07:42.Z",
        "2026-11-30T02:07:42Zx",
        "2025-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-30T24:00:00Z",
        "2026-11-30T23:60:00Z",
        "2026-11-30T02:07:42+24:00",
        "2026-11-30T02:07:42+0100",
        "2026-11-30 02:07:42Z",
        "2026-11-30T02:07:42.00000000000000000000000000000000000000000000000001Z",
    };

    (void)state;
    assert_int_equal(sl_time_parse_rfc3339("1970-01-01T00:00:00Z", 20, &t), 0);
    assert_int_equal(t.ms, 0);
    assert_true(t.utc);
    assert_int_equal(t.frac_digits, 0);
    assert_int_equal(sl_time_parse_rfc3339("2026-11-30T02:07:42.286Z", 24, &t), 0);
    assert_int_equal(t.ms, 1796004462286LL);
    assert_false(t.finer);
    assert_int_equal(sl_time_parse_rfc3339("2026-11-30t02:07:42.2860001z", 28, &t), 0);
    assert_int_equal(t.ms, 1796004462286LL);
    assert_true(t.finer);
    assert_int_equal(t.frac_digits, 7);
    /* The same instant written with an offset. */
    assert_int_equal(sl_time_parse_rfc3339("2026-11-30T03:37:42.286+01:30", 29, &t), 0);
    assert_int_equal(t.ms, 1796004462286LL);
    assert_false(t.utc);
    assert_int_equal(sl_time_parse_rfc3339("1969-12-31T23:59:59.5Z", 22, &t), 0);
    assert_int_equal(t.ms, -500);
    assert_int_equal(sl_time_parse_rfc3339("2024-02-29T00:00:00Z", 20, &t), 0);
    assert_int_equal(sl_time_days_from_civil(2024, 2, 29), 19782);
    assert_int_equal(sl_time_days_from_civil(1600, 3, 1), -135080);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t.ms = 7;
        if (sl_time_parse_rfc3339(bad[i], strlen(bad[i]), &t) != SL_EINVAL || t.ms != 7) {
            fail_msg("read \"%s\"", bad[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buf_appends_and_stays_terminated),
        cmocka_unit_test(buf_adopts_and_gives_back_storage),
        cmocka_unit_test(buf_appends_decimal_numbers),
        cmocka_unit_test(buf_reserves_and_truncates_as_a_string),
        cmocka_unit_test(buf_refuses_to_grow_past_its_cap),
        cmocka_unit_test(buf_survives_allocation_failure_unchanged),
        cmocka_unit_test(arena_aligns_and_respects_its_cap),
        cmocka_unit_test(arena_fails_cleanly_when_memory_is_short),
        cmocka_unit_test(mem_hook_fails_the_nth_allocation),
        cmocka_unit_test(mem_hook_countdown_pauses_and_goes_on),
        cmocka_unit_test(strerror_names_ours_and_libuv_codes),
        cmocka_unit_test(errf_fills_the_caller_buffer_cut_to_fit),
        cmocka_unit_test(errlist_keeps_errors_in_order_up_to_its_cap),
        cmocka_unit_test(jdepth_counts_brackets_outside_strings),
        cmocka_unit_test(jpath_join_lists_names_cut_to_fit),
        cmocka_unit_test(text_finds_controls_and_counts_characters),
        cmocka_unit_test(hex_values_are_the_digits_of_either_case),
        cmocka_unit_test(log_levels_parse_by_name),
        cmocka_unit_test(siphash_matches_the_reference_vectors),
        cmocka_unit_test(file_read_takes_regular_files_within_the_cap),
        cmocka_unit_test(file_ensure_dir_makes_a_private_directory_once),
        cmocka_unit_test(rfc3339_reads_instants_and_refuses_the_rest),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
