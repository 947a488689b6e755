/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/dashboard.c - the embedded files of the dashboard and their answers.
 */
#include "control/web/dashboard.h"

#include <string.h>

#include "control/web/dashboard_files.h"

/* Defined by control/web/dashboard_blob.c (assembler symbols). */
#define SL_DASHBOARD_EXTERN(sym) \
    extern const uint8_t sym[];  \
    extern const uint64_t sym##_len

#define SL_DASHBOARD_DECLARE(sym, file) SL_DASHBOARD_EXTERN(sym);
SL_DASHBOARD_FILES(SL_DASHBOARD_DECLARE)

/* The longest asset name we look up. */
#define NAME_MAX_BYTES 64

struct type {
    const char *ext;
    const char *content_type;
};

static const struct type types[] = {
    { ".html", "text/html; charset=utf-8" },
    { ".js", "text/javascript; charset=utf-8" },
    { ".css", "text/css; charset=utf-8" },
    { ".svg", "image/svg+xml" },
    { ".png", "image/png" },
    { ".json", "application/json" },
};

const char *sl_dashboard_content_type(const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        size_t e = strlen(types[i].ext);

        if (n > e && strcmp(name + n - e, types[i].ext) == 0) {
            return types[i].content_type;
        }
    }
    return "application/octet-stream";
}

bool sl_dashboard_is_path(const char *path)
{
    size_t n = strlen(SL_DASHBOARD_PREFIX);

    return strncmp(path, SL_DASHBOARD_PREFIX, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool sl_dashboard_find(const char *path, struct sl_dashboard_asset *out)
{
    /* The lengths are link-time constants, so the table is built per call (a few entries). */
#define SL_DASHBOARD_ENTRY(sym, file) { file, NULL, sym, (size_t)sym##_len },
    const struct sl_dashboard_asset table[] = { SL_DASHBOARD_FILES(SL_DASHBOARD_ENTRY) };
#undef SL_DASHBOARD_ENTRY
    const size_t plen = strlen(SL_DASHBOARD_PREFIX "/");
    const char *name;

    if (strncmp(path, SL_DASHBOARD_PREFIX "/", plen) != 0) {
        return false;
    }
    name = path + plen;
    if (name[0] == '\0') {
        name = "index.html";
    }
    if (strlen(name) > NAME_MAX_BYTES) {
        return false;
    }
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(table[i].name, name) == 0) {
            *out = table[i];
            out->content_type = sl_dashboard_content_type(table[i].name);
            return true;
        }
    }
    return false;
}

void sl_dashboard_handle(struct sl_http_exchange *x, const struct sl_http_request *req)
{
    /* On every answer, the errors and the redirect included. */
    static const char *const security[] = {
        "Content-Security-Policy: " SL_DASHBOARD_CSP,
        "X-Content-Type-Options: nosniff",
        "Referrer-Policy: no-referrer",
        "X-Frame-Options: DENY",
        "Cache-Control: no-cache",
        NULL,
    };
    static const char *const moved[] = { "Location: " SL_DASHBOARD_PREFIX "/", NULL };
    static const char *const allow[] = { "Allow: GET, HEAD", NULL };
    /* Errors are JSON, as the API's (docs/reference/api.md, "Errors"). */
    static const char missing[] = "{\"message\":\"no such resource\"}";
    static const char use_get[] = "{\"message\":\"use GET or HEAD\"}";
    struct sl_dashboard_asset a;

    sl_http_exchange_set_headers(x, security);
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        sl_http_respond_headers(x, 405, allow, "application/json", use_get, sizeof(use_get) - 1);
        return;
    }
    if (strcmp(req->path, SL_DASHBOARD_PREFIX) == 0) {
        sl_http_respond_headers(x, 308, moved, NULL, NULL, 0);
        return;
    }
    if (!sl_dashboard_find(req->path, &a)) {
        sl_http_respond(x, 404, "application/json", missing, sizeof(missing) - 1);
        return;
    }
    sl_http_respond(x, 200, a.content_type, a.p, a.n);
}
