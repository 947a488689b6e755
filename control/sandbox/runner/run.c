/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/runner/run.c - sluice-run, the helper that runs one sandbox command
 * (docs/reference/README.md §5.3).
 *
 *   sluice-run [--timeout-ms N] [--grace-ms N] -c CMD
 *   sluice-run --idle
 *
 * The control plane copies this program into every sandbox container (it is embedded in the
 * sluice binary, see control/sandbox/runner_blob.h) and runs it through the Docker exec API, which
 * has no way to kill what it started. The runner supplies that: it runs `/bin/bash -c CMD` (or
 * `/bin/sh -c CMD` where the image has no bash) with stdin from /dev/null and its output
 * inherited, and
 *   - when the command exits, exits with its status (the exit code, or 128+N if signal N killed
 *     it), leaving any background processes it started running;
 *   - when the time limit passes (monotonic clock), stops the whole process tree the command
 *     started, including processes that called setsid or double-forked, sends it SIGTERM, waits
 *     up to the grace period, SIGKILLs what is left, and exits 124;
 *   - when it receives SIGTERM, SIGINT or SIGHUP itself, does the same with that signal and
 *     exits 128+N.
 * With --idle it runs nothing and waits until a signal ends it (SIGTERM, SIGINT and SIGHUP by
 * their default action): the container's own process, so that nothing of the image runs before
 * the control plane has put the container's network rules in place (docs/reference/containers.md
 * §5.4).
 * Bad usage exits 125 with one line on fd 2; so does a failure of the runner itself. An exec
 * failure of the shell exits 126 (127: no such file), as coreutils timeout does. The runner
 * prints nothing else: fds 1 and 2 belong to the command.
 *
 * Finding the tree: the runner is a child subreaper (PR_SET_CHILD_SUBREAPER), so a descendant
 * whose parent exits is re-parented to the runner rather than to PID 1, and every descendant
 * stays in the runner's subtree. The subtree is read from the ppid field of /proc/PID/stat.
 * Killing it: a process that forks in a loop could create children faster than a kill pass
 * finds them, so the tree is frozen first: one SIGSTOP to the command's own process group
 * stops all that stayed in it at once, then every descendant is sent SIGSTOP, again and again
 * until scans find no one new and everyone stopped; only then does the frozen tree get its
 * SIGTERM and SIGCONT.
 *
 * The binary is linked statically and built without sanitizers (it runs inside images we do
 * not control), so it links none of the sluice libraries: no heap at all, its tables are
 * static arrays sized for the kernel's largest pid, paged in only as far as they are used.
 */
/* syscall(2), for the signals libc will not touch (see reset_signal), is not POSIX. */
#define _DEFAULT_SOURCE 1

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

/* PID_MAX_LIMIT of 64-bit kernels (linux/threads.h); pid_max can never be set higher. */
#define PID_LIMIT 4194304

/* Exit codes, as coreutils timeout has them. */
#define EXIT_TIMEDOUT 124
#define EXIT_RUNNER   125
#define EXIT_NOEXEC   126
#define EXIT_NOTFOUND 127

/* How long SIGSTOP passes may go on before the runner stops waiting for a stable tree, and how
 * long the final SIGKILL passes may take before it gives up on processes that cannot die (D
 * state). A tree under a pids limit is stable after a pass or two; without one, an exponential
 * fork bomb on a host with tens of thousands of processes (each pass reads every
 * /proc/PID/stat) can keep producing newcomers, and the kill passes then chase it. */
#define FREEZE_MAX_MS 3000
#define KILL_TRY_MS   30000

/* How often the tree is scanned again while waiting for it to die. */
#define POLL_MS 20

#define USAGE "usage: sluice-run [--timeout-ms N] [--grace-ms N] -c CMD | sluice-run --idle"

#define HELP                                                                                      \
    USAGE "\n"                                                                                    \
          "Runs CMD with /bin/bash -c (or /bin/sh -c without bash), stdin from /dev/null.\n"      \
          "  --timeout-ms N  time limit in milliseconds (default 600000); when it passes, the\n"  \
          "                  whole process tree gets SIGTERM, then SIGKILL after the grace\n"     \
          "                  period, and sluice-run exits 124\n"                                  \
          "  --grace-ms N    milliseconds between SIGTERM and SIGKILL (default 5000)\n"           \
          "  --idle          run nothing; wait until SIGTERM, SIGINT or SIGHUP ends sluice-run\n" \
          "Exit status: the command's (128+N if signal N killed it), 124 on timeout, 125 on\n"    \
          "bad usage or a failure of sluice-run, 126/127 if the shell cannot be run.\n"

