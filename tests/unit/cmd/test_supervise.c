/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/cmd/test_supervise.c - cmd/supervise: the back-off schedule, the `--` split of
 * `sluice up`'s arguments, the gateway of a subnet (control/sandbox/sandbox's rule, which up uses),
 * and the supervisor itself on real child processes. The supervisor execs /proc/self/exe, which is
 * this test binary: run with `child MODE`, it plays the child (exit at once with a status, or wait
 * for SIGTERM, or ignore it).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd/supervise.h"
#include "control/sandbox/sandbox.h"

/* Mutable argument strings (exec's argv is `char *`). */
static char a_prog[] = "test_supervise";
static char a_child[] = "child";
static char a_exit3[] = "exit3";
static char a_exit2[] = "exit2";
static char a_wait[] = "wait";
static char a_stubborn[] = "stubborn";
static char a_up[] = "up";
static char a_data[] = "--data";
static char a_x[] = "x";
static char a_dd[] = "--";
static char a_resolve[] = "--resolve";
static char a_pin[] = "a:1:1.2.3.4";
static char a_z[] = "z";

static void backoff_doubles_up_to_the_cap_and_starts_over(void **state)
{
    unsigned d = 0;
    const unsigned want[] = { 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000 };

    (void)state;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        d = sl_sup_next_delay(d, 100, SL_SUP_BACKOFF_INITIAL_MS);
        assert_int_equal(d, want[i]);
    }
    /* Ran long enough: back to the first wait. */
    assert_int_equal(sl_sup_next_delay(30000, SL_SUP_BACKOFF_RESET_MS, 500), 500);
    assert_int_equal(sl_sup_next_delay(30000, SL_SUP_BACKOFF_RESET_MS - 1, 500), 30000);
    /* 0 means the default first wait. */
    assert_int_equal(sl_sup_next_delay(0, 0, 0), SL_SUP_BACKOFF_INITIAL_MS);
    /* A first wait above the cap (a test's) is kept, never shortened by the cap. */
    assert_int_equal(sl_sup_next_delay(0, 0, 45000), 45000);
    assert_int_equal(sl_sup_next_delay(45000, 10, 45000), 45000);
    assert_int_equal(sl_sup_next_delay(20000, 10, 50), 30000);
}

static void splits_arguments_at_the_first_double_dash(void **state)
{
    char *a[] = { a_up, a_data, a_x, a_dd, a_resolve, a_pin, a_dd, a_z };
    char *b[] = { a_up, a_data, a_x };
    char *c[] = { a_up, a_dd };

    (void)state;
    assert_int_equal(sl_sup_split_args(8, a), 3);
    assert_int_equal(sl_sup_split_args(3, b), 3);
    assert_int_equal(sl_sup_split_args(2, c), 1);
    assert_int_equal(sl_sup_split_args(0, a), 0);
}

static void gateway_is_the_first_address(void **state)
{
    char gw[16];
    const char *bad[] = { "10.213.0.1/24",
                          "10.213.0.0",
                          "10.213.0.0/",
                          "10.213.0.0/30",
                          "10.213.0.0/7",
                          "10.213.0.0/24x",
                          "10.213.0.0/-24",
                          "::1/64",
                          "10.213.0.0/+24",
                          "garbage/24",
                          "" };

    (void)state;
    assert_int_equal(sl_sandboxes_subnet_gateway("10.213.0.0/24", gw, sizeof(gw)), 0);
    assert_string_equal(gw, "10.213.0.1");
    assert_int_equal(sl_sandboxes_subnet_gateway("10.77.0.0/16", gw, sizeof(gw)), 0);
    assert_string_equal(gw, "10.77.0.1");
    assert_int_equal(sl_sandboxes_subnet_gateway("192.168.10.8/29", gw, sizeof(gw)), 0);
    assert_string_equal(gw, "192.168.10.9");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_true(sl_sandboxes_subnet_gateway(bad[i], gw, sizeof(gw)) < 0);
    }
    assert_true(sl_sandboxes_subnet_gateway(NULL, gw, sizeof(gw)) < 0);
}

/* Polls until `c` has started `starts` times, or `ms` pass. */
static void run_until_starts(struct sl_sup *s, struct sl_sup_child *c, unsigned starts, unsigned ms)
{
    uint64_t until = sl_sup_now_ms() + ms;

    while (c->starts < starts && !c->failed && sl_sup_now_ms() < until) {
        sl_sup_poll(s, 20);
        sl_sup_restart_due(s);
    }
}

