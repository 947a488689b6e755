/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_snapshot.c - snapshot parsing, validation and compilation, then identity and
 * decisions against whatever compiled.
 *
 * The quoted strings of the input double as request hosts (as written, and with each '*'
 * replaced, so that patterns get hit), client ids and tokens, so that the fuzzer can steer
 * requests onto its own rules. Invariants: errors iff refused, every error path starts at
 * `$`; version >= 1; the snapshot knows its own bytes; identities and decisions are
 * deterministic and consistent (a credential only on an allowed TLS request, a reason iff
 * refused, token clients only by token, address clients only by address).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STRINGS 24
#define MAX_STRING  255
#define MAX_CLIENTS 6

struct strings {
    char s[MAX_STRINGS][MAX_STRING + 1];
    size_t n;
};

/* The contents of the first quoted strings of the input (escapes left as they are). */
static void collect_strings(const uint8_t *data, size_t size, struct strings *out)
{
    size_t i = 0;

    out->n = 0;
    while (i < size && out->n < MAX_STRINGS) {
        const uint8_t *open = memchr(data + i, '"', size - i);
        const uint8_t *close;
        size_t n;

        if (open == NULL) {
            break;
        }
        close = memchr(open + 1, '"', size - (size_t)(open + 1 - data));
        if (close == NULL) {
            break;
        }
        n = (size_t)(close - open - 1);
        if (n <= MAX_STRING && memchr(open + 1, '\0', n) == NULL) {
            memcpy(out->s[out->n], open + 1, n);
            out->s[out->n][n] = '\0';
            out->n++;
        }
        i = (size_t)(close + 1 - data);
    }
}

static void check_errors(int rc, const struct sl_policy_errors *errs)
{
    SL_BUG_ON(rc == 0 && errs->count != 0);
    SL_BUG_ON(rc == SL_EPOLICY && errs->count == 0);
    SL_BUG_ON(rc != 0 && rc != SL_EPOLICY && rc != SL_ENOMEM);
    SL_BUG_ON(errs->count > SL_POLICY_ERRORS_MAX);
    for (size_t i = 0; i < errs->count; i++) {
        SL_BUG_ON(errs->items[i].path[0] != '$' || errs->items[i].message[0] == '\0');
    }
}

static void check_decision(const struct sl_decision *d, const struct sl_client *c,
                           const struct sl_request_view *req)
{
    char hint[SL_POLICY_HINT_MAX];

    SL_BUG_ON(d->allow != (d->reason == SL_REASON_NONE));
    SL_BUG_ON((d->credential_header == NULL) != (d->credential_value == NULL));
    SL_BUG_ON(d->credential_header != NULL && (!d->allow || !req->tls || d->rule == NULL));
    SL_BUG_ON(d->credential_header != NULL && !d->rule_has_credential);
    SL_BUG_ON(d->credential_header != NULL
              && (req->method == NULL || strcmp(req->method, "TRACE") == 0));
    SL_BUG_ON(c == NULL && d->reason != SL_REASON_NO_IDENTITY);
    SL_BUG_ON(c != NULL && (d->client == NULL || strcmp(d->client, sl_client_id(c)) != 0));
    SL_BUG_ON(c != NULL && strcmp(d->environment, sl_env_name(sl_client_env(c))) != 0);
    SL_BUG_ON(d->reason == SL_REASON_HOST_NOT_ALLOWED && d->rule != NULL);
    SL_BUG_ON(d->reason == SL_REASON_METHOD_NOT_ALLOWED && d->rule == NULL);
    SL_BUG_ON(sl_policy_hint(d, req, hint, sizeof(hint)) < 0);
}

/* Field by field: the struct has padding, so memcmp() would compare garbage. */
static bool same_decision(const struct sl_decision *a, const struct sl_decision *b)
{
    return a->allow == b->allow && a->reason == b->reason && a->rule == b->rule
           && a->credential_header == b->credential_header
           && a->credential_value == b->credential_value
           && a->rule_has_credential == b->rule_has_credential && a->client == b->client
           && a->environment == b->environment && a->_rule_exact == b->_rule_exact
           && a->_rule_of_client == b->_rule_of_client && a->_rule_methods == b->_rule_methods
           && a->_rule_n_methods == b->_rule_n_methods;
}

