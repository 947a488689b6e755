/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/backup.c - `sluice backup` and `sluice restore` (docs/reference/cli.md §1.9, docs/install.md
 * "Backup and restore").
 *
 * A backup is one tar file (POSIX pax, mode 0600) holding MANIFEST (what is in it, and whether
 * the encryption key is), sluice.db (a consistent copy made with SQLite's online backup API while
 * the control plane may be writing: it never stops for it), ca.pem, ca.key, admin.token when
 * present, and encryption.key when that file is the key in use (SLUICE_ENCRYPTION_KEY unset).
 * A restore unpacks it into an empty data directory (only those names, regular files, with
 * their modes), opens the database as the control plane would (an older schema is migrated, a
 * newer one refused) and tries every sealed value under the key it will be used with: values
 * that do not open are named, environment by environment (the key-change path of
 * docs/reference/api.md §5.1).
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>

#include "base/buf.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mem.h"
#include "certs/ca.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"
#include "control/env/environment.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"

#define PATH_BYTES 4096
#define ERR_BYTES  512
#define MANIFEST   "MANIFEST"
#define DB_FILE    "sluice.db"
#define TOKEN_FILE "admin.token"
/* Waits between the online backup's steps while a writer holds the database. */
#define BUSY_SLEEP_US 20000
/* A manifest is small; anything larger in a backup is not ours. */
#define MANIFEST_MAX (64u << 10)

static const char backup_usage[] =
        "usage: sluice backup [--data DIR] --out FILE\n"
        "\n"
        "Writes a backup of the data directory DIR (default: $SLUICE_DATA, or ./var) to FILE, a\n"
        "tar file (mode 0600; refused when FILE exists): a consistent copy of sluice.db made\n"
        "with SQLite's online backup API (the control plane may keep running), ca.pem, ca.key,\n"
        "admin.token, and encryption.key when that file holds the key in use. When\n"
        "SLUICE_ENCRYPTION_KEY is set the key is NOT in the backup: keep it elsewhere, or the\n"
        "sealed secrets cannot be opened after a restore. The audit log is not included.\n";

static const char restore_usage[] =
        "usage: sluice restore --from FILE [--data DIR]\n"
        "\n"
        "Unpacks a backup made by `sluice backup` into the data directory DIR (default:\n"
        "$SLUICE_DATA, or ./var), which must be empty or missing. The database is opened and\n"
        "upgraded as the control plane would, and every sealed secret is tried under the\n"
        "encryption key (SLUICE_ENCRYPTION_KEY, else the restored encryption.key): those that\n"
        "do not open are named (give them anew through the API).\n";

/* The files a backup may hold besides the database and the manifest, with their modes. */
static const struct {
    const char *name;
    mode_t mode;
} plain_files[] = {
    { SL_CA_CERT_FILE, 0644 },
    { SL_CA_KEY_FILE, 0600 },
    { SL_SECRETS_KEY_FILE, 0600 },
    { TOKEN_FILE, 0600 },
};

static int join(char *out, size_t cap, const char *dir, const char *name)
{
    if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap) {
        sl_eprintf("the path %s/%s is too long", dir, name);
        return SL_EINVAL;
    }
    return 0;
}

/* ---- backup -------------------------------------------------------------------------------- */

/* Copies the live database `src_path` into the new file `dst_path` page by page (SQLite's online
 * backup: a writer that commits meanwhile makes the copy start over, so what comes out is one
 * consistent state). Returns 0 and the copy's schema version, or SL_EIO after saying why. */
