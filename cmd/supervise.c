/* SPDX-License-Identifier: Apache-2.0 */
#include "cmd/supervise.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

/* How often sl_sup_stop() looks whether the child is gone. */
#define STOP_STEP_MS 50u

unsigned sl_sup_next_delay(unsigned prev_ms, uint64_t ran_ms, unsigned initial_ms)
{
    uint64_t next;

    if (initial_ms == 0) {
        initial_ms = SL_SUP_BACKOFF_INITIAL_MS;
    }
    if (prev_ms == 0 || ran_ms >= SL_SUP_BACKOFF_RESET_MS) {
        return initial_ms;
    }
    next = (uint64_t)prev_ms * 2;
    if (next > SL_SUP_BACKOFF_MAX_MS) {
        next = SL_SUP_BACKOFF_MAX_MS;
    }
    /* A first back-off above the cap (a test's) is never shortened. */
    return next < initial_ms ? initial_ms : (unsigned)next;
}

int sl_sup_split_args(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            return i;
        }
    }
    return argc;
}

uint64_t sl_sup_now_ms(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The signals the supervisor blocks and waits for. */
static void signals(sigset_t *set)
{
    (void)sigemptyset(set);
    (void)sigaddset(set, SIGINT);
    (void)sigaddset(set, SIGTERM);
    (void)sigaddset(set, SIGCHLD);
    (void)sigaddset(set, SIGHUP);
    (void)sigaddset(set, SIGUSR1);
}

int sl_sup_init(struct sl_sup *s)
{
    sigset_t set;

    memset(s, 0, sizeof(*s));
    s->initial_ms = SL_SUP_BACKOFF_INITIAL_MS;
    s->restarting = true;
    signals(&set);
    if (sigprocmask(SIG_BLOCK, &set, &s->old_mask) == -1) {
        return -errno;
    }
    return 0;
}

void sl_sup_finish(struct sl_sup *s)
{
    (void)sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void exec_child(const struct sl_sup *s, const struct sl_sup_child *c, pid_t parent)
{
    /* A group of its own: the terminal's Ctrl-C goes to the supervisor, which stops the
     * children in order. The supervisor dying (even by SIGKILL) stops the child too. */
    (void)setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1 || getppid() != parent) {
        _exit(127);
    }
    /* The supervisor's standard output carries its summary; the children's logs go to
     * standard error. */
    if (dup2(STDERR_FILENO, STDOUT_FILENO) == -1) {
        _exit(127);
    }
    (void)signal(SIGPIPE, SIG_DFL);
    (void)sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
    (void)execv("/proc/self/exe", c->argv);
    _exit(127);
}

static int spawn(struct sl_sup *s, struct sl_sup_child *c)
{
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid == -1) {
        return -errno;
    }
    if (pid == 0) {
        exec_child(s, c, parent);
    }
    c->pid = pid;
    c->started_ms = sl_sup_now_ms();
    c->restart_at_ms = 0;
    c->starts++;
    sl_log(SL_LOG_INFO, 0, "msg=\"started\" child=%s pid=%ld start=%u", c->name, (long)pid,
           c->starts);
    return 0;
}

int sl_sup_start(struct sl_sup *s, struct sl_sup_child *c)
{
    bool known = false;

    for (size_t i = 0; i < s->n; i++) {
        known = known || s->children[i] == c;
    }
    if (!known) {
        SL_BUG_ON(s->n >= SL_SUP_CHILDREN_MAX);
        s->children[s->n++] = c;
    }
    return spawn(s, c);
}

/* Describes a wait status for a log line. */
static void describe(int status, char *out, size_t cap)
{
    if (WIFEXITED(status)) {
        (void)snprintf(out, cap, "exit=%d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        (void)snprintf(out, cap, "signal=%d", WTERMSIG(status));
    } else {
        (void)snprintf(out, cap, "status=%d", status);
    }
}

static struct sl_sup_child *find(const struct sl_sup *s, pid_t pid)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->children[i]->pid == pid) {
            return s->children[i];
        }
    }
    return NULL;
}

