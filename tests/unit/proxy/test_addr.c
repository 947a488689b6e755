/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_addr.c - the upstream address policy: every class boundary, the IPv6 forms
 * that embed IPv4 addresses, allow and deny lists, and the parsers' refusals.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/mem.h"
#include "proxy/addr.h"

/* Builds the socket address of `text` (IPv4 or IPv6) and `port`. */
static const struct sockaddr *sa_of(struct sockaddr_storage *ss, const char *text, uint16_t port)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
    } else {
        if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1) {
            fail_msg("test address %s does not parse", text);
        }
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
    }
    return (const struct sockaddr *)ss;
}

static enum sl_addr_verdict check(const struct sl_addr_policy *p, const char *text, uint16_t port)
{
    struct sockaddr_storage ss;

    return sl_addr_check(p, sa_of(&ss, text, port));
}

struct row {
    const char *addr;
    enum sl_addr_verdict want;
};

static void check_rows(const struct sl_addr_policy *p, const struct row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        enum sl_addr_verdict got = check(p, rows[i].addr, 443);

        if (got != rows[i].want) {
            fail_msg("%s: got %s, want %s", rows[i].addr, sl_addr_verdict_name(got),
                     sl_addr_verdict_name(rows[i].want));
        }
    }
}

/* First and last address of each IPv4 range, and the neighbours just outside. */
static const struct row v4_rows[] = {
    { "0.0.0.0", SL_ADDR_UNSPECIFIED },
    { "0.255.255.255", SL_ADDR_UNSPECIFIED },
    { "1.0.0.0", SL_ADDR_ALLOWED },
    { "9.255.255.255", SL_ADDR_ALLOWED },
    { "10.0.0.0", SL_ADDR_PRIVATE },
    { "10.255.255.255", SL_ADDR_PRIVATE },
    { "11.0.0.0", SL_ADDR_ALLOWED },
    { "100.63.255.255", SL_ADDR_ALLOWED },
    { "100.64.0.0", SL_ADDR_CGNAT },
    { "100.127.255.255", SL_ADDR_CGNAT },
    { "100.128.0.0", SL_ADDR_ALLOWED },
    { "126.255.255.255", SL_ADDR_ALLOWED },
    { "127.0.0.0", SL_ADDR_LOOPBACK },
    { "127.0.0.1", SL_ADDR_LOOPBACK },
    { "127.255.255.255", SL_ADDR_LOOPBACK },
    { "128.0.0.0", SL_ADDR_ALLOWED },
    { "169.253.255.255", SL_ADDR_ALLOWED },
    { "169.254.0.0", SL_ADDR_LINK_LOCAL },
    { "169.254.169.254", SL_ADDR_LINK_LOCAL },
    { "169.254.255.255", SL_ADDR_LINK_LOCAL },
    { "169.255.0.0", SL_ADDR_ALLOWED },
    { "172.15.255.255", SL_ADDR_ALLOWED },
    { "172.16.0.0", SL_ADDR_PRIVATE },
    { "172.31.255.255", SL_ADDR_PRIVATE },
    { "172.32.0.0", SL_ADDR_ALLOWED },
    { "191.255.255.255", SL_ADDR_ALLOWED },
    { "192.0.0.0", SL_ADDR_RESERVED },
    { "192.0.0.255", SL_ADDR_RESERVED },
    { "192.0.1.0", SL_ADDR_ALLOWED },
    { "192.0.2.1", SL_ADDR_ALLOWED },    /* TEST-NET-1, documentation */
    { "198.18.0.1", SL_ADDR_ALLOWED },   /* benchmarking */
    { "198.51.100.1", SL_ADDR_ALLOWED }, /* TEST-NET-2 */
    { "203.0.113.1", SL_ADDR_ALLOWED },  /* TEST-NET-3 */
    { "192.167.255.255", SL_ADDR_ALLOWED },
    { "192.168.0.0", SL_ADDR_PRIVATE },
    { "192.168.255.255", SL_ADDR_PRIVATE },
    { "192.169.0.0", SL_ADDR_ALLOWED },
    { "223.255.255.255", SL_ADDR_ALLOWED },
    { "224.0.0.0", SL_ADDR_MULTICAST },
    { "239.255.255.255", SL_ADDR_MULTICAST },
    { "240.0.0.0", SL_ADDR_RESERVED },
    { "255.255.255.254", SL_ADDR_RESERVED },
    { "255.255.255.255", SL_ADDR_BROADCAST },
    { "8.8.8.8", SL_ADDR_ALLOWED },
    { "93.184.216.34", SL_ADDR_ALLOWED },
};

