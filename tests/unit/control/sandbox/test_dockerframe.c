/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/sandbox/test_dockerframe.c - the attach-stream demultiplexer: frames split at
 * every byte offset, interleaved streams, zero-length frames, large sizes, malformed headers
 * (sticky).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "control/sandbox/dockerframe.h"

struct sink {
    struct sl_buf out;
    struct sl_buf err;
    struct sl_buf in;
    size_t pieces;
};

static void on_piece(void *arg, int stream, const uint8_t *p, size_t n)
{
    struct sink *s = arg;
    struct sl_buf *b = stream == 1 ? &s->out : stream == 2 ? &s->err : &s->in;

    assert_true(n > 0);
    assert_int_equal(sl_buf_append(b, p, n), 0);
    s->pieces++;
}

static void sink_init(struct sink *s)
{
    memset(s, 0, sizeof(*s));
    sl_buf_init(&s->out, 1u << 24);
    sl_buf_init(&s->err, 1u << 24);
    sl_buf_init(&s->in, 1u << 24);
}

static void sink_finish(struct sink *s)
{
    sl_buf_finish(&s->out);
    sl_buf_finish(&s->err);
    sl_buf_finish(&s->in);
}

/* Appends one frame of `stream` carrying `n` bytes of `p` to `b`. */
static void frame(struct sl_buf *b, int stream, const void *p, size_t n)
{
    uint8_t h[8] = { (uint8_t)stream,   0,         0, 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16),
                     (uint8_t)(n >> 8), (uint8_t)n };

    assert_int_equal(sl_buf_append(b, h, sizeof(h)), 0);
    assert_int_equal(sl_buf_append(b, p, n), 0);
}

static void build_mixed(struct sl_buf *b)
{
    sl_buf_init(b, 1u << 20);
    frame(b, 1, "out-line\n", 9);
    frame(b, 2, "err-line\n", 9);
    frame(b, 1, "", 0);
    frame(b, 1, "abc", 3);
    frame(b, 2, "", 0);
    frame(b, 0, "in", 2);
    frame(b, 2, "E", 1);
}

static void check_mixed(const struct sink *s)
{
    assert_string_equal(sl_buf_cstr(&s->out), "out-line\nabc");
    assert_string_equal(sl_buf_cstr(&s->err), "err-line\nE");
    assert_string_equal(sl_buf_cstr(&s->in), "in");
}

/* A demultiplexer and the sink of its pieces. */
struct demux {
    struct sl_dockerframe f;
    struct sink s;
};

static void demux_open(struct demux *d)
{
    sink_init(&d->s);
    sl_dockerframe_init(&d->f);
    assert_true(sl_dockerframe_is_at_boundary(&d->f));
}

static int feed(struct demux *d, const void *p, size_t n)
{
    return sl_dockerframe_feed(&d->f, p, n, on_piece, &d->s);
}

/* Feeds all of `b` in pieces of `step` bytes (the last one shorter), each accepted; the input
 * ends at a frame boundary. */
static void feed_in_pieces(struct demux *d, const struct sl_buf *b, size_t step)
{
    size_t n;

    for (size_t i = 0; i < b->len; i += n) {
        n = b->len - i < step ? b->len - i : step;
        assert_int_equal(feed(d, b->p + i, n), 0);
    }
    assert_true(sl_dockerframe_is_at_boundary(&d->f));
}

static void demultiplexes_whole_input_or_a_byte_at_a_time(void **state)
{
    static const size_t steps[] = { SIZE_MAX, 1 };
    struct sl_buf b;

    (void)state;
    build_mixed(&b);
    for (size_t i = 0; i < SL_ARRAY_LEN(steps); i++) {
        struct demux d;

        demux_open(&d);
        feed_in_pieces(&d, &b, steps[i]);
        check_mixed(&d.s);
        sink_finish(&d.s);
    }
    sl_buf_finish(&b);
}

