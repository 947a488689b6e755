#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/jobs.sh - docs/reference/api.md §5.5 jobs (docs/jobs.md) against a real dockerd, the
# sandbox image and the local git server: a batch over three repositories prints each one's
# name (README.md's first line) and succeeds, with the environment used and matched_by; a
# failing command is `failed` with its exit code; an unknown ref is `error`; an environment the
# caller cannot see → 404 with resolution's text; validation names the field; only the creator
# or an admin reads a job; a user with 5 open sandboxes in a repository still runs a batch
# there; with --job-concurrency 2, ten `sleep 3` jobs never have more than 2 containers at once;
# SIGKILL of the control plane while jobs sleep: after the restart those are `error` with the
# reason and the queued ones complete; no container of a finished job survives.
# Network sl-t-jobs, subnet 10.213.24.0/24.
# shellcheck disable=SC2016,SC2317 # commands run inside the sandbox are single-quoted on purpose; helpers run through fx_wait
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup

fx_git_start grp/alpha grp/beta grp/gamma
SBX_REPO=grp/alpha
SBX_REPOS="grp/beta grp/gamma" sbx_setup sl-t-jobs 24 --git-url "$FX_GIT_URL" --git-token "$GIT_TOKEN" --job-concurrency 2

# jobs_post BODY : POST /api/v1/jobs as SBX_WHO; JOB_IDS (array) on 201.
jobs_post() {
  JOB_IDS=()
  sbx_api POST /api/v1/jobs "$1" >/dev/null
  if [ "$SBX_STATUS" = 201 ]; then
    mapfile -t JOB_IDS < <(sbx_field '"\n".join(d["job_ids"])')
  fi
}

job_get() {
  sbx_api GET "/api/v1/jobs/$1" >/dev/null
}

# job_finished ID : the job's status is succeeded, failed or error (the body stays in SBX_BODY).
job_finished() {
  job_get "$1"
  case "$(sbx_field 'd.get("status")')" in
  succeeded | failed | error) return 0 ;;
  esac
  return 1
}

# job_wait ID SECS : waits for the end; JOB_STATUS gets the final status ("" on timeout).
job_wait() {
  JOB_STATUS=
  if fx_wait "$2" job_finished "$1"; then
    JOB_STATUS=$(sbx_field 'd["status"]')
  fi
}

# job_container_gone ID : the job's sandbox container no longer exists.
job_container_gone() {
  local sid
  job_get "$1"
  sid=$(sbx_field 'd.get("sandbox_id") or ""')
  [ -n "$sid" ] && sbx_container_gone "$sid"
}

# --- validation ---------------------------------------------------------------------------------
field_of() { sbx_field '",".join(e["field"] for e in d.get("errors", []))'; }

jobs_post '{"command":"true"}'
check_eq "no repos → 422 naming repos" "$SBX_STATUS $(field_of)" "422 repos"
jobs_post '{"repos":[{"repo_id":"grp/alpha"},{"repo_id":"not a repo"}],"command":"true"}'
check_eq "a bad repo_id → 422 naming repos[1].repo_id" "$SBX_STATUS $(field_of)" \
  "422 repos[1].repo_id"
jobs_post '{"repos":[{"repo_id":"grp/alpha","ref":"has space"}],"command":""}'
check_eq "a bad ref and an empty command → 422 naming both" "$SBX_STATUS $(field_of)" \
  "422 repos[0].ref,command"
big=$("$FX_PYTHON" -c 'import json; print(json.dumps({"repos":[{"repo_id":"grp/alpha"}],"command":"x"*16385}))')
jobs_post "$big"
check_eq "a command over 16384 bytes → 422 naming command" "$SBX_STATUS $(field_of)" "422 command"
many=$("$FX_PYTHON" -c 'import json; print(json.dumps({"repos":[{"repo_id":"grp/r%d" % i} for i in range(101)],"command":"true"}))')
jobs_post "$many"
check_eq "101 repositories → 422 naming repos" "$SBX_STATUS $(field_of)" "422 repos"
jobs_post '{"repos":[{"repo_id":"grp/alpha"}],"command":"true","timeoutMs":0,"colour":"red"}'
check_eq "timeoutMs 0 and an unknown field → 422 naming both" "$SBX_STATUS $(field_of)" \
  "422 colour,timeoutMs"
