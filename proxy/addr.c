/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"

/* One deny entry: an address, and a port or 0 for every port. */
struct deny_entry {
    /* AF_INET or AF_INET6 (IPv4-mapped entries are stored as AF_INET). */
    int family;
    /* The address in network byte order; 4 bytes used for AF_INET. */
    uint8_t bytes[16];
    /* Host byte order; 0 matches any port. */
    uint16_t port;
};

struct sl_addr_policy {
    /* Allow ranges, owned; `n_allow` used of `cap_allow`. */
    struct sl_addr_cidr *allow;
    size_t n_allow;
    size_t cap_allow;
    /* Deny entries, owned; `n_deny` used of `cap_deny`. */
    struct deny_entry *deny;
    size_t n_deny;
    size_t cap_deny;
};

/* An address about to be dialled, IPv4-mapped IPv6 already turned into IPv4. */
struct ip {
    int family;
    uint8_t bytes[16];
    /* Host byte order. */
    uint16_t port;
};

/* Most IPv4 addresses one IPv6 address can embed (the local-use NAT64 prefix: four positions). */
#define MAX_EMBEDDED 4

struct range4 {
    uint32_t net;
    unsigned bits;
    enum sl_addr_verdict verdict;
};

/* First match wins: the broadcast address comes before the reserved 240/4 that contains it.
 * Ranges not listed (including documentation and benchmarking ones) are allowed. */
static const struct range4 ranges4[] = {
    { 0x00000000u, 8, SL_ADDR_UNSPECIFIED }, /* 0.0.0.0/8, RFC 1122 "this network" */
    { 0x0a000000u, 8, SL_ADDR_PRIVATE },     /* 10.0.0.0/8, RFC 1918 */
    { 0x64400000u, 10, SL_ADDR_CGNAT },      /* 100.64.0.0/10, RFC 6598 */
    { 0x7f000000u, 8, SL_ADDR_LOOPBACK },    /* 127.0.0.0/8 */
    { 0xa9fe0000u, 16, SL_ADDR_LINK_LOCAL }, /* 169.254.0.0/16, RFC 3927; cloud metadata */
    { 0xac100000u, 12, SL_ADDR_PRIVATE },    /* 172.16.0.0/12, RFC 1918 */
    { 0xc0000000u, 24, SL_ADDR_RESERVED },   /* 192.0.0.0/24, RFC 6890 protocol assignments */
    { 0xc0a80000u, 16, SL_ADDR_PRIVATE },    /* 192.168.0.0/16, RFC 1918 */
    { 0xe0000000u, 4, SL_ADDR_MULTICAST },   /* 224.0.0.0/4 */
    { 0xffffffffu, 32, SL_ADDR_BROADCAST },  /* 255.255.255.255 */
    { 0xf0000000u, 4, SL_ADDR_RESERVED },    /* 240.0.0.0/4, RFC 1112 */
};

struct range6 {
    uint8_t net[16];
    unsigned bits;
    enum sl_addr_verdict verdict;
};

/* The IPv6 classes that do not embed an IPv4 address; checked before the embedding forms. */
static const struct range6 ranges6[] = {
    { { 0 }, 128, SL_ADDR_UNSPECIFIED },        /* ::/128 */
    { { [15] = 1 }, 128, SL_ADDR_LOOPBACK },    /* ::1/128 */
    { { 0xfc }, 7, SL_ADDR_PRIVATE },           /* fc00::/7, RFC 4193 */
    { { 0xfe, 0x80 }, 10, SL_ADDR_LINK_LOCAL }, /* fe80::/10 */
    { { 0xfe, 0xc0 }, 10, SL_ADDR_PRIVATE },    /* fec0::/10, site-local */
    { { 0xff }, 8, SL_ADDR_MULTICAST },         /* ff00::/8 */
    { { 0x01, 0x00 }, 64, SL_ADDR_RESERVED },   /* 100::/64, RFC 6666 */
};

/* Prefixes of the IPv6 forms that embed IPv4 addresses. */
static const uint8_t pfx_compat[12] = { 0 };
static const uint8_t pfx_mapped[12] = { [10] = 0xff, [11] = 0xff };
static const uint8_t pfx_translated[12] = { [8] = 0xff, [9] = 0xff };
static const uint8_t pfx_nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
static const uint8_t pfx_nat64_local[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };

