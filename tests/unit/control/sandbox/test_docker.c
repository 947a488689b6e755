/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/sandbox/test_docker.c - control/sandbox/docker against the real daemon on
 * /var/run/docker.sock (CI starts dockerd before the tests) and the image sluice/sandbox:bookworm.
 *
 * One sequence on one loop: a network (ensure_network creates it, a second call accepts it, a
 * call with other settings is refused), a hardened container with env, labels, files and a
 * directory, a container with an inner wall (nft in its namespace, set_egress replacing it) and a
 * command of its own, execs (exit code and split streams, a capped 2 MiB output, a deadline), files
 * (5 MiB binary round trip, directory, missing, too big, symbolic link), listing by label,
 * removal, invalid input, and closing with an operation in flight. Containers carrying the
 * test's label and the test network are removed at the start and the end.
 */
#include <curl/curl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/err.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"

#define SOCK       "/var/run/docker.sock"
#define IMAGE      "sluice/sandbox:bookworm"
#define NET        "sl-t-docker"
#define SUBNET     "10.213.250.0/24"
#define GATEWAY    "10.213.250.1"
#define LABEL      "sluice.test-docker"
#define CTR_NAME   "sl-t-docker-1"
#define BLOB_BYTES (5u * 1024u * 1024u)

static uv_loop_t loop;
static struct sl_launcher *l;
static char ctr_id[128];
static char ctr_ip[64];
static char resolv_path[64];

/* What one callback reported. */
struct result {
    bool done;
    int rc;
    char err[512];
    char id[128];
    char ip[64];
    bool is_dir;
    uint64_t size;
    uint8_t *data;
    size_t len;
    int exit_code;
    char *out;
    size_t out_len;
    char *errout;
    size_t errout_len;
    bool out_truncated;
    bool err_truncated;
    bool deadline_passed;
    size_t n_found;
    bool found;
    bool found_env;
    bool found_running;
    char found_ip[64];
};

static void keep_err(struct result *r, int rc, const char *err)
{
    r->done = true;
    r->rc = rc;
    if (rc < 0) {
        assert_non_null(err);
        assert_null(strchr(err, '\n'));
        (void)snprintf(r->err, sizeof(r->err), "%s", err);
    }
}

static void on_done(void *arg, int rc, const char *err)
{
    assert_false(((struct result *)arg)->done);
    keep_err(arg, rc, err);
}

static void on_started(void *arg, int rc, const char *err, const char *id, const char *ip)
{
    struct result *r = arg;

    assert_false(r->done);
    keep_err(r, rc, err);
    if (rc == 0) {
        (void)snprintf(r->id, sizeof(r->id), "%s", id);
        (void)snprintf(r->ip, sizeof(r->ip), "%s", ip);
    }
}

static void on_exec(void *arg, const struct sl_launcher_exec_result *x)
{
    struct result *r = arg;

    assert_false(r->done);
    keep_err(r, x->rc, x->err);
    r->exit_code = x->exit_code;
    r->out = sl_malloc(x->out_len + 1);
    r->errout = sl_malloc(x->errout_len + 1);
    assert_non_null(r->out);
    assert_non_null(r->errout);
    memcpy(r->out, x->out, x->out_len);
    r->out[x->out_len] = '\0';
    memcpy(r->errout, x->errout, x->errout_len);
    r->errout[x->errout_len] = '\0';
    r->out_len = x->out_len;
    r->errout_len = x->errout_len;
    r->out_truncated = x->out_truncated;
    r->err_truncated = x->err_truncated;
    r->deadline_passed = x->deadline_passed;
}

/* For the allocation-failure sweep: keeps rc and err only (allocating here would fail too). */
static void on_exec_rc(void *arg, const struct sl_launcher_exec_result *x)
{
    struct result *r = arg;

    assert_false(r->done);
    keep_err(r, x->rc, x->err);
    r->exit_code = x->exit_code;
}

static void on_stat(void *arg, int rc, const char *err, bool is_dir, uint64_t size)
{
    struct result *r = arg;

    keep_err(r, rc, err);
    r->is_dir = is_dir;
    r->size = size;
}

static void on_read(void *arg, int rc, const char *err, const void *data, size_t len)
{
    struct result *r = arg;

    keep_err(r, rc, err);
    r->len = len;
    if (rc == 0) {
        r->data = sl_malloc(len + 1);
        assert_non_null(r->data);
        memcpy(r->data, data, len);
    }
}

