/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_match.c - host matching and rule choice (docs/reference/snapshot.md §3) against a
 * reference.
 *
 * The input is text: the first byte's low bit picks the environment's default (1: allow); then
 * one item per line:
 *   r<host pattern>[ <methods>]   a rule; methods are letters: G GET, P POST, H HEAD, T TRACE,
 *                                 D DELETE, g "get" (refused by validation)
 *   h<host>                       a request host, as a client would send it
 * The rules become a snapshot with one environment and one token client (built with jansson, so
 * any bytes of a pattern reach the snapshot's own validation), and every request host is decided
 * for ports 443, 80, 8443 and each rule's port, methods GET, POST, TRACE and none (CONNECT).
 *
 * Invariants, not just "no crash":
 *   - the snapshot is refused when sl_host_parse_authority() or sl_host_check_pattern() refuses
 *     a rule's host, and when it is accepted, each decision equals the one of a slow reference
 *     written from
 * docs/reference/snapshot.md §3 alone: a dynamic-programming glob matcher (`*` matches any run,
 * dots included), IP hosts matching IP rules literally only, ranks (exact; literal suffix after the
 * last '*'; pattern length; order) compared rule by rule, then methods, then the default and
 *     port-not-allowed / host-not-allowed;
 *   - a host decides as its uppercase and trailing-dot spellings do;
 *   - a rule `*.x` never decides `x` itself nor `evilx` (both are decided for every such rule).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "base/mem.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RULES_MAX 12
#define HOSTS_MAX 8
#define LINE_MAX  300

struct rule {
    struct sl_host host;
    uint16_t port;
    char text[SL_HOST_NAME_MAX + 8];
    const char *methods[8];
    size_t n_methods;
    bool refused_method;
};

struct world {
    struct rule rules[RULES_MAX];
    size_t n_rules;
    bool any_bad_host;
    /* Request hosts as sent, NUL-terminated. */
    char hosts[HOSTS_MAX + RULES_MAX][LINE_MAX + 8];
    size_t n_hosts;
    bool default_allow;
};

/* `*` matches any run of characters, dots included (docs/reference/snapshot.md §3); written
 * independently of policy/match.c: dynamic programming over pattern prefixes. */
static bool ref_glob(const char *p, size_t pn, const char *s, size_t sn)
{
    bool prev[SL_HOST_NAME_MAX + 2];
    bool cur[SL_HOST_NAME_MAX + 2];

    prev[0] = true;
    for (size_t j = 1; j <= sn; j++) {
        prev[j] = false;
    }
    for (size_t i = 0; i < pn; i++) {
        cur[0] = prev[0] && p[i] == '*';
        for (size_t j = 1; j <= sn; j++) {
            cur[j] = p[i] == '*' ? (prev[j] || cur[j - 1]) : (prev[j - 1] && s[j - 1] == p[i]);
        }
        memcpy(prev, cur, (sn + 1) * sizeof(bool));
    }
    return prev[sn];
}

static bool ref_host_matches(const struct rule *r, const struct sl_host *h)
{
    bool glob = memchr(r->host.name, '*', r->host.len) != NULL;

    if (h->kind != SL_HOST_DNS || r->host.kind != SL_HOST_DNS || !glob) {
        return !glob && r->host.kind == h->kind && strcmp(r->host.name, h->name) == 0;
    }
    return ref_glob(r->host.name, r->host.len, h->name, h->len);
}

/* Exact rules above patterns; then the literal text after the last '*'; then the length. */
static void ref_rank(const struct rule *r, int rank[3])
{
    const char *star = strrchr(r->host.name, '*');

    rank[0] = star == NULL;
    rank[1] = star == NULL ? (int)r->host.len
                           : (int)(r->host.len - (size_t)(star - r->host.name) - 1);
    rank[2] = (int)r->host.len;
}

static bool ref_beats(const struct rule *a, const struct rule *b)
{
    int ra[3];
    int rb[3];

    ref_rank(a, ra);
    ref_rank(b, rb);
    for (size_t i = 0; i < 3; i++) {
        if (ra[i] != rb[i]) {
            return ra[i] > rb[i];
        }
    }
    return false; /* equal: the earlier one (already held) stays */
}

static void ref_decide(const struct world *w, const struct sl_host *h, uint16_t port,
                       const char *method, struct sl_decision *out)
{
    const struct rule *win = NULL;
    bool seen = false;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < w->n_rules; i++) {
        const struct rule *r = &w->rules[i];

        if (!ref_host_matches(r, h)) {
            continue;
        }
        seen = true;
        if ((r->port == 0 ? (port == 443 || port == 80) : r->port == port)
            && (win == NULL || ref_beats(r, win))) {
            win = r;
        }
    }
    if (win != NULL) {
        bool ok = method == NULL || win->n_methods == 0;

        for (size_t i = 0; i < win->n_methods && !ok; i++) {
            ok = strcmp(win->methods[i], method) == 0;
        }
        out->allow = ok;
        out->reason = ok ? SL_REASON_NONE : SL_REASON_METHOD_NOT_ALLOWED;
        out->rule = win->text;
        out->_rule_exact = memchr(win->host.name, '*', win->host.len) == NULL;
        return;
    }
    out->allow = w->default_allow;
    out->reason = w->default_allow ? SL_REASON_NONE
                  : seen           ? SL_REASON_PORT_NOT_ALLOWED
                                   : SL_REASON_HOST_NOT_ALLOWED;
}

