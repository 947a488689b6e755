/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/web/test_mcp.c - the pure half of control/web/mcp (docs/reference/mcp.md §5.5,
 * docs/mcp.md): the Origin check, the transport checks, the JSON-RPC envelope, initialize, the tool
 * list and its schemas, argument checks against those schemas, the tool -> REST route mapping, the
 * REST answer -> tool result mapping, and the allocation-failure sweep. The loop half (dispatch
 * through the REST routes) is tested end to end by integration.mcp.
 *
 * JSON in this file is written with single quotes for readability; post() turns them into
 * double quotes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/mem.h"
#include "control/web/mcp.h"

#define SDK_ACCEPT "application/json, text/event-stream"

static const char *const tool_names[] = {
    "list_environments", "get_environment",    "submit_job",
    "get_job",           "sandbox_create",     "sandbox_exec",
    "sandbox_read_file", "sandbox_write_file", "sandbox_close",
};

/* A copy of `text` with every ' turned into ". Freed by the caller. */
static char *dq(const char *text)
{
    char *s = sl_strdup(text);

    assert_non_null(s);
    for (char *p = s; *p != '\0'; p++) {
        if (*p == '\'') {
            *p = '"';
        }
    }
    return s;
}

/* Runs one POST with the SDK's Accept; `body` in single-quote JSON; the MCP-Protocol-Version,
 * Mcp-Method and Mcp-Name headers given (NULL: absent), as a 2026-07-28 client mirrors them. */
static void post_stateless(const char *body, const char *version, const char *method,
                           const char *name, struct sl_mcp_plan *plan)
{
    char *text = dq(body);
    struct sl_mcp_input in = { "POST", "application/json", SDK_ACCEPT, version,
                               text,   strlen(text),       method,     name };

    memset(plan, 0, sizeof(*plan));
    assert_int_equal(sl_mcp_prepare(&in, plan), 0);
    sl_free(text);
}

/* One POST as a 2025-11-25 client sends it (no MCP headers). */
static void post(const char *body, struct sl_mcp_plan *plan)
{
    post_stateless(body, NULL, NULL, NULL, plan);
}

/* The answer now of `plan`, parsed. */
static json_t *answer_of(const struct sl_mcp_plan *plan)
{
    json_t *doc;

    assert_false(plan->has_route);
    assert_non_null(plan->body);
    doc = json_loads(plan->body, 0, NULL);
    assert_non_null(doc);
    return doc;
}

/* Asserts that `plan` answers `status` with JSON-RPC error `code` whose message contains
 * `part`, for `id` (NULL: a null id). */
static void assert_rpc_error(struct sl_mcp_plan *plan, int status, int code, const char *part,
                             const json_t *id)
{
    json_t *doc = answer_of(plan);
    const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));

    assert_int_equal(plan->status, status);
    assert_string_equal(json_string_value(json_object_get(doc, "jsonrpc")), "2.0");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "error"), "code")),
                     code);
    assert_non_null(msg);
    if (strstr(msg, part) == NULL) {
        fail_msg("message \"%s\" lacks \"%s\"", msg, part);
    }
    if (id == NULL) {
        assert_true(json_is_null(json_object_get(doc, "id")));
    } else {
        assert_true(json_equal(json_object_get(doc, "id"), id));
    }
    json_decref(doc);
    sl_mcp_plan_finish(plan);
}

/* The result member of a successful answer (a new reference). */
static json_t *result_of(struct sl_mcp_plan *plan)
{
    json_t *doc = answer_of(plan);
    json_t *res = json_incref(json_object_get(doc, "result"));

    assert_int_equal(plan->status, 200);
    assert_non_null(res);
    assert_null(json_object_get(doc, "error"));
    json_decref(doc);
    sl_mcp_plan_finish(plan);
    return res;
}

/* A -32022 answer (HTTP 400) for `requested`, listing the three revisions spoken. */
static void assert_unsupported(struct sl_mcp_plan *plan, const char *requested, const json_t *id)
{
    json_t *doc = answer_of(plan);
    json_t *data = json_object_get(json_object_get(doc, "error"), "data");
    json_t *want = json_pack("[sss]", "2026-07-28", "2025-11-25", "2025-06-18");

    assert_int_equal(plan->status, 400);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "error"), "code")),
                     SL_MCP_UNSUPPORTED_VERSION);
    assert_string_equal(json_string_value(json_object_get(data, "requested")), requested);
    assert_true(json_equal(json_object_get(data, "supported"), want));
    assert_true(id == NULL ? json_is_null(json_object_get(doc, "id"))
                           : json_equal(json_object_get(doc, "id"), id));
    json_decref(want);
    json_decref(doc);
    sl_mcp_plan_finish(plan);
}

#define META26                                                         \
    "'_meta':{'io.modelcontextprotocol/protocolVersion':'2026-07-28'," \
    "'io.modelcontextprotocol/clientCapabilities':{}}"

/* ---- Origin ------------------------------------------------------------------------------- */

static void a_request_without_origin_passes(void **state)
{
    (void)state;
    assert_true(sl_mcp_origin_ok(NULL, NULL));
    assert_true(sl_mcp_origin_ok(NULL, "evil.example:8080"));
}

