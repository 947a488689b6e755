/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/policy.c - `sluice policy check|explain` (docs/reference/cli.md §1).
 *
 * check FILE      valid: one summary line on stdout, exit 0. Invalid: every error as
 *                 `$.path: message` on stdout, then `FILE: invalid, N errors`, exit 1. Before
 *                 the last line, each warning as `$.path: warning: message`.
 * explain FILE --client ID-OR-IP --url URL [--method M] [--push-ref REF]
 *                 the decision the proxy would take, as `key: value` lines on stdout, and on a
 *                 refusal the "to allow it" hint; exit 0 allow, 1 deny. A credential's value is
 *                 never printed, only its header name. On the client's git host it says whether
 *                 the git credential is injected and, for a push, which branches it may not
 *                 update (REF: a ref the push updates, judged as the proxy judges it).
 * Usage errors print one line on standard error and exit 2; an unreadable file exits 1. FILE may be
 * `-` for standard input.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"
#include "policy/decision.h"
#include "policy/git.h"
#include "policy/snapshot.h"
#include "policy/url.h"

static const char usage_policy[] =
        "usage: sluice policy check FILE\n"
        "       sluice policy explain FILE --client ID-OR-IP --url URL [--method M]\n"
        "                             [--push-ref REF]\n"
        "\n"
        "Works on a policy snapshot file (the JSON the proxy enforces; FILE may be - for stdin).\n"
        "\n"
        "  check     validate FILE: a one-line summary, or every error with its JSON path\n"
        "            (exit 0 valid, 1 invalid)\n"
        "  explain   print the decision the proxy would take for one request\n"
        "            (exit 0 allow, 1 deny)\n"
        "\n"
        "`sluice policy COMMAND --help` describes a command.\n";

static const char usage_check[] =
        "usage: sluice policy check FILE\n"
        "\n"
        "Validates a policy snapshot. A valid one gives one summary line; an invalid one gives\n"
        "every error as `$.json.path: message`, then a count. Exit 0 valid, 1 invalid or\n"
        "unreadable, 2 usage error.\n";

static const char usage_explain[] =
        "usage: sluice policy explain FILE --client ID-OR-IP --url URL [--method M]\n"
        "                             [--push-ref REF]\n"
        "\n"
        "Prints the decision the proxy would take for one request: allow or deny, the reason\n"
        "code, the matching rule, the client and environment, and whether a credential would\n"
        "be injected (its header name, never its value). On a refusal, also what would allow "
        "it.\n"
        "On the client's git host, also whether the URL is one of its repository's own paths\n"
        "(the git credential is injected there only) and, for a push, which branches it may\n"
        "not update.\n"
        "\n"
        "  --client ID-OR-IP  a client id (its token is assumed correct), or a source address\n"
        "                     (identified as the proxy does for a request without a token)\n"
        "  --url URL          an absolute http:// or https:// URL; https means an intercepted\n"
        "                     TLS request, http a plain one\n"
        "  --method M         the request method (default GET)\n"
        "  --push-ref REF     with POST .../git-receive-pack: a ref the push updates, creates\n"
        "                     or deletes (refs/heads/main); deny git-protected-branch when the\n"
        "                     proxy would refuse the push for it\n"
        "\n"
        "Exit 0 allow, 1 deny (or unreadable or invalid FILE), 2 usage error.\n";

/* The longest path and query `explain` takes from --url. */
#define EXPLAIN_TARGET_MAX 8192

struct explain_args {
    const char *file;
    const char *client;
    const char *url;
    const char *method;
    const char *push_ref;
};

/* Reads all of `path` ("-": stdin) into `b` (capped at the snapshot limit). Prints why not. */
static int read_file(const char *path, struct sl_buf *b)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = 0;

    if (fd == -1) {
        sl_eprintf("cannot read %s: %s", path, strerror(errno));
        return SL_EIO;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
        && (uint64_t)st.st_size > SL_SNAPSHOT_MAX_BYTES) {
        sl_eprintf("cannot read %s: larger than 64 MiB", path);
        rc = SL_ETOOBIG;
    }
    while (rc == 0) {
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n == 0) {
            break;
        }
        if (n == -1) {
            if (errno == EINTR) {
                continue;
            }
            sl_eprintf("cannot read %s: %s", path, strerror(errno));
            rc = SL_EIO;
        } else if ((rc = sl_buf_append(b, chunk, (size_t)n)) != 0) {
            sl_eprintf("cannot read %s: %s", path,
                       rc == SL_ETOOBIG ? "larger than 64 MiB" : sl_strerror(rc));
        }
    }
    if (fd != STDIN_FILENO && close(fd) == -1 && rc == 0) {
        sl_eprintf("cannot read %s: %s", path, strerror(errno));
        rc = SL_EIO;
    }
    return rc;
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* Reads and parses `path`. On SL_EPOLICY `errs` holds the errors; every other failure has
 * been printed already. `warns` (NULL: not wanted) gets the warnings. */
