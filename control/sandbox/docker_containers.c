/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_containers.c - the Docker backend's operations on containers:
 * create_and_start (create, copy the files in, start, read the address and the network
 * namespace, install the inner wall; a failure after the create removes the container), exec
 * (create, the attach stream, the exit code polled) and list (by label, each inspected). See
 * docker.h and docker_int.h.
 */
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/docker_int.h"

#define LABEL_MAX_LEN 1024u
#define EXEC_POLLS    10
#define EXEC_POLL_MS  50u

static void on_cleaned_up(struct sl__docker_op *o)
{
    /* Whatever the DELETE said, the first error is the one to report. */
    o->rc = o->saved_rc;
    memcpy(o->err, o->saved_err, sizeof(o->err));
    sl__docker_op_finish(o);
}

/* A step after the create failed: remove the container, then report the error. */
static void create_failed(struct sl__docker_op *o)
{
    o->saved_rc = o->rc;
    memcpy(o->saved_err, o->err, sizeof(o->err));
    o->deadline_ms = uv_now(o->d->loop) + SL__DOCKER_DEADLINE_MS;
    if (sl__docker_start_requestf(o, "DELETE", NULL, 0, NULL, SL__DOCKER_BODY_MAX, on_cleaned_up,
                                  "/containers/%s?force=true&v=true", o->id)
        < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot remove a failed container\" id=%s", o->id);
        on_cleaned_up(o);
    }
}

/* The inner wall is in place (or not: then the container goes). */
static void on_walled(struct sl__docker_op *o)
{
    if (o->rc < 0) {
        create_failed(o);
        return;
    }
    sl__docker_op_finish(o);
}

static void on_inspected(struct sl__docker_op *o)
{
    if (!sl__docker_address_then_wall(o, "docker: the container", on_walled)) {
        create_failed(o);
    }
}

static void on_started(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "start container", 204, 304) < 0
        || sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX, on_inspected,
                                     "/containers/%s/json", o->id)
                   < 0) {
        create_failed(o);
    }
}

static void start_container(struct sl__docker_op *o)
{
    if (sl__docker_start_requestf(o, "POST", "", 0, NULL, SL__DOCKER_BODY_MAX, on_started,
                                  "/containers/%s/start", o->id)
        < 0) {
        create_failed(o);
    }
}

static void on_copied(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "copy files", 200, 200) < 0) {
        create_failed(o);
        return;
    }
    start_container(o);
}

static void on_created(struct sl__docker_op *o)
{
    json_t *j;
    const char *id;

    if (sl__docker_check_response(o, "create container", 201, 201) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "create container");
    id = sl__docker_json_str(j, "Id");
    if (j == NULL || !sl__docker_is_name(id)) {
        if (j != NULL) {
            sl__docker_set_err(o, SL_EIO, "docker: create container: no valid Id in the answer");
        }
        json_decref(j);
        /* Nothing to remove by id; the name is the handle left. */
        o->id = o->name;
        o->name = NULL;
        create_failed(o);
        return;
    }
    o->id = sl_strdup(id);
    json_decref(j);
    if (o->id == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        o->id = o->name;
        o->name = NULL;
        create_failed(o);
        return;
    }
    if (o->tar == NULL) {
        start_container(o);
        return;
    }
    if (sl__docker_start_requestf(o, "PUT", o->tar, o->tar_len, "application/x-tar",
                                  SL__DOCKER_BODY_MAX, on_copied,
                                  "/containers/%s/archive?path=%%2F", o->id)
        < 0) {
        create_failed(o);
    }
}

