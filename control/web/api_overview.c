/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_overview.c - GET /api/v1/overview (docs/reference/api.md §5.7), the dashboard's
 * overview in one answer, built in two halves. The job (thread pool) counts the decisions the
 * caller may see per minute over the last hour from the proxy's audit log
 * (sl_audittail_per_minute(), the audit tail's owner rule) and the caller's running and queued
 * jobs from the store. The loop then completes the document (sl__api_overview_finish()) after
 * the daemon's status hook filled it as for GET /api/v1/status: the snapshot's version and each
 * proxy come from there, and the caller's open sandboxes from the sandbox manager.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/log.h"
#include "control/jobs/jobs.h"
#include "control/web/api_int.h"
#include "control/web/audittail.h"

static bool may_count(void *arg, const json_t *entry)
{
    return sl__api_may_see_line(arg, entry);
}

/* The caller's jobs in `status` (admins: everyone's, as GET /api/v1/jobs lists them), counted
 * up to SL_JOBS_LIST_MAX. Returns the count or a negative error. */
static int count_jobs(struct sl__api_call *c, const char *status)
{
    struct sl_store_job *v = NULL;
    size_t n = 0;
    int rc = sl_store_job_list(c->api->store, c->user.is_admin ? NULL : c->user.id, status, NULL,
                               SL_JOBS_LIST_MAX, &v, &n);

    sl_store_free_jobs(v, n);
    return rc < 0 ? rc : (int)n;
}

/* {"minute":"2026-12-01T10:05:00Z","allowed":N,"refused":N,"errors":N}, or NULL. */
static json_t *minute_item(const struct sl_audittail_minute *m)
{
    time_t t = (time_t)m->start_s;
    struct tm tm;
    char text[32];

    if (gmtime_r(&t, &tm) == NULL || strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        return NULL;
    }
    return json_pack("{s:s,s:I,s:I,s:I}", "minute", text, "allowed", (json_int_t)m->allowed,
                     "refused", (json_int_t)m->refused, "errors", (json_int_t)m->errors);
}

void sl__api_overview(struct sl__api_call *c)
{
    struct sl_audittail_minute m[SL_AUDITTAIL_MINUTES];
    bool partial = false;
    json_t *minutes;
    int running;
    int queued;
    int rc;

    if (strcmp(c->req->method, "GET") != 0) {
        sl__api_set_error(c->res, 405, "use GET");
        return;
    }
    rc = sl_audittail_per_minute(c->api->audit_log, (int64_t)time(NULL), m, SL_AUDITTAIL_MINUTES,
                                 SL_AUDITTAIL_BUDGET_BYTES, may_count, c, &partial);
    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot read the audit log\" path=\"%s\" err=%s",
               c->api->audit_log, sl_strerror(rc));
        sl__api_set_error(c->res, 500, "the audit log cannot be read; see the control plane's log");
        return;
    }
    running = count_jobs(c, "running");
    queued = running < 0 ? running : count_jobs(c, "queued");
    if (queued < 0) {
        sl__api_set_internal(c->res, "counting jobs", running < 0 ? running : queued);
        return;
    }
    minutes = json_array();
    for (size_t i = 0; minutes != NULL && i < SL_AUDITTAIL_MINUTES; i++) {
        if (json_array_append_new(minutes, minute_item(&m[i])) < 0) {
            json_decref(minutes);
            minutes = NULL;
        }
    }
    c->res->doc = minutes == NULL ? NULL
                                  : json_pack("{s:{s:I,s:b,s:o},s:{s:i,s:i}}", "decisions",
                                              "minutes", (json_int_t)SL_AUDITTAIL_MINUTES,
                                              "partial", partial, "per_minute", minutes, "jobs",
                                              "running", running, "queued", queued);
    if (c->res->doc == NULL) {
        sl__api_set_internal(c->res, "answering the overview", SL_ENOMEM);
        return;
    }
    c->res->status = 200;
    (void)snprintf(c->res->overview_for, sizeof(c->res->overview_for), "%s", c->user.id);
}

/* {"socket" or "url","acknowledged_version","current","healthy","last_error"} of one proxy of the
 * status (its "snapshot"."proxies"), `version` the newest snapshot's. NULL when out of memory. */
static json_t *proxy_item(const json_t *p, json_int_t version)
{
    json_int_t acked = json_integer_value(json_object_get(p, "acknowledged_version"));
    const json_t *audit = json_object_get(p, "audit");
    bool audit_ok = !json_is_object(audit) || json_is_true(json_object_get(audit, "healthy"));
    const char *error = json_string_value(json_object_get(p, "last_error"));

    /* An unhealthy audit log with no error of the pusher's: say what the proxy said. */
    if ((error == NULL || error[0] == '\0') && !audit_ok) {
        error = json_string_value(json_object_get(audit, "error"));
    }
    return json_pack("{s:O*,s:O*,s:I,s:b,s:b,s:s}", "socket", json_object_get(p, "socket"), "url",
                     json_object_get(p, "url"), "acknowledged_version", acked, "current",
                     version > 0 && acked == version, "healthy",
                     !json_is_true(json_object_get(p, "unreachable")) && audit_ok, "last_error",
                     error != NULL ? error : "");
}

/* The overview's "snapshot" and "proxies" from the status's "snapshot" (`snap`, borrowed; null or
 * absent without a proxy admin socket). Returns 0 or SL_ENOMEM. */
static int set_proxies(json_t *doc, const json_t *snap)
{
    json_int_t version = json_integer_value(json_object_get(snap, "version"));
    const json_t *list = json_object_get(snap, "proxies");
    json_t *proxies = json_array();
    json_t *p;
    size_t i;

    json_array_foreach(list, i, p)
    {
        if (proxies != NULL && json_array_append_new(proxies, proxy_item(p, version)) < 0) {
            json_decref(proxies);
            proxies = NULL;
        }
    }
    if (proxies == NULL || json_object_set_new(doc, "proxies", proxies) < 0) {
        return SL_ENOMEM;
    }
    if (!json_is_object(snap)) {
        return json_object_set_new(doc, "snapshot", json_null()) < 0 ? SL_ENOMEM : 0;
    }
    return json_object_set_new(doc, "snapshot",
                               json_pack("{s:I,s:O?}", "version", version, "built_at",
                                         json_object_get(snap, "built_at")))
                           < 0
                   ? SL_ENOMEM
                   : 0;
}

void sl__api_overview_finish(struct sl_api *api, struct sl__api_result *res)
{
    struct sl_sandbox_caller caller = { res->overview_for, false };
    json_t *doc = res->doc;
    json_t *snap = json_incref(json_object_get(doc, "snapshot"));
    json_t *open = api->sandboxes != NULL ? sl_sandboxes_list(api->sandboxes, &caller, NULL)
                                          : json_array();
    int rc = open != NULL ? set_proxies(doc, snap) : SL_ENOMEM;

    json_decref(snap);
    /* What the status hook added that the overview does not answer. */
    (void)json_object_del(doc, "sandboxes");
    (void)json_object_del(doc, "audit_healthy");
    if (rc == 0
        && json_object_set_new(doc, "sandboxes_open",
                               json_integer((json_int_t)json_array_size(open)))
                   < 0) {
        rc = SL_ENOMEM;
    }
    json_decref(open);
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"API request failed\" during=\"completing the overview\" "
               "err=%s",
               sl_strerror(rc));
        json_decref(res->doc);
        res->doc = NULL;
    }
}
