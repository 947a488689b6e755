/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_mcp.c - the MCP message reader of control/web/mcp on arbitrary bytes: the body of
 * a POST /mcp through sl_mcp_prepare() twice, with the headers of a 2025-11-25 client and with
 * those a 2026-07-28 client mirrors from the body (MCP-Protocol-Version, Mcp-Method, Mcp-Name),
 * and the tool result of a REST answer, as it is (sandbox_exec) and reshaped (sandbox_read_file:
 * a base64 `content` becomes text or stays base64 with "encoding":"base64").
 *
 * Invariants, not just "no crash": a plan is exactly one of an answer (a JSON-RPC 2.0 object with
 * a result or an error, status 200 or 400) , a 202 without a body, or a route; a route's method
 * is GET or POST, its path starts with /api/v1/ and holds only unreserved characters, '/' and
 * %XX escapes (no '?', no dot segment, nothing an argument could use to reach another route), and
 * its body, when there is one, is a JSON object. LSan checks that everything is freed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "base/mem.h"
#include "control/web/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool path_is_safe(const char *p)
{
    if (strncmp(p, "/api/v1/", 8) != 0) {
        return false;
    }
    for (; *p != '\0'; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                     || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '~' || *p == '/'
                     || *p == '%';

        if (!plain || (*p == '/' && p[1] == '/')) {
            return false;
        }
    }
    return true;
}

static void check_answer(const struct sl_mcp_plan *plan)
{
    json_t *doc = json_loads(plan->body, 0, NULL);
    json_t *result = json_object_get(doc, "result");

    SL_BUG_ON(!json_is_object(doc));
    SL_BUG_ON(strcmp(json_string_value(json_object_get(doc, "jsonrpc")), "2.0") != 0);
    SL_BUG_ON((result != NULL) == (json_object_get(doc, "error") != NULL));
    SL_BUG_ON(plan->status != 200 && plan->status != 400);
    /* A result of the stateless revision says it is complete; no other one does. */
    SL_BUG_ON(result != NULL && plan->stateless != (json_object_get(result, "resultType") != NULL));
    json_decref(doc);
}

static void check_route(const struct sl_mcp_plan *plan)
{
    const struct sl_mcp_route *r = &plan->route;
    json_t *body;

    SL_BUG_ON(plan->body != NULL || plan->status != 0);
    SL_BUG_ON(strcmp(r->method, "GET") != 0 && strcmp(r->method, "POST") != 0);
    SL_BUG_ON(!path_is_safe(r->path));
    SL_BUG_ON(!json_is_string(r->id) && !json_is_integer(r->id));
    SL_BUG_ON(r->stateless != plan->stateless);
    if (r->body != NULL) {
        body = json_loads(r->body, 0, NULL);
        SL_BUG_ON(!json_is_object(body));
        json_decref(body);
    }
}

/* A read's result: a string content stays a string; base64 is said, and then it is the route's. */
static void check_read_result(const json_t *body)
{
    json_t *res = sl_mcp_tool_result("sandbox_read_file", 200, body);
    json_t *sc = json_object_get(res, "structuredContent");
    const json_t *in = json_object_get(body, "content");
    const json_t *out = json_object_get(sc, "content");
    const char *enc = json_string_value(json_object_get(sc, "encoding"));

    if (res != NULL && json_is_string(in)) {
        SL_BUG_ON(!json_is_string(out));
        if (enc != NULL && json_object_get(body, "encoding") == NULL) {
            SL_BUG_ON(strcmp(enc, "base64") != 0 || !json_equal(in, out));
        }
        /* Text holds no NUL: a client may take it as a C string. */
        SL_BUG_ON(enc == NULL && !json_equal(in, out)
                  && strlen(json_string_value(out)) != json_string_length(out));
    }
    json_decref(res);
}

static void prepare_and_check(const struct sl_mcp_input *in)
{
    struct sl_mcp_plan plan = { 0 };
    int rc = sl_mcp_prepare(in, &plan);

    if (rc == 0) {
        if (plan.has_route) {
            check_route(&plan);
        } else if (plan.body != NULL) {
            check_answer(&plan);
        } else {
            SL_BUG_ON(plan.status != 202);
        }
    } else {
        SL_BUG_ON(rc != SL_ENOMEM);
    }
    sl_mcp_plan_finish(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    struct sl_mcp_input in = {
        "POST", "application/json", "application/json, text/event-stream", NULL, data, size, NULL,
        NULL
    };
    json_t *body;
    json_t *res;

    if (!ready) {
        json_set_alloc_funcs(sl_malloc, sl_free);
        ready = true;
    }
    prepare_and_check(&in);
    body = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    /* As a 2026-07-28 client sends it: the headers mirror the body. */
    in.protocol_version = "2026-07-28";
    in.mcp_method = json_string_value(json_object_get(body, "method"));
    in.mcp_name = json_string_value(json_object_get(json_object_get(body, "params"), "name"));
    prepare_and_check(&in);
    /* The same bytes as a REST answer (any JSON; an error status when it is not an object). */
    res = sl_mcp_tool_result("sandbox_exec", json_is_object(body) ? 200 : 404, body);
    SL_BUG_ON(res != NULL && !json_is_array(json_object_get(res, "content")));
    json_decref(res);
    if (json_is_object(body)) {
        check_read_result(body);
    }
    json_decref(body);
    return 0;
}
