/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_dnsd.c - the DNS responder (proxy/dnsd.h): the query reader and answer
 * writer byte for byte (A with the listener's address and TTL 5, AAAA empty, other types
 * REFUSED, other opcodes NOTIMP, malformed queries FORMERR or no answer, every prefix of a
 * query), then the responder itself on loopback: UDP and pipelined TCP queries from blocking
 * sockets while its loop runs on a thread of its own, and the audit line of each query (client
 * by source address, the name marked when no rule allows it).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <uv.h>

#include "base/buf.h"
#include "base/file.h"
#include "policy/snapshot.h"
#include "proxy/audit.h"
#include "proxy/dnsd.h"
#include "tests/support/tmpdir.h"

/* Writes a query: header (id, flags, counts), then `name` ("a.b", "" for the root) in wire
 * form, type and class. Returns its length. */
static size_t make_query(uint8_t *out, uint16_t id, uint16_t flags, uint16_t qd, const char *name,
                         uint16_t type, uint16_t klass)
{
    size_t n = 12;
    const char *p = name;

    memset(out, 0, 12);
    out[0] = (uint8_t)(id >> 8);
    out[1] = (uint8_t)id;
    out[2] = (uint8_t)(flags >> 8);
    out[3] = (uint8_t)flags;
    out[5] = (uint8_t)qd;
    while (*p != '\0') {
        const char *dot = strchr(p, '.');
        size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);

        out[n++] = (uint8_t)len;
        memcpy(out + n, p, len);
        n += len;
        p += len + (dot != NULL);
    }
    out[n++] = 0;
    out[n++] = (uint8_t)(type >> 8);
    out[n++] = (uint8_t)type;
    out[n++] = (uint8_t)(klass >> 8);
    out[n++] = (uint8_t)klass;
    return n;
}

static const uint8_t addr[4] = { 10, 213, 0, 1 };

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void answers_a_with_the_listener_address_and_ttl_5(void **state)
{
    uint8_t q[512];
    uint8_t a[SL_DNSD_ANSWER_MAX];
    struct sl_dnsd_query qq;
    size_t n = make_query(q, 0x1234, 0x0100, 1, "Api.Example.COM", 1, 1);
    int len;

    (void)state;
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_int_equal(qq.rcode, SL_DNSD_NOERROR);
    assert_true(qq.answer_a);
    assert_string_equal(qq.name, "Api.Example.COM");
    assert_true(qq.name_plain);
    len = sl_dnsd_answer(&qq, addr, a, sizeof(a));
    assert_int_equal(len, (int)(n + 16));
    assert_int_equal(get16(a), 0x1234);
    /* QR, AA, RD (echoed), RA; NOERROR. */
    assert_int_equal(get16(a + 2), 0x8580);
    assert_int_equal(get16(a + 4), 1);
    assert_int_equal(get16(a + 6), 1);
    assert_int_equal(get16(a + 8), 0);
    assert_int_equal(get16(a + 10), 0);
    /* The question as sent, its letter case kept (0x20 randomisation). */
    assert_memory_equal(a + 12, q + 12, n - 12);
    {
        static const uint8_t rr[16] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 213, 0, 1 };

        assert_memory_equal(a + n, rr, sizeof(rr));
    }
    /* Without RD, none in the answer. */
    n = make_query(q, 7, 0, 1, "x.test", 1, 1);
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_true(sl_dnsd_answer(&qq, addr, a, sizeof(a)) > 0);
    assert_int_equal(get16(a + 2), 0x8480);
    /* An answer that does not fit is refused, not cut. */
    assert_int_equal(sl_dnsd_answer(&qq, addr, a, n + 15), SL_ETOOBIG);
}

static void answers_aaaa_empty_and_refuses_other_types(void **state)
{
    static const uint16_t refused[] = { 2, 5, 6, 12, 15, 16, 33, 64, 65, 255, 0, 65535 };
    uint8_t q[512];
    uint8_t a[SL_DNSD_ANSWER_MAX];
    struct sl_dnsd_query qq;
    size_t n = make_query(q, 9, 0x0100, 1, "api.example.com", 28, 1);

    (void)state;
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_int_equal(qq.rcode, SL_DNSD_NOERROR);
    assert_false(qq.answer_a);
    assert_int_equal(sl_dnsd_answer(&qq, addr, a, sizeof(a)), (int)n);
    assert_int_equal(get16(a + 2), 0x8580);
    assert_int_equal(get16(a + 4), 1);
    assert_int_equal(get16(a + 6), 0);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        n = make_query(q, 9, 0x0100, 1, "api.example.com", refused[i], 1);
        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_REFUSED);
        assert_int_equal(sl_dnsd_answer(&qq, addr, a, sizeof(a)), (int)n);
        assert_int_equal(get16(a + 2), 0x8585);
        assert_int_equal(get16(a + 4), 1);
        assert_int_equal(get16(a + 6), 0);
    }
    /* Class CH (3), HS (4), ANY (255): refused, even for A. */
    for (uint16_t k = 2; k < 6; k++) {
        n = make_query(q, 9, 0, 1, "version.bind", 1, k == 5 ? 255 : k);
        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_REFUSED);
    }
}

