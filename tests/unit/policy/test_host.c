/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/policy/test_host.c - the hostile-input parsers of policy/: host normalisation,
 * authorities, absolute URLs and Proxy-Authorization Basic values.
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS for the guard-page test */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/auth.h"
#include "policy/host.h"
#include "policy/url.h"

struct host_case {
    /* Input bytes; `n` overrides strlen() when non-zero (for embedded NULs). */
    const char *in;
    size_t n;
    unsigned flags;
    /* Expected normal form, or NULL when the input must be refused. */
    const char *out;
    enum sl_host_kind kind;
};

static char long_label[64 + 1];
static char name_253[253 + 1];
static char name_254[254 + 1];
static char name_253_dot[254 + 1];

/* Builds names of exact lengths from labels of 63 characters. */
static void build_long_names(void)
{
    memset(long_label, 'a', 64);
    long_label[64] = '\0';
    /* 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 */
    memset(name_253, 'b', 253);
    name_253[63] = name_253[127] = name_253[191] = '.';
    name_253[253] = '\0';
    memcpy(name_254, name_253, 253);
    name_254[253] = 'c';
    name_254[254] = '\0';
    memcpy(name_253_dot, name_253, 253);
    name_253_dot[253] = '.';
    name_253_dot[254] = '\0';
}

static void check_host_case(const struct host_case *c)
{
    struct sl_host h;
    const char *why = NULL;
    size_t n = c->n != 0 ? c->n : strlen(c->in);
    int rc = sl_host_normalize(sl_slice_of(c->in, n), c->flags, &h, &why);

    if (c->out == NULL) {
        if (rc != SL_EINVAL) {
            fail_msg("'%s' should be refused, got '%s'", c->in, h.name);
        }
        assert_non_null(why);
        return;
    }
    if (rc != 0) {
        fail_msg("'%s' should normalise to '%s', refused: %s", c->in, c->out, why);
    }
    assert_string_equal(h.name, c->out);
    assert_int_equal(h.len, strlen(c->out));
    assert_int_equal(h.kind, c->kind);
    assert_true(sl_host_is_valid(&h));
}

static void normalises_dns_names(void **state)
{
    const struct host_case cases[] = {
        { "Example.COM", 0, 0, "example.com", SL_HOST_DNS },
        { "example.com.", 0, 0, "example.com", SL_HOST_DNS },
        { "API.GitHub.COM.", 0, 0, "api.github.com", SL_HOST_DNS },
        { "a", 0, 0, "a", SL_HOST_DNS },
        { "localhost", 0, 0, "localhost", SL_HOST_DNS },
        { "xn--bcher-kva.example", 0, 0, "xn--bcher-kva.example", SL_HOST_DNS },
        { "1-2.example", 0, 0, "1-2.example", SL_HOST_DNS },
        { "123.example.com", 0, 0, "123.example.com", SL_HOST_DNS },
        { "0x1f.example.com", 0, 0, "0x1f.example.com", SL_HOST_DNS },
        { "example.0x1g", 0, 0, "example.0x1g", SL_HOST_DNS },
        { "a.1b", 0, 0, "a.1b", SL_HOST_DNS },
        { name_253, 0, 0, name_253, SL_HOST_DNS },
        { name_253_dot, 0, 0, name_253, SL_HOST_DNS },
        { long_label + 1, 0, 0, long_label + 1, SL_HOST_DNS }, /* 63 characters */
    };

    (void)state;
    build_long_names();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_host_case(&cases[i]);
    }
}

static void refuses_malformed_names(void **state)
{
    const struct host_case cases[] = {
        { "", 0, 0, NULL, 0 },
        { ".", 0, 0, NULL, 0 },
        { "..", 0, 0, NULL, 0 },
        { ".example.com", 0, 0, NULL, 0 },
        { "example.com..", 0, 0, NULL, 0 },
        { "a..b", 0, 0, NULL, 0 },
        { "a b.com", 0, 0, NULL, 0 },
        { " example.com", 0, 0, NULL, 0 },
        { "example.com\t", 0, 0, NULL, 0 },
        { "exa\0mple.com", 12, 0, NULL, 0 },
        { "example.com%00", 0, 0, NULL, 0 },
        { "a_b.example.com", 0, 0, NULL, 0 },
        { "ex\xc3\xa4mple.com", 0, 0, NULL, 0 },
        { "-a.example.com", 0, 0, NULL, 0 },
        { "a-.example.com", 0, 0, NULL, 0 },
        { "a.example.com-", 0, 0, NULL, 0 },
        { "example.com:443", 0, 0, NULL, 0 },
        { "user@example.com", 0, 0, NULL, 0 },
        { "exa/mple.com", 0, 0, NULL, 0 },
        { "*.example.com", 0, 0, NULL, 0 },
        { long_label, 0, 0, NULL, 0 },
        { name_254, 0, 0, NULL, 0 },
        { "::1", 0, 0, NULL, 0 },
    };

    (void)state;
    build_long_names();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_host_case(&cases[i]);
    }
}