static void a_same_origin_loopback_or_ip_page_passes(void **state)
{
    (void)state;
    assert_true(sl_mcp_origin_ok("http://127.0.0.1:8080", "127.0.0.1:8080"));
    assert_true(sl_mcp_origin_ok("http://localhost:8080", "localhost:8080"));
    assert_true(sl_mcp_origin_ok("http://[::1]:8080", "[::1]:8080"));
    assert_true(sl_mcp_origin_ok("http://10.1.2.3", "10.1.2.3"));
}

static void a_rebound_name_or_another_origin_is_refused(void **state)
{
    (void)state;
    /* DNS rebinding: the page's own name, now resolving to us. */
    assert_false(sl_mcp_origin_ok("http://evil.example:8080", "evil.example:8080"));
    assert_false(sl_mcp_origin_ok("http://evil.example:8080", "127.0.0.1:8080"));
    assert_false(sl_mcp_origin_ok("http://127.0.0.1:9999", "127.0.0.1:8080"));
    assert_false(sl_mcp_origin_ok("https://127.0.0.1:8080", "127.0.0.1:8080"));
    assert_false(sl_mcp_origin_ok("null", "127.0.0.1:8080"));
    assert_false(sl_mcp_origin_ok("http://127.0.0.1:8080", NULL));
    assert_false(sl_mcp_origin_ok("http://localhost.evil.example", "localhost.evil.example"));
}

/* ---- transport ---------------------------------------------------------------------------- */

static void other_methods_get_405_with_allow(void **state)
{
    const char *methods[] = { "GET", "DELETE", "PUT" };

    (void)state;
    for (size_t i = 0; i < 3; i++) {
        struct sl_mcp_input in = { methods[i], NULL, "text/event-stream", NULL, "", 0, NULL, NULL };
        struct sl_mcp_plan plan = { 0 };

        assert_int_equal(sl_mcp_prepare(&in, &plan), 0);
        assert_true(plan.allow_post);
        assert_rpc_error(&plan, 405, SL_MCP_SERVER_ERROR, "Method Not Allowed", NULL);
    }
}

static void checks_content_type_accept_and_protocol_version(void **state)
{
    static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    struct sl_mcp_plan plan = { 0 };
    struct sl_mcp_input in = { "POST", NULL, SDK_ACCEPT, NULL, ping, sizeof(ping) - 1, NULL, NULL };
    const char *fine[] = { "2025-11-25", "2025-06-18", NULL };

    (void)state;
    assert_int_equal(sl_mcp_prepare(&in, &plan), 0);
    assert_rpc_error(&plan, 415, SL_MCP_INVALID_REQUEST, "Content-Type", NULL);
    in.content_type = "text/plain";
    assert_int_equal(sl_mcp_prepare(&in, &plan), 0);
    assert_rpc_error(&plan, 415, SL_MCP_INVALID_REQUEST, "Content-Type", NULL);
    in.content_type = "Application/JSON; charset=utf-8";
    in.accept = "text/event-stream";
    assert_int_equal(sl_mcp_prepare(&in, &plan), 0);
    assert_rpc_error(&plan, 406, SL_MCP_INVALID_REQUEST, "Not Acceptable", NULL);
    in.accept = "*/*";
    in.protocol_version = "1900-01-01";
    assert_int_equal(sl_mcp_prepare(&in, &plan), 0);
    assert_unsupported(&plan, "1900-01-01", NULL);
    for (size_t i = 0; i < 3; i++) {
        json_t *res;

        in.protocol_version = fine[i];
        in.accept = i == 2 ? NULL : SDK_ACCEPT;
        assert_int_equal(sl_mcp_prepare(&in, &plan), 0);
        res = result_of(&plan);
        assert_int_equal(json_object_size(res), 0);
        json_decref(res);
    }
}

/* ---- the envelope ------------------------------------------------------------------------- */

/* A body refused before any method runs: HTTP 400, JSON-RPC error `code`, a message
 * containing `part`, a null id. */
struct bad_envelope {
    const char *body;
    int code;
    const char *part;
};

static void expect_envelope_errors(const struct bad_envelope *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct sl_mcp_plan plan;

        post(rows[i].body, &plan);
        assert_rpc_error(&plan, 400, rows[i].code, rows[i].part, NULL);
    }
}

static void malformed_json_is_a_parse_error(void **state)
{
    static const struct bad_envelope rows[] = {
        { "{'jsonrpc':'2.0','id':1,", SL_MCP_PARSE_ERROR, "Parse error" },
        { "", SL_MCP_PARSE_ERROR, "Parse error" },
        { "{'jsonrpc':'2.0','id':1,'id':2,'method':'ping'}", SL_MCP_PARSE_ERROR, "duplicate" },
        /* Said in words, not as jansson's flag (JSON_ALLOW_NUL). */
        { "{'jsonrpc':'2.0','id':1,'method':'p\\u0000'}", SL_MCP_PARSE_ERROR,
          "Parse error: a string holds \\u0000, a NUL byte, which is not allowed (at byte" },
    };

    (void)state;
    expect_envelope_errors(rows, SL_ARRAY_LEN(rows));
}