static void answers_other_opcodes_notimp_without_a_question(void **state)
{
    uint8_t q[512];
    uint8_t a[SL_DNSD_ANSWER_MAX];
    struct sl_dnsd_query qq;

    (void)state;
    for (unsigned op = 1; op < 16; op++) {
        size_t n = make_query(q, 3, (uint16_t)(op << 11 | 0x0100), 1, "a.test", 1, 1);

        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_NOTIMP);
        assert_false(qq.has_question);
        assert_int_equal(sl_dnsd_answer(&qq, addr, a, sizeof(a)), 12);
        assert_int_equal(get16(a + 2), 0x8000 | op << 11 | 0x0580 | 4);
        assert_int_equal(get16(a + 4), 0);
    }
}

/* FORMERR: one question exactly, no answer or authority records, a name without pointers or
 * extended labels, within 255 bytes, and whole. */
static void answers_malformed_queries_formerr(void **state)
{
    uint8_t q[1024];
    uint8_t a[SL_DNSD_ANSWER_MAX];
    struct sl_dnsd_query qq;
    size_t n;

    (void)state;
    for (uint16_t qd = 0; qd < 4; qd++) {
        if (qd == 1) {
            continue;
        }
        n = make_query(q, 5, 0, qd, "a.test", 1, 1);
        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_FORMERR);
        assert_false(qq.has_question);
        assert_int_equal(sl_dnsd_answer(&qq, addr, a, sizeof(a)), 12);
        assert_int_equal(get16(a), 5);
        assert_int_equal(get16(a + 2) & 0xf, SL_DNSD_FORMERR);
    }
    n = make_query(q, 5, 0, 1, "a.test", 1, 1);
    q[7] = 1; /* ANCOUNT */
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_int_equal(qq.rcode, SL_DNSD_FORMERR);
    q[7] = 0;
    q[9] = 1; /* NSCOUNT */
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_int_equal(qq.rcode, SL_DNSD_FORMERR);
    /* A compression pointer, and the extended label types 01 and 10. */
    for (unsigned top = 1; top < 4; top++) {
        n = make_query(q, 5, 0, 1, "a.test", 1, 1);
        q[12] = (uint8_t)(top << 6);
        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_FORMERR);
    }
    /* A name of 257 bytes in wire form: four labels of 63. */
    {
        char name[300];

        memset(name, 'a', 255);
        name[63] = name[127] = name[191] = '.';
        name[255] = '\0';
        n = make_query(q, 5, 0, 1, name, 1, 1);
        assert_int_equal(n, 12 + 257 + 4);
        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_FORMERR);
        /* Two bytes less: 255, the most there is; its text is 253 characters. */
        name[253] = '\0';
        n = make_query(q, 5, 0, 1, name, 1, 1);
        assert_true(sl_dnsd_parse(q, n, &qq));
        assert_int_equal(qq.rcode, SL_DNSD_NOERROR);
        assert_int_equal(qq.name_len, 253);
    }
    /* Every prefix of a query with its question cut: FORMERR from 12 bytes on, nothing
     * before; trailing bytes (an EDNS OPT record) are not looked at. */
    n = make_query(q, 5, 0x0100, 1, "www.example.org", 1, 1);
    for (size_t k = 0; k < n; k++) {
        bool answered = sl_dnsd_parse(q, k, &qq);

        assert_int_equal(answered, k >= 12);
        if (answered) {
            assert_int_equal(qq.rcode, SL_DNSD_FORMERR);
        }
    }
    memcpy(q + n, "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
    q[11] = 1; /* ARCOUNT */
    assert_true(sl_dnsd_parse(q, n + 11, &qq));
    assert_int_equal(qq.rcode, SL_DNSD_NOERROR);
    assert_int_equal(sl_dnsd_answer(&qq, addr, a, sizeof(a)), (int)(n + 16));
    assert_int_equal(get16(a + 10), 0);
}

