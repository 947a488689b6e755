/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_gitpush.c - the reader of a push's ref-update commands and the
 * receive-pack result that refuses them (proxy/gitpush.h): the commands of real pushes fed at
 * every split point, every malformed shape, the 64 KiB bound at and over it, and the refusal's
 * exact bytes with and without side-band.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/mem.h"
#include "proxy/gitpush.h"

#define OLD   "1111111111111111111111111111111111111111"
#define NEW   "2222222222222222222222222222222222222222"
#define ZERO  "0000000000000000000000000000000000000000"
#define OLD64 OLD "111111111111111111111111"
#define NEW64 NEW "222222222222222222222222"

/* Appends `data` (`n` bytes) as one pkt-line. */
static void pkt(struct sl_buf *b, const char *data, size_t n)
{
    assert_int_equal(sl_buf_printf(b, "%04zx", n + 4), 0);
    assert_int_equal(sl_buf_append(b, data, n), 0);
}

static void pkts(struct sl_buf *b, const char *data)
{
    pkt(b, data, strlen(data));
}

/* A pkt-line of a string literal, NUL bytes included. */
#define PKT_LIT(b, s) pkt((b), (s), sizeof(s) - 1)

/* Appends the command `OLD NEW REF` whose ref is `ref_len` bytes ("refs/heads/" and 'r's). */
static void command(struct sl_buf *b, size_t ref_len)
{
    char data[SL_GITPUSH_PKT_MAX];
    size_t n = 0;

    assert_true(ref_len >= 12 && 82 + ref_len <= sizeof(data));
    memcpy(data, OLD " " NEW " refs/heads/", 82 + 11);
    n = 82 + 11;
    memset(data + n, 'r', ref_len - 11);
    n += ref_len - 11;
    pkt(b, data, n);
}

static void flush(struct sl_buf *b)
{
    assert_int_equal(sl_buf_append(b, "0000", 4), 0);
}

/* What a reader made of a buffer: its commands' refs joined by ',' and the final event. */
struct outcome {
    char refs[4096];
    enum sl_gitpush_event end;
    unsigned caps;
    size_t pos;
    uint32_t commands;
    uint32_t shallow;
    const char *why;
};

/* Reads `p` (`n` bytes) as if it arrived `step` bytes at a time (0: all at once). Each prefix
 * is a copy of its own exact size, so that a read past it is caught by the sanitizers. */
static void read_all(const uint8_t *p, size_t n, size_t step, struct outcome *o)
{
    struct sl_gitpush_reader r;
    struct sl_gitpush_cmd cmd;
    size_t have = step == 0 ? n : 0;
    enum sl_gitpush_event ev = SL_GITPUSH_MORE;

    memset(o, 0, sizeof(*o));
    sl_gitpush_reader_init(&r);
    for (;;) {
        uint8_t *copy = sl_malloc(have > 0 ? have : 1);

        assert_non_null(copy);
        memcpy(copy, p, have);
        while ((ev = sl_gitpush_next(&r, copy, have, &cmd)) == SL_GITPUSH_COMMAND) {
            size_t len = strlen(o->refs);

            assert_true(cmd.old_oid.n == cmd.new_oid.n);
            assert_true(cmd.ref.p >= copy && cmd.ref.p + cmd.ref.n <= copy + have);
            (void)snprintf(o->refs + len, sizeof(o->refs) - len, "%s%.*s", len > 0 ? "," : "",
                           (int)cmd.ref.n, (const char *)cmd.ref.p);
        }
        sl_free(copy);
        if (ev != SL_GITPUSH_MORE || have == n) {
            break;
        }
        have = have + step < n ? have + step : n;
    }
    o->end = ev;
    o->caps = r.caps;
    o->pos = r.pos;
    o->commands = r.n_commands;
    o->shallow = r.n_shallow;
    o->why = r.why;
}

