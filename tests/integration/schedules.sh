#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/schedules.sh - docs/reference/api.md §5.5 scheduled jobs (docs/jobs.md): /api/v1/schedules
# CRUD (owner or admin; others 403), validation errors naming the field (cron errors name the
# cron field that is wrong), a repository that is not registered refused as a job refuses it, next_run_at/last_run_at in UTC, the cron in words (cron_text) and the
# next 5 runs (next_runs, [] when disabled or never); GET /api/v1/schedules/preview?cron= gives
# the same words and runs from now, or the 422 a POST would give; on the real clock, an every-minute
# schedule fires at the next minute (a bounded wait of at most ~70 s) and its runs are ordinary
# jobs that record the schedule id: a pinned environment applies to every repository, no
# environment resolves per repository; a disabled schedule makes no job.
# Network sl-t-sched, subnet 10.213.25.0/24.
# shellcheck disable=SC2317 # helpers run through fx_wait
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
SBX_REPOS=acme/other sbx_setup sl-t-sched 25

field_of() { sbx_field '",".join(e["field"] for e in d.get("errors", []))'; }
msg_of() { sbx_field '"|".join(e["message"] for e in d.get("errors", []))'; }

sched_post() { sbx_api POST /api/v1/schedules "$1" >/dev/null; }

# --- validation -------------------------------------------------------------------------------------
base='"name":"nightly","repos":[{"repo_id":"acme/widget"}],"command":"echo hi"'
sched_post "{$base,\"cron\":\"* * * * 8\"}"
check_eq "day-of-week 8 → 422 naming cron" "$SBX_STATUS $(field_of)" "422 cron"
check_eq "... and saying which cron field and why" "$(msg_of)" "day-of-week: 8 is out of range 0-7"
check_match "... the message names both" "$(sbx_field 'd["message"]')" "cron: day-of-week: 8"
sched_post "{$base,\"cron\":\"*/5 * *\"}"
check_eq "three cron fields → 422 naming cron" "$SBX_STATUS $(field_of) $(msg_of)" \
  "422 cron expected 5 fields (minute hour day-of-month month day-of-week), got 3"
sched_post "{$base,\"cron\":\"0 25 * * *\"}"
check_eq "hour 25 → 422 naming the hour" "$SBX_STATUS $(msg_of)" "422 hour: 25 is out of range 0-23"
sched_post "{$base,\"cron\":\"0 0 * FOO *\"}"
check_eq "month FOO → 422 naming the month" "$SBX_STATUS $(msg_of)" \
  "422 month: 'F' is not a number or a name"
sched_post '{"cron":"* * * * *","repos":[{"repo_id":"bad repo"}],"command":"","enabled":"yes"}'
check_eq "no name, a bad repo, an empty command, enabled not a boolean → 422 naming each" \
  "$SBX_STATUS $(field_of)" "422 repos[0].repo_id,command,name,enabled"
sched_post "{$base,\"cron\":\"* * * * *\",\"environment\":\"nope\"}"
check_api "an environment the caller cannot see → 404" 404 'd["message"]' "no environment 'nope'"
sched_post '{"name":"n","cron":"* * * * *","repos":[{"repo_id":"acme/widget"},{"repo_id":"acme/unregistered"}],"command":"echo hi"}'
check_api "a repository that is not registered → 404 naming it, as POST /api/v1/jobs" 404 \
  '[d["message"], d["repo"]]' '["repository not found", "acme/unregistered"]'
sbx_api GET /api/v1/schedules >/dev/null
check_api "... and nothing was saved" 200 'len(d["schedules"])' 0

# --- CRUD ----------------------------------------------------------------------------------------------
sched_post "{$base,\"cron\":\"30 2 * * MON-FRI\",\"environment\":\"sbx-off\",\"timeoutMs\":60000}"
check_api "POST a schedule → 201" 201 'd["enabled"]' true
sid=$(sbx_field 'd["id"]')
check_eq "... its fields" \
  "$(sbx_field '[d["name"], d["cron"], d["repos"], d["command"], d["environment"]["name"], d["timeoutMs"], d["last_run_at"]]')" \
  '["nightly", "30 2 * * MON-FRI", [{"repo_id": "acme/widget", "ref": null}], "echo hi", "sbx-off", 60000, null]'
