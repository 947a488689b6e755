/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/mcp.c - the MCP endpoint (docs/reference/mcp.md §5.5, docs/mcp.md): transport checks,
 * the JSON-RPC envelope, the tool table with its input schemas, argument checks against those very
 * schemas, the tool -> REST route mapping, and the REST answer -> tool result mapping.
 */
#include "control/web/mcp.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/web/api.h"

/* The revisions spoken, newest first: the stateless one, then those with an initialize
 * handshake (the last two; an initialize is answered with one of them). 2025-03-26 and older
 * require batches, which 2025-06-18 removed, so they are not claimed. */
static const char *const versions[] = { SL_MCP_PROTOCOL_STATELESS, SL_MCP_PROTOCOL_LATEST,
                                        "2025-06-18" };
#define VERSIONS_TEXT SL_MCP_PROTOCOL_STATELESS ", " SL_MCP_PROTOCOL_LATEST ", 2025-06-18"
/* answer_unsupported_version() and prepare_discover() list the three by index. */
_Static_assert(sizeof(versions) / sizeof(versions[0]) == 3, "the revision lists name three");
#define INITIALIZE_VERSIONS_FIRST 1

/* The _meta keys of MCP 2026-07-28 requests. */
#define META_VERSION      "io.modelcontextprotocol/protocolVersion"
#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO  "io.modelcontextprotocol/serverInfo"

static const char instructions[] =
        "Tools for sluice sandboxes, environments and jobs. Each tool is the REST route its "
        "description names, with the same permissions and errors.";

/* Longest path a route gets (segments are bounded by the schemas, encoded x3). */
#define PATH_MAX_BYTES 16384
/* Longest error text of an argument check. */
#define ARG_ERR_BYTES 512
/* Deepest schema nesting walked (the table's deepest is 3). */
#define SCHEMA_DEPTH_MAX 8

/* ---- the tools ---------------------------------------------------------------------------- */

/* The REST route a tool calls. */
struct tool_route {
    const char *method;
    /* The path, where {name} stands for the argument `name` as one segment (build_path()). */
    const char *path;
    /* Which arguments form the body as they are (NULL: no body; "*": all of them). */
    const char *const *body_keys;
    /* Or: the body built from the arguments (a new reference; NULL when out of memory), for a
     * tool whose arguments are not the route's fields (the seed's names, text for base64). */
    json_t *(*body_fn)(const json_t *args);
};

struct tool {
    const char *name;
    const char *title;
    const char *description;
    /* The input schema and annotations, JSON with single quotes for double ones (sq_json()). */
    const char *schema;
    const char *annotations;
    struct tool_route route;
    /* structuredContent of a 2xx answer without a body (sq_json() text). */
    const char *empty_result;
    /* Reshapes the structuredContent of a 2xx answer in place (0, or SL_ENOMEM). */
    int (*result_fn)(json_t *sc);
};

/* The sandbox tools name the repository as the seed does: `owner` and `repo` apart. */
#define P_WHERE                                                  \
    "'owner':{'type':'string','minLength':1,'maxLength':255,"    \
    "'description':'The owner of the repository (owner/name)'}," \
    "'repo':{'type':'string','minLength':1,'maxLength':255,"     \
    "'description':'The name of the repository (owner/name)'}"
#define P_SANDBOX                                                  \
    "'sandbox_id':{'type':'string','minLength':1,'maxLength':128," \
    "'description':'The id sandbox_create returned'}"
#define P_ENV(what) \
    "'environment':{'type':'string','minLength':1,'maxLength':1024,'description':'" what "'}"
#define P_REF                                                \
    "'ref':{'type':'string','minLength':1,'maxLength':1024," \
    "'description':'Branch, tag or commit (default: the default branch)'}"
#define P_PATH                                                \
    "'path':{'type':'string','minLength':1,'maxLength':4096," \
    "'description':'A file path, relative to /workspace/repo or absolute'}"
/* The annotations of a tool that changes nothing and reaches nothing outside sluice, and of
 * one that starts work (a job, a sandbox) that reaches outside. */
#define READ_ONLY "{'readOnlyHint':true,'openWorldHint':false}"
#define STARTS    "{'readOnlyHint':false,'destructiveHint':false,'openWorldHint':true}"
#define OBJ(props, req)                                               \
    "{'type':'object','properties':{" props "},'required':[" req "]," \
    "'additionalProperties':false}"

static const char *const body_all[] = { "*", NULL };
static const char *const body_create[] = { "ref", "environment", NULL };
static const char *const body_read[] = { "path", NULL };

static json_t *exec_body(const json_t *args);
static json_t *write_body(const json_t *args);
static int read_result(json_t *sc);

/* The sandboxes of the repository, and an action on one of them. */
#define SANDBOXES       "/api/v1/repos/{owner}/{repo}/sandboxes"
#define SANDBOX(action) SANDBOXES "/{sandbox_id}/" action