/* Builds the create body (a new reference) from `spec`, or NULL with o->err set. */
static json_t *create_body(struct sl__docker_op *o, const struct sl_launcher_container *spec)
{
    json_t *env = json_array();
    json_t *labels = json_object();
    json_t *mounts = json_array();
    json_t *entry = json_array();
    json_t *host = NULL;
    json_t *j = NULL;
    bool ok = env != NULL && labels != NULL && mounts != NULL && entry != NULL;

    for (size_t i = 0; ok && i < spec->n_env; i++) {
        ok = json_array_append_new(env, json_string(spec->env[i])) == 0;
        if (!ok) {
            sl__docker_set_err(o, SL_EINVAL, "docker: env[%zu] is not valid UTF-8", i);
        }
    }
    for (size_t i = 0; ok && i < spec->n_labels; i++) {
        ok = json_object_set_new(labels, spec->labels[i].key, json_string(spec->labels[i].value))
             == 0;
        if (!ok) {
            sl__docker_set_err(o, SL_EINVAL, "docker: label %zu is not valid UTF-8", i);
        }
    }
    for (size_t i = 0; ok && i < spec->n_cmd; i++) {
        ok = json_array_append_new(entry, json_string(spec->cmd[i])) == 0;
        if (!ok) {
            sl__docker_set_err(o, SL_EINVAL, "docker: cmd[%zu] is not valid UTF-8", i);
        }
    }
    if (ok && spec->resolv_conf != NULL) {
        ok = json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind",
                                                     "Source", spec->resolv_conf, "Target",
                                                     "/etc/resolv.conf", "ReadOnly", 1))
             == 0;
    }
    if (ok) {
        /* NET_ADMIN is not among Docker's defaults; dropped by name all the same, since the
         * inner wall depends on the container never having it. */
        host = json_pack("{s:s, s:b, s:[s,s], s:[s], s:i, s:{s:s}, s:{s:s, s:{s:s}}, s:O}",
                         "NetworkMode", spec->network, "Init", 1, "CapDrop", "NET_RAW", "NET_ADMIN",
                         "SecurityOpt", "no-new-privileges:true", "PidsLimit", 1024,
                         "RestartPolicy", "Name", "no", "LogConfig", "Type", "json-file", "Config",
                         "max-size", "1m", "Mounts", mounts);
        ok = host != NULL;
    }
    if (ok && spec->cpus_centi > 0) {
        ok = json_object_set_new(host, "NanoCpus", json_integer(spec->cpus_centi * 10000000)) == 0;
    }
    if (ok && spec->memory_bytes > 0) {
        ok = json_object_set_new(host, "Memory", json_integer(spec->memory_bytes)) == 0
             && json_object_set_new(host, "MemorySwap", json_integer(spec->memory_bytes)) == 0;
    }
    if (ok) {
        /* Healthcheck NONE: an image's HEALTHCHECK is a command Docker would exec in the
         * container on its own, as early as before the inner wall is up. */
        j = json_pack("{s:s, s:[s,s], s:O, s:O, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:{s:[s]}, "
                      "s:O}",
                      "Image", spec->image, "Cmd", "sleep", "infinity", "Env", env, "Labels",
                      labels, "Hostname", "sandbox", "WorkingDir", "/workspace/repo", "AttachStdin",
                      0, "AttachStdout", 0, "AttachStderr", 0, "Tty", 0, "OpenStdin", 0,
                      "Healthcheck", "Test", "NONE", "HostConfig", host);
    }
    /* An entrypoint of ours replaces the image's entrypoint and command: the daemon takes the
     * image's Cmd only when the request names no entrypoint. */
    if (j != NULL && spec->n_cmd > 0
        && (json_object_del(j, "Cmd") != 0 || json_object_set(j, "Entrypoint", entry) != 0)) {
        json_decref(j);
        j = NULL;
    }
    if (j == NULL && o->rc == 0) {
        sl__docker_set_err(o, SL_EINVAL, "docker: cannot build the create request (invalid text?)");
    }
    json_decref(env);
    json_decref(labels);
    json_decref(mounts);
    json_decref(entry);
    json_decref(host);
    return j;
}