static const struct row v6_rows[] = {
    { "::", SL_ADDR_UNSPECIFIED },
    { "::1", SL_ADDR_LOOPBACK },
    { "::2", SL_ADDR_UNSPECIFIED }, /* IPv4-compatible 0.0.0.2 */
    { "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_ALLOWED },
    { "fc00::", SL_ADDR_PRIVATE },
    { "fd12:3456::1", SL_ADDR_PRIVATE },
    { "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_PRIVATE },
    { "fe00::", SL_ADDR_ALLOWED },
    { "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_ALLOWED },
    { "fe80::", SL_ADDR_LINK_LOCAL },
    { "fe80::1", SL_ADDR_LINK_LOCAL },
    { "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_LINK_LOCAL },
    { "fec0::", SL_ADDR_PRIVATE },
    { "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_PRIVATE },
    { "ff00::", SL_ADDR_MULTICAST },
    { "ff02::1", SL_ADDR_MULTICAST },
    { "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_MULTICAST },
    { "100::", SL_ADDR_RESERVED },
    { "100::ffff:ffff:ffff:ffff", SL_ADDR_RESERVED },
    { "100:0:0:1::", SL_ADDR_ALLOWED },
    { "0:0:0:1::", SL_ADDR_RESERVED }, /* the rest of ::/8 */
    { "ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SL_ADDR_RESERVED },
    { "2001:db8::1", SL_ADDR_ALLOWED }, /* documentation */
    { "2001:4860:4860::8888", SL_ADDR_ALLOWED },
    { "2606:4700::1111", SL_ADDR_ALLOWED },
};

/* IPv6 forms that embed an IPv4 address are judged by it. */
static const struct row embedded_rows[] = {
    /* IPv4-mapped ::ffff:0:0/96. */
    { "::ffff:127.0.0.1", SL_ADDR_LOOPBACK },
    { "::ffff:10.1.2.3", SL_ADDR_PRIVATE },
    { "::ffff:169.254.169.254", SL_ADDR_LINK_LOCAL },
    { "::ffff:0.0.0.0", SL_ADDR_UNSPECIFIED },
    { "::ffff:255.255.255.255", SL_ADDR_BROADCAST },
    { "::ffff:8.8.8.8", SL_ADDR_ALLOWED },
    /* IPv4-compatible ::/96. */
    { "::127.0.0.1", SL_ADDR_LOOPBACK },
    { "::192.168.1.1", SL_ADDR_PRIVATE },
    { "::8.8.8.8", SL_ADDR_ALLOWED },
    /* IPv4-translated ::ffff:0:0:0/96. */
    { "::ffff:0:127.0.0.1", SL_ADDR_LOOPBACK },
    { "::ffff:0:8.8.8.8", SL_ADDR_ALLOWED },
    /* NAT64 well-known prefix 64:ff9b::/96. */
    { "64:ff9b::127.0.0.1", SL_ADDR_LOOPBACK },
    { "64:ff9b::100.64.0.1", SL_ADDR_CGNAT },
    { "64:ff9b::224.0.0.1", SL_ADDR_MULTICAST },
    { "64:ff9b::8.8.8.8", SL_ADDR_ALLOWED },
    { "64:ff9b::1:0:0", SL_ADDR_RESERVED }, /* outside the /96: the rest of ::/8 */
    /* NAT64 local-use prefix 64:ff9b:1::/48: every RFC 6052 position counts. Each address
     * below holds 8.8.8.8-like public bytes everywhere but in the position named. */
    { "64:ff9b:1::10.0.0.1", SL_ADDR_PRIVATE },          /* /96 */
    { "64:ff9b:1:808:7f:0:108:808", SL_ADDR_LOOPBACK },  /* /64: bytes 9-12 = 127.0.0.1 */
    { "64:ff9b:1:80a:8:808:808:808", SL_ADDR_PRIVATE },  /* /56: bytes 7, 9-11 = 10.8.8.8 */
    { "64:ff9b:1:c0a8:8:808:808:808", SL_ADDR_PRIVATE }, /* /48: 6-7, 9-10 = 192.168.8.8 */
    { "64:ff9b:1:808:8:808:808:808", SL_ADDR_ALLOWED },  /* 8.8.8.8 in every position */
    { "64:ff9b:1::8.8.8.8", SL_ADDR_UNSPECIFIED },       /* /64 reads 0.0.0.8: fail closed */
    /* 6to4 2002::/16. */
    { "2002:7f00:1::1", SL_ADDR_LOOPBACK },
    { "2002:a00:1::", SL_ADDR_PRIVATE },
    { "2002:808:808::1", SL_ADDR_ALLOWED },
    /* Teredo 2001::/32: server address, then the client address (inverted). */
    { "2001:0:7f00:1::808:808", SL_ADDR_LOOPBACK },
    { "2001:0:808:808::f5ff:fefe", SL_ADDR_PRIVATE }, /* client ~f5fffefe = 10.0.1.1 */
    { "2001:0:808:808::f7f7:f7f7", SL_ADDR_ALLOWED }, /* client 8.8.8.8 */
    { "2001:1::7f00:1", SL_ADDR_ALLOWED },            /* 2001:1::/32 is not Teredo */
};

static void classes_hold_at_every_ipv4_boundary(void **state)
{
    (void)state;
    check_rows(NULL, v4_rows, SL_ARRAY_LEN(v4_rows));
}

static void classes_hold_at_every_ipv6_boundary(void **state)
{
    (void)state;
    check_rows(NULL, v6_rows, SL_ARRAY_LEN(v6_rows));
}

static void embedded_ipv4_decides_for_the_ipv6_forms(void **state)
{
    (void)state;
    check_rows(NULL, embedded_rows, SL_ARRAY_LEN(embedded_rows));
}

static void an_empty_policy_is_the_classes_alone(void **state)
{
    struct sl_addr_policy *p = NULL;

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    check_rows(p, v4_rows, SL_ARRAY_LEN(v4_rows));
    check_rows(p, v6_rows, SL_ARRAY_LEN(v6_rows));
    check_rows(p, embedded_rows, SL_ARRAY_LEN(embedded_rows));
    sl_addr_policy_destroy(p);
    sl_addr_policy_destroy(NULL);
}

static void other_families_are_refused(void **state)
{
    struct sockaddr_storage ss;

    (void)state;
    memset(&ss, 0, sizeof(ss));
    ss.ss_family = AF_UNIX;
    assert_int_equal(sl_addr_check(NULL, (const struct sockaddr *)&ss), SL_ADDR_UNSUPPORTED);
    assert_int_equal(sl_addr_check(NULL, NULL), SL_ADDR_UNSUPPORTED);
    assert_string_equal(sl_addr_verdict_name(SL_ADDR_UNSUPPORTED), "unsupported-family");
}

static void verdicts_have_audit_names(void **state)
{
    static const char *const names[] = { "allowed",    "unspecified", "loopback",  "private",
                                         "link-local", "cgnat",       "multicast", "broadcast",
                                         "reserved",   "denied" };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
        assert_string_equal(sl_addr_verdict_name((enum sl_addr_verdict)i), names[i]);
    }
}

static void allow_ranges_turn_a_refused_class_into_allowed(void **state)
{
    struct sl_addr_policy *p = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "127.0.0.0/8", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "10.20.0.0/16", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "fd00:1::/32", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "169.254.169.254", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "::ffff:192.168.7.0/120", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "64:ff9b::a00:0/104", err, sizeof(err)), 0);

    assert_int_equal(check(p, "127.0.0.1", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "127.255.255.255", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "::ffff:127.0.0.1", 80), SL_ADDR_ALLOWED); /* mapped = IPv4 */
    assert_int_equal(check(p, "10.20.0.0", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "10.20.255.255", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "10.19.255.255", 80), SL_ADDR_PRIVATE);
    assert_int_equal(check(p, "10.21.0.0", 80), SL_ADDR_PRIVATE);
    assert_int_equal(check(p, "fd00:1::5", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "fd00:1:ffff:ffff:ffff:ffff:ffff:ffff", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "fd00:2::", 80), SL_ADDR_PRIVATE);
    assert_int_equal(check(p, "169.254.169.254", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "169.254.169.253", 80), SL_ADDR_LINK_LOCAL);
    /* An IPv4-mapped range is an IPv4 range. */
    assert_int_equal(check(p, "192.168.7.9", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "192.168.8.9", 80), SL_ADDR_PRIVATE);
    /* Other embedding forms are lifted by ranges of the IPv6 address as dialled only. */
    assert_int_equal(check(p, "64:ff9b::10.1.2.3", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "64:ff9b::127.0.0.1", 80), SL_ADDR_LOOPBACK);
    assert_int_equal(check(p, "2002:7f00:1::", 80), SL_ADDR_LOOPBACK);
    /* Allowed classes stay allowed. */
    assert_int_equal(check(p, "8.8.8.8", 80), SL_ADDR_ALLOWED);
    sl_addr_policy_destroy(p);
}

static void deny_entries_win_over_every_allow(void **state)
{
    struct sl_addr_policy *p = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "0.0.0.0/0", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "::/0", err, sizeof(err)), 0);
    /* The proxy's own listen address, a control plane on any port, a public host. */
    assert_int_equal(sl_addr_policy_add_deny(p, "127.0.0.1:3128", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "10.0.0.5", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "[::1]:8080", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "2001:db8::7", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "[2001:db8::8]", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "93.184.216.34:443", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "[::ffff:192.168.1.1]:22", err, sizeof(err)), 0);

    assert_int_equal(check(p, "127.0.0.1", 3128), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.0.0.1", 3129), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "::ffff:127.0.0.1", 3128), SL_ADDR_DENIED);
    assert_int_equal(check(p, "10.0.0.5", 1), SL_ADDR_DENIED);
    assert_int_equal(check(p, "10.0.0.5", 65535), SL_ADDR_DENIED);
    assert_int_equal(check(p, "10.0.0.6", 443), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "::1", 8080), SL_ADDR_DENIED);
    assert_int_equal(check(p, "::1", 8081), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "2001:db8::7", 443), SL_ADDR_DENIED);
    assert_int_equal(check(p, "2001:db8::8", 443), SL_ADDR_DENIED);
    assert_int_equal(check(p, "2001:db8::9", 443), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "93.184.216.34", 443), SL_ADDR_DENIED);
    assert_int_equal(check(p, "93.184.216.34", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "192.168.1.1", 22), SL_ADDR_DENIED);
    /* Embedded forms of a denied IPv4 address are denied too. */
    assert_int_equal(check(p, "64:ff9b::10.0.0.5", 443), SL_ADDR_DENIED);
    assert_int_equal(check(p, "2002:a00:5::", 443), SL_ADDR_DENIED);
    assert_int_equal(check(p, "::127.0.0.1", 3128), SL_ADDR_DENIED);
    assert_int_equal(check(p, "::127.0.0.1", 3127), SL_ADDR_ALLOWED);
    sl_addr_policy_destroy(p);
}

