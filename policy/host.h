/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/host.h - host names, authorities (`host[:port]`) and their normal form
 * (docs/reference/proxy.md §4.3).
 *
 * Every host the policy ever compares goes through sl_host_normalize(): the host of a CONNECT
 * target, of a Host header, of an absolute-form URL, of a rule pattern and of the command line.
 * One function means one idea of "the same host", so a spelling that the matcher sees as
 * different from a rule is also different for the upstream dialler, and the reverse.
 *
 * The normal form is:
 *   - a DNS name: lowercase, one trailing dot removed, labels of 1-63 characters of a-z 0-9 '-'
 *     that neither start nor end with '-', at most 253 characters in all;
 *   - an IPv4 address as a dotted quad. Every spelling that inet_aton() (and so getaddrinfo())
 *     accepts is canonicalised first: 1 to 4 parts, each decimal, octal (leading 0) or hex
 *     (0x), e.g. `2130706433`, `0x7f.1` and `0177.0.0.1` all become `127.0.0.1`, so that a
 *     numeric spelling cannot dodge an IP rule or the private-address check. A name whose last
 *     label looks numeric (all digits, or 0x and hex digits) but which is not a valid IPv4
 *     spelling (`1.2.3.4.5`, `999.1.1.1`) is rejected: it would be ambiguous;
 *   - an IPv6 address in brackets, in the RFC 5952 text of inet_ntop() (`[2001:db8::1]`).
 *     Zone ids (`%eth0`) are rejected; bare IPv6 without brackets is rejected.
 *     IPv4-mapped addresses stay IPv6 (`[::ffff:10.0.0.1]`); they do not match IPv4 rules.
 * Anything else (NUL, spaces, '%', '_', ':', non-ASCII, empty labels as in `a..b`) is refused;
 * the proxy answers such a request with 400, reason `bad-host`.
 *
 * With SL_HOST_GLOB the input is a rule pattern: '*' may also appear in DNS labels (it counts
 * as a label character). Patterns that look like IP addresses with a '*' (`10.0.*.1`, `10.*`)
 * are refused: IP rules match literally only. What else a rule pattern must be (where its '*'
 * may stand, its `xn--` labels) is sl_host_check_pattern()'s; the validators of rules call both.
 *
 * All functions here parse hostile bytes: they are bounded, allocate nothing, never read past
 * `in.n` and accept NUL bytes in the input (to reject them). On failure `*why`, when `why` is
 * not NULL, points to a static English phrase naming the problem ("empty label"), fit to follow
 * "bad host: ".
 */
#ifndef SL_POLICY_HOST_H
#define SL_POLICY_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/slice.h"

/* Longest DNS name in normal form (RFC 1035 §2.3.4 less the root dot). */
#define SL_HOST_NAME_MAX 253

enum sl_host_kind {
    SL_HOST_DNS = 0,
    SL_HOST_IPV4,
    SL_HOST_IPV6,
};

/* Flags of sl_host_normalize() and sl_host_parse_authority(). */
enum sl_host_flag {
    /* The input is a rule pattern: '*' is allowed in DNS names. */
    SL_HOST_GLOB = 1 << 0,
};

/* A host in normal form. A value type: embed it, copy it. */
struct sl_host {
    /* The normal form, NUL-terminated: a DNS name (or pattern), a dotted quad, or an IPv6
     * address in brackets. Never longer than SL_HOST_NAME_MAX. */
    char name[SL_HOST_NAME_MAX + 1];
    /* strlen(name), 1 ... SL_HOST_NAME_MAX. */
    size_t len;
    enum sl_host_kind kind;
    /* The address in network byte order: 4 bytes for IPv4, 16 for IPv6, all zero for DNS. */
    uint8_t addr[16];
};

/* Normalises `in` into `*out`. `flags` is 0 or SL_HOST_GLOB. Returns 0, or SL_EINVAL with
 * `*out` unspecified. Allocates nothing. */
SL_MUST_CHECK int sl_host_normalize(struct sl_slice in, unsigned flags, struct sl_host *out,
                                    const char **why);

/* Parses a decimal port strictly: 1-5 digits, no sign, no leading zero, 1-65535. Returns 0 or
 * SL_EINVAL. */
SL_MUST_CHECK int sl_host_parse_port(struct sl_slice in, uint16_t *port, const char **why);

/* Parses an authority `host[:port]` or `[v6][:port]` (a CONNECT target, a Host header, the host
 * of a rule). The host is normalised as by sl_host_normalize() with `flags`; `*port` is the
 * port, or 0 when none was given (the caller decides whether that is allowed). An empty port
 * (`host:`) is refused. Returns 0 or SL_EINVAL. Allocates nothing. */
SL_MUST_CHECK int sl_host_parse_authority(struct sl_slice in, unsigned flags, struct sl_host *host,
                                          uint16_t *port, const char **why);

/* True when `s` is a normal-form host of its kind, i.e. normalising it again gives it back.
 * Used by assertions and the fuzz targets. */
bool sl_host_is_valid(const struct sl_host *h);

/* Checks a rule pattern `h` (normalised with SL_HOST_GLOB) against what only patterns must be
 * (docs/reference/snapshot.md §3): a '*' stands at the end of the first label, right before a
 * dot, and there is at most one (`*.example.com`, `api-*.example.com`; not `*`, which would match
 * every host, nor `*example.com`, which would match `evilexample.com`); every label that starts
 * with `xn--` is an A-label IDNA2008 accepts (policy/punycode.h). IP literals pass. Returns 0, or
 * SL_EINVAL with `*why` (when not NULL) a static phrase naming the problem. */
SL_MUST_CHECK int sl_host_check_pattern(const struct sl_host *h, const char **why);

/* What normalising the host of the authority `in` changes that its author may not have meant
 * to write (for warnings): letters in upper case, a trailing dot. A bracketed IPv6 literal has
 * no notes. */
enum sl_host_note {
    SL_HOST_NOTE_CASE = 1 << 0,
    SL_HOST_NOTE_TRAILING_DOT = 1 << 1,
};

/* The sl_host_note bits of `in` (an authority as sl_host_parse_authority() takes it, already
 * accepted by it). */
unsigned sl_host_notes(struct sl_slice in);

/* A static phrase for the warning of notes `notes` (not 0): "host names are matched in lower
 * case", "the trailing dot is dropped", or both. */
const char *sl_host_notes_phrase(unsigned notes);

#endif
