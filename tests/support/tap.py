# SPDX-License-Identifier: Apache-2.0
# tests/support/tap.py - TAP-like results for the Python integration tests: `ok - DESC` and
# `not ok - DESC: WHY` lines, `# MSG` diagnostics, and the count of checks and the list of the
# failed ones that the script sums up at its end (module state: one test script per process).
# Used by tests/integration/control_access.py, control_e2e.py and control_learn.py; standard
# library only.

checks = [0]
failures = []


def ok(desc):
    checks[0] += 1
    print("ok - " + desc, flush=True)


def not_ok(desc, why=""):
    checks[0] += 1
    failures.append(desc)
    print("not ok - %s%s" % (desc, (": " + str(why)) if why not in ("", None) else ""), flush=True)


def check(desc, cond, why=""):
    """ok(desc) when `cond` holds, else not_ok(desc, why); returns `cond`."""
    if cond:
        ok(desc)
    else:
        not_ok(desc, why)
    return cond


def diag(msg):
    print("# " + msg, flush=True)
