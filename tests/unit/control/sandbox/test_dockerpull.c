/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/sandbox/test_dockerpull.c - the image pull's pieces: the progress stream
 * (split at every byte, CRLF, errors, hostile lines), the X-Registry-Auth value (decoded back and
 * compared, escapes, padding), references split into fromImage/tag/host, and failures named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/sandbox/dockerpull.h"

/* What the daemon sent for a two-layer image, one layer already present. */
static const char stream[] =
        "{\"status\":\"Pulling from test/img\",\"id\":\"v1\"}\r\n"
        "{\"status\":\"Already exists\",\"progressDetail\":{},\"id\":\"aaaaaaaaaaaa\"}\r\n"
        "{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Waiting\",\"progressDetail\":{},\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":1000,\"total\":4000},"
        "\"progress\":\"[=>  ]\",\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":3000,\"total\":4000},"
        "\"id\":\"bbbbbbbbbbbb\"}\r\n";
static const char stream_rest[] =
        "{\"status\":\"Verifying Checksum\",\"progressDetail\":{},\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Download complete\",\"progressDetail\":{},\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Extracting\",\"progressDetail\":{\"current\":4000,\"total\":4000},"
        "\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Pull complete\",\"progressDetail\":{},\"id\":\"bbbbbbbbbbbb\"}\r\n"
        "{\"status\":\"Digest: sha256:00\"}\r\n"
        "{\"status\":\"Status: Downloaded newer image for 127.0.0.1:5000/test/img:v1\"}\r\n";

static void progress_of(const struct sl_dockerpull *p, size_t layers, size_t done, uint64_t bytes,
                        uint64_t total)
{
    struct sl_dockerpull_progress g;

    sl_dockerpull_progress(p, &g);
    assert_int_equal(g.layers, layers);
    assert_int_equal(g.layers_done, done);
    assert_int_equal(g.bytes_done, bytes);
    assert_int_equal(g.bytes_total, total);
}

static void reads_layers_and_bytes_split_anywhere(void **state)
{
    size_t n = strlen(stream);

    (void)state;
    for (size_t cut = 0; cut <= n; cut++) {
        struct sl_dockerpull p;

        sl_dockerpull_init(&p);
        assert_int_equal(sl_dockerpull_feed(&p, stream, cut), 0);
        assert_int_equal(sl_dockerpull_feed(&p, stream + cut, n - cut), 0);
        /* The tag's line ("id":"v1") is no layer. */
        progress_of(&p, 2, 1, 3000, 4000);
        assert_false(p.complete);
        assert_int_equal(sl_dockerpull_feed(&p, stream_rest, strlen(stream_rest)), 0);
        sl_dockerpull_end(&p);
        progress_of(&p, 2, 2, 4000, 4000);
        assert_true(p.complete);
        assert_false(p.failed);
        assert_int_equal(p.skipped, 0);
        sl_dockerpull_finish(&p);
    }
}

static void reads_byte_by_byte_and_a_last_line_without_end(void **state)
{
    static const char s[] = "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":5,"
                            "\"total\":9},\"id\":\"cc\"}\n"
                            "{\"error\":\"boom\"}";
    struct sl_dockerpull p;

    (void)state;
    sl_dockerpull_init(&p);
    for (size_t i = 0; i < strlen(s); i++) {
        assert_int_equal(sl_dockerpull_feed(&p, s + i, 1), 0);
    }
    progress_of(&p, 1, 0, 5, 9);
    assert_false(p.failed);
    sl_dockerpull_end(&p);
    assert_true(p.failed);
    assert_string_equal(p.error, "boom");
    sl_dockerpull_finish(&p);
}

static void keeps_the_first_error_as_one_line(void **state)
{
    static const char s[] = "{\"errorDetail\":{\"message\":\"unauthorized:\\nauthentication "
                            "required\"}}\n"
                            "{\"errorDetail\":{\"message\":\"second\"},\"error\":\"second\"}\n";
    struct sl_dockerpull p;

    (void)state;
    sl_dockerpull_init(&p);
    assert_int_equal(sl_dockerpull_feed(&p, s, strlen(s)), 0);
    assert_true(p.failed);
    assert_string_equal(p.error, "unauthorized: authentication required");
    sl_dockerpull_finish(&p);
}