static void on_list(void *arg, int rc, const char *err, const struct sl_launcher_entry *e, size_t n)
{
    struct result *r = arg;

    keep_err(r, rc, err);
    r->n_found = n;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(e[i].id, ctr_id) != 0) {
            continue;
        }
        r->found = true;
        r->found_running = e[i].running;
        assert_string_equal(e[i].name, CTR_NAME);
        (void)snprintf(r->found_ip, sizeof(r->found_ip), "%s", e[i].ip);
        for (size_t k = 0; k < e[i].n_env; k++) {
            r->found_env = r->found_env || strcmp(e[i].env[k], "SL_TEST_VAR=hello world") == 0;
        }
        bool label = false;

        for (size_t k = 0; k < e[i].n_labels; k++) {
            label = label
                    || (strcmp(e[i].labels[k].key, "sluice.sandbox") == 0
                        && strcmp(e[i].labels[k].value, "t1") == 0);
        }
        assert_true(label);
    }
}

static void result_finish(struct result *r)
{
    sl_free(r->data);
    sl_free(r->out);
    sl_free(r->errout);
    memset(r, 0, sizeof(*r));
}

/* Runs the loop until the operation reported, checking it never reported synchronously. */
static void wait_for(struct result *r)
{
    assert_false(r->done);
    while (!r->done) {
        (void)uv_run(&loop, UV_RUN_ONCE);
    }
}

/* A blocking request straight to the daemon, for set-up and clean-up only. Returns the status. */
/* Keeps up to 64 KiB of a raw answer. */
struct body {
    char p[65536];
    size_t n;
};

static size_t keep_body(char *p, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    size_t k = size * n;

    if (b != NULL && k < sizeof(b->p) - b->n) {
        memcpy(b->p + b->n, p, k);
        b->n += k;
        b->p[b->n] = '\0';
    }
    return size * n;
}

static long raw_body(const char *method, const char *path, struct body *b)
{
    CURL *c = curl_easy_init();
    char url[512];
    long status = 0;

    assert_non_null(c);
    (void)snprintf(url, sizeof(url), "http://localhost/v1.41%s", path);
    (void)curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, SOCK);
    (void)curl_easy_setopt(c, CURLOPT_URL, url);
    (void)curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    (void)curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
    (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    (void)curl_easy_setopt(c, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
    if (curl_easy_perform(c) == CURLE_OK) {
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_easy_cleanup(c);
    return status;
}

static long raw(const char *method, const char *path)
{
    return raw_body(method, path, NULL);
}

/* The created container's settings as the daemon reports them (docs/reference/containers.md §5.4).
 */
static void check_hardening(const char *id)
{
    static struct body b;
    char path[256];
    json_t *j;
    json_t *h;
    json_t *m;

    b.n = 0;
    (void)snprintf(path, sizeof(path), "/containers/%s/json", id);
    assert_int_equal(raw_body("GET", path, &b), 200);
    j = json_loadb(b.p, b.n, 0, NULL);
    assert_non_null(j);
    /* No HEALTHCHECK of the image is run in the container. */
    assert_string_equal(
            json_string_value(json_array_get(
                    json_object_get(json_object_get(json_object_get(j, "Config"), "Healthcheck"),
                                    "Test"),
                    0)),
            "NONE");
    h = json_object_get(j, "HostConfig");
    assert_string_equal(json_string_value(json_object_get(h, "NetworkMode")), NET);
    assert_true(json_is_true(json_object_get(h, "Init")));
    assert_int_equal(json_array_size(json_object_get(h, "CapDrop")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "CapDrop"), 0)),
                        "NET_RAW");
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "CapDrop"), 1)),
                        "NET_ADMIN");
    assert_true(json_is_null(json_object_get(h, "CapAdd"))
                || json_array_size(json_object_get(h, "CapAdd")) == 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "SecurityOpt"), 0)),
                        "no-new-privileges:true");
    assert_false(json_is_true(json_object_get(h, "Privileged")));
    assert_int_equal(json_integer_value(json_object_get(h, "PidsLimit")), 1024);
    assert_int_equal(json_integer_value(json_object_get(h, "NanoCpus")), 500000000);
    assert_int_equal(json_integer_value(json_object_get(h, "Memory")), 256 * 1024 * 1024);
    assert_int_equal(json_integer_value(json_object_get(h, "MemorySwap")), 256 * 1024 * 1024);
    assert_string_equal(
            json_string_value(json_object_get(json_object_get(h, "RestartPolicy"), "Name")), "no");
    assert_string_equal(
            json_string_value(json_object_get(
                    json_object_get(json_object_get(h, "LogConfig"), "Config"), "max-size")),
            "1m");
    m = json_array_get(json_object_get(h, "Mounts"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "Source")), resolv_path);
    assert_string_equal(json_string_value(json_object_get(m, "Target")), "/etc/resolv.conf");
    assert_true(json_is_true(json_object_get(m, "ReadOnly")));
    assert_string_equal(
            json_string_value(json_object_get(json_object_get(j, "Config"), "Hostname")),
            "sandbox");
    json_decref(j);
}