static const struct tool tools[] = {
    {
            .name = "list_environments",
            .title = "List environments",
            .description = "The environments you can use: your own (scope user) and every global "
                           "one. No variable values are included (GET /api/v1/environments).",
            .schema = "{'type':'object','properties':{},'additionalProperties':false}",
            .annotations = READ_ONLY,
            .route = { "GET", "/api/v1/environments", NULL, NULL },
    },
    {
            .name = "get_environment",
            .title = "Get an environment",
            .description = "One environment by id or name, with every field: secret values "
                           "masked as ******, credentials as has_value only "
                           "(GET /api/v1/environments/{id-or-name}).",
            .schema = OBJ(P_ENV("The id or the name of the environment"), "'environment'"),
            .annotations = READ_ONLY,
            .route = { "GET", "/api/v1/environments/{environment}", NULL, NULL },
    },
    {
            .name = "submit_job",
            .title = "Submit a job",
            .description = "Runs a shell command in a fresh sandbox for each repository; the "
                           "environment applies to every repository, or is resolved per "
                           "repository when absent. Returns the job ids (POST /api/v1/jobs).",
            .schema =
                    OBJ("'repos':{'type':'array','minItems':1,'description':'The repositories',"
                        "'items':{'type':'object','properties':{"
                        "'repo_id':{'type':'string','minLength':3,'maxLength':1024,"
                        "'description':'owner/name'}," P_REF "},"
                        "'required':['repo_id'],'additionalProperties':false}},"
                        "'command':{'type':'string','minLength':1,"
                        "'description':'The command, run with bash -c in /workspace/repo'},"
                        "'timeoutMs':{'type':'integer','minimum':1,'maximum':86400000,"
                        "'description':'Time limit of the command in ms (default 600000)'}," P_ENV(
                                "An environment id or name for every repository (optional)"),
                        "'repos','command'"),
            .annotations = STARTS,
            .route = { "POST", "/api/v1/jobs", body_all, NULL },
    },
    {
            .name = "get_job",
            .title = "Get a job",
            .description = "A job's status (queued, running, succeeded, failed, error), its "
                           "command's result and timings (GET /api/v1/jobs/{id}).",
            .schema = OBJ("'id':{'type':'string','minLength':1,'maxLength':128,"
                          "'description':'The job id submit_job returned'}",
                          "'id'"),
            .annotations = READ_ONLY,
            .route = { "GET", "/api/v1/jobs/{id}", NULL, NULL },
    },
    {
            .name = "sandbox_create",
            .title = "Create a sandbox",
            .description = "Starts a sandbox container for a repository whose only way out is "
                           "the egress proxy, and returns its id and ref once it runs; the "
                           "repository is cloned into /workspace/repo in the background (with a "
                           "git platform): the first exec, read or write waits for the clone, "
                           "and a failed clone is that call's error (the clone failed: git's "
                           "reason). The start can take up to 3 minutes "
                           "(POST /api/v1/repos/{owner}/{name}/sandboxes).",
            .schema = OBJ(P_WHERE "," P_REF "," P_ENV("An environment id or name (default: "
                                                      "resolved for the repository)"),
                          "'owner','repo'"),
            .annotations = STARTS,
            .route = { "POST", SANDBOXES, body_create, NULL },
    },
    {
            .name = "sandbox_exec",
            .title = "Run a command in a sandbox",
            .description = "Runs command with bash -c in the sandbox (in /workspace/repo unless "
                           "cwd says otherwise) and returns exitCode, stdout, stderr (1 MiB "
                           "each), timedOut, truncated and durationMs. A non-zero exit is a "
                           "normal result; a command past timeout_seconds is stopped and "
                           "reports exitCode 124 (POST .../sandboxes/{id}/exec).",
            .schema = OBJ(P_WHERE "," P_SANDBOX ",'command':{'type':'string','minLength':1,"
                                  "'description':'The shell command, run with bash -c'},"
                                  "'cwd':{'type':'string','minLength':1,'maxLength':4096,"
                                  "'description':'Directory, relative to /workspace/repo or "
                                  "absolute (default /workspace/repo)'},"
                                  "'env':{'type':'object','additionalProperties':{'type':'string'},"
                                  "'description':'Extra environment variables'},"
                                  "'timeout_seconds':{'type':'integer','minimum':1,"
                                  "'maximum':86400,"
                                  "'description':'Time limit in seconds (default 600)'}",
                          "'owner','repo','sandbox_id','command'"),
            .annotations = "{'readOnlyHint':false,'destructiveHint':true,'openWorldHint':true}",
            .route = { "POST", SANDBOX("exec"), NULL, exec_body },
    },
    {
            .name = "sandbox_read_file",
            .title = "Read a file in a sandbox",
            .description = "Returns path, size and content of a file of the sandbox, at most "
                           "64 MiB: the content as text when the file is valid UTF-8, else "
                           "base64 with encoding: base64 (POST .../sandboxes/{id}/read).",
            .schema = OBJ(P_WHERE "," P_SANDBOX "," P_PATH, "'owner','repo','sandbox_id','path'"),
            .annotations = READ_ONLY,
            .route = { "POST", SANDBOX("read"), body_read, NULL },
            .result_fn = read_result,
    },
    {
            .name = "sandbox_write_file",
            .title = "Write a file in a sandbox",
            .description = "Writes content, as UTF-8 text, to a file of the sandbox, creating "
                           "parent directories (POST .../sandboxes/{id}/write).",
            .schema = OBJ(P_WHERE "," P_SANDBOX "," P_PATH
                                  ",'content':{'type':'string','description':'The text to "
                                  "write (UTF-8)'},"
                                  "'mode':{'type':'integer','minimum':0,'maximum':4095,"
                                  "'description':'File mode, e.g. 493 for 0755 (default 420)'}",
                          "'owner','repo','sandbox_id','path','content'"),
            .annotations = "{'readOnlyHint':false,'destructiveHint':true,'openWorldHint':false}",
            .route = { "POST", SANDBOX("write"), NULL, write_body },
    },
    {
            .name = "sandbox_close",
            .title = "Close a sandbox",
            .description = "Removes the sandbox container and revokes its proxy credentials "
                           "(POST .../sandboxes/{id}/close).",
            .schema = OBJ(P_WHERE "," P_SANDBOX, "'owner','repo','sandbox_id'"),
            .annotations = "{'readOnlyHint':false,'destructiveHint':true,'idempotentHint':true,"
                           "'openWorldHint':false}",
            .route = { "POST", SANDBOX("close"), NULL, NULL },
            .empty_result = "{'closed':true}",
    },
};

/* Parses JSON written with single quotes for double ones (the table above). NULL when out of
 * memory (the table's texts are valid; unit.mcp parses every one). */
static json_t *sq_json(const char *text)
{
    size_t n = strlen(text);
    char *copy = sl_strndup(text, n);
    json_t *doc;

    if (copy == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (copy[i] == '\'') {
            copy[i] = '"';
        }
    }
    doc = json_loadb(copy, n, 0, NULL);
    sl_free(copy);
    return doc;
}

static const struct tool *find_tool(const char *name)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(tools); i++) {
        if (strcmp(tools[i].name, name) == 0) {
            return &tools[i];
        }
    }
    return NULL;
}

/* ---- argument checks: the subset of JSON Schema the table uses ---------------------------- */