static void skips_hostile_lines(void **state)
{
    struct sl_dockerpull p;
    struct sl_buf big;
    char line[128];

    (void)state;
    sl_dockerpull_init(&p);
    /* Not JSON, not an object, an overlong line, sizes out of range, a current past total. */
    assert_int_equal(sl_dockerpull_feed(&p, "garbage\n[1,2]\n\n", 15), 0);
    assert_int_equal(p.skipped, 2);
    sl_buf_init(&big, 1u << 20);
    assert_int_equal(sl_buf_append_str(&big, "{\"status\":\"Downloading\",\"id\":\"x\",\"pad\":\""),
                     0);
    for (size_t i = 0; i < SL_DOCKERPULL_LINE_MAX; i++) {
        assert_int_equal(sl_buf_append(&big, "a", 1), 0);
    }
    assert_int_equal(sl_buf_append_str(&big, "\"}\n"), 0);
    assert_int_equal(sl_dockerpull_feed(&p, big.p, big.len), 0);
    sl_buf_finish(&big);
    assert_int_equal(p.skipped, 3);
    assert_int_equal(p.n_layers, 0);
    (void)snprintf(line, sizeof(line),
                   "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":-1,"
                   "\"total\":1e300},\"id\":\"d\"}\n");
    assert_int_equal(sl_dockerpull_feed(&p, line, strlen(line)), 0);
    progress_of(&p, 1, 0, 0, 0);
    (void)snprintf(line, sizeof(line),
                   "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":90,"
                   "\"total\":10},\"id\":\"d\"}\n");
    assert_int_equal(sl_dockerpull_feed(&p, line, strlen(line)), 0);
    progress_of(&p, 1, 0, 10, 10);
    /* More layers than it keeps: the rest are skipped, never written past the array. */
    for (size_t i = 0; i < SL_DOCKERPULL_LAYERS_MAX + 5; i++) {
        (void)snprintf(line, sizeof(line),
                       "{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"l%zu\"}\n",
                       i);
        assert_int_equal(sl_dockerpull_feed(&p, line, strlen(line)), 0);
    }
    assert_int_equal(p.n_layers, SL_DOCKERPULL_LAYERS_MAX);
    assert_int_equal(p.skipped, 3 + 6);
    sl_dockerpull_finish(&p);
}

/* Decodes an X-Registry-Auth value back into its JSON. */
static json_t *decode_auth(const char *v)
{
    unsigned char raw[4096];
    size_t n = 0;

    assert_int_equal(sodium_base642bin(raw, sizeof(raw), v, strlen(v), NULL, &n, NULL,
                                       sodium_base64_VARIANT_URLSAFE),
                     0);
    return json_loadb((const char *)raw, n, 0, NULL);
}

static void encodes_the_registry_auth_header(void **state)
{
    struct sl_buf b;
    json_t *j;

    (void)state;
    sl_buf_init(&b, 1u << 16);
    /* Characters that need JSON escapes, and ones base64url encodes differently from base64. */
    assert_int_equal(sl_dockerpull_auth("bob", "p\"w\\d?>>~\x01", "127.0.0.1:5000", &b), 0);
    assert_null(strchr(sl_buf_cstr(&b), '+'));
    assert_null(strchr(sl_buf_cstr(&b), '/'));
    assert_int_equal(b.len % 4, 0);
    j = decode_auth(sl_buf_cstr(&b));
    assert_non_null(j);
    assert_int_equal(json_object_size(j), 3);
    assert_string_equal(json_string_value(json_object_get(j, "username")), "bob");
    assert_string_equal(json_string_value(json_object_get(j, "password")), "p\"w\\d?>>~\x01");
    assert_string_equal(json_string_value(json_object_get(j, "serveraddress")), "127.0.0.1:5000");
    json_decref(j);
    /* Known bytes: {"username":"u","password":"p","serveraddress":"h"}. */
    sl_buf_reset(&b);
    assert_int_equal(sl_dockerpull_auth("u", "p", "h", &b), 0);
    assert_string_equal(sl_buf_cstr(&b),
                        "eyJ1c2VybmFtZSI6InUiLCJwYXNzd29yZCI6InAiLCJzZXJ2ZXJhZGRyZXNzIjoiaCJ9");
    assert_int_equal(sl_dockerpull_auth("", "p", "h", &b), SL_EINVAL);
    assert_int_equal(sl_dockerpull_auth("u", NULL, "h", &b), SL_EINVAL);
    sl_buf_finish(&b);
}

static void expect_split(const char *ref, const char *name, const char *tag, const char *host,
                         const char *server)
{
    struct sl_dockerpull_ref r;

    assert_int_equal(sl_dockerpull_split(ref, &r), 0);
    assert_string_equal(r.name, name);
    assert_string_equal(r.tag, tag);
    assert_string_equal(r.host, host);
    assert_string_equal(r.server, server);
}