static void demultiplexes_split_at_every_offset(void **state)
{
    struct sl_buf b;

    (void)state;
    build_mixed(&b);
    for (size_t cut = 0; cut <= b.len; cut++) {
        for (size_t cut2 = cut; cut2 <= b.len; cut2++) {
            struct demux d;

            demux_open(&d);
            assert_int_equal(feed(&d, b.p, cut), 0);
            assert_int_equal(feed(&d, b.p + cut, cut2 - cut), 0);
            assert_int_equal(feed(&d, b.p + cut2, b.len - cut2), 0);
            assert_true(sl_dockerframe_is_at_boundary(&d.f));
            check_mixed(&d.s);
            sink_finish(&d.s);
        }
    }
    sl_buf_finish(&b);
}

static void reports_a_partial_frame_as_no_boundary(void **state)
{
    struct demux d;
    uint8_t hdr[8] = { 1, 0, 0, 0, 0, 0, 0, 5 };

    (void)state;
    demux_open(&d);
    assert_int_equal(feed(&d, hdr, 4), 0);
    assert_false(sl_dockerframe_is_at_boundary(&d.f));
    assert_int_equal(feed(&d, hdr + 4, 4), 0);
    assert_false(sl_dockerframe_is_at_boundary(&d.f));
    assert_int_equal(feed(&d, "abcde", 5), 0);
    assert_true(sl_dockerframe_is_at_boundary(&d.f));
    assert_string_equal(sl_buf_cstr(&d.s.out), "abcde");
    sink_finish(&d.s);
}

static void carries_a_large_frame_in_pieces(void **state)
{
    static uint8_t big[300000];
    struct demux d;
    struct sl_buf b;

    (void)state;
    for (size_t i = 0; i < sizeof(big); i++) {
        big[i] = (uint8_t)(i * 7u);
    }
    sl_buf_init(&b, 1u << 20);
    frame(&b, 2, big, sizeof(big));
    demux_open(&d);
    feed_in_pieces(&d, &b, 4093);
    assert_int_equal(d.s.err.len, sizeof(big));
    assert_memory_equal(d.s.err.p, big, sizeof(big));
    assert_int_equal(d.s.out.len, 0);
    sink_finish(&d.s);
    sl_buf_finish(&b);
}

static void rejects_unknown_stream_and_stays_refusing(void **state)
{
    struct demux d;
    struct sl_buf b;
    uint8_t bad[8] = { 3, 0, 0, 0, 0, 0, 0, 1 };

    (void)state;
    sl_buf_init(&b, 4096);
    frame(&b, 1, "ok", 2);
    assert_int_equal(sl_buf_append(&b, bad, sizeof(bad)), 0);
    frame(&b, 1, "later", 5);
    demux_open(&d);
    assert_int_equal(feed(&d, b.p, b.len), SL_EINVAL);
    assert_string_equal(sl_buf_cstr(&d.s.out), "ok");
    assert_false(sl_dockerframe_is_at_boundary(&d.f));
    assert_int_equal(feed(&d, "x", 1), SL_EINVAL);
    assert_string_equal(sl_buf_cstr(&d.s.out), "ok");
    sink_finish(&d.s);
    sl_buf_finish(&b);
}

static void rejects_nonzero_padding(void **state)
{
    for (int pos = 1; pos <= 3; pos++) {
        struct demux d;
        uint8_t bad[9] = { 1, 0, 0, 0, 0, 0, 0, 1, 'x' };

        (void)state;
        bad[pos] = 1;
        demux_open(&d);
        assert_int_equal(feed(&d, bad, sizeof(bad)), SL_EINVAL);
        assert_int_equal(d.s.pieces, 0);
        sink_finish(&d.s);
    }
}

static void accepts_empty_input(void **state)
{
    struct demux d;

    (void)state;
    demux_open(&d);
    assert_int_equal(feed(&d, NULL, 0), 0);
    assert_true(sl_dockerframe_is_at_boundary(&d.f));
    assert_int_equal(d.s.pieces, 0);
    sink_finish(&d.s);
}