static int load(const char *path, struct sl_snapshot **out, struct sl_policy_errors *errs,
                struct sl_policy_errors *warns)
{
    struct sl_buf b;
    int rc;

    sl_buf_init(&b, SL_SNAPSHOT_MAX_BYTES);
    rc = read_file(path, &b);
    if (rc == 0) {
        rc = sl_snapshot_parse_warn(b.p != NULL ? b.p : (const uint8_t *)"", b.len, out, errs,
                                    warns);
        if (rc < 0 && rc != SL_EPOLICY) {
            sl_eprintf("cannot check %s: %s", path, sl_strerror(rc));
        }
    }
    sl_buf_finish(&b);
    return rc;
}

static int check(const char *path)
{
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_policy_errors warns = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    size_t envs;
    size_t clients;
    size_t rules;
    size_t creds;
    int rc = load(path, &s, &errs, &warns);

    if (rc == SL_EPOLICY) {
        for (size_t i = 0; i < errs.count; i++) {
            printf("%s: %s\n", errs.items[i].path, errs.items[i].message);
        }
    }
    for (size_t i = 0; i < warns.count && (rc == 0 || rc == SL_EPOLICY); i++) {
        printf("%s: warning: %s\n", warns.items[i].path, warns.items[i].message);
    }
    if (rc == SL_EPOLICY) {
        printf("%s: invalid, %s%zu %s\n", path, errs.truncated ? "more than " : "", errs.count,
               plural(errs.count, "error", "errors"));
    }
    sl_policy_errors_finish(&errs);
    sl_policy_errors_finish(&warns);
    if (rc != 0) {
        return SL_CMD_FAIL;
    }
    envs = sl_snapshot_env_count(s);
    clients = sl_snapshot_client_count(s);
    rules = sl_snapshot_rule_count(s);
    creds = sl_snapshot_credential_count(s);
    printf("%s: valid, version %lld, %zu %s, %zu %s, %zu %s, %zu %s\n", path,
           (long long)sl_snapshot_version(s), envs, plural(envs, "environment", "environments"),
           clients, plural(clients, "client", "clients"), rules, plural(rules, "rule", "rules"),
           creds, plural(creds, "credential", "credentials"));
    sl_snapshot_unref(s);
    return SL_CMD_OK;
}

/* One line for a usage error, naming `cmd`'s help. Returns SL_CMD_USAGE. */
static int usage_error(const char *cmd, const char *what, const char *arg)
{
    sl_eprintf("policy %s: %s%s%s%s (see sluice policy %s --help)", cmd, what,
               arg != NULL ? " '" : "", arg != NULL ? arg : "", arg != NULL ? "'" : "", cmd);
    return SL_CMD_USAGE;
}

static int cmd_check(int argc, char **argv)
{
    const char *pos[2];
    size_t n_pos = 0;
    int rc;

    if (!sl_opts_parse_or_usage("policy check", usage_check, argc, argv, NULL, 0, pos, 2, &n_pos,
                                &rc)) {
        return rc;
    }
    if (n_pos == 0) {
        return usage_error("check", "missing FILE", NULL);
    }
    if (n_pos > 1) {
        return usage_error("check", "unexpected argument", pos[1]);
    }
    return check(pos[0]);
}

static int parse_explain_args(int argc, char **argv, struct explain_args *a)
{
    const struct sl_opt options[] = {
        { "--client", SL_OPT_VALUE, NULL, &a->client, NULL, NULL, 0 },
        { "--url", SL_OPT_VALUE, NULL, &a->url, NULL, NULL, 0 },
        { "--method", SL_OPT_VALUE, NULL, &a->method, NULL, NULL, 0 },
        { "--push-ref", SL_OPT_VALUE, NULL, &a->push_ref, NULL, NULL, 0 },
    };
    const char *pos[2];
    size_t n_pos = 0;
    int rc;

    if (!sl_opts_parse_or_usage("policy explain", usage_explain, argc, argv, options,
                                SL_ARRAY_LEN(options), pos, 2, &n_pos, &rc)) {
        return rc == SL_CMD_OK ? 1 : rc;
    }
    if (n_pos == 0) {
        return usage_error("explain", "missing FILE", NULL);
    }
    if (n_pos > 1) {
        return usage_error("explain", "unexpected argument", pos[1]);
    }
    a->file = pos[0];
    if (a->client == NULL || a->client[0] == '\0') {
        return usage_error("explain", "--client ID-OR-IP is required", NULL);
    }
    if (a->url == NULL) {
        return usage_error("explain", "--url URL is required", NULL);
    }
    return 0;
}