struct options {
    /* Time limit and grace period, in milliseconds. */
    uint64_t timeout_ms;
    uint64_t grace_ms;
    /* The command, borrowed from argv. */
    const char *cmd;
    /* --idle: no command, only the wait for a signal. */
    bool idle;
};

/* One process seen in /proc. */
struct proc_entry {
    pid_t pid;
    pid_t ppid;
    /* The state letter of /proc/PID/stat ('T': stopped by a signal). */
    char state;
};

/* The last scan of /proc: scan_n entries; after collect_tree() the first tree_n hold the
 * runner's live descendants. */
static struct proc_entry scan[PID_LIMIT];
static size_t scan_n;

/* Bitmaps indexed by pid: the subtree while collect_tree() builds it (cleared again before it
 * returns), and the processes already sent the signal of the current phase. */
static uint8_t in_tree[PID_LIMIT / 8];
static uint8_t signalled[PID_LIMIT / 8];

/* The command's shell, and its wait status once reaped. */
static pid_t child = -1;
static bool child_done;
static int child_status;

static bool test_bit(const uint8_t *bits, pid_t pid)
{
    return pid > 0 && pid < PID_LIMIT && (bits[pid / 8] & (1u << (pid % 8))) != 0;
}

static void set_bit(uint8_t *bits, pid_t pid)
{
    if (pid > 0 && pid < PID_LIMIT) {
        bits[pid / 8] = (uint8_t)(bits[pid / 8] | (1u << (pid % 8)));
    }
}

static void clear_bit(uint8_t *bits, pid_t pid)
{
    if (pid > 0 && pid < PID_LIMIT) {
        bits[pid / 8] = (uint8_t)(bits[pid / 8] & ~(1u << (pid % 8)));
    }
}

/* Writes "sluice-run: <message>\n" to fd 2, the runner's only output of its own. */
static void say(const char *fmt, ...) SL_PRINTF(1, 2);

static void say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n = snprintf(line, sizeof(line), "sluice-run: ");

    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) {
        n = (int)sizeof(line) - 2;
    }
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, (size_t)n);
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Parses a count of milliseconds; false unless `s` is all digits and within `max`. */
static bool parse_ms(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return false;
        }
        v = v * 10u + (uint64_t)(*s - '0');
        if (v > max) {
            return false;
        }
    }
    *out = v;
    return true;
}

/* Matches argv[*i] against option `name`, given as "--name=V" or "--name V". False when it is
 * another argument. True when it is this one, with `*value` borrowed from argv (NULL when the
 * value is missing) and *i moved past a separate value. */
static bool match_option(char **argv, int argc, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);

    if (strncmp(arg, name, n) != 0 || (arg[n] != '=' && arg[n] != '\0')) {
        return false;
    }
    *value = NULL;
    if (arg[n] == '=') {
        *value = arg + n + 1;
    } else if (*i + 1 < argc) {
        *i += 1;
        *value = argv[*i];
    }
    return true;
}

/* Parses the value `v` of option `name` into `*out`, at least `min` milliseconds; false after
 * saying what is wrong. */
static bool take_ms(const char *name, const char *v, uint64_t min, uint64_t *out)
{
    /* At most a year: far beyond any sandbox limit, far from any overflow. */
    const uint64_t max_ms = 366ull * 24 * 3600 * 1000;

    if (v == NULL) {
        say("%s needs a value (" USAGE ")", name);
        return false;
    }
    if (!parse_ms(v, max_ms, out) || *out < min) {
        say("%s needs a %snumber of milliseconds, got '%s'", name, min > 0 ? "positive " : "", v);
        return false;
    }
    return true;
}