static void batches_and_non_objects_are_invalid_requests(void **state)
{
    static const struct bad_envelope rows[] = {
        { "[{'jsonrpc':'2.0','id':1,'method':'ping'}]", SL_MCP_INVALID_REQUEST,
          "batches are not supported" },
        { "42", SL_MCP_INVALID_REQUEST, "an object" },
        { "{'jsonrpc':'1.0','id':1,'method':'ping'}", SL_MCP_INVALID_REQUEST, "jsonrpc" },
        { "{'id':1,'method':'ping'}", SL_MCP_INVALID_REQUEST, "jsonrpc" },
        { "{'jsonrpc':'2.0','id':null,'method':'ping'}", SL_MCP_INVALID_REQUEST, "id must be" },
        { "{'jsonrpc':'2.0','id':1.5,'method':'ping'}", SL_MCP_INVALID_REQUEST, "id must be" },
        { "{'jsonrpc':'2.0','id':1}", SL_MCP_INVALID_REQUEST, "method is required" },
    };

    (void)state;
    expect_envelope_errors(rows, SL_ARRAY_LEN(rows));
}

static void notifications_and_responses_get_202_without_body(void **state)
{
    const char *msgs[] = {
        "{'jsonrpc':'2.0','method':'notifications/initialized'}",
        "{'jsonrpc':'2.0','method':'notifications/cancelled','params':{'requestId':3}}",
        "{'jsonrpc':'2.0','method':'no/such/notification'}",
        "{'jsonrpc':'2.0','id':'s1','result':{}}",
        "{'jsonrpc':'2.0','id':2,'error':{'code':-1,'message':'x'}}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
        struct sl_mcp_plan plan;

        post(msgs[i], &plan);
        assert_int_equal(plan.status, 202);
        assert_null(plan.body);
        assert_false(plan.has_route);
        sl_mcp_plan_finish(&plan);
    }
}

static void an_unknown_method_is_32601_with_the_id(void **state)
{
    struct sl_mcp_plan plan;
    json_t *id = json_string("req-7");

    (void)state;
    post("{'jsonrpc':'2.0','id':'req-7','method':'resources/list'}", &plan);
    assert_rpc_error(&plan, 200, SL_MCP_METHOD_NOT_FOUND, "Method not found: resources/list", id);
    json_decref(id);
}

static void params_that_are_not_an_object_are_32602(void **state)
{
    struct sl_mcp_plan plan;
    json_t *id = json_integer(4);

    (void)state;
    post("{'jsonrpc':'2.0','id':4,'method':'tools/list','params':[1]}", &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS, "params must be an object", id);
    post("{'jsonrpc':'2.0','id':4,'method':'initialize','params':{}}", &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS, "protocolVersion", id);
    json_decref(id);
}

/* ---- initialize and ping ------------------------------------------------------------------ */

static void initialize_answers_the_clients_revision_when_spoken(void **state)
{
    const char *asked[] = { "2025-11-25", "2025-06-18", "2024-11-05", "2099-01-01" };
    const char *want[] = { "2025-11-25", "2025-06-18", SL_MCP_PROTOCOL_LATEST,
                           SL_MCP_PROTOCOL_LATEST };

    (void)state;
    for (size_t i = 0; i < 4; i++) {
        char body[256];
        struct sl_mcp_plan plan;
        json_t *res;

        (void)snprintf(body, sizeof(body),
                       "{'jsonrpc':'2.0','id':1,'method':'initialize','params':{"
                       "'protocolVersion':'%s','capabilities':{},"
                       "'clientInfo':{'name':'t','version':'1'}}}",
                       asked[i]);
        post(body, &plan);
        res = result_of(&plan);
        assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), want[i]);
        assert_true(json_is_object(json_object_get(json_object_get(res, "capabilities"), "tools")));
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
                "sluice");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(res, "serverInfo"), "version")),
                SLUICE_VERSION);
        json_decref(res);
    }
}

/* ---- tools/list ----------------------------------------------------------------------------- */

static void lists_every_tool_with_a_closed_object_schema(void **state)
{
    struct sl_mcp_plan plan;
    json_t *res;
    json_t *list;
    json_t *t;
    size_t i;

    (void)state;
    post("{'jsonrpc':'2.0','id':1,'method':'tools/list','params':{}}", &plan);
    res = result_of(&plan);
    list = json_object_get(res, "tools");
    assert_int_equal(json_array_size(list), sizeof(tool_names) / sizeof(tool_names[0]));
    json_array_foreach(list, i, t)
    {
        json_t *schema = json_object_get(t, "inputSchema");
        json_t *req;
        size_t k;

        assert_string_equal(json_string_value(json_object_get(t, "name")), tool_names[i]);
        assert_non_null(json_string_value(json_object_get(t, "description")));
        assert_string_equal(json_string_value(json_object_get(schema, "type")), "object");
        assert_true(json_is_object(json_object_get(schema, "properties")));
        assert_true(json_is_false(json_object_get(schema, "additionalProperties")));
        /* Every required name is a property. */
        json_array_foreach(json_object_get(schema, "required"), k, req)
        {
            assert_non_null(
                    json_object_get(json_object_get(schema, "properties"), json_string_value(req)));
        }
    }
    json_decref(res);
}

/* ---- tools/call: arguments ------------------------------------------------------------------ */

/* Calls `tool` with `args` (single-quote JSON) and asserts a tool error (not a protocol
 * error) whose errors[0] is `field` / `message`. */
