/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/supervise.h - the process supervisor of `sluice up` (docs/up.md): child processes started
 * by fork+exec of /proc/self/exe, each in a process group of its own (a Ctrl-C on the terminal
 * reaches the supervisor only, which then stops the children in its own order), restarted with
 * back-off when they die, stopped with SIGTERM (SIGKILL after a bound). Plus the pure pieces of
 * `sluice up`: the back-off schedule, the `--` split of its arguments and the gateway address
 * of a subnet.
 *
 * Lifecycle: sl_sup_init() (blocks SIGINT, SIGTERM, SIGCHLD, SIGHUP and SIGUSR1; they are taken
 * with sigtimedwait() by sl_sup_poll(), which passes SIGHUP and SIGUSR1 on to every child) ->
 * sl_sup_start() per child -> sl_sup_poll() and sl_sup_restart_due() in a loop until `stop` ->
 * sl_sup_stop() per child -> sl_sup_finish(). One supervisor per process; not thread-safe.
 */
#ifndef SL_CMD_SUPERVISE_H
#define SL_CMD_SUPERVISE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

/* The back-off schedule: the first restart waits SL_SUP_BACKOFF_INITIAL_MS, each quick death
 * after that doubles the wait up to SL_SUP_BACKOFF_MAX_MS, and a child that ran at least
 * SL_SUP_BACKOFF_RESET_MS before dying starts over from the initial wait. */
#define SL_SUP_BACKOFF_INITIAL_MS 500u
#define SL_SUP_BACKOFF_MAX_MS     30000u
#define SL_SUP_BACKOFF_RESET_MS   60000u
/* Most children of one supervisor. */
#define SL_SUP_CHILDREN_MAX 4

struct sl_sup_child {
    /* A name for log lines ("control", "proxy"); borrowed. */
    const char *name;
    /* The argument vector given to exec (argv[0] included, NULL-terminated); borrowed. */
    char **argv;
    /* Not restarted when it exits with this status (a usage error does not heal); -1: none. */
    int fatal_status;
    /* State, owned by the supervisor. 0 when not running. */
    pid_t pid;
    uint64_t started_ms;
    /* The last back-off used (0: none yet) and when the next start is due (0: not due). */
    unsigned delay_ms;
    uint64_t restart_at_ms;
    /* The last wait status, and the number of starts. */
    int status;
    unsigned starts;
    /* It exited with `fatal_status`. */
    bool failed;
};

struct sl_sup {
    sigset_t old_mask;
    struct sl_sup_child *children[SL_SUP_CHILDREN_MAX];
    size_t n;
    /* The first back-off (SL_SUP_BACKOFF_INITIAL_MS unless changed). */
    unsigned initial_ms;
    /* Restart children that die (false while stopping). */
    bool restarting;
    /* SIGINT or SIGTERM arrived: the signal, else 0. */
    int stop_signal;
};

/* The back-off before the next start of a child that ran `ran_ms` and whose previous back-off
 * was `prev_ms` (0: it never needed one), with first back-off `initial_ms`. Pure. */
unsigned sl_sup_next_delay(unsigned prev_ms, uint64_t ran_ms, unsigned initial_ms);

/* The number of arguments of argv[0..argc) before the first "--" (argc when there is none).
 * The arguments after it are argv[n + 1..argc). Pure. */
int sl_sup_split_args(int argc, char **argv);

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t sl_sup_now_ms(void);

/* Blocks SIGINT, SIGTERM, SIGCHLD, SIGHUP and SIGUSR1 (children get the old mask back before
 * exec). Returns 0
 * or a negative errno. */
SL_MUST_CHECK int sl_sup_init(struct sl_sup *s);

/* Adds `c` (borrowed; outlives the supervisor) and starts it. Returns 0 or a negative errno
 * (fork failed; nothing was started). */
SL_MUST_CHECK int sl_sup_start(struct sl_sup *s, struct sl_sup_child *c);

/* Waits up to `timeout_ms` (less when a restart falls due earlier) for a signal. Reaps every
 * child that exited (logs it, and schedules its restart while `restarting`), records SIGINT
 * and SIGTERM in `stop_signal`, passes SIGHUP and SIGUSR1 on to the running children. Returns after
 * the first signal or the timeout. */
void sl_sup_poll(struct sl_sup *s, unsigned timeout_ms);

/* Starts every child whose restart is due. */
void sl_sup_restart_due(struct sl_sup *s);

/* Stops `c`: SIGTERM, up to `timeout_ms` for it to exit, then SIGKILL. Cancels a pending
 * restart. Returns its wait status (0 when it was not running), or -1 when it had to be
 * killed. */
int sl_sup_stop(struct sl_sup *s, struct sl_sup_child *c, unsigned timeout_ms);

/* Restores the signal mask. */
void sl_sup_finish(struct sl_sup *s);

#endif