static int copy_db(const char *src_path, const char *dst_path, int *version)
{
    sqlite3 *src = NULL;
    sqlite3 *dst = NULL;
    sqlite3_backup *b = NULL;
    sqlite3_stmt *s = NULL;
    int rc;

    rc = sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        sl_eprintf("backup: cannot open %s: %s", src_path, sqlite3_errstr(rc));
        goto fail;
    }
    (void)sqlite3_busy_timeout(src, 5000);
    rc = sqlite3_open_v2(dst_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        sl_eprintf("backup: cannot create %s: %s", dst_path, sqlite3_errstr(rc));
        goto fail;
    }
    b = sqlite3_backup_init(dst, "main", src, "main");
    if (b == NULL) {
        sl_eprintf("backup: cannot start the copy of %s: %s", src_path, sqlite3_errmsg(dst));
        goto fail;
    }
    do {
        rc = sqlite3_backup_step(b, 256);
        if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
            struct timespec ts = { 0, BUSY_SLEEP_US * 1000L };

            (void)nanosleep(&ts, NULL);
        }
    } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
    (void)sqlite3_backup_finish(b);
    b = NULL;
    if (rc != SQLITE_DONE) {
        sl_eprintf("backup: copying %s failed: %s", src_path, sqlite3_errstr(rc));
        goto fail;
    }
    /* The copy is one file: no WAL beside it. */
    rc = sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v2(dst, "SELECT version FROM schema_version", -1, &s, NULL);
    }
    if (rc != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
        sl_eprintf("backup: %s is not a sluice database (no schema version)", src_path);
        goto fail;
    }
    *version = sqlite3_column_int(s, 0);
    (void)sqlite3_finalize(s);
    (void)sqlite3_close(dst);
    (void)sqlite3_close(src);
    return 0;
fail:
    (void)sqlite3_finalize(s);
    (void)sqlite3_close(dst);
    (void)sqlite3_close(src);
    return SL_EIO;
}

/* Adds `size` bytes of `p` as the regular file `name` (mode `mode`). */
static int add_bytes(struct archive *a, const char *name, mode_t mode, const void *p, size_t size)
{
    struct archive_entry *e = archive_entry_new();
    int rc = SL_EIO;

    if (e == NULL) {
        return SL_ENOMEM;
    }
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, mode);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, time(NULL), 0);
    if (archive_write_header(a, e) == ARCHIVE_OK
        && (size == 0 || archive_write_data(a, p, size) == (la_ssize_t)size)
        && archive_write_finish_entry(a) == ARCHIVE_OK) {
        rc = 0;
    } else {
        sl_eprintf("backup: cannot write %s into the backup: %s", name, archive_error_string(a));
    }
    archive_entry_free(e);
    return rc;
}

/* Adds the file `path` as `name`. A missing file is SL_ENOTFOUND (said nothing). */
static int add_file(struct archive *a, const char *path, const char *name, mode_t mode)
{
    struct sl_buf b;
    char err[ERR_BYTES] = "";
    int rc;

    sl_buf_init(&b, (size_t)1 << 40);
    rc = sl_file_read(path, &b, err, sizeof(err));
    if (rc == 0) {
        rc = add_bytes(a, name, mode, b.p, b.len);
    } else if (rc != SL_ENOTFOUND) {
        sl_eprintf("backup: %s", err);
    }
    if (b.p != NULL) {
        sodium_memzero(b.p, b.len);
    }
    sl_buf_finish(&b);
    return rc;
}

struct backup {
    const char *data;
    const char *out;
    char db[PATH_BYTES];
    char tmp_db[PATH_BYTES];
    char tmp_out[PATH_BYTES];
    int version;
    bool key_in_env;
    bool key_included;
    bool token_included;
};