static void assert_argument_error(const char *tool, const char *args, const char *field,
                                  const char *message)
{
    char body[2048];
    struct sl_mcp_plan plan;
    json_t *res;
    json_t *err;
    char want[512];

    (void)snprintf(body, sizeof(body),
                   "{'jsonrpc':'2.0','id':9,'method':'tools/call','params':{'name':'%s',"
                   "'arguments':%s}}",
                   tool, args);
    post(body, &plan);
    res = result_of(&plan);
    assert_true(json_is_true(json_object_get(res, "isError")));
    err = json_array_get(json_object_get(json_object_get(res, "structuredContent"), "errors"), 0);
    assert_string_equal(json_string_value(json_object_get(err, "field")), field);
    assert_string_equal(json_string_value(json_object_get(err, "message")), message);
    (void)snprintf(want, sizeof(want), "invalid arguments: %s: %s", field, message);
    assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(res, "content"), 0), "text")),
                        want);
    json_decref(res);
}

static void arguments_that_break_the_schema_are_tool_errors_naming_the_field(void **state)
{
    (void)state;
    assert_argument_error("sandbox_exec", "{'owner':'a','repo':'b','sandbox_id':'s'}", "command",
                          "required");
    assert_argument_error("sandbox_exec",
                          "{'owner':'a','repo':'b','sandbox_id':'s','command':'x','shell':1}",
                          "shell", "unknown argument");
    /* The REST names are not the tool's. */
    assert_argument_error("sandbox_exec",
                          "{'owner':'a','repo':'b','sandbox_id':'s','command':'x','cmd':'y'}",
                          "cmd", "unknown argument");
    assert_argument_error("sandbox_exec",
                          "{'owner':'a','repo':'b','sandbox_id':'s','command':'x',"
                          "'timeout_seconds':'5'}",
                          "timeout_seconds", "must be an integer");
    assert_argument_error("sandbox_exec",
                          "{'owner':'a','repo':'b','sandbox_id':'s','command':'x',"
                          "'timeout_seconds':0}",
                          "timeout_seconds", "must be at least 1");
    assert_argument_error("sandbox_exec",
                          "{'owner':'a','repo':'b','sandbox_id':'s','command':'x',"
                          "'timeout_seconds':86401}",
                          "timeout_seconds", "must be at most 86400");
    assert_argument_error("sandbox_exec",
                          "{'owner':'a','repo':'b','sandbox_id':'s','command':'x',"
                          "'env':{'A':'1','B':2}}",
                          "env.B", "must be a string");
    assert_argument_error("sandbox_exec", "{'owner':'a','repo':'b','sandbox_id':'','command':'x'}",
                          "sandbox_id", "must not be empty");
    assert_argument_error("submit_job", "{'repos':[],'command':'make'}", "repos",
                          "at least 1 item(s)");
    assert_argument_error("submit_job",
                          "{'repos':[{'repo_id':'a/b'},{'ref':'main'}],'command':'x'}",
                          "repos[1].repo_id", "required");
    assert_argument_error("submit_job", "{'repos':[{'repo_id':'a/b','branch':'x'}],'command':'x'}",
                          "repos[0].branch", "unknown argument");
    assert_argument_error("get_environment", "{}", "environment", "required");
    assert_argument_error("list_environments", "{'all':true}", "all", "unknown argument");
    assert_argument_error("sandbox_create", "{'repo':'widget'}", "owner", "required");
    assert_argument_error("sandbox_create", "{'owner':'acme'}", "repo", "required");
    assert_argument_error("sandbox_create", "{'owner':'','repo':'widget'}", "owner",
                          "must not be empty");
    assert_argument_error("sandbox_write_file",
                          "{'owner':'a','repo':'b','sandbox_id':'s','path':'p','content':'x',"
                          "'mode':-1}",
                          "mode", "must be at least 0");
}

static void a_bad_call_envelope_is_32602(void **state)
{
    struct sl_mcp_plan plan;
    json_t *id = json_integer(3);

    (void)state;
    post("{'jsonrpc':'2.0','id':3,'method':'tools/call','params':{'name':'rm_rf'}}", &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS, "Unknown tool: rm_rf", id);
    post("{'jsonrpc':'2.0','id':3,'method':'tools/call','params':{}}", &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS, "params.name", id);
    post("{'jsonrpc':'2.0','id':3,'method':'tools/call','params':{'name':'get_job',"
         "'arguments':['x']}}",
         &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS, "params.arguments", id);
    json_decref(id);
}

/* ---- tools/call: the route --------------------------------------------------------------------
 */

/* Calls `tool` with `args` and asserts the route: method, path and body (single-quote JSON,
 * compared as JSON; NULL for no body). */
static void assert_route(const char *tool, const char *args, const char *method, const char *path,
                         const char *body)
{
    char text[2048];
    struct sl_mcp_plan plan;

    (void)snprintf(text, sizeof(text),
                   "{'jsonrpc':'2.0','id':'c1','method':'tools/call','params':{'name':'%s',"
                   "'arguments':%s}}",
                   tool, args);
    post(text, &plan);
    assert_true(plan.has_route);
    assert_null(plan.body);
    assert_string_equal(plan.route.tool, tool);
    assert_string_equal(plan.route.method, method);
    assert_string_equal(plan.route.path, path);
    assert_string_equal(json_string_value(plan.route.id), "c1");
    if (body == NULL) {
        assert_null(plan.route.body);
    } else {
        char *want_text = dq(body);
        json_t *want = json_loads(want_text, 0, NULL);
        json_t *got = json_loads(plan.route.body, 0, NULL);

        assert_non_null(want);
        assert_non_null(got);
        if (!json_equal(want, got)) {
            fail_msg("body %s, want %s", plan.route.body, want_text);
        }
        json_decref(want);
        json_decref(got);
        sl_free(want_text);
    }
    sl_mcp_plan_finish(&plan);
}