want_next=$("$FX_PYTHON" -c '
import datetime as dt
t = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
while not (t.hour == 2 and t.minute == 30 and t.weekday() < 5):
    t += dt.timedelta(minutes=1)
print(t.strftime("%Y-%m-%dT%H:%M:%SZ"))')
check_eq "... next_run_at is the next weekday 02:30 UTC" "$(sbx_field 'd["next_run_at"]')" "$want_next"
check_eq "... cron_text says it in words" "$(sbx_field 'd["cron_text"]')" \
  "at 02:30, Monday through Friday (UTC)"
# weekday_runs : next_runs (of SBX_BODY) as "N weekday-02:30 first-is-next_run_at ordered".
weekday_runs() {
  sbx_field '(lambda p: [len(d["next_runs"]), all(p(t).weekday() < 5 and p(t).strftime("%H:%M:%S") == "02:30:00" for t in d["next_runs"]), d["next_runs"][0] == d.get("next_run_at", d["next_runs"][0]), d["next_runs"] == sorted(set(d["next_runs"]))])(lambda s: __import__("datetime").datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))'
}
check_eq "... next_runs: 5 weekdays at 02:30 UTC, in order, the first next_run_at" "$(weekday_runs)" \
  "[5, true, true, true]"
sbx_api GET "/api/v1/schedules/$sid" >/dev/null
check_api "GET it back" 200 'd["cron"]' "30 2 * * MON-FRI"
sbx_api GET /api/v1/schedules >/dev/null
check_api "alice's list holds it" 200 '[s["id"] for s in d["schedules"]]' "[\"$sid\"]"
SBX_WHO=bob sbx_api GET "/api/v1/schedules/$sid" >/dev/null
check_api "bob reads alice's schedule → 403" 403 'd["message"]' "not your schedule"
SBX_WHO=bob sbx_api PUT "/api/v1/schedules/$sid" "{$base,\"cron\":\"* * * * *\"}" >/dev/null
check_api "bob replaces it → 403" 403
SBX_WHO=bob sbx_api GET /api/v1/schedules >/dev/null
check_api "bob's list is empty" 200 'len(d["schedules"])' 0
SBX_WHO=root sbx_api GET "/api/v1/schedules/$sid" >/dev/null
check_api "an admin reads it" 200 'd["id"]' "$sid"
sbx_api PUT "/api/v1/schedules/$sid" "{$base,\"cron\":\"0 0 1 1 *\",\"enabled\":false}" >/dev/null
check_api "PUT replaces it (disabled, no environment, no next runs)" 200 \
  '[d["cron"], d["enabled"], d["next_run_at"], d["next_runs"], d["environment"], d["timeoutMs"]]' \
  '["0 0 1 1 *", false, null, [], null, null]'
check_eq "... its words still" "$(sbx_field 'd["cron_text"]')" \
  "at 00:00, on day 1 of the month, in January (UTC)"
sbx_api PUT "/api/v1/schedules/$sid" "{$base,\"cron\":\"0 0 1 1 *\"}" >/dev/null
y=$(($(date -u +%Y) + 1))
check_api "enabled again: next_run_at is the next 1 January, next_runs the 5 from it" 200 \
  '[d["next_run_at"]] + d["next_runs"]' \
  "[\"$y-01-01T00:00:00Z\", \"$y-01-01T00:00:00Z\", \"$((y + 1))-01-01T00:00:00Z\", \"$((y + 2))-01-01T00:00:00Z\", \"$((y + 3))-01-01T00:00:00Z\", \"$((y + 4))-01-01T00:00:00Z\"]"
sbx_api GET /api/v1/schedules >/dev/null
check_api "the list carries the words and the runs too" 200 \
  '[d["schedules"][0]["cron_text"], len(d["schedules"][0]["next_runs"])]' \
  '["at 00:00, on day 1 of the month, in January (UTC)", 5]'
sbx_api PUT "/api/v1/schedules/$sid" "{$base,\"cron\":\"0 0 30 2 *\"}" >/dev/null
check_api "a cron that never matches: no next runs, and its words say never" 200 \
  '[d["next_run_at"], d["next_runs"], d["cron_text"].startswith("never (no such date): ")]' \
  '[null, [], true]'
sbx_api PUT "/api/v1/schedules/$sid" "{$base,\"cron\":\"61 * * * *\"}" >/dev/null
check_eq "a PUT with a bad cron → 422 naming cron" "$SBX_STATUS $(field_of) $(msg_of)" \
  "422 cron minute: 61 is out of range 0-59"
sbx_api DELETE "/api/v1/schedules/$sid" >/dev/null
check_api "DELETE → 204" 204
sbx_api GET "/api/v1/schedules/$sid" >/dev/null
check_api "... then GET → 404" 404

# --- the preview ----------------------------------------------------------------------------------
sbx_api GET '/api/v1/schedules/preview?cron=30%202%20*%20*%20MON-FRI' >/dev/null
check_api "preview: the words" 200 '[d["cron"], d["cron_text"]]' \
  '["30 2 * * MON-FRI", "at 02:30, Monday through Friday (UTC)"]'
check_eq "... and the next 5 runs: weekdays at 02:30 UTC from now, in order" "$(weekday_runs)" \
  "[5, true, true, true]"
check_eq "... the first is the one a POST now would take" "$(sbx_field 'd["next_runs"][0]')" "$want_next"
sbx_api GET '/api/v1/schedules/preview?cron=*/15+*+*+*+*' >/dev/null
check_api "preview: '+' is a space; every 15 minutes, 15 minutes apart" 200 \
  '[d["cron_text"], len(set(__import__("datetime").datetime.strptime(b, "%Y-%m-%dT%H:%M:%SZ").timestamp() - __import__("datetime").datetime.strptime(a, "%Y-%m-%dT%H:%M:%SZ").timestamp() for a, b in zip(d["next_runs"], d["next_runs"][1:])))]' \
  '["every 15 minutes", 1]'
sbx_api GET '/api/v1/schedules/preview?cron=0%200%20*%20*%208' >/dev/null
check_eq "preview of a bad day-of-week: the 422 a POST gives" "$SBX_STATUS $(field_of) $(msg_of)" \
  "422 cron day-of-week: 8 is out of range 0-7"
check_eq "... the message names both" "$(sbx_field 'd["message"]')" \
  "invalid request: cron: day-of-week: 8 is out of range 0-7"
sbx_api GET '/api/v1/schedules/preview?cron=*/5%20*%20*' >/dev/null
check_eq "preview of three fields → 422 as a POST" "$SBX_STATUS $(msg_of)" \
  "422 expected 5 fields (minute hour day-of-month month day-of-week), got 3"
sbx_api GET '/api/v1/schedules/preview' >/dev/null
check_eq "preview without cron → 422 naming cron (\"preview\" is not taken as a schedule id)" \
  "$SBX_STATUS $(field_of) $(msg_of)" \
  "422 cron a 5-field cron expression is required (minute hour day-of-month month day-of-week)"
sbx_api GET "/api/v1/schedules/preview?cron=$(printf '*%.0s' $(seq 300))" >/dev/null
check_eq "preview of 300 bytes → 422 as a POST" "$SBX_STATUS $(msg_of)" "422 longer than 256 bytes"
sbx_api GET '/api/v1/schedules/preview?cron=0%00' >/dev/null
check_eq "preview with a NUL byte → 422 naming cron" "$SBX_STATUS $(field_of)" "422 cron"
sbx_api GET '/api/v1/schedules/preview?cron=0%200%2030%202%20*' >/dev/null
check_api "preview of a cron that never matches: no runs" 200 \
  '[d["next_runs"], d["cron_text"]]' \
  '[[], "never (no such date): at 00:00, on day 30 of the month, in February (UTC)"]'
sbx_api POST '/api/v1/schedules/preview?cron=*%20*%20*%20*%20*' '{}' >/dev/null
check_api "POST to the preview → 405" 405 'd["message"]' "use GET"
SBX_WHO=root sbx_api GET '/api/v1/schedules/preview?cron=0%20*%20*%20*%20*' >/dev/null
check_api "an admin previews too" 200 'd["cron_text"]' "at minute 0 past every hour"
SBX_STATUS=$(curl -q -sS --max-time 10 -o /dev/null -w '%{http_code}' \
  "http://127.0.0.1:$SBX_CPORT/api/v1/schedules/preview?cron=0%20*%20*%20*%20*")
check_eq "no token → 401" "$SBX_STATUS" 401

# --- firing on the real clock ---------------------------------------------------------------------------
sched_post '{"name":"every-minute","cron":"* * * * *","repos":[{"repo_id":"acme/widget"},{"repo_id":"acme/other"}],"command":"echo scheduled"}'
check_api "an every-minute schedule without an environment → 201" 201
every=$(sbx_field 'd["id"]')
first=$(sbx_field 'd["next_run_at"]')
sched_post '{"name":"pinned","cron":"*/1 * * * *","repos":[{"repo_id":"acme/widget","ref":"main"}],"command":"echo pinned","environment":"sbx-off"}'
pinned=$(sbx_field 'd["id"]')
sched_post '{"name":"off","cron":"* * * * *","repos":[{"repo_id":"acme/widget"}],"command":"echo never","enabled":false}'
check_api "a disabled one: no next_run_at" 201 'd["next_run_at"]' null
off=$(sbx_field 'd["id"]')
check_match "next_run_at is the next whole minute" "$first" '^[0-9-]{10}T[0-9:]{5}:00Z$'

# schedule_jobs ID N : at least N jobs of the schedule exist, all finished.
schedule_jobs() {
  sbx_api GET "/api/v1/jobs?schedule_id=$1" >/dev/null
  [ "$(sbx_field 'len(d["jobs"])')" -ge "$2" ] 2>/dev/null &&
    [ "$(sbx_field 'all(j["status"] in ("succeeded", "failed", "error") for j in d["jobs"])')" = true ]
}
check "the every-minute schedule made its 2 jobs within 75 s (one per repository)" \
  fx_wait 75 schedule_jobs "$every" 2
check_eq "... both succeeded, with the schedule id and resolved per repository (none)" \
  "$(sbx_field 'sorted([j["repo_id"], j["status"], j["schedule_id"], j["environment"]["matched_by"]] for j in d["jobs"][:2])')" \
  "[[\"acme/other\", \"succeeded\", \"$every\", \"none\"], [\"acme/widget\", \"succeeded\", \"$every\", \"none\"]]"
jid=$(sbx_field 'd["jobs"][0]["id"]')
sbx_api GET "/api/v1/jobs/$jid" >/dev/null
check_api "... a scheduled job's output" 200 'd["result"]["stdout"]' "scheduled"
check "the pinned schedule made its job" fx_wait 30 schedule_jobs "$pinned" 1
check_eq "... with the pinned environment (explicit)" \
  "$(sbx_field '[d["jobs"][0]["status"], d["jobs"][0]["environment"]["name"], d["jobs"][0]["environment"]["matched_by"], d["jobs"][0]["ref"]]')" \
  '["succeeded", "sbx-off", "explicit", "main"]'
sbx_api GET "/api/v1/schedules/$every" >/dev/null
# A later minute may have fired too by now: last_run_at is the first run or later, and
# next_run_at the whole minute after it. last_run_at is when it fired (api.md §5.5: "sets
# last_run_at to now"), which a busy scheduler's tick can put a second or two into its minute.
check_eq "the schedule reports last_run_at (when it fired) and next_run_at (the whole minute after)" \
  "$(F=$first sbx_field '(lambda p: [d["last_run_at"] >= __import__("os").environ["F"], d["next_run_at"].endswith(":00Z"), 0 < (p(d["next_run_at"]) - p(d["last_run_at"])).total_seconds() <= 60])(lambda s: __import__("datetime").datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))')" \
  "[true, true, true]"
sbx_api GET "/api/v1/jobs?schedule_id=$off" >/dev/null
check_api "the disabled schedule made no job" 200 'len(d["jobs"])' 0
sbx_api GET "/api/v1/schedules/$off" >/dev/null
check_api "... and never ran" 200 '[d["last_run_at"], d["next_run_at"]]' '[null, null]'
sbx_api DELETE "/api/v1/schedules/$every" >/dev/null
sbx_api GET "/api/v1/jobs/$jid" >/dev/null
check_api "a deleted schedule's jobs stay, with its id" 200 'd["schedule_id"]' "$every"

sbx_shutdown_checks
check "no container of this test's network survives" fx_wait 15 sbx_no_leftovers
fx_done