static int write_archive(struct backup *bk)
{
    struct archive *a = archive_write_new();
    struct sl_buf manifest;
    char path[PATH_BYTES];
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    int rc = 0;

    if (a == NULL) {
        return SL_ENOMEM;
    }
    sl_buf_init(&manifest, MANIFEST_MAX);
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK
        || archive_write_open_filename(a, bk->tmp_out) != ARCHIVE_OK) {
        sl_eprintf("backup: cannot write %s: %s", bk->tmp_out, archive_error_string(a));
        archive_write_free(a);
        sl_buf_finish(&manifest);
        return SL_EIO;
    }
    rc = add_file(a, bk->tmp_db, DB_FILE, 0600);
    for (size_t i = 0; rc == 0 && i < SL_ARRAY_LEN(plain_files); i++) {
        const char *name = plain_files[i].name;
        bool is_key = strcmp(name, SL_SECRETS_KEY_FILE) == 0;

        /* With the key in the environment, a key file lying around is not the key in use. */
        if (is_key && bk->key_in_env) {
            continue;
        }
        rc = join(path, sizeof(path), bk->data, name);
        if (rc == 0) {
            rc = add_file(a, path, name, plain_files[i].mode);
        }
        if (rc == SL_ENOTFOUND && strcmp(name, SL_CA_CERT_FILE) != 0
            && strcmp(name, SL_CA_KEY_FILE) != 0) {
            rc = 0;
        } else if (rc == SL_ENOTFOUND) {
            sl_eprintf("backup: %s is missing", path);
        } else if (rc == 0 && is_key) {
            bk->key_included = true;
        } else if (rc == 0 && strcmp(name, TOKEN_FILE) == 0) {
            bk->token_included = true;
        }
    }
    gmtime_r(&now, &tm);
    (void)strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (rc == 0
        && sl_buf_printf(&manifest,
                         "sluice backup\n"
                         "sluice_version %s\n"
                         "created %s\n"
                         "schema_version %d\n"
                         "files %s ca.pem ca.key%s%s\n"
                         "encryption_key %s\n",
                         SLUICE_VERSION, when, bk->version, DB_FILE,
                         bk->token_included ? " " TOKEN_FILE : "",
                         bk->key_included ? " " SL_SECRETS_KEY_FILE : "",
                         bk->key_included ? "included (encryption.key): this file opens every "
                                            "secret of the install"
                                          : "NOT included (SLUICE_ENCRYPTION_KEY is set): restore "
                                            "needs the same key")
                   < 0) {
        rc = SL_ENOMEM;
    }
    if (rc == 0) {
        rc = add_bytes(a, MANIFEST, 0644, manifest.p, manifest.len);
    }
    if (archive_write_close(a) != ARCHIVE_OK && rc == 0) {
        sl_eprintf("backup: cannot finish %s: %s", bk->tmp_out, archive_error_string(a));
        rc = SL_EIO;
    }
    archive_write_free(a);
    sl_buf_finish(&manifest);
    return rc;
}

static int run_backup(struct backup *bk)
{
    struct stat st;
    int fd;
    int rc;

    if (lstat(bk->out, &st) == 0) {
        sl_eprintf("backup: %s exists already; not overwritten", bk->out);
        return SL_CMD_FAIL;
    }
    if (join(bk->db, sizeof(bk->db), bk->data, DB_FILE) < 0
        || snprintf(bk->tmp_db, sizeof(bk->tmp_db), "%s.db-XXXXXX", bk->out)
                   >= (int)sizeof(bk->tmp_db)
        || snprintf(bk->tmp_out, sizeof(bk->tmp_out), "%s.tmp-XXXXXX", bk->out)
                   >= (int)sizeof(bk->tmp_out)) {
        sl_eprintf("backup: the path %s is too long", bk->out);
        return SL_CMD_FAIL;
    }
    if (stat(bk->db, &st) != 0) {
        sl_eprintf("backup: %s: %s", bk->db, strerror(errno));
        return SL_CMD_FAIL;
    }
    /* Both temporaries are made 0600 before anything is written into them. */
    fd = mkstemp(bk->tmp_db);
    if (fd == -1) {
        sl_eprintf("backup: cannot create a file beside %s: %s", bk->out, strerror(errno));
        return SL_CMD_FAIL;
    }
    (void)close(fd);
    fd = mkstemp(bk->tmp_out);
    if (fd == -1) {
        sl_eprintf("backup: cannot create a file beside %s: %s", bk->out, strerror(errno));
        (void)unlink(bk->tmp_db);
        return SL_CMD_FAIL;
    }
    (void)close(fd);
    bk->key_in_env = getenv(SL_SECRETS_KEY_ENV) != NULL;
    rc = copy_db(bk->db, bk->tmp_db, &bk->version);
    if (rc == 0) {
        rc = write_archive(bk);
    }
    (void)unlink(bk->tmp_db);
    if (rc == 0 && rename(bk->tmp_out, bk->out) != 0) {
        sl_eprintf("backup: cannot rename %s to %s: %s", bk->tmp_out, bk->out, strerror(errno));
        rc = SL_EIO;
    }
    if (rc < 0) {
        (void)unlink(bk->tmp_out);
        return SL_CMD_FAIL;
    }
    printf("wrote %s (mode 0600): sluice.db (schema version %d, a consistent copy), ca.pem, "
           "ca.key%s%s\n",
           bk->out, bk->version, bk->token_included ? ", admin.token" : "",
           bk->key_included ? ", encryption.key" : "");
    if (bk->key_included) {
        sl_eprintf("WARNING: %s holds the encryption key (encryption.key): anyone who has the "
                   "backup can open every secret of this install. Keep it as you keep the key.",
                   bk->out);
    } else {
        sl_eprintf("WARNING: the encryption key is NOT in %s: %s is set, so the key lives outside "
                   "the data directory. Without that same key the restored secrets cannot be "
                   "opened: keep it with the backup's records.",
                   bk->out, SL_SECRETS_KEY_ENV);
    }
    return SL_CMD_OK;
}

