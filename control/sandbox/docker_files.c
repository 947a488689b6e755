/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_files.c - the Docker backend's operations on a container's files:
 * stat (the X-Docker-Container-Path-Stat header of a HEAD on the archive), read_file (stat,
 * then GET archive: one regular file in a tar) and write_file (stat, then PUT archive with one
 * entry), with a symbolic link followed by stat and read. See docker.h and docker_int.h.
 */
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/docker_int.h"

/* Slack for tar headers and padding around a file read through GET archive. */
#define TAR_SLACK (1024u * 1024u)

/* Go's os.FileMode type bits, as in the stat header's `mode`. */
#define GO_MODE_DIR     (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
#define GO_MODE_TYPE \
    ((1u << 31) | (1u << 27) | (1u << 26) | (1u << 25) | (1u << 24) | (1u << 21) | (1u << 19))

/* Decodes the stat header of the HEAD that just ended into o->is_dir/size/mode. */
static int decode_stat(struct sl__docker_op *o)
{
    uint8_t raw[SL__DOCKER_STAT_HDR_MAX];
    size_t n = 0;
    json_t *j;
    json_int_t size;
    json_int_t mode;

    if (!o->stat_seen || o->stat_over
        || sodium_base642bin(raw, sizeof(raw) - 1, o->stat_hdr, strlen(o->stat_hdr), NULL, &n, NULL,
                             sodium_base64_VARIANT_ORIGINAL)
                   != 0) {
        sl__docker_set_err(o, SL_EIO, "docker: stat %s: missing or malformed path stat header",
                           o->path);
        return o->rc;
    }
    j = json_loadb((const char *)raw, n, 0, NULL);
    size = json_integer_value(json_object_get(j, "size"));
    mode = json_integer_value(json_object_get(j, "mode"));
    if (!json_is_integer(json_object_get(j, "size")) || !json_is_integer(json_object_get(j, "mode"))
        || size < 0 || mode < 0 || mode > (json_int_t)UINT32_MAX) {
        json_decref(j);
        sl__docker_set_err(o, SL_EIO, "docker: stat %s: malformed path stat", o->path);
        return o->rc;
    }
    sl_free(o->link_target);
    o->link_target = NULL;
    if (json_is_string(json_object_get(j, "linkTarget"))
        && json_string_length(json_object_get(j, "linkTarget")) > 0) {
        o->link_target = sl_strdup(json_string_value(json_object_get(j, "linkTarget")));
        if (o->link_target == NULL) {
            json_decref(j);
            sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
            return o->rc;
        }
    }
    json_decref(j);
    o->mode = (uint32_t)mode;
    o->size = (uint64_t)size;
    o->is_dir = (o->mode & GO_MODE_DIR) != 0;
    return 0;
}

/* When the path just stat'ed is a symbolic link with a target, stats the target instead (the
 * daemon resolves the whole chain inside the container, so one hop normally suffices; at most
 * 8). Returns true when a new HEAD is under way (`done` runs again), false to go on with the
 * result as it is (not a link, a dangling one, too many hops, or the restart failed: o->rc). */
static int start_stat(struct sl__docker_op *o, void (*done)(struct sl__docker_op *o));

static bool follow_link(struct sl__docker_op *o, void (*done)(struct sl__docker_op *o))
{
    if (o->rc < 0 || (o->mode & GO_MODE_SYMLINK) == 0 || o->link_target == NULL || o->hops >= 8
        || !sl_launcher_path_ok(o->link_target)) {
        return false;
    }
    o->hops++;
    sl_free(o->path);
    o->path = o->link_target;
    o->link_target = NULL;
    return start_stat(o, done) == 0;
}

/* Starts `method` on the archive of `target` (a path in container o->id), as
 * sl__docker_start_request() does; a path that cannot be built sets o->rc/err. */
static int start_archive(struct sl__docker_op *o, const char *method, const char *target,
                         const void *body, size_t body_len, const char *ctype, size_t resp_max,
                         void (*done)(struct sl__docker_op *o))
{
    struct sl_buf path;
    int rc;

    sl_buf_init(&path, SL__DOCKER_URL_MAX);
    rc = sl_buf_printf(&path, "/containers/%s/archive?path=", o->id);
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, target);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
    } else {
        rc = sl__docker_start_request(o, method, sl_buf_cstr(&path), body, body_len, ctype,
                                      resp_max, done);
    }
    sl_buf_finish(&path);
    return rc;
}

/* Runs the HEAD; `done` gets the result. */
static int start_stat(struct sl__docker_op *o, void (*done)(struct sl__docker_op *o))
{
    return start_archive(o, "HEAD", o->path, NULL, 0, NULL, 4096, done);
}

/* The HEAD ended: 0 with the metadata decoded, or < 0 with o->rc/err. */
static int stat_result(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "stat", 200, 200) < 0) {
        if (o->rc == SL_ENOTFOUND) {
            sl__docker_set_err(o, SL_ENOTFOUND, "docker: no such path: %s", o->path);
        }
        return o->rc;
    }
    return decode_stat(o);
}

static void on_stat(struct sl__docker_op *o)
{
    if (stat_result(o) == 0 && follow_link(o, on_stat)) {
        return;
    }
    sl__docker_op_finish(o);
}