/* A listener on 0.0.0.0 or :: answers on every loopback address: a wildcard entry denies them
 * all on its port (the interface addresses are the proxy's to add). */
static void wildcard_deny_entries_cover_loopback(void **state)
{
    struct sl_addr_policy *p = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "127.0.0.0/8", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_allow(p, "::1/128", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "0.0.0.0:8080", err, sizeof(err)), 0);
    assert_int_equal(check(p, "127.0.0.1", 8080), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.0.0.2", 8080), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.255.0.9", 8080), SL_ADDR_DENIED);
    assert_int_equal(check(p, "::ffff:127.0.0.3", 8080), SL_ADDR_DENIED);
    assert_int_equal(check(p, "::127.0.0.3", 8080), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.0.0.2", 8081), SL_ADDR_ALLOWED);
    /* An IPv4 wildcard does not listen on ::1. */
    assert_int_equal(check(p, "::1", 8080), SL_ADDR_ALLOWED);
    assert_int_equal(sl_addr_policy_add_deny(p, "[::]:9090", err, sizeof(err)), 0);
    assert_int_equal(check(p, "::1", 9090), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.0.0.4", 9090), SL_ADDR_DENIED);
    assert_int_equal(check(p, "::1", 9091), SL_ADDR_ALLOWED);
    /* Without a port, every port. */
    assert_int_equal(sl_addr_policy_add_deny(p, "::", err, sizeof(err)), 0);
    assert_int_equal(check(p, "::1", 1), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.0.0.1", 65535), SL_ADDR_DENIED);
    sl_addr_policy_destroy(p);
}

static void deny_entries_refuse_even_without_allows(void **state)
{
    struct sl_addr_policy *p = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "127.0.0.1:3128", err, sizeof(err)), 0);
    /* Deny outranks the class, so the audit log names the entry. */
    assert_int_equal(check(p, "127.0.0.1", 3128), SL_ADDR_DENIED);
    assert_int_equal(check(p, "127.0.0.1", 80), SL_ADDR_LOOPBACK);
    sl_addr_policy_destroy(p);
}

