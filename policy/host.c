/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/punycode.h"

/* The text of a bracketed IPv6 address is at most INET6_ADDRSTRLEN - 1 = 45 characters
 * (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`). */
#define V6_TEXT_MAX 45

static int refuse(const char **why, const char *msg)
{
    if (why != NULL) {
        *why = msg;
    }
    return SL_EINVAL;
}

static bool is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(uint8_t c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hex_value(uint8_t c)
{
    if (is_digit(c)) {
        return (unsigned)(c - '0');
    }
    return (unsigned)((c | 0x20) - 'a' + 10);
}

/* Does the last label look like a number to inet_aton() or to a WHATWG URL parser (all decimal
 * digits, or 0x followed by hex digits)? Such a name is an IPv4 address or nothing. */
static bool ends_in_number(const uint8_t *s, size_t n)
{
    size_t start = n;

    while (start > 0 && s[start - 1] != '.') {
        start--;
    }
    if (start == n) {
        return false;
    }
    if (n - start >= 2 && s[start] == '0' && (s[start + 1] | 0x20) == 'x') {
        for (size_t i = start + 2; i < n; i++) {
            if (!is_hex(s[i])) {
                return false;
            }
        }
        return true;
    }
    for (size_t i = start; i < n; i++) {
        if (!is_digit(s[i])) {
            return false;
        }
    }
    return true;
}

/* One part of an inet_aton() address: decimal, octal with a leading 0, or hex with 0x. At least
 * one digit; the value must fit 32 bits. Advances `*pos`. */
static bool parse_v4_part(const uint8_t *s, size_t n, size_t *pos, uint32_t *out)
{
    size_t i = *pos;
    unsigned base = 10;
    uint64_t v = 0;
    size_t digits = 0;

    if (i + 1 < n && s[i] == '0' && (s[i + 1] | 0x20) == 'x') {
        base = 16;
        i += 2;
    } else if (i + 1 < n && s[i] == '0' && is_digit(s[i + 1])) {
        base = 8;
        i += 1;
    }
    for (; i < n && s[i] != '.'; i++, digits++) {
        unsigned d;

        if (base == 16 ? !is_hex(s[i]) : !is_digit(s[i])) {
            return false;
        }
        d = hex_value(s[i]);
        if (d >= base) {
            return false;
        }
        v = v * base + d;
        if (v > UINT32_MAX) {
            return false;
        }
    }
    if (digits == 0) {
        return false;
    }
    *pos = i;
    *out = (uint32_t)v;
    return true;
}

/* inet_aton() semantics without its leniency about trailing garbage: a, a.b (8.24), a.b.c
 * (8.8.16) or a.b.c.d (8.8.8.8). */
static bool parse_ipv4(const uint8_t *s, size_t n, uint32_t *out)
{
    uint32_t part[4];
    size_t count = 0;
    size_t pos = 0;
    uint32_t v;

    for (;;) {
        if (count == 4 || !parse_v4_part(s, n, &pos, &part[count])) {
            return false;
        }
        count++;
        if (pos == n) {
            break;
        }
        pos++; /* the '.' */
    }
    for (size_t i = 0; i + 1 < count; i++) {
        if (part[i] > 0xff) {
            return false;
        }
    }
    switch (count) {
    case 1:
        v = part[0];
        break;
    case 2:
        SL_ENSURE(part[1] <= 0xffffffu, false);
        v = part[0] << 24 | part[1];
        break;
    case 3:
        SL_ENSURE(part[2] <= 0xffffu, false);
        v = part[0] << 24 | part[1] << 16 | part[2];
        break;
    default:
        SL_ENSURE(part[3] <= 0xffu, false);
        v = part[0] << 24 | part[1] << 16 | part[2] << 8 | part[3];
        break;
    }
    *out = v;
    return true;
}

static int normalize_v6(const uint8_t *s, size_t n, struct sl_host *out, const char **why)
{
    char text[V6_TEXT_MAX + 1];
    struct in6_addr a;

    if (n < 2 || s[n - 1] != ']') {
        return refuse(why, "unterminated '[' in IPv6 address");
    }
    s++;
    n -= 2;
    if (memchr(s, '%', n) != NULL) {
        return refuse(why, "IPv6 zone ids are not allowed");
    }
    if (n == 0 || n > V6_TEXT_MAX || memchr(s, '\0', n) != NULL) {
        return refuse(why, "bad IPv6 address");
    }
    memcpy(text, s, n);
    text[n] = '\0';
    if (inet_pton(AF_INET6, text, &a) != 1) {
        return refuse(why, "bad IPv6 address");
    }
    out->name[0] = '[';
    if (inet_ntop(AF_INET6, &a, out->name + 1, sizeof(out->name) - 2) == NULL) {
        return refuse(why, "bad IPv6 address");
    }
    out->len = strlen(out->name);
    out->name[out->len++] = ']';
    out->name[out->len] = '\0';
    out->kind = SL_HOST_IPV6;
    memcpy(out->addr, a.s6_addr, 16);
    return 0;
}

static void write_ipv4(uint32_t v, struct sl_host *out)
{
    size_t len = 0;

    for (int shift = 24; shift >= 0; shift -= 8) {
        unsigned b = (v >> shift) & 0xff;

        if (b >= 100) {
            out->name[len++] = (char)('0' + b / 100);
        }
        if (b >= 10) {
            out->name[len++] = (char)('0' + b / 10 % 10);
        }
        out->name[len++] = (char)('0' + b % 10);
        if (shift > 0) {
            out->name[len++] = '.';
        }
    }
    out->name[len] = '\0';
    out->len = len;
    out->kind = SL_HOST_IPV4;
    out->addr[0] = (uint8_t)(v >> 24);
    out->addr[1] = (uint8_t)(v >> 16);
    out->addr[2] = (uint8_t)(v >> 8);
    out->addr[3] = (uint8_t)v;
}

/* Lowercases `s` into out->name, refusing every byte that no DNS name or IPv4 spelling has. */
static int copy_lower(const uint8_t *s, size_t n, unsigned flags, struct sl_host *out,
                      const char **why)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];

        if (c >= 'A' && c <= 'Z') {
            c = (uint8_t)(c | 0x20);
        } else if (c == '\0') {
            return refuse(why, "contains a NUL byte");
        } else if (c == ' ' || c == '\t') {
            return refuse(why, "contains white space");
        } else if (c == '%') {
            return refuse(why, "contains '%'");
        } else if (c == '_') {
            return refuse(why, "contains '_'");
        } else if (c >= 0x80) {
            return refuse(why, "contains non-ASCII bytes (IDNs must use their xn-- form)");
        } else if (c == '*' && (flags & SL_HOST_GLOB) == 0) {
            return refuse(why, "contains '*'");
        } else if (!(is_digit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '.' || c == '*')) {
            return refuse(why, "contains a character not allowed in host names");
        }
        out->name[i] = (char)c;
    }
    out->name[n] = '\0';
    out->len = n;
    return 0;
}

