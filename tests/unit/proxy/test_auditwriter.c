/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_auditwriter.c - the audit log's writer when the disk says no
 * (docs/reference/proxy.md §4.7): a file that takes nothing (/dev/full), a file that takes part
 * of a batch and then nothing (RLIMIT_FSIZE stops write(2) in the middle of a line, as a full
 * disk does), and a rotation (sl_audit_reopen()). Whatever happens the file holds whole lines
 * only, every line once; the writer says it is unhealthy while it holds lines back, and healthy
 * again once they are written; the last quarter of the pending cap is for allowed requests' lines.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proxy/audit.h"
#include "tests/support/tmpdir.h"

/* A line whose path carries `n`, so that every line can be told apart. */
static void write_numbered(struct sl_audit *a, unsigned n)
{
    char path[64];
    struct sl_audit_record r;

    (void)snprintf(path, sizeof(path), "/line/%u", n);
    memset(&r, 0, sizeof(r));
    r.method = "GET";
    r.scheme = "http";
    r.host = "origin.example";
    r.port = 80;
    r.path = path;
    r.allow = true;
    r.reason = SL_REASON_NONE;
    r.status = 200;
    sl_audit_write(a, &r);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    (void)nanosleep(&ts, NULL);
}

/* Polls `want` health for up to 5 s. */
static bool wait_health(struct sl_audit *a, bool want)
{
    for (int i = 0; i < 500; i++) {
        if (sl_audit_healthy(a) == want) {
            return true;
        }
        sleep_ms(10);
    }
    return false;
}

static long file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Reads `path` (missing: nothing) and counts every numbered line in `seen` (n < max); fails the
 * test on a line that is not whole JSON. Returns the number of lines. */
static unsigned count_lines(const char *path, unsigned *seen, unsigned max)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    unsigned n = 0;

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t len = strlen(line);
        json_error_t e;
        json_t *j;
        unsigned k;

        if (len == 0 || line[len - 1] != '\n') {
            fail_msg("%s: a line without its newline: %s", path, line);
        }
        j = json_loads(line, 0, &e);
        if (j == NULL) {
            fail_msg("%s: a torn line: %s", path, line);
        }
        if (sscanf(json_string_value(json_object_get(j, "path")), "/line/%u", &k) != 1
            || k >= max) {
            fail_msg("%s: an unexpected line: %s", path, line);
        }
        seen[k]++;
        n++;
        json_decref(j);
    }
    (void)fclose(f);
    return n;
}

static void holds_lines_the_disk_refuses_and_counts_them(void **state)
{
    struct sl_audit_health h;
    struct sl_audit *a = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_audit_open("/dev/full", 0, &a, err, sizeof(err)), 0);
    assert_true(sl_audit_healthy(a));
    for (unsigned i = 0; i < 10; i++) {
        write_numbered(a, i);
    }
    assert_true(wait_health(a, false));
    sl_audit_health(a, &h);
    assert_false(h.healthy);
    assert_true(h.write_failures >= 1);
    assert_true(h.pending_bytes > 0);
    assert_int_not_equal(h.last_errno, 0);
    /* It keeps trying (every 200 ms), and keeps counting. */
    sleep_ms(500);
    sl_audit_health(a, &h);
    assert_true(h.write_failures >= 2);
    assert_int_equal(h.dropped, 0);
    sl_audit_close(a);
}

static void drops_and_counts_beyond_its_cap_while_failing(void **state)
{
    struct sl_audit_health h;
    struct sl_audit *a = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sl_audit_open("/dev/full", 4096, &a, err, sizeof(err)), 0);
    for (unsigned i = 0; i < 10; i++) {
        write_numbered(a, i);
    }
    assert_true(wait_health(a, false));
    for (unsigned i = 0; i < 200; i++) {
        write_numbered(a, i);
    }
    sl_audit_health(a, &h);
    assert_true(h.dropped > 0);
    assert_true(h.pending_bytes <= 4096);
    sl_audit_close(a);
}

/* A refusal's line, `n` in its path. */
static void write_refusal(struct sl_audit *a, unsigned n)
{
    char path[64];
    struct sl_audit_record r;

    (void)snprintf(path, sizeof(path), "/refused/%u", n);
    memset(&r, 0, sizeof(r));
    r.method = "GET";
    r.scheme = "http";
    r.host = "denied.example";
    r.port = 80;
    r.path = path;
    r.reason = SL_REASON_HOST_NOT_ALLOWED;
    r.status = 403;
    sl_audit_write(a, &r);
}

/* A log that takes nothing and a flood of refusals: from 3/4 of the cap less a line on, the
 * writer says it is congested and drops refusals' lines, while the lines of allowed requests
 * still fill the last quarter. */