/* Returns 0 and fills `o`, 1 for --help, or -1 after saying what is wrong. */
static int parse_args(int argc, char **argv, struct options *o)
{
    *o = (struct options){ .timeout_ms = 600000, .grace_ms = 5000, .cmd = NULL };
    if (argc == 2 && strcmp(argv[1], "--idle") == 0) {
        o->idle = true;
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;

        if (o->cmd != NULL) {
            say("unexpected argument after -c CMD: '%s' (" USAGE ")", arg);
            return -1;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            return 1;
        }
        if (match_option(argv, argc, &i, "--timeout-ms", &v)) {
            if (!take_ms("--timeout-ms", v, 1, &o->timeout_ms)) {
                return -1;
            }
        } else if (match_option(argv, argc, &i, "--grace-ms", &v)) {
            if (!take_ms("--grace-ms", v, 0, &o->grace_ms)) {
                return -1;
            }
        } else if (strcmp(arg, "-c") == 0) {
            if (i + 1 >= argc) {
                say("-c needs the command (" USAGE ")");
                return -1;
            }
            o->cmd = argv[++i];
        } else {
            say("unknown argument '%s' (" USAGE ")", arg);
            return -1;
        }
    }
    if (o->cmd == NULL) {
        say("missing -c CMD (" USAGE ")");
        return -1;
    }
    return 0;
}

/* Reads the ppid and state of one /proc/PID/stat; false if the process is gone, a zombie, or
 * the file does not parse. The command name in parentheses may hold any byte, so parsing
 * starts after its last ')'. */
static bool read_stat(pid_t pid, pid_t *ppid, char *state)
{
    char path[64];
    char buf[1024];
    const char *p;
    ssize_t n;
    long v = 0;
    int fd;

    (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        return false;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    (void)close(fd);
    if (n <= 0) {
        return false;
    }
    buf[n] = '\0';
    p = strrchr(buf, ')');
    /* ") S 123 ..." */
    if (p == NULL || p[1] != ' ' || p[2] == '\0' || p[3] != ' ') {
        return false;
    }
    if (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x') {
        return false;
    }
    *state = p[2];
    for (p += 4; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v >= PID_LIMIT) {
            return false;
        }
    }
    *ppid = (pid_t)v;
    return true;
}

/* Fills scan[] with every live process in /proc. -1 if /proc cannot be read. */
static int scan_proc(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;

    if (d == NULL) {
        return -1;
    }
    scan_n = 0;
    while ((e = readdir(d)) != NULL && scan_n < PID_LIMIT) {
        long pid = 0;
        const char *p = e->d_name;
        pid_t ppid;
        char state;

        for (; *p >= '0' && *p <= '9' && pid < PID_LIMIT; p++) {
            pid = pid * 10 + (*p - '0');
        }
        if (*p != '\0' || pid <= 0 || pid >= PID_LIMIT) {
            continue;
        }
        if (read_stat((pid_t)pid, &ppid, &state)) {
            scan[scan_n++] = (struct proc_entry){ .pid = (pid_t)pid, .ppid = ppid, .state = state };
        }
    }
    (void)closedir(d);
    return 0;
}

/* Scans /proc and returns the number of the runner's live descendants, which are then
 * scan[0..n); -1 if /proc cannot be read. Passes repeat until the subtree stops growing:
 * /proc lists in pid order, so one pass usually suffices, but a reused (wrapped) pid can list
 * a child before its parent. */
static long collect_tree(void)
{
    pid_t self = getpid();
    size_t n = 0;
    bool grew;

    if (scan_proc() == -1) {
        return -1;
    }
    set_bit(in_tree, self);
    do {
        grew = false;
        for (size_t i = 0; i < scan_n; i++) {
            if (!test_bit(in_tree, scan[i].pid) && test_bit(in_tree, scan[i].ppid)) {
                set_bit(in_tree, scan[i].pid);
                grew = true;
            }
        }
    } while (grew);
    for (size_t i = 0; i < scan_n; i++) {
        if (scan[i].pid != self && test_bit(in_tree, scan[i].pid)) {
            scan[n++] = scan[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        clear_bit(in_tree, scan[i].pid);
    }
    clear_bit(in_tree, self);
    return (long)n;
}

/* Reaps every child that has exited (re-parented orphans included), noting the command's
 * status when its shell is among them. */
static void reap(void)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == child) {
            child_done = true;
            child_status = status;
        }
    }
}