int sl_cmd_backup(int argc, char **argv)
{
    struct backup bk;
    const char *data = NULL;
    const char *pos[1];
    size_t n_pos = 0;
    const struct sl_opt opts[] = {
        { "--data", SL_OPT_VALUE, NULL, &data, NULL, NULL, 0 },
        { "--out", SL_OPT_VALUE, NULL, &bk.out, NULL, NULL, 0 },
    };
    int rc;

    memset(&bk, 0, sizeof(bk));
    if (!sl_opts_parse_or_usage("backup", backup_usage, argc, argv, opts, SL_ARRAY_LEN(opts), pos,
                                0, &n_pos, &rc)) {
        return rc;
    }
    if (bk.out == NULL) {
        sl_eprintf("backup: missing --out FILE (see sluice backup --help)");
        return SL_CMD_USAGE;
    }
    bk.data = sl_opts_data_dir(data);
    return run_backup(&bk);
}

/* ---- restore ------------------------------------------------------------------------------- */

/* Whether `dir` has no entries but . and .. (a missing one counts as empty: it is made). */
static int dir_is_empty(const char *dir, bool *empty)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    *empty = true;
    if (d == NULL) {
        return errno == ENOENT ? 0 : -errno;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            *empty = false;
            break;
        }
    }
    (void)closedir(d);
    return 0;
}

/* The mode a backup's entry `name` is restored with, or -1 when the name is not one of ours. */
static int mode_of(const char *name)
{
    if (strcmp(name, DB_FILE) == 0) {
        return 0600;
    }
    if (strcmp(name, MANIFEST) == 0) {
        return 0;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(plain_files); i++) {
        if (strcmp(name, plain_files[i].name) == 0) {
            return (int)plain_files[i].mode;
        }
    }
    return -1;
}

static int extract_entry(struct archive *a, const char *dir, const char *name, mode_t mode)
{
    char path[PATH_BYTES];
    char chunk[65536];
    int fd;
    int rc = 0;

    SL_TRY(join(path, sizeof(path), dir, name));
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd == -1) {
        sl_eprintf("restore: cannot create %s: %s", path, strerror(errno));
        return SL_EIO;
    }
    for (;;) {
        la_ssize_t n = archive_read_data(a, chunk, sizeof(chunk));

        if (n == 0) {
            break;
        }
        if (n < 0 || write(fd, chunk, (size_t)n) != (ssize_t)n) {
            sl_eprintf("restore: cannot unpack %s: %s", name,
                       n < 0 ? archive_error_string(a) : strerror(errno));
            rc = SL_EIO;
            break;
        }
    }
    sodium_memzero(chunk, sizeof(chunk));
    if (fsync(fd) != 0 && rc == 0) {
        sl_eprintf("restore: cannot write %s: %s", path, strerror(errno));
        rc = SL_EIO;
    }
    (void)close(fd);
    return rc;
}

