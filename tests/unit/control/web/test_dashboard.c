/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/web/test_dashboard.c - the dashboard's embedded files
 * (control/web/dashboard.h): content types by extension, the lookup of request paths (index for
 * "/dashboard/", no escape from the folder, unknown names), and each embedded file equal to its
 * source in control/web/dashboard/ (SLUICE_SRC), so the binary never serves a stale copy; no
 * inline script in the page, and nothing in any script that parses a string as markup or code
 * (each script also loaded by the page).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/web/dashboard.h"
#include "control/web/dashboard_files.h"

/* Every served file's name (control/web/dashboard_files.h). */
#define FILE_NAME(sym, name) name,
static const char *const file_names[] = { SL_DASHBOARD_FILES(FILE_NAME) };

/* Whether `needle` occurs in the n bytes at p (memmem is not POSIX). */
static const void *find_bytes(const uint8_t *p, size_t n, const char *needle)
{
    size_t k = strlen(needle);

    for (size_t i = 0; k <= n && i <= n - k; i++) {
        if (memcmp(p + i, needle, k) == 0) {
            return p + i;
        }
    }
    return NULL;
}

static void content_types_follow_the_extension(void **state)
{
    (void)state;
    assert_string_equal(sl_dashboard_content_type("index.html"), "text/html; charset=utf-8");
    assert_string_equal(sl_dashboard_content_type("app.js"), "text/javascript; charset=utf-8");
    assert_string_equal(sl_dashboard_content_type("style.css"), "text/css; charset=utf-8");
    assert_string_equal(sl_dashboard_content_type("favicon.svg"), "image/svg+xml");
    assert_string_equal(sl_dashboard_content_type("shot.png"), "image/png");
    assert_string_equal(sl_dashboard_content_type("x.exe"), "application/octet-stream");
    assert_string_equal(sl_dashboard_content_type("js"), "application/octet-stream");
    assert_string_equal(sl_dashboard_content_type(".js"), "application/octet-stream");
    assert_string_equal(sl_dashboard_content_type(""), "application/octet-stream");
}

static void the_folder_path_is_the_index(void **state)
{
    struct sl_dashboard_asset a;

    (void)state;
    assert_true(sl_dashboard_find("/dashboard/", &a));
    assert_string_equal(a.name, "index.html");
    assert_string_equal(a.content_type, "text/html; charset=utf-8");
    assert_true(a.n > 100);
    assert_non_null(find_bytes(a.p, a.n, "<script src=\"app.js\""));
}

static void finds_each_asset_with_its_type(void **state)
{
    struct sl_dashboard_asset a;

    (void)state;
    assert_true(sl_dashboard_find("/dashboard/app.js", &a));
    assert_string_equal(a.content_type, "text/javascript; charset=utf-8");
    assert_true(sl_dashboard_find("/dashboard/style.css", &a));
    assert_string_equal(a.content_type, "text/css; charset=utf-8");
    assert_true(sl_dashboard_find("/dashboard/favicon.svg", &a));
    assert_string_equal(a.content_type, "image/svg+xml");
}

static void unknown_and_outside_paths_are_not_found(void **state)
{
    struct sl_dashboard_asset a;
    char longname[200];

    (void)state;
    assert_false(sl_dashboard_find("/dashboard/nope.js", &a));
    assert_false(sl_dashboard_find("/dashboard/../api/v1/me", &a));
    assert_false(sl_dashboard_find("/dashboard/./app.js", &a));
    assert_false(sl_dashboard_find("/dashboard/sub/app.js", &a));
    assert_false(sl_dashboard_find("/dashboard/APP.JS", &a));
    assert_false(sl_dashboard_find("/dashboard", &a));
    assert_false(sl_dashboard_find("/dashboardx/app.js", &a));
    assert_false(sl_dashboard_find("/app.js", &a));
    assert_false(sl_dashboard_find("", &a));
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    memcpy(longname, "/dashboard/", 11);
    assert_false(sl_dashboard_find(longname, &a));
}

static void recognises_the_dashboards_paths(void **state)
{
    (void)state;
    assert_true(sl_dashboard_is_path("/dashboard"));
    assert_true(sl_dashboard_is_path("/dashboard/"));
    assert_true(sl_dashboard_is_path("/dashboard/x"));
    assert_false(sl_dashboard_is_path("/dashboards"));
    assert_false(sl_dashboard_is_path("/api/v1/dashboard"));
    assert_false(sl_dashboard_is_path("/"));
}

static void csp_allows_no_inline_script(void **state)
{
    (void)state;
    assert_non_null(strstr(SL_DASHBOARD_CSP, "default-src 'none'"));
    assert_non_null(strstr(SL_DASHBOARD_CSP, "script-src 'self';"));
    assert_null(strstr(SL_DASHBOARD_CSP, "unsafe-inline"));
    assert_null(strstr(SL_DASHBOARD_CSP, "unsafe-eval"));
    assert_non_null(strstr(SL_DASHBOARD_CSP, "frame-ancestors 'none'"));
}

