/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_audit.c - the audit log: the line format of docs/reference/proxy.md §4.7
 * (valid JSON whatever the request carried, no query string), the writer thread, and what happens
 * when it cannot keep up.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/mem.h"
#include "proxy/audit.h"

static struct sl_audit_record sample(struct sockaddr_in *src)
{
    memset(src, 0, sizeof(*src));
    src->sin_family = AF_INET;
    src->sin_port = htons(40112);
    src->sin_addr.s_addr = htonl(0x0ad50005);
    return (struct sl_audit_record){ .client = "sb_4f2a",
                                     .environment = "ci-python",
                                     .src = (const struct sockaddr *)src,
                                     .method = "GET",
                                     .scheme = "https",
                                     .host = "pkgs.example.org",
                                     .port = 443,
                                     .path = "/simple/?token=secret#frag",
                                     .allow = true,
                                     .reason = SL_REASON_NONE,
                                     .rule = "pkgs.example.org",
                                     .credential = false,
                                     .status = 200,
                                     .bytes_up = 312,
                                     .bytes_down = 40211,
                                     .ms = 41.72,
                                     .policy_version = 7 };
}

static json_t *parse_line(const char *line)
{
    json_error_t e;
    json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &e);

    if (j == NULL) {
        fail_msg("not JSON: %s (%s)", line, e.text);
    }
    return j;
}

/* Formats `r` into `line` (checked: a line is written) and parses that line. */
static json_t *format_json(const struct sl_audit_record *r, char line[SL_AUDIT_LINE_MAX])
{
    assert_true(sl_audit_format(r, line, SL_AUDIT_LINE_MAX) > 0);
    return parse_line(line);
}

static void formats_every_field_of_the_spec(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    int n = sl_audit_format(&r, line, sizeof(line));
    json_t *j;

    (void)state;
    assert_true(n > 0);
    assert_int_equal(line[n - 1], '\n');
    assert_ptr_equal(strchr(line, '\n'), line + n - 1);
    j = parse_line(line);
    assert_string_equal(json_string_value(json_object_get(j, "client")), "sb_4f2a");
    assert_string_equal(json_string_value(json_object_get(j, "environment")), "ci-python");
    assert_string_equal(json_string_value(json_object_get(j, "src")), "10.213.0.5:40112");
    assert_string_equal(json_string_value(json_object_get(j, "method")), "GET");
    assert_string_equal(json_string_value(json_object_get(j, "scheme")), "https");
    assert_string_equal(json_string_value(json_object_get(j, "host")), "pkgs.example.org");
    assert_int_equal(json_integer_value(json_object_get(j, "port")), 443);
    /* Query strings (and fragments) are dropped from the path. */
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/simple/");
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "allow");
    assert_true(json_is_null(json_object_get(j, "reason")));
    assert_string_equal(json_string_value(json_object_get(j, "rule")), "pkgs.example.org");
    assert_true(json_is_false(json_object_get(j, "credential")));
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 200);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes_up")), 312);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes_down")), 40211);
    assert_true(json_real_value(json_object_get(j, "ms")) > 41.6);
    assert_int_equal(json_integer_value(json_object_get(j, "policy_version")), 7);
    assert_non_null(json_string_value(json_object_get(j, "ts")));
    assert_null(strstr(line, "secret"));
    json_decref(j);
}

/* Numbers and the time stamp are written without printf: check their exact text. */
static void writes_numbers_and_time_exactly(void **state)
{
    static const struct {
        double ms;
        const char *text;
    } cases[] = { { 0, "\"ms\":0.0," },
                  { 41.72, "\"ms\":41.7," },
                  { 0.06, "\"ms\":0.1," },
                  { 9.96, "\"ms\":10.0," },
                  { -2.46, "\"ms\":-2.5," },
                  { 123456.74, "\"ms\":123456.7," },
                  { 1e15, "\"ms\":1000000000000.0," } };
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    const char *ts;
    json_t *j;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r.ms = cases[i].ms;
        assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
        if (strstr(line, cases[i].text) == NULL) {
            fail_msg("ms %g: want %s in %s", cases[i].ms, cases[i].text, line);
        }
    }
    r.status = 502;
    r.port = 65535;
    r.bytes_up = UINT64_C(18446744073709551615);
    r.bytes_down = 0;
    r.policy_version = -12;
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, ",\"port\":65535,"));
    assert_non_null(strstr(line, ",\"status\":502,\"bytes_up\":18446744073709551615,"
                                 "\"bytes_down\":0,"));
    assert_non_null(strstr(line, ",\"policy_version\":-12}\n"));
    r.bytes_up = 5; /* jansson reads integers up to INT64_MAX */
    j = format_json(&r, line);
    ts = json_string_value(json_object_get(j, "ts"));
    /* 2026-11-30T10:34:18.318Z */
    assert_non_null(ts);
    assert_int_equal(strlen(ts), 24);
    for (size_t i = 0; i < 24; i++) {
        const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";

        if (shape[i] == 'd') {
            assert_true(ts[i] >= '0' && ts[i] <= '9');
        } else {
            assert_int_equal(ts[i], shape[i]);
        }
    }
    json_decref(j);
}

