/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/url.h"

#include <string.h>

static const char root_path[] = "/";

static int refuse(const char **why, const char *msg)
{
    if (why != NULL) {
        *why = msg;
    }
    return SL_EINVAL;
}

/* Case-insensitive match of `word` (lowercase) at the start of `in`. */
static bool has_prefix_ci(struct sl_slice in, const char *word)
{
    size_t n = strlen(word);

    if (in.n < n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t c = in.p[i];

        if (c >= 'A' && c <= 'Z') {
            c = (uint8_t)(c | 0x20);
        }
        if (c != (uint8_t)word[i]) {
            return false;
        }
    }
    return true;
}

static int parse_scheme(struct sl_slice in, struct sl_url *out, size_t *pos, const char **why)
{
    if (has_prefix_ci(in, "https://")) {
        out->scheme = SL_URL_HTTPS;
        *pos = 8;
        return 0;
    }
    if (has_prefix_ci(in, "http://")) {
        out->scheme = SL_URL_HTTP;
        *pos = 7;
        return 0;
    }
    if (memchr(in.p, ':', in.n) == NULL) {
        return refuse(why, "not an absolute URL (expected http:// or https://)");
    }
    return refuse(why, "scheme is not http or https");
}

/* Path and query: visible ASCII (RFC 3986 §3.3, §3.4, loosely); no fragment. `in` starts with
 * '/' or '?', or is empty (`http://h` and `http://h?q` both have the path "/"). */
static int parse_target(struct sl_slice in, struct sl_url *out, const char **why)
{
    size_t q = in.n;

    for (size_t i = 0; i < in.n; i++) {
        uint8_t c = in.p[i];

        if (c == '#') {
            return refuse(why, "fragments ('#') are not allowed");
        }
        if (c <= 0x20 || c >= 0x7f) {
            return refuse(why, "path contains a character that must be percent-encoded");
        }
        if (c == '?' && q == in.n) {
            q = i;
        }
    }
    out->path = q == 0 ? sl_slice_of(root_path, 1) : sl_slice_of(in.p, q);
    out->query = sl_slice_of(in.p + q, in.n - q);
    return 0;
}

int sl_url_parse(struct sl_slice in, struct sl_url *out, const char **why)
{
    size_t pos = 0;
    size_t end;
    struct sl_slice auth;

    if (in.n == 0) {
        return refuse(why, "empty URL");
    }
    SL_TRY(parse_scheme(in, out, &pos, why));
    end = pos;
    while (end < in.n && in.p[end] != '/' && in.p[end] != '?' && in.p[end] != '#') {
        end++;
    }
    auth = sl_slice_of(in.p + pos, end - pos);
    if (auth.n == 0) {
        return refuse(why, "missing host");
    }
    if (memchr(auth.p, '@', auth.n) != NULL) {
        return refuse(why, "user information ('@') is not allowed in the URL");
    }
    SL_TRY(sl_host_parse_authority(auth, 0, &out->host, &out->port, why));
    out->port_given = out->port != 0;
    if (!out->port_given) {
        out->port = out->scheme == SL_URL_HTTPS ? 443 : 80;
    }
    return parse_target(sl_slice_of(in.p + end, in.n - end), out, why);
}

const char *sl_url_scheme_name(enum sl_url_scheme scheme)
{
    switch (scheme) {
    case SL_URL_HTTP:
        return "http";
    case SL_URL_HTTPS:
        return "https";
    }
    return "?";
}