jobs_post 'not json'
check_api "a body that is not JSON → 400" 400
sbx_api GET '/api/v1/jobs?status=done' >/dev/null
check_eq "GET /jobs?status=done → 422 naming status" "$SBX_STATUS $(field_of)" "422 status"
sbx_api GET /api/v1/jobs/00000000-0000-4000-8000-000000000000 >/dev/null
check_api "an unknown job → 404" 404 'd["message"]' "job not found"

# --- an environment the caller cannot see: 404 with resolution's text ------------------------------
sbx_api POST /api/v1/environments \
  "{\"name\":\"alice-private\",\"scope\":\"user\",\"base_image\":\"$SBX_IMAGE\",\"network\":\"off\"}" >/dev/null
check_api "alice creates a user environment" 201
SBX_WHO=bob jobs_post '{"repos":[{"repo_id":"grp/alpha"}],"command":"true","environment":"alice-private"}'
jobs_status=$SBX_STATUS
jobs_msg=$(sbx_field 'd["message"]')
SBX_WHO=bob sbx_api GET '/api/v1/resolve?repo=grp/alpha&environment=alice-private' >/dev/null
check_eq "bob naming alice's environment → 404 with the text of resolve" \
  "$jobs_status $jobs_msg" "404 $(sbx_field 'd["message"]')"
check_eq "... which is \"no environment 'alice-private'\"" "$jobs_msg" "no environment 'alice-private'"
SBX_WHO=bob sbx_api GET /api/v1/jobs >/dev/null
check_api "... and no job was queued for bob" 200 'len(d["jobs"])' 0

# --- a batch over three repositories ----------------------------------------------------------------
jobs_post '{"repos":[{"repo_id":"grp/alpha","ref":"main"},{"repo_id":"grp/beta","ref":"main"},{"repo_id":"grp/gamma"}],"command":"head -n 1 README.md; git rev-parse --abbrev-ref HEAD","environment":"sbx-off"}'
check_api "POST /jobs with three repositories → 201" 201 'len(d["job_ids"])' 3
batch=("${JOB_IDS[@]}")
check_eq "... the jobs start queued" "$(sbx_field '[j["status"] for j in d["jobs"]]')" \
  '["queued", "queued", "queued"]'
i=0
for r in grp/alpha grp/beta grp/gamma; do
  id=${batch[$i]:-none}
  i=$((i + 1))
  job_wait "$id" 180
  check_eq "$r: the job succeeded" "$JOB_STATUS" succeeded
  check_eq "$r: its stdout names the repository (the clone of $r, branch main)" \
    "$(sbx_field 'd["result"]["stdout"]')" "# $r"$'\n'"main"
  check_eq "$r: exitCode 0, not timed out, not truncated, a duration" \
    "$(sbx_field '[d["result"]["exitCode"], d["result"]["timedOut"], d["result"]["truncated"], d["result"]["durationMs"] >= 0]')" \
    '[0, false, false, true]'
  check_eq "$r: the environment used: sbx-off, matched_by explicit" \
    "$(sbx_field '[d["environment"]["name"], d["environment"]["matched_by"], d["environment"]["id"]]')" \
    "[\"sbx-off\", \"explicit\", \"$SBX_ENV_OFF_ID\"]"
  check "$r: created, started and finished times, in order" \
    test "$(sbx_field 'd["created_at"] <= d["started_at"] <= d["finished_at"]')" = true
  check "$r: the sandbox id is recorded and its container is gone" job_container_gone "$id"
done

# --- resolution per repository, a failing command, an unknown ref ---------------------------------------
jobs_post '{"repos":[{"repo_id":"grp/alpha"}],"command":"echo out; echo err >&2; exit 3"}'
check_api "POST a failing command without an environment → 201" 201
fail_id=${JOB_IDS[0]:-none}
job_wait "$fail_id" 180
check_eq "the failing job is failed with exitCode 3 and its output" \
  "$JOB_STATUS $(sbx_field '[d["result"]["exitCode"], d["result"]["stdout"], d["result"]["stderr"]]')" \
  'failed [3, "out\n", "err\n"]'
