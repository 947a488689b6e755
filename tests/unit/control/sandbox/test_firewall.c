/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/sandbox/test_firewall.c - the sandbox bridge's nftables table: the ruleset
 * text, input validation, table names; then, as root on the real kernel, install (twice), listing,
 * removal (twice), and real traffic from a network namespace through a veth pair whose host side
 * plays the bridge.
 *
 * Kernel objects are all test-owned: the table sluice_t_fw, the namespace sl-t-fw and the veth
 * pair sl-t-fwbr/sl-t-fwns on 10.213.251.0/24. They are removed before and after the tests
 * (tools/dockerd.sh also clears sluice_t_* tables left by a crashed run).
 */
#define _GNU_SOURCE 1 /* setns() and CLONE_NEWNET for the namespace probe */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/err.h"
#include "control/sandbox/firewall.h"

#define TABLE   "sluice_t_fw"
#define NETNS   "sl-t-fw"
#define HOST_IF "sl-t-fwbr"
#define NS_IF   "sl-t-fwns"
#define HOST_IP "10.213.251.1"
#define NS_IP   "10.213.251.2"

static const struct sl_firewall_config good = {
    .table = "sluice_sluice0",
    .bridge = "sl-br0",
    .gateway = "10.213.0.1",
    .proxy_port = 3128,
};

static char *render(const struct sl_firewall_config *cfg, int *rc)
{
    static char text[4096];
    struct sl_buf b;

    sl_buf_init(&b, 1 << 16);
    *rc = sl_firewall_render(cfg, &b);
    assert_true(b.len < sizeof(text));
    memcpy(text, sl_buf_cstr(&b), b.len + 1);
    sl_buf_finish(&b);
    return text;
}

static void ruleset_names_the_table_and_both_hooks(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "table inet sluice_sluice0 {\n"));
    assert_non_null(strstr(t, "\tchain input {\n"
                              "\t\ttype filter hook input priority filter - 10; policy accept;\n"));
    assert_non_null(strstr(t,
                           "\tchain forward {\n"
                           "\t\ttype filter hook forward priority filter - 10; policy accept;\n"));
}

static void input_accepts_replies_and_the_proxy_port_then_rejects_the_rest(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "\t\ttype filter hook input priority filter - 10; policy accept;\n"
                              "\t\tiifname \"sl-br0\" ct state established,related accept\n"
                              "\t\tiifname \"sl-br0\" ip daddr 10.213.0.1 tcp dport 3128 accept\n"
                              "\t\tiifname \"sl-br0\" meta l4proto tcp reject with tcp reset\n"
                              "\t\tiifname \"sl-br0\" reject with icmpx admin-prohibited\n"
                              "\t}\n"));
}

static void forward_rejects_from_the_bridge_and_new_connections_to_it(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "\t\ttype filter hook forward priority filter - 10; policy accept;\n"
                              "\t\tiifname \"sl-br0\" meta l4proto tcp reject with tcp reset\n"
                              "\t\tiifname \"sl-br0\" reject with icmpx admin-prohibited\n"
                              "\t\toifname \"sl-br0\" ct state established,related accept\n"
                              "\t\toifname \"sl-br0\" meta l4proto tcp reject with tcp reset\n"
                              "\t\toifname \"sl-br0\" reject with icmpx admin-prohibited\n"
                              "\t}\n}\n"));
    /* Only the proxy port is ever accepted as new traffic. */
    assert_null(strstr(strstr(t, "chain forward"), "dport"));
}

static void render_appends_after_existing_text(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, 1 << 16);
    assert_int_equal(sl_buf_append_str(&b, "# head\n"), 0);
    assert_int_equal(sl_firewall_render(&good, &b), 0);
    assert_memory_equal(sl_buf_cstr(&b), "# head\ntable inet sluice_sluice0 {\n", 34);
    sl_buf_finish(&b);
}