static void parse_rule(struct world *w, const char *line, size_t n)
{
    static const char *const by_letter[] = { "GET", "POST", "HEAD", "TRACE", "DELETE", "get" };
    static const char letters[] = "GPHTDg";
    const char *sp = memchr(line, ' ', n);
    size_t hn = sp != NULL ? (size_t)(sp - line) : n;
    char text[SL_HOST_NAME_MAX + 8];
    struct rule *r;
    int wn;

    if (w->n_rules == RULES_MAX) {
        return;
    }
    r = &w->rules[w->n_rules++];
    memset(r, 0, sizeof(*r));
    if (sl_host_parse_authority(sl_slice_of(line, hn), SL_HOST_GLOB, &r->host, &r->port, NULL) != 0
        || sl_host_check_pattern(&r->host, NULL) != 0) {
        w->any_bad_host = true;
        /* Keep the raw text for the JSON document. */
        r->host.len = hn < SL_HOST_NAME_MAX ? hn : SL_HOST_NAME_MAX;
        memcpy(r->host.name, line, r->host.len);
        r->host.name[r->host.len] = '\0';
        r->port = 0;
        return;
    }
    /* Formatted on the stack: gcc's -Wrestrict cannot tell r->text from r->host.name. */
    wn = r->port != 0 ? snprintf(text, sizeof(text), "%s:%u", r->host.name, (unsigned)r->port)
                      : snprintf(text, sizeof(text), "%s", r->host.name);
    SL_BUG_ON(wn <= 0 || (size_t)wn >= sizeof(r->text));
    memcpy(r->text, text, (size_t)wn + 1);
    for (size_t i = hn + 1; sp != NULL && i < n && r->n_methods < SL_ARRAY_LEN(r->methods); i++) {
        const char *l = memchr(letters, line[i], sizeof(letters) - 1);

        if (l != NULL) {
            r->methods[r->n_methods++] = by_letter[l - letters];
        }
    }
}

/* The JSON text of the rules as the user typed them; NULL when jansson refuses a string (not
 * UTF-8). */