static void cidrs_parse_strictly(void **state)
{
    struct sl_addr_cidr c;
    char err[256];

    (void)state;
    assert_int_equal(sl_addr_parse_cidr("10.0.0.0/8", &c, err, sizeof(err)), 0);
    assert_int_equal(c.family, AF_INET);
    assert_int_equal(c.prefix_bits, 8);
    assert_int_equal(c.bytes[0], 10);
    assert_int_equal(sl_addr_parse_cidr("0.0.0.0/0", &c, err, sizeof(err)), 0);
    assert_int_equal(c.prefix_bits, 0);
    assert_int_equal(sl_addr_parse_cidr("1.2.3.4", &c, err, sizeof(err)), 0);
    assert_int_equal(c.prefix_bits, 32);
    assert_int_equal(sl_addr_parse_cidr("1.2.3.4/32", &c, err, sizeof(err)), 0);
    assert_int_equal(sl_addr_parse_cidr("2001:db8::/32", &c, err, sizeof(err)), 0);
    assert_int_equal(c.family, AF_INET6);
    assert_int_equal(c.prefix_bits, 32);
    assert_int_equal(sl_addr_parse_cidr("::/0", &c, err, sizeof(err)), 0);
    assert_int_equal(sl_addr_parse_cidr("::1/128", &c, err, sizeof(err)), 0);
    assert_int_equal(sl_addr_parse_cidr("fe80::/10", &c, err, sizeof(err)), 0);
    assert_int_equal(sl_addr_parse_cidr("::ffff:10.0.0.0/104", &c, err, sizeof(err)), 0);
    assert_int_equal(c.family, AF_INET);
    assert_int_equal(c.prefix_bits, 8);
    assert_int_equal(sl_addr_parse_cidr("::ffff:0:0/96", &c, err, sizeof(err)), 0);
    assert_int_equal(c.family, AF_INET);
    assert_int_equal(c.prefix_bits, 0);
    assert_int_equal(sl_addr_parse_cidr("::/80", &c, err, sizeof(err)), 0);
    assert_int_equal(c.family, AF_INET6);
    assert_int_equal(sl_addr_parse_cidr("::ffff:0:0/95", &c, err, sizeof(err)), SL_EINVAL);
    {
        static const uint8_t in[4] = { 10, 9, 8, 7 };
        static const uint8_t out[4] = { 11, 0, 0, 0 };

        assert_int_equal(sl_addr_parse_cidr("10.0.0.0/8", &c, err, sizeof(err)), 0);
        assert_true(sl_addr_cidr_contains(&c, AF_INET, in));
        assert_false(sl_addr_cidr_contains(&c, AF_INET, out));
        assert_false(sl_addr_cidr_contains(&c, AF_INET6, in));
    }
}