check_eq "... resolved for the repository: matched_by none (no binding, no default)" \
  "$(sbx_field '[d["environment"]["matched_by"], d["environment"]["id"], d["error"]]')" \
  '["none", null, null]'
check "... and its container is gone" job_container_gone "$fail_id"

jobs_post '{"repos":[{"repo_id":"grp/alpha","ref":"no-such-branch"}],"command":"true","environment":"sbx-off"}'
ref_id=${JOB_IDS[0]:-none}
job_wait "$ref_id" 180
check_eq "an unknown ref → error" "$JOB_STATUS" error
check_match "... with the reason" "$(sbx_field 'd["error"]')" "unknown ref"
check_eq "... and no result" "$(sbx_field 'd["result"]')" null

jobs_post '{"repos":[{"repo_id":"grp/alpha"}],"command":"sleep 5","timeoutMs":1000,"environment":"sbx-off"}'
tmo_id=${JOB_IDS[0]:-none}
job_wait "$tmo_id" 180
check_eq "timeoutMs 1000 on sleep 5 → failed, exitCode 124, timedOut" \
  "$JOB_STATUS $(sbx_field '[d["result"]["exitCode"], d["result"]["timedOut"], d["timeoutMs"]]')" \
  "failed [124, true, 1000]"

# --- who may read a job, and lists ------------------------------------------------------------------------
SBX_WHO=bob job_get "$fail_id"
check_api "bob reads alice's job → 403" 403 'd["message"]' "not your job"
SBX_WHO=root job_get "$fail_id"
check_api "an admin reads alice's job → 200" 200 'd["id"]' "$fail_id"
sbx_api GET '/api/v1/jobs?status=failed' >/dev/null
check_eq "alice's list of failed jobs: newest first, without stdout/stderr" \
  "$(sbx_field '[[j["id"] for j in d["jobs"]], "stdout" in d["jobs"][0]["result"]]')" \
  "[[\"$tmo_id\", \"$fail_id\"], false]"
SBX_WHO=bob sbx_api GET /api/v1/jobs >/dev/null
check_api "bob's list holds none of alice's jobs" 200 'len(d["jobs"])' 0
SBX_WHO=root sbx_api GET '/api/v1/jobs?limit=500' >/dev/null
check_api "the admin's list holds every job (6)" 200 'len(d["jobs"])' 6

# --- the per-account limit of 5 open sandboxes does not fail a batch ----------------------------------
held=()
SBX_REPO=grp/beta
for i in 1 2 3 4 5; do
  sbx_create sbx-off main && held+=("$SBX_ID")
done
sbx_create sbx-off main || true
check_api "alice has 5 open sandboxes in grp/beta: a 6th → 429" 429
jobs_post '{"repos":[{"repo_id":"grp/beta"},{"repo_id":"grp/beta"}],"command":"head -n 1 README.md","environment":"sbx-off"}'
lim=("${JOB_IDS[@]}")
for id in "${lim[@]}"; do
  job_wait "$id" 180
  check_eq "a job in grp/beta runs anyway (job sandboxes are outside the limit): succeeded" \
    "$JOB_STATUS $(sbx_field 'd["result"]["stdout"]')" "succeeded # grp/beta"
done
for id in "${held[@]}"; do sbx_close "$id" || true; done
SBX_REPO=grp/alpha