static void each_tool_becomes_its_rest_route(void **state)
{
    (void)state;
    assert_route("list_environments", "{}", "GET", "/api/v1/environments", NULL);
    assert_route("get_environment", "{'environment':'ci-python'}", "GET",
                 "/api/v1/environments/ci-python", NULL);
    assert_route("submit_job",
                 "{'repos':[{'repo_id':'g/p','ref':'main'}],'command':'make test',"
                 "'environment':'ci','timeoutMs':60000}",
                 "POST", "/api/v1/jobs",
                 "{'repos':[{'repo_id':'g/p','ref':'main'}],'command':'make test',"
                 "'environment':'ci','timeoutMs':60000}");
    assert_route("get_job", "{'id':'0c7d'}", "GET", "/api/v1/jobs/0c7d", NULL);
    assert_route("sandbox_create",
                 "{'owner':'acme','repo':'widget','ref':'main','environment':'sbx'}", "POST",
                 "/api/v1/repos/acme/widget/sandboxes", "{'ref':'main','environment':'sbx'}");
    assert_route("sandbox_create", "{'owner':'acme','repo':'widget'}", "POST",
                 "/api/v1/repos/acme/widget/sandboxes", "{}");
    /* The seed's names become the route's: command -> cmd, timeout_seconds -> timeoutMs. */
    assert_route("sandbox_exec",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','command':'ls','cwd':'src',"
                 "'env':{'A':'1'},'timeout_seconds':5}",
                 "POST", "/api/v1/repos/acme/widget/sandboxes/s1/exec",
                 "{'cmd':'ls','cwd':'src','env':{'A':'1'},'timeoutMs':5000}");
    assert_route("sandbox_exec",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','command':'ls',"
                 "'timeout_seconds':86400}",
                 "POST", "/api/v1/repos/acme/widget/sandboxes/s1/exec",
                 "{'cmd':'ls','timeoutMs':86400000}");
    /* No timeout_seconds: the route's default, 600 s. */
    assert_route("sandbox_exec",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','command':'ls'}", "POST",
                 "/api/v1/repos/acme/widget/sandboxes/s1/exec", "{'cmd':'ls'}");
    assert_route("sandbox_read_file",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','path':'a.txt'}", "POST",
                 "/api/v1/repos/acme/widget/sandboxes/s1/read", "{'path':'a.txt'}");
    /* Text to write becomes the route's base64 of its UTF-8 bytes. */
    assert_route("sandbox_write_file",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','path':'a','content':'hi',"
                 "'mode':493}",
                 "POST", "/api/v1/repos/acme/widget/sandboxes/s1/write",
                 "{'path':'a','content':'aGk=','mode':493}");
    assert_route("sandbox_write_file",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','path':'a',"
                 "'content':'\\u00e9\\n'}",
                 "POST", "/api/v1/repos/acme/widget/sandboxes/s1/write",
                 "{'path':'a','content':'w6kK'}");
    assert_route("sandbox_write_file",
                 "{'owner':'acme','repo':'widget','sandbox_id':'s1','path':'a','content':''}",
                 "POST", "/api/v1/repos/acme/widget/sandboxes/s1/write",
                 "{'path':'a','content':''}");
    assert_route("sandbox_close", "{'owner':'acme','repo':'widget','sandbox_id':'s1'}", "POST",
                 "/api/v1/repos/acme/widget/sandboxes/s1/close", NULL);
}

static void path_segments_are_percent_encoded(void **state)
{
    (void)state;
    /* A '/', '?' or dot segment in an argument never changes which route is called. */
    assert_route("get_environment", "{'environment':'a b/../x?y'}", "GET",
                 "/api/v1/environments/a%20b%2F%2E%2E%2Fx%3Fy", NULL);
    assert_route("get_job", "{'id':'..'}", "GET", "/api/v1/jobs/%2E%2E", NULL);
    assert_route("get_environment", "{'environment':'ci.py-3_1~x'}", "GET",
                 "/api/v1/environments/ci%2Epy-3_1~x", NULL);
    /* owner and repo are one segment each; the REST route refuses a name holding a '/'. */
    assert_route("sandbox_close", "{'owner':'g','repo':'sub/r','sandbox_id':'x/close'}", "POST",
                 "/api/v1/repos/g/sub%2Fr/sandboxes/x%2Fclose/close", NULL);
}

/* ---- tool results --------------------------------------------------------------------------- */