struct bad {
    const char *text;
    const char *message;
};

static void malformed_cidrs_are_rejected_with_a_reason(void **state)
{
    static const struct bad bad[] = {
        { "", "not an IPv4 or IPv6 address" },
        { "/8", "not an IPv4 or IPv6 address" },
        { "10.0.0.0/", "must be a decimal number" },
        { "10.0.0.0/33", "prefix length 33 is out of range 0-32" },
        { "::/129", "prefix length 129 is out of range 0-128" },
        { "10.0.0.0/-1", "must be a decimal number" },
        { "10.0.0.0/+8", "must be a decimal number" },
        { "10.0.0.0/08", "must be a decimal number" },
        { "10.0.0.0/8 ", "must be a decimal number" },
        { "10.0.0.0/1000", "must be a decimal number" },
        { " 10.0.0.0/8", "not an IPv4 or IPv6 address" },
        { "x10.0.0.0/8", "not an IPv4 or IPv6 address" },
        { "10.0.0/8", "not an IPv4 or IPv6 address" },
        { "010.0.0.0/8", "not an IPv4 or IPv6 address" },
        { "0x7f.0.0.1/32", "not an IPv4 or IPv6 address" },
        { "2130706433/32", "not an IPv4 or IPv6 address" },
        { "256.0.0.0/8", "not an IPv4 or IPv6 address" },
        { "fe80::1%eth0/64", "not an IPv4 or IPv6 address" },
        { "[::1]/128", "not an IPv4 or IPv6 address" },
        { "10.0.0.0/8/8", "must be a decimal number" },
        { "10.1.2.3/8", "host bits are set past /8 (did you mean 10.0.0.0/8?)" },
        { "2001:db8::1/32", "host bits are set past /32 (did you mean 2001:db8::/32?)" },
        { "example.com/8", "not an IPv4 or IPv6 address" },
        { "10.0.0.0\n/8", "not an IPv4 or IPv6 address" },
    };
    struct sl_addr_cidr c = { .family = 99 };
    char err[256];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        if (sl_addr_parse_cidr(bad[i].text, &c, err, sizeof(err)) != SL_EINVAL) {
            fail_msg("accepted \"%s\"", bad[i].text);
        }
        if (strstr(err, bad[i].message) == NULL) {
            fail_msg("\"%s\": message \"%s\" lacks \"%s\"", bad[i].text, err, bad[i].message);
        }
        assert_int_equal(c.family, 99); /* untouched */
    }
    /* A control character never reaches the message. */
    assert_int_equal(sl_addr_parse_cidr("10.0.0.0\n/8", &c, err, sizeof(err)), SL_EINVAL);
    assert_null(strchr(err, '\n'));
    /* A tiny or absent buffer is fine. */
    assert_int_equal(sl_addr_parse_cidr("nope", &c, err, 4), SL_EINVAL);
    assert_int_equal(strlen(err), 3);
    assert_int_equal(sl_addr_parse_cidr("nope", &c, NULL, 0), SL_EINVAL);
}

