/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/integration/swarm_probe.c - one call of the Swarm launcher (control/sandbox/swarm.h)
 * per run, for tests/integration/swarm_launcher.sh against the lab of tools/swarm-lab.sh:
 *
 *   swarm_probe ping | net NAME SUBNET GATEWAY | create NAME NETWORK IMAGE [WALL_ADDR PORT]
 *             | exec ID ARG... | write ID PATH TEXT | read ID PATH | list KEY | rm ID
 *
 * The swarm from the environment: SLSW_MANAGER (address), SLSW_PKI (ca.pem and the client's
 * control-slsw-control.pem and .key, tools/swarm-lab.sh), SLSW_WALL_IMAGE (optional), SLUICE_RUNNER
 * (the runner, the sandbox's command). Prints the result on stdout (create: "ID IP"; list: "ID
 * running|gone IP NAME" lines; exec: the output then "exit N"); exit 0, or 1 with the launcher's
 * error printed (sl_eprintf).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "base/log.h"
#include "base/mem.h"
#include "control/sandbox/launcher.h"
#include "control/sandbox/swarm.h"

static int result = 1;
static bool done;

static void fail(int rc, const char *err)
{
    sl_eprintf("swarm_probe: %d %s", rc, err != NULL ? err : "");
    result = 1;
}

static void on_done(void *arg, int rc, const char *err)
{
    (void)arg;
    done = true;
    if (rc < 0) {
        fail(rc, err);
        return;
    }
    result = 0;
}

static void on_started(void *arg, int rc, const char *err, const char *id, const char *ip)
{
    (void)arg;
    done = true;
    if (rc < 0) {
        fail(rc, err);
        return;
    }
    printf("%s %s\n", id, ip);
    result = 0;
}

static void on_exec(void *arg, const struct sl_launcher_exec_result *r)
{
    (void)arg;
    done = true;
    if (r->rc < 0) {
        fail(r->rc, r->err);
        return;
    }
    fwrite(r->out, 1, r->out_len, stdout);
    printf("exit %d\n", r->exit_code);
    result = 0;
}

static void on_read(void *arg, int rc, const char *err, const void *data, size_t len)
{
    (void)arg;
    done = true;
    if (rc < 0) {
        fail(rc, err);
        return;
    }
    fwrite(data, 1, len, stdout);
    result = 0;
}

static void on_list(void *arg, int rc, const char *err, const struct sl_launcher_entry *e, size_t n)
{
    (void)arg;
    done = true;
    if (rc < 0) {
        fail(rc, err);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        printf("%s %s %s %s\n", e[i].id, e[i].running ? "running" : "gone",
               e[i].ip[0] != '\0' ? e[i].ip : "-", e[i].name);
    }
    result = 0;
}

static void on_closed(void *arg)
{
    (void)arg;
}

/* The file's bytes (sl_malloc'd), or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0
        || (p = sl_malloc((size_t)n + 1)) == NULL || fread(p, 1, (size_t)n, f) != (size_t)n) {
        sl_free(p);
        p = NULL;
    }
    if (f != NULL) {
        (void)fclose(f);
    }
    *len = p != NULL ? (size_t)n : 0;
    return p;
}

int main(int argc, char **argv)
{
    const char *pki = getenv("SLSW_PKI");
    char ca[512];
    char cert[512];
    char key[512];
    struct sl_swarm_config c = { .manager = getenv("SLSW_MANAGER"),
                                 .port = 2376,
                                 .wall_image = getenv("SLSW_WALL_IMAGE"),
                                 .encrypted = getenv("SLSW_ENCRYPT") != NULL };
    struct sl_launcher *l = NULL;
    uv_loop_t loop;
    const char *cmd = argc > 1 ? argv[1] : "";
    char *runner = NULL;
    size_t runner_len = 0;

    if (pki == NULL || c.manager == NULL) {
        sl_eprintf("swarm_probe: SLSW_PKI and SLSW_MANAGER are needed");
        return 2;
    }
    (void)snprintf(ca, sizeof(ca), "%s/ca.pem", pki);
    (void)snprintf(cert, sizeof(cert), "%s/control-slsw-control.pem", pki);
    (void)snprintf(key, sizeof(key), "%s/control-slsw-control.key", pki);
    c.ca_file = ca;
    c.cert_file = cert;
    c.key_file = key;
    if (c.wall_image != NULL && c.wall_image[0] == '\0') {
        c.wall_image = NULL;
    }
    (void)uv_loop_init(&loop);
    if (sl_swarm_launcher_create(&loop, &c, &l) < 0) {
        sl_eprintf("swarm_probe: cannot create the launcher");
        return 1;
    }
    if (strcmp(cmd, "ping") == 0 && argc == 2) {
        l->ops->ping(l, on_done, NULL);
    } else if (strcmp(cmd, "net") == 0 && argc == 5) {
        const struct sl_launcher_network n = { argv[2], "unused0", argv[3], argv[4] };

        l->ops->ensure_network(l, &n, on_done, NULL);
    } else if (strcmp(cmd, "create") == 0 && (argc == 5 || argc == 7)) {
        static const char *const cmdv[] = { "/usr/local/bin/sluice-run", "--idle" };
        static const char *const env[] = { "SLUICE_SANDBOX=true" };
        static const char *const dirs[] = { "/workspace/repo" };
        static const struct sl_launcher_label labels[] = { { "sluice.test", "swarm" } };
        uint16_t port = argc == 7 ? (uint16_t)strtoul(argv[6], NULL, 10) : 0;
        uint16_t dns = 53;
        struct sl_launcher_egress eg = { argc == 7 ? argv[5] : NULL, &port, 1, &dns, 1 };
        struct sl_launcher_file files[2];
        struct sl_launcher_container s = {
            .name = argv[2],
            .image = argv[4],
            .network = argv[3],
            .env = env,
            .n_env = 1,
            .labels = labels,
            .n_labels = 1,
            .files = files,
            .n_files = 2,
            .dirs = dirs,
            .n_dirs = 1,
            .cmd = cmdv,
            .n_cmd = 2,
            .egress = argc == 7 ? &eg : NULL,
        };

        runner = getenv("SLUICE_RUNNER") != NULL ? slurp(getenv("SLUICE_RUNNER"), &runner_len)
                                                 : NULL;
        if (runner == NULL) {
            sl_eprintf("swarm_probe: cannot read $SLUICE_RUNNER");
            return 2;
        }
        files[0] = (struct sl_launcher_file){ cmdv[0], runner, runner_len, 0755 };
        files[1] = (struct sl_launcher_file){ "/etc/sluice/marker", "swarm\n", 6, 0644 };
        l->ops->create_and_start(l, &s, on_started, NULL);
    } else if (strcmp(cmd, "exec") == 0 && argc >= 4) {
        const struct sl_launcher_exec e = {
            (const char *const *)argv + 3, (size_t)argc - 3, NULL, 0, NULL, 65536, 65536, 0
        };

        l->ops->exec(l, argv[2], &e, on_exec, NULL);
    } else if (strcmp(cmd, "write") == 0 && argc == 5) {
        l->ops->write_file(l, argv[2], argv[3], argv[4], strlen(argv[4]), 0644, on_done, NULL);
    } else if (strcmp(cmd, "read") == 0 && argc == 4) {
        l->ops->read_file(l, argv[2], argv[3], 1 << 20, on_read, NULL);
    } else if (strcmp(cmd, "list") == 0 && argc == 3) {
        l->ops->list(l, argv[2], on_list, NULL);
    } else if (strcmp(cmd, "rm") == 0 && argc == 3) {
        l->ops->remove(l, argv[2], on_done, NULL);
    } else {
        sl_eprintf("swarm_probe: bad usage (see the top of swarm_probe.c)");
        result = 2;
        done = true;
    }
    while (!done) {
        (void)uv_run(&loop, UV_RUN_ONCE);
    }
    l->ops->close(l, on_closed, NULL);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&loop);
    sl_free(runner);
    return result;
}