static void reads_a_push_at_every_split_point(void **state)
{
    struct sl_buf b;
    struct outcome whole;
    struct outcome part;
    size_t list_len;

    (void)state;
    sl_buf_init(&b, 1 << 20);
    pkts(&b, "shallow " OLD "\n");
    pkts(&b, "shallow " NEW);
    PKT_LIT(&b, ZERO " " NEW " refs/heads/feature-x\0report-status report-status-v2 "
                     "side-band-64k quiet object-format=sha1 agent=git/2.39.5\n");
    pkts(&b, OLD " " ZERO " refs/heads/old\n");
    pkts(&b, OLD " " NEW " refs/tags/v1");
    flush(&b);
    list_len = b.len;
    assert_int_equal(sl_buf_append(&b, "PACK\0\0\0\2whatever", 17), 0);

    read_all(b.p, b.len, 0, &whole);
    assert_int_equal(whole.end, SL_GITPUSH_END);
    assert_string_equal(whole.refs, "refs/heads/feature-x,refs/heads/old,refs/tags/v1");
    assert_int_equal(whole.caps, SL_GITPUSH_CAP_REPORT_STATUS | SL_GITPUSH_CAP_REPORT_STATUS_V2
                                         | SL_GITPUSH_CAP_SIDE_BAND_64K);
    assert_int_equal(whole.pos, list_len);
    assert_int_equal(whole.commands, 3);
    assert_int_equal(whole.shallow, 2);
    for (size_t step = 1; step <= b.len; step++) {
        read_all(b.p, b.len, step, &part);
        assert_int_equal(part.end, SL_GITPUSH_END);
        assert_string_equal(part.refs, whole.refs);
        assert_int_equal(part.caps, whole.caps);
        assert_int_equal(part.pos, whole.pos);
    }
    /* Every proper prefix of the list is not enough. */
    for (size_t n = 0; n < list_len; n++) {
        read_all(b.p, n, 0, &part);
        assert_int_equal(part.end, SL_GITPUSH_MORE);
    }
    sl_buf_finish(&b);
}

static void reads_sha256_ids_and_upper_case_lengths(void **state)
{
    struct sl_buf b;
    struct outcome o;

    (void)state;
    sl_buf_init(&b, 1 << 20);
    PKT_LIT(&b, OLD64 " " NEW64 " refs/heads/x\0side-band report-status");
    assert_int_equal(sl_buf_append(&b, "006A", 4), 0);
    assert_int_equal(sl_buf_append(&b, OLD " " NEW " refs/heads/abcdefgh\n", 0x6a - 4), 0);
    flush(&b);
    read_all(b.p, b.len, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_END);
    assert_string_equal(o.refs, "refs/heads/x,refs/heads/abcdefgh");
    assert_int_equal(o.caps, SL_GITPUSH_CAP_SIDE_BAND | SL_GITPUSH_CAP_REPORT_STATUS);
    sl_buf_finish(&b);
}

static void passes_the_probe_and_a_list_without_commands(void **state)
{
    struct sl_buf b;
    struct outcome o;

    (void)state;
    read_all((const uint8_t *)"0000", 4, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_END);
    assert_int_equal(o.commands, 0);
    assert_int_equal(o.pos, 4);
    sl_buf_init(&b, 4096);
    pkts(&b, "shallow " OLD);
    flush(&b);
    read_all(b.p, b.len, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_END);
    assert_int_equal(o.commands, 0);
    sl_buf_finish(&b);
    read_all((const uint8_t *)"", 0, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_MORE);
}