/* Unpacks the backup `from` into `dir`; `manifest` gets the manifest's text. */
static int unpack(const char *from, const char *dir, char *manifest, size_t cap)
{
    struct archive *a = archive_read_new();
    struct archive_entry *e;
    bool have_db = false;
    int rc = 0;

    if (a == NULL) {
        return SL_ENOMEM;
    }
    manifest[0] = '\0';
    (void)archive_read_support_format_tar(a);
    if (archive_read_open_filename(a, from, 65536) != ARCHIVE_OK) {
        sl_eprintf("restore: cannot read %s: %s", from, archive_error_string(a));
        archive_read_free(a);
        return SL_EIO;
    }
    while (rc == 0) {
        int r = archive_read_next_header(a, &e);
        const char *name;
        int mode;

        if (r == ARCHIVE_EOF) {
            break;
        }
        if (r != ARCHIVE_OK) {
            sl_eprintf("restore: %s is not a sluice backup: %s", from, archive_error_string(a));
            rc = SL_EIO;
            break;
        }
        name = archive_entry_pathname(e);
        mode = name != NULL ? mode_of(name) : -1;
        if (mode < 0 || archive_entry_filetype(e) != AE_IFREG) {
            sl_eprintf("restore: %s is not a sluice backup: it holds '%s'", from,
                       name != NULL ? name : "?");
            rc = SL_EINVAL;
            break;
        }
        if (mode == 0) {
            la_ssize_t n = archive_read_data(a, manifest, cap - 1);

            manifest[n > 0 ? n : 0] = '\0';
            continue;
        }
        have_db = have_db || strcmp(name, DB_FILE) == 0;
        rc = extract_entry(a, dir, name, (mode_t)mode);
    }
    archive_read_free(a);
    if (rc == 0 && (!have_db || strncmp(manifest, "sluice backup\n", 14) != 0)) {
        sl_eprintf("restore: %s is not a sluice backup (no %s)", from,
                   have_db ? MANIFEST : DB_FILE);
        rc = SL_EINVAL;
    }
    return rc;
}

static int open_value(void *arg, const char *sealed, size_t n, struct sl_buf *out)
{
    return sl_secrets_open(arg, sealed, n, out);
}

static int seal_value(void *arg, const void *p, size_t n, struct sl_buf *out)
{
    return sl_secrets_seal(arg, p, n, out);
}

/* Tries every sealed value under the key; names what does not open. Returns how many do not. */
static size_t report_undecryptable(struct sl_store *st, struct sl_secrets *key)
{
    struct sl_env_sealer sealer = { seal_value, open_value, key };
    struct sl_env_row *envs = NULL;
    struct sl_store_client *clients = NULL;
    size_t n_envs = 0;
    size_t n_clients = 0;
    size_t bad = 0;

    if (sl_store_env_list_all(st, &envs, &n_envs) < 0) {
        sl_eprintf("restore: cannot read the environments back");
        return 1;
    }
    for (size_t i = 0; i < n_envs; i++) {
        json_t *doc = NULL;
        json_t *und;

        if (sl_env_render(&envs[i], NULL, &sealer, &doc) < 0) {
            printf("environment %s (%s): cannot be read back\n", envs[i].name, envs[i].id);
            bad++;
            continue;
        }
        und = json_object_get(doc, "undecryptable");
        if (json_is_array(und) && json_array_size(und) > 0) {
            printf("environment %s (%s): these values do not open under the encryption key "
                   "(give them anew):",
                   envs[i].name, envs[i].id);
            for (size_t k = 0; k < json_array_size(und); k++) {
                printf(" %s", json_string_value(json_array_get(und, k)));
            }
            printf("\n");
            bad += json_array_size(und);
        }
        json_decref(doc);
    }
    sl_store_free_envs(envs, n_envs);
    if (sl_store_client_list(st, &clients, &n_clients) == 0) {
        for (size_t i = 0; i < n_clients; i++) {
            struct sl_buf b;

            if (clients[i].token_sealed == NULL) {
                continue;
            }
            sl_buf_init(&b, 4096);
            if (sl_secrets_open(key, clients[i].token_sealed, strlen(clients[i].token_sealed), &b)
                < 0) {
                printf("static client %s: its token does not open under the encryption key "
                       "(delete and create it again)\n",
                       clients[i].id);
                bad++;
            }
            if (b.p != NULL) {
                sodium_memzero(b.p, b.len);
            }
            sl_buf_finish(&b);
        }
        sl_store_free_clients(clients, n_clients);
    }
    return bad;
}

