/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/cmd/test_backup.c - cmd/backup (docs/reference/cli.md §1.9): a backup taken while
 * another connection keeps committing is one consistent state of the database and restores into
 * an empty directory with the files' modes; a non-empty directory, a file that is not a backup
 * and a backup with a name of its own (`../x`) are refused; an existing output is never
 * overwritten.
 */
#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "base/mem.h"
#include "certs/ca.h"
#include "cmd/cmd.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "tests/support/tmpdir.h"

struct world {
    char dir[256];
    char data[300];
    char db[320];
    char out[320];
    char restored[320];
};

static int setup(void **state)
{
    struct world *w = sl_calloc(1, sizeof(*w));
    struct sl_ca *ca = NULL;
    char err[256];
    char key[340];

    if (w == NULL || sl_test_tmpdir(w->dir, sizeof(w->dir), "sluice-backup") < 0
        || sl_test_join(w->data, sizeof(w->data), w->dir, "data") < 0
        || sl_test_join(w->db, sizeof(w->db), w->data, "sluice.db") < 0
        || sl_test_join(w->out, sizeof(w->out), w->dir, "b.tar") < 0
        || sl_test_join(w->restored, sizeof(w->restored), w->dir, "restored") < 0
        || sl_test_join(key, sizeof(key), w->data, SL_SECRETS_KEY_FILE) < 0) {
        return -1;
    }
    if (sl_ca_create(&ca, err, sizeof(err)) < 0
        || sl_ca_write(ca, w->data, false, err, sizeof(err)) < 0
        || sl_secrets_generate_key_file(key, err, sizeof(err)) < 0) {
        sl_ca_destroy(ca);
        return -1;
    }
    sl_ca_destroy(ca);
    (void)unsetenv(SL_SECRETS_KEY_ENV);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;

    int rc = sl_test_rmtree(w->dir);

    sl_free(w);
    return rc;
}

static int run2(int (*fn)(int, char **), const char *a, const char *b, const char *c, const char *d)
{
    char *argv[] = { (char *)(uintptr_t) "cmd", (char *)(uintptr_t)a, (char *)(uintptr_t)b,
                     (char *)(uintptr_t)c,      (char *)(uintptr_t)d, NULL };

    return fn(5, argv);
}

/* A second connection that commits users until told to stop. */
struct writer {
    const char *db;
    volatile bool stop;
    volatile int made;
};

static void *write_users(void *arg)
{
    struct writer *wr = arg;
    struct sl_store *st = NULL;
    char err[256];

    if (sl_store_open(wr->db, &st, err, sizeof(err)) < 0) {
        return NULL;
    }
    while (!wr->stop && wr->made < 5000) {
        struct sl_user u;
        char name[32];

        memset(&u, 0, sizeof(u));
        (void)snprintf(name, sizeof(name), "u%d", wr->made);
        if (sl_store_user_create(st, name, false, NULL, &u) == 0) {
            wr->made++;
        }
        sl_user_finish(&u);
    }
    sl_store_close(st);
    return NULL;
}

static size_t count_users(const char *db)
{
    struct sl_store *st = NULL;
    struct sl_user *users = NULL;
    size_t n = 0;
    char err[256];

    assert_int_equal(sl_store_open(db, &st, err, sizeof(err)), 0);
    assert_int_equal(sl_store_user_list(st, &users, &n), 0);
    sl_store_free_users(users, n);
    sl_store_close(st);
    return n;
}

static mode_t mode_of(const char *dir, const char *name)
{
    char path[400];
    struct stat st;

    assert_int_equal(sl_test_join(path, sizeof(path), dir, name), 0);
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 0777;
}

static void backs_up_a_live_database_and_restores_it(void **state)
{
    struct world *w = *state;
    struct writer wr = { w->db, false, 0 };
    struct sl_store *st = NULL;
    char restored_db[400];
    char err[256];
    pthread_t t;
    size_t n;

    assert_int_equal(sl_store_open(w->db, &st, err, sizeof(err)), 0);
    sl_store_close(st);
    assert_int_equal(pthread_create(&t, NULL, write_users, &wr), 0);
    while (wr.made < 50) {
        sched_yield();
    }
    assert_int_equal(run2(sl_cmd_backup, "--data", w->data, "--out", w->out), SL_CMD_OK);
    wr.stop = true;
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(mode_of(w->dir, "b.tar"), 0600);
    /* Never over an existing file. */
    assert_int_equal(run2(sl_cmd_backup, "--data", w->data, "--out", w->out), SL_CMD_FAIL);

    assert_int_equal(run2(sl_cmd_restore, "--from", w->out, "--data", w->restored), SL_CMD_OK);
    assert_int_equal(sl_test_join(restored_db, sizeof(restored_db), w->restored, "sluice.db"), 0);
    /* One state of the database: some of the users the writer made, every one whole. */
    n = count_users(restored_db);
    assert_true(n >= 50);
    assert_true(n <= (size_t)wr.made);
    assert_int_equal(mode_of(w->restored, "sluice.db"), 0600);
    assert_int_equal(mode_of(w->restored, "ca.key"), 0600);
    assert_int_equal(mode_of(w->restored, "ca.pem"), 0644);
    assert_int_equal(mode_of(w->restored, SL_SECRETS_KEY_FILE), 0600);
    /* A directory with something in it is refused. */
    assert_int_equal(run2(sl_cmd_restore, "--from", w->out, "--data", w->restored), SL_CMD_FAIL);
}

/* Writes a tar at `path` holding `name` (a few bytes). */
static void write_tar(const char *path, const char *name)
{
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();

    assert_non_null(a);
    assert_non_null(e);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, 2);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, "x\n", 2), 2);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_entry_free(e);
    archive_write_free(a);
}

static void refuses_what_is_not_a_backup(void **state)
{
    struct world *w = *state;
    char bad[400];
    char evil[400];
    char escaped[400];
    struct stat st;

    assert_int_equal(sl_test_join(bad, sizeof(bad), w->dir, "bad.tar"), 0);
    assert_int_equal(sl_test_join(evil, sizeof(evil), w->dir, "evil"), 0);
    assert_int_equal(sl_test_join(escaped, sizeof(escaped), w->dir, "x"), 0);
    /* A name of its own, climbing out of the directory. */
    write_tar(bad, "../x");
    assert_int_equal(run2(sl_cmd_restore, "--from", bad, "--data", evil), SL_CMD_FAIL);
    assert_int_equal(stat(escaped, &st), -1);
    /* Our names but no database and no manifest. */
    write_tar(bad, "ca.pem");
    assert_int_equal(sl_test_rmtree(evil), 0);
    assert_int_equal(run2(sl_cmd_restore, "--from", bad, "--data", evil), SL_CMD_FAIL);
    /* Not a tar at all. */
    assert_int_equal(run2(sl_cmd_restore, "--from", w->db, "--data", w->restored), SL_CMD_FAIL);
    /* A backup of a directory without a database. */
    assert_int_equal(run2(sl_cmd_backup, "--data", w->dir, "--out", bad), SL_CMD_FAIL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(backs_up_a_live_database_and_restores_it, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_what_is_not_a_backup, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