/* The embedded copy of each file is byte for byte its source. */
static void embedded_files_match_their_sources(void **state)
{
    const char *src = getenv("SLUICE_SRC");

    (void)state;
    if (src == NULL) {
        skip();
    }
    for (size_t i = 0; i < sizeof(file_names) / sizeof(file_names[0]); i++) {
        char path[4096];
        char req[128];
        struct sl_dashboard_asset a;
        uint8_t *file;
        size_t n;
        FILE *f;

        (void)snprintf(path, sizeof(path), "%s/control/web/dashboard/%s", src, file_names[i]);
        (void)snprintf(req, sizeof(req), "/dashboard/%s", file_names[i]);
        assert_true(sl_dashboard_find(req, &a));
        f = fopen(path, "rb");
        assert_non_null(f);
        file = test_malloc(a.n + 1);
        n = fread(file, 1, a.n + 1, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(n, a.n);
        assert_memory_equal(file, a.p, a.n);
        test_free(file);
    }
}

/* No file holds inline script or inline event handlers (the policy would block them). */
static void the_page_has_no_inline_script(void **state)
{
    struct sl_dashboard_asset a;

    (void)state;
    assert_true(sl_dashboard_find("/dashboard/index.html", &a));
    assert_null(find_bytes(a.p, a.n, "<script>"));
    assert_null(find_bytes(a.p, a.n, " onclick="));
    assert_null(find_bytes(a.p, a.n, " style="));
}

/* The scripts build the page with createElement and textContent only: nothing that parses a
 * string as markup or as code (values from the API, such as user and repository names, must never
 * become either). Every .js file served, each also loaded by the page. */
static void the_script_never_parses_strings_as_markup(void **state)
{
    static const char *const banned[] = {
        "innerHTML",    "outerHTML",    "insertAdjacentHTML", "document.write",          "eval(",
        "new Function", "setTimeout('", "setTimeout(\"",      "createContextualFragment"
    };
    struct sl_dashboard_asset index;
    size_t scripts = 0;

    (void)state;
    assert_true(sl_dashboard_find("/dashboard/index.html", &index));
    for (size_t f = 0; f < sizeof(file_names) / sizeof(file_names[0]); f++) {
        const char *name = file_names[f];
        size_t len = strlen(name);
        struct sl_dashboard_asset a;
        char req[128];

        if (len < 3 || strcmp(name + len - 3, ".js") != 0) {
            continue;
        }
        scripts++;
        (void)snprintf(req, sizeof(req), "/dashboard/%s", name);
        assert_true(sl_dashboard_find(req, &a));
        for (size_t i = 0; i < sizeof(banned) / sizeof(banned[0]); i++) {
            if (find_bytes(a.p, a.n, banned[i]) != NULL) {
                fail_msg("%s holds %s", name, banned[i]);
            }
        }
        assert_non_null(find_bytes(a.p, a.n, "textContent"));
        (void)snprintf(req, sizeof(req), "<script src=\"%s\" defer></script>", name);
        if (find_bytes(index.p, index.n, req) == NULL) {
            fail_msg("index.html does not load %s", name);
        }
    }
    assert_true(scripts >= 1);
}

/* The stylesheet's blocks close: every `{` has its `}` (comments and strings aside) and each
 * page's section (a comment opening with "/" "* ---- ") starts at the top level. An unclosed
 * @media block once swallowed the pages after it: their rules applied only on narrow screens
 * (the overview's chart drew black at 1 440 px). */
static void the_stylesheet_closes_every_block(void **state)
{
    struct sl_dashboard_asset css;
    int depth = 0;
    size_t sections = 0;

    (void)state;
    assert_true(sl_dashboard_find("/dashboard/style.css", &css));
    for (size_t i = 0; i < css.n; i++) {
        const char *p = (const char *)css.p + i;

        if (css.n - i >= 2 && p[0] == '/' && p[1] == '*') {
            const char *end = find_bytes((const uint8_t *)p + 2, css.n - i - 2, "*/");

            assert_non_null(end);
            if (css.n - i >= 8 && memcmp(p, "/* ---- ", 8) == 0) {
                if (depth != 0) {
                    fail_msg("style.css: a section starts inside a block, at byte %zu", i);
                }
                sections++;
            }
            i = (size_t)(end - (const char *)css.p) + 1;
        } else if (*p == '"' || *p == '\'') {
            const char *q = memchr(p + 1, *p, css.n - i - 1);

            assert_non_null(q);
            i = (size_t)(q - (const char *)css.p);
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}') {
            if (--depth < 0) {
                fail_msg("style.css: a } closes nothing, at byte %zu", i);
            }
        }
    }
    if (depth != 0) {
        fail_msg("style.css: %d block(s) left open at the end", depth);
    }
    assert_true(sections >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(content_types_follow_the_extension),
        cmocka_unit_test(the_folder_path_is_the_index),
        cmocka_unit_test(finds_each_asset_with_its_type),
        cmocka_unit_test(unknown_and_outside_paths_are_not_found),
        cmocka_unit_test(recognises_the_dashboards_paths),
        cmocka_unit_test(csp_allows_no_inline_script),
        cmocka_unit_test(embedded_files_match_their_sources),
        cmocka_unit_test(the_page_has_no_inline_script),
        cmocka_unit_test(the_script_never_parses_strings_as_markup),
        cmocka_unit_test(the_stylesheet_closes_every_block),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
