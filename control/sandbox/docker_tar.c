/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_tar.c - the tar archives of the Docker backend (libarchive), built and
 * read in memory: the directories and files a create or a write_file copies into a container,
 * and the one file a read_file gets back. See docker_int.h.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <time.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/docker_int.h"

/* A tar carrying the files of one create or one write_file. */
#define TAR_MAX (1024u * 1024u * 1024u)

static la_ssize_t on_tar_write(struct archive *a, void *arg, const void *p, size_t n)
{
    if (sl_buf_append(arg, p, n) < 0) {
        archive_set_error(a, ENOMEM, "tar over its cap or out of memory");
        return -1;
    }
    return (la_ssize_t)n;
}

/* Adds one entry: a directory (data NULL) or a regular file, owner root, relative name. */
static int tar_add(struct archive *a, const char *name, unsigned mode, const void *data, size_t len)
{
    struct archive_entry *e = archive_entry_new();
    const uint8_t *p = data;
    int rc = 0;

    if (e == NULL) {
        return SL_ENOMEM;
    }
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, data != NULL ? AE_IFREG : AE_IFDIR);
    archive_entry_set_perm(e, (mode_t)(mode & 07777));
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_size(e, data != NULL ? (la_int64_t)len : 0);
    archive_entry_set_mtime(e, time(NULL), 0);
    if (archive_write_header(a, e) != ARCHIVE_OK) {
        rc = SL_EIO;
    }
    while (rc == 0 && data != NULL && len > 0) {
        la_ssize_t k = archive_write_data(a, p, len);

        if (k <= 0) {
            rc = SL_EIO;
            break;
        }
        p += k;
        len -= (size_t)k;
    }
    archive_entry_free(e);
    return rc;
}

/* Builds a tar of `items` into a new sl_malloc'd buffer (*out, *len). */
int sl__docker_tar_build(const struct sl__docker_tar_item *items, size_t n, char **out, size_t *len)
{
    struct archive *a = archive_write_new();
    struct sl_buf b;
    int rc = 0;
    bool full;

    sl_buf_init(&b, TAR_MAX);
    if (a == NULL) {
        return SL_ENOMEM;
    }
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK
        || archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK
        || archive_write_open(a, &b, NULL, on_tar_write, NULL) != ARCHIVE_OK) {
        rc = SL_EIO;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = tar_add(a, items[i].name, items[i].mode, items[i].data, items[i].len);
    }
    if (archive_write_close(a) != ARCHIVE_OK && rc == 0) {
        rc = SL_EIO;
    }
    (void)archive_write_free(a);
    if (rc < 0) {
        full = b.len + 64u * 1024u > TAR_MAX;
        sl_buf_finish(&b);
        return full ? SL_ETOOBIG : rc;
    }
    *len = b.len;
    *out = (char *)b.p;
    return 0;
}

/*
 * Takes the single regular file out of the tar in o->resp into o->data. A tar holding anything
 * else is an error: the daemon is trusted only as far as its bytes check out.
 */
int sl__docker_tar_extract_one(struct sl__docker_op *o)
{
    struct archive *a = archive_read_new();
    struct archive_entry *e = NULL;
    int64_t size;
    size_t got = 0;

    if (a == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        return o->rc;
    }
    if (archive_read_support_format_tar(a) != ARCHIVE_OK
        || archive_read_open_memory(a, o->resp.p, o->resp.len) != ARCHIVE_OK
        || archive_read_next_header(a, &e) != ARCHIVE_OK) {
        sl__docker_set_err(o, SL_EIO, "docker: read %s: the archive is not a readable tar",
                           o->path);
        goto out;
    }
    if (archive_entry_filetype(e) != AE_IFREG) {
        sl__docker_set_err(o, SL_ENOTFILE, "docker: read %s: not a regular file", o->path);
        goto out;
    }
    size = archive_entry_size(e);
    if (size < 0 || (uint64_t)size > o->max) {
        o->size = size < 0 ? 0 : (uint64_t)size;
        sl__docker_set_err(o, SL_ETOOBIG, "docker: read %s: %lld bytes, over the cap of %zu",
                           o->path, (long long)size, o->max);
        goto out;
    }
    o->data = sl_malloc((size_t)size + 1);
    if (o->data == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: read %s: out of memory", o->path);
        goto out;
    }
    while (got < (size_t)size) {
        la_ssize_t k = archive_read_data(a, o->data + got, (size_t)size - got);

        if (k <= 0) {
            break;
        }
        got += (size_t)k;
    }
    if (got != (size_t)size || archive_read_next_header(a, &e) != ARCHIVE_EOF) {
        sl__docker_set_err(o, SL_EIO, "docker: read %s: the archive is not one complete file",
                           o->path);
        goto out;
    }
    o->data[got] = 0;
    o->data_len = got;
out:
    (void)archive_read_free(a);
    return o->rc;
}