static void keeps_the_last_quarter_for_allowed_requests(void **state)
{
    struct sl_audit_health h;
    struct sl_audit *a = NULL;
    char err[256];
    uint64_t dropped;
    size_t before;

    (void)state;
    assert_int_equal(sl_audit_open("/dev/full", 64 * 1024, &a, err, sizeof(err)), 0);
    assert_false(sl_audit_congested(a));
    for (unsigned i = 0; i < 2000; i++) {
        write_refusal(a, i);
    }
    sl_audit_health(a, &h);
    assert_true(sl_audit_congested(a));
    assert_true(h.dropped > 0);
    assert_true(h.pending_bytes <= 48 * 1024);
    assert_true(h.pending_bytes + 16384 > 48 * 1024);
    dropped = h.dropped;
    before = h.pending_bytes;
    for (unsigned i = 0; i < 10; i++) {
        write_numbered(a, i);
    }
    sl_audit_health(a, &h);
    assert_int_equal(h.dropped, dropped);
    assert_true(h.pending_bytes > before);
    assert_true(h.pending_bytes > 48 * 1024);
    write_refusal(a, 9999);
    sl_audit_health(a, &h);
    assert_int_equal(h.dropped, dropped + 1);
    sl_audit_close(a);
}

static void never_leaves_a_torn_line_and_writes_everything_once_room_returns(void **state)
{
    enum {
        LINES = 400
    };

    unsigned seen[LINES];
    struct rlimit old;
    struct rlimit small;
    struct sl_audit_health h;
    struct sl_audit *a = NULL;
    char dir[256];
    char path[300];
    char err[256];
    long before;

    (void)state;
    memset(seen, 0, sizeof(seen));
    assert_int_equal(sl_test_tmpdir(dir, sizeof(dir), "sluice-auditw"), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "audit.log"), 0);
    assert_int_equal(sl_audit_open(path, 0, &a, err, sizeof(err)), 0);
    for (unsigned i = 0; i < 20; i++) {
        write_numbered(a, i);
    }
    for (int i = 0; i < 500 && file_size(path) <= 0; i++) {
        sleep_ms(10);
    }
    sleep_ms(100);
    before = file_size(path);
    assert_true(before > 0);
    /* From here on the file may grow by 1000 bytes only: the next batch stops in the middle of
     * a line, as on a disk that fills up (SIGXFSZ ignored: write(2) returns short, then
     * EFBIG). */
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    (void)signal(SIGXFSZ, SIG_IGN);
    small = old;
    small.rlim_cur = (rlim_t)before + 1000;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    for (unsigned i = 20; i < LINES; i++) {
        write_numbered(a, i);
    }
    assert_true(wait_health(a, false));
    sl_audit_health(a, &h);
    assert_true(h.write_failures >= 1);
    /* What the file holds now ends with a whole line: the part of a line was cut off again. */
    assert_true(count_lines(path, seen, LINES) >= 20);
    assert_true(file_size(path) <= (long)small.rlim_cur);
    memset(seen, 0, sizeof(seen));
    /* Room again: the held lines go out, and health comes back. */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_true(wait_health(a, true));
    sl_audit_close(a);
    (void)signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(count_lines(path, seen, LINES), LINES);
    for (unsigned i = 0; i < LINES; i++) {
        assert_int_equal(seen[i], 1);
    }
    assert_int_equal(sl_test_rmtree(dir), 0);
}

static void reopens_between_lines_after_a_rotation(void **state)
{
    enum {
        LINES = 3000
    };

    unsigned seen[LINES];
    struct sl_audit_health h;
    struct sl_audit *a = NULL;
    char dir[256];
    char path[300];
    char moved[300];
    char err[256];
    unsigned n_old;
    unsigned n_new;

    (void)state;
    memset(seen, 0, sizeof(seen));
    assert_int_equal(sl_test_tmpdir(dir, sizeof(dir), "sluice-auditr"), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "audit.log"), 0);
    assert_int_equal(sl_test_join(moved, sizeof(moved), dir, "audit.log.1"), 0);
    assert_int_equal(sl_audit_open(path, 0, &a, err, sizeof(err)), 0);
    for (unsigned i = 0; i < LINES; i++) {
        write_numbered(a, i);
        /* The rotation happens while lines keep coming. */
        if (i == LINES / 2) {
            assert_int_equal(rename(path, moved), 0);
            sl_audit_reopen(a);
        }
        if (i % 100 == 0) {
            sleep_ms(2);
        }
    }
    sleep_ms(100);
    sl_audit_health(a, &h);
    assert_int_equal(h.reopens, 1);
    assert_true(h.healthy);
    sl_audit_close(a);
    n_old = count_lines(moved, seen, LINES);
    n_new = count_lines(path, seen, LINES);
    assert_int_equal(n_old + n_new, LINES);
    assert_true(n_old > 0);
    assert_true(n_new > 0);
    for (unsigned i = 0; i < LINES; i++) {
        assert_int_equal(seen[i], 1);
    }
    /* The new file was created 0600. */
    {
        struct stat st;

        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
    }
    assert_int_equal(sl_test_rmtree(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(holds_lines_the_disk_refuses_and_counts_them),
        cmocka_unit_test(drops_and_counts_beyond_its_cap_while_failing),
        cmocka_unit_test(keeps_the_last_quarter_for_allowed_requests),
        cmocka_unit_test(never_leaves_a_torn_line_and_writes_everything_once_room_returns),
        cmocka_unit_test(reopens_between_lines_after_a_rotation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