static void malformed_deny_entries_are_rejected_with_a_reason(void **state)
{
    static const struct bad bad[] = {
        { "", "not an IPv4 or IPv6 address" },
        { "localhost", "not an IPv4 or IPv6 address" },
        { "1.2.3.4:", "the port must be a decimal number 1-65535" },
        { "1.2.3.4:0", "the port must be a decimal number 1-65535" },
        { "1.2.3.4:65536", "the port must be a decimal number 1-65535" },
        { "1.2.3.4:080", "the port must be a decimal number 1-65535" },
        { "1.2.3.4:http", "the port must be a decimal number 1-65535" },
        { "1.2.3.4/32", "not an IPv4 or IPv6 address" },
        { ":80", "not an IPv4 or IPv6 address" },
        { "[::1", "missing ']'" },
        { "[::1]80", "expected ':PORT' after ']'" },
        { "[::1]:", "the port must be a decimal number 1-65535" },
        { "[1.2.3.4]:80", "brackets are for IPv6 addresses" },
        { "[]:80", "not an IPv4 or IPv6 address" },
        { "[fe80::1%lo]:80", "not an IPv4 or IPv6 address" },
        { "1.2.3.4:80:90", "not an IPv4 or IPv6 address" },
        { "example.com:80", "not an IPv4 or IPv6 address (an IPv6 address with a port needs" },
    };
    struct sl_addr_policy *p = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        if (sl_addr_policy_add_deny(p, bad[i].text, err, sizeof(err)) != SL_EINVAL) {
            fail_msg("accepted \"%s\"", bad[i].text);
        }
        if (strstr(err, bad[i].message) == NULL) {
            fail_msg("\"%s\": message \"%s\" lacks \"%s\"", bad[i].text, err, bad[i].message);
        }
    }
    assert_int_equal(sl_addr_policy_add_allow(p, "10.0.0.0/33", err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "\"10.0.0.0/33\""));
    /* Nothing was added by the failures. */
    assert_int_equal(check(p, "1.2.3.4", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "10.0.0.1", 80), SL_ADDR_PRIVATE);
    sl_addr_policy_destroy(p);
}