# --- concurrency: 10 jobs, never more than 2 containers --------------------------------------------------
check "no container is left before the concurrency round" fx_wait 20 sbx_no_leftovers
body=$("$FX_PYTHON" -c 'import json; print(json.dumps({"repos":[{"repo_id":"grp/alpha"}]*10,"command":"sleep 3","environment":"sbx-off"}))')
jobs_post "$body"
check_api "10 sleep jobs queued" 201 'len(d["job_ids"])' 10
conc=("${JOB_IDS[@]}")
max=0
samples=0
counts=()
for ((t = 0; t < 600; t++)); do
  n=$(sbx_leftovers | "$FX_PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')
  counts+=("$n")
  [ "$n" -gt "$max" ] && max=$n
  samples=$((samples + 1))
  SBX_WHO=alice sbx_api GET '/api/v1/jobs?limit=10' >/dev/null
  if [ "$(sbx_field 'sum(j["status"] in ("queued", "running") for j in d["jobs"])')" = 0 ]; then
    break
  fi
  sleep 0.2
done
fx_note "containers seen over $samples samples: ${counts[*]}"
check "with --job-concurrency 2, never more than 2 containers at once (max $max)" test "$max" -le 2
check "... and the pool did run 2 at once" test "$max" -eq 2
ok_n=0
for id in "${conc[@]}"; do
  job_get "$id"
  [ "$(sbx_field 'd["status"]')" = succeeded ] && ok_n=$((ok_n + 1))
done
check_eq "all 10 succeeded" "$ok_n" 10
check "no container of a finished job survives" fx_wait 20 sbx_no_leftovers

# --- a restart while jobs run ------------------------------------------------------------------------------
jobs_post '{"repos":[{"repo_id":"grp/alpha"},{"repo_id":"grp/beta"}],"command":"sleep 120","environment":"sbx-off"}'
long=("${JOB_IDS[@]}")
jobs_post '{"repos":[{"repo_id":"grp/beta"},{"repo_id":"grp/gamma"}],"command":"head -n 1 README.md","environment":"sbx-off"}'
queued=("${JOB_IDS[@]}")
two_running() {
  [ "$(sbx_leftovers | "$FX_PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 2 ] || return 1
  sbx_api GET '/api/v1/jobs?status=running' >/dev/null
  [ "$(sbx_field 'len(d["jobs"])')" = 2 ]
}
check "two sleep jobs running (2 containers) while two wait queued" fx_wait 120 two_running
sleep 2
sbx_api GET '/api/v1/jobs?status=running' >/dev/null
check_eq "... the running jobs show their sandbox and environment" \
  "$(sbx_field '[j["sandbox_id"].startswith("sb_") and j["environment"]["name"] == "sbx-off" for j in d["jobs"]]')" \
  "[true, true]"
job_get "${queued[0]:-none}"
check_api "... the others are still queued" 200 'd["status"]' queued
kill -KILL "$SBX_CONTROL_PID"
wait "$SBX_CONTROL_PID" 2>/dev/null || true
sbx_control_start || fx_bail "the control plane starts again after SIGKILL"
sbx_wait_ready || fx_bail "sandboxes ready after the restart"
for id in "${long[@]}"; do
  job_wait "$id" 30
  check_eq "the job that was running is error with the reason" \
    "$JOB_STATUS $(sbx_field 'd["error"]')" \
    "error the control plane restarted while the job was running"
done
i=0
for r in grp/beta grp/gamma; do
  id=${queued[$i]:-none}
  i=$((i + 1))
  job_wait "$id" 180
  check_eq "the queued job on $r completes after the restart" \
    "$JOB_STATUS $(sbx_field 'd["result"]["stdout"]')" "succeeded # $r"
done
check "no container of a finished job survives the restart" fx_wait 30 sbx_no_leftovers

# --- a clean stop (SIGTERM) while a job runs: the same after the restart -----------------------------------
jobs_post '{"repos":[{"repo_id":"grp/alpha"}],"command":"sleep 120","environment":"sbx-off"}'
term_id=${JOB_IDS[0]:-none}
one_running() {
  sbx_api GET '/api/v1/jobs?status=running' >/dev/null
  [ "$(sbx_field 'len(d["jobs"])')" = 1 ] && [ "$(sbx_leftovers | "$FX_PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ]
}
check "a sleep job is running" fx_wait 120 one_running
sleep 1
sbx_control_stop || true
check_eq "SIGTERM while a job runs: the control plane exits 0" "$SBX_CONTROL_EXIT" 0
check "... and removed the job's container" sbx_no_leftovers
sbx_control_start || fx_bail "the control plane starts again after SIGTERM"
sbx_wait_ready || fx_bail "sandboxes ready after the second restart"
job_wait "$term_id" 30
check_eq "the job cut off by SIGTERM is error with the reason" \
  "$JOB_STATUS $(sbx_field 'd["error"]')" \
  "error the control plane restarted while the job was running"

sbx_shutdown_checks
check "no container of this test's network survives" fx_wait 15 sbx_no_leftovers
fx_done
