/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/suggest.h - the rules that would allow what an environment's policy refuses: learn
 * mode's proposed rules (docs/reference/api.md §5.1, GET .../suggestions), the rule of one refusal
 * (each audit tail line's suggestion and each group of GET /api/v1/audit/refusals, §5.7), and
 * the sentence that says it (docs/reference/proxy.md §4.5).
 *
 * Learn mode condenses the requests an environment's sandboxes made that its policy refuses, as
 * its audit lines recorded them (let out while it was in observe, `"observed":true`, or refused
 * for their host, port or method), into rules: one per host and port with the methods seen,
 * counts and the last time, without what the environment allows by now, and, when asked, several
 * subdomains of one domain as one `*.domain` rule. One refusal gets the rule learn mode would
 * propose had it seen only that line.
 *
 * Pure: the caller reads the audit log (control/web/audittail) and hands each line over; the
 * environment's stored egress (control/env/environment.h) says what it allows now, decided by
 * the proxy's own code (policy/decision.h). Bounded: at most SL_SUGGEST_HOSTS_MAX hosts are
 * tracked (more are counted as left out), at most 32 methods per host.
 *
 * Lifecycle: sl_suggest_create() -> sl_suggest_add() per line, newest first ->
 * sl_suggest_render() -> sl_suggest_destroy(); sl_suggest_line() any time in between.
 */
#ifndef SL_CONTROL_WEB_SUGGEST_H
#define SL_CONTROL_WEB_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

/* Distinct host and port pairs tracked. */
#define SL_SUGGEST_HOSTS_MAX 1000
/* Audit lines of the environment read at most (the newest). */
#define SL_SUGGEST_LINES_MAX 20000u

struct sl_suggest; /* opaque */

/* Starts the suggestions of the environment `env_id` (the key its audit lines carry), whose
 * stored egress is `egress_json` (borrowed; NULL: the network is off, nothing allowed). Returns
 * 0 or SL_ENOMEM. A stored egress that does not parse counts as allowing nothing. */
SL_MUST_CHECK int sl_suggest_create(const char *env_id, const char *egress_json,
                                    struct sl_suggest **out);

/* Takes one audit line (a parsed object, borrowed). Lines of other environments, allowed lines
 * that were not observed, and refusals other than host-, port- and method-not-allowed are not
 * looked at. Returns true when the line counted. Lines come newest first: the first one of a
 * host and port gives its last time. */
bool sl_suggest_add(struct sl_suggest *sg, const json_t *line);

/* The suggestions as {"suggestions": [{"rule": {"host", "methods"}, "count", "observed",
 * "refused", "last_seen", "would_deny": [...], "hosts": [...] (a wildcard rule only)}],
 * "lines": N (lines that counted), "left_out": N (hosts beyond the bound)}, hosts grouped by
 * domain. A host and port the environment now allows for every method seen is left out; a
 * method refused by a `*` rule keeps that rule's methods in the exact rule proposed (which
 * outranks it for the host). `wildcards`: two or more subdomains of one domain (at least two
 * labels; never an IP address) on one port become one `*.domain` rule, but for a host that a
 * rule for exactly that host decides (its suggestion extends that rule, which a wildcard would
 * not outrank). `*out` is a new reference. Returns 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl_suggest_render(const struct sl_suggest *sg, bool wildcards, json_t **out);

/* The rule that would allow the one audit line `line` (a parsed object, borrowed) of sg's
 * environment, as learn mode would propose it had it seen only that line (sl_suggest_add()'s
 * lines; callers that want refusals only pass "deny" lines): {"rule": {"host", "methods"}} (no
 * "methods" for every method: a tunnel) ready for POST .../suggestions/apply, plus "extends":
 * the host of the rule for exactly that host and port that refused the method (applying adds the
 * method to it). `*out` is a new reference, or NULL when the line is none of those or the
 * environment allows it by now. Returns 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl_suggest_line(const struct sl_suggest *sg, const json_t *line, json_t **out);

/* The sentence of docs/reference/proxy.md §4.5 for `suggestion` (of sl_suggest_line(), borrowed)
 * in the environment named `env_name`: `to allow it, add {"host":"api.example.com","methods":
 * ["POST"]} to environment ci-python`, or, when it extends a rule, `to allow it, add "POST" to
 * the methods of {"host":"api.example.com"} in environment ci-python`. Writes it NUL-terminated
 * to `out` (`cap` bytes) and returns its length; 0 (`out` "") when there is no suggestion or the
 * name has control characters, quotes or backslashes; SL_ETOOBIG (`out` "") when it does not
 * fit; SL_ENOMEM. */
SL_MUST_CHECK int sl_suggest_sentence(const json_t *suggestion, const char *env_name, char *out,
                                      size_t cap);

/* Frees everything. NULL is fine. */
void sl_suggest_destroy(struct sl_suggest *sg);

#endif