static void decide_all(const struct sl_snapshot *s, const struct sl_host *h,
                       const struct sl_client *const *clients, size_t n_clients)
{
    static const uint16_t ports[] = { 443, 80, 8443 };
    static const char *const methods[] = { "GET", "TRACE", NULL };

    for (size_t c = 0; c <= n_clients; c++) {
        const struct sl_client *client = c < n_clients ? clients[c] : NULL;

        for (size_t p = 0; p < SL_ARRAY_LEN(ports); p++) {
            for (size_t m = 0; m < SL_ARRAY_LEN(methods); m++) {
                struct sl_request_view req = { h, ports[p], methods[m], p != 1, NULL };
                struct sl_decision d;
                struct sl_decision again;

                sl_policy_decide(s, client, &req, 1796079600, &d);
                check_decision(&d, client, &req);
                sl_policy_decide(s, client, &req, 1796079600, &again);
                SL_BUG_ON(!same_decision(&d, &again));
            }
        }
    }
}

static void identify_by_address(const struct sl_snapshot *s)
{
    static const char *const v4[] = { "10.0.0.1", "127.0.0.1", "10.213.0.5", "192.168.1.1" };
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    const struct sl_client *c;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    for (size_t i = 0; i < SL_ARRAY_LEN(v4); i++) {
        SL_BUG_ON(inet_pton(AF_INET, v4[i], &sin.sin_addr) != 1);
        c = sl_policy_identify(s, NULL, NULL, (const struct sockaddr *)&sin);
        SL_BUG_ON(c != NULL && sl_client_has_token(c));
        SL_BUG_ON(c != sl_policy_identify(s, NULL, NULL, (const struct sockaddr *)&sin));
    }
    memset(&sin6, 0, sizeof(sin6));
    sin6.sin6_family = AF_INET6;
    SL_BUG_ON(inet_pton(AF_INET6, "::1", &sin6.sin6_addr) != 1);
    c = sl_policy_identify(s, NULL, NULL, (const struct sockaddr *)&sin6);
    SL_BUG_ON(c != NULL && sl_client_has_token(c));
}

static void exercise(const struct sl_snapshot *s, const struct strings *str)
{
    const struct sl_client *clients[MAX_CLIENTS];
    size_t n_clients = 0;

    identify_by_address(s);
    for (size_t i = 0; i < str->n; i++) {
        const struct sl_client *c = sl_snapshot_find_client(s, str->s[i]);
        const struct sl_env *e = sl_snapshot_find_env(s, str->s[i]);

        SL_BUG_ON(c != NULL && strcmp(sl_client_id(c), str->s[i]) != 0);
        SL_BUG_ON(e != NULL && strcmp(sl_env_name(e), str->s[i]) != 0);
        if (c != NULL && n_clients < MAX_CLIENTS) {
            clients[n_clients++] = c;
        }
        if (i + 1 < str->n) {
            /* As Proxy-Authorization id and token: only ever that client, with a token. */
            c = sl_policy_identify(s, str->s[i], str->s[i + 1], NULL);
            SL_BUG_ON(c != NULL
                      && (strcmp(sl_client_id(c), str->s[i]) != 0 || !sl_client_has_token(c)));
        }
    }
    for (size_t i = 0; i < str->n; i++) {
        char unglobbed[MAX_STRING + 1];
        struct sl_host h;

        if (sl_host_normalize(sl_slice_str(str->s[i]), 0, &h, NULL) == 0) {
            decide_all(s, &h, clients, n_clients);
        }
        memcpy(unglobbed, str->s[i], sizeof(unglobbed));
        for (char *p = strchr(unglobbed, '*'); p != NULL; p = strchr(p, '*')) {
            *p = 'x';
        }
        if (strcmp(unglobbed, str->s[i]) != 0
            && sl_host_normalize(sl_slice_str(unglobbed), 0, &h, NULL) == 0) {
            decide_all(s, &h, clients, n_clients);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    static struct strings str;
    int rc = sl_snapshot_parse(data, size, &s, &errs);

    check_errors(rc, &errs);
    sl_policy_errors_finish(&errs);
    if (rc != 0) {
        SL_BUG_ON(s != NULL);
        return 0;
    }
    SL_BUG_ON(sl_snapshot_version(s) < 1);
    SL_BUG_ON(!sl_snapshot_is_identical(s, data, size));
    SL_BUG_ON(sl_snapshot_env_count(s) > SL_POLICY_ENVS_MAX);
    SL_BUG_ON(sl_snapshot_client_count(s) > SL_POLICY_CLIENTS_MAX);
    collect_strings(data, size, &str);
    exercise(s, &str);
    sl_snapshot_unref(s);
    return 0;
}