/* Waits up to `ms` for a signal of `set`; returns it, or 0 when the time passed. */
static int wait_signal(const sigset_t *set, uint64_t ms)
{
    struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };
    int sig = sigtimedwait(set, NULL, &ts);

    return sig == -1 ? 0 : sig;
}

/* 'T' stopped by a signal, 't' stopped by a tracer: either way it runs no more. */
static bool is_stopped(char state)
{
    return state == 'T' || state == 't';
}

/* Sends SIGSTOP to every descendant, scanning again until two scans in a row find no one new
 * and everyone stopped (or FREEZE_MAX_MS passes), so that no fork can slip between a scan and
 * the kill. One clean scan is not enough: a child forked just before its parent stopped may
 * sit where the directory walk had already passed; the next scan, begun after the parent was
 * seen stopped, must find it. The state check also catches a pid reused since it was stopped.
 * Clears signalled[]. */
static void freeze_tree(void)
{
    const struct timespec pause = { .tv_sec = 0, .tv_nsec = 1000000 };
    uint64_t deadline = now_ms() + FREEZE_MAX_MS;
    int clean = 0;

    while (clean < 2 && now_ms() < deadline) {
        long n = collect_tree();
        bool quiet = true;

        for (long i = 0; i < n; i++) {
            if (!test_bit(signalled, scan[i].pid) || !is_stopped(scan[i].state)) {
                (void)kill(scan[i].pid, SIGSTOP);
                set_bit(signalled, scan[i].pid);
                quiet = false;
            }
        }
        clean = quiet ? clean + 1 : 0;
        if (!quiet) {
            /* Let the stops land before looking again. */
            (void)nanosleep(&pause, NULL);
        }
    }
    (void)memset(signalled, 0, sizeof(signalled));
}

/* Sends `sig` and then SIGCONT to every descendant of the last scan not yet sent `sig`. */
static void signal_tree(long n, int sig)
{
    for (long i = 0; i < n; i++) {
        if (!test_bit(signalled, scan[i].pid)) {
            (void)kill(scan[i].pid, sig);
            set_bit(signalled, scan[i].pid);
        }
    }
    for (long i = 0; i < n; i++) {
        (void)kill(scan[i].pid, SIGCONT);
    }
}

/* Ends the command's whole process tree: freeze it, send `sig` (newcomers get it too), wait up
 * to grace_ms for it to exit, then SIGKILL until nothing is left. */
static void stop_tree(int sig, uint64_t grace_ms, const sigset_t *chld)
{
    uint64_t deadline;
    long n;

    /* One syscall stops everything that stayed in the command's process group, before the
     * scans (slow on a machine busy with a fork storm) hunt down what left it. The child is
     * not reaped yet, so its pid and thus the group id cannot belong to anyone else. */
    (void)kill(-child, SIGSTOP);
    freeze_tree();
    reap();
    n = collect_tree();
    if (n == -1) {
        /* No /proc: the command's shell is the one process the runner still knows. */
        say("cannot read /proc: %s", strerror(errno));
        (void)kill(child, SIGKILL);
        return;
    }
    signal_tree(n, sig);
    deadline = now_ms() + grace_ms;
    while (n > 0) {
        uint64_t now = now_ms();

        if (now >= deadline) {
            break;
        }
        (void)wait_signal(chld, deadline - now < POLL_MS ? deadline - now : POLL_MS);
        reap();
        n = collect_tree();
        signal_tree(n, sig);
    }
    if (n > 0) {
        /* Whatever ignored `sig` may still be forking: freeze it again before the kill. */
        freeze_tree();
        n = collect_tree();
    }
    deadline = now_ms() + KILL_TRY_MS;
    while (n > 0 && now_ms() < deadline) {
        for (long i = 0; i < n; i++) {
            (void)kill(scan[i].pid, SIGKILL);
        }
        (void)wait_signal(chld, 1);
        reap();
        n = collect_tree();
    }
}

/* In the child: undo what the runner changed about signals, take stdin from `null_fd`, and
 * exec the shell. Never returns. */
/* The kernel's struct sigaction for rt_sigaction(2) (x86_64 and aarch64 layouts agree for
 * SIG_DFL: handler, flags, restorer, mask). */
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

/* SIG_DFL for `sig`. libc refuses the signals it reserves for itself (32 and 33 in glibc), yet
 * a parent may have left them ignored, and an ignored disposition survives exec: those go to
 * the kernel directly. SIGKILL and SIGSTOP cannot be changed at all. */