/* Is `m` a method name (RFC 9110 token, at most 32 characters)? */
static bool method_ok(const char *m)
{
    size_t n = strlen(m);

    if (n == 0 || n > SL_POLICY_METHOD_LEN_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = (uint8_t)m[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || strchr("!#$%&'*+-.^_`|~", ch) != NULL)) {
            return false;
        }
    }
    return true;
}

/* The client as the proxy would see it: by id (token assumed right), else by address. */
static const struct sl_client *find_client(const struct sl_snapshot *s, const char *arg)
{
    const struct sl_client *c = sl_snapshot_find_client(s, arg);
    struct sockaddr_storage ss;
    struct sl_host h;

    if (c != NULL) {
        return c;
    }
    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, arg, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ss.ss_family = AF_INET;
    } else if (inet_pton(AF_INET6, arg, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ss.ss_family = AF_INET6;
    } else if (sl_host_normalize(sl_slice_str(arg), 0, &h, NULL) == 0 && h.kind != SL_HOST_DNS) {
        /* Other spellings: `[::1]`, `0x7f.1`. */
        ss.ss_family = h.kind == SL_HOST_IPV4 ? AF_INET : AF_INET6;
        if (h.kind == SL_HOST_IPV4) {
            memcpy(&((struct sockaddr_in *)&ss)->sin_addr, h.addr, 4);
        } else {
            memcpy(&((struct sockaddr_in6 *)&ss)->sin6_addr, h.addr, 16);
        }
    } else {
        return NULL;
    }
    return sl_policy_identify(s, NULL, NULL, (const struct sockaddr *)&ss);
}

/* The `git:` and `push:` lines: on the client's git host, what the URL is for its repository
 * and, for a push, which branches it may not update. */
static void print_git(const struct sl_decision *d, const struct sl_client *c, const char *push_ref,
                      bool push_refused)
{
    const struct sl_git *g = c != NULL ? sl_client_git(c) : NULL;
    size_t n;

    if (g != NULL && d->git_host) {
        printf("git: %s (access %s): ", sl_git_repo(g), sl_git_can_write(g) ? "write" : "read");
        if (d->git_credential && !d->allow) {
            printf("%s, refused before any of it leaves\n", sl_git_path_name(d->git_path));
        } else if (d->git_credential) {
            printf("%s, the git credential is injected\n", sl_git_path_name(d->git_path));
        } else if (d->git_path != SL_GIT_PATH_NONE) {
            printf("%s, not with this method%s\n", sl_git_path_name(d->git_path),
                   d->allow ? ": forwarded without the git credential" : "");
        } else {
            printf("not one of its paths: forwarded without the git credential\n");
        }
    }
    if (d->git_push != NULL) {
        n = sl_git_protected_count(d->git_push);
        printf("push: refused (git-protected-branch) when it updates, creates or deletes "
               "refs/heads/%s",
               sl_git_default_branch(d->git_push));
        for (size_t i = 0; i < n; i++) {
            printf(" or a branch matching %s", sl_git_protected(d->git_push, i));
        }
        printf("\n");
    }
    if (push_ref != NULL) {
        if (d->git_push == NULL && !push_refused) {
            printf("push: %s not looked at (not an allowed push to the client's repository)\n",
                   push_ref);
        } else {
            printf("push: %s %s\n", push_ref,
                   push_refused ? "refused: agents may not push to protected or default branches"
                                : "passes");
        }
    }
}

static void print_decision(const struct sl_decision *d, const struct sl_request_view *req,
                           const struct sl_url *u, const struct sl_client *c, const char *push_ref,
                           bool push_refused)
{
    char hint[SL_POLICY_HINT_MAX];

    printf("decision: %s\n", d->allow ? "allow" : "deny");
    printf("reason: %s\n", sl_reason_code(d->reason));
    if (d->observed) {
        /* Learn mode: let out now, refused once observe ends (docs/reference/snapshot.md §3). */
        printf("observed: the environment is in observe; without it: deny, %s\n",
               sl_reason_code(d->would_deny));
    }
    printf("request: %s %s://%s", req->method, sl_url_scheme_name(u->scheme), u->host.name);
    if (u->port_given) {
        printf(":%u", (unsigned)u->port);
    }
    printf("%.*s%.*s\n", (int)u->path.n, (const char *)u->path.p, (int)u->query.n,
           (const char *)u->query.p);
    printf("client: %s\n", d->client != NULL ? d->client : "none");
    printf("environment: %s\n", d->environment != NULL ? d->environment : "none");
    printf("rule: %s\n", d->rule != NULL ? d->rule : "none");
    if (d->passthrough) {
        /* The proxy will not see the request: say so rather than pretend to have judged it. */
        printf("tls: passthrough (the tunnel is relayed uninspected: no method filter, no "
               "credential, the requests inside are not seen)\n");
    } else if (req->tls) {
        printf("tls: intercept\n");
    }
    if (d->credential_header != NULL) {
        /* The header's name only: the value is a secret (docs/reference/proxy.md §4.6). */
        printf("credential: %s header injected (%svalue not shown)\n", d->credential_header,
               d->git_credential ? "the git credential; " : "");
    } else if (d->placeholder != NULL) {
        printf("credential: the placeholder in %s replaced in the %s header (value not shown)\n",
               d->placeholder->env, d->placeholder->header);
    } else if (d->rule_has_credential && d->allow) {
        printf("credential: a placeholder credential; this client has no placeholder for it\n");
    } else if (d->rule_has_credential) {
        printf("credential: not injected (request refused)\n");
    } else {
        printf("credential: none\n");
    }
    print_git(d, c, push_ref, push_refused);
    if (!d->allow && sl_policy_hint(d, req, hint, sizeof(hint)) > 0) {
        printf("%s\n", hint);
    }
}