struct ids {
    char id[16][80];
    size_t n;
    bool done;
};

static void on_list_ids(void *arg, int rc, const char *err, const struct sl_launcher_entry *e,
                        size_t n)
{
    struct ids *ids = arg;

    (void)err;
    assert_int_equal(rc, 0);
    ids->done = true;
    for (size_t i = 0; i < n && ids->n < 16; i++) {
        (void)snprintf(ids->id[ids->n++], sizeof(ids->id[0]), "%s", e[i].id);
    }
}

/* Removes every container with the test's label, then the test network. */
static void clean_up(void)
{
    struct ids ids;
    struct result r = { 0 };

    memset(&ids, 0, sizeof(ids));
    l->ops->list(l, LABEL, on_list_ids, &ids);
    while (!ids.done) {
        (void)uv_run(&loop, UV_RUN_ONCE);
    }
    for (size_t i = 0; i < ids.n; i++) {
        l->ops->remove(l, ids.id[i], on_done, &r);
        wait_for(&r);
        assert_int_equal(r.rc, 0);
        result_finish(&r);
    }
    (void)raw("DELETE", "/networks/" NET);
}

static int group_setup(void **state)
{
    struct result r = { 0 };
    FILE *f;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_docker_launcher_create(&loop, SOCK, &l), 0);
    l->ops->ping(l, on_done, &r);
    wait_for(&r);
    if (r.rc != 0) {
        print_error("dockerd does not answer on " SOCK
                    " (CI starts dockerd before the tests): %s\n",
                    r.err);
        return -1;
    }
    if (raw("GET", "/images/sluice%2Fsandbox%3Abookworm/json") != 200) {
        print_error("image " IMAGE " is missing: build it first\n");
        return -1;
    }
    clean_up();
    (void)snprintf(resolv_path, sizeof(resolv_path), "/tmp/sl-t-docker-resolv.%d", (int)getpid());
    f = fopen(resolv_path, "w");
    assert_non_null(f);
    (void)fputs("nameserver 127.0.0.1\n", f);
    assert_int_equal(fclose(f), 0);
    return 0;
}

static void on_closed(void *arg)
{
    *(bool *)arg = true;
}

static int group_teardown(void **state)
{
    bool closed = false;

    (void)state;
    clean_up();
    l->ops->close(l, on_closed, &closed);
    assert_false(closed);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_true(closed);
    assert_int_equal(uv_loop_close(&loop), 0);
    (void)unlink(resolv_path);
    return 0;
}

static const struct sl_launcher_network test_net = { NET, NET, SUBNET, GATEWAY };

static void ensure_network_creates_then_accepts(void **state)
{
    struct result r = { 0 };
    struct sl_launcher_network other = test_net;

    (void)state;
    l->ops->ensure_network(l, &test_net, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);

    l->ops->ensure_network(l, &test_net, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);

    other.bridge = "sl-t-other";
    l->ops->ensure_network(l, &other, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EEXIST);
    assert_non_null(strstr(r.err, "bridge"));
    result_finish(&r);

    other = test_net;
    other.subnet = "10.213.251.0/24";
    other.gateway = "10.213.251.1";
    l->ops->ensure_network(l, &other, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EEXIST);
    assert_non_null(strstr(r.err, "subnet"));
    result_finish(&r);
}