/* Checks what create_body() does not: names, paths, modes, limits. */
bool sl__docker_create_spec_ok(struct sl__docker_op *o, const struct sl_launcher_container *s)
{
    if (!sl__docker_is_name(s->name)) {
        sl__docker_reject(o, "docker: invalid container name");
    } else if (s->image == NULL || s->image[0] == '\0' || strlen(s->image) > 512) {
        sl__docker_reject(o, "docker: an image name must be 1-512 characters");
    } else if (!sl__docker_is_name(s->network)) {
        sl__docker_reject(o, "docker: invalid network name");
    } else if (s->cpus_centi < 0 || s->cpus_centi > 100000 || s->memory_bytes < 0) {
        sl__docker_reject(o, "docker: invalid CPU or memory limit");
    } else if (s->resolv_conf != NULL && !sl_launcher_path_ok(s->resolv_conf)) {
        sl__docker_reject(o, "docker: resolv_conf must be an absolute host path");
    } else if (s->n_cmd > 0
               && (s->cmd == NULL || !sl_launcher_path_ok(s->cmd[0])
                   || strcmp(s->cmd[0], "/") == 0)) {
        sl__docker_reject(o, "docker: cmd must start with an absolute path");
    } else {
        for (size_t i = 1; i < s->n_cmd; i++) {
            if (s->cmd[i] == NULL) {
                sl__docker_reject(o, "docker: cmd[%zu] is missing", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_env; i++) {
            if (!sl__docker_is_env(s->env[i])) {
                sl__docker_reject(o, "docker: env[%zu] is not NAME=value", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_labels; i++) {
            if (s->labels[i].key == NULL || s->labels[i].key[0] == '\0'
                || strlen(s->labels[i].key) > LABEL_MAX_LEN || s->labels[i].value == NULL) {
                sl__docker_reject(o, "docker: label %zu has no key or value", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_dirs; i++) {
            if (!sl_launcher_path_ok(s->dirs[i]) || strcmp(s->dirs[i], "/") == 0) {
                sl__docker_reject(o, "docker: dirs[%zu] is not an absolute path below /", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_files; i++) {
            const struct sl_launcher_file *f = &s->files[i];

            if (!sl_launcher_path_ok(f->path) || strcmp(f->path, "/") == 0 || f->mode > 07777
                || (f->data == NULL && f->len > 0)) {
                sl__docker_reject(
                        o, "docker: files[%zu] needs an absolute path below /, data and a mode", i);
                return false;
            }
        }
        return true;
    }
    return false;
}

/* The tar of the spec's directories (first) and files, names relative to /, but the file at
 * `skip` (NULL: none). */
int sl__docker_create_tar(struct sl__docker_op *o, const struct sl_launcher_container *s,
                          const char *skip)
{
    size_t n = s->n_dirs + s->n_files;
    size_t k = s->n_dirs;
    struct sl__docker_tar_item *items;
    int rc;

    if (n == 0) {
        return 0;
    }
    items = sl_calloc(n, sizeof(*items));
    if (items == NULL) {
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < s->n_dirs; i++) {
        items[i] = (struct sl__docker_tar_item){ s->dirs[i] + 1, 0755, NULL, 0 };
    }
    for (size_t i = 0; i < s->n_files; i++) {
        const struct sl_launcher_file *f = &s->files[i];

        if (skip != NULL && strcmp(f->path, skip) == 0) {
            continue;
        }
        items[k++] = (struct sl__docker_tar_item){ f->path + 1, f->mode,
                                                   f->data != NULL ? f->data : "", f->len };
    }
    rc = k == 0 ? 0 : sl__docker_tar_build(items, k, &o->tar, &o->tar_len);
    sl_free(items);
    return rc;
}

void sl__docker_create_and_start(struct sl_launcher *l, const struct sl_launcher_container *spec,
                                 sl_launcher_started_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_CREATE,
                                                (union sl__docker_op_cb){ .started = cb }, arg);
    json_t *j;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (spec == NULL) {
        sl__docker_reject(o, "docker: no container spec");
        return;
    }
    if (!sl__docker_create_spec_ok(o, spec)) {
        return;
    }
    if (spec->egress != NULL && sl__docker_wall_prepare(o, spec->egress) < 0) {
        sl__docker_fail_soon(o);
        return;
    }
    j = create_body(o, spec);
    if (j == NULL) {
        sl__docker_fail_soon(o);
        return;
    }
    o->body = sl__docker_dump_json(j, &o->body_len);
    json_decref(j);
    o->name = sl_strdup(spec->name);
    o->network = sl_strdup(spec->network);
    rc = o->body == NULL || o->name == NULL || o->network == NULL
                 ? SL_ENOMEM
                 : sl__docker_create_tar(o, spec, NULL);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "docker: cannot prepare the container: %s", sl_strerror(rc));
        sl__docker_fail_soon(o);
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "POST", o->body, o->body_len, "application/json",
                                               SL__DOCKER_BODY_MAX, on_created,
                                               "/containers/create?name=%s", o->name));
}

/* ---------------------------------------------------------------------------------------- */
/* exec. */

static void on_exec_inspected(struct sl__docker_op *o);

/* The transfer ended by the exec's own deadline, or the deadline is already behind us. */
static bool exec_deadline_hit(struct sl__docker_op *o)
{
    if (o->deadline_ms == 0) {
        return false;
    }
    return (o->cc == CURLE_OPERATION_TIMEDOUT && o->timeout_is_deadline)
           || uv_now(o->d->loop) >= o->deadline_ms;
}

static void exec_deadline_passed(struct sl__docker_op *o)
{
    o->deadline_passed = true;
    o->exit_code = -1;
    o->rc = 0;
    o->err[0] = '\0';
    sl__docker_op_finish(o);
}

static int inspect_exec(struct sl__docker_op *o)
{
    return sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                     on_exec_inspected, "/exec/%s/json", o->exec_id);
}

static void on_exec_poll(uv_timer_t *t)
{
    struct sl__docker_op *o = SL_CONTAINER_OF(t, struct sl__docker_op, timer);

    if (o->deadline_ms != 0 && uv_now(o->d->loop) >= o->deadline_ms) {
        exec_deadline_passed(o);
        return;
    }
    if (inspect_exec(o) < 0) {
        sl__docker_op_finish(o);
    }
}

static void on_exec_inspected(struct sl__docker_op *o)
{
    json_t *j;
    json_t *code;

    if (sl__docker_check_response(o, "inspect exec", 200, 200) < 0) {
        if (exec_deadline_hit(o)) {
            exec_deadline_passed(o);
            return;
        }
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "inspect exec");
    if (j == NULL) {
        sl__docker_op_finish(o);
        return;
    }
    code = json_object_get(j, "ExitCode");
    if (json_is_true(json_object_get(j, "Running")) && ++o->polls < EXEC_POLLS) {
        json_decref(j);
        (void)uv_timer_start(&o->timer, on_exec_poll, EXEC_POLL_MS, 0);
        return;
    }
    /* Still running after the polls, or no code: unknown (-1). */
    o->exit_code = -1;
    if (!json_is_true(json_object_get(j, "Running")) && json_is_integer(code)
        && json_integer_value(code) >= 0 && json_integer_value(code) <= 255) {
        o->exit_code = (int)json_integer_value(code);
    }
    json_decref(j);
    sl__docker_op_finish(o);
}

static void on_exec_stream_end(struct sl__docker_op *o)
{
    if (o->cc != CURLE_OK && exec_deadline_hit(o)) {
        exec_deadline_passed(o);
        return;
    }
    if (o->stream_bad) {
        sl__docker_set_err(o, SL_EIO, "docker: exec: malformed output stream");
        sl__docker_op_finish(o);
        return;
    }
    if (o->oom) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: exec: out of memory keeping the output");
        sl__docker_op_finish(o);
        return;
    }
    if (sl__docker_check_response(o, "start exec", 200, 200) < 0 || inspect_exec(o) < 0) {
        sl__docker_op_finish(o);
    }
}

static char start_body[] = "{\"Detach\":false,\"Tty\":false}";

static void on_exec_created(struct sl__docker_op *o)
{
    json_t *j;
    const char *id;

    if (sl__docker_check_response(o, "create exec", 201, 201) < 0) {
        if (exec_deadline_hit(o)) {
            exec_deadline_passed(o);
            return;
        }
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "create exec");
    id = sl__docker_json_str(j, "Id");
    if (j != NULL && !sl__docker_is_name(id)) {
        sl__docker_set_err(o, SL_EIO, "docker: create exec: no valid Id in the answer");
    } else if (j != NULL) {
        o->exec_id = sl_strdup(id);
        if (o->exec_id == NULL) {
            sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        }
    }
    json_decref(j);
    if (o->rc < 0) {
        sl__docker_op_finish(o);
        return;
    }
    o->stream = true;
    if (sl__docker_start_requestf(o, "POST", start_body, sizeof(start_body) - 1, "application/json",
                                  SL__DOCKER_BODY_MAX, on_exec_stream_end, "/exec/%s/start",
                                  o->exec_id)
        < 0) {
        sl__docker_op_finish(o);
    }
}

static json_t *exec_body(struct sl__docker_op *o, const struct sl_launcher_exec *e)
{
    json_t *cmd = json_array();
    json_t *env = json_array();
    json_t *j = NULL;
    bool ok = cmd != NULL && env != NULL;

    for (size_t i = 0; ok && i < e->argc; i++) {
        ok = json_array_append_new(cmd, json_string(e->argv[i])) == 0;
    }
    for (size_t i = 0; ok && i < e->n_env; i++) {
        ok = json_array_append_new(env, json_string(e->env[i])) == 0;
    }
    if (ok) {
        j = json_pack("{s:b, s:b, s:b, s:b, s:O, s:O}", "AttachStdin", 0, "AttachStdout", 1,
                      "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env);
    }
    if (j != NULL && e->cwd != NULL
        && json_object_set_new(j, "WorkingDir", json_string(e->cwd)) != 0) {
        json_decref(j);
        j = NULL;
    }
    if (j == NULL) {
        sl__docker_set_err(o, SL_EINVAL,
                           "docker: exec: arguments or environment are not valid UTF-8");
    }
    json_decref(cmd);
    json_decref(env);
    return j;
}

void sl__docker_exec(struct sl_launcher *l, const char *id, const struct sl_launcher_exec *e,
                     sl_launcher_exec_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_on(l, id, SL__DOCKER_OP_EXEC,
                                               (union sl__docker_op_cb){ .exec = cb }, arg);
    json_t *j;

    if (o == NULL) {
        return;
    }
    if (e == NULL || e->argc == 0 || e->argv == NULL || e->argv[0] == NULL
        || e->argv[0][0] == '\0') {
        sl__docker_reject(o, "docker: exec needs a command");
        return;
    }
    for (size_t i = 0; i < e->argc; i++) {
        if (e->argv[i] == NULL) {
            sl__docker_reject(o, "docker: exec argv[%zu] is NULL", i);
            return;
        }
    }
    for (size_t i = 0; i < e->n_env; i++) {
        if (!sl__docker_is_env(e->env[i])) {
            sl__docker_reject(o, "docker: exec env[%zu] is not NAME=value", i);
            return;
        }
    }
    if (e->cwd != NULL && !sl_launcher_path_ok(e->cwd)) {
        sl__docker_reject(o, "docker: exec cwd must be an absolute path");
        return;
    }
    o->deadline_ms = e->deadline_ms != 0 ? uv_now(o->d->loop) + e->deadline_ms : 0;
    o->max_out = e->max_stdout;
    o->max_err = e->max_stderr;
    sl_buf_init(&o->out, e->max_stdout);
    sl_buf_init(&o->errout, e->max_stderr);
    j = exec_body(o, e);
    o->body = j != NULL ? sl__docker_dump_json(j, &o->body_len) : NULL;
    json_decref(j);
    o->id = sl_strdup(id);
    if (o->body == NULL || o->id == NULL) {
        if (o->rc == 0) {
            sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        }
        sl__docker_fail_soon(o);
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "POST", o->body, o->body_len, "application/json",
                                               SL__DOCKER_BODY_MAX, on_exec_created,
                                               "/containers/%s/exec", o->id));
}

/* ---------------------------------------------------------------------------------------- */
/* list. */

static void inspect_next(struct sl__docker_op *o);

/* Keeps what an entry needs from one container's inspect answer. */
static int keep_found(struct sl__docker_op *o, const json_t *c)
{
    const json_t *cfg = json_object_get(c, "Config");
    json_t *nets = json_object_get(json_object_get(c, "NetworkSettings"), "Networks");
    json_t *labels = json_object_get(cfg, "Labels");
    json_t *env = json_object_get(cfg, "Env");
    const char *ip = "";
    const char *key;
    json_t *net;
    const char *name = sl__docker_json_str(c, "Name");
    json_t *e;

    labels = json_is_object(labels) ? json_incref(labels) : json_object();
    env = json_is_array(env) ? json_incref(env) : json_array();
    json_object_foreach(nets, key, net)
    {
        const char *a = sl__docker_json_str(net, "IPAddress");

        if (a != NULL && a[0] != '\0') {
            ip = a;
            break;
        }
    }
    if (name != NULL && name[0] == '/') {
        name++;
    }
    /* "o" steals the two references, on failure too. */
    e = json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}", "id", sl__docker_json_str(c, "Id"), "name",
                  name != NULL ? name : "", "running",
                  json_is_true(json_object_get(json_object_get(c, "State"), "Running")), "ip", ip,
                  "labels", labels, "env", env);
    if (e == NULL || json_array_append_new(o->found, e) != 0) {
        sl__docker_set_err(o, SL_EIO, "docker: list: an inspect answer is incomplete");
        return o->rc;
    }
    return 0;
}