static void gateway_is_written_in_canonical_form(void **state)
{
    struct sl_firewall_config cfg = good;
    int rc;

    (void)state;
    cfg.gateway = "192.168.7.254";
    cfg.proxy_port = 65535;
    assert_non_null(strstr(render(&cfg, &rc), "ip daddr 192.168.7.254 tcp dport 65535 accept\n"));
    assert_int_equal(rc, 0);
}

/* Expects `cfg` refused with SL_EINVAL by render (buffer untouched) and by install (a message,
 * nothing sent to the kernel: this runs without root too). */
static void expect_refused(const struct sl_firewall_config *cfg, const char *msg_part)
{
    struct sl_buf b;
    char err[256] = "";

    sl_buf_init(&b, 1 << 16);
    assert_int_equal(sl_firewall_render(cfg, &b), SL_EINVAL);
    assert_int_equal(b.len, 0);
    sl_buf_finish(&b);
    assert_int_equal(sl_firewall_install(cfg, err, sizeof(err)), SL_EINVAL);
    if (strstr(err, msg_part) == NULL) {
        fail_msg("message \"%s\" does not say \"%s\"", err, msg_part);
    }
}

static void bad_table_names_are_refused(void **state)
{
    static const char *const bad[] = {
        NULL,
        "",
        "sbx_egress",
        "sluice",
        "sluice_a-b",
        "sluice_a b",
        "sluice_a;flush ruleset",
        "sluice_a}",
        "sluice_\"x\"",
    };
    struct sl_firewall_config cfg = good;
    char err[128];
    char too_long[SL_FIREWALL_TABLE_CAP + 1];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        cfg.table = bad[i];
        expect_refused(&cfg, "table name");
        assert_int_equal(sl_firewall_remove(bad[i], err, sizeof(err)), SL_EINVAL);
    }
    memcpy(too_long, "sluice_", 7);
    memset(too_long + 7, 'a', sizeof(too_long) - 8);
    too_long[sizeof(too_long) - 1] = '\0';
    assert_int_equal(strlen(too_long), SL_FIREWALL_TABLE_CAP);
    cfg.table = too_long;
    expect_refused(&cfg, "table name");
    assert_int_equal(sl_firewall_remove(too_long, err, sizeof(err)), SL_EINVAL);
    /* 63 characters is the longest name. */
    cfg.table = "sluice_12345678901234567890123456789012345678901234567890123456";
    assert_int_equal(strlen(cfg.table), SL_FIREWALL_TABLE_CAP - 1);
    {
        int rc;

        (void)render(&cfg, &rc);
        assert_int_equal(rc, 0);
    }
}

static void bad_bridge_names_are_refused(void **state)
{
    static const char *const bad[] = {
        NULL,     "",       ".",       "..",  "sl-br0\"", "sl br0",          "sl;br0",
        "sl{br0", "sl/br0", "sl\nbr0", "sl*", "sl\\br0",  "0123456789abcdef"
    };
    struct sl_firewall_config cfg = good;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        cfg.bridge = bad[i];
        expect_refused(&cfg, "bridge name");
    }
    cfg.bridge = "0123456789ab.-_"; /* 15 characters, every kind allowed */
    {
        int rc;

        (void)render(&cfg, &rc);
        assert_int_equal(rc, 0);
    }
}

static void bad_gateways_and_ports_are_refused(void **state)
{
    static const char *const bad[] = {
        NULL,          "",          "10.0.0",  "10.0.0.256", "10.0.0.1 ",
        "10.0.0.1/24", "::1",       "fd00::1", "localhost",  "10.0.0.1; flush ruleset",
        "010.0.0.1",   "0x0a.0.0.1"
    };
    struct sl_firewall_config cfg = good;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        cfg.gateway = bad[i];
        expect_refused(&cfg, "gateway");
    }
    cfg = good;
    cfg.proxy_port = 0;
    expect_refused(&cfg, "port");
    cfg.proxy_port = 65536;
    expect_refused(&cfg, "port");
    cfg.proxy_port = 4294967295U;
    expect_refused(&cfg, "port");
    expect_refused(NULL, "configuration");
}