static void refuses_what_it_cannot_judge(void **state)
{
    static const struct {
        const char *data;
        size_t n;
        const char *why;
    } rows[] = {

#define ROW(s, why) { s, sizeof(s) - 1, why }
        ROW("zzzz", "a pkt-line length is not four hex digits"),
        ROW("00 8", "a pkt-line length is not four hex digits"),
        ROW("0001", "a special packet (delim or response-end) in the command list"),
        ROW("0002", "a special packet (delim or response-end) in the command list"),
        ROW("0003", "a special packet (delim or response-end) in the command list"),
        ROW("0004", "an empty pkt-line in the command list"),
        ROW("fff1", "a pkt-line longer than 65520 bytes"),
        ROW("0013push-cert\0caps\n", "signed pushes (push-cert) are not supported"),
        ROW("000epush-cert\n", "signed pushes (push-cert) are not supported"),
        ROW("0011shallow 1234\n", "a shallow line without an object id"),
        ROW("0035shallow " OLD "1", "a shallow line without an object id"),
        ROW("0009hello", "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("0056" OLD " " NEW " ", "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("0055" OLD " " NEW, "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("0057" OLD "  " NEW "x", "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("0057" OLD "g" NEW " x", "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("0057"
            "111111111111111111111111111111111111111g " NEW " x",
            "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("006f" OLD " " NEW64 " x", "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("006f" OLD64 " " NEW " x", "a command is not OLD-OID NEW-OID REFNAME"),
        ROW("0059" OLD " " NEW " a b", "a ref name with a space or a control character"),
        ROW("0059" OLD " " NEW " a\tb", "a ref name with a space or a control character"),
        ROW("0059" OLD " " NEW " a\x7f"
            "b",
            "a ref name with a space or a control character"),
        ROW("0057" OLD " " NEW " a"
            "005c" OLD " " NEW " b\0caps",
            "a capability list after the first command"),
        ROW("0057" OLD " " NEW " a"
            "0034shallow " OLD,
            "a shallow line after a command"),
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        struct outcome o;

        read_all((const uint8_t *)rows[i].data, rows[i].n, 0, &o);
        if (o.end != SL_GITPUSH_BAD || strcmp(o.why, rows[i].why) != 0) {
            fail_msg("row %zu: got event %d (%s), want BAD (%s)", i, (int)o.end,
                     o.why != NULL ? o.why : "-", rows[i].why);
        }
        /* BAD repeats, whatever comes after. */
        {
            struct sl_gitpush_reader r;
            struct sl_gitpush_cmd cmd;

            sl_gitpush_reader_init(&r);
            while (sl_gitpush_next(&r, (const uint8_t *)rows[i].data, rows[i].n, &cmd)
                   == SL_GITPUSH_COMMAND) {
            }
            assert_int_equal(sl_gitpush_next(&r, (const uint8_t *)rows[i].data, rows[i].n, &cmd),
                             SL_GITPUSH_BAD);
        }
    }
}

/* A list of commands whose flush-pkt ends at byte `end` of `b`. */
static void list_ending_at(struct sl_buf *b, size_t end)
{
    sl_buf_reset(b);
    while (end - b->len > 4 + 2000) {
        command(b, 1000 - 4 - 82);
    }
    command(b, end - b->len - 4 - 4 - 82);
    flush(b);
    assert_int_equal(b->len, end);
}

static void bounds_the_list_at_64_kib(void **state)
{
    struct sl_buf b;
    struct outcome o;

    (void)state;
    sl_buf_init(&b, 1 << 20);
    list_ending_at(&b, SL_GITPUSH_MAX_BYTES);
    read_all(b.p, b.len, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_END);
    assert_int_equal(o.pos, SL_GITPUSH_MAX_BYTES);
    list_ending_at(&b, SL_GITPUSH_MAX_BYTES + 1);
    read_all(b.p, b.len, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_BAD);
    assert_string_equal(o.why, "the command list is longer than 64 KiB");
    /* Refused as soon as a pkt-line's length says it crosses the bound, before its data. */
    list_ending_at(&b, SL_GITPUSH_MAX_BYTES - 4);
    /* Its flush replaced by the length of a pkt-line of 256 bytes. */
    memcpy(b.p + b.len - 4, "0100", 4);
    read_all(b.p, b.len, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_BAD);
    /* And when the flush itself does not fit. */
    list_ending_at(&b, SL_GITPUSH_MAX_BYTES + 2);
    read_all(b.p, b.len - 4, 0, &o);
    assert_int_equal(o.end, SL_GITPUSH_BAD);
    sl_buf_finish(&b);
}

/*
 * The refusal.
 */

#define MSG "agents may not push to protected or default branches; open a pull request"

static void refusal(const struct sl_buf *list, unsigned caps, struct sl_buf *out)
{
    sl_buf_init(out, 1 << 20);
    assert_int_equal(sl_gitpush_refusal(out, list->p, list->len, caps, MSG), 0);
}

static void writes_report_status_without_side_band(void **state)
{
    static const char want[] = "000eunpack ok\n"
                               "0061ng refs/heads/main " MSG "\n"
                               "0066ng refs/heads/release/1 " MSG "\n"
                               "0000";
    struct sl_buf list;
    struct sl_buf out;

    (void)state;
    sl_buf_init(&list, 4096);
    PKT_LIT(&list, OLD " " NEW " refs/heads/main\0report-status\n");
    pkts(&list, ZERO " " NEW " refs/heads/release/1\n");
    flush(&list);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS, &out);
    assert_int_equal(out.len, sizeof(want) - 1);
    assert_memory_equal(out.p, want, out.len);
    sl_buf_finish(&out);
    sl_buf_finish(&list);
}

static void wraps_the_report_in_side_band_channel_1(void **state)
{
    static const char report[] = "000eunpack ok\n"
                                 "0061ng refs/heads/main " MSG "\n"
                                 "0000";
    struct sl_buf list;
    struct sl_buf out;
    char want[512];
    size_t n;

    (void)state;
    sl_buf_init(&list, 4096);
    PKT_LIT(&list, OLD " " NEW " refs/heads/main\0report-status side-band-64k\n");
    flush(&list);
    n = (size_t)snprintf(want, sizeof(want), "%04zx\001%s0000", sizeof(report) - 1 + 5, report);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS | SL_GITPUSH_CAP_SIDE_BAND_64K, &out);
    assert_int_equal(out.len, n);
    assert_memory_equal(out.p, want, n);
    sl_buf_finish(&out);
    sl_buf_finish(&list);
}

/* Checks that `out` is side-band packets of at most `max` bytes (the length digits and the
 * band byte included) of channel 1, then a flush, and that their data is `report`. */
static void check_bands(const struct sl_buf *out, size_t max, const struct sl_buf *report,
                        size_t min_packets)
{
    struct sl_buf data;
    size_t at = 0;
    size_t packets = 0;

    sl_buf_init(&data, 1 << 20);
    for (;;) {
        unsigned len = 0;

        assert_true(at + 4 <= out->len);
        assert_int_equal(sscanf((const char *)out->p + at, "%4x", &len), 1);
        if (len == 0) {
            at += 4;
            break;
        }
        assert_true(len > 5 && len <= max && at + len <= out->len);
        assert_int_equal(out->p[at + 4], 1);
        assert_int_equal(sl_buf_append(&data, out->p + at + 5, len - 5), 0);
        at += len;
        packets++;
    }
    assert_int_equal(at, out->len);
    assert_true(packets >= min_packets);
    assert_int_equal(data.len, report->len);
    assert_memory_equal(data.p, report->p, data.len);
    sl_buf_finish(&data);
}

static void cuts_long_reports_into_packets(void **state)
{
    struct sl_buf list;
    struct sl_buf out;
    struct sl_buf plain;
    char ref[128];

    (void)state;
    sl_buf_init(&list, 1 << 20);
    for (int i = 0; i < 600; i++) {
        int n = snprintf(ref, sizeof(ref), OLD " " NEW " refs/heads/b%d", i);

        if (i == 0) {
            char first[160];

            memcpy(first, ref, (size_t)n);
            memcpy(first + n, "\0report-status side-band", 24);
            pkt(&list, first, (size_t)n + 24);
        } else {
            pkt(&list, ref, (size_t)n);
        }
    }
    flush(&list);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS, &plain);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS | SL_GITPUSH_CAP_SIDE_BAND, &out);
    check_bands(&out, 1000, &plain, 50);
    sl_buf_finish(&out);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS | SL_GITPUSH_CAP_SIDE_BAND_64K, &out);
    check_bands(&out, SL_GITPUSH_PKT_MAX, &plain, 1);
    sl_buf_finish(&out);
    sl_buf_finish(&plain);
    /* One command with the longest ref a pkt-line holds: its report is longer than one
     * side-band-64k packet. */
    sl_buf_reset(&list);
    command(&list, SL_GITPUSH_PKT_MAX - 4 - 82);
    flush(&list);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS, &plain);
    assert_true(plain.len > SL_GITPUSH_PKT_MAX - 5);
    refusal(&list, SL_GITPUSH_CAP_REPORT_STATUS | SL_GITPUSH_CAP_SIDE_BAND_64K, &out);
    check_bands(&out, SL_GITPUSH_PKT_MAX, &plain, 2);
    sl_buf_finish(&out);
    sl_buf_finish(&plain);
    sl_buf_finish(&list);
}