static void reset_signal(int sig, const struct sigaction *dfl)
{
    struct kernel_sigaction k = { SIG_DFL, 0, NULL, 0 };

    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, dfl, NULL) == 0) {
        return;
    }
    (void)syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof(k.mask));
}

static void exec_shell(const char *cmd, int null_fd)
{
    const char *shell = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
    char *const argv[] = { (char *)(uintptr_t)shell, (char *)(uintptr_t) "-c",
                           (char *)(uintptr_t)cmd, NULL };
    struct sigaction dfl;
    sigset_t none;
    int err;

    (void)memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    (void)sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig <= SIGRTMAX; sig++) {
        reset_signal(sig, &dfl);
    }
    (void)sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)setpgid(0, 0);
    if (dup2(null_fd, STDIN_FILENO) == -1) {
        say("cannot redirect stdin: %s", strerror(errno));
        _exit(EXIT_RUNNER);
    }
    (void)execv(shell, argv);
    err = errno;
    say("cannot run %s: %s", shell, strerror(err));
    _exit(err == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
}

/* Forks the command; the signals of `blocked` stay blocked in the runner. -1 on failure. */
static int start_child(const char *cmd, const sigset_t *blocked)
{
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (null_fd == -1) {
        say("cannot open /dev/null: %s", strerror(errno));
        return -1;
    }
    if (sigprocmask(SIG_BLOCK, blocked, NULL) == -1) {
        say("cannot block signals: %s", strerror(errno));
        (void)close(null_fd);
        return -1;
    }
    child = fork();
    if (child == -1) {
        say("cannot fork: %s", strerror(errno));
        (void)close(null_fd);
        return -1;
    }
    if (child == 0) {
        exec_shell(cmd, null_fd);
    }
    /* Its own process group, set on both sides of the fork so that neither order races. */
    (void)setpgid(child, child);
    (void)close(null_fd);
    return 0;
}

/* The exit status the runner passes on for the command's wait status. */
static int exit_code(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return EXIT_RUNNER;
}

/* --idle: the default actions of SIGTERM, SIGINT and SIGHUP end the process (whatever it
 * inherited). */
static void idle(void)
{
    static const int ends[] = { SIGTERM, SIGINT, SIGHUP };
    struct sigaction dfl;
    sigset_t none;

    (void)memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    (void)sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
        reset_signal(ends[i], &dfl);
    }
    (void)sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    for (;;) {
        (void)pause();
    }
}

int main(int argc, char **argv)
{
    struct options o;
    sigset_t all, chld;
    uint64_t deadline;
    int rc = parse_args(argc, argv, &o);

    if (rc != 0) {
        if (rc == 1) {
            (void)!write(STDOUT_FILENO, HELP, sizeof(HELP) - 1);
        }
        return rc == 1 ? 0 : EXIT_RUNNER;
    }
    if (o.idle) {
        idle();
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) == -1) {
        say("cannot become a child subreaper: %s", strerror(errno));
        return EXIT_RUNNER;
    }
    /* An inherited SIG_IGN would have the kernel reap the children, statuses and all. */
    if (signal(SIGCHLD, SIG_DFL) == SIG_ERR) {
        say("cannot reset SIGCHLD: %s", strerror(errno));
        return EXIT_RUNNER;
    }
    (void)sigemptyset(&chld);
    (void)sigaddset(&chld, SIGCHLD);
    all = chld;
    (void)sigaddset(&all, SIGTERM);
    (void)sigaddset(&all, SIGINT);
    (void)sigaddset(&all, SIGHUP);
    if (start_child(o.cmd, &all) == -1) {
        return EXIT_RUNNER;
    }
    deadline = now_ms() + o.timeout_ms;
    for (;;) {
        uint64_t now = now_ms();
        int sig;

        if (now >= deadline) {
            stop_tree(SIGTERM, o.grace_ms, &chld);
            return EXIT_TIMEDOUT;
        }
        sig = wait_signal(&all, deadline - now);
        reap();
        if (child_done) {
            return exit_code(child_status);
        }
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
            stop_tree(sig, o.grace_ms, &chld);
            return 128 + sig;
        }
    }
}
