/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/placeholder.h - placeholder credentials (docs/reference/snapshot.md §3 `placeholders`,
 * docs/reference/proxy.md §4.6): what a sandbox holds in an environment variable instead of a
 * secret, and what the proxy does with it.
 *
 * A credential rule that names a variable (`"placeholder_env": "OPENAI_API_KEY"`) gives each
 * client a random placeholder of one fixed shape, `sluice-ph-` and 40 characters of lowercase
 * base32 (RFC 4648 alphabet: a-z, 2-7; 200 random bits), that stands for the credential's
 * value. On a request its rule lets out over TLS, the proxy puts the value in place of the
 * placeholder in the rule's header (sl_placeholder_replace()); anywhere else (another host, another
 * header, the request target, the host name) a placeholder of the client is a refusal of its
 * own, `placeholder-misuse` (sl_placeholder_scan()). The fixed prefix keeps the scan cheap: a
 * header value is searched for it alone, and only a hit is compared with the client's
 * placeholders; a false match would need the 40 random characters too.
 *
 * Pure code: no allocation, no I/O; the proxy's hot path calls it only for clients that have
 * placeholders.
 */
#ifndef SL_POLICY_PLACEHOLDER_H
#define SL_POLICY_PLACEHOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/slice.h"

#define SL_PLACEHOLDER_PREFIX     "sluice-ph-"
#define SL_PLACEHOLDER_PREFIX_LEN 10
/* Characters of base32 after the prefix, and the random bytes they spell. */
#define SL_PLACEHOLDER_RANDOM_LEN 40
#define SL_PLACEHOLDER_RAW_BYTES  25
#define SL_PLACEHOLDER_LEN        (SL_PLACEHOLDER_PREFIX_LEN + SL_PLACEHOLDER_RANDOM_LEN)
/* Longest variable name (a shell identifier). */
#define SL_PLACEHOLDER_ENV_MAX 128
/* A `Basic` value longer than this (its base64) is not decoded: neither replaced in nor
 * scanned inside (a placeholder in it goes out as it is, and is only the placeholder). */
#define SL_PLACEHOLDER_BASIC_MAX 8192

/* One placeholder of a client, as the snapshot compiled it. Every pointer is borrowed from the
 * snapshot. */
struct sl_placeholder {
    /* The variable it sits in ("OPENAI_API_KEY"). */
    const char *env;
    /* The placeholder, SL_PLACEHOLDER_LEN characters. */
    const char *value;
    /* Its rule's host as the decision names rules (`pattern[:port]`), the header it is replaced
     * in and the value it stands for. The value is a secret: never log or print it. */
    const char *rule;
    const char *header;
    const char *secret;
};

/* Does `s` (`n` bytes) have the shape of a placeholder? */
bool sl_placeholder_is_valid(const char *s, size_t n);

/* Writes the placeholder spelling `raw` (SL_PLACEHOLDER_RAW_BYTES random bytes, the caller's)
 * into `out`, NUL-terminated (SL_PLACEHOLDER_LEN + 1 bytes). */
void sl_placeholder_format(const uint8_t raw[SL_PLACEHOLDER_RAW_BYTES],
                           char out[SL_PLACEHOLDER_LEN + 1]);

/* Is `s` (`n` bytes) a variable name a placeholder may sit in: a shell identifier
 * ([A-Za-z_][A-Za-z0-9_]*) of 1-SL_PLACEHOLDER_ENV_MAX characters? */
bool sl_placeholder_env_ok(const char *s, size_t n);

/* Looks for the placeholders of `set` (`n` of them) in `s`: as they are, and, when `s` is an
 * `Authorization`-style `Basic` value (the scheme in any case, spaces, strict base64 of at most
 * SL_PLACEHOLDER_BASIC_MAX characters), inside its decoded user and password. Returns the first
 * one found other than `except` (NULL: every one counts), or NULL. */
const struct sl_placeholder *sl_placeholder_scan(const struct sl_placeholder *set, size_t n,
                                                 struct sl_slice s,
                                                 const struct sl_placeholder *except);

/* Appends `value` to `b` with every occurrence of `ph`'s placeholder replaced by its secret:
 * in the text as it is, and inside a `Basic` value (as sl_placeholder_scan() reads one) by
 * decoding it, replacing in the user and the password, and encoding it again (`Basic ` and
 * padded base64). `*count` is increased by the replacements made. Returns 0, or SL_ETOOBIG /
 * SL_ENOMEM from `b` (then `b` holds a part of the value). */
SL_MUST_CHECK int sl_placeholder_replace(struct sl_buf *b, struct sl_slice value,
                                         const struct sl_placeholder *ph, unsigned *count);

/* Does `s` (`n` bytes) hold anything of a placeholder's shape (whoever's)? */
bool sl_placeholder_seen(const char *s, size_t n);

/* Overwrites, in place, the 40 random characters of every placeholder-shaped text in `s` (`n`
 * bytes) with '*', so that logs and refusals never show one. */
void sl_placeholder_mask(char *s, size_t n);

#endif