static void on_list_inspected(struct sl__docker_op *o)
{
    json_t *j;

    if (sl__docker_check_response(o, "inspect container", 200, 200) < 0) {
        if (o->rc != SL_ENOTFOUND) {
            sl__docker_op_finish(o);
            return;
        }
        /* Removed since the listing: not there any more. */
        o->rc = 0;
        o->err[0] = '\0';
        inspect_next(o);
        return;
    }
    j = sl__docker_response_object(o, "inspect container");
    if (j == NULL || keep_found(o, j) < 0) {
        json_decref(j);
        sl__docker_op_finish(o);
        return;
    }
    json_decref(j);
    inspect_next(o);
}

static void inspect_next(struct sl__docker_op *o)
{
    const char *id;

    if (o->next_id == json_array_size(o->ids)) {
        sl__docker_op_finish(o);
        return;
    }
    id = json_string_value(json_array_get(o->ids, o->next_id++));
    if (sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX, on_list_inspected,
                                  "/containers/%s/json", id)
        < 0) {
        sl__docker_op_finish(o);
    }
}

static void on_listed(struct sl__docker_op *o)
{
    json_t *j;
    json_t *c;
    size_t i;

    if (sl__docker_check_response(o, "list containers", 200, 200) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    o->ids = json_array();
    o->found = json_array();
    if (!json_is_array(j) || o->ids == NULL || o->found == NULL) {
        sl__docker_set_err(o, SL_EIO, "docker: list containers: the answer is not a JSON array");
        json_decref(j);
        sl__docker_op_finish(o);
        return;
    }
    json_array_foreach(j, i, c)
    {
        const char *id = sl__docker_json_str(c, "Id");

        if (!sl__docker_is_name(id) || json_array_append_new(o->ids, json_string(id)) != 0) {
            sl__docker_set_err(o, SL_EIO, "docker: list containers: an entry has no valid Id");
            json_decref(j);
            sl__docker_op_finish(o);
            return;
        }
    }
    json_decref(j);
    inspect_next(o);
}

void sl__docker_deliver_list(struct sl__docker_op *o)
{
    size_t n = o->rc == 0 ? json_array_size(o->found) : 0;
    struct sl_launcher_entry *entries = n > 0 ? sl_calloc(n, sizeof(*entries)) : NULL;
    size_t total_labels = 0;
    size_t total_env = 0;
    struct sl_launcher_label *labels = NULL;
    const char **env = NULL;
    size_t li = 0;
    size_t ei = 0;

    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(o->found, i);

        total_labels += json_object_size(json_object_get(f, "labels"));
        total_env += json_array_size(json_object_get(f, "env"));
    }
    labels = total_labels > 0 ? sl_calloc(total_labels, sizeof(*labels)) : NULL;
    env = total_env > 0 ? sl_calloc(total_env, sizeof(*env)) : NULL;
    if ((n > 0 && entries == NULL) || (total_labels > 0 && labels == NULL)
        || (total_env > 0 && env == NULL)) {
        o->cb.list(o->arg, SL_ENOMEM, "docker: out of memory", NULL, 0);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(o->found, i);
        struct sl_launcher_entry *e = &entries[i];
        const char *key;
        json_t *v;
        size_t k;

        e->id = sl__docker_json_str(f, "id");
        e->name = sl__docker_json_str(f, "name");
        e->running = json_is_true(json_object_get(f, "running"));
        e->ip = sl__docker_json_str(f, "ip");
        e->labels = labels != NULL ? labels + li : NULL;
        json_object_foreach(json_object_get(f, "labels"), key, v)
        {
            if (json_is_string(v)) {
                labels[li++] = (struct sl_launcher_label){ key, json_string_value(v) };
                e->n_labels++;
            }
        }
        e->env = env != NULL ? env + ei : NULL;
        json_array_foreach(json_object_get(f, "env"), k, v)
        {
            if (json_is_string(v)) {
                env[ei++] = json_string_value(v);
                e->n_env++;
            }
        }
    }
    o->cb.list(o->arg, o->rc, o->rc < 0 ? o->err : NULL, entries, n);
out:
    sl_free(entries);
    sl_free(labels);
    sl_free((void *)env);
}