static void writes_refusals_with_reason_and_nulls(void **state)
{
    struct sl_audit_record r = { .method = "CONNECT",
                                 .scheme = "https",
                                 .host = "evil.example",
                                 .port = 443,
                                 .allow = false,
                                 .reason = SL_REASON_NO_IDENTITY,
                                 .status = 407 };
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;

    (void)state;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "deny");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "no-identity");
    assert_true(json_is_null(json_object_get(j, "client")));
    assert_true(json_is_null(json_object_get(j, "src")));
    assert_true(json_is_null(json_object_get(j, "path")));
    assert_true(json_is_null(json_object_get(j, "rule")));
    json_decref(j);
    /* The 407 that asks for credentials is a challenge, not a refusal; the reason stays. */
    r.challenge = true;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "challenge");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "no-identity");
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 407);
    json_decref(j);
    /* `challenge` means nothing on an allowed request. */
    r.allow = true;
    r.reason = SL_REASON_NONE;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "allow");
    json_decref(j);
}

static void says_error_for_a_failure_and_deny_for_a_refusal(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;

    (void)state;
    r.allow = false;
    r.reason = SL_REASON_UPSTREAM_TLS;
    r.error = true;
    r.status = 502;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "error");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "upstream-tls");
    json_decref(j);
    r.reason = SL_REASON_HOST_NOT_ALLOWED;
    r.error = false;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "deny");
    json_decref(j);
}

static void notes_a_cut_transfer_and_a_connects_other_host(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;
    json_t *a;

    (void)state;
    /* Neither member on an ordinary line. */
    j = format_json(&r, line);
    assert_null(json_object_get(j, "aborted"));
    assert_null(json_object_get(j, "connect_host_header"));
    json_decref(j);
    r.aborted_side = "client";
    r.aborted_cause = "send-timeout";
    r.method = "CONNECT";
    r.path = NULL;
    r.connect_host_header = "127.0.0.1:3128";
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, ",\"bytes_down\":40211,\"aborted\":{\"side\":\"client\","
                                 "\"cause\":\"send-timeout\"},\"ms\":"));
    j = parse_line(line);
    a = json_object_get(j, "aborted");
    assert_string_equal(json_string_value(json_object_get(a, "side")), "client");
    assert_string_equal(json_string_value(json_object_get(a, "cause")), "send-timeout");
    assert_string_equal(json_string_value(json_object_get(j, "connect_host_header")),
                        "127.0.0.1:3128");
    json_decref(j);
}

static void marks_a_passthrough_tunnel_and_only_it(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;

    (void)state;
    j = format_json(&r, line);
    assert_null(json_object_get(j, "tls"));
    json_decref(j);
    r.method = "CONNECT";
    r.path = NULL;
    r.passthrough = true;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "tls")), "passthrough");
    assert_string_equal(json_string_value(json_object_get(j, "method")), "CONNECT");
    assert_int_equal(json_integer_value(json_object_get(j, "bytes_down")), 40211);
    json_decref(j);
}

