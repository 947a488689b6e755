/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/http/test_llhttp.c - proves that the HTTP/1.1 parser linked into sluice is the strict
 * one: llhttp 9.2 or newer with no lenient flag, which refuses the ambiguous framing that lets
 * requests be smuggled past a proxy (Debian 12's llhttp 8.1 accepts obs-fold, for one).
 * Every input is also fed split at every byte boundary: a parser that only fails when a
 * request arrives in one piece would not protect a proxy that reads from a socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <llhttp.h>

struct framing_case {
    const char *name;
    const char *input;
    /* HPE_OK when the input must be accepted in full. */
    llhttp_errno_t want;
};

static const struct framing_case cases[] = {
    { "plain request", "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", HPE_OK },
    { "chunked body",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n",
      HPE_OK },
    { "obs-fold continuation line", "GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n",
      HPE_INVALID_HEADER_TOKEN },
    { "obs-fold with a tab", "GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n\ttwo\r\n\r\n",
      HPE_INVALID_HEADER_TOKEN },
    { "empty header name", "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", HPE_INVALID_HEADER_TOKEN },
    { "space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", HPE_INVALID_HEADER_TOKEN },
    { "bare CR in a header", "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", HPE_LF_EXPECTED },
    { "bare LF after a header", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", HPE_CR_EXPECTED },
    { "bare LF after the request line", "GET / HTTP/1.1\nHost: a\n\n", HPE_INVALID_VERSION },
    { "Content-Length with Transfer-Encoding",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      HPE_INVALID_TRANSFER_ENCODING },
    { "duplicate Content-Length",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
      HPE_UNEXPECTED_CONTENT_LENGTH },
    { "invalid chunk size",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      HPE_INVALID_CHUNK_SIZE },
    { "chunk data without its CRLF",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", HPE_STRICT },
};

/* Feeds `input` in two pieces split at `split` and returns the first error, or HPE_OK. */
static llhttp_errno_t parse_split(const char *input, size_t split)
{
    llhttp_settings_t settings;
    llhttp_t parser;
    size_t n = strlen(input);
    llhttp_errno_t rc;

    llhttp_settings_init(&settings);
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    rc = llhttp_execute(&parser, input, split);
    if (rc != HPE_OK) {
        return rc;
    }
    return llhttp_execute(&parser, input + split, n - split);
}

static void links_llhttp_9_2_or_newer(void **state)
{
    (void)state;
    assert_true(LLHTTP_VERSION_MAJOR > 9
                || (LLHTTP_VERSION_MAJOR == 9 && LLHTTP_VERSION_MINOR >= 2));
}

static void rejects_ambiguous_framing_at_every_split_point(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = strlen(cases[i].input);

        for (size_t split = 0; split <= n; split++) {
            llhttp_errno_t got = parse_split(cases[i].input, split);

            if (got != cases[i].want) {
                fail_msg("%s (split at %zu): got %s, want %s", cases[i].name, split,
                         llhttp_errno_name(got), llhttp_errno_name(cases[i].want));
            }
        }
    }
}

static void rejects_obs_fold_in_responses_too(void **state)
{
    static const char response[] =
            "HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n";
    llhttp_settings_t settings;
    llhttp_t parser;

    (void)state;
    llhttp_settings_init(&settings);
    llhttp_init(&parser, HTTP_RESPONSE, &settings);
    assert_int_equal(llhttp_execute(&parser, response, sizeof(response) - 1),
                     HPE_INVALID_HEADER_TOKEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(links_llhttp_9_2_or_newer),
        cmocka_unit_test(rejects_ambiguous_framing_at_every_split_point),
        cmocka_unit_test(rejects_obs_fold_in_responses_too),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
