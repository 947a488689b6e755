#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/runner.sh - sluice-run (control/sandbox/runner/run.c), the helper every sandbox
# command runs through (docs/reference/api.md §5.3), run directly on this host: no container is needed, the
# child subreaper works anywhere. Exit codes and output pass through, stdin is empty, a timeout
# ends the whole process tree (setsid'd, double-forked, TERM-ignoring, forking in a loop) with
# 124, SIGTERM to the runner does the same with 143, a normal exit leaves background processes
# alone, bad usage is 125 with one line; --idle (a sandbox container's own process) runs nothing
# and ends on SIGTERM, SIGINT or SIGHUP, even when started with them ignored.
#
# Every process a case starts carries SLUICE_RUNNER_MARK=<unique token> in its environment, so
# survivors are found by that mark and nothing else on the host is ever touched. Every wait is
# bounded, every runner runs under an outer `timeout -s KILL`, and the EXIT trap kills whatever
# carries a mark of this run.
# The commands given to the runner are single-quoted on purpose: its shell expands them.
# shellcheck disable=SC2016
set -euo pipefail

runner=${SLUICE_RUNNER:?SLUICE_RUNNER must name the sluice-run binary}
work=$(mktemp -d)
run_id="$$-$RANDOM"
marks=()

cleanup() {
    local m pid
    for m in "${marks[@]}"; do
        for pid in $(marked "$m"); do
            kill -KILL "$pid" 2>/dev/null || true
        done
    done
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source-path=SCRIPTDIR source=../support/clitest.sh
source "${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/support/clitest.sh"

# marked TOKEN: pids of live (non-zombie) processes whose environment carries the mark.
marked() {
    local f pid state
    for f in /proc/[0-9]*/environ; do
        pid=${f#/proc/}
        pid=${pid%/environ}
        grep -qaF "SLUICE_RUNNER_MARK=$1" "$f" 2>/dev/null || continue
        state=$(sed -E 's/.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null) || continue
        [ "$state" = Z ] || echo "$pid"
    done
}

new_mark() {
    mark="$run_id-$1"
    marks+=("$mark")
}

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# run WANT_EXIT ARGS...: runs the runner with the current mark, stdin from $work/in (empty
# unless a case fills it), output in $work/out and $work/err, duration in $elapsed_ms.
run() {
    local want=$1 rc=0 t0
    shift
    t0=$(now_ms)
    SLUICE_RUNNER_MARK=$mark timeout -s KILL 60 "$runner" "$@" <"$work/in" >"$work/out" \
        2>"$work/err" || rc=$?
    elapsed_ms=$(($(now_ms) - t0))
    [ "$rc" -eq "$want" ] || fail "sluice-run $* exited $rc, want $want"
}

# none_left WHAT: nothing of the current mark is alive (waits up to 1 s for exits to settle).
none_left() {
    local i left
    for ((i = 0; i < 20; i++)); do
        left=$(marked "$mark")
        [ -n "$left" ] || return 0
        sleep 0.05
    done
    ps -o pid,ppid,stat,args -p "$(echo "$left" | tr '\n' , | sed 's/,$//')" || true
    fail "$1: processes left: $left"
}

# ended LABEL MIN_MS MAX_MS ARGS...: sluice-run ARGS... times out (exit 124) after MIN_MS and
# before MAX_MS, and leaves none of the marked processes behind.
ended() {
    local label=$1 min=$2 max=$3
    shift 3
    run 124 "$@"
    echo "# $label timeout: ${elapsed_ms} ms"
    if [ "$elapsed_ms" -lt "$min" ] || [ "$elapsed_ms" -ge "$max" ]; then
        fail "$label took ${elapsed_ms} ms"
    fi
    none_left "$label"
}

# usage WANT_SUBSTRING ARGS...: a usage error is exit 125, one line on stderr, no stdout.
usage() {
    cli_usage 125 sluice-run "$@"
}

: >"$work/in"
new_mark basic

# ---- the binary ----

if command -v file >/dev/null; then
    file -L "$runner" | grep -q "statically linked" || fail "$(file -L "$runner")"
    ok "sluice-run is statically linked"
fi

# ---- exit codes and output pass through ----

for code in 0 3 255; do
    run "$code" -c "exit $code"
    if [ -s "$work/out" ] || [ -s "$work/err" ]; then
        fail "exit $code printed something"
    fi
    ok "exit code $code passes through, nothing printed"
done
run 137 -c 'kill -9 $$'
ok "a command killed by SIGKILL exits 137"
run 143 -c 'kill -TERM $$'
ok "a command killed by SIGTERM exits 143"

rc=0
env --ignore-signal=CHLD "$runner" -c 'exit 5' </dev/null || rc=$?
[ "$rc" -eq 5 ] || fail "with SIGCHLD ignored by its parent, exit 5 came back as $rc"
ok "an inherited SIG_IGN for SIGCHLD does not lose the exit code"

run 0 -c 'printf "out\0 \x01\xff\n"; printf "err line\n" >&2; printf "no newline"'
printf 'out\0 \x01\xff\nno newline' | cmp -s - "$work/out" || fail "stdout changed"
[ "$(cat "$work/err")" = "err line" ] || fail "stderr changed"
ok "stdout and stderr pass through byte for byte"

echo "input the command must not see" >"$work/in"
run 0 -c 'wc -c'
[ "$(tr -d ' ' <"$work/out")" = 0 ] || fail "stdin was not empty"
: >"$work/in"
ok "stdin is empty"

# Signals the test's shell ignores must not reach the command ignored.
(
    trap '' INT USR1
    run 0 -c 'echo "$0"; grep -E "^Sig(Blk|Ign):" /proc/self/status'
)
case "$(head -1 "$work/out")" in
/bin/bash | /bin/sh) ;;
*) fail "the command ran under $(head -1 "$work/out")" ;;
esac
[ "$(sed -n '2,$p' "$work/out" | tr -d ' \t')" = "$(printf 'SigBlk:0000000000000000\nSigIgn:0000000000000000')" ] \
    || fail "signal mask or dispositions leaked into the command"
ok "the command runs under $(head -1 "$work/out") -c with no signal blocked or ignored"

# The signals libc reserves (32 and 33 in glibc) cannot be reset through sigaction(), yet a
# parent (some job runners do) can leave them ignored, and that survives exec. Ignore them with
# the raw system call, exec the runner, and look again.
if [ "$(uname -m)" = x86_64 ]; then
    python3 - "$runner" "$work/out" <<'PY' || fail "could not set up ignored reserved signals"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
act = ctypes.create_string_buffer(struct.pack("QQQQ", 1, 0, 0, 0))  # SIG_IGN, no flags
for sig in (32, 33):
    if libc.syscall(13, sig, act, None, 8) != 0:  # SYS_rt_sigaction on x86_64
        sys.exit("rt_sigaction %d: errno %d" % (sig, ctypes.get_errno()))
out = os.open(sys.argv[2], os.O_WRONLY | os.O_TRUNC)
os.dup2(out, 1)
os.execv(sys.argv[1], [sys.argv[1], "-c", 'grep -E "^SigIgn:" /proc/self/status'])
PY
    [ "$(tr -d ' \t' <"$work/out")" = "SigIgn:0000000000000000" ] \
        || fail "reserved signals left ignored by the parent reached the command ignored: $(cat "$work/out")"
    ok "reserved signals (32, 33) ignored by the parent are reset for the command"
fi

none_left "short commands"

# ---- timeouts ----

new_mark tree
ended tree 1900 2500 --timeout-ms 2000 -c 'sleep 30 & setsid sleep 30 & (sleep 31 &) ; sleep 100'
ok "timeout ends background, setsid'd and double-forked processes, exit 124 in ${elapsed_ms} ms"

new_mark trap
ended TERM-ignoring 1900 2500 --timeout-ms 1000 --grace-ms 1000 \
    -c 'trap "" TERM; sleep 100 & setsid sleep 100 & sleep 100'
ok "a tree ignoring SIGTERM gets SIGKILL after the grace period, exit 124 in ${elapsed_ms} ms"

new_mark grace
ended "grace 0" 0 1000 --timeout-ms 500 --grace-ms 0 -c 'sleep 100'
ok "--grace-ms 0 kills at once (${elapsed_ms} ms)"

# A binary tree of double-forks, depth 7 (at most 255 sleeps plus their short-lived subshells),
# still growing when the time limit passes: the freeze must catch every branch. Each process
# also ignores SIGTERM, so the tree keeps growing through the grace period until SIGKILL.
new_mark forks
ended "fork tree" 0 5000 --timeout-ms 300 --grace-ms 300 -c '
trap "" TERM
grow() {
    if [ "$1" -gt 0 ]; then
        (grow $(($1 - 1)) &)
        (grow $(($1 - 1)) &)
    fi
    exec sleep 100
}
grow 7'
ok "a tree forking through the timeout is ended completely (${elapsed_ms} ms)"

# A flat fork loop: one shell starting short-lived and long-lived children as fast as it can,
# bounded at 400.
new_mark loop
ended "fork loop" 0 5000 --timeout-ms 500 --grace-ms 200 -c '
for i in $(seq 400); do sleep 100 & true & done; wait'
ok "a fork loop is ended completely (${elapsed_ms} ms)"

# ---- signals to the runner ----

new_mark sigterm
t0=$(now_ms)
SLUICE_RUNNER_MARK=$mark timeout -s KILL 60 "$runner" --grace-ms 1000 \
    -c 'setsid sleep 100 & (sleep 100 &); sleep 100' </dev/null >"$work/out" 2>"$work/err" &
rpid=$!
for ((i = 0; i < 50; i++)); do
    [ "$(marked "$mark" | wc -l)" -ge 5 ] && break
    sleep 0.05
done
# Five marked: the outer timeout, the runner and three sleeps (bash execs the last one). $rpid is the outer
# timeout; the runner is its child.
kill -TERM "$(pgrep -P "$rpid")"
rc=0
wait "$rpid" || rc=$?
elapsed_ms=$(($(now_ms) - t0))
[ "$rc" -eq 143 ] || fail "runner given SIGTERM exited $rc, want 143"
none_left "SIGTERM to the runner"
ok "SIGTERM to the runner ends the tree, exit 143 (${elapsed_ms} ms)"

# ---- a normal exit leaves background processes running ----

new_mark background
run 7 -c 'sleep 100 & setsid sleep 100 & exit 7'
[ "$elapsed_ms" -lt 1000 ] || fail "exit with background children took ${elapsed_ms} ms"
left=$(marked "$mark" | wc -l)
[ "$left" -eq 2 ] || fail "$left background processes alive after a normal exit, want 2"
for pid in $(marked "$mark"); do
    kill -KILL "$pid"
done
none_left "background cleanup"
ok "a normal exit returns at once (${elapsed_ms} ms) and leaves background processes running"

# ---- usage ----

new_mark usage
usage "missing -c CMD"
usage "missing -c CMD" --timeout-ms 10
usage "-c needs the command" -c
usage "--timeout-ms needs a positive number" --timeout-ms abc -c true
usage "--timeout-ms needs a positive number" --timeout-ms 0 -c true
usage "--timeout-ms needs a positive number" --timeout-ms=-5 -c true
usage "--grace-ms needs a number" --grace-ms 1x -c true
usage "--timeout-ms needs a value" --timeout-ms
usage "unknown argument '--bogus'" --bogus -c true
usage "unexpected argument after -c CMD" -c true extra
run 0 --timeout-ms=1000 --grace-ms=0 -c 'echo hi'
[ "$(cat "$work/out")" = hi ] || fail "--opt=value form"
ok "--timeout-ms=N and --grace-ms=N are accepted"
run 0 --help
grep -q "^usage: sluice-run" "$work/out" || fail "--help prints no usage"
[ ! -s "$work/err" ] || fail "--help wrote to stderr"
ok "--help prints the usage on stdout"
usage "unknown argument '--idle'" --idle -c true

# ---- --idle: a container's own process, running nothing until a signal ends it ----

for sig in TERM INT HUP; do
    new_mark "idle-$sig"
    # Started with the signal ignored: --idle restores the default action all the same.
    (trap '' "$sig"; SLUICE_RUNNER_MARK=$mark exec "$runner" --idle) </dev/null >"$work/out" 2>"$work/err" &
    idle_pid=$!
    sleep 0.3
    kill -0 "$idle_pid" 2>/dev/null || fail "sluice-run --idle did not stay"
    [ "$(ps -o nlwp= -p "$idle_pid" | tr -d ' ')" = 1 ] || fail "sluice-run --idle runs more than one thread"
    [ -z "$(pgrep -P "$idle_pid" || true)" ] || fail "sluice-run --idle started a child"
    kill -"$sig" "$idle_pid"
    rc=0
    for ((i = 0; i < 20; i++)); do
        kill -0 "$idle_pid" 2>/dev/null || break
        sleep 0.05
    done
    wait "$idle_pid" || rc=$?
    [ "$rc" -ne 0 ] || fail "sluice-run --idle after SIG$sig exited 0"
    [ ! -s "$work/out" ] && [ ! -s "$work/err" ] || fail "sluice-run --idle printed something"
    none_left "--idle after SIG$sig"
    ok "sluice-run --idle runs nothing and ends on SIG$sig (exit $rc)"
done

echo "# $checks checks passed"