static void table_names_map_network_names(void **state)
{
    char out[SL_FIREWALL_TABLE_CAP];
    char small[10];
    char big[200];
    char longname[150];

    (void)state;
    sl_firewall_table_name("sluice0", out, sizeof(out));
    assert_string_equal(out, "sluice_sluice0");
    sl_firewall_table_name("my-net.v2 x/é", out, sizeof(out));
    assert_string_equal(out, "sluice_my_net_v2_x___");
    sl_firewall_table_name("", out, sizeof(out));
    assert_string_equal(out, "sluice_");
    sl_firewall_table_name(NULL, out, sizeof(out));
    assert_string_equal(out, "sluice_");
    sl_firewall_table_name("abcdef", small, sizeof(small));
    assert_string_equal(small, "sluice_ab");
    sl_firewall_table_name("abcdef", small, 1);
    assert_string_equal(small, "");
    sl_firewall_table_name("abcdef", small, 0); /* writes nothing */
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    sl_firewall_table_name(longname, big, sizeof(big));
    assert_int_equal(strlen(big), SL_FIREWALL_TABLE_CAP - 1);
    {
        struct sl_firewall_config cfg = good;
        int rc;

        cfg.table = big;
        (void)render(&cfg, &rc);
        assert_int_equal(rc, 0);
    }
}

/* ---- on the real kernel (root) ------------------------------------------------------------ */

static void require_root(void)
{
    if (geteuid() != 0) {
        fail_msg("this test installs nftables tables and a network namespace: run it as root "
                 "(CI does); the tests above it need no rights");
    }
}

/* Runs an nft command with its output buffered; returns its status, the output in `out`. */
static int nft_list(const char *cmd, char *out, size_t cap)
{
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    int rc;

    assert_non_null(nft);
    assert_int_equal(nft_ctx_buffer_output(nft), 0);
    assert_int_equal(nft_ctx_buffer_error(nft), 0);
    rc = nft_run_cmd_from_buffer(nft, cmd);
    (void)snprintf(out, cap, "%s", nft_ctx_get_output_buffer(nft));
    nft_ctx_free(nft);
    return rc;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static void expect_line(const char *listing, const char *line)
{
    if (count(listing, line) != 1) {
        fail_msg("the listing holds \"%s\" %zu times, not once:\n%s", line, count(listing, line),
                 listing);
    }
}

static void installs_idempotently_lists_and_removes(void **state)
{
    const struct sl_firewall_config cfg = {
        .table = TABLE, .bridge = "sl-t-nobr", .gateway = "10.213.250.1", .proxy_port = 3128
    };
    char err[512] = "";
    char out[8192];

    (void)state;
    require_root();
    for (int i = 0; i < 2; i++) {
        if (sl_firewall_install(&cfg, err, sizeof(err)) != 0) {
            fail_msg("install %d: %s", i + 1, err);
        }
    }
    assert_int_equal(nft_list("list table inet " TABLE, out, sizeof(out)), 0);
    expect_line(out, "table inet " TABLE " {");
    expect_line(out, "chain input {");
    expect_line(out, "type filter hook input priority filter - 10; policy accept;");
    expect_line(out, "chain forward {");
    expect_line(out, "type filter hook forward priority filter - 10; policy accept;");
    expect_line(out, "iifname \"sl-t-nobr\" ip daddr 10.213.250.1 tcp dport 3128 accept");
    expect_line(out, "iifname \"sl-t-nobr\" ct state established,related accept");
    expect_line(out, "oifname \"sl-t-nobr\" ct state established,related accept");
    assert_int_equal(count(out, "iifname \"sl-t-nobr\" meta l4proto tcp reject with tcp reset"), 2);
    assert_int_equal(count(out, "reject with icmpx admin-prohibited"), 3);
    assert_int_equal(count(out, "reject with tcp reset"), 3);

    if (sl_firewall_remove(TABLE, err, sizeof(err)) != 0) {
        fail_msg("remove: %s", err);
    }
    assert_int_not_equal(nft_list("list table inet " TABLE, out, sizeof(out)), 0);
    if (sl_firewall_remove(TABLE, err, sizeof(err)) != 0) {
        fail_msg("removing an absent table: %s", err);
    }
}

/* ---- real traffic from a namespace -------------------------------------------------------- */

static void sh(const char *cmd)
{
    int rc = system(cmd);

    if (rc != 0) {
        fail_msg("`%s` exited %d", cmd, rc);
    }
}

static void cleanup_kernel_objects(void)
{
    char err[256];
    int rc;

    /* Deleting one end of a veth pair deletes both; missing ones are fine. */
    rc = system("ip link del " HOST_IF " 2>/dev/null; ip netns del " NETNS " 2>/dev/null");
    (void)rc;
    rc = sl_firewall_remove(TABLE, err, sizeof(err));
    (void)rc;
}

static int net_setup(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        return 0; /* the test itself fails with the reason */
    }
    cleanup_kernel_objects();
    sh("ip netns add " NETNS);
    sh("ip link add " HOST_IF " type veth peer name " NS_IF " netns " NETNS);
    sh("ip addr add " HOST_IP "/24 dev " HOST_IF " && ip link set " HOST_IF " up");
    sh("ip -n " NETNS " addr add " NS_IP "/24 dev " NS_IF " && ip -n " NETNS " link set " NS_IF
       " up && ip -n " NETNS " link set lo up");
    return 0;
}