struct arg_err {
    char field[256];
    char message[ARG_ERR_BYTES];
};

static bool arg_fail(struct arg_err *e, const char *field, const char *fmt, ...) SL_PRINTF(3, 4);

static bool arg_fail(struct arg_err *e, const char *field, const char *fmt, ...)
{
    va_list ap;

    (void)snprintf(e->field, sizeof(e->field), "%s", field);
    va_start(ap, fmt);
    (void)vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return false;
}

static size_t utf8_length(const char *s, size_t n)
{
    size_t count = 0;

    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            count++;
        }
    }
    return count;
}

static bool type_is(json_t *v, const char *type)
{
    if (strcmp(type, "string") == 0) {
        return json_is_string(v);
    }
    if (strcmp(type, "integer") == 0) {
        return json_is_integer(v);
    }
    if (strcmp(type, "object") == 0) {
        return json_is_object(v);
    }
    if (strcmp(type, "array") == 0) {
        return json_is_array(v);
    }
    if (strcmp(type, "boolean") == 0) {
        return json_is_boolean(v);
    }
    return false;
}

static const char *type_words(const char *type)
{
    if (strcmp(type, "integer") == 0) {
        return "an integer";
    }
    if (strcmp(type, "object") == 0) {
        return "an object";
    }
    if (strcmp(type, "array") == 0) {
        return "an array";
    }
    if (strcmp(type, "boolean") == 0) {
        return "true or false";
    }
    return "a string";
}

static bool check_value(const json_t *schema, json_t *v, const char *field, int depth,
                        struct arg_err *e);

static void child_field(char *out, size_t cap, const char *field, const char *key, long index)
{
    if (key != NULL) {
        (void)snprintf(out, cap, "%s%s%.64s", field, field[0] != '\0' ? "." : "", key);
    } else {
        (void)snprintf(out, cap, "%s[%ld]", field, index);
    }
}

static bool check_object(const json_t *schema, json_t *v, const char *field, int depth,
                         struct arg_err *e)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const json_t *req;
    const char *key;
    json_t *item;
    size_t i;
    char sub[256];

    json_array_foreach(json_object_get(schema, "required"), i, req)
    {
        if (json_object_get(v, json_string_value(req)) == NULL) {
            child_field(sub, sizeof(sub), field, json_string_value(req), 0);
            return arg_fail(e, sub, "required");
        }
    }
    json_object_foreach(v, key, item)
    {
        const json_t *ps = json_object_get(props, key);

        child_field(sub, sizeof(sub), field, key, 0);
        if (ps == NULL && json_is_false(extra)) {
            return arg_fail(e, sub, "unknown argument");
        }
        if (ps == NULL) {
            ps = json_is_object(extra) ? extra : NULL;
        }
        if (ps != NULL && !check_value(ps, item, sub, depth + 1, e)) {
            return false;
        }
    }
    return true;
}

static bool check_array(const json_t *schema, json_t *v, const char *field, int depth,
                        struct arg_err *e)
{
    const json_t *items = json_object_get(schema, "items");
    const json_t *min = json_object_get(schema, "minItems");
    const json_t *max = json_object_get(schema, "maxItems");
    json_t *item;
    size_t i;
    char sub[256];

    if (min != NULL && (json_int_t)json_array_size(v) < json_integer_value(min)) {
        return arg_fail(e, field, "at least %lld item(s)", (long long)json_integer_value(min));
    }
    if (max != NULL && (json_int_t)json_array_size(v) > json_integer_value(max)) {
        return arg_fail(e, field, "at most %lld items", (long long)json_integer_value(max));
    }
    json_array_foreach(v, i, item)
    {
        child_field(sub, sizeof(sub), field, NULL, (long)i);
        if (items != NULL && !check_value(items, item, sub, depth + 1, e)) {
            return false;
        }
    }
    return true;
}

/* Checks `v` against `schema` (type, properties, required, additionalProperties, items,
 * minItems, maxItems, minLength, maxLength, minimum, maximum). Recursion follows the schema,
 * whose depth is fixed by the table (SCHEMA_DEPTH_MAX guards it anyway). */
static bool check_value(const json_t *schema, json_t *v, const char *field, int depth,
                        struct arg_err *e)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    const json_t *lim;

    if (depth > SCHEMA_DEPTH_MAX) {
        return arg_fail(e, field, "nested too deeply");
    }
    if (type != NULL && !type_is(v, type)) {
        return arg_fail(e, field, "must be %s", type_words(type));
    }
    if (json_is_string(v)) {
        size_t n = utf8_length(json_string_value(v), json_string_length(v));

        if (strlen(json_string_value(v)) != json_string_length(v)) {
            return arg_fail(e, field, "must not contain NUL characters");
        }
        lim = json_object_get(schema, "minLength");
        if (lim != NULL && (json_int_t)n < json_integer_value(lim)) {
            return json_integer_value(lim) == 1 ? arg_fail(e, field, "must not be empty")
                                                : arg_fail(e, field, "at least %lld characters",
                                                           (long long)json_integer_value(lim));
        }
        lim = json_object_get(schema, "maxLength");
        if (lim != NULL && (json_int_t)n > json_integer_value(lim)) {
            return arg_fail(e, field, "at most %lld characters",
                            (long long)json_integer_value(lim));
        }
    } else if (json_is_integer(v)) {
        lim = json_object_get(schema, "minimum");
        if (lim != NULL && json_integer_value(v) < json_integer_value(lim)) {
            return arg_fail(e, field, "must be at least %lld", (long long)json_integer_value(lim));
        }
        lim = json_object_get(schema, "maximum");
        if (lim != NULL && json_integer_value(v) > json_integer_value(lim)) {
            return arg_fail(e, field, "must be at most %lld", (long long)json_integer_value(lim));
        }
    } else if (json_is_object(v)) {
        return check_object(schema, v, field, depth, e);
    } else if (json_is_array(v)) {
        return check_array(schema, v, field, depth, e);
    }
    return true;
}

/* ---- JSON-RPC answers --------------------------------------------------------------------- */