/* A 4 GiB - 1 size header: the payload is simply awaited, nothing is allocated. */
static void awaits_a_huge_declared_size_without_allocating(void **state)
{
    struct demux d;
    uint8_t hdr[8] = { 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };

    (void)state;
    demux_open(&d);
    assert_int_equal(feed(&d, hdr, sizeof(hdr)), 0);
    assert_int_equal(feed(&d, "abc", 3), 0);
    assert_string_equal(sl_buf_cstr(&d.s.out), "abc");
    assert_false(sl_dockerframe_is_at_boundary(&d.f));
    sink_finish(&d.s);
}

static void keeps_up_to_the_cap_and_marks_truncation(void **state)
{
    struct sl_buf b;
    bool truncated = false;

    (void)state;
    sl_buf_init(&b, 10);
    assert_int_equal(sl_dockerframe_keep(&b, 10, "abcd", 4, &truncated), 0);
    assert_false(truncated);
    assert_int_equal(sl_dockerframe_keep(&b, 10, "efghij", 6, &truncated), 0);
    assert_false(truncated);
    assert_int_equal(sl_dockerframe_keep(&b, 10, "", 0, &truncated), 0);
    assert_false(truncated);
    assert_int_equal(sl_dockerframe_keep(&b, 10, "k", 1, &truncated), 0);
    assert_true(truncated);
    assert_string_equal(sl_buf_cstr(&b), "abcdefghij");
    sl_buf_finish(&b);

    /* Part of a piece fits. */
    truncated = false;
    sl_buf_init(&b, 5);
    assert_int_equal(sl_dockerframe_keep(&b, 5, "abcdefgh", 8, &truncated), 0);
    assert_true(truncated);
    assert_string_equal(sl_buf_cstr(&b), "abcde");
    sl_buf_finish(&b);

    /* A zero cap keeps nothing. */
    truncated = false;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_dockerframe_keep(&b, 0, "a", 1, &truncated), 0);
    assert_true(truncated);
    assert_int_equal(b.len, 0);
    sl_buf_finish(&b);
}

/* Frames through the capped sink, as the exec does: the caps hold across frames and splits. */
struct capped {
    struct sl_buf out;
    struct sl_buf err;
    bool out_trunc;
    bool err_trunc;
};

static void on_capped(void *arg, int stream, const uint8_t *p, size_t n)
{
    struct capped *c = arg;

    if (stream == 1) {
        assert_int_equal(sl_dockerframe_keep(&c->out, 7, p, n, &c->out_trunc), 0);
    } else if (stream == 2) {
        assert_int_equal(sl_dockerframe_keep(&c->err, 100, p, n, &c->err_trunc), 0);
    }
}

static void caps_streams_independently(void **state)
{
    struct sl_buf b;

    (void)state;
    build_mixed(&b);
    for (size_t cut = 0; cut <= b.len; cut++) {
        struct sl_dockerframe f;
        struct capped c;

        sl_buf_init(&c.out, 7);
        sl_buf_init(&c.err, 100);
        c.out_trunc = c.err_trunc = false;
        sl_dockerframe_init(&f);
        assert_int_equal(sl_dockerframe_feed(&f, b.p, cut, on_capped, &c), 0);
        assert_int_equal(sl_dockerframe_feed(&f, b.p + cut, b.len - cut, on_capped, &c), 0);
        assert_string_equal(sl_buf_cstr(&c.out), "out-lin");
        assert_true(c.out_trunc);
        assert_string_equal(sl_buf_cstr(&c.err), "err-line\nE");
        assert_false(c.err_trunc);
        sl_buf_finish(&c.out);
        sl_buf_finish(&c.err);
    }
    sl_buf_finish(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demultiplexes_whole_input_or_a_byte_at_a_time),
        cmocka_unit_test(demultiplexes_split_at_every_offset),
        cmocka_unit_test(reports_a_partial_frame_as_no_boundary),
        cmocka_unit_test(carries_a_large_frame_in_pieces),
        cmocka_unit_test(rejects_unknown_stream_and_stays_refusing),
        cmocka_unit_test(rejects_nonzero_padding),
        cmocka_unit_test(accepts_empty_input),
        cmocka_unit_test(awaits_a_huge_declared_size_without_allocating),
        cmocka_unit_test(keeps_up_to_the_cap_and_marks_truncation),
        cmocka_unit_test(caps_streams_independently),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
