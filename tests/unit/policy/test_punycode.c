/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/policy/test_punycode.c - policy/punycode: RFC 3492's own samples both ways, what
 * the decoder refuses (bad digits, truncated numbers, overflows, a too small output), and the
 * A-label checks of IDNA2008 a rule's `xn--` label must pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "policy/punycode.h"

/* RFC 3492 §7.1 samples (A, B, C, D, L) and a few well known names, with their code points. */
static const struct {
    const char *puny;
    uint32_t u[32];
    size_t n;
} samples[] = {
    /* (A) Arabic (Egyptian) */
    { "egbpdaj6bu4bxfgehfvwxn",
      { 0x0644, 0x064A, 0x0647, 0x0645, 0x0627, 0x0628, 0x062A, 0x0643, 0x0644, 0x0645, 0x0648,
        0x0634, 0x0639, 0x0631, 0x0628, 0x064A, 0x061F },
      17 },
    /* (B) Chinese (simplified) */
    { "ihqwcrb4cv8a8dqg056pqjye",
      { 0x4ED6, 0x4EEC, 0x4E3A, 0x4EC0, 0x4E48, 0x4E0D, 0x8BF4, 0x4E2D, 0x6587 },
      9 },
    /* (D) Czech, basic code points in mixed case */
    { "Proprostnemluvesky-uyb24dma41a",
      { 'P', 'r', 'o', 0x010D, 'p', 'r',    'o',    's', 't', 0x011B, 'n',
        'e', 'm', 'l', 'u',    'v', 0x00ED, 0x010D, 'e', 's', 'k',    'y' },
      22 },
    { "bcher-kva", { 'b', 0xFC, 'c', 'h', 'e', 'r' }, 6 },
    { "mnchen-3ya", { 'm', 0xFC, 'n', 'c', 'h', 'e', 'n' }, 7 },
    { "fiqs8s", { 0x4E2D, 0x56FD }, 2 },
    { "p1ai", { 0x0440, 0x0444 }, 2 },
    { "tda", { 0xFC }, 1 },
    { "a-dha", { 0xFC, 'a' }, 2 },
    { "ls8h", { 0x1F4A9 }, 1 },
};

static void decodes_and_encodes_the_samples(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        uint32_t u[64];
        char p[64];
        size_t n = 0;
        size_t pn = 0;

        print_message("sample %s\n", samples[i].puny);
        assert_int_equal(sl_punycode_decode(samples[i].puny, strlen(samples[i].puny), u, 64, &n),
                         0);
        assert_int_equal(n, samples[i].n);
        assert_memory_equal(u, samples[i].u, n * sizeof(*u));
        assert_int_equal(sl_punycode_encode(samples[i].u, samples[i].n, p, sizeof(p), &pn), 0);
        assert_int_equal(pn, strlen(samples[i].puny));
        assert_memory_equal(p, samples[i].puny, pn);
    }
}

static void refuses_what_is_no_punycode(void **state)
{
    static const char *const bad[] = {
        "zz",              /* a number that never ends */
        "x",               /* the same, one digit */
        "-tda",            /* a leading delimiter with no basic code point before it */
        "99999999999",     /* an overflow */
        "abc-d!e",         /* a byte that is no digit */
        "ab\xc3\xbc-tda",  /* a non-basic byte among the basic ones */
        "zzzzzzzzzzzzzzd", /* an overflow too */
    };
    uint32_t u[64];
    size_t n = 7;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("bad %s\n", bad[i]);
        assert_int_equal(sl_punycode_decode(bad[i], strlen(bad[i]), u, 64, &n), SL_EINVAL);
        assert_int_equal(n, 0);
    }
    /* Room for fewer code points than the label holds. */
    assert_int_equal(sl_punycode_decode("bcher-kva", 9, u, 5, &n), SL_ETOOBIG);
    assert_int_equal(sl_punycode_decode("bcher-kva", 9, u, 6, &n), 0);
    {
        const uint32_t wide[] = { 0x110000 };
        char p[8];

        assert_int_equal(sl_punycode_encode(wide, 1, p, sizeof(p), &n), SL_EINVAL);
        assert_int_equal(sl_punycode_encode(samples[0].u, samples[0].n, p, sizeof(p), &n),
                         SL_ETOOBIG);
    }
}

static void checks_a_labels_as_idna2008_does(void **state)
{
    static const struct {
        const char *label;
        bool ok;
    } rows[] = {
        { "xn--bcher-kva", true }, { "xn--fiqs8s", true }, { "xn--ls8h", true },
        { "xn--a-dha", true },     { "xn--zz", false }, /* not Punycode */
        { "xn--", false },                              /* nothing after the prefix */
        { "xn--abc-", false },                          /* ASCII only */
        { "xn--a", false },                             /* U+0080, a C1 control */
        { "xn--ab-qa", false },                         /* U+0085, a C1 control */
        { "xn--1n7c", false },                          /* U+FFFF, a noncharacter */
        { "xn--x-qc4g", false },                        /* U+D800, a surrogate */
        { "xn----eha", false },                         /* "-ü": starts with '-' */
        { "xn----dha", false },                         /* "ü-": ends with '-' */
        { "xn--ab---3ra", false }, /* "ab--ü": '--' in its third and fourth places */
        { "xn--tda-", false },     /* basic code points only: "tda" */
        { "bcher-kva", false },    /* no prefix */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *why = NULL;
        bool ok = sl_punycode_alabel_ok(rows[i].label, strlen(rows[i].label), &why);

        print_message("label %s\n", rows[i].label);
        assert_int_equal(ok, rows[i].ok);
        if (!ok) {
            assert_non_null(why);
            assert_non_null(strstr(why, "xn--"));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decodes_and_encodes_the_samples),
        cmocka_unit_test(refuses_what_is_no_punycode),
        cmocka_unit_test(checks_a_labels_as_idna2008_does),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