/* Reaps every exited child; schedules restarts. */
static void reap(struct sl_sup *s)
{
    for (;;) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        struct sl_sup_child *c;
        uint64_t now;
        uint64_t ran;
        char how[32];

        if (pid <= 0) {
            return;
        }
        c = find(s, pid);
        if (c == NULL) {
            continue;
        }
        now = sl_sup_now_ms();
        ran = now - c->started_ms;
        c->pid = 0;
        c->status = status;
        describe(status, how, sizeof(how));
        if (c->fatal_status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == c->fatal_status) {
            c->failed = true;
            sl_log(SL_LOG_ERROR, 0,
                   "msg=\"exited; not restarted (its arguments are wrong)\" "
                   "child=%s pid=%ld %s ran_ms=%llu",
                   c->name, (long)pid, how, (unsigned long long)ran);
            continue;
        }
        if (!s->restarting) {
            sl_log(SL_LOG_INFO, 0, "msg=\"exited\" child=%s pid=%ld %s", c->name, (long)pid, how);
            continue;
        }
        c->delay_ms = sl_sup_next_delay(c->delay_ms, ran, s->initial_ms);
        c->restart_at_ms = now + c->delay_ms;
        sl_log(SL_LOG_WARN, 0,
               "msg=\"exited; restarting after a back-off\" child=%s pid=%ld %s ran_ms=%llu "
               "restart_in_ms=%u",
               c->name, (long)pid, how, (unsigned long long)ran, c->delay_ms);
    }
}

/* SIGHUP (reload) and SIGUSR1 (reopen logs) are the children's business: passed on to each. */
static void forward(const struct sl_sup *s, int sig)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->children[i]->pid != 0) {
            (void)kill(s->children[i]->pid, sig);
        }
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"passed the signal on to the children\" signal=%s",
           sig == SIGHUP ? "SIGHUP" : "SIGUSR1");
}

void sl_sup_poll(struct sl_sup *s, unsigned timeout_ms)
{
    uint64_t now = sl_sup_now_ms();
    uint64_t until = now + timeout_ms;
    struct timespec ts;
    sigset_t set;
    int sig;

    for (size_t i = 0; i < s->n; i++) {
        uint64_t due = s->children[i]->restart_at_ms;

        if (due != 0 && due < until) {
            until = due > now ? due : now;
        }
    }
    ts.tv_sec = (time_t)((until - now) / 1000u);
    ts.tv_nsec = (long)((until - now) % 1000u) * 1000000L;
    signals(&set);
    sig = sigtimedwait(&set, NULL, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
        if (s->stop_signal == 0) {
            s->stop_signal = sig;
        }
    }
    if (sig == SIGHUP || sig == SIGUSR1) {
        forward(s, sig);
    }
    /* SIGCHLD, a timeout or an interruption: reaping costs nothing when no child exited, and
     * a SIGCHLD merged with another is never missed this way. */
    reap(s);
}

void sl_sup_restart_due(struct sl_sup *s)
{
    uint64_t now = sl_sup_now_ms();

    for (size_t i = 0; i < s->n; i++) {
        struct sl_sup_child *c = s->children[i];
        int rc;

        if (c->pid != 0 || c->restart_at_ms == 0 || c->restart_at_ms > now || !s->restarting) {
            continue;
        }
        rc = spawn(s, c);
        if (rc < 0) {
            c->delay_ms = sl_sup_next_delay(c->delay_ms, 0, s->initial_ms);
            c->restart_at_ms = now + c->delay_ms;
            sl_log(SL_LOG_ERROR, 0, "msg=\"cannot restart\" child=%s err=\"%s\" retry_in_ms=%u",
                   c->name, strerror(-rc), c->delay_ms);
        }
    }
}

int sl_sup_stop(struct sl_sup *s, struct sl_sup_child *c, unsigned timeout_ms)
{
    uint64_t until = sl_sup_now_ms() + timeout_ms;
    pid_t pid = c->pid;

    c->restart_at_ms = 0;
    if (pid == 0) {
        return 0;
    }
    (void)kill(pid, SIGTERM);
    while (c->pid != 0 && sl_sup_now_ms() < until) {
        sl_sup_poll(s, STOP_STEP_MS);
        c->restart_at_ms = 0;
    }
    if (c->pid == 0) {
        return c->status;
    }
    sl_log(SL_LOG_ERROR, 0,
           "msg=\"did not stop in time; killing it\" child=%s pid=%ld timeout_ms=%u", c->name,
           (long)pid, timeout_ms);
    (void)kill(pid, SIGKILL);
    (void)waitpid(pid, NULL, 0);
    c->pid = 0;
    return -1;
}