static bool prefix_matches(const uint8_t *a, const uint8_t *net, unsigned bits)
{
    size_t whole = bits / 8;
    unsigned rest = bits % 8;

    if (memcmp(a, net, whole) != 0) {
        return false;
    }
    if (rest == 0) {
        return true;
    }
    return ((a[whole] ^ net[whole]) & (uint8_t)(0xffu << (8 - rest))) == 0;
}

static enum sl_addr_verdict class_v4(const uint8_t *a)
{
    uint32_t x = ((uint32_t)a[0] << 24) | ((uint32_t)a[1] << 16) | ((uint32_t)a[2] << 8) | a[3];

    for (size_t i = 0; i < SL_ARRAY_LEN(ranges4); i++) {
        uint32_t mask = ranges4[i].bits == 0 ? 0 : 0xffffffffu << (32 - ranges4[i].bits);

        if ((x & mask) == ranges4[i].net) {
            return ranges4[i].verdict;
        }
    }
    return SL_ADDR_ALLOWED;
}

/* Collects the IPv4 addresses `a` embeds (see addr.h) into `out`; returns how many. */
static size_t embedded_v4(const uint8_t *a, uint8_t out[MAX_EMBEDDED][4])
{
    if (memcmp(a, pfx_mapped, 12) == 0 || memcmp(a, pfx_translated, 12) == 0
        || memcmp(a, pfx_nat64, 12) == 0 || memcmp(a, pfx_compat, 12) == 0) {
        memcpy(out[0], a + 12, 4);
        return 1;
    }
    if (memcmp(a, pfx_nat64_local, 6) == 0) {
        /* RFC 6052 §2.2: bits 64-71 (byte 8) are never part of the IPv4 address. */
        const uint8_t at48[4] = { a[6], a[7], a[9], a[10] };
        const uint8_t at56[4] = { a[7], a[9], a[10], a[11] };

        /* The /96 layout first: it is the usual one, and its class is the one reported. */
        memcpy(out[0], a + 12, 4);
        memcpy(out[1], a + 9, 4);
        memcpy(out[2], at56, 4);
        memcpy(out[3], at48, 4);
        return 4;
    }
    if (a[0] == 0x20 && a[1] == 0x02) {
        /* RFC 3056 §2: 2002:V4ADDR::/48. */
        memcpy(out[0], a + 2, 4);
        return 1;
    }
    if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
        /* RFC 4380 §4: server IPv4 in bits 32-63, client IPv4 inverted in the last 32. */
        memcpy(out[0], a + 4, 4);
        for (size_t i = 0; i < 4; i++) {
            out[1][i] = (uint8_t)~a[12 + i];
        }
        return 2;
    }
    return 0;
}

static enum sl_addr_verdict class_v6(const uint8_t *a, uint8_t emb[MAX_EMBEDDED][4], size_t n)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(ranges6); i++) {
        if (prefix_matches(a, ranges6[i].net, ranges6[i].bits)) {
            return ranges6[i].verdict;
        }
    }
    for (size_t i = 0; i < n; i++) {
        enum sl_addr_verdict v = class_v4(emb[i]);

        if (v != SL_ADDR_ALLOWED) {
            return v;
        }
    }
    if (n == 0 && a[0] == 0) {
        return SL_ADDR_RESERVED; /* ::/8 holds nothing routable beyond the forms above. */
    }
    return SL_ADDR_ALLOWED;
}

static bool load(const struct sockaddr *sa, struct ip *out)
{
    struct sockaddr_in6 s6;
    struct sockaddr_in s4;

    if (sa == NULL) {
        return false;
    }
    if (sa->sa_family == AF_INET) {
        memcpy(&s4, sa, sizeof(s4));
        out->family = AF_INET;
        memcpy(out->bytes, &s4.sin_addr, 4);
        out->port = ntohs(s4.sin_port);
        return true;
    }
    if (sa->sa_family != AF_INET6) {
        return false;
    }
    memcpy(&s6, sa, sizeof(s6));
    out->port = ntohs(s6.sin6_port);
    if (memcmp(s6.sin6_addr.s6_addr, pfx_mapped, 12) == 0) {
        out->family = AF_INET;
        memcpy(out->bytes, s6.sin6_addr.s6_addr + 12, 4);
    } else {
        out->family = AF_INET6;
        memcpy(out->bytes, s6.sin6_addr.s6_addr, 16);
    }
    return true;
}