static int explain(const struct explain_args *a, const struct sl_url *u)
{
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    /* The origin-form target the proxy would see: the URL's path and query. */
    char target[EXPLAIN_TARGET_MAX];
    struct sl_request_view req = { &u->host, u->port, a->method, u->scheme == SL_URL_HTTPS,
                                   target };
    const struct sl_client *client;
    bool push_refused = false;
    struct sl_decision d;
    int rc;

    if (u->path.n + u->query.n >= sizeof(target)) {
        sl_eprintf("policy explain: the URL's path and query are longer than %zu bytes",
                   sizeof(target) - 1);
        return SL_CMD_USAGE;
    }
    memcpy(target, u->path.p, u->path.n);
    if (u->query.n > 0) {
        memcpy(target + u->path.n, u->query.p, u->query.n);
    }
    target[u->path.n + u->query.n] = '\0';
    rc = load(a->file, &s, &errs, NULL);

    if (rc == SL_EPOLICY) {
        sl_eprintf("%s: invalid policy, %s%zu %s (see sluice policy check %s)", a->file,
                   errs.truncated ? "more than " : "", errs.count,
                   plural(errs.count, "error", "errors"), a->file);
    }
    sl_policy_errors_finish(&errs);
    if (rc != 0) {
        return SL_CMD_FAIL;
    }
    client = find_client(s, a->client);
    sl_policy_decide(s, client, &req, (int64_t)time(NULL), &d);
    if (d.git_push != NULL && a->push_ref != NULL
        && sl_git_ref_is_protected(d.git_push, sl_slice_str(a->push_ref))) {
        /* What the proxy answers once it has read the push's commands. */
        push_refused = true;
        d.allow = false;
        d.reason = SL_REASON_GIT_PROTECTED_BRANCH;
        d.credential_header = NULL;
        d.credential_value = NULL;
    }
    print_decision(&d, &req, u, client, a->push_ref, push_refused);
    sl_snapshot_unref(s);
    return d.allow ? SL_CMD_OK : SL_CMD_FAIL;
}

static int cmd_explain(int argc, char **argv)
{
    struct explain_args a = { NULL, NULL, NULL, NULL, NULL };
    struct sl_url u;
    const char *why = "";
    int rc = parse_explain_args(argc, argv, &a);

    if (rc == 1) {
        return SL_CMD_OK; /* --help */
    }
    if (rc != 0) {
        return rc;
    }
    if (a.method == NULL) {
        a.method = "GET";
    } else if (!method_ok(a.method)) {
        return usage_error("explain", "bad --method (an HTTP method name like GET):", a.method);
    }
    if (sl_url_parse(sl_slice_str(a.url), &u, &why) != 0) {
        sl_eprintf("policy explain: bad --url '%s': %s (see sluice policy explain --help)", a.url,
                   why);
        return SL_CMD_USAGE;
    }
    return explain(&a, &u);
}

int sl_cmd_policy(int argc, char **argv)
{
    static const struct sl_subcmd subs[] = {
        { "check", cmd_check },
        { "explain", cmd_explain },
    };
    const struct sl_subcmd *s;

    if (argc < 2) {
        sl_eprintf("policy: missing command, check or explain (see sluice policy --help)");
        return SL_CMD_USAGE;
    }
    if (sl_opts_is_help(argv[1])) {
        (void)fputs(usage_policy, stdout);
        return SL_CMD_OK;
    }
    s = sl_opts_find_subcmd(subs, SL_ARRAY_LEN(subs), argv[1]);
    if (s != NULL) {
        return s->run(argc - 1, argv + 1);
    }
    sl_eprintf("policy: unknown command '%s' (see sluice policy --help)", argv[1]);
    return SL_CMD_USAGE;
}