static void marks_a_transparent_connection_and_a_dns_lookup(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;
    json_t *d;

    (void)state;
    j = format_json(&r, line);
    assert_null(json_object_get(j, "mode"));
    assert_null(json_object_get(j, "dns"));
    json_decref(j);
    r.transparent = true;
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "mode")), "transparent");
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "allow");
    json_decref(j);
    /* A lookup: "decision":"dns" whatever else the record says, the reason marking the name. */
    r = (struct sl_audit_record){ .client = "sb_1",
                                  .environment = "dev",
                                  .src = (const struct sockaddr *)&src,
                                  .method = "DNS",
                                  .host = "api.example.com",
                                  .dns = true,
                                  .dns_type = "AAAA",
                                  .dns_rcode = "NOERROR",
                                  .dns_transport = "udp",
                                  .allow = false,
                                  .reason = SL_REASON_HOST_NOT_ALLOWED,
                                  .policy_version = 3 };
    j = format_json(&r, line);
    assert_string_equal(json_string_value(json_object_get(j, "decision")), "dns");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "host-not-allowed");
    assert_string_equal(json_string_value(json_object_get(j, "method")), "DNS");
    d = json_object_get(j, "dns");
    assert_string_equal(json_string_value(json_object_get(d, "type")), "AAAA");
    assert_string_equal(json_string_value(json_object_get(d, "rcode")), "NOERROR");
    assert_string_equal(json_string_value(json_object_get(d, "transport")), "udp");
    assert_null(json_object_get(j, "mode"));
    json_decref(j);
}

/* Observe (docs/reference/proxy.md §4.7): an allow the policy would have refused is marked,
 * only on an allow. */
static void marks_an_observed_allow_and_only_it(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;

    (void)state;
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_null(strstr(line, "observed"));
    r.observed = true;
    r.would_deny = SL_REASON_HOST_NOT_ALLOWED;
    r.rule = NULL;
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "\"decision\":\"allow\",\"reason\":null,\"observed\":true,"
                                 "\"would_deny\":\"host-not-allowed\",\"rule\":null"));
    j = parse_line(line);
    assert_true(json_is_true(json_object_get(j, "observed")));
    json_decref(j);
    r.allow = false;
    r.reason = SL_REASON_HOST_NOT_ALLOWED;
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_null(strstr(line, "observed"));
}

/* No line shows a placeholder (policy/placeholder.h): its random part is masked wherever the
 * request put it. */
static void masks_placeholders_in_host_path_and_connect_host(void **state)
{
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    char line[SL_AUDIT_LINE_MAX];

    (void)state;
    r.host = "sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.evil.test";
    r.path = "/x/sluice-ph-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/y";
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_null(strstr(line, "aaaaaaaaaa"));
    assert_null(strstr(line, "bbbbbbbbbb"));
    assert_non_null(strstr(line,
                           "\"host\":\"sluice-ph-****************************************.evil"
                           ".test\""));
    assert_non_null(strstr(line, "\"path\":\"/x/sluice-ph-****************************************"
                                 "/y\""));
    r.method = "CONNECT";
    r.path = NULL;
    r.connect_host_header = "sluice-ph-cccccccccccccccccccccccccccccccccccccccc:443";
    assert_true(sl_audit_format(&r, line, sizeof(line)) > 0);
    assert_null(strstr(line, "cccccccccc"));
    assert_non_null(strstr(line, "\"connect_host_header\":\"sluice-ph-**"));
}

static void stays_valid_json_whatever_the_request_carried(void **state)
{
    static const char hostile[] = "/\"quote\\back\x01\x1f\x7f\xff\xc3\xa9\r\nX-Injected: 1";
    struct sl_audit_record r = { .method = "G\"ET",
                                 .scheme = "https",
                                 .host = "a\"b\n",
                                 .port = 443,
                                 .path = hostile,
                                 .allow = false,
                                 .reason = SL_REASON_BAD_HOST };
    char line[SL_AUDIT_LINE_MAX];
    int n;
    json_t *j;

    (void)state;
    n = sl_audit_format(&r, line, sizeof(line));
    assert_true(n > 0);
    assert_ptr_equal(strchr(line, '\n'), line + n - 1);
    j = parse_line(line);
    assert_string_equal(json_string_value(json_object_get(j, "host")), "a\"b\n");
    assert_non_null(strstr(json_string_value(json_object_get(j, "path")), "X-Injected"));
    json_decref(j);
}