static int run_restore(const char *from, const char *dir)
{
    char err[ERR_BYTES] = "";
    char manifest[MANIFEST_MAX];
    char db[PATH_BYTES];
    struct sl_store *st = NULL;
    struct sl_secrets *key = NULL;
    enum sl_secrets_source source = SL_SECRETS_SOURCE_ENV;
    bool empty = false;
    size_t bad;
    int rc;

    rc = dir_is_empty(dir, &empty);
    if (rc < 0 || !empty) {
        sl_eprintf("restore: %s %s: restore only into an empty (or missing) data directory", dir,
                   rc < 0 ? strerror(-rc) : "is not empty");
        return SL_CMD_FAIL;
    }
    if (sl_file_ensure_dir(dir, "the data directory", err, sizeof(err)) < 0) {
        sl_eprintf("restore: %s", err);
        return SL_CMD_FAIL;
    }
    if (unpack(from, dir, manifest, sizeof(manifest)) < 0) {
        sl_eprintf("restore: %s was left partly filled; empty it before trying again", dir);
        return SL_CMD_FAIL;
    }
    if (join(db, sizeof(db), dir, DB_FILE) < 0) {
        return SL_CMD_FAIL;
    }
    rc = sl_store_open(db, &st, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("restore: %s", err);
        return SL_CMD_FAIL;
    }
    printf("restored %s into %s\n", from, dir);
    rc = sl_secrets_load(dir, &key, &source, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("WARNING: restore: no usable encryption key (%s): the sealed secrets cannot "
                   "be checked, and the control plane will not start until the key is there",
                   err);
        sl_store_close(st);
        return SL_CMD_OK;
    }
    bad = report_undecryptable(st, key);
    sl_secrets_destroy(key);
    sl_store_close(st);
    if (bad > 0) {
        sl_eprintf("WARNING: restore: %zu sealed value%s do not open under the encryption key "
                   "from %s (another key than the backup's?): see the lines above",
                   bad, bad == 1 ? "" : "s",
                   source == SL_SECRETS_SOURCE_ENV ? SL_SECRETS_KEY_ENV : SL_SECRETS_KEY_FILE);
    } else {
        printf("every sealed secret opens under the encryption key\n");
    }
    return SL_CMD_OK;
}

int sl_cmd_restore(int argc, char **argv)
{
    const char *data = NULL;
    const char *from = NULL;
    const char *pos[1];
    size_t n_pos = 0;
    const struct sl_opt opts[] = {
        { "--data", SL_OPT_VALUE, NULL, &data, NULL, NULL, 0 },
        { "--from", SL_OPT_VALUE, NULL, &from, NULL, NULL, 0 },
    };
    int rc;

    if (!sl_opts_parse_or_usage("restore", restore_usage, argc, argv, opts, SL_ARRAY_LEN(opts), pos,
                                0, &n_pos, &rc)) {
        return rc;
    }
    if (from == NULL) {
        sl_eprintf("restore: missing --from FILE (see sluice restore --help)");
        return SL_CMD_USAGE;
    }
    return run_restore(from, sl_opts_data_dir(data));
}
