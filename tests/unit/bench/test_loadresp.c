/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/bench/test_loadresp.c - sluice-load's response reader (bench/load/resp.h): where each
 * response ends (Content-Length, chunked, close, no body), at every split point of the input,
 * and the malformed responses it refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bench/load/resp.h"

static struct sl_resp r;

/* Feeds `text` in two pieces split at every offset, and byte by byte; each time the response must
 * end exactly at its last byte (`want_end` bytes in), with `status`. */
static void ends_at_every_split(const char *text, size_t want_end, int status, bool no_body)
{
    size_t n = strlen(text);

    for (size_t split = 0; split <= n; split++) {
        size_t used = 0;
        int rc;

        sl_resp_reset(&r, no_body, false);
        rc = sl_resp_feed(&r, text, split, &used);
        if (rc == 1) {
            assert_true(split >= want_end);
            assert_int_equal(used, want_end);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(used, split);
            assert_true(split < want_end);
            rc = sl_resp_feed(&r, text + split, n - split, &used);
            assert_int_equal(rc, 1);
            assert_int_equal(split + used, want_end);
        }
        assert_int_equal(r.status, status);
    }
    sl_resp_reset(&r, no_body, false);
    for (size_t i = 0; i < want_end; i++) {
        size_t used = 0;
        int rc = sl_resp_feed(&r, text + i, 1, &used);

        assert_int_equal(rc, i + 1 == want_end ? 1 : 0);
        assert_int_equal(used, 1);
    }
}

static void content_length_ends_the_body(void **state)
{
    static const char resp[] = "HTTP/1.1 200 OK\r\nServer: nginx\r\ncontent-length:  5 \r\n"
                               "\r\nhello";

    (void)state;
    ends_at_every_split(resp, sizeof(resp) - 1, 200, false);
    assert_false(r.close);
}

static void chunked_body_with_extension_and_trailer(void **state)
{
    static const char resp[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                               "0\r\nX-Trailer: 1\r\n\r\n";

    (void)state;
    ends_at_every_split(resp, sizeof(resp) - 1, 200, false);
}

static void bodiless_responses_end_with_their_head(void **state)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
    static const char r204[] = "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n";
    static const char r304[] = "HTTP/1.1 304 Not Modified\r\n\r\n";

    (void)state;
    ends_at_every_split(head, sizeof(head) - 1, 200, true);
    ends_at_every_split(r204, sizeof(r204) - 1, 204, false);
    ends_at_every_split(r304, sizeof(r304) - 1, 304, false);
}

static void interim_response_is_skipped(void **state)
{
    static const char resp[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                               "Content-Length: 2\r\n\r\nok";

    (void)state;
    ends_at_every_split(resp, sizeof(resp) - 1, 201, false);
}

static void connect_answer_ends_with_its_head(void **state)
{
    static const char resp[] = "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01";
    size_t used = 0;

    (void)state;
    sl_resp_reset(&r, true, true);
    assert_int_equal(sl_resp_feed(&r, resp, sizeof(resp) - 1, &used), 1);
    assert_int_equal(used, sizeof(resp) - 4);
    assert_int_equal(r.status, 200);
}

static void close_delimited_body_ends_at_close(void **state)
{
    static const char resp[] = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nsome body";
    static const char cut[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
    size_t used = 0;

    (void)state;
    sl_resp_reset(&r, false, false);
    assert_int_equal(sl_resp_feed(&r, resp, sizeof(resp) - 1, &used), 0);
    assert_true(sl_resp_ends_at_close(&r));
    assert_true(r.close);
    sl_resp_reset(&r, false, false);
    assert_int_equal(sl_resp_feed(&r, cut, sizeof(cut) - 1, &used), 0);
    assert_false(sl_resp_ends_at_close(&r));
}

static void connection_close_and_pipelined_bytes(void **state)
{
    static const char two[] = "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n"
                              "Content-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\n";
    size_t used = 0;

    (void)state;
    sl_resp_reset(&r, false, false);
    assert_int_equal(sl_resp_feed(&r, two, sizeof(two) - 1, &used), 1);
    assert_true(r.close);
    /* The caller sees where the response ended: what follows was never asked for. */
    assert_int_equal(used, strlen(two) - strlen("HTTP/1.1 200 OK\r\n"));
}

static int feed_all(const char *text, bool no_body)
{
    size_t used = 0;

    sl_resp_reset(&r, no_body, false);
    return sl_resp_feed(&r, text, strlen(text), &used);
}

static void refuses_malformed_responses(void **state)
{
    static const char *const bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 099 Nope\r\n\r\n",
        "FOO 200 OK\r\n\r\n",
        "\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (feed_all(bad[i], false) != -1) {
            fail_msg("accepted: %s", bad[i]);
        }
    }
}

static void refuses_oversized_heads_and_lines(void **state)
{
    static char big[SL_RESP_HEAD_MAX + 512];
    size_t n = 0;

    (void)state;
    /* A Content-Length line longer than the line buffer cannot be read: refused. */
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nContent-Length: ");
    memset(big + n, '0', SL_RESP_LINE_MAX);
    n += SL_RESP_LINE_MAX;
    memcpy(big + n, "5\r\n\r\n", 6);
    assert_int_equal(feed_all(big, false), -1);
    /* A long header we do not read is fine. */
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nX-Long: ");
    memset(big + n, 'x', 4 * SL_RESP_LINE_MAX);
    n += 4 * SL_RESP_LINE_MAX;
    memcpy(big + n, "\r\nContent-Length: 0\r\n\r\n", 24);
    assert_int_equal(feed_all(big, false), 1);
    /* A head over SL_RESP_HEAD_MAX is refused, never buffered. */
    n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
    while (n + 12 < sizeof(big) - 1) {
        memcpy(big + n, "X-Pad: 123\r\n", 12);
        n += 12;
    }
    big[n] = '\0';
    assert_int_equal(feed_all(big, false), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(content_length_ends_the_body),
        cmocka_unit_test(chunked_body_with_extension_and_trailer),
        cmocka_unit_test(bodiless_responses_end_with_their_head),
        cmocka_unit_test(interim_response_is_skipped),
        cmocka_unit_test(connect_answer_ends_with_its_head),
        cmocka_unit_test(close_delimited_body_ends_at_close),
        cmocka_unit_test(connection_close_and_pipelined_bytes),
        cmocka_unit_test(refuses_malformed_responses),
        cmocka_unit_test(refuses_oversized_heads_and_lines),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