static void answers_no_response_and_no_headerless_datagram(void **state)
{
    uint8_t q[512];
    struct sl_dnsd_query qq;
    size_t n = make_query(q, 5, 0x8000, 1, "a.test", 1, 1);

    (void)state;
    assert_false(sl_dnsd_parse(q, n, &qq));
    assert_false(sl_dnsd_parse(q, 0, &qq));
    assert_false(sl_dnsd_parse(q, 11, &qq));
}

static void writes_names_as_text(void **state)
{
    uint8_t q[512];
    struct sl_dnsd_query qq;
    size_t n = make_query(q, 1, 0, 1, "", 1, 1);
    char buf[16];

    (void)state;
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_string_equal(qq.name, ".");
    assert_true(qq.name_plain);
    n = make_query(q, 1, 0, 1, "a b.test", 1, 1);
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_string_equal(qq.name, "a?b.test");
    assert_false(qq.name_plain);
    /* A dot inside a label is not a label boundary. */
    n = make_query(q, 1, 0, 1, "ab.test", 1, 1);
    q[14] = '.';
    assert_true(sl_dnsd_parse(q, n, &qq));
    assert_string_equal(qq.name, "a?.test");
    assert_false(qq.name_plain);
    assert_string_equal(sl_dnsd_type_name(1, buf), "A");
    assert_string_equal(sl_dnsd_type_name(28, buf), "AAAA");
    assert_string_equal(sl_dnsd_type_name(65, buf), "HTTPS");
    assert_string_equal(sl_dnsd_type_name(65535, buf), "TYPE65535");
    assert_string_equal(sl_dnsd_rcode_name(SL_DNSD_REFUSED), "REFUSED");
}

/*
 * The responder on loopback.
 */

struct server {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    struct sl_dnsd *d;
    struct sl_dnsd_stats stats;
};

static void on_stop(uv_async_t *a)
{
    struct server *s = a->data;

    sl_dnsd_stats(s->d, &s->stats);
    sl_dnsd_close(s->d);
    uv_close((uv_handle_t *)a, NULL);
}

static void run_loop(void *arg)
{
    struct server *s = arg;

    (void)uv_run(&s->loop, UV_RUN_DEFAULT);
}

/* A port free on 127.0.0.1 for both UDP and TCP. */
static uint16_t free_port(void)
{
    for (int tries = 0; tries < 50; tries++) {
        struct sockaddr_in sin = { .sin_family = AF_INET };
        socklen_t len = sizeof(sin);
        int t = socket(AF_INET, SOCK_STREAM, 0);
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        bool ok;

        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ok = bind(t, (struct sockaddr *)&sin, sizeof(sin)) == 0
             && getsockname(t, (struct sockaddr *)&sin, &len) == 0
             && bind(u, (struct sockaddr *)&sin, sizeof(sin)) == 0;
        close(t);
        close(u);
        if (ok) {
            return ntohs(sin.sin_port);
        }
    }
    fail_msg("no free port");
    return 0;
}