static void has_image_finds_present_and_missing(void **state)
{
    struct result r = { 0 };

    (void)state;
    l->ops->has_image(l, IMAGE, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);
    l->ops->has_image(l, "sluice/no-such-image:never", on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    result_finish(&r);
}

static void on_pulled(void *arg, int rc, enum sl_launcher_pull_failure why, const char *err)
{
    struct result *r = arg;

    assert_false(r->done);
    r->exit_code = (int)why;
    keep_err(r, rc, err);
}

/* A pull from a registry nobody listens at fails as unreachable, naming it, with nothing of
 * the credentials in the error; a malformed reference fails before any request. (A real
 * registry: tests/integration/sandbox_registry.sh.) */
static void pull_names_an_unreachable_registry(void **state)
{
    struct result r = { 0 };
    struct sl_launcher_pull p = {
        .image = "127.0.0.1:1/sluice-t/no-such:v1",
        .username = "someone",
        .password = "pull-secret-never-shown",
        .deadline_ms = 30000,
    };

    (void)state;
    l->ops->pull_image(l, &p, NULL, on_pulled, &r);
    wait_for(&r);
    assert_true(r.rc < 0);
    assert_int_equal(r.exit_code, SL_LAUNCHER_PULL_UNREACHABLE);
    assert_non_null(strstr(r.err, "registry unreachable: 127.0.0.1:1: "));
    assert_null(strstr(r.err, "pull-secret"));
    result_finish(&r);
    p.image = "img:";
    l->ops->pull_image(l, &p, NULL, on_pulled, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    assert_int_equal(r.exit_code, SL_LAUNCHER_PULL_RUNTIME);
    result_finish(&r);
}

static const char hello_script[] = "#!/bin/sh\necho hello from a file\n";
static const char ca_text[] = "not really a certificate\n";

static void create_and_start_runs_a_hardened_container(void **state)
{
    struct result r = { 0 };
    const char *env[] = { "SL_TEST_VAR=hello world", "PATH=/usr/local/bin:/usr/bin:/bin" };
    const struct sl_launcher_label labels[] = { { LABEL, "1" }, { "sluice.sandbox", "t1" } };
    const struct sl_launcher_file files[] = {
        { "/usr/local/bin/sl-hello", hello_script, sizeof(hello_script) - 1, 0755 },
        { "/etc/sluice-test/deep/ca.pem", ca_text, sizeof(ca_text) - 1, 0644 },
    };
    const char *dirs[] = { "/workspace/repo", "/workspace/other" };
    const struct sl_launcher_file bad_files[] = { { "/etc/passwd/x", "x", 1, 0644 } };
    struct sl_launcher_container spec = {
        .name = CTR_NAME,
        .image = IMAGE,
        .network = NET,
        .env = env,
        .n_env = 2,
        .labels = labels,
        .n_labels = 2,
        .cpus_centi = 50,
        .memory_bytes = 256 * 1024 * 1024,
        .resolv_conf = resolv_path,
        .files = files,
        .n_files = 2,
        .dirs = dirs,
        .n_dirs = 2,
    };

    (void)state;
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_true(strncmp(r.ip, "10.213.250.", 11) == 0);
    (void)snprintf(ctr_id, sizeof(ctr_id), "%s", r.id);
    (void)snprintf(ctr_ip, sizeof(ctr_ip), "%s", r.ip);
    result_finish(&r);
    check_hardening(ctr_id);

    /* The same name again: the daemon's conflict message, nothing left behind. */
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_true(r.rc < 0);
    assert_non_null(strstr(r.err, "docker: "));
    result_finish(&r);

    /* The daemon refuses a missing bind source at create: its message, nothing created. */
    spec.name = "sl-t-docker-broken";
    spec.resolv_conf = "/nonexistent/sl-t-docker-resolv";
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    assert_non_null(strstr(r.err, "bind source path does not exist"));
    result_finish(&r);
    assert_int_equal(raw("GET", "/containers/sl-t-docker-broken/json"), 404);

    /* A failure after the create (copying a file under a file) removes the container. */
    spec.resolv_conf = NULL;
    spec.files = bad_files;
    spec.n_files = 1;
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EIO);
    assert_non_null(strstr(r.err, "not a directory"));
    result_finish(&r);
    assert_int_equal(raw("GET", "/containers/sl-t-docker-broken/json"), 404);
}

/* The output of `nft list table inet sluice_wall` in the network namespace of the container
 * `name` (its SandboxKey), into `out`; returns the command's status. */
static int wall_listing(const char *name, char *out, size_t cap)
{
    static struct body b;
    char path[256];
    char cmd[512];
    json_t *j;
    const char *key;
    FILE *p;
    size_t n;

    b.n = 0;
    (void)snprintf(path, sizeof(path), "/containers/%s/json", name);
    assert_int_equal(raw_body("GET", path, &b), 200);
    j = json_loadb(b.p, b.n, 0, NULL);
    assert_non_null(j);
    key = json_string_value(json_object_get(json_object_get(j, "NetworkSettings"), "SandboxKey"));
    assert_non_null(key);
    assert_true(key[0] == '/'
                && strspn(key, "/abcdefghijklmnopqrstuvwxyz0123456789._-") == strlen(key));
    (void)snprintf(cmd, sizeof(cmd), "nsenter --net=%s nft list table inet sluice_wall 2>&1", key);
    json_decref(j);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* A container with an inner wall and a command of its own: the wall stands in its namespace
 * when the create reports, set_egress replaces it, and the image's entrypoint is not run. */
static void create_installs_the_inner_wall_and_set_egress_replaces_it(void **state)
{
    struct result r = { 0 };
    static const uint16_t tcp[] = { 3128, 53, 3128 };
    static const uint16_t udp[] = { 53 };
    static const uint16_t other[] = { 8443 };
    const struct sl_launcher_egress egress = { GATEWAY, tcp, 3, udp, 1 };
    const struct sl_launcher_egress changed = { GATEWAY, other, 1, NULL, 0 };
    const struct sl_launcher_egress bad = { "::1", tcp, 3, udp, 1 };
    const char *cmd[] = { "/bin/sleep", "600" };
    const struct sl_launcher_label labels[] = { { LABEL, "1" } };
    struct sl_launcher_container spec = {
        .name = "sl-t-docker-wall",
        .image = IMAGE,
        .network = NET,
        .labels = labels,
        .n_labels = 1,
        .cmd = cmd,
        .n_cmd = 2,
        .egress = &egress,
    };
    static struct body b;
    char out[4096];
    char id[128];
    json_t *j;

    (void)state;
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    (void)snprintf(id, sizeof(id), "%s", r.id);
    result_finish(&r);

    b.n = 0;
    assert_int_equal(raw_body("GET", "/containers/sl-t-docker-wall/json", &b), 200);
    j = json_loadb(b.p, b.n, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "Config"), "Entrypoint")),
                     2);
    assert_string_equal(json_string_value(json_array_get(
                                json_object_get(json_object_get(j, "Config"), "Entrypoint"), 0)),
                        "/bin/sleep");
    assert_true(json_is_null(json_object_get(json_object_get(j, "Config"), "Cmd")));
    json_decref(j);

    assert_int_equal(wall_listing("sl-t-docker-wall", out, sizeof(out)), 0);
    if (strstr(out, "ip daddr " GATEWAY " tcp dport { 53, 3128 } accept") == NULL
        || strstr(out, "ip daddr " GATEWAY " udp dport 53 accept") == NULL
        || strstr(out, "ip daddr 127.0.0.11 meta l4proto tcp reject with tcp reset") == NULL) {
        fail_msg("the inner wall is not as asked:\n%s", out);
    }

    l->ops->set_egress(l, id, &changed, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);
    assert_int_equal(wall_listing("sl-t-docker-wall", out, sizeof(out)), 0);
    if (strstr(out, "tcp dport 8443 accept") == NULL || strstr(out, "udp dport") != NULL
        || strstr(out, "3128") != NULL) {
        fail_msg("set_egress did not replace the wall:\n%s", out);
    }

    /* Refused before anything is sent, and a container that is not there. */
    l->ops->set_egress(l, id, &bad, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    result_finish(&r);
    l->ops->set_egress(l, "no-such-container-sl-t", &changed, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    result_finish(&r);
    spec.name = "sl-t-docker-wall2";
    spec.egress = &bad;
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    result_finish(&r);
    assert_int_equal(raw("GET", "/containers/sl-t-docker-wall2/json"), 404);
    spec.egress = &egress;
    cmd[0] = "bin/sleep";
    l->ops->create_and_start(l, &spec, on_started, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    assert_non_null(strstr(r.err, "cmd"));
    result_finish(&r);
    assert_int_equal(raw("GET", "/containers/sl-t-docker-wall2/json"), 404);

    l->ops->remove(l, id, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);
}

/* Runs `sh -c script` in the test container and waits. */
static void run_sh(struct result *r, const char *script, size_t max_out, uint64_t deadline_ms)
{
    const char *argv[] = { "sh", "-c", script };
    const char *env[] = { "SL_EXTRA=extra" };
    struct sl_launcher_exec e = {
        .argv = argv,
        .argc = 3,
        .env = env,
        .n_env = 1,
        .cwd = NULL,
        .max_stdout = max_out,
        .max_stderr = 64 * 1024,
        .deadline_ms = deadline_ms,
    };

    l->ops->exec(l, ctr_id, &e, on_exec, r);
    wait_for(r);
}

static void exec_reports_exit_code_and_split_streams(void **state)
{
    struct result r = { 0 };

    (void)state;
    run_sh(&r, "echo out; echo err >&2; exit 3", 1024, 0);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.exit_code, 3);
    assert_string_equal(r.out, "out\n");
    assert_string_equal(r.errout, "err\n");
    assert_false(r.out_truncated);
    assert_false(r.deadline_passed);
    result_finish(&r);

    /* The container as created: env, files, directories, hardening, resolv.conf, cwd. */
    run_sh(&r,
           "echo \"$SL_TEST_VAR|$SL_EXTRA|$(pwd)|$(hostname)\"; sl-hello; "
           "stat -c '%a %u' /usr/local/bin/sl-hello /etc/sluice-test/deep/ca.pem "
           "/workspace/repo /workspace/other /etc/sluice-test/deep; "
           "cat /etc/sluice-test/deep/ca.pem; grep -c 127.0.0.1 /etc/resolv.conf; "
           "grep NoNewPrivs /proc/self/status | tr -d '\\t'; "
           "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max",
           4096, 0);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.exit_code, 0);
    assert_string_equal(r.out, "hello world|extra|/workspace/repo|sandbox\n"
                               "hello from a file\n"
                               "755 0\n644 0\n755 0\n755 0\n755 0\n"
                               "not really a certificate\n"
                               "1\n"
                               "NoNewPrivs:1\n"
                               "1024\n");
    result_finish(&r);
}