static void lists_are_capped(void **state)
{
    struct sl_addr_policy *p = NULL;
    char err[256];
    char entry[64];

    (void)state;
    assert_int_equal(sl_addr_policy_create(&p), 0);
    for (unsigned i = 0; i < SL_ADDR_POLICY_MAX_ENTRIES; i++) {
        (void)snprintf(entry, sizeof(entry), "10.%u.%u.0/24", i / 256, i % 256);
        assert_int_equal(sl_addr_policy_add_allow(p, entry, err, sizeof(err)), 0);
        (void)snprintf(entry, sizeof(entry), "192.0.%u.%u:443", i / 256, i % 256);
        assert_int_equal(sl_addr_policy_add_deny(p, entry, err, sizeof(err)), 0);
    }
    assert_int_equal(sl_addr_policy_add_allow(p, "11.0.0.0/8", err, sizeof(err)), SL_ETOOBIG);
    assert_non_null(strstr(err, "more than 4096 entries"));
    assert_int_equal(sl_addr_policy_add_deny(p, "11.0.0.1", err, sizeof(err)), SL_ETOOBIG);
    assert_int_equal(check(p, "10.15.255.1", 80), SL_ADDR_ALLOWED);
    assert_int_equal(check(p, "10.16.0.1", 80), SL_ADDR_PRIVATE);
    assert_int_equal(check(p, "192.0.15.255", 443), SL_ADDR_DENIED);
    assert_int_equal(check(p, "192.0.15.255", 80), SL_ADDR_ALLOWED);
    sl_addr_policy_destroy(p);
}

static void policy_survives_allocation_failures(void **state)
{
    struct sl_addr_policy *p = NULL;
    char err[256];
    int rc;

    (void)state;
    sl_mem_fail_after(1);
    rc = sl_addr_policy_create(&p);
    sl_mem_fail_after(0);
    assert_int_equal(rc, SL_ENOMEM);
    assert_null(p);
    assert_int_equal(sl_addr_policy_create(&p), 0);
    sl_mem_fail_after(1);
    assert_int_equal(sl_addr_policy_add_allow(p, "10.0.0.0/8", err, sizeof(err)), SL_ENOMEM);
    assert_int_equal(sl_addr_policy_add_deny(p, "10.0.0.1", err, sizeof(err)), SL_ENOMEM);
    sl_mem_fail_after(0);
    assert_int_equal(check(p, "10.0.0.1", 80), SL_ADDR_PRIVATE);
    assert_int_equal(sl_addr_policy_add_allow(p, "10.0.0.0/8", err, sizeof(err)), 0);
    assert_int_equal(sl_addr_policy_add_deny(p, "10.0.0.1", err, sizeof(err)), 0);
    assert_int_equal(check(p, "10.0.0.1", 80), SL_ADDR_DENIED);
    assert_int_equal(check(p, "10.0.0.2", 80), SL_ADDR_ALLOWED);
    sl_addr_policy_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(classes_hold_at_every_ipv4_boundary),
        cmocka_unit_test(classes_hold_at_every_ipv6_boundary),
        cmocka_unit_test(embedded_ipv4_decides_for_the_ipv6_forms),
        cmocka_unit_test(an_empty_policy_is_the_classes_alone),
        cmocka_unit_test(other_families_are_refused),
        cmocka_unit_test(verdicts_have_audit_names),
        cmocka_unit_test(allow_ranges_turn_a_refused_class_into_allowed),
        cmocka_unit_test(deny_entries_win_over_every_allow),
        cmocka_unit_test(wildcard_deny_entries_cover_loopback),
        cmocka_unit_test(deny_entries_refuse_even_without_allows),
        cmocka_unit_test(cidrs_parse_strictly),
        cmocka_unit_test(malformed_cidrs_are_rejected_with_a_reason),
        cmocka_unit_test(malformed_deny_entries_are_rejected_with_a_reason),
        cmocka_unit_test(lists_are_capped),
        cmocka_unit_test(policy_survives_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
