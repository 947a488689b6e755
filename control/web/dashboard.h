/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/dashboard.h - the dashboard's static files (docs/reference/api.md §5.6), served by
 * the control plane at /dashboard/ from copies built into the binary (control/web/dashboard_blob.c
 * embeds control/web/dashboard/ at build time), so the binary alone serves them.
 *
 * Every answer carries a strict Content-Security-Policy (scripts, styles and fetches from the
 * control plane itself only; no inline script or style, no frames, no plugins),
 * `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and `Cache-Control: no-cache`
 * (the files are not fingerprinted, so the browser revalidates). The files need no token; the
 * page sends the user's token with every API call.
 *
 * Threads: sl_dashboard_handle() on the loop (it only copies static memory into the answer);
 * the other functions anywhere.
 */
#ifndef SL_CONTROL_WEB_DASHBOARD_H
#define SL_CONTROL_WEB_DASHBOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/server.h"

#define SL_DASHBOARD_PREFIX "/dashboard"
/* The policy of every dashboard answer. */
#define SL_DASHBOARD_CSP                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "      \
    "frame-ancestors 'none'"

/* One embedded file. */
struct sl_dashboard_asset {
    /* The name under /dashboard/, e.g. "app.js". */
    const char *name;
    const char *content_type;
    const uint8_t *p;
    size_t n;
};

/* The Content-Type of a file name by its extension ("text/html; charset=utf-8", ...), or
 * "application/octet-stream" for an unknown one. Never NULL. */
const char *sl_dashboard_content_type(const char *name);

/* Finds the asset of a request path: "/dashboard/" is index.html, "/dashboard/NAME" is NAME.
 * Returns true with `*out` filled (pointers to static data), false for any other path (no such
 * file, a path outside /dashboard/; a query is not part of `path`). */
bool sl_dashboard_find(const char *path, struct sl_dashboard_asset *out);

/* True when `path` is the dashboard's: "/dashboard" or under "/dashboard/". */
bool sl_dashboard_is_path(const char *path);

/* Answers a request whose path sl_dashboard_is_path(): "/dashboard" → 308 to "/dashboard/";
 * GET or HEAD of an asset → 200 with it; an unknown asset → 404 {"message":"no such resource"};
 * another method → 405 {"message":"use GET or HEAD"} with Allow. Every answer carries the
 * security headers of docs/reference/api.md §5.6. */
void sl_dashboard_handle(struct sl_http_exchange *x, const struct sl_http_request *req);

#endif