static const char *text_of(const json_t *res)
{
    return json_string_value(
            json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
}

static void a_2xx_answer_is_structured_content_and_its_json(void **state)
{
    json_t *body = json_pack("{s:i,s:s}", "exitCode", 3, "stdout", "hi\n");
    json_t *res = sl_mcp_tool_result("sandbox_exec", 200, body);
    json_t *again;

    (void)state;
    assert_true(json_is_false(json_object_get(res, "isError")));
    assert_true(json_equal(json_object_get(res, "structuredContent"), body));
    again = json_loads(text_of(res), 0, NULL);
    assert_true(json_equal(again, body));
    json_decref(again);
    json_decref(res);
    json_decref(body);

    res = sl_mcp_tool_result("sandbox_close", 204, NULL);
    assert_true(json_is_true(json_object_get(json_object_get(res, "structuredContent"), "closed")));
    json_decref(res);
    body = json_null();
    res = sl_mcp_tool_result("sandbox_close", 204, body);
    assert_string_equal(text_of(res), "{\"closed\":true}");
    json_decref(res);

    body = json_pack("[i,i]", 1, 2);
    res = sl_mcp_tool_result("list_environments", 200, body);
    assert_true(
            json_equal(json_object_get(json_object_get(res, "structuredContent"), "result"), body));
    json_decref(res);
    json_decref(body);
}

/* The structuredContent of a sandbox_read_file result for a REST read of `b64`. */
static json_t *read_result_of(const char *b64)
{
    json_t *body =
            json_pack("{s:s,s:i,s:s}", "path", "/workspace/repo/f", "size", 3, "content", b64);
    json_t *res = sl_mcp_tool_result("sandbox_read_file", 200, body);
    json_t *sc = json_incref(json_object_get(res, "structuredContent"));
    json_t *again = json_loads(text_of(res), 0, NULL);

    assert_true(json_is_false(json_object_get(res, "isError")));
    /* The text content is the same document. */
    assert_true(json_equal(again, sc));
    assert_string_equal(json_string_value(json_object_get(sc, "path")), "/workspace/repo/f");
    json_decref(again);
    json_decref(res);
    json_decref(body);
    return sc;
}

static void a_read_file_result_is_text_when_the_file_is_utf8_else_base64(void **state)
{
    /* Invalid UTF-8 (a lone 0xff), a NUL byte, an overlong form, a surrogate, a cut sequence. */
    const char *binary[] = { "/w==", "YQBi", "wK8=", "7aCA", "aMM=" };
    /* "h\xc3\xa9\n": UTF-8 text. */
    json_t *sc = read_result_of("aMOpCg==");

    (void)state;
    assert_string_equal(json_string_value(json_object_get(sc, "content")), "h\xc3\xa9\n");
    assert_null(json_object_get(sc, "encoding"));
    json_decref(sc);
    /* An empty file is text. */
    sc = read_result_of("");
    assert_string_equal(json_string_value(json_object_get(sc, "content")), "");
    assert_null(json_object_get(sc, "encoding"));
    json_decref(sc);
    /* Binary: base64 as the route gave it. */
    for (size_t i = 0; i < sizeof(binary) / sizeof(binary[0]); i++) {
        sc = read_result_of(binary[i]);
        assert_string_equal(json_string_value(json_object_get(sc, "content")), binary[i]);
        assert_string_equal(json_string_value(json_object_get(sc, "encoding")), "base64");
        json_decref(sc);
    }
}

static void a_4xx_or_5xx_answer_is_a_tool_error_with_the_rest_text(void **state)
{
    json_t *body = json_pack("{s:s}", "message", "not your sandbox");
    json_t *res = sl_mcp_tool_result("sandbox_exec", 403, body);

    (void)state;
    assert_true(json_is_true(json_object_get(res, "isError")));
    assert_string_equal(text_of(res), "not your sandbox");
    assert_int_equal(json_integer_value(
                             json_object_get(json_object_get(res, "structuredContent"), "status")),
                     403);
    json_decref(res);
    json_decref(body);

    /* Errors raised inside the sandbox say "error" (docs/reference/api.md §5.3). */
    body = json_pack("{s:s}", "error", "not found: /workspace/repo/x");
    res = sl_mcp_tool_result("sandbox_read_file", 404, body);
    assert_true(json_is_true(json_object_get(res, "isError")));
    assert_string_equal(text_of(res), "not found: /workspace/repo/x");
    json_decref(res);
    json_decref(body);

    res = sl_mcp_tool_result("get_job", 500, NULL);
    assert_true(json_is_true(json_object_get(res, "isError")));
    assert_string_equal(text_of(res), "Internal Server Error");
    json_decref(res);
}

/* ---- allocation failures -------------------------------------------------------------------- */

static void survives_every_allocation_failure(void **state)
{
    const char *msgs[] = {
        "{'jsonrpc':'2.0','id':1,'method':'tools/list'}",
        "{'jsonrpc':'2.0','id':1,'method':'initialize','params':{'protocolVersion':'2025-11-25'}}",
        "{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'sandbox_exec',"
        "'arguments':{'owner':'a','repo':'b','sandbox_id':'s','command':'ls','env':{'A':'1'},"
        "'timeout_seconds':9}}}",
        "{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'sandbox_write_file',"
        "'arguments':{'owner':'a','repo':'b','sandbox_id':'s','path':'p','content':'x'}}}",
        "{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'sandbox_exec',"
        "'arguments':{'owner':'a','repo':'b','sandbox_id':'s'}}}",
        "{'jsonrpc':'2.0','id':1,'method':'nope'}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
        char *text = dq(msgs[i]);
        struct sl_mcp_input in = { "POST", "application/json", NULL, NULL,
                                   text,   strlen(text),       NULL, NULL };
        long n;

        for (n = 1; n < 100000; n++) {
            struct sl_mcp_plan plan = { 0 };
            json_t *body = NULL;
            json_t *res = NULL;
            int rc;

            sl_mem_fail_after(n);
            rc = sl_mcp_prepare(&in, &plan);
            body = json_pack("{s:s}", "message", "x");
            res = sl_mcp_tool_result("sandbox_exec", 200, body);
            json_decref(res);
            json_decref(body);
            body = json_pack("{s:s,s:i,s:s}", "path", "/p", "size", 2, "content", "aGk=");
            res = sl_mcp_tool_result("sandbox_read_file", 200, body);
            sl_mem_fail_after(0);
            json_decref(res);
            json_decref(body);
            if (rc == 0) {
                assert_true(plan.has_route || plan.body != NULL);
            } else {
                assert_int_equal(rc, SL_ENOMEM);
                assert_null(plan.body);
                assert_null(plan.route.path);
            }
            sl_mcp_plan_finish(&plan);
            if (rc == 0 && sl_mem_failures() == 0) {
                break;
            }
        }
        assert_true(n > 3);
        sl_free(text);
    }
}

/* ---- MCP 2026-07-28 (stateless) ------------------------------------------------------------ */

static void server_discover_lists_the_revisions(void **state)
{
    struct sl_mcp_plan plan;
    json_t *res;
    json_t *want = json_pack("[sss]", "2026-07-28", "2025-11-25", "2025-06-18");

    (void)state;
    /* As a probing client of either era sends it: with the 2026-07-28 headers and _meta. */
    post_stateless("{'jsonrpc':'2.0','id':'d1','method':'server/discover','params':{" META26 "}}",
                   "2026-07-28", "server/discover", NULL, &plan);
    res = result_of(&plan);
    assert_true(json_equal(json_object_get(res, "supportedVersions"), want));
    assert_true(json_is_object(json_object_get(json_object_get(res, "capabilities"), "tools")));
    assert_string_equal(
            json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
            "sluice");
    assert_string_equal(json_string_value(json_object_get(res, "resultType")), "complete");
    json_decref(res);
    /* And bare. */
    post("{'jsonrpc':'2.0','id':2,'method':'server/discover'}", &plan);
    res = result_of(&plan);
    assert_true(json_equal(json_object_get(res, "supportedVersions"), want));
    json_decref(res);
    json_decref(want);
}

static void a_stateless_request_needs_no_initialize_and_is_complete(void **state)
{
    struct sl_mcp_plan plan;
    json_t *res;

    (void)state;
    post_stateless("{'jsonrpc':'2.0','id':1,'method':'tools/list','params':{" META26 "}}",
                   "2026-07-28", "tools/list", NULL, &plan);
    res = result_of(&plan);
    assert_int_equal(json_array_size(json_object_get(res, "tools")), 9);
    assert_string_equal(json_string_value(json_object_get(res, "resultType")), "complete");
    json_decref(res);
    /* A tool call: routed, and its result will say complete too. */
    post_stateless("{'jsonrpc':'2.0','id':2,'method':'tools/call','params':{" META26 ","
                   "'name':'list_environments','arguments':{}}}",
                   "2026-07-28", "tools/call", "list_environments", &plan);
    assert_true(plan.has_route);
    assert_true(plan.route.stateless);
    assert_string_equal(plan.route.path, "/api/v1/environments");
    sl_mcp_plan_finish(&plan);
    /* ping, dropped by 2026-07-28, still answers. */
    post_stateless("{'jsonrpc':'2.0','id':9,'method':'ping','params':{" META26 "}}", "2026-07-28",
                   "ping", NULL, &plan);
    res = result_of(&plan);
    assert_int_equal(json_object_size(res), 1);
    assert_string_equal(json_string_value(json_object_get(res, "resultType")), "complete");
    json_decref(res);
    /* A handshake revision's request says nothing of it. */
    post("{'jsonrpc':'2.0','id':3,'method':'tools/list'}", &plan);
    res = result_of(&plan);
    assert_null(json_object_get(res, "resultType"));
    json_decref(res);
    post("{'jsonrpc':'2.0','id':4,'method':'tools/call','params':{'name':'list_environments'}}",
         &plan);
    assert_true(plan.has_route);
    assert_false(plan.route.stateless);
    sl_mcp_plan_finish(&plan);
    /* A stateless notification: 202 (with its headers). */
    post_stateless("{'jsonrpc':'2.0','method':'notifications/cancelled','params':{" META26 "}}",
                   "2026-07-28", "notifications/cancelled", NULL, &plan);
    assert_int_equal(plan.status, 202);
    assert_null(plan.body);
    sl_mcp_plan_finish(&plan);
}

static void the_mirrored_headers_must_match_the_body(void **state)
{
    static const char list[] =
            "{'jsonrpc':'2.0','id':5,'method':'tools/list','params':{" META26 "}}";
    static const char call[] = "{'jsonrpc':'2.0','id':6,'method':'tools/call','params':{" META26
                               ",'name':'get_job','arguments':{'id':'j1'}}}";
    json_t *id5 = json_integer(5);
    json_t *id6 = json_integer(6);
    struct sl_mcp_plan plan;

    (void)state;
    post_stateless(list, NULL, "tools/list", NULL, &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH,
                     "the MCP-Protocol-Version header is required", id5);
    post_stateless(list, "2025-11-25", "tools/list", NULL, &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH,
                     "MCP-Protocol-Version is '2025-11-25' but the body declares '2026-07-28'",
                     id5);
    post_stateless(list, "2026-07-28", NULL, NULL, &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH,
                     "the Mcp-Method header is required with MCP 2026-07-28 (the body says "
                     "'tools/list')",
                     id5);
    post_stateless(list, "2026-07-28", "tools/call", NULL, &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH,
                     "Mcp-Method is 'tools/call' but the body says 'tools/list'", id5);
    post_stateless(call, "2026-07-28", "tools/call", NULL, &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH, "the Mcp-Name header is required", id6);
    post_stateless(call, "2026-07-28", "tools/call", "sandbox_close", &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH,
                     "Mcp-Name is 'sandbox_close' but the body says 'get_job'", id6);
    post_stateless(call, "2026-07-28", "tools/call", "get_job", &plan);
    assert_true(plan.has_route);
    sl_mcp_plan_finish(&plan);
    /* The header says 2026-07-28, the body declares nothing. */
    post_stateless("{'jsonrpc':'2.0','id':5,'method':'tools/list'}", "2026-07-28", "tools/list",
                   NULL, &plan);
    assert_rpc_error(&plan, 400, SL_MCP_HEADER_MISMATCH, "params._meta", id5);
    json_decref(id5);
    json_decref(id6);
}

static void the_declared_revision_is_checked(void **state)
{
    json_t *id7 = json_integer(7);
    struct sl_mcp_plan plan;
    json_t *res;

    (void)state;
    post_stateless("{'jsonrpc':'2.0','id':7,'method':'tools/list','params':{'_meta':{"
                   "'io.modelcontextprotocol/protocolVersion':'2099-01-01',"
                   "'io.modelcontextprotocol/clientCapabilities':{}}}}",
                   "2099-01-01", "tools/list", NULL, &plan);
    assert_unsupported(&plan, "2099-01-01", NULL);
    post_stateless("{'jsonrpc':'2.0','id':7,'method':'tools/list','params':{'_meta':{"
                   "'io.modelcontextprotocol/protocolVersion':'2099-01-01'}}}",
                   NULL, NULL, NULL, &plan);
    assert_unsupported(&plan, "2099-01-01", id7);
    post_stateless("{'jsonrpc':'2.0','id':7,'method':'tools/list','params':{'_meta':{"
                   "'io.modelcontextprotocol/protocolVersion':7}}}",
                   NULL, NULL, NULL, &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS, "protocolVersion\"]: must be a string",
                     id7);
    post_stateless("{'jsonrpc':'2.0','id':7,'method':'tools/list','params':{'_meta':{"
                   "'io.modelcontextprotocol/protocolVersion':'2026-07-28'}}}",
                   "2026-07-28", "tools/list", NULL, &plan);
    assert_rpc_error(&plan, 200, SL_MCP_INVALID_PARAMS,
                     "clientCapabilities\"]: an object is required", id7);
    /* A handshake revision named in _meta: served as that revision. */
    post_stateless("{'jsonrpc':'2.0','id':7,'method':'tools/list','params':{'_meta':{"
                   "'io.modelcontextprotocol/protocolVersion':'2025-11-25'}}}",
                   "2025-11-25", NULL, NULL, &plan);
    res = result_of(&plan);
    assert_null(json_object_get(res, "resultType"));
    json_decref(res);
    /* initialize never answers the stateless revision (it has no initialize). */
    post("{'jsonrpc':'2.0','id':8,'method':'initialize','params':{'protocolVersion':'2026-07-28',"
         "'capabilities':{},'clientInfo':{'name':'c','version':'1'}}}",
         &plan);
    res = result_of(&plan);
    assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), "2025-11-25");
    json_decref(res);
    json_decref(id7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_request_without_origin_passes),
        cmocka_unit_test(a_same_origin_loopback_or_ip_page_passes),
        cmocka_unit_test(a_rebound_name_or_another_origin_is_refused),
        cmocka_unit_test(other_methods_get_405_with_allow),
        cmocka_unit_test(checks_content_type_accept_and_protocol_version),
        cmocka_unit_test(malformed_json_is_a_parse_error),
        cmocka_unit_test(batches_and_non_objects_are_invalid_requests),
        cmocka_unit_test(notifications_and_responses_get_202_without_body),
        cmocka_unit_test(an_unknown_method_is_32601_with_the_id),
        cmocka_unit_test(params_that_are_not_an_object_are_32602),
        cmocka_unit_test(initialize_answers_the_clients_revision_when_spoken),
        cmocka_unit_test(lists_every_tool_with_a_closed_object_schema),
        cmocka_unit_test(arguments_that_break_the_schema_are_tool_errors_naming_the_field),
        cmocka_unit_test(a_bad_call_envelope_is_32602),
        cmocka_unit_test(each_tool_becomes_its_rest_route),
        cmocka_unit_test(path_segments_are_percent_encoded),
        cmocka_unit_test(a_2xx_answer_is_structured_content_and_its_json),
        cmocka_unit_test(a_read_file_result_is_text_when_the_file_is_utf8_else_base64),
        cmocka_unit_test(a_4xx_or_5xx_answer_is_a_tool_error_with_the_rest_text),
        cmocka_unit_test(survives_every_allocation_failure),
        cmocka_unit_test(server_discover_lists_the_revisions),
        cmocka_unit_test(a_stateless_request_needs_no_initialize_and_is_complete),
        cmocka_unit_test(the_mirrored_headers_must_match_the_body),
        cmocka_unit_test(the_declared_revision_is_checked),
    };

    /* jansson allocates through base/mem, so the sweep fails its allocations too. */
    json_set_alloc_funcs(sl_malloc, sl_free);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
