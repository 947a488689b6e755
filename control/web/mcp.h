/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/mcp.h - the MCP endpoint `/mcp` of the control plane (docs/reference/mcp.md §5.5):
 * JSON-RPC 2.0 over the Streamable HTTP transport of MCP revisions 2026-07-28 (stateless:
 * server/discover, the revision declared in every request) and 2025-11-25 (initialize; 2025-06-18
 * accepted too), tools only. Design notes: docs/mcp.md.
 *
 * Transport choices: every message is one POST answered with one application/json document
 * (no server-sent stream: GET and DELETE get 405), no sessions (no Mcp-Session-Id is issued,
 * one sent is ignored), no batches (those revisions removed them: a JSON array gets 400 and
 * -32600). Requests authenticate with the bearer tokens of the REST API, through the same code.
 *
 * A tool call is a REST request in disguise: sl_mcp_prepare() checks the arguments against the
 * tool's input schema and turns them into the route they stand for (method, path, JSON body);
 * sl_mcp_run() dispatches that route through sl_api_dispatch() with the caller's token, so the
 * permission rules and error texts are those of REST by construction; sl_mcp_tool_result()
 * turns the REST answer into the tool result (structuredContent and the same JSON as text; a
 * 4xx/5xx answer becomes isError with the REST message as its text).
 *
 * Halves and threads:
 *   - sl_mcp_origin_ok(), sl_mcp_prepare(), sl_mcp_tool_result(): pure (no I/O, no globals),
 *     safe on any thread; the API calls sl_mcp_prepare() in its thread-pool job, after the
 *     caller authenticated, so parsing a large body never runs on the loop.
 *   - sl_mcp_run(): on the loop, with the exchange the plan came from.
 */
#ifndef SL_CONTROL_WEB_MCP_H
#define SL_CONTROL_WEB_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "http/server.h"

struct sl_api; /* control/web/api.h */

/* The newest revision with an initialize handshake; also the answer to an initialize that asks
 * for one we lack. */
#define SL_MCP_PROTOCOL_LATEST "2025-11-25"
/* The stateless revision: no initialize; every request declares it in params._meta and in the
 * MCP-Protocol-Version header, names its method in Mcp-Method (and a tool call its tool in
 * Mcp-Name); server/discover lists the revisions; every result says "resultType":"complete". */
#define SL_MCP_PROTOCOL_STATELESS "2026-07-28"
/* Most tool calls dispatched at once (the whole control plane); past it: 503 and -32000. */
#define SL_MCP_MAX_CALLS 64

/* JSON-RPC 2.0 error codes (JSON-RPC 2.0 §5.1). */
#define SL_MCP_PARSE_ERROR      (-32700)
#define SL_MCP_INVALID_REQUEST  (-32600)
#define SL_MCP_METHOD_NOT_FOUND (-32601)
#define SL_MCP_INVALID_PARAMS   (-32602)
#define SL_MCP_SERVER_ERROR     (-32000)
/* MCP 2026-07-28: a header mirrored from the body is missing or differs (HTTP 400). */
#define SL_MCP_HEADER_MISMATCH (-32020)
/* MCP 2026-07-28: the declared revision is not spoken; data lists those that are (HTTP 400). */
#define SL_MCP_UNSUPPORTED_VERSION (-32022)

/* What sl_mcp_prepare() reads of an HTTP request. Every pointer borrowed; NULL for a header
 * that is absent. */
struct sl_mcp_input {
    const char *method;
    const char *content_type;
    const char *accept;
    /* MCP-Protocol-Version. */
    const char *protocol_version;
    const void *body;
    size_t body_len;
    /* Mcp-Method and Mcp-Name (MCP 2026-07-28). */
    const char *mcp_method;
    const char *mcp_name;
};

/* The REST request a tool call stands for. */
struct sl_mcp_route {
    /* The tool's name (static storage). */
    const char *tool;
    /* "GET" or "POST" (static storage). */
    const char *method;
    /* The path, segments percent-encoded; owned. */
    char *path;
    /* The JSON body; owned; NULL for none. */
    char *body;
    /* The JSON-RPC id of the call (a string or an integer); a new reference. */
    json_t *id;
    /* The request declared MCP 2026-07-28: its result says "resultType":"complete". */
    bool stateless;
};

/* The outcome of sl_mcp_prepare(): either an answer now (`status`, `body`) or a route. */
struct sl_mcp_plan {
    /* HTTP status of the answer now (200, 202, 400, 405, ...); 0 when `has_route`. */
    int status;
    /* The JSON text of the answer now, owned; NULL for no body (202). */
    char *body;
    /* The answer now must carry `Allow: POST` (405). */
    bool allow_post;
    /* The message declared MCP 2026-07-28 (results get "resultType":"complete"). */
    bool stateless;
    bool has_route;
    struct sl_mcp_route route;
};

/* Frees what `plan` owns (caller storage; a zeroed plan is fine). */
void sl_mcp_plan_finish(struct sl_mcp_plan *plan);

/* The DNS-rebinding check of the transport (MCP 2025-11-25, "Security Warning"): true when the
 * request may go on. No Origin (`origin` NULL: a process, not a browser) passes. An Origin
 * passes only when it is the request's own origin, `http://` + the Host header (`host`, NULL
 * when absent), and that host is a loopback name or an IP literal: a rebound DNS name (the page
 * of evil.example asking for evil.example:PORT that now resolves to us) is neither. */
bool sl_mcp_origin_ok(const char *origin, const char *host);

/* Reads one MCP POST (or another method on /mcp) and fills `out` (zeroed caller storage;
 * sl_mcp_plan_finish() releases it): transport checks (405, 415, 406, 400 and -32022 for an
 * unsupported MCP-Protocol-Version), the JSON-RPC envelope (-32700, -32600), for a message that
 * declares 2026-07-28 its revision and mirrored headers (-32022, -32020, -32602), the method
 * (-32601), its
 * params (-32602), and for tools/call the tool's arguments (a violation of its input schema is
 * a tool error naming the field, as MCP 2025-11-25 asks) and the route. Returns 0, or SL_ENOMEM
 * (out holds nothing then). */
SL_MUST_CHECK int sl_mcp_prepare(const struct sl_mcp_input *in, struct sl_mcp_plan *out);

/* The tool result for a REST answer to the route of `tool`: `status` and `body` (borrowed; NULL
 * or JSON null for none). 2xx: structuredContent is the body (an object; anything else is put
 * under "result"; no body gives the tool's empty result, {"closed":true} for sandbox_close),
 * reshaped where the tool's result differs from the route's (sandbox_read_file: the content as
 * text when the file is UTF-8, else base64 with "encoding":"base64"), and the text content its
 * JSON. 4xx/5xx: isError, the text content is the REST "message" (or the sandbox's "error") as
 * is, structuredContent the REST body with "status". Returns a new reference, or NULL when out
 * of memory. */
json_t *sl_mcp_tool_result(const char *tool, int status, const json_t *body);

/* Answers `x` for `plan` (taken: its members are moved out and it is left finished): the answer
 * now, or the route dispatched through sl_api_dispatch() as the caller `auth` (the request's
 * Authorization value, borrowed for the call), then the tool result. Loop thread only. */
void sl_mcp_run(struct sl_api *api, struct sl_http_exchange *x, struct sl_mcp_plan *plan,
                const char *auth);

#endif