static int net_teardown(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        cleanup_kernel_objects();
    }
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A socket of `type` bound to HOST_IP on an ephemeral port; a TCP one listens. */
static int host_socket(int type, unsigned *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    assert_int_not_equal(fd, -1);
    assert_int_equal(inet_pton(AF_INET, HOST_IP, &sa.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (type == SOCK_STREAM) {
        assert_int_equal(listen(fd, 8), 0);
    }
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* In the namespace (a forked child joins it): sends one datagram to, or connects a TCP socket to,
 * HOST_IP:port and waits at most 2 s for the outcome. Returns 0 on a connect (TCP) or an
 * answer (UDP), the errno of a failure, or ETIMEDOUT; *ms is how long it took. */
static int probe_from_ns(int type, unsigned port, int64_t *ms)
{
    int64_t t0 = now_ms();
    int status = 0;
    pid_t pid = fork();

    assert_int_not_equal(pid, -1);
    if (pid == 0) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        struct pollfd p = { .events = POLLIN | POLLOUT };
        int nsfd = open("/run/netns/" NETNS, O_RDONLY | O_CLOEXEC);
        int e = 0;
        socklen_t elen = sizeof(e);

        if (nsfd == -1 || setns(nsfd, CLONE_NEWNET) == -1) {
            _exit(250);
        }
        p.fd = socket(AF_INET, type | SOCK_NONBLOCK, 0);
        if (p.fd == -1 || inet_pton(AF_INET, HOST_IP, &sa.sin_addr) != 1) {
            _exit(251);
        }
        if (connect(p.fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS) {
            _exit(errno);
        }
        if (type == SOCK_DGRAM) {
            p.events = POLLIN;
            if (send(p.fd, "x", 1, 0) == -1) {
                _exit(errno);
            }
        }
        if (poll(&p, 1, 2000) != 1) {
            _exit(ETIMEDOUT);
        }
        if (getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &e, &elen) == -1) {
            _exit(252);
        }
        _exit(e);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *ms = now_ms() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) >= 250) {
        fail_msg("the probe in namespace " NETNS " could not run (status 0x%x)", status);
    }
    return WEXITSTATUS(status);
}

static void only_the_proxy_port_is_reachable_from_the_bridge(void **state)
{
    struct sl_firewall_config cfg = { .table = TABLE, .bridge = HOST_IF, .gateway = HOST_IP };
    unsigned proxy_port;
    unsigned other_port;
    unsigned udp_port;
    int proxy_fd;
    int other_fd;
    int udp_fd;
    int64_t ms;
    int rc;
    char err[512] = "";
    char buf[8];

    (void)state;
    require_root();
    proxy_fd = host_socket(SOCK_STREAM, &proxy_port);
    other_fd = host_socket(SOCK_STREAM, &other_port);
    udp_fd = host_socket(SOCK_DGRAM, &udp_port);

    /* Without the table everything on the host answers: the test path is real. */
    assert_int_equal(probe_from_ns(SOCK_STREAM, other_port, &ms), 0);

    cfg.proxy_port = proxy_port;
    if (sl_firewall_install(&cfg, err, sizeof(err)) != 0) {
        fail_msg("install: %s", err);
    }
    assert_int_equal(probe_from_ns(SOCK_STREAM, proxy_port, &ms), 0);

    rc = probe_from_ns(SOCK_STREAM, other_port, &ms);
    if (rc != ECONNREFUSED || ms > 1000) {
        fail_msg("another host port: %s after %lld ms, expected a refusal within 1 s", strerror(rc),
                 (long long)ms);
    }
    /* UDP gets ICMP admin-prohibited, which Linux reports as EHOSTUNREACH (no listener at all
     * would be ECONNREFUSED); the datagram never reaches the host's socket. */
    rc = probe_from_ns(SOCK_DGRAM, udp_port, &ms);
    if (rc != EHOSTUNREACH || ms > 1000) {
        fail_msg("UDP to a host port: %s after %lld ms, expected EHOSTUNREACH within 1 s",
                 strerror(rc), (long long)ms);
    }
    assert_int_equal(recv(udp_fd, buf, sizeof(buf), 0), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    rc = probe_from_ns(SOCK_DGRAM, 53, &ms);
    if (rc == 0 || ms > 1000) {
        fail_msg("DNS to the gateway: %s after %lld ms, expected a failure within 1 s",
                 rc == 0 ? "answered" : strerror(rc), (long long)ms);
    }

    if (sl_firewall_remove(TABLE, err, sizeof(err)) != 0) {
        fail_msg("remove: %s", err);
    }
    assert_int_equal(probe_from_ns(SOCK_STREAM, other_port, &ms), 0);
    assert_int_equal(close(udp_fd), 0);
    assert_int_equal(close(other_fd), 0);
    assert_int_equal(close(proxy_fd), 0);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(ruleset_names_the_table_and_both_hooks),
        cmocka_unit_test(input_accepts_replies_and_the_proxy_port_then_rejects_the_rest),
        cmocka_unit_test(forward_rejects_from_the_bridge_and_new_connections_to_it),
        cmocka_unit_test(render_appends_after_existing_text),
        cmocka_unit_test(gateway_is_written_in_canonical_form),
        cmocka_unit_test(bad_table_names_are_refused),
        cmocka_unit_test(bad_bridge_names_are_refused),
        cmocka_unit_test(bad_gateways_and_ports_are_refused),
        cmocka_unit_test(table_names_map_network_names),
    };
    const struct CMUnitTest kernel[] = {
        cmocka_unit_test(installs_idempotently_lists_and_removes),
        cmocka_unit_test(only_the_proxy_port_is_reachable_from_the_bridge),
    };
    int failed = cmocka_run_group_tests_name("firewall", pure, NULL, NULL);

    failed += cmocka_run_group_tests_name("firewall.kernel", kernel, net_setup, net_teardown);
    return failed == 0 ? 0 : 1;
}