/* Sets the answer now: `status` and `doc` (taken) as text. */
static int answer(struct sl_mcp_plan *out, int status, json_t *doc)
{
    if (doc == NULL) {
        return SL_ENOMEM;
    }
    out->body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (out->body == NULL) {
        return SL_ENOMEM;
    }
    out->status = status;
    return 0;
}

/* A JSON-RPC error for `id` (borrowed; NULL: the id is unknown, rendered null). */
static int answer_error(struct sl_mcp_plan *out, int status, const json_t *id, int code,
                        const char *message)
{
    return answer(out, status,
                  json_pack("{s:s,s:O?,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                            code, "message", message));
}

static int answer_errorf(struct sl_mcp_plan *out, int status, const json_t *id, int code,
                         const char *fmt, ...) SL_PRINTF(5, 6);

static int answer_errorf(struct sl_mcp_plan *out, int status, const json_t *id, int code,
                         const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return answer_error(out, status, id, code, msg);
}

/* -32022 for the revision `requested`, with the list of those spoken (MCP 2026-07-28). */
static int answer_unsupported_version(struct sl_mcp_plan *out, const json_t *id,
                                      const char *requested)
{
    char msg[160];

    (void)snprintf(msg, sizeof(msg),
                   "Unsupported protocol version '%.64s' (supported: " VERSIONS_TEXT ")",
                   requested);
    return answer(out, 400,
                  json_pack("{s:s,s:O?,s:{s:i,s:s,s:{s:s,s:[sss]}}}", "jsonrpc", "2.0", "id", id,
                            "error", "code", SL_MCP_UNSUPPORTED_VERSION, "message", msg, "data",
                            "requested", requested, "supported", versions[0], versions[1],
                            versions[2]));
}

/* Marks `result` (a result object, or NULL) complete when the request was stateless. */
static json_t *completed(json_t *result, bool stateless)
{
    if (result != NULL && stateless
        && json_object_set_new(result, "resultType", json_string("complete")) < 0) {
        json_decref(result);
        return NULL;
    }
    return result;
}

/* A JSON-RPC result (`result` taken). */
static int answer_result(struct sl_mcp_plan *out, const json_t *id, json_t *result)
{
    result = completed(result, out->stateless);
    if (result == NULL) {
        return SL_ENOMEM;
    }
    return answer(out, 200,
                  json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* ---- transport checks --------------------------------------------------------------------- */

/* True when the media type of `value` (before any ';') is `type`, case-insensitive. */
static bool media_is(const char *value, const char *type)
{
    size_t n = strlen(type);

    while (*value == ' ' || *value == '\t') {
        value++;
    }
    if (strncasecmp(value, type, n) != 0) {
        return false;
    }
    value += n;
    while (*value == ' ' || *value == '\t') {
        value++;
    }
    return *value == '\0' || *value == ';';
}

/* True when the Accept list allows application/json (the answer is always that). */
static bool accepts_json(const char *accept)
{
    const char *p = accept;

    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        char item[128];

        if (n < sizeof(item)) {
            memcpy(item, p, n);
            item[n] = '\0';
            if (media_is(item, "application/json") || media_is(item, "application/*")
                || media_is(item, "*/*")) {
                return true;
            }
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return false;
}

/* Whether revision `v` is spoken; from `first` on in `versions`. */
static bool version_known(const char *v, size_t first)
{
    for (size_t i = first; i < SL_ARRAY_LEN(versions); i++) {
        if (strcmp(v, versions[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool is_loopback_or_ip(const char *host)
{
    unsigned char buf[16];
    char h[256];
    size_t n = strlen(host);

    if (strcasecmp(host, "localhost") == 0) {
        return true;
    }
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(h)) {
        memcpy(h, host + 1, n - 2);
        h[n - 2] = '\0';
        return uv_inet_pton(AF_INET6, h, buf) == 0;
    }
    return uv_inet_pton(AF_INET, host, buf) == 0;
}

bool sl_mcp_origin_ok(const char *origin, const char *host)
{
    char hostname[256];
    const char *colon;
    size_t n;

    if (origin == NULL) {
        return true;
    }
    if (host == NULL || strncasecmp(origin, "http://", 7) != 0
        || strcasecmp(origin + 7, host) != 0) {
        return false;
    }
    /* The Host header's name without its port: "[::1]:8080", "127.0.0.1:8080", "localhost". */
    colon = host[0] == '[' ? strchr(host, ']') : strchr(host, ':');
    if (host[0] == '[') {
        n = colon != NULL ? (size_t)(colon - host) + 1 : strlen(host);
    } else {
        n = colon != NULL ? (size_t)(colon - host) : strlen(host);
    }
    if (n == 0 || n >= sizeof(hostname)) {
        return false;
    }
    memcpy(hostname, host, n);
    hostname[n] = '\0';
    return is_loopback_or_ip(hostname);
}

/* ---- the route of a tool call ------------------------------------------------------------- */

/* Appends `s` as one path segment: everything but letters, digits, '-', '_' and '~' is
 * percent-encoded, '.' included, so no argument makes a dot segment that a normalising proxy in
 * front of the API could resolve. */
static int append_segment(struct sl_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;

    for (const unsigned char *p = (const unsigned char *)s; rc == 0 && *p != '\0'; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                     || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '~';
        char esc[3] = { '%', hex[*p >> 4], hex[*p & 15] };

        rc = plain ? sl_buf_append(b, p, 1) : sl_buf_append(b, esc, 3);
    }
    return rc;
}

/* Appends the argument `name` of `args` (a required string of the schema) for its {name} in a
 * route's path, as one segment. */
static int append_arg(struct sl_buf *b, const json_t *args, const char *name)
{
    const char *v = json_string_value(json_object_get(args, name));

    /* The table's path names are required strings of its schemas: a bug otherwise. */
    SL_BUG_ON(v == NULL);
    return append_segment(b, v);
}

/* The path of `t` for `args`: its route's path with every {name} filled in (append_arg()).
 * Returns 0 with `*out` owned, or SL_ENOMEM. */
static int build_path(const struct tool *t, const json_t *args, char **out)
{
    const char *p = t->route.path;
    struct sl_buf b;
    char name[32];
    int rc = 0;

    sl_buf_init(&b, PATH_MAX_BYTES);
    while (rc == 0 && *p != '\0') {
        const char *open = strchr(p, '{');
        const char *close = open != NULL ? strchr(open, '}') : NULL;
        size_t n = open != NULL ? (size_t)(open - p) : strlen(p);

        rc = sl_buf_append(&b, p, n);
        p += n;
        if (rc == 0 && open != NULL) {
            /* The table's names are short and closed: a bug otherwise. */
            SL_BUG_ON(close == NULL || (size_t)(close - open) > sizeof(name));
            memcpy(name, open + 1, (size_t)(close - open) - 1);
            name[close - open - 1] = '\0';
            rc = append_arg(&b, args, name);
            p = close + 1;
        }
    }
    if (rc == 0) {
        *out = sl_strdup(sl_buf_cstr(&b));
    }
    sl_buf_finish(&b);
    return rc == 0 && *out != NULL ? 0 : SL_ENOMEM;
}

/* The body of `t` for `args`: the arguments the route takes in its body. */
static int build_body(const struct tool *t, const json_t *args, char **out)
{
    json_t *body;

    *out = NULL;
    if (t->route.body_keys == NULL && t->route.body_fn == NULL) {
        return 0;
    }
    if (t->route.body_fn != NULL) {
        body = t->route.body_fn(args);
    } else if (strcmp(t->route.body_keys[0], "*") == 0) {
        body = json_deep_copy(args);
    } else {
        body = json_object();
        for (size_t i = 0; body != NULL && t->route.body_keys[i] != NULL; i++) {
            json_t *v = json_object_get(args, t->route.body_keys[i]);

            if (v != NULL && json_object_set(body, t->route.body_keys[i], v) < 0) {
                json_decref(body);
                body = NULL;
            }
        }
    }
    if (body == NULL) {
        return SL_ENOMEM;
    }
    *out = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return *out != NULL ? 0 : SL_ENOMEM;
}

/* ---- the seed's arguments and results (docs/reference/mcp.md, Tools) ------------------------ */

/* sandbox_exec: command, cwd, env, timeout_seconds -> the route's cmd, cwd, env, timeoutMs. */
static json_t *exec_body(const json_t *args)
{
    static const char *const same[] = { "cwd", "env" };
    const json_t *secs = json_object_get(args, "timeout_seconds");
    json_t *body = json_object();
    bool ok = body != NULL && json_object_set(body, "cmd", json_object_get(args, "command")) == 0;

    for (size_t i = 0; ok && i < SL_ARRAY_LEN(same); i++) {
        json_t *v = json_object_get(args, same[i]);

        ok = v == NULL || json_object_set(body, same[i], v) == 0;
    }
    if (ok && secs != NULL) {
        /* At most 86400 (the schema): the product fits. */
        ok = json_object_set_new(body, "timeoutMs", json_integer(json_integer_value(secs) * 1000))
             == 0;
    }
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* sandbox_write_file: content is text; the route takes its UTF-8 bytes in base64. */
static json_t *write_body(const json_t *args)
{
    const json_t *content = json_object_get(args, "content");
    json_t *mode = json_object_get(args, "mode");
    size_t n = json_string_length(content);
    size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = sl_malloc(cap);
    json_t *body = b64 != NULL ? json_object() : NULL;
    bool ok = body != NULL;

    if (ok) {
        (void)sodium_bin2base64(b64, cap, (const unsigned char *)json_string_value(content), n,
                                sodium_base64_VARIANT_ORIGINAL);
        ok = json_object_set(body, "path", json_object_get(args, "path")) == 0
             && json_object_set_new(body, "content", json_string(b64)) == 0
             && (mode == NULL || json_object_set(body, "mode", mode) == 0);
    }
    sl_free(b64);
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* True when `n` bytes at `p` are well-formed UTF-8 (no overlong forms, no surrogates, nothing
 * past U+10FFFF) without a NUL byte: text an agent can take as a JSON string. */
static bool is_text(const unsigned char *p, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
        static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };

        if (len == 0 || c == 0 || i + len > n) {
            return false;
        }
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (p[i + k] & 0x3Fu);
        }
        if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

/* sandbox_read_file: the route's base64 content becomes text when the file is text; else it
 * stays base64, with "encoding":"base64". */
static int read_result(json_t *sc)
{
    const json_t *c = json_object_get(sc, "content");
    size_t n = json_string_length(c);
    size_t cap = n / 4 * 3 + 3;
    unsigned char *bin;
    size_t len = 0;
    bool text;
    int rc;

    if (!json_is_string(c)) {
        return 0;
    }
    bin = sl_malloc(cap);
    if (bin == NULL) {
        return SL_ENOMEM;
    }
    text = sodium_base642bin(bin, cap, json_string_value(c), n, NULL, &len, NULL,
                             sodium_base64_VARIANT_ORIGINAL)
                   == 0
           && is_text(bin, len);
    if (text) {
        rc = json_object_set_new(sc, "content", json_stringn((const char *)bin, len));
    } else {
        rc = json_object_set_new(sc, "encoding", json_string("base64"));
    }
    sl_free(bin);
    return rc == 0 ? 0 : SL_ENOMEM;
}

/* A tool error for arguments that break the schema: the §5 validation shape, as text too. */
static json_t *argument_error(const struct arg_err *e)
{
    char text[sizeof(e->field) + sizeof(e->message) + 32];

    (void)snprintf(text, sizeof(text), "invalid arguments: %s: %s", e->field, e->message);
    return json_pack("{s:[{s:s,s:s}],s:{s:s,s:[{s:s,s:s}]},s:b}", "content", "type", "text", "text",
                     text, "structuredContent", "message", text, "errors", "field", e->field,
                     "message", e->message, "isError", 1);
}

static int prepare_call(json_t *id, const json_t *params, struct sl_mcp_plan *out)
{
    const json_t *name = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    const struct tool *t;
    json_t *schema;
    struct arg_err e;
    bool ok;
    int rc;

    if (!json_is_string(name)) {
        return answer_error(out, 200, id, SL_MCP_INVALID_PARAMS,
                            "params.name: the tool name is required");
    }
    t = find_tool(json_string_value(name));
    if (t == NULL) {
        return answer_errorf(out, 200, id, SL_MCP_INVALID_PARAMS, "Unknown tool: %.128s",
                             json_string_value(name));
    }
    if (args != NULL && !json_is_object(args)) {
        return answer_error(out, 200, id, SL_MCP_INVALID_PARAMS,
                            "params.arguments: must be an object");
    }
    args = args != NULL ? json_incref(args) : json_object();
    schema = sq_json(t->schema);
    if (args == NULL || schema == NULL) {
        json_decref(args);
        json_decref(schema);
        return SL_ENOMEM;
    }
    memset(&e, 0, sizeof(e));
    ok = check_value(schema, args, "", 0, &e);
    json_decref(schema);
    rc = ok ? build_path(t, args, &out->route.path) : SL_EINVAL;
    if (rc == 0) {
        rc = build_body(t, args, &out->route.body);
    }
    json_decref(args);
    if (rc == SL_EINVAL) {
        return answer_result(out, id, argument_error(&e));
    }
    if (rc < 0) {
        return rc;
    }
    out->route.tool = t->name;
    out->route.method = t->route.method;
    out->route.id = json_incref(id);
    out->route.stateless = out->stateless;
    out->has_route = true;
    return 0;
}

static json_t *tool_list(void)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < SL_ARRAY_LEN(tools); i++) {
        json_t *item =
                json_pack("{s:s,s:s,s:s,s:o,s:o}", "name", tools[i].name, "title", tools[i].title,
                          "description", tools[i].description, "inputSchema",
                          sq_json(tools[i].schema), "annotations", sq_json(tools[i].annotations));

        if (json_array_append_new(arr, item) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr != NULL ? json_pack("{s:o}", "tools", arr) : NULL;
}

static int prepare_initialize(const json_t *id, const json_t *params, struct sl_mcp_plan *out)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

    if (asked == NULL) {
        return answer_error(out, 200, id, SL_MCP_INVALID_PARAMS,
                            "params.protocolVersion: a string is required");
    }
    /* MCP lifecycle: the client's revision when we speak it with initialize, else our latest
     * such (the client then decides whether to go on; 2026-07-28 has no initialize). */
    return answer_result(out, id,
                         json_pack("{s:s,s:{s:{}},s:{s:s,s:s,s:s},s:s}", "protocolVersion",
                                   version_known(asked, INITIALIZE_VERSIONS_FIRST)
                                           ? asked
                                           : SL_MCP_PROTOCOL_LATEST,
                                   "capabilities", "tools", "serverInfo", "name", "sluice", "title",
                                   "sluice control plane", "version", SLUICE_VERSION,
                                   "instructions", instructions));
}

/* server/discover (MCP 2026-07-28): the revisions, capabilities and identity, asked for by a
 * client of any revision before anything else. */
static int prepare_discover(const json_t *id, struct sl_mcp_plan *out)
{
    json_t *info = json_pack("{s:s,s:s,s:s}", "name", "sluice", "title", "sluice control plane",
                             "version", SLUICE_VERSION);
    json_t *res = NULL;

    out->stateless = true;
    /* serverInfo twice: in _meta, where 2026-07-28 puts it, and as the field older drafts and
     * their clients read. Cache hints as the SDKs default them: not cached, not shared. */
    if (info != NULL) {
        res = json_pack("{s:[sss],s:{s:{}},s:O,s:s,s:i,s:s,s:{s:O}}", "supportedVersions",
                        versions[0], versions[1], versions[2], "capabilities", "tools",
                        "serverInfo", info, "instructions", instructions, "ttlMs", 0, "cacheScope",
                        "private", "_meta", META_SERVER_INFO, info);
        json_decref(info);
    }
    return answer_result(out, id, res);
}

/* A header check of MCP 2026-07-28: `sent` (NULL: absent) must be `want`. */
static int mirror_check(struct sl_mcp_plan *out, const json_t *id, const char *header,
                        const char *sent, const char *want, bool *failed)
{
    *failed = sent == NULL || strcmp(sent, want) != 0;
    if (!*failed) {
        return 0;
    }
    if (sent == NULL) {
        return answer_errorf(
                out, 400, id, SL_MCP_HEADER_MISMATCH,
                "Header mismatch: the %s header is required with MCP " SL_MCP_PROTOCOL_STATELESS
                " (the body says '%.128s')",
                header, want);
    }
    return answer_errorf(out, 400, id, SL_MCP_HEADER_MISMATCH,
                         "Header mismatch: %s is '%.128s' but the body says '%.128s'", header, sent,
                         want);
}

/*
 * The revision a message declares in params._meta, and for 2026-07-28 the headers that mirror
 * the body. Sets `*done` when `out` holds the answer (an error); else marks `out` stateless
 * when the message declared 2026-07-28. A message that declares nothing is of a handshake
 * revision, unless its MCP-Protocol-Version header says 2026-07-28.
 */
static int check_declared(const struct sl_mcp_input *in, const json_t *id, const char *m,
                          const json_t *params, struct sl_mcp_plan *out, bool *done)
{
    const json_t *meta = json_object_get(params, "_meta");
    const json_t *declared = json_object_get(meta, META_VERSION);
    const char *v = json_string_value(declared);
    const char *name = json_string_value(json_object_get(params, "name"));
    int rc;

    *done = true;
    if (declared == NULL) {
        if (in->protocol_version != NULL
            && strcmp(in->protocol_version, SL_MCP_PROTOCOL_STATELESS) == 0) {
            return answer_error(
                    out, 400, id, SL_MCP_HEADER_MISMATCH,
                    "Header mismatch: MCP-Protocol-Version is " SL_MCP_PROTOCOL_STATELESS
                    " but params._meta[\"" META_VERSION "\"] is missing");
        }
        *done = false;
        return 0;
    }
    if (v == NULL) {
        return answer_error(out, id != NULL ? 200 : 400, id, SL_MCP_INVALID_PARAMS,
                            "params._meta[\"" META_VERSION "\"]: must be a string");
    }
    if (!version_known(v, 0)) {
        return answer_unsupported_version(out, id, v);
    }
    if (in->protocol_version != NULL && strcmp(in->protocol_version, v) != 0) {
        return answer_errorf(out, 400, id, SL_MCP_HEADER_MISMATCH,
                             "Header mismatch: MCP-Protocol-Version is '%.64s' but the body "
                             "declares '%.64s'",
                             in->protocol_version, v);
    }
    if (strcmp(v, SL_MCP_PROTOCOL_STATELESS) != 0) {
        /* A handshake revision named in _meta too: as if it were not. */
        *done = false;
        return 0;
    }
    rc = mirror_check(out, id, "MCP-Protocol-Version", in->protocol_version, v, done);
    if (*done) {
        return rc;
    }
    rc = mirror_check(out, id, "Mcp-Method", in->mcp_method, m, done);
    if (*done) {
        return rc;
    }
    if (strcmp(m, "tools/call") == 0 && name != NULL) {
        rc = mirror_check(out, id, "Mcp-Name", in->mcp_name, name, done);
        if (*done) {
            return rc;
        }
    }
    if (id != NULL && !json_is_object(json_object_get(meta, META_CAPABILITIES))) {
        *done = true;
        return answer_error(out, 200, id, SL_MCP_INVALID_PARAMS,
                            "params._meta[\"" META_CAPABILITIES
                            "\"]: an object is required (MCP " SL_MCP_PROTOCOL_STATELESS ")");
    }
    out->stateless = true;
    *done = false;
    return 0;
}

/* One parsed JSON-RPC message (an object). */
static int prepare_message(const struct sl_mcp_input *in, json_t *msg, struct sl_mcp_plan *out)
{
    json_t *id = json_object_get(msg, "id");
    const json_t *method = json_object_get(msg, "method");
    const json_t *params = json_object_get(msg, "params");
    const char *m;

    if (!json_is_string(json_object_get(msg, "jsonrpc"))
        || strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0) {
        return answer_error(out, 400, NULL, SL_MCP_INVALID_REQUEST,
                            "Invalid Request: jsonrpc must be \"2.0\"");
    }
    if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
        /* MCP: a request id is a string or an integer, never null. */
        return answer_error(out, 400, NULL, SL_MCP_INVALID_REQUEST,
                            "Invalid Request: id must be a string or an integer");
    }
    if (method == NULL) {
        /* A response to a request of ours (we send none) is accepted and dropped. */
        if (id != NULL
            && (json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL)) {
            out->status = 202;
            return 0;
        }
        return answer_error(out, 400, NULL, SL_MCP_INVALID_REQUEST,
                            "Invalid Request: method is required");
    }
    if (!json_is_string(method)) {
        return answer_error(out, 400, id, SL_MCP_INVALID_REQUEST,
                            "Invalid Request: method must be a string");
    }
    m = json_string_value(method);
    if (params != NULL && !json_is_object(params)) {
        return answer_error(out, id != NULL ? 200 : 400, id, SL_MCP_INVALID_PARAMS,
                            "params must be an object");
    }
    {
        bool done;
        int rc = check_declared(in, id, m, params, out, &done);

        if (done) {
            return rc;
        }
    }
    if (id == NULL) {
        /* A notification (notifications/initialized, notifications/cancelled, ...): nothing
         * to answer, none of them changes anything here. */
        out->status = 202;
        return 0;
    }
    if (strcmp(m, "server/discover") == 0) {
        return prepare_discover(id, out);
    }
    if (strcmp(m, "initialize") == 0) {
        return prepare_initialize(id, params, out);
    }
    if (strcmp(m, "ping") == 0) {
        return answer_result(out, id, json_object());
    }
    if (strcmp(m, "tools/list") == 0) {
        json_t *list = tool_list();

        /* 2026-07-28: a list result carries cache hints (as the SDKs default them). */
        if (list != NULL && out->stateless
            && (json_object_set_new(list, "ttlMs", json_integer(0)) < 0
                || json_object_set_new(list, "cacheScope", json_string("private")) < 0)) {
            json_decref(list);
            list = NULL;
        }
        return answer_result(out, id, list);
    }
    if (strcmp(m, "tools/call") == 0) {
        return prepare_call(id, params, out);
    }
    return answer_errorf(out, 200, id, SL_MCP_METHOD_NOT_FOUND, "Method not found: %.128s", m);
}

int sl_mcp_prepare(const struct sl_mcp_input *in, struct sl_mcp_plan *out)
{
    json_error_t jerr;
    json_t *msg;
    int rc;

    if (strcmp(in->method, "POST") != 0) {
        out->allow_post = true;
        rc = answer_error(out, 405, NULL, SL_MCP_SERVER_ERROR,
                          strcmp(in->method, "GET") == 0
                                  ? "Method Not Allowed: this server offers no event stream; "
                                    "POST JSON-RPC messages"
                                  : "Method Not Allowed: use POST (there are no sessions)");
        goto out;
    }
    if (in->content_type == NULL || !media_is(in->content_type, "application/json")) {
        rc = answer_error(out, 415, NULL, SL_MCP_INVALID_REQUEST,
                          "Unsupported Media Type: Content-Type must be application/json");
        goto out;
    }
    if (in->accept != NULL && !accepts_json(in->accept)) {
        rc = answer_error(out, 406, NULL, SL_MCP_INVALID_REQUEST,
                          "Not Acceptable: the answers are application/json");
        goto out;
    }
    if (in->protocol_version != NULL && !version_known(in->protocol_version, 0)) {
        rc = answer_unsupported_version(out, NULL, in->protocol_version);
        goto out;
    }
    msg = json_loadb(in->body, in->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (msg == NULL) {
        /* For a NUL, jansson's text names a flag of its API, nothing a client can act on. */
        rc = answer_errorf(out, 400, NULL, SL_MCP_PARSE_ERROR, "Parse error: %s (at byte %ld)",
                           json_error_code(&jerr) == json_error_null_character
                                   ? "a string holds \\u0000, a NUL byte, which is not allowed"
                                   : jerr.text,
                           (long)jerr.position);
        goto out;
    }
    if (json_is_array(msg)) {
        rc = answer_error(out, 400, NULL, SL_MCP_INVALID_REQUEST,
                          "Invalid Request: batches are not supported (MCP " SL_MCP_PROTOCOL_LATEST
                          " sends one message per POST)");
    } else if (!json_is_object(msg)) {
        rc = answer_error(out, 400, NULL, SL_MCP_INVALID_REQUEST,
                          "Invalid Request: a JSON-RPC message is an object");
    } else {
        rc = prepare_message(in, msg, out);
    }
    json_decref(msg);
out:
    if (rc < 0) {
        sl_mcp_plan_finish(out);
    }
    return rc;
}

void sl_mcp_plan_finish(struct sl_mcp_plan *plan)
{
    sl_free(plan->body);
    sl_free(plan->route.path);
    sl_free(plan->route.body);
    json_decref(plan->route.id);
    memset(plan, 0, sizeof(*plan));
}

/* ---- tool results ------------------------------------------------------------------------- */

json_t *sl_mcp_tool_result(const char *tool, int status, const json_t *body)
{
    const struct tool *t = find_tool(tool);
    json_t *sc;
    char *text;
    json_t *res;

    if (status >= 200 && status < 300) {
        if (body == NULL || json_is_null(body)) {
            sc = sq_json(t != NULL && t->empty_result != NULL ? t->empty_result : "{'ok':true}");
        } else if (json_is_object(body)) {
            sc = json_deep_copy(body);
            if (sc != NULL && t != NULL && t->result_fn != NULL && t->result_fn(sc) < 0) {
                json_decref(sc);
                sc = NULL;
            }
        } else {
            sc = json_pack("{s:O}", "result", body);
        }
    } else {
        const char *msg = json_string_value(json_object_get(body, "message"));

        if (msg == NULL) {
            msg = json_string_value(json_object_get(body, "error"));
        }
        sc = json_is_object(body) ? json_deep_copy(body) : json_object();
        if (sc != NULL
            && (json_object_set_new(sc, "status", json_integer(status)) < 0
                || (msg == NULL
                    && json_object_set_new(sc, "message", json_string(sl_http_reason(status)))
                               < 0))) {
            json_decref(sc);
            sc = NULL;
        }
        if (sc == NULL) {
            return NULL;
        }
        return json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text",
                         msg != NULL ? msg : json_string_value(json_object_get(sc, "message")),
                         "structuredContent", sc, "isError", 1);
    }
    if (sc == NULL) {
        return NULL;
    }
    /* MCP 2025-06-18+: a tool with structured content also returns it serialised as text. */
    text = json_dumps(sc, JSON_COMPACT);
    if (text == NULL) {
        json_decref(sc);
        return NULL;
    }
    res = json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text", text,
                    "structuredContent", sc, "isError", 0);
    sl_free(text);
    return res;
}

/* ---- on the loop -------------------------------------------------------------------------- */

struct mcp_call {
    struct sl_api *api;
    struct sl_http_exchange *x;
    const char *tool;
    json_t *id;
    bool stateless;
};

static void respond_doc(struct sl_http_exchange *x, int status, json_t *doc)
{
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;

    json_decref(doc);
    if (text == NULL) {
        sl_http_respond_error(x, 503, "out of memory");
        return;
    }
    sl_http_respond(x, status, "application/json", text, strlen(text));
    sl_free(text);
}

/* The REST answer of a dispatched call. */
static void on_route_reply(void *arg, int status, json_t *body)
{
    struct mcp_call *mc = arg;
    json_t *result = completed(sl_mcp_tool_result(mc->tool, status, body), mc->stateless);

    json_decref(body);
    if (result == NULL) {
        respond_doc(mc->x, 200,
                    json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", mc->id, "error",
                              "code", SL_MCP_SERVER_ERROR, "message", "out of memory"));
    } else {
        respond_doc(mc->x, 200,
                    json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", mc->id, "result", result));
    }
    mc->api->_mcp_calls--;
    json_decref(mc->id);
    sl_free(mc);
}

void sl_mcp_run(struct sl_api *api, struct sl_http_exchange *x, struct sl_mcp_plan *plan,
                const char *auth)
{
    static const char *const allow[] = { "Allow: POST", NULL };
    struct sl_api_request rq;
    struct mcp_call *mc;
    int rc;

    if (!plan->has_route) {
        if (plan->body == NULL) {
            sl_http_respond(x, plan->status, NULL, NULL, 0);
        } else {
            sl_http_respond_headers(x, plan->status, plan->allow_post ? allow : NULL,
                                    "application/json", plan->body, strlen(plan->body));
        }
        sl_mcp_plan_finish(plan);
        return;
    }
    if (api->_mcp_calls >= SL_MCP_MAX_CALLS) {
        respond_doc(x, 503,
                    json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", plan->route.id,
                              "error", "code", SL_MCP_SERVER_ERROR, "message",
                              "too many tool calls at once; try again"));
        sl_mcp_plan_finish(plan);
        return;
    }
    mc = sl_calloc(1, sizeof(*mc));
    if (mc == NULL) {
        sl_http_respond_error(x, 503, "out of memory");
        sl_mcp_plan_finish(plan);
        return;
    }
    mc->api = api;
    mc->x = x;
    mc->tool = plan->route.tool;
    mc->id = plan->route.id;
    mc->stateless = plan->route.stateless;
    plan->route.id = NULL;
    memset(&rq, 0, sizeof(rq));
    rq.method = plan->route.method;
    rq.path = plan->route.path;
    rq.authorization = auth;
    rq.body = plan->route.body;
    rq.body_len = plan->route.body != NULL ? strlen(plan->route.body) : 0;
    sl_log(SL_LOG_DEBUG, 0, "msg=\"MCP tool call\" tool=%s route=\"%s %s\"", mc->tool, rq.method,
           rq.path);
    rc = sl_api_dispatch(api, &rq, on_route_reply, mc);
    sl_mcp_plan_finish(plan);
    if (rc < 0) {
        json_decref(mc->id);
        sl_free(mc);
        sl_http_respond_error(x, 503, "cannot queue the tool call");
        return;
    }
    api->_mcp_calls++;
}