static void splits_references(void **state)
{
    struct sl_dockerpull_ref r;

    (void)state;
    expect_split("python:3.12-slim", "python", "3.12-slim", "docker.io",
                 "https://index.docker.io/v1/");
    expect_split("debian", "debian", "latest", "docker.io", "https://index.docker.io/v1/");
    expect_split("library/debian:12", "library/debian", "12", "docker.io",
                 "https://index.docker.io/v1/");
    expect_split("127.0.0.1:5000/test/img:v1", "127.0.0.1:5000/test/img", "v1", "127.0.0.1:5000",
                 "127.0.0.1:5000");
    expect_split("127.0.0.1:5000/test/img", "127.0.0.1:5000/test/img", "latest", "127.0.0.1:5000",
                 "127.0.0.1:5000");
    expect_split("localhost/img", "localhost/img", "latest", "localhost", "localhost");
    expect_split("ghcr.io/o/r@sha256:abcd", "ghcr.io/o/r", "sha256:abcd", "ghcr.io", "ghcr.io");
    assert_int_equal(sl_dockerpull_split("", &r), SL_EINVAL);
    assert_int_equal(sl_dockerpull_split("img:", &r), SL_EINVAL);
    assert_int_equal(sl_dockerpull_split(":tag", &r), SL_EINVAL);
}

static void names_failures(void **state)
{
    struct sl_dockerpull_ref r;
    char out[512];

    (void)state;
    assert_int_equal(sl_dockerpull_classify(404, "manifest for x:v9 not found: manifest unknown"),
                     SL_DOCKERPULL_NOT_FOUND);
    assert_int_equal(sl_dockerpull_classify(500, "manifest unknown: manifest unknown"),
                     SL_DOCKERPULL_NOT_FOUND);
    assert_int_equal(sl_dockerpull_classify(500, "unauthorized: authentication required"),
                     SL_DOCKERPULL_AUTH);
    assert_int_equal(sl_dockerpull_classify(0, "Get \"https://h/v2/\": no basic auth credentials"),
                     SL_DOCKERPULL_AUTH);
    assert_int_equal(sl_dockerpull_classify(500, "Get \"http://127.0.0.1:1/v2/\": dial tcp "
                                                 "127.0.0.1:1: connect: connection refused"),
                     SL_DOCKERPULL_UNREACHABLE);
    assert_int_equal(sl_dockerpull_classify(500, "x509: certificate signed by unknown authority"),
                     SL_DOCKERPULL_UNREACHABLE);
    assert_int_equal(sl_dockerpull_classify(500, "no space left on device"), SL_DOCKERPULL_OTHER);
    assert_int_equal(sl_dockerpull_classify(500, NULL), SL_DOCKERPULL_OTHER);
    assert_int_equal(sl_dockerpull_split("127.0.0.1:5000/t/i:v1", &r), 0);
    sl_dockerpull_describe(SL_DOCKERPULL_NOT_FOUND, "127.0.0.1:5000/t/i:v1", &r, "x", out,
                           sizeof(out));
    assert_string_equal(out, "image not found: 127.0.0.1:5000/t/i:v1");
    sl_dockerpull_describe(SL_DOCKERPULL_AUTH, "127.0.0.1:5000/t/i:v1", &r, "x", out, sizeof(out));
    assert_string_equal(out, "registry authentication failed for 127.0.0.1:5000");
    sl_dockerpull_describe(SL_DOCKERPULL_UNREACHABLE, "127.0.0.1:5000/t/i:v1", &r,
                           "dial tcp:\nrefused", out, sizeof(out));
    assert_string_equal(out, "registry unreachable: 127.0.0.1:5000: dial tcp: refused");
    sl_dockerpull_describe(SL_DOCKERPULL_OTHER, "127.0.0.1:5000/t/i:v1", &r, NULL, out,
                           sizeof(out));
    assert_string_equal(out, "image pull failed: 127.0.0.1:5000/t/i:v1: no reason given");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_layers_and_bytes_split_anywhere),
        cmocka_unit_test(reads_byte_by_byte_and_a_last_line_without_end),
        cmocka_unit_test(keeps_the_first_error_as_one_line),
        cmocka_unit_test(skips_hostile_lines),
        cmocka_unit_test(encodes_the_registry_auth_header),
        cmocka_unit_test(splits_references),
        cmocka_unit_test(names_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