void sl__docker_list(struct sl_launcher *l, const char *label_key, sl_launcher_list_fn *cb,
                     void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_LIST,
                                                (union sl__docker_op_cb){ .list = cb }, arg);
    json_t *filters;
    struct sl_buf path;
    char *text = NULL;
    size_t n = 0;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (label_key == NULL || label_key[0] == '\0' || strlen(label_key) > LABEL_MAX_LEN) {
        sl__docker_reject(o, "docker: a label key must be 1-%u characters", LABEL_MAX_LEN);
        return;
    }
    filters = json_pack("{s:[s]}", "label", label_key);
    if (filters == NULL) {
        sl__docker_reject(o, "docker: the label key is not valid UTF-8");
        return;
    }
    text = sl__docker_dump_json(filters, &n);
    json_decref(filters);
    if (text == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        sl__docker_fail_soon(o);
        return;
    }
    sl_buf_init(&path, SL__DOCKER_URL_MAX);
    rc = sl_buf_append_str(&path, "/containers/json?all=1&filters=");
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, text);
    sl_free(text);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        sl__docker_fail_soon(o);
    } else {
        sl__docker_go(o, sl__docker_start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL,
                                                  SL__DOCKER_BODY_MAX, on_listed));
    }
    sl_buf_finish(&path);
}
