/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_audit.c - the audit-log line formatter (sl_audit_format) on hostile field
 * values: every string a request can put in a record (client, environment, method, scheme,
 * host, path, rule, a CONNECT's differing Host header), every number (including NaN and
 * infinite durations, 64-bit byte counts), every kind of source address, every decision (a DNS
 * responder's line too, with its "dns" member), a transparent connection's "mode" and a
 * transfer cut short.
 *
 * Input: a fixed block of HEADER_BYTES bytes (zero-padded when short) gives the numbers, the
 * address, the flags and which strings are NULL; the rest is split at NUL bytes into the eight
 * strings.
 *
 * Invariants, not just "no crash": the line always fits SL_AUDIT_LINE_MAX (a line is never
 * dropped for its size); it is one line ending in '\n' with only printable ASCII before it; it
 * parses as one JSON object without duplicate keys; every field is there with the value given
 * (numbers exactly, the duration to its one decimal and capped, NaN and infinities as null, a
 * NULL string as null); a string of at most
 * its cap of printable ASCII comes back unchanged (the path cut at its first '?' or '#'), and a
 * longer one comes back as its first `cap` bytes followed by "..."; in the host, the path and a
 * CONNECT's Host, a placeholder's random part is masked.
 */
#include <arpa/inet.h>
#include <math.h> /* isfinite */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <jansson.h>

#include "base/err.h"
#include "policy/decision.h"
#include "policy/placeholder.h"
#include "proxy/audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The caps of proxy/audit.c, per string field, in the order of `names`. */
enum {
    F_CLIENT,
    F_ENV,
    F_METHOD,
    F_SCHEME,
    F_HOST,
    F_PATH,
    F_RULE,
    /* Written only when not NULL (a CONNECT whose Host named another host). */
    F_CONNECT_HOST,
    N_FIELDS
};

static const char *const names[N_FIELDS] = {
    "client", "environment", "method", "scheme", "host", "path", "rule", "connect_host_header",
};

static const size_t caps[N_FIELDS] = { 256, 256, 64, 16, 512, 1024, 512, 512 };

/* The "aborted" members a record may carry (header byte 1, bits 5-6; 0: none). */
static const char *const cut_sides[4] = { NULL, "client", "upstream", "both" };
static const char *const cut_causes[4] = { NULL, "send-timeout", "idle-timeout", "reset" };
/* A DNS line's names (header bytes 60-62), "TYPE65535" the longest the responder writes, and a
 * name longer than the 16-byte cap. */
static const char *const dns_names[4] = { "A", "TYPE65535", "NOERROR", "0123456789abcdefXYZ" };

#define HEADER_BYTES 64
#define STRING_MAX   8192

struct input {
    uint8_t h[HEADER_BYTES];
    char s[N_FIELDS][STRING_MAX + 1];
    bool present[N_FIELDS];
};

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static void decode(const uint8_t *data, size_t size, struct input *in)
{
    size_t n = size < HEADER_BYTES ? size : HEADER_BYTES;
    size_t off;

    memset(in->h, 0, sizeof(in->h));
    memcpy(in->h, data, n);
    off = n;
    for (size_t f = 0; f < N_FIELDS; f++) {
        const uint8_t *end = off < size ? memchr(data + off, '\0', size - off) : NULL;
        size_t len = off >= size ? 0 : end != NULL ? (size_t)(end - (data + off)) : size - off;

        if (len > STRING_MAX) {
            len = STRING_MAX;
        }
        if (len > 0) {
            memcpy(in->s[f], data + off, len);
        }
        in->s[f][len] = '\0';
        /* Header byte 0 says which strings are NULL. */
        in->present[f] = (in->h[0] >> f & 1) == 0;
        off = end != NULL ? (size_t)(end - data) + 1 : size;
    }
}

static bool printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f) {
            return false;
        }
    }
    return true;
}

/* The string field `f` came back as `given` says (see the top of the file). */
static void check_string(json_t *obj, size_t f, const char *given)
{
    json_t *v = json_object_get(obj, names[f]);
    size_t n;
    size_t cap = caps[f];
    const char *got;
    size_t got_n;
    static char want[1024 + 2];

    if (f == F_CONNECT_HOST && given == NULL) {
        /* Absent, not null (the caller passes NULL for a line with a path too). */
        SL_BUG_ON(v != NULL);
        return;
    }
    SL_BUG_ON(v == NULL);
    if (given == NULL) {
        SL_BUG_ON(!json_is_null(v));
        return;
    }
    SL_BUG_ON(!json_is_string(v));
    got = json_string_value(v);
    got_n = json_string_length(v);
    n = f == F_PATH ? strcspn(given, "?#") : strlen(given);
    if (!printable(given, n < cap ? n : cap)) {
        return;
    }
    /* The host, the path and a CONNECT's Host come back with any placeholder in them masked
     * (policy/placeholder.h): the proxy masks what it keeps of them, one byte over the cap. */
    if (f == F_HOST || f == F_PATH || f == F_CONNECT_HOST) {
        size_t kept = n < cap + 1 ? n : cap + 1;

        memcpy(want, given, kept);
        want[kept] = '\0';
        sl_placeholder_mask(want, kept);
        given = want;
    }
    if (n <= cap) {
        SL_BUG_ON(got_n != n || memcmp(got, given, n) != 0);
    } else {
        SL_BUG_ON(got_n != cap + 3 || memcmp(got, given, cap) != 0
                  || memcmp(got + cap, "...", 3) != 0);
    }
}