static void cuts_long_fields_but_never_drops_the_line(void **state)
{
    char *path = sl_malloc(100000);
    char *host = sl_malloc(100000);
    struct sl_audit_record r = { .method = "GET", .scheme = "https", .port = 443, .allow = true };
    char line[SL_AUDIT_LINE_MAX];
    json_t *j;

    (void)state;
    assert_non_null(path);
    assert_non_null(host);
    /* Worst case for escaping: every byte becomes \u00XX. */
    memset(path, 0x01, 99999);
    path[0] = '/';
    path[99999] = '\0';
    memset(host, 0x02, 99999);
    host[99999] = '\0';
    r.path = path;
    r.host = host;
    r.client = host;
    r.environment = host;
    r.rule = host;
    r.method = host;
    r.scheme = host;
    r.connect_host_header = host;
    r.aborted_side = "upstream";
    r.aborted_cause = "send-timeout";
    r.reason = SL_REASON_UPSTREAM_UNREACHABLE;
    j = format_json(&r, line);
    assert_non_null(strstr(json_string_value(json_object_get(j, "path")), "..."));
    /* A CONNECT's Host takes the room of the path a CONNECT does not have. */
    assert_null(json_object_get(j, "connect_host_header"));
    json_decref(j);
    r.path = NULL;
    j = format_json(&r, line);
    assert_non_null(strstr(json_string_value(json_object_get(j, "connect_host_header")), "..."));
    json_decref(j);
    sl_free(path);
    sl_free(host);
}

struct writer_arg {
    struct sl_audit *a;
    int id;
};

static void *write_many(void *arg)
{
    struct writer_arg *w = arg;
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);

    r.port = (uint16_t)(1000 + w->id);
    for (int i = 0; i < 1000; i++) {
        r.bytes_up = (uint64_t)i;
        sl_audit_write(w->a, &r);
    }
    return NULL;
}

static void writes_every_line_from_many_threads(void **state)
{
    char path[] = "/tmp/sluice-audit-XXXXXX";
    struct writer_arg args[4];
    pthread_t th[4];
    struct sl_audit *a = NULL;
    char err[256];
    char line[SL_AUDIT_LINE_MAX];
    int counts[4] = { 0 };
    int fd = mkstemp(path);
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sl_audit_open(path, 0, &a, err, sizeof(err)), 0);
    for (int i = 0; i < 4; i++) {
        args[i] = (struct writer_arg){ a, i };
        assert_int_equal(pthread_create(&th[i], NULL, write_many, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(sl_audit_dropped(a), 0);
    sl_audit_close(a);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *j = parse_line(line);
        int port = (int)json_integer_value(json_object_get(j, "port"));

        assert_true(port >= 1000 && port < 1004);
        counts[port - 1000]++;
        json_decref(j);
    }
    fclose(f);
    unlink(path);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(counts[i], 1000);
    }
}

static void counts_lines_it_had_to_drop(void **state)
{
    char path[] = "/tmp/sluice-audit-XXXXXX";
    struct sockaddr_in src;
    struct sl_audit_record r = sample(&src);
    struct sl_audit *a = NULL;
    char err[256];
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    /* A pending block smaller than one line: nothing fits, everything is counted. */
    assert_int_equal(sl_audit_open(path, 16, &a, err, sizeof(err)), 0);
    for (int i = 0; i < 10; i++) {
        sl_audit_write(a, &r);
    }
    assert_int_equal(sl_audit_dropped(a), 10);
    sl_audit_close(a);
    unlink(path);
}

static void names_the_file_it_cannot_open(void **state)
{
    struct sl_audit *a = NULL;
    char err[256] = "";

    (void)state;
    assert_true(sl_audit_open("/nonexistent/dir/audit.log", 0, &a, err, sizeof(err)) < 0);
    assert_null(a);
    assert_non_null(strstr(err, "/nonexistent/dir/audit.log"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats_every_field_of_the_spec),
        cmocka_unit_test(writes_numbers_and_time_exactly),
        cmocka_unit_test(writes_refusals_with_reason_and_nulls),
        cmocka_unit_test(says_error_for_a_failure_and_deny_for_a_refusal),
        cmocka_unit_test(notes_a_cut_transfer_and_a_connects_other_host),
        cmocka_unit_test(marks_a_passthrough_tunnel_and_only_it),
        cmocka_unit_test(marks_a_transparent_connection_and_a_dns_lookup),
        cmocka_unit_test(marks_an_observed_allow_and_only_it),
        cmocka_unit_test(masks_placeholders_in_host_path_and_connect_host),
        cmocka_unit_test(stays_valid_json_whatever_the_request_carried),
        cmocka_unit_test(cuts_long_fields_but_never_drops_the_line),
        cmocka_unit_test(writes_every_line_from_many_threads),
        cmocka_unit_test(counts_lines_it_had_to_drop),
        cmocka_unit_test(names_the_file_it_cannot_open),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