/* RFC 1035 §2.3.1 as relaxed by RFC 1123 §2.1, with '*' counting as a label character. Also
 * refuses patterns made of digits and '*' only, which would be IP addresses with a wildcard. */
static int check_labels(const char *s, size_t n, const char **why)
{
    size_t start = 0;
    bool ip_like = true;
    bool has_digit_label = false;

    while (start <= n) {
        const char *dot = memchr(s + start, '.', n - start);
        size_t end = dot != NULL ? (size_t)(dot - s) : n;
        size_t len = end - start;
        bool digits_only = true;

        if (len == 0) {
            return refuse(why, "empty label");
        }
        if (len > 63) {
            return refuse(why, "label longer than 63 characters");
        }
        if (s[start] == '-' || s[end - 1] == '-') {
            return refuse(why, "label starts or ends with '-'");
        }
        for (size_t i = start; i < end; i++) {
            if (!is_digit((uint8_t)s[i])) {
                digits_only = false;
                ip_like = ip_like && s[i] == '*';
            }
        }
        has_digit_label = has_digit_label || digits_only;
        start = end + 1;
    }
    if (ip_like && has_digit_label && memchr(s, '*', n) != NULL) {
        return refuse(why, "'*' is not allowed in IP addresses");
    }
    return 0;
}

int sl_host_normalize(struct sl_slice in, unsigned flags, struct sl_host *out, const char **why)
{
    const uint8_t *s = in.p;
    size_t n = in.n;
    uint32_t v4;

    memset(out->addr, 0, sizeof(out->addr));
    if (n == 0) {
        return refuse(why, "empty host");
    }
    if (s[0] == '[') {
        return normalize_v6(s, n, out, why);
    }
    if (s[n - 1] == '.') {
        n--;
    }
    if (n == 0) {
        return refuse(why, "empty host");
    }
    if (n > SL_HOST_NAME_MAX) {
        return refuse(why, "longer than 253 characters");
    }
    SL_TRY(copy_lower(s, n, flags, out, why));
    if (ends_in_number((const uint8_t *)out->name, n)) {
        if (!parse_ipv4((const uint8_t *)out->name, n, &v4)) {
            return refuse(why, "numeric last label but not an IPv4 address");
        }
        write_ipv4(v4, out);
        return 0;
    }
    SL_TRY(check_labels(out->name, n, why));
    out->kind = SL_HOST_DNS;
    return 0;
}

int sl_host_parse_port(struct sl_slice in, uint16_t *port, const char **why)
{
    uint32_t v = 0;

    if (in.n == 0) {
        return refuse(why, "empty port");
    }
    for (size_t i = 0; i < in.n; i++) {
        if (!is_digit(in.p[i])) {
            return refuse(why, in.p[i] == '/' ? "a path after the port (host:port was expected)"
                                              : "port is not a decimal number");
        }
        v = in.n > 5 ? 0 : v * 10 + (uint32_t)(in.p[i] - '0');
    }
    if (in.n > 5) {
        return refuse(why, "port out of range");
    }
    if (in.p[0] == '0' && in.n > 1) {
        return refuse(why, "port has a leading zero");
    }
    if (v == 0 || v > 65535) {
        return refuse(why, "port out of range");
    }
    *port = (uint16_t)v;
    return 0;
}