static void exec_runs_in_the_given_directory_with_signal_codes(void **state)
{
    struct result r = { 0 };
    const char *argv[] = { "sh", "-c", "pwd; kill -TERM $$" };
    struct sl_launcher_exec e = {
        .argv = argv, .argc = 3, .cwd = "/etc", .max_stdout = 64, .max_stderr = 64
    };

    (void)state;
    l->ops->exec(l, ctr_id, &e, on_exec, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "/etc\n");
    assert_int_equal(r.exit_code, 128 + 15);
    result_finish(&r);
}

static void exec_caps_output_and_marks_truncation(void **state)
{
    struct result r = { 0 };

    (void)state;
    run_sh(&r, "head -c 2097152 /dev/zero; echo done >&2", 1024 * 1024, 0);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.out_len, 1024 * 1024);
    assert_true(r.out_truncated);
    assert_string_equal(r.errout, "done\n");
    assert_false(r.err_truncated);
    result_finish(&r);
}

static void exec_deadline_abandons_the_stream(void **state)
{
    struct result r = { 0 };
    uint64_t t0 = uv_now(&loop);

    (void)state;
    run_sh(&r, "echo started; sleep 3", 1024, 400);
    assert_int_equal(r.rc, 0);
    assert_true(r.deadline_passed);
    assert_int_equal(r.exit_code, -1);
    assert_true(uv_now(&loop) - t0 < 2500);
    result_finish(&r);
}