static void restarts_a_dying_child_with_back_off(void **state)
{
    char *argv[] = { a_prog, a_child, a_exit3, NULL };
    struct sl_sup_child c = { .name = "t", .argv = argv, .fatal_status = 2 };
    struct sl_sup s;
    uint64_t t0;
    uint64_t took;

    (void)state;
    assert_int_equal(sl_sup_init(&s), 0);
    s.initial_ms = 100;
    t0 = sl_sup_now_ms();
    assert_int_equal(sl_sup_start(&s, &c), 0);
    /* Starts 2, 3 and 4 wait 100 + 200 + 400 ms. */
    run_until_starts(&s, &c, 4, 5000);
    took = sl_sup_now_ms() - t0;
    assert_int_equal(c.starts, 4);
    assert_true(took >= 700);
    assert_true(took < 3000);
    assert_int_equal(c.delay_ms, 400);
    assert_false(c.failed);
    assert_true(sl_sup_stop(&s, &c, 2000) >= 0);
    assert_int_equal(c.pid, 0);
    assert_int_equal(c.restart_at_ms, 0);
    sl_sup_finish(&s);
}

static void does_not_restart_a_child_with_bad_arguments(void **state)
{
    char *argv[] = { a_prog, a_child, a_exit2, NULL };
    struct sl_sup_child c = { .name = "t", .argv = argv, .fatal_status = 2 };
    struct sl_sup s;

    (void)state;
    assert_int_equal(sl_sup_init(&s), 0);
    s.initial_ms = 10;
    assert_int_equal(sl_sup_start(&s, &c), 0);
    run_until_starts(&s, &c, 2, 1500);
    assert_true(c.failed);
    assert_int_equal(c.starts, 1);
    assert_int_equal(c.pid, 0);
    assert_true(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 2);
    sl_sup_finish(&s);
}

/* Whether /proc/PID/status's mask FIELD ("SigCgt:" or "SigIgn:") holds SIGTERM. */
static bool sigterm_is(pid_t pid, const char *field)
{
    char path[64];
    char line[256];
    bool yes = false;
    FILE *f;

    (void)snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, strlen(field)) == 0) {
            unsigned long long mask = strtoull(line + strlen(field), NULL, 16);

            yes = (mask & (1ULL << (SIGTERM - 1))) != 0;
            break;
        }
    }
    (void)fclose(f);
    return yes;
}

static void stops_with_sigterm_then_sigkill(void **state)
{
    char *good_argv[] = { a_prog, a_child, a_wait, NULL };
    char *stubborn_argv[] = { a_prog, a_child, a_stubborn, NULL };
    struct sl_sup_child good = { .name = "good", .argv = good_argv, .fatal_status = -1 };
    struct sl_sup_child stubborn = { .name = "stubborn",
                                     .argv = stubborn_argv,
                                     .fatal_status = -1 };
    struct sl_sup s;
    uint64_t t0;
    int status;
    pid_t pid;

    (void)state;
    assert_int_equal(sl_sup_init(&s), 0);
    assert_int_equal(sl_sup_start(&s, &good), 0);
    assert_int_equal(sl_sup_start(&s, &stubborn), 0);
    assert_true(good.pid > 0 && stubborn.pid > 0);
    /* Wait (up to 20 s: a sanitizer build on a loaded machine starts slowly) until both have
     * set up SIGTERM, as the kernel reports it: the good one catches it, the stubborn one
     * ignores it. */
    for (int i = 0;
         i < 400 && !(sigterm_is(good.pid, "SigCgt:") && sigterm_is(stubborn.pid, "SigIgn:"));
         i++) {
        sl_sup_poll(&s, 50);
    }
    assert_true(sigterm_is(good.pid, "SigCgt:"));
    assert_true(sigterm_is(stubborn.pid, "SigIgn:"));
    /* Each child has a process group of its own. */
    assert_int_equal(getpgid(good.pid), good.pid);
    s.restarting = false;
    status = sl_sup_stop(&s, &good, 3000);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pid = stubborn.pid;
    t0 = sl_sup_now_ms();
    assert_int_equal(sl_sup_stop(&s, &stubborn, 300), -1);
    assert_true(sl_sup_now_ms() - t0 >= 300);
    assert_int_equal(stubborn.pid, 0);
    assert_true(kill(pid, 0) == -1);
    /* Stopping what is not running is fine. */
    assert_int_equal(sl_sup_stop(&s, &good, 100), 0);
    sl_sup_finish(&s);
}

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

/* The child modes (see the header). */
static int child(const char *mode)
{
    sigset_t none;

    (void)sigemptyset(&none);
    if (strcmp(mode, "exit3") == 0) {
        return 3;
    }
    if (strcmp(mode, "exit2") == 0) {
        return 2;
    }
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)signal(SIGTERM, strcmp(mode, "stubborn") == 0 ? SIG_IGN : on_term);
    for (int i = 0; i < 600 && got_term == 0; i++) {
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 50000000L };

        (void)nanosleep(&ts, NULL);
    }
    return got_term ? 0 : 1;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backoff_doubles_up_to_the_cap_and_starts_over),
        cmocka_unit_test(splits_arguments_at_the_first_double_dash),
        cmocka_unit_test(gateway_is_the_first_address),
        cmocka_unit_test(restarts_a_dying_child_with_back_off),
        cmocka_unit_test(does_not_restart_a_child_with_bad_arguments),
        cmocka_unit_test(stops_with_sigterm_then_sigkill),
    };

    if (argc == 3 && strcmp(argv[1], "child") == 0) {
        return child(argv[2]);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