int sl_host_parse_authority(struct sl_slice in, unsigned flags, struct sl_host *host,
                            uint16_t *port, const char **why)
{
    size_t host_n = in.n;
    const uint8_t *colon;

    *port = 0;
    if (memchr(in.p, '@', in.n) != NULL) {
        return refuse(why, "userinfo ('@') is not allowed in host:port");
    }
    colon = memchr(in.p, ':', in.n);
    if (colon != NULL && (size_t)(colon - in.p) + 2 < in.n && colon[1] == '/' && colon[2] == '/') {
        return refuse(why, "a URL where host:port was expected");
    }
    if (in.n > 0 && in.p[0] == '[') {
        const uint8_t *close = memchr(in.p, ']', in.n);

        if (close == NULL) {
            return refuse(why, "unterminated '[' in IPv6 address");
        }
        host_n = (size_t)(close - in.p) + 1;
        if (host_n < in.n && in.p[host_n] != ':') {
            return refuse(why, "unexpected characters after ']'");
        }
    } else if (in.n > 0 && (colon = memchr(in.p, ':', in.n)) != NULL) {
        host_n = (size_t)(colon - in.p);
        if (memchr(colon + 1, ':', in.n - host_n - 1) != NULL) {
            return refuse(why, "IPv6 addresses need brackets");
        }
    }
    SL_TRY(sl_host_normalize(sl_slice_of(in.p, host_n), flags, host, why));
    if (host_n < in.n) {
        SL_TRY(sl_host_parse_port(sl_slice_of(in.p + host_n + 1, in.n - host_n - 1), port, why));
    }
    return 0;
}

int sl_host_check_pattern(const struct sl_host *h, const char **why)
{
    const char *s = h->name;
    const char *star = memchr(s, '*', h->len);
    const char *first_dot = memchr(s, '.', h->len);
    size_t start = 0;

    if (h->kind != SL_HOST_DNS) {
        return 0;
    }
    if (star != NULL) {
        if (memchr(star + 1, '*', h->len - (size_t)(star + 1 - s)) != NULL) {
            return refuse(why, "more than one '*' (a pattern has one, at the end of its first "
                               "label: *.example.com, api-*.example.com)");
        }
        if (h->len == 1) {
            return refuse(why, "'*' alone would match every host (an environment whose default "
                               "is \"allow\" does that)");
        }
        if (first_dot != NULL && star > first_dot) {
            return refuse(why, "'*' only in the first label (*.example.com, api-*.example.com)");
        }
        if (star + 1 != first_dot) {
            return refuse(why, "'*' must end the first label, right before a dot: *example.com "
                               "would also match evilexample.com (write *.example.com)");
        }
    }
    while (start < h->len) {
        const char *dot = memchr(s + start, '.', h->len - start);
        size_t end = dot != NULL ? (size_t)(dot - s) : h->len;
        const char *label_why = "";

        if (end - start >= 4 && memcmp(s + start, "xn--", 4) == 0) {
            if (memchr(s + start, '*', end - start) != NULL) {
                return refuse(why, "'*' in an xn-- label");
            }
            if (!sl_punycode_alabel_ok(s + start, end - start, &label_why)) {
                return refuse(why, label_why);
            }
        }
        start = end + 1;
    }
    return 0;
}

unsigned sl_host_notes(struct sl_slice in)
{
    size_t n = in.n;
    const uint8_t *colon;
    unsigned notes = 0;

    if (n == 0 || in.p[0] == '[') {
        return 0;
    }
    colon = memchr(in.p, ':', n);
    if (colon != NULL) {
        n = (size_t)(colon - in.p);
    }
    if (n > 0 && in.p[n - 1] == '.') {
        notes |= SL_HOST_NOTE_TRAILING_DOT;
    }
    for (size_t i = 0; i < n; i++) {
        if (in.p[i] >= 'A' && in.p[i] <= 'Z') {
            notes |= SL_HOST_NOTE_CASE;
            break;
        }
    }
    return notes;
}

const char *sl_host_notes_phrase(unsigned notes)
{
    switch (notes & (SL_HOST_NOTE_CASE | SL_HOST_NOTE_TRAILING_DOT)) {
    case SL_HOST_NOTE_CASE:
        return "host names are matched in lower case";
    case SL_HOST_NOTE_TRAILING_DOT:
        return "the trailing dot is dropped";
    default:
        return "host names are matched in lower case, and the trailing dot is dropped";
    }
}

bool sl_host_is_valid(const struct sl_host *h)
{
    struct sl_host again;

    if (h->len == 0 || h->len > SL_HOST_NAME_MAX || h->name[h->len] != '\0'
        || strlen(h->name) != h->len) {
        return false;
    }
    if (sl_host_normalize(sl_slice_of(h->name, h->len), SL_HOST_GLOB, &again, NULL) != 0) {
        return false;
    }
    return again.kind == h->kind && again.len == h->len && memcmp(again.name, h->name, h->len) == 0
           && memcmp(again.addr, h->addr, sizeof(h->addr)) == 0;
}
