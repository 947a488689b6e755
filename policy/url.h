/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/url.h - absolute-form `http://` and `https://` URLs (RFC 9112 §3.2.2), as sent to a
 * proxy in a plain HTTP request line and as given to `sluice policy explain --url`.
 *
 * The parser is strict, bounded and allocates nothing; the result borrows the input.
 *   - The scheme is `http` or `https`, in any case, followed by `://`.
 *   - The authority is parsed by sl_host_parse_authority() (so the host is in normal form) and
 *     must not carry userinfo: any '@' is refused, since `http://good.com@evil.com/` is a
 *     classic way to make a person and a parser disagree about the host.
 *   - The port defaults to 80 (http) or 443 (https); an explicit port must be 1-65535.
 *   - Path and query are kept as given (visible ASCII only); an empty path means "/".
 *   - A fragment ('#') is refused: a request-target never has one (RFC 9112 §3.2).
 */
#ifndef SL_POLICY_URL_H
#define SL_POLICY_URL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/slice.h"
#include "policy/host.h"

enum sl_url_scheme {
    SL_URL_HTTP = 0,
    SL_URL_HTTPS,
};

struct sl_url {
    enum sl_url_scheme scheme;
    /* The host in normal form. */
    struct sl_host host;
    /* The port: the explicit one, else 80 or 443 by scheme. */
    uint16_t port;
    /* True when the URL named the port. */
    bool port_given;
    /* The path, starting with '/'; borrowed from the input, or a static "/" when the URL had
     * none. Never contains '?' or '#'. */
    struct sl_slice path;
    /* The query including its leading '?', borrowed from the input; n == 0 when absent. */
    struct sl_slice query;
};

/* Parses `in` into `*out`. Returns 0, or SL_EINVAL with `*why` (when `why` is not NULL) set to
 * a static phrase naming the problem, fit to follow "bad URL: ". */
SL_MUST_CHECK int sl_url_parse(struct sl_slice in, struct sl_url *out, const char **why);

/* The scheme's name, "http" or "https". */
const char *sl_url_scheme_name(enum sl_url_scheme scheme);

#endif