static bool is_zero(const uint8_t *bytes, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (bytes[i] != 0) {
            return false;
        }
    }
    return true;
}

/* A wildcard entry (0.0.0.0, ::) stands for a listener on every address of this host: it
 * also answers on every loopback address (127.0.0.0/8, and ::1 for ::), which no interface
 * list names one by one. A :: listener may take IPv4 too (dual stack), so :: covers both. */
static bool wildcard_matches(const struct deny_entry *d, int family, const uint8_t *bytes)
{
    if (!is_zero(d->bytes, d->family == AF_INET ? 4 : 16)) {
        return false;
    }
    if (family == AF_INET) {
        return bytes[0] == 127;
    }
    return d->family == AF_INET6 && is_zero(bytes, 15) && bytes[15] == 1;
}

static bool deny_matches(const struct deny_entry *d, int family, const uint8_t *bytes,
                         uint16_t port)
{
    size_t len = family == AF_INET ? 4 : 16;

    if (d->port != 0 && d->port != port) {
        return false;
    }
    return (d->family == family && memcmp(d->bytes, bytes, len) == 0)
           || wildcard_matches(d, family, bytes);
}

static bool is_denied(const struct sl_addr_policy *p, const struct ip *a,
                      uint8_t emb[MAX_EMBEDDED][4], size_t n)
{
    for (size_t i = 0; i < p->n_deny; i++) {
        if (deny_matches(&p->deny[i], a->family, a->bytes, a->port)) {
            return true;
        }
        for (size_t j = 0; j < n; j++) {
            if (deny_matches(&p->deny[i], AF_INET, emb[j], a->port)) {
                return true;
            }
        }
    }
    return false;
}

bool sl_addr_cidr_contains(const struct sl_addr_cidr *cidr, int family, const uint8_t *bytes)
{
    return cidr->family == family && prefix_matches(bytes, cidr->bytes, cidr->prefix_bits);
}

enum sl_addr_verdict sl_addr_check(const struct sl_addr_policy *p, const struct sockaddr *sa)
{
    uint8_t emb[MAX_EMBEDDED][4];
    enum sl_addr_verdict v;
    size_t n = 0;
    struct ip a;

    if (!load(sa, &a)) {
        return SL_ADDR_UNSUPPORTED;
    }
    if (a.family == AF_INET6) {
        n = embedded_v4(a.bytes, emb);
    }
    if (p != NULL && is_denied(p, &a, emb, n)) {
        return SL_ADDR_DENIED;
    }
    v = a.family == AF_INET ? class_v4(a.bytes) : class_v6(a.bytes, emb, n);
    if (v != SL_ADDR_ALLOWED && p != NULL) {
        for (size_t i = 0; i < p->n_allow; i++) {
            if (sl_addr_cidr_contains(&p->allow[i], a.family, a.bytes)) {
                return SL_ADDR_ALLOWED;
            }
        }
    }
    return v;
}

const char *sl_addr_verdict_name(enum sl_addr_verdict v)
{
    switch (v) {
    case SL_ADDR_ALLOWED:
        return "allowed";
    case SL_ADDR_UNSPECIFIED:
        return "unspecified";
    case SL_ADDR_LOOPBACK:
        return "loopback";
    case SL_ADDR_PRIVATE:
        return "private";
    case SL_ADDR_LINK_LOCAL:
        return "link-local";
    case SL_ADDR_CGNAT:
        return "cgnat";
    case SL_ADDR_MULTICAST:
        return "multicast";
    case SL_ADDR_BROADCAST:
        return "broadcast";
    case SL_ADDR_RESERVED:
        return "reserved";
    case SL_ADDR_DENIED:
        return "denied";
    case SL_ADDR_UNSUPPORTED:
        return "unsupported-family";
    }
    return "unknown";
}

/* Copies `s` for an error message: at most 64 bytes, anything unprintable as '?', so that a
 * hostile entry cannot put control characters into a log line. */
static void quote(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s[i] != '\0' && i + 1 < len && i < 64; i++) {
        buf[i] = s[i];
        if (s[i] < 0x20 || s[i] >= 0x7f) {
            buf[i] = '?';
        }
    }
    buf[i] = '\0';
    if (s[i] != '\0' && len > 4 && i >= 3) {
        memcpy(buf + i - 3, "...", 3);
    }
}