/* Common start of stat, read_file and write_file: validates and copies id and path. */
static bool take_id_path(struct sl__docker_op *o, const char *id, const char *path)
{
    if (!sl__docker_is_name(id)) {
        sl__docker_reject(o, "docker: invalid container id");
        return false;
    }
    if (!sl_launcher_path_ok(path)) {
        sl__docker_reject(o, "docker: the path must be absolute, without . or .. components");
        return false;
    }
    o->id = sl_strdup(id);
    o->path = sl_strdup(path);
    if (o->id == NULL || o->path == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        sl__docker_fail_soon(o);
        return false;
    }
    return true;
}

void sl__docker_stat(struct sl_launcher *l, const char *id, const char *path,
                     sl_launcher_stat_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_STAT,
                                                (union sl__docker_op_cb){ .stat = cb }, arg);

    if (o == NULL || o->rc < 0 || !take_id_path(o, id, path)) {
        return;
    }
    sl__docker_go(o, start_stat(o, on_stat));
}

static void on_read_data(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "read", 200, 200) == 0) {
        (void)sl__docker_tar_extract_one(o);
    } else if (o->rc == SL_ETOOBIG) {
        sl__docker_set_err(o, SL_ETOOBIG, "docker: read %s: it grew over the cap of %zu", o->path,
                           o->max);
    }
    sl__docker_op_finish(o);
}

static void on_read_stat(struct sl__docker_op *o)
{
    if (stat_result(o) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    if (follow_link(o, on_read_stat)) {
        return;
    }
    if (o->rc < 0) {
        sl__docker_op_finish(o);
        return;
    }
    if (o->is_dir) {
        sl__docker_set_err(o, SL_EISDIR, "docker: %s is a directory", o->path);
    } else if ((o->mode & GO_MODE_SYMLINK) != 0) {
        sl__docker_set_err(o, SL_ENOTFOUND, "docker: %s is a symbolic link to nothing", o->path);
    } else if ((o->mode & GO_MODE_TYPE) != 0) {
        sl__docker_set_err(o, SL_ENOTFILE, "docker: %s is not a regular file", o->path);
    } else if (o->size > o->max || o->size > SIZE_MAX - TAR_SLACK) {
        sl__docker_set_err(o, SL_ETOOBIG, "docker: %s is %llu bytes, over the cap of %zu", o->path,
                           (unsigned long long)o->size, o->max);
    }
    if (o->rc < 0) {
        sl__docker_op_finish(o);
        return;
    }
    if (start_archive(o, "GET", o->path, NULL, 0, NULL, (size_t)o->size + TAR_SLACK, on_read_data)
        < 0) {
        sl__docker_op_finish(o);
    }
}

void sl__docker_read_file(struct sl_launcher *l, const char *id, const char *path, size_t max,
                          sl_launcher_read_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_READ,
                                                (union sl__docker_op_cb){ .read = cb }, arg);

    if (o == NULL || o->rc < 0 || !take_id_path(o, id, path)) {
        return;
    }
    o->max = max;
    sl__docker_go(o, start_stat(o, on_read_stat));
}

static void on_written(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "write", 200, 200) == SL_ENOTFOUND) {
        sl__docker_set_err(o, SL_ENOTFOUND, "docker: no such directory: %s", o->dir);
    }
    sl__docker_op_finish(o);
}

static void on_write_stat(struct sl__docker_op *o)
{
    if (stat_result(o) < 0 && o->rc != SL_ENOTFOUND) {
        sl__docker_op_finish(o);
        return;
    }
    if (o->rc == 0 && o->is_dir) {
        sl__docker_set_err(o, SL_EISDIR, "docker: %s is a directory", o->path);
        sl__docker_op_finish(o);
        return;
    }
    o->rc = 0;
    o->err[0] = '\0';
    if (start_archive(o, "PUT", o->dir, o->tar, o->tar_len, "application/x-tar",
                      SL__DOCKER_BODY_MAX, on_written)
        < 0) {
        sl__docker_op_finish(o);
    }
}

void sl__docker_write_file(struct sl_launcher *l, const char *id, const char *path,
                           const void *data, size_t len, unsigned mode, sl_launcher_done_fn *cb,
                           void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_WRITE,
                                                (union sl__docker_op_cb){ .done = cb }, arg);
    const char *slash;
    struct sl__docker_tar_item item;
    int rc;

    if (o == NULL || o->rc < 0 || !take_id_path(o, id, path)) {
        return;
    }
    if (strcmp(path, "/") == 0) {
        sl__docker_set_err(o, SL_EISDIR, "docker: / is a directory");
        sl__docker_fail_soon(o);
        return;
    }
    if (mode > 07777 || (data == NULL && len > 0)) {
        sl__docker_reject(o, "docker: invalid mode or data");
        return;
    }
    slash = strrchr(path, '/');
    o->dir = slash == path ? sl_strdup("/") : sl_strndup(path, (size_t)(slash - path));
    item = (struct sl__docker_tar_item){ slash + 1, mode, data != NULL ? data : "", len };
    rc = o->dir == NULL ? SL_ENOMEM : sl__docker_tar_build(&item, 1, &o->tar, &o->tar_len);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "docker: write %s: cannot build the archive: %s", path,
                           sl_strerror(rc));
        sl__docker_fail_soon(o);
        return;
    }
    sl__docker_go(o, start_stat(o, on_write_stat));
}