static void canonicalises_every_ipv4_spelling(void **state)
{
    const struct host_case cases[] = {
        { "127.0.0.1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "127.0.0.1.", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "2130706433", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "0x7f.1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "0X7F.1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "0177.0.0.1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "0x7F000001", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "017700000001", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "127.1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "127.0.1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "0x7f.0.0.0x1", 0, 0, "127.0.0.1", SL_HOST_IPV4 },
        { "1.0x2.03.4", 0, 0, "1.2.3.4", SL_HOST_IPV4 },
        { "192.168.257", 0, 0, "192.168.1.1", SL_HOST_IPV4 },
        { "10.0.0.07", 0, 0, "10.0.0.7", SL_HOST_IPV4 },
        { "010.0.0.1", 0, 0, "8.0.0.1", SL_HOST_IPV4 },
        { "0", 0, 0, "0.0.0.0", SL_HOST_IPV4 },
        { "0x0", 0, 0, "0.0.0.0", SL_HOST_IPV4 },
        { "4294967295", 0, 0, "255.255.255.255", SL_HOST_IPV4 },
        { "0xffffffff", 0, 0, "255.255.255.255", SL_HOST_IPV4 },
        { "169.254.169.254", 0, 0, "169.254.169.254", SL_HOST_IPV4 },
        { "0251.0376.0251.0376", 0, 0, "169.254.169.254", SL_HOST_IPV4 },
        { "00000000000000000000000000000000000000000000000000000000000000000000001", 0, 0,
          "0.0.0.1", SL_HOST_IPV4 },
        /* IPv4 spellings are patterns too, and canonicalised the same way. */
        { "0x7f.1", 0, SL_HOST_GLOB, "127.0.0.1", SL_HOST_IPV4 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_host_case(&cases[i]);
    }
}

static void refuses_numeric_names_that_are_not_ipv4(void **state)
{
    const struct host_case cases[] = {
        { "1.2.3.4.5", 0, 0, NULL, 0 },    { "999.1.1.1", 0, 0, NULL, 0 },
        { "256.0.0.1", 0, 0, NULL, 0 },    { "1.2.3.256", 0, 0, NULL, 0 },
        { "4294967296", 0, 0, NULL, 0 },   { "0x100000000", 0, 0, NULL, 0 },
        { "1.16777216", 0, 0, NULL, 0 },   { "1.2.65536", 0, 0, NULL, 0 },
        { "08.1.1.1", 0, 0, NULL, 0 },     { "1.2.3.09", 0, 0, NULL, 0 },
        { "0x", 0, 0, NULL, 0 },           { "1.2.3.0x", 0, 0, NULL, 0 },
        { "0xg.1", 0, 0, NULL, 0 },        { "example.123", 0, 0, NULL, 0 },
        { "example.0x1f", 0, 0, NULL, 0 }, { "1..2", 0, 0, NULL, 0 },
        { "1.2.3.4..", 0, 0, NULL, 0 },    { "99999999999999999999999", 0, 0, NULL, 0 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_host_case(&cases[i]);
    }
}

static void canonicalises_ipv6_in_brackets(void **state)
{
    const struct host_case cases[] = {
        { "[::1]", 0, 0, "[::1]", SL_HOST_IPV6 },
        { "[::]", 0, 0, "[::]", SL_HOST_IPV6 },
        { "[2001:DB8:0:0:0:0:0:1]", 0, 0, "[2001:db8::1]", SL_HOST_IPV6 },
        { "[2001:0db8:0000:0000:0000:0000:0000:0001]", 0, 0, "[2001:db8::1]", SL_HOST_IPV6 },
        { "[2001:db8::0:1]", 0, 0, "[2001:db8::1]", SL_HOST_IPV6 },
        /* RFC 5952 §4.2.2: a single zero field is not compressed; §4.2.3: first longest run. */
        { "[2001:db8:0:1:1:1:1:1]", 0, 0, "[2001:db8:0:1:1:1:1:1]", SL_HOST_IPV6 },
        { "[2001:db8:0:0:1:0:0:1]", 0, 0, "[2001:db8::1:0:0:1]", SL_HOST_IPV6 },
        { "[0:0:0:0:0:ffff:7f00:1]", 0, 0, "[::ffff:127.0.0.1]", SL_HOST_IPV6 },
        { "[::FFFF:127.0.0.1]", 0, 0, "[::ffff:127.0.0.1]", SL_HOST_IPV6 },
        { "[fe80::1]", 0, SL_HOST_GLOB, "[fe80::1]", SL_HOST_IPV6 },
    };
    const struct host_case bad[] = {
        { "[::1%eth0]", 0, 0, NULL, 0 },
        { "[fe80::1%25eth0]", 0, 0, NULL, 0 },
        { "[::1", 0, 0, NULL, 0 },
        { "[]", 0, 0, NULL, 0 },
        { "[", 0, 0, NULL, 0 },
        { "[1.2.3.4]", 0, 0, NULL, 0 },
        { "[::g]", 0, 0, NULL, 0 },
        { "[::1]x", 0, 0, NULL, 0 },
        { "[::1].", 0, 0, NULL, 0 },
        { "[1:2:3:4:5:6:7:8:9]", 0, 0, NULL, 0 },
        { "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.2555]", 0, 0, NULL, 0 },
        { "[::1\0]", 6, 0, NULL, 0 },
        { "[*::1]", 0, SL_HOST_GLOB, NULL, 0 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_host_case(&cases[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        check_host_case(&bad[i]);
    }
}

static void allows_wildcards_in_patterns_only(void **state)
{
    const struct host_case cases[] = {
        { "*.GitHub.com", 0, SL_HOST_GLOB, "*.github.com", SL_HOST_DNS },
        { "*", 0, SL_HOST_GLOB, "*", SL_HOST_DNS },
        { "*.*", 0, SL_HOST_GLOB, "*.*", SL_HOST_DNS },
        { "api-*.example.com", 0, SL_HOST_GLOB, "api-*.example.com", SL_HOST_DNS },
        { "*github.com.", 0, SL_HOST_GLOB, "*github.com", SL_HOST_DNS },
        { "*1.example.com", 0, SL_HOST_GLOB, "*1.example.com", SL_HOST_DNS },
        { "10.0.0.*", 0, SL_HOST_GLOB, NULL, 0 },
        { "10.*", 0, SL_HOST_GLOB, NULL, 0 },
        { "*.10", 0, SL_HOST_GLOB, NULL, 0 },
        { "1*.2.3.4", 0, SL_HOST_GLOB, NULL, 0 },
        { "*..example.com", 0, SL_HOST_GLOB, NULL, 0 },
        { "*.", 0, SL_HOST_GLOB, "*", SL_HOST_DNS }, /* one trailing dot goes, as for hosts */
        { "-*.example.com", 0, SL_HOST_GLOB, NULL, 0 },
        { "*_*.example.com", 0, SL_HOST_GLOB, NULL, 0 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_host_case(&cases[i]);
    }
}

/* What only rule patterns must be (sl_host_check_pattern()): a '*' at the end of the first
 * label, right before a dot, at most one; every xn-- label an A-label. And what normalising a
 * pattern changed (sl_host_notes()). */
static void checks_where_a_pattern_puts_its_star_and_its_a_labels(void **state)
{
    static const struct {
        const char *pattern;
        /* NULL: accepted; else a part of the phrase. */
        const char *why;
    } rows[] = {
        { "*.github.com", NULL },
        { "api-*.example.com", NULL },
        { "registry-*.example.org", NULL },
        { "api.github.com", NULL },
        { "10.0.0.7", NULL },
        { "[2001:db8::1]", NULL },
        { "xn--bcher-kva.example", NULL },
        { "*.xn--bcher-kva.example", NULL },
        { "*", "alone" },
        { "*.", "alone" },
        { "*github.test", "right before a dot" },
        { "*1.example.com", "right before a dot" },
        { "a*b.example.org", "right before a dot" },
        { "api.*.example.com", "first label" },
        { "*.*.example.com", "more than one" },
        { "*.*", "more than one" },
        { "xn--zz", "not valid Punycode" },
        { "api.xn--zz.test", "not valid Punycode" },
        { "xn--abc-.test", "starts or ends with '-'" }, /* caught by the label rules first */
        { "xn--*.example.com", "'*' in an xn-- label" },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct sl_host h;
        const char *why = NULL;
        int rc = sl_host_normalize(sl_slice_str(rows[i].pattern), SL_HOST_GLOB, &h, &why);

        print_message("pattern %s\n", rows[i].pattern);
        if (rc == 0) {
            rc = sl_host_check_pattern(&h, &why);
        }
        if (rows[i].why == NULL) {
            assert_int_equal(rc, 0);
        } else {
            assert_int_equal(rc, SL_EINVAL);
            assert_non_null(why);
            if (strstr(why, rows[i].why) == NULL) {
                fail_msg("%s: '%s' lacks '%s'", rows[i].pattern, why, rows[i].why);
            }
        }
    }
    assert_int_equal(sl_host_notes(sl_slice_str("api.github.test")), 0);
    assert_int_equal(sl_host_notes(sl_slice_str("API.GitHub.test:8443")), SL_HOST_NOTE_CASE);
    assert_int_equal(sl_host_notes(sl_slice_str("api.github.test.")), SL_HOST_NOTE_TRAILING_DOT);
    assert_int_equal(sl_host_notes(sl_slice_str("*.Example.org.:8443")),
                     SL_HOST_NOTE_CASE | SL_HOST_NOTE_TRAILING_DOT);
    assert_int_equal(sl_host_notes(sl_slice_str("[2001:DB8::1]:443")), 0);
    assert_string_equal(sl_host_notes_phrase(SL_HOST_NOTE_TRAILING_DOT),
                        "the trailing dot is dropped");
}

/* The parser never reads past `in.n`: the input ends right before a PROT_NONE page. */
static void never_reads_past_the_input(void **state)
{
    const char *inputs[] = { "example.com", "[::1]",   "0x7f.1",   "a..",           "[",
                             "x:",          "[::1]:8", "http://a", "Basic aWQ6dG9r" };
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);

    (void)state;
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + page, (size_t)page, PROT_NONE), 0);
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        size_t n = strlen(inputs[i]);
        uint8_t *p = map + page - n;
        struct sl_host h;
        struct sl_url u;
        uint16_t port;
        char id[SL_AUTH_ID_MAX + 1];
        char token[SL_AUTH_TOKEN_MAX + 1];

        memcpy(p, inputs[i], n);
        for (size_t k = 0; k <= n; k++) {
            struct sl_slice s = sl_slice_of(p + k, n - k);

            assert_true(sl_host_normalize(s, SL_HOST_GLOB, &h, NULL) <= 0);
            assert_true(sl_host_parse_authority(s, 0, &h, &port, NULL) <= 0);
            assert_true(sl_url_parse(s, &u, NULL) <= 0);
            assert_true(sl_auth_parse_basic(s, id, sizeof(id), token, sizeof(token)) <= 0);
        }
    }
    assert_int_equal(munmap(map, (size_t)page * 2), 0);
}

struct authority_case {
    const char *in;
    /* Expected host, or NULL when refused. */
    const char *host;
    uint16_t port;
};

static void parses_authorities_with_strict_ports(void **state)
{
    const struct authority_case cases[] = {
        { "example.com:443", "example.com", 443 },
        { "Example.com.:8443", "example.com", 8443 },
        { "example.com", "example.com", 0 },
        { "example.com:1", "example.com", 1 },
        { "example.com:65535", "example.com", 65535 },
        { "[::1]:8080", "[::1]", 8080 },
        { "[::1]", "[::1]", 0 },
        { "[2001:DB8::1]:443", "[2001:db8::1]", 443 },
        { "2130706433:80", "127.0.0.1", 80 },
        { "0x7f.1:80", "127.0.0.1", 80 },
        { "example.com:", NULL, 0 },
        { "example.com:0", NULL, 0 },
        { "example.com:00", NULL, 0 },
        { "example.com:080", NULL, 0 },
        { "example.com:65536", NULL, 0 },
        { "example.com:99999", NULL, 0 },
        { "example.com:123456", NULL, 0 },
        { "example.com:+80", NULL, 0 },
        { "example.com:-1", NULL, 0 },
        { "example.com: 80", NULL, 0 },
        { "example.com:80 ", NULL, 0 },
        { "example.com:8o", NULL, 0 },
        { "example.com:0x50", NULL, 0 },
        { ":443", NULL, 0 },
        { "", NULL, 0 },
        { "::1:80", NULL, 0 },
        { "[::1]:", NULL, 0 },
        { "[::1]80", NULL, 0 },
        { "[::1]]:80", NULL, 0 },
        { "[::1%eth0]:80", NULL, 0 },
        { "a:1:2", NULL, 0 },
        { "exa mple.com:80", NULL, 0 },
        { "user@example.com:80", NULL, 0 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct authority_case *c = &cases[i];
        struct sl_host h;
        uint16_t port = 7;
        const char *why = NULL;
        int rc = sl_host_parse_authority(sl_slice_str(c->in), 0, &h, &port, &why);

        if (c->host == NULL) {
            if (rc != SL_EINVAL) {
                fail_msg("authority '%s' should be refused", c->in);
            }
            assert_non_null(why);
            continue;
        }
        if (rc != 0) {
            fail_msg("authority '%s' refused: %s", c->in, why);
        }
        assert_string_equal(h.name, c->host);
        assert_int_equal(port, c->port);
    }
}

static void names_the_problem_with_a_port(void **state)
{
    struct sl_host h;
    uint16_t port;
    const char *why = NULL;

    (void)state;
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "empty port");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:70000"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "port out of range");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:+1"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "port is not a decimal number");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:443/x"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "a path after the port (host:port was expected)");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:4430000x"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "port is not a decimal number");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:4430000"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "port out of range");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("https://a.com:443"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "a URL where host:port was expected");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("u:pw@a.com:443"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "userinfo ('@') is not allowed in host:port");
    assert_int_equal(sl_host_parse_authority(sl_slice_str("a.com:1:2"), 0, &h, &port, &why),
                     SL_EINVAL);
    assert_string_equal(why, "IPv6 addresses need brackets");
    assert_int_equal(sl_host_normalize(sl_slice_str("[::1%lo]"), 0, &h, &why), SL_EINVAL);
    assert_string_equal(why, "IPv6 zone ids are not allowed");
    assert_int_equal(sl_host_normalize(sl_slice_str("a..b"), 0, &h, &why), SL_EINVAL);
    assert_string_equal(why, "empty label");
}