static void files_round_trip_and_refusals(void **state)
{
    struct result r = { 0 };
    uint8_t *blob = sl_malloc(BLOB_BYTES);

    (void)state;
    assert_non_null(blob);
    randombytes_buf(blob, BLOB_BYTES);
    l->ops->write_file(l, ctr_id, "/tmp/blob.bin", blob, BLOB_BYTES, 0600, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);

    l->ops->stat(l, ctr_id, "/tmp/blob.bin", on_stat, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_false(r.is_dir);
    assert_int_equal(r.size, BLOB_BYTES);
    result_finish(&r);

    l->ops->read_file(l, ctr_id, "/tmp/blob.bin", 8u * 1024u * 1024u, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.len, BLOB_BYTES);
    assert_memory_equal(r.data, blob, BLOB_BYTES);
    result_finish(&r);

    /* Overwrite with something smaller: the file is replaced. */
    l->ops->write_file(l, ctr_id, "/tmp/blob.bin", "tiny", 4, 0644, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/tmp/blob.bin", 100, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.len, 4);
    assert_memory_equal(r.data, "tiny", 4);
    result_finish(&r);

    /* An empty file. */
    l->ops->write_file(l, ctr_id, "/tmp/empty", "", 0, 0644, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/tmp/empty", 100, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.len, 0);
    result_finish(&r);

    l->ops->stat(l, ctr_id, "/workspace/repo", on_stat, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_true(r.is_dir);
    result_finish(&r);

    l->ops->read_file(l, ctr_id, "/workspace", 100, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EISDIR);
    result_finish(&r);

    l->ops->write_file(l, ctr_id, "/workspace/repo", "x", 1, 0644, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EISDIR);
    result_finish(&r);

    l->ops->read_file(l, ctr_id, "/no/such/file", 100, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    result_finish(&r);

    l->ops->stat(l, ctr_id, "/no/such/file", on_stat, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    result_finish(&r);

    l->ops->write_file(l, ctr_id, "/no/such/dir/file", "x", 1, 0644, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    result_finish(&r);

    l->ops->write_file(l, ctr_id, "/tmp/blob.bin", blob, BLOB_BYTES, 0600, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/tmp/blob.bin", 1024 * 1024, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ETOOBIG);
    assert_int_equal(r.len, BLOB_BYTES);
    result_finish(&r);

    /* Symbolic links are followed, inside the container: to a file, through a directory link,
     * to nothing; a device is not a regular file; stat reports the target of a link. */
    run_sh(&r,
           "printf linked >/tmp/target && ln -s /tmp/target /tmp/link && ln -s /tmp /tmp/dirlink "
           "&& ln -s /tmp/nothing /tmp/dangling",
           1024, 0);
    assert_int_equal(r.exit_code, 0);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/tmp/link", 1024, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.len, 6);
    assert_memory_equal(r.data, "linked", 6);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/tmp/dirlink/target", 1024, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.len, 6);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/tmp/dangling", 1024, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    result_finish(&r);
    l->ops->read_file(l, ctr_id, "/dev/zero", 1024, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFILE);
    result_finish(&r);
    l->ops->stat(l, ctr_id, "/tmp/dirlink", on_stat, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_true(r.is_dir);
    result_finish(&r);
    sl_free(blob);
}

static void invalid_input_fails_asynchronously(void **state)
{
    struct result r = { 0 };
    const char *argv[] = { "true" };
    struct sl_launcher_exec e = { .argv = argv, .argc = 1 };

    (void)state;
    l->ops->exec(l, "bad/id", &e, on_exec, &r);
    assert_false(r.done);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    result_finish(&r);

    l->ops->read_file(l, ctr_id, "relative/path", 10, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    result_finish(&r);

    l->ops->read_file(l, ctr_id, "/tmp/../etc/passwd", 10, on_read, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EINVAL);
    result_finish(&r);

    l->ops->exec(l, "no-such-container-sl-t", &e, on_exec, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_ENOTFOUND);
    assert_non_null(strstr(r.err, "No such container"));
    result_finish(&r);
}

static void list_finds_by_label_and_remove_removes(void **state)
{
    struct result r = { 0 };

    (void)state;
    l->ops->list(l, LABEL, on_list, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_true(r.found);
    assert_true(r.found_running);
    assert_true(r.found_env);
    assert_string_equal(r.found_ip, ctr_ip);
    result_finish(&r);

    l->ops->list(l, "sluice.no-such-label-anywhere", on_list, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.n_found, 0);
    result_finish(&r);

    l->ops->remove(l, ctr_id, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);

    l->ops->remove(l, ctr_id, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    result_finish(&r);

    l->ops->list(l, LABEL, on_list, &r);
    wait_for(&r);
    assert_int_equal(r.rc, 0);
    assert_false(r.found);
    result_finish(&r);
}

static void an_unreachable_daemon_is_unavailable(void **state)
{
    struct sl_launcher *l2 = NULL;
    struct result r = { 0 };
    bool closed = false;

    (void)state;
    assert_int_equal(sl_docker_launcher_create(&loop, "/nonexistent/sl-t-docker.sock", &l2), 0);
    l2->ops->ping(l2, on_done, &r);
    wait_for(&r);
    assert_int_equal(r.rc, SL_EUNAVAILABLE);
    /* The socket and why, not curl's "localhost port 80". */
    if (strstr(r.err, "cannot connect to /nonexistent/sl-t-docker.sock: No such file or directory")
        == NULL) {
        fail_msg("error text: %s", r.err);
    }
    result_finish(&r);
    l2->ops->close(l2, on_closed, &closed);
    while (!closed) {
        (void)uv_run(&loop, UV_RUN_ONCE);
    }
    assert_int_equal(sl_docker_launcher_create(&loop, "", &l2), SL_EINVAL);
}

static void close_cancels_operations_in_flight(void **state)
{
    struct sl_launcher *l2 = NULL;
    struct result r1 = { 0 };
    struct result r2 = { 0 };
    bool closed = false;

    (void)state;
    assert_int_equal(sl_docker_launcher_create(&loop, SOCK, &l2), 0);
    l2->ops->ping(l2, on_done, &r1);
    l2->ops->has_image(l2, IMAGE, on_done, &r2);
    l2->ops->close(l2, on_closed, &closed);
    assert_false(r1.done);
    assert_false(closed);
    while (!closed) {
        (void)uv_run(&loop, UV_RUN_ONCE);
        /* Every operation reports before `closed`. */
        if (closed) {
            assert_true(r1.done);
            assert_true(r2.done);
        }
    }
    assert_int_equal(r1.rc, SL_ECANCELED);
    assert_int_equal(r2.rc, SL_ECANCELED);
    result_finish(&r1);
    result_finish(&r2);
}

/*
 * The allocation-failure sweep (docs/style.md §9): the Nth allocation of sluice's own code fails,
 * for every N until an operation gets through. Each operation still reports exactly once, from the
 * loop, and nothing leaks (LeakSanitizer in the sanitizer build).
 */
static void allocation_failures_report_once_and_leak_nothing(void **state)
{
    const char *argv[] = { "true" };
    struct sl_launcher_exec e = { .argv = argv, .argc = 1, .max_stdout = 16, .max_stderr = 16 };
    static const uint16_t tcp[] = { 3128 };
    const struct sl_launcher_egress egress = { GATEWAY, tcp, 1, NULL, 0 };

    (void)state;
    for (int kind = 0; kind < 5; kind++) {
        bool passed = false;

        for (long n = 1; n < 200 && !passed; n++) {
            struct result r = { 0 };

            sl_mem_fail_after(n);
            switch (kind) {
            case 0:
                l->ops->ensure_network(l, &test_net, on_done, &r);
                break;
            case 1:
                l->ops->list(l, LABEL, on_list, &r);
                break;
            case 2:
                l->ops->stat(l, "no-such-container-sl-t", "/etc", on_stat, &r);
                break;
            case 3:
                l->ops->set_egress(l, "no-such-container-sl-t", &egress, on_done, &r);
                break;
            default:
                l->ops->exec(l, "no-such-container-sl-t", &e, on_exec_rc, &r);
                break;
            }
            assert_false(r.done);
            while (!r.done) {
                (void)uv_run(&loop, UV_RUN_ONCE);
            }
            passed = sl_mem_failures() == 0;
            sl_mem_fail_after(0);
            if (passed) {
                assert_int_equal(r.rc, kind >= 2 ? SL_ENOTFOUND : 0);
            } else {
                if (!(r.rc == 0 || r.rc == SL_ENOMEM || r.rc == SL_ENOTFOUND || r.rc == SL_EIO)) {
                    print_error("kind %d n %ld: rc %d %s\n", kind, n, r.rc, r.err);
                }
                assert_true(r.rc == 0 || r.rc == SL_ENOMEM || r.rc == SL_ENOTFOUND
                            || r.rc == SL_EIO);
            }
            result_finish(&r);
        }
        assert_true(passed);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ensure_network_creates_then_accepts),
        cmocka_unit_test(has_image_finds_present_and_missing),
        cmocka_unit_test(pull_names_an_unreachable_registry),
        cmocka_unit_test(create_and_start_runs_a_hardened_container),
        cmocka_unit_test(create_installs_the_inner_wall_and_set_egress_replaces_it),
        cmocka_unit_test(exec_reports_exit_code_and_split_streams),
        cmocka_unit_test(exec_runs_in_the_given_directory_with_signal_codes),
        cmocka_unit_test(exec_caps_output_and_marks_truncation),
        cmocka_unit_test(an_unreachable_daemon_is_unavailable),
        cmocka_unit_test(exec_deadline_abandons_the_stream),
        cmocka_unit_test(files_round_trip_and_refusals),
        cmocka_unit_test(invalid_input_fails_asynchronously),
        cmocka_unit_test(allocation_failures_report_once_and_leak_nothing),
        cmocka_unit_test(list_finds_by_label_and_remove_removes),
        cmocka_unit_test(close_cancels_operations_in_flight),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