static int client_socket(int type, const char *from)
{
    struct timeval tv = { 2, 0 };
    int fd = socket(AF_INET, type, 0);

    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    if (from != NULL) {
        struct sockaddr_in sin = { .sin_family = AF_INET };

        assert_int_equal(inet_pton(AF_INET, from, &sin.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    }
    return fd;
}

/* Sends one UDP query from `from` (NULL: any address) and returns the answer's length (0: none
 * within `ms`). */
static ssize_t udp_ask(const struct sockaddr_in *to, const char *from, const uint8_t *q, size_t n,
                       uint8_t *a, size_t cap, int ms)
{
    int fd = client_socket(SOCK_DGRAM, from);
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    ssize_t got;

    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    assert_int_equal(sendto(fd, q, n, 0, (const struct sockaddr *)to, sizeof(*to)), (ssize_t)n);
    got = recv(fd, a, cap, 0);
    close(fd);
    return got < 0 ? 0 : got;
}

static size_t read_full(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = recv(fd, p + got, n - got, 0);

        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    return got;
}

/* The audit lines written, parsed. */
static json_t *audit_lines(const char *path)
{
    struct sl_buf b;
    json_t *lines = json_array();
    char err[256];
    size_t start = 0;

    sl_buf_init(&b, 1 << 20);
    assert_int_equal(sl_file_read(path, &b, err, sizeof(err)), 0);
    for (size_t i = 0; i < b.len; i++) {
        if (b.p[i] == '\n') {
            json_error_t je;
            json_t *j = json_loadb((const char *)b.p + start, i - start, 0, &je);

            assert_non_null(j);
            json_array_append_new(lines, j);
            start = i + 1;
        }
    }
    sl_buf_finish(&b);
    return lines;
}

static const char *member(json_t *line, const char *key)
{
    return json_string_value(json_object_get(line, key));
}

static void answers_udp_and_tcp_and_audits_each_query(void **state)
{
    static const char policy[] =
            "{\"version\":4,\"environments\":{\"dev\":{\"default\":\"deny\",\"rules\":["
            "{\"host\":\"allowed.sluice.test\"},{\"host\":\"*.wild.sluice.test\"},"
            "{\"host\":\"odd.sluice.test:8443\"}]}},"
            "\"clients\":[{\"id\":\"sb\",\"token\":\"t0k3n\",\"ip\":\"127.0.0.1\","
            "\"environment\":\"dev\"}]}";
    struct server s;
    struct sockaddr_in at = { .sin_family = AF_INET };
    struct sl_snapshot *snap = NULL;
    struct sl_audit *audit = NULL;
    char dir[256];
    char path[300];
    char err[256];
    uint8_t q[512];
    uint8_t a[1024];
    size_t n;
    ssize_t got;
    json_t *lines;

    (void)state;
    assert_int_equal(sl_test_tmpdir(dir, sizeof(dir), "sluice-dnsd"), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "audit.log"), 0);
    assert_int_equal(sl_audit_open(path, 0, &audit, err, sizeof(err)), 0);
    assert_int_equal(sl_snapshot_parse((const uint8_t *)policy, strlen(policy), &snap, NULL), 0);
    memset(&s, 0, sizeof(s));
    assert_int_equal(uv_loop_init(&s.loop), 0);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    at.sin_port = htons(free_port());
    assert_int_equal(sl_dnsd_start(&s.loop, &at, 1, audit, &s.d, err, sizeof(err)), 0);
    sl_dnsd_set_snapshot(s.d, snap);
    sl_snapshot_unref(snap);
    s.stop.data = &s;
    assert_int_equal(uv_async_init(&s.loop, &s.stop, on_stop), 0);
    assert_int_equal(uv_thread_create(&s.thread, run_loop, &s), 0);

    /* UDP: A for an allowed name, for a name no rule allows, from an unknown address; AAAA;
     * MX; a headerless datagram. */
    n = make_query(q, 0x0a01, 0x0100, 1, "allowed.sluice.test", 1, 1);
    got = udp_ask(&at, NULL, q, n, a, sizeof(a), 2000);
    assert_int_equal(got, (ssize_t)(n + 16));
    assert_memory_equal(a + n + 12, "\x7f\x00\x00\x01", 4);
    n = make_query(q, 0x0a02, 0x0100, 1, "Denied.sluice.test", 1, 1);
    assert_int_equal(udp_ask(&at, NULL, q, n, a, sizeof(a), 2000), (ssize_t)(n + 16));
    n = make_query(q, 0x0a03, 0x0100, 1, "a.wild.sluice.test", 1, 1);
    assert_int_equal(udp_ask(&at, "127.0.0.2", q, n, a, sizeof(a), 2000), (ssize_t)(n + 16));
    n = make_query(q, 0x0a04, 0x0100, 1, "odd.sluice.test", 28, 1);
    assert_int_equal(udp_ask(&at, NULL, q, n, a, sizeof(a), 2000), (ssize_t)n);
    assert_int_equal(get16(a + 6), 0);
    n = make_query(q, 0x0a05, 0x0100, 1, "allowed.sluice.test", 15, 1);
    assert_int_equal(udp_ask(&at, NULL, q, n, a, sizeof(a), 2000), (ssize_t)n);
    assert_int_equal(get16(a + 2) & 0xf, SL_DNSD_REFUSED);
    assert_int_equal(udp_ask(&at, NULL, q, 5, a, sizeof(a), 300), 0);

    /* TCP: two queries in one write, answered in turn, each with its length. */
    {
        int fd = client_socket(SOCK_STREAM, NULL);
        uint8_t two[600];
        size_t m1 = make_query(two + 2, 0x0b01, 0x0100, 1, "allowed.sluice.test", 1, 1);
        size_t m2;

        two[0] = (uint8_t)(m1 >> 8);
        two[1] = (uint8_t)m1;
        m2 = make_query(two + 4 + m1, 0x0b02, 0x0100, 1, "allowed.sluice.test", 28, 1);
        two[2 + m1] = (uint8_t)(m2 >> 8);
        two[3 + m1] = (uint8_t)m2;
        assert_int_equal(connect(fd, (const struct sockaddr *)&at, sizeof(at)), 0);
        assert_int_equal(send(fd, two, 4 + m1 + m2, 0), (ssize_t)(4 + m1 + m2));
        assert_int_equal(read_full(fd, a, 2 + m1 + 16), 2 + m1 + 16);
        assert_int_equal(get16(a), m1 + 16);
        assert_int_equal(get16(a + 2), 0x0b01);
        assert_int_equal(read_full(fd, a, 2 + m2), 2 + m2);
        assert_int_equal(get16(a), m2);
        assert_int_equal(get16(a + 2), 0x0b02);
        /* A length of 0 ends the connection. */
        assert_int_equal(send(fd, "\0\0", 2, 0), 2);
        assert_int_equal(recv(fd, a, sizeof(a), 0), 0);
        close(fd);
    }
    /* A query longer than SL_DNSD_QUERY_MAX ends the connection unanswered. */
    {
        int fd = client_socket(SOCK_STREAM, NULL);

        assert_int_equal(connect(fd, (const struct sockaddr *)&at, sizeof(at)), 0);
        assert_int_equal(send(fd, "\x04\xd1", 2, 0), 2);
        assert_int_equal(recv(fd, a, sizeof(a), 0), 0);
        close(fd);
    }

    assert_int_equal(uv_async_send(&s.stop), 0);
    assert_int_equal(uv_thread_join(&s.thread), 0);
    assert_int_equal(uv_loop_close(&s.loop), 0);
    assert_int_equal(s.stats.answered[SL_DNSD_NOERROR], 6);
    assert_int_equal(s.stats.answered[SL_DNSD_REFUSED], 1);
    assert_int_equal(s.stats.dropped, 3);
    sl_audit_close(audit);

    lines = audit_lines(path);
    assert_int_equal(json_array_size(lines), 7);
    {
        json_t *l = json_array_get(lines, 0);
        json_t *d = json_object_get(l, "dns");

        assert_string_equal(member(l, "method"), "DNS");
        assert_string_equal(member(l, "decision"), "dns");
        assert_string_equal(member(l, "client"), "sb");
        assert_string_equal(member(l, "environment"), "dev");
        assert_string_equal(member(l, "host"), "allowed.sluice.test");
        assert_string_equal(member(l, "rule"), "allowed.sluice.test");
        assert_true(json_is_null(json_object_get(l, "reason")));
        assert_string_equal(json_string_value(json_object_get(d, "type")), "A");
        assert_string_equal(json_string_value(json_object_get(d, "rcode")), "NOERROR");
        assert_string_equal(json_string_value(json_object_get(d, "transport")), "udp");
        assert_int_equal(json_integer_value(json_object_get(l, "policy_version")), 4);
        assert_null(json_object_get(l, "mode"));
    }
    /* The name as asked; marked: no rule allows it. */
    assert_string_equal(member(json_array_get(lines, 1), "host"), "Denied.sluice.test");
    assert_string_equal(member(json_array_get(lines, 1), "reason"), "host-not-allowed");
    /* From an address no client has. */
    assert_true(json_is_null(json_object_get(json_array_get(lines, 2), "client")));
    assert_string_equal(member(json_array_get(lines, 2), "reason"), "no-identity");
    /* A rule naming the host on another port: not marked. */
    assert_true(json_is_null(json_object_get(json_array_get(lines, 3), "reason")));
    assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(lines, 3), "dns"), "type")),
                        "AAAA");
    assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(lines, 4), "dns"), "rcode")),
                        "REFUSED");
    assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(lines, 5), "dns"), "transport")),
                        "tcp");
    json_decref(lines);
    assert_int_equal(sl_test_rmtree(dir), 0);
}

/* An address that cannot be bound fails the start with the address named, nothing left. */
static void names_the_address_it_cannot_bind(void **state)
{
    uv_loop_t loop;
    struct sockaddr_in at = { .sin_family = AF_INET };
    struct sl_dnsd *d = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    /* TEST-NET-3: no interface has it. */
    assert_int_equal(inet_pton(AF_INET, "203.0.113.77", &at.sin_addr), 1);
    at.sin_port = htons(5353);
    assert_true(sl_dnsd_start(&loop, &at, 1, NULL, &d, err, sizeof(err)) < 0);
    assert_null(d);
    assert_non_null(strstr(err, "203.0.113.77:5353"));
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(answers_a_with_the_listener_address_and_ttl_5),
        cmocka_unit_test(answers_aaaa_empty_and_refuses_other_types),
        cmocka_unit_test(answers_other_opcodes_notimp_without_a_question),
        cmocka_unit_test(answers_malformed_queries_formerr),
        cmocka_unit_test(answers_no_response_and_no_headerless_datagram),
        cmocka_unit_test(writes_names_as_text),
        cmocka_unit_test(answers_udp_and_tcp_and_audits_each_query),
        cmocka_unit_test(names_the_address_it_cannot_bind),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