struct url_case {
    const char *in;
    /* Expected fields; host NULL when refused. */
    const char *host;
    enum sl_url_scheme scheme;
    uint16_t port;
    bool port_given;
    const char *path;
    const char *query;
};

static bool slice_is(struct sl_slice s, const char *want)
{
    return s.n == strlen(want) && memcmp(s.p, want, s.n) == 0;
}

static void parses_absolute_urls(void **state)
{
    const struct url_case cases[] = {
        { "http://example.com", "example.com", SL_URL_HTTP, 80, false, "/", "" },
        { "https://example.com/", "example.com", SL_URL_HTTPS, 443, false, "/", "" },
        { "HTTPS://Example.COM:8443/a/b?x=1&y", "example.com", SL_URL_HTTPS, 8443, true, "/a/b",
          "?x=1&y" },
        { "HtTp://h.example/?", "h.example", SL_URL_HTTP, 80, false, "/", "?" },
        { "http://h.example?q=1", "h.example", SL_URL_HTTP, 80, false, "/", "?q=1" },
        { "https://[::1]/x", "[::1]", SL_URL_HTTPS, 443, false, "/x", "" },
        { "https://[2001:db8::1]:8443", "[2001:db8::1]", SL_URL_HTTPS, 8443, true, "/", "" },
        { "http://2130706433/", "127.0.0.1", SL_URL_HTTP, 80, false, "/", "" },
        { "http://a.example/p%20q?r=%2F", "a.example", SL_URL_HTTP, 80, false, "/p%20q", "?r=%2F" },
        { "http://a.example/a?b?c", "a.example", SL_URL_HTTP, 80, false, "/a", "?b?c" },
        { "http://user@example.com/", NULL, 0, 0, false, NULL, NULL },
        { "http://user:pw@example.com/", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com@evil.com/", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com/#frag", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com#frag", NULL, 0, 0, false, NULL, NULL },
        { "ftp://example.com/", NULL, 0, 0, false, NULL, NULL },
        { "example.com/path", NULL, 0, 0, false, NULL, NULL },
        { "/path", NULL, 0, 0, false, NULL, NULL },
        { "http:/example.com", NULL, 0, 0, false, NULL, NULL },
        { "http://", NULL, 0, 0, false, NULL, NULL },
        { "http:///path", NULL, 0, 0, false, NULL, NULL },
        { "http://:80/", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com:/", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com:0/", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com:65536/", NULL, 0, 0, false, NULL, NULL },
        { "http://exa mple.com/", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com/a b", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com/\x7f", NULL, 0, 0, false, NULL, NULL },
        { "http://example.com/\xc3\xa4", NULL, 0, 0, false, NULL, NULL },
        { "http://[::1%eth0]/", NULL, 0, 0, false, NULL, NULL },
        { "http://a_b.example/", NULL, 0, 0, false, NULL, NULL },
        { "", NULL, 0, 0, false, NULL, NULL },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct url_case *c = &cases[i];
        struct sl_url u;
        const char *why = NULL;
        int rc = sl_url_parse(sl_slice_str(c->in), &u, &why);

        if (c->host == NULL) {
            if (rc != SL_EINVAL) {
                fail_msg("URL '%s' should be refused", c->in);
            }
            assert_non_null(why);
            continue;
        }
        if (rc != 0) {
            fail_msg("URL '%s' refused: %s", c->in, why);
        }
        assert_string_equal(u.host.name, c->host);
        assert_int_equal(u.scheme, c->scheme);
        assert_int_equal(u.port, c->port);
        assert_int_equal(u.port_given, c->port_given);
        if (!slice_is(u.path, c->path) || !slice_is(u.query, c->query)) {
            fail_msg("URL '%s': path '%.*s' query '%.*s'", c->in, (int)u.path.n,
                     (const char *)u.path.p, (int)u.query.n, (const char *)u.query.p);
        }
    }
    assert_string_equal(sl_url_scheme_name(SL_URL_HTTP), "http");
    assert_string_equal(sl_url_scheme_name(SL_URL_HTTPS), "https");
}

static void url_errors_name_the_problem(void **state)
{
    struct sl_url u;
    const char *why = NULL;

    (void)state;
    assert_int_equal(sl_url_parse(sl_slice_str("http://u@h/"), &u, &why), SL_EINVAL);
    assert_string_equal(why, "user information ('@') is not allowed in the URL");
    assert_int_equal(sl_url_parse(sl_slice_str("http://h/#x"), &u, &why), SL_EINVAL);
    assert_string_equal(why, "fragments ('#') are not allowed");
    assert_int_equal(sl_url_parse(sl_slice_str("gopher://h/"), &u, &why), SL_EINVAL);
    assert_string_equal(why, "scheme is not http or https");
}

struct basic_case {
    const char *in;
    int rc;
    const char *id;
    const char *token;
};

static void parses_basic_proxy_authorization(void **state)
{
    const struct basic_case cases[] = {
        { "Basic aWQ6dG9r", 0, "id", "tok" },
        { "basic aWQ6dG9r", 0, "id", "tok" },
        { "BASIC   aWQ6dG9r  ", 0, "id", "tok" },
        { " \tBasic aWQ6dG9r", 0, "id", "tok" },
        { "Basic\taWQ6dG9r", SL_EINVAL, NULL, NULL }, /* RFC 9110 §11.4: 1*SP */
        { "Basic aWQ6YTpi", 0, "id", "a:b" },
        { "Basic aTp0", 0, "i", "t" },
        { "Basic c2JfNGYyYTpwdF85YzBmZmVl", 0, "sb_4f2a", "pt_9c0ffee" },
        { "Basic aTp0aw==", 0, "i", "tk" },
        { "Bearer aWQ6dG9r", SL_EINVAL, NULL, NULL },
        { "BasicaWQ6dG9r", SL_EINVAL, NULL, NULL },
        { "Basic", SL_EINVAL, NULL, NULL },
        { "Basic ", SL_EINVAL, NULL, NULL },
        { "", SL_EINVAL, NULL, NULL },
        { "Basic aWQ6dG9r=", SL_EINVAL, NULL, NULL },
        { "Basic aWQ6dG9", SL_EINVAL, NULL, NULL },
        { "Basic aWQ6 dG9r", SL_EINVAL, NULL, NULL },
        { "Basic aWQ6dG9r\r\n", SL_EINVAL, NULL, NULL },
        { "Basic !!!!", SL_EINVAL, NULL, NULL },
        { "Basic aTp0ax==", SL_EINVAL, NULL, NULL },     /* non-zero pad bits */
        { "Basic aTp0aw=", SL_EINVAL, NULL, NULL },      /* short padding */
        { "Basic aTp0a===", SL_EINVAL, NULL, NULL },     /* three pad characters */
        { "Basic aT=0aw==", SL_EINVAL, NULL, NULL },     /* padding inside */
        { "Basic aWR0b2s=", SL_EINVAL, NULL, NULL },     /* "idtok": no colon */
        { "Basic OnRvaw==", SL_EINVAL, NULL, NULL },     /* ":tok": empty id */
        { "Basic aWQ6", SL_EINVAL, NULL, NULL },         /* "id:": empty token */
        { "Basic aWQ6dG9rIGVu", SL_EINVAL, NULL, NULL }, /* space in the token */
        { "Basic aWQ6dG9rAQ==", SL_EINVAL, NULL, NULL }, /* control byte */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct basic_case *c = &cases[i];
        char id[SL_AUTH_ID_MAX + 1];
        char token[SL_AUTH_TOKEN_MAX + 1];
        int rc = sl_auth_parse_basic(sl_slice_str(c->in), id, sizeof(id), token, sizeof(token));

        if (rc != c->rc) {
            fail_msg("'%s': got %d, want %d", c->in, rc, c->rc);
        }
        if (rc == 0) {
            assert_string_equal(id, c->id);
            assert_string_equal(token, c->token);
        }
    }
}

static void refuses_basic_parts_longer_than_their_buffers(void **state)
{
    char id[4];
    char token[4];

    (void)state;
    /* "id:tok": the token needs 4 bytes with its terminator, the buffer has 4. */
    assert_int_equal(sl_auth_parse_basic(sl_slice_str("Basic aWQ6dG9r"), id, sizeof(id), token,
                                         sizeof(token)),
                     0);
    assert_int_equal(sl_auth_parse_basic(sl_slice_str("Basic aWQ6dG9r"), id, sizeof(id), token, 3),
                     SL_ETOOBIG);
    assert_int_equal(
            sl_auth_parse_basic(sl_slice_str("Basic aWQ6dG9r"), id, 2, token, sizeof(token)),
            SL_ETOOBIG);
}

static void compares_tokens_by_value(void **state)
{
    (void)state;
    assert_true(sl_auth_equal(sl_slice_str("secret"), sl_slice_str("secret")));
    assert_false(sl_auth_equal(sl_slice_str("secreT"), sl_slice_str("secret")));
    assert_false(sl_auth_equal(sl_slice_str("secret-"), sl_slice_str("secret")));
    assert_false(sl_auth_equal(sl_slice_str("secre"), sl_slice_str("secret")));
    assert_false(sl_auth_equal(sl_slice_str(""), sl_slice_str("secret")));
    assert_false(sl_auth_equal(sl_slice_str("s"), sl_slice_str("")));
    assert_true(sl_auth_equal(sl_slice_str(""), sl_slice_str("")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(normalises_dns_names),
        cmocka_unit_test(refuses_malformed_names),
        cmocka_unit_test(canonicalises_every_ipv4_spelling),
        cmocka_unit_test(refuses_numeric_names_that_are_not_ipv4),
        cmocka_unit_test(canonicalises_ipv6_in_brackets),
        cmocka_unit_test(allows_wildcards_in_patterns_only),
        cmocka_unit_test(checks_where_a_pattern_puts_its_star_and_its_a_labels),
        cmocka_unit_test(never_reads_past_the_input),
        cmocka_unit_test(parses_authorities_with_strict_ports),
        cmocka_unit_test(names_the_problem_with_a_port),
        cmocka_unit_test(parses_absolute_urls),
        cmocka_unit_test(url_errors_name_the_problem),
        cmocka_unit_test(parses_basic_proxy_authorization),
        cmocka_unit_test(refuses_basic_parts_longer_than_their_buffers),
        cmocka_unit_test(compares_tokens_by_value),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
