/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/dashboard_files.h - the dashboard's files (control/web/dashboard/), one line each:
 * the symbol control/web/dashboard_blob.c puts the file's bytes at (with SYMBOL_len after it)
 * and the name it is served as under /dashboard/. A new file is one line here and one in
 * SL_DASHBOARD_FILES of control/web/CMakeLists.txt (which rebuilds the blob when it changes).
 */
#ifndef SL_WEB_DASHBOARD_FILES_H
#define SL_WEB_DASHBOARD_FILES_H

#define SL_DASHBOARD_FILES(X)                  \
    X(sl_dashboard_index_html, "index.html")   \
    X(sl_dashboard_app_js, "app.js")           \
    X(sl_dashboard_audit_js, "audit.js")       \
    X(sl_dashboard_jobs_js, "jobs.js")         \
    X(sl_dashboard_overview_js, "overview.js") \
    X(sl_dashboard_sandbox_js, "sandbox.js")   \
    X(sl_dashboard_style_css, "style.css")     \
    X(sl_dashboard_favicon_svg, "favicon.svg")

#endif