/* Parses `n` bytes of `s` as an address with inet_pton. IPv4-mapped IPv6 turns into IPv4 when
 * `unmap` is set. Returns the family, or 0. */
static int parse_ip(const char *s, size_t n, bool unmap, uint8_t bytes[16])
{
    char buf[INET6_ADDRSTRLEN];

    if (n == 0 || n >= sizeof(buf)) {
        return 0;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    memset(bytes, 0, 16);
    if (inet_pton(AF_INET, buf, bytes) == 1) {
        return AF_INET;
    }
    if (inet_pton(AF_INET6, buf, bytes) != 1) {
        return 0;
    }
    if (unmap && memcmp(bytes, pfx_mapped, 12) == 0) {
        memmove(bytes, bytes + 12, 4);
        memset(bytes + 4, 0, 12);
        return AF_INET;
    }
    return AF_INET6;
}

/* Parses 1-`max_digits` plain decimal digits (no sign, no leading zero) up to `max`. */
static bool parse_uint(const char *s, size_t max_digits, unsigned max, unsigned *out)
{
    size_t n = strlen(s);
    unsigned v = 0;

    if (n == 0 || n > max_digits || (n > 1 && s[0] == '0')) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = v;
    return true;
}

int sl_addr_parse_cidr(const char *s, struct sl_addr_cidr *out, char *err, size_t errlen)
{
    struct sl_addr_cidr c = { 0 };
    const char *slash;
    unsigned max;
    char q[80];

    SL_ENSURE(s != NULL && out != NULL, SL_EINVAL);
    quote(s, q, sizeof(q));
    slash = strchr(s, '/');
    c.family = parse_ip(s, slash != NULL ? (size_t)(slash - s) : strlen(s), false, c.bytes);
    if (c.family == 0) {
        (void)snprintf(err, errlen, "\"%s\": not an IPv4 or IPv6 address", q);
        return SL_EINVAL;
    }
    max = c.family == AF_INET ? 32 : 128;
    c.prefix_bits = max;
    if (slash != NULL && !parse_uint(slash + 1, 3, 999, &c.prefix_bits)) {
        (void)snprintf(err, errlen, "\"%s\": the prefix length must be a decimal number", q);
        return SL_EINVAL;
    }
    if (c.prefix_bits > max) {
        (void)snprintf(err, errlen, "\"%s\": prefix length %u is out of range 0-%u", q,
                       c.prefix_bits, max);
        return SL_EINVAL;
    }
    for (unsigned bit = c.prefix_bits; bit < max; bit++) {
        if (c.bytes[bit / 8] & (0x80u >> (bit % 8))) {
            struct sl_addr_cidr net = c;
            char text[INET6_ADDRSTRLEN];

            for (unsigned b = c.prefix_bits; b < max; b++) {
                net.bytes[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
            }
            if (inet_ntop(c.family, net.bytes, text, sizeof(text)) == NULL) {
                text[0] = '\0';
            }
            (void)snprintf(err, errlen, "\"%s\": host bits are set past /%u (did you mean %s/%u?)",
                           q, c.prefix_bits, text, c.prefix_bits);
            return SL_EINVAL;
        }
    }
    if (c.family == AF_INET6 && c.prefix_bits >= 96 && memcmp(c.bytes, pfx_mapped, 12) == 0) {
        c.family = AF_INET;
        c.prefix_bits -= 96;
        memmove(c.bytes, c.bytes + 12, 4);
        memset(c.bytes + 4, 0, 12);
    }
    *out = c;
    return 0;
}

int sl_addr_policy_create(struct sl_addr_policy **out)
{
    struct sl_addr_policy *p = sl_calloc(1, sizeof(*p));

    if (p == NULL) {
        return SL_ENOMEM;
    }
    *out = p;
    return 0;
}

void sl_addr_policy_destroy(struct sl_addr_policy *p)
{
    if (p == NULL) {
        return;
    }
    sl_free(p->allow);
    sl_free(p->deny);
    sl_free(p);
}

/* Makes room for one more element of `size` bytes in the array `*items` of `*cap` slots. */
static int reserve(void **items, size_t *cap, size_t used, size_t size)
{
    size_t want;
    void *grown;

    if (used < *cap) {
        return 0;
    }
    if (used >= SL_ADDR_POLICY_MAX_ENTRIES) {
        return SL_ETOOBIG;
    }
    want = *cap == 0 ? 8 : *cap * 2;
    if (want > SL_ADDR_POLICY_MAX_ENTRIES) {
        want = SL_ADDR_POLICY_MAX_ENTRIES;
    }
    grown = sl_realloc(*items, want * size);
    if (grown == NULL) {
        return SL_ENOMEM;
    }
    *items = grown;
    *cap = want;
    return 0;
}

/* Appends the `size` bytes at `item` to the array at `*items` of `*n` entries and capacity
 * `*cap`, growing it. On failure the array is unchanged and `err` says why. */
static int append_entry(void **items, size_t *cap, size_t *n, const void *item, size_t size,
                        char *err, size_t errlen)
{
    int rc = reserve(items, cap, *n, size);

    if (rc < 0) {
        if (rc == SL_ETOOBIG) {
            (void)snprintf(err, errlen, "more than %u entries", SL_ADDR_POLICY_MAX_ENTRIES);
        } else {
            (void)snprintf(err, errlen, "out of memory");
        }
        return rc;
    }
    memcpy((uint8_t *)*items + *n * size, item, size);
    (*n)++;
    return 0;
}

int sl_addr_policy_add_allow(struct sl_addr_policy *p, const char *cidr, char *err, size_t errlen)
{
    struct sl_addr_cidr c;
    void *items;
    int rc;

    SL_ENSURE(p != NULL, SL_EINVAL);
    SL_TRY(sl_addr_parse_cidr(cidr, &c, err, errlen));
    items = p->allow;
    rc = append_entry(&items, &p->cap_allow, &p->n_allow, &c, sizeof(c), err, errlen);
    p->allow = items;
    return rc;
}

/* Splits a deny entry into its address text and port text (NULL for none). */
static int split_deny(const char *s, const char **host, size_t *host_len, const char **port,
                      bool *bracketed, const char **why)
{
    const char *colon = strchr(s, ':');

    *port = NULL;
    *bracketed = s[0] == '[';
    if (*bracketed) {
        const char *close = strchr(s, ']');

        if (close == NULL) {
            *why = "missing ']'";
            return SL_EINVAL;
        }
        *host = s + 1;
        *host_len = (size_t)(close - s - 1);
        if (close[1] == ':') {
            *port = close + 2;
        } else if (close[1] != '\0') {
            *why = "expected ':PORT' after ']'";
            return SL_EINVAL;
        }
        return 0;
    }
    *host = s;
    *host_len = strlen(s);
    if (colon != NULL && strchr(colon + 1, ':') == NULL) {
        /* One colon: IPv4 address and port. Two or more: a bare IPv6 address. */
        *host_len = (size_t)(colon - s);
        *port = colon + 1;
    }
    return 0;
}

int sl_addr_policy_add_deny(struct sl_addr_policy *p, const char *entry, char *err, size_t errlen)
{
    struct deny_entry d = { 0 };
    const char *why = NULL;
    const char *host;
    const char *port;
    size_t host_len;
    bool bracketed;
    unsigned v = 0;
    void *items;
    char q[80];
    int rc;

    SL_ENSURE(p != NULL && entry != NULL, SL_EINVAL);
    quote(entry, q, sizeof(q));
    if (split_deny(entry, &host, &host_len, &port, &bracketed, &why) < 0) {
        (void)snprintf(err, errlen, "\"%s\": %s", q, why);
        return SL_EINVAL;
    }
    d.family = parse_ip(host, host_len, true, d.bytes);
    if (d.family == 0) {
        (void)snprintf(err, errlen, "\"%s\": not an IPv4 or IPv6 address%s", q,
                       bracketed || port == NULL ? ""
                                                 : " (an IPv6 address with a port needs brackets)");
        return SL_EINVAL;
    }
    if (bracketed && memchr(host, ':', host_len) == NULL) {
        (void)snprintf(err, errlen, "\"%s\": brackets are for IPv6 addresses", q);
        return SL_EINVAL;
    }
    if (port != NULL && !parse_uint(port, 5, 65535, &v)) {
        v = 0;
    }
    if (port != NULL && v == 0) {
        (void)snprintf(err, errlen, "\"%s\": the port must be a decimal number 1-65535", q);
        return SL_EINVAL;
    }
    d.port = (uint16_t)v;
    items = p->deny;
    rc = append_entry(&items, &p->cap_deny, &p->n_deny, &d, sizeof(d), err, errlen);
    p->deny = items;
    return rc;
}