static char *build_json(const struct world *w, const char *const *raw, const size_t *raw_n)
{
    json_t *rules = json_array();
    json_t *doc;
    char *text;

    for (size_t i = 0; i < w->n_rules; i++) {
        const struct rule *r = &w->rules[i];
        json_t *host = json_stringn(raw[i], raw_n[i]);
        json_t *rule;

        if (host == NULL) {
            json_decref(rules);
            return NULL;
        }
        rule = json_pack("{s:o}", "host", host);
        if (r->n_methods > 0) {
            json_t *methods = json_array();

            for (size_t m = 0; m < r->n_methods; m++) {
                json_array_append_new(methods, json_string(r->methods[m]));
            }
            json_object_set_new(rule, "methods", methods);
        }
        json_array_append_new(rules, rule);
    }
    doc = json_pack("{s:i,s:{s:{s:s,s:o}},s:[{s:s,s:s,s:s}]}", "version", 1, "environments", "e",
                    "default", w->default_allow ? "allow" : "deny", "rules", rules, "clients", "id",
                    "c", "token", "t", "environment", "e");
    SL_BUG_ON(doc == NULL);
    text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

static void decide_and_compare(const struct world *w, const struct sl_snapshot *s,
                               const struct sl_client *c, const struct sl_host *h, uint16_t port,
                               const char *method, struct sl_decision *out)
{
    struct sl_request_view req = { h, port, method, true, NULL };
    struct sl_decision want;

    sl_policy_decide(s, c, &req, 0, out);
    ref_decide(w, h, port, method, &want);
    SL_BUG_ON(out->allow != want.allow || out->reason != want.reason);
    SL_BUG_ON((out->rule == NULL) != (want.rule == NULL));
    SL_BUG_ON(out->rule != NULL && strcmp(out->rule, want.rule) != 0);
    SL_BUG_ON(out->rule != NULL && out->_rule_exact != want._rule_exact);
    SL_BUG_ON(out->credential_header != NULL);
}

static bool same_decision(const struct sl_decision *a, const struct sl_decision *b)
{
    return a->allow == b->allow && a->reason == b->reason && a->rule == b->rule;
}

/* Decides `text` (a host as sent) on every port and method; its variants must agree. */
static void exercise_host(const struct world *w, const struct sl_snapshot *s,
                          const struct sl_client *c, const char *text)
{
    static const char *const methods[] = { "GET", "POST", "TRACE", NULL };
    uint16_t ports[3 + RULES_MAX] = { 443, 80, 8443 };
    size_t n_ports = 3;
    char variant[LINE_MAX + 8];
    size_t n = strlen(text);
    struct sl_host h;
    struct sl_host hu;
    struct sl_host hd;
    bool dot;

    if (sl_host_normalize(sl_slice_of(text, n), 0, &h, NULL) != 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        variant[i] = text[i] >= 'a' && text[i] <= 'z' ? (char)(text[i] - 'a' + 'A') : text[i];
    }
    SL_BUG_ON(sl_host_normalize(sl_slice_of(variant, n), 0, &hu, NULL) != 0);
    memcpy(variant, text, n);
    variant[n] = '.';
    dot = h.kind == SL_HOST_DNS && text[n - 1] != '.';
    SL_BUG_ON(dot && sl_host_normalize(sl_slice_of(variant, n + 1), 0, &hd, NULL) != 0);
    for (size_t i = 0; i < w->n_rules; i++) {
        if (w->rules[i].port != 0) {
            ports[n_ports++] = w->rules[i].port;
        }
    }
    for (size_t p = 0; p < n_ports; p++) {
        for (size_t m = 0; m < SL_ARRAY_LEN(methods); m++) {
            struct sl_decision d;
            struct sl_decision du;
            struct sl_decision dd;

            decide_and_compare(w, s, c, &h, ports[p], methods[m], &d);
            decide_and_compare(w, s, c, &hu, ports[p], methods[m], &du);
            SL_BUG_ON(!same_decision(&d, &du));
            if (dot) {
                decide_and_compare(w, s, c, &hd, ports[p], methods[m], &dd);
                SL_BUG_ON(!same_decision(&d, &dd));
            }
        }
    }
}

/* For each rule `*.x` (one '*', leading), `x` and `evilx` are never decided by it. */
static void exercise_suffixes(const struct world *w, const struct sl_snapshot *s,
                              const struct sl_client *c)
{
    static const uint16_t ports[] = { 443, 80 };

    for (size_t i = 0; i < w->n_rules; i++) {
        const struct rule *r = &w->rules[i];
        char text[SL_HOST_NAME_MAX + 8];
        struct sl_host h;

        if (r->host.len < 3 || r->host.name[0] != '*' || r->host.name[1] != '.'
            || strchr(r->host.name + 1, '*') != NULL) {
            continue;
        }
        for (size_t k = 0; k < 2; k++) {
            int n = snprintf(text, sizeof(text), "%s%s", k == 0 ? "" : "evil", r->host.name + 2);

            if (n <= 0 || (size_t)n >= sizeof(text)
                || sl_host_normalize(sl_slice_of(text, (size_t)n), 0, &h, NULL) != 0) {
                continue;
            }
            for (size_t p = 0; p < SL_ARRAY_LEN(ports); p++) {
                struct sl_decision d;

                decide_and_compare(w, s, c, &h, r->port != 0 ? r->port : ports[p], "GET", &d);
                SL_BUG_ON(d.rule != NULL && strcmp(d.rule, r->text) == 0);
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct world w;
    static bool ready;
    const char *raw[RULES_MAX];
    size_t raw_n[RULES_MAX];
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    const struct sl_client *c;
    const char *text = (const char *)data;
    size_t off = 1;
    char *json;
    int rc;

    if (!ready) {
        /* As policy/snapshot.c does before its first parse: one allocator for every value. */
        json_set_alloc_funcs(sl_malloc, sl_free);
        ready = true;
    }
    if (size < 1 || memchr(data, '\0', size) != NULL) {
        return 0;
    }
    memset(&w, 0, sizeof(w));
    w.default_allow = (data[0] & 1) != 0;
    while (off < size) {
        const char *nl = memchr(text + off, '\n', size - off);
        size_t n = nl != NULL ? (size_t)(nl - (text + off)) : size - off;
        const char *line = text + off;

        off += n + 1;
        if (n < 1 || n > LINE_MAX) {
            continue;
        }
        if (line[0] == 'r' && w.n_rules < RULES_MAX) {
            const char *sp = memchr(line + 1, ' ', n - 1);

            raw[w.n_rules] = line + 1;
            raw_n[w.n_rules] = sp != NULL ? (size_t)(sp - (line + 1)) : n - 1;
            parse_rule(&w, line + 1, n - 1);
        } else if (line[0] == 'h' && w.n_hosts < HOSTS_MAX) {
            memcpy(w.hosts[w.n_hosts], line + 1, n - 1);
            w.hosts[w.n_hosts][n - 1] = '\0';
            w.n_hosts++;
        }
    }
    json = build_json(&w, raw, raw_n);
    if (json == NULL) {
        return 0;
    }
    rc = sl_snapshot_parse(json, strlen(json), &s, &errs);
    sl_policy_errors_finish(&errs);
    sl_free(json);
    SL_BUG_ON(rc == 0 && w.any_bad_host);
    if (rc != 0) {
        SL_BUG_ON(s != NULL);
        return 0;
    }
    c = sl_policy_identify(s, "c", "t", NULL);
    SL_BUG_ON(c == NULL);
    /* Rule patterns with each '*' made a letter are hosts too, to steer onto the rules. */
    for (size_t i = 0; i < w.n_rules && w.n_hosts < SL_ARRAY_LEN(w.hosts); i++) {
        char *t = w.hosts[w.n_hosts++];

        memcpy(t, w.rules[i].host.name, w.rules[i].host.len + 1);
        for (char *p = strchr(t, '*'); p != NULL; p = strchr(p, '*')) {
            *p = 'q';
        }
    }
    for (size_t i = 0; i < w.n_hosts; i++) {
        exercise_host(&w, s, c, w.hosts[i]);
    }
    exercise_suffixes(&w, s, c);
    sl_snapshot_unref(s);
    return 0;
}