static void check_int(json_t *obj, const char *key, long long want, bool as_real)
{
    json_t *v = json_object_get(obj, key);

    SL_BUG_ON(v == NULL);
    if (as_real) {
        SL_BUG_ON(!json_is_number(v));
        return;
    }
    SL_BUG_ON(!json_is_integer(v) || json_integer_value(v) != want);
}

static void check_src(json_t *obj, const struct sockaddr *sa)
{
    json_t *v = json_object_get(obj, "src");
    char addr[INET6_ADDRSTRLEN];
    char want[INET6_ADDRSTRLEN + 16];

    SL_BUG_ON(v == NULL);
    if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) {
        SL_BUG_ON(!json_is_null(v));
        return;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

        SL_BUG_ON(inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr)) == NULL);
        (void)snprintf(want, sizeof(want), "%s:%u", addr, (unsigned)ntohs(in->sin_port));
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

        SL_BUG_ON(inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr)) == NULL);
        (void)snprintf(want, sizeof(want), "[%s]:%u", addr, (unsigned)ntohs(in6->sin6_port));
    }
    SL_BUG_ON(!json_is_string(v) || strcmp(json_string_value(v), want) != 0);
}

static void check_line(const struct sl_audit_record *r, const char *line, int n)
{
    bool big = r->bytes_up > INT64_MAX || r->bytes_down > INT64_MAX;
    json_error_t err;
    json_t *obj;
    json_t *v;

    SL_BUG_ON(n <= 0 || (size_t)n >= SL_AUDIT_LINE_MAX || strlen(line) != (size_t)n);
    SL_BUG_ON(line[n - 1] != '\n' || line[0] != '{');
    SL_BUG_ON(!printable(line, (size_t)n - 1));
    /* jansson refuses integers beyond long long; a consumer that reads them as doubles is
     * still served a valid document. */
    obj = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES | (big ? JSON_DECODE_INT_AS_REAL : 0),
                     &err);
    SL_BUG_ON(obj == NULL || !json_is_object(obj));
    /* 18 members, "tls":"passthrough" only for a passthrough tunnel, "mode" only for a
     * transparent connection, "dns" only for a DNS line, "connect_host_header" and "aborted"
     * only when given. */
    SL_BUG_ON(json_object_size(obj)
              != 18u + r->passthrough + r->transparent + r->dns
                         + (r->connect_host_header != NULL && r->path == NULL)
                         + (r->aborted_cause != NULL));
    v = json_object_get(obj, "mode");
    SL_BUG_ON(r->transparent != (v != NULL)
              || (v != NULL
                  && (!json_is_string(v) || strcmp(json_string_value(v), "transparent") != 0)));
    v = json_object_get(obj, "dns");
    SL_BUG_ON(r->dns != (v != NULL));
    if (v != NULL) {
        const char *want[3] = { r->dns_type, r->dns_rcode, r->dns_transport };
        const char *keys[3] = { "type", "rcode", "transport" };

        SL_BUG_ON(!json_is_object(v) || json_object_size(v) != 3);
        for (size_t i = 0; i < 3; i++) {
            json_t *m = json_object_get(v, keys[i]);
            size_t len = strlen(want[i]);

            SL_BUG_ON(!json_is_string(m));
            if (len <= 16) {
                SL_BUG_ON(strcmp(json_string_value(m), want[i]) != 0);
            } else {
                SL_BUG_ON(json_string_length(m) != 19
                          || memcmp(json_string_value(m), want[i], 16) != 0);
            }
        }
    }
    v = json_object_get(obj, "aborted");
    SL_BUG_ON((r->aborted_cause != NULL) != (v != NULL));
    if (v != NULL) {
        SL_BUG_ON(!json_is_object(v) || json_object_size(v) != 2
                  || strcmp(json_string_value(json_object_get(v, "side")), r->aborted_side) != 0
                  || strcmp(json_string_value(json_object_get(v, "cause")), r->aborted_cause) != 0);
    }
    v = json_object_get(obj, "tls");
    SL_BUG_ON(r->passthrough != (v != NULL)
              || (v != NULL
                  && (!json_is_string(v) || strcmp(json_string_value(v), "passthrough") != 0)));
    v = json_object_get(obj, "ts");
    SL_BUG_ON(!json_is_string(v) || json_string_length(v) != 24);
    check_string(obj, F_CLIENT, r->client);
    check_string(obj, F_ENV, r->environment);
    check_string(obj, F_METHOD, r->method);
    check_string(obj, F_SCHEME, r->scheme);
    check_string(obj, F_HOST, r->host);
    check_string(obj, F_PATH, r->path);
    check_string(obj, F_RULE, r->rule);
    /* Only on a line without a path (a CONNECT's). */
    check_string(obj, F_CONNECT_HOST, r->path == NULL ? r->connect_host_header : NULL);
    check_src(obj, r->src);
    v = json_object_get(obj, "decision");
    SL_BUG_ON(!json_is_string(v)
              || strcmp(json_string_value(v), r->dns         ? "dns"
                                              : r->allow     ? "allow"
                                              : r->challenge ? "challenge"
                                              : r->error     ? "error"
                                                             : "deny")
                         != 0);
    v = json_object_get(obj, "reason");
    SL_BUG_ON(v == NULL);
    SL_BUG_ON(r->reason == SL_REASON_NONE
                      ? !json_is_null(v)
                      : !json_is_string(v)
                                || strcmp(json_string_value(v), sl_reason_code(r->reason)) != 0);
    v = json_object_get(obj, "credential");
    SL_BUG_ON(!json_is_boolean(v) || json_is_true(v) != r->credential);
    check_int(obj, "port", r->port, big);
    check_int(obj, "status", r->status, big);
    check_int(obj, "bytes_up", (long long)r->bytes_up, big);
    check_int(obj, "bytes_down", (long long)r->bytes_down, big);
    check_int(obj, "policy_version", r->policy_version, big);
    v = json_object_get(obj, "ms");
    if (!isfinite(r->ms)) {
        SL_BUG_ON(!json_is_null(v));
    } else {
        /* Written to one decimal, capped at 1e12 ms either way. */
        double want = r->ms > 1e12 ? 1e12 : r->ms < -1e12 ? -1e12 : r->ms;
        double diff;

        SL_BUG_ON(!json_is_number(v));
        diff = json_number_value(v) - want;
        SL_BUG_ON(diff > 0.05 + 1e-9 * (want < 0 ? -want : want)
                  || -diff > 0.05 + 1e-9 * (want < 0 ? -want : want));
    }
    json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct input in;
    static char line[SL_AUDIT_LINE_MAX];
    struct sockaddr_storage ss;
    struct sl_audit_record r;
    const char *s[N_FIELDS];
    uint64_t ms_bits;
    int n;

    decode(data, size, &in);
    for (size_t f = 0; f < N_FIELDS; f++) {
        s[f] = in.present[f] ? in.s[f] : NULL;
    }
    memset(&ss, 0, sizeof(ss));
    memset(&r, 0, sizeof(r));
    switch (in.h[1] & 3) {
    case 1: {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

        sin->sin_family = AF_INET;
        memcpy(&sin->sin_port, in.h + 2, 2);
        memcpy(&sin->sin_addr, in.h + 4, 4);
        r.src = (const struct sockaddr *)&ss;
        break;
    }
    case 2: {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_port, in.h + 2, 2);
        memcpy(&sin6->sin6_addr, in.h + 4, 16);
        r.src = (const struct sockaddr *)&ss;
        break;
    }
    case 3:
        ss.ss_family = AF_UNIX;
        r.src = (const struct sockaddr *)&ss;
        break;
    default:
        break;
    }
    r.client = s[F_CLIENT];
    r.environment = s[F_ENV];
    r.method = s[F_METHOD];
    r.scheme = s[F_SCHEME];
    r.host = s[F_HOST];
    r.path = s[F_PATH];
    r.rule = s[F_RULE];
    r.connect_host_header = s[F_CONNECT_HOST];
    r.allow = (in.h[1] & 4) != 0;
    r.error = (in.h[1] & 128) != 0;
    r.credential = (in.h[1] & 8) != 0;
    r.passthrough = (in.h[1] & 16) != 0;
    r.aborted_side = cut_sides[in.h[1] >> 5 & 3];
    r.aborted_cause = cut_causes[in.h[1] >> 5 & 3];
    r.challenge = (in.h[21] & 1) != 0;
    r.transparent = (in.h[21] & 2) != 0;
    r.dns = (in.h[21] & 4) != 0;
    r.dns_type = dns_names[in.h[60] & 3];
    r.dns_rcode = dns_names[in.h[61] & 3];
    r.dns_transport = dns_names[in.h[62] & 3];
    r.reason = (enum sl_reason)(in.h[20] % (SL_REASON_LAST + 1));
    memcpy(&r.port, in.h + 22, 2);
    memcpy(&r.status, in.h + 24, sizeof(r.status));
    r.bytes_up = get_u64(in.h + 28);
    r.bytes_down = get_u64(in.h + 36);
    ms_bits = get_u64(in.h + 44);
    memcpy(&r.ms, &ms_bits, sizeof(r.ms));
    r.policy_version = (int64_t)get_u64(in.h + 52);
    n = sl_audit_format(&r, line, sizeof(line));
    check_line(&r, line, n);
    /* A buffer too small is refused cleanly, never written past. */
    if (n > 1) {
        int m = sl_audit_format(&r, line, (size_t)n);

        SL_BUG_ON(m != SL_ETOOBIG || line[0] != '\0');
    }
    return 0;
}