static void refuses_to_report_on_what_is_not_a_list(void **state)
{
    struct sl_buf out;

    (void)state;
    sl_buf_init(&out, 4096);
    assert_int_equal(sl_gitpush_refusal(&out, (const uint8_t *)"zzzz", 4, 0, MSG), SL_EINVAL);
    sl_buf_reset(&out);
    assert_int_equal(sl_gitpush_refusal(&out, (const uint8_t *)"0008abcd", 8, 0, MSG), SL_EINVAL);
    sl_buf_finish(&out);
    /* An output that can take it exactly, and one that cannot. */
    sl_buf_init(&out, 18);
    assert_int_equal(sl_gitpush_refusal(&out, (const uint8_t *)"0000", 4, 0, MSG), 0);
    assert_int_equal(out.len, 18);
    assert_memory_equal(out.p, "000eunpack ok\n0000", 18);
    sl_buf_finish(&out);
    sl_buf_init(&out, 17);
    assert_int_equal(sl_gitpush_refusal(&out, (const uint8_t *)"0000", 4, 0, MSG), SL_ETOOBIG);
    sl_buf_finish(&out);
    {
        struct sl_buf list;

        sl_buf_init(&list, 4096);
        pkts(&list, OLD " " NEW " refs/heads/main");
        flush(&list);
        sl_buf_init(&out, 64);
        assert_int_equal(sl_gitpush_refusal(&out, list.p, list.len, 0, MSG), SL_ETOOBIG);
        sl_buf_finish(&out);
        sl_buf_init(&out, 64);
        assert_int_equal(
                sl_gitpush_refusal(&out, list.p, list.len, SL_GITPUSH_CAP_SIDE_BAND_64K, MSG),
                SL_ETOOBIG);
        sl_buf_finish(&out);
        sl_buf_finish(&list);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_a_push_at_every_split_point),
        cmocka_unit_test(reads_sha256_ids_and_upper_case_lengths),
        cmocka_unit_test(passes_the_probe_and_a_list_without_commands),
        cmocka_unit_test(refuses_what_it_cannot_judge),
        cmocka_unit_test(bounds_the_list_at_64_kib),
        cmocka_unit_test(writes_report_status_without_side_band),
        cmocka_unit_test(wraps_the_report_in_side_band_channel_1),
        cmocka_unit_test(cuts_long_reports_into_packets),
        cmocka_unit_test(refuses_to_report_on_what_is_not_a_list),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
