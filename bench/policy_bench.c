/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/policy_bench.c - how long one policy decision takes, and how many leaf certificates a
 * core mints per second. Prints numbers; passes or fails nothing (speed targets live here, not
 * in tests).
 *
 * Decisions: a snapshot of 1 000 environments x 100 rules (exact hosts, `*.suffix` patterns,
 * a few general globs, method filters, ports, credentials) and one client per environment;
 * a mixed workload of exact hits, wildcard hits, method refusals and misses. The figure is the
 * median over batches of the mean time per decision in the batch.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/log.h"
#include "certs/ca.h"
#include "certs/mint.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"

#define ENVS      1000
#define RULES     100
#define WORKLOAD  4096
#define BATCHES   21
#define PER_BATCH 200000
#define MINTS     2000

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Rule i of environment e: mostly exact hosts, every 10th a `*.suffix`, every 25th a glob. */
static int put_rule(struct sl_buf *b, int e, int i)
{
    if (i % 25 == 24) {
        return sl_buf_printf(b, "{\"host\":\"api-*.e%d-r%d.example\"}", e, i);
    }
    if (i % 10 == 9) {
        return sl_buf_printf(b, "{\"host\":\"*.e%d-r%d.example\",\"methods\":[\"GET\",\"HEAD\"]}",
                             e, i);
    }
    if (i % 7 == 6) {
        return sl_buf_printf(
                b,
                "{\"host\":\"h%d.e%d.example:8443\",\"credential\":{\"header\":\"Authorization\","
                "\"value\":\"Bearer t%d\"}}",
                i, e, i);
    }
    return sl_buf_printf(b, "{\"host\":\"h%d.e%d.example\"}", i, e);
}

static int build(struct sl_buf *b)
{
    if (sl_buf_append_str(b, "{\"version\":1,\"environments\":{") < 0) {
        return -1;
    }
    for (int e = 0; e < ENVS; e++) {
        if (sl_buf_printf(b, "%s\"env%d\":{\"default\":\"deny\",\"rules\":[", e ? "," : "", e)
            < 0) {
            return -1;
        }
        for (int i = 0; i < RULES; i++) {
            if ((i > 0 && sl_buf_append_str(b, ",") < 0) || put_rule(b, e, i) < 0) {
                return -1;
            }
        }
        if (sl_buf_append_str(b, "]}") < 0) {
            return -1;
        }
    }
    if (sl_buf_append_str(b, "},\"clients\":[") < 0) {
        return -1;
    }
    for (int e = 0; e < ENVS; e++) {
        if (sl_buf_printf(b, "%s{\"id\":\"c%d\",\"token\":\"t%d\",\"environment\":\"env%d\"}",
                          e ? "," : "", e, e, e)
            < 0) {
            return -1;
        }
    }
    return sl_buf_append_str(b, "]}");
}

struct item {
    const struct sl_client *client;
    struct sl_host host;
    uint16_t port;
    const char *method;
};

static int make_workload(const struct sl_snapshot *s, struct item *w)
{
    static const char *const methods[] = { "GET", "POST", "HEAD", "PUT" };
    unsigned seed = 12345;

    for (int k = 0; k < WORKLOAD; k++) {
        int e = (int)(rand_r(&seed) % ENVS);
        int i = (int)(rand_r(&seed) % RULES);
        int kind = (int)(rand_r(&seed) % 4);
        char id[32];
        char name[128];
        int n;

        (void)snprintf(id, sizeof(id), "c%d", e);
        w[k].client = sl_snapshot_find_client(s, id);
        w[k].port = 443;
        w[k].method = methods[rand_r(&seed) % 4];
        switch (kind) {
        case 0: /* an exact host (or a miss when rule i is a pattern) */
            n = snprintf(name, sizeof(name), "h%d.e%d.example", i, e);
            break;
        case 1: /* a name under a `*.suffix` rule */
            n = snprintf(name, sizeof(name), "a.b.e%d-r%d.example", e, i / 10 * 10 + 9);
            break;
        case 2: /* a glob */
            n = snprintf(name, sizeof(name), "api-x.e%d-r%d.example", e, i / 25 * 25 + 24);
            break;
        default: /* nothing matches */
            n = snprintf(name, sizeof(name), "www.unknown%d.example.org", i);
            break;
        }
        if (w[k].client == NULL
            || sl_host_normalize(sl_slice_of(name, (size_t)n), 0, &w[k].host, NULL) < 0) {
            return -1;
        }
    }
    return 0;
}

static int bench_decisions(void)
{
    static struct item work[WORKLOAD];
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    uint64_t times[BATCHES];
    uint64_t t0;
    struct sl_buf json;
    size_t allowed = 0;
    int rc;

    sl_buf_init(&json, SL_SNAPSHOT_MAX_BYTES);
    if (build(&json) < 0) {
        sl_eprintf("policy_bench: cannot build the snapshot");
        return 1;
    }
    t0 = now_ns();
    rc = sl_snapshot_parse(json.p, json.len, &s, &errs);
    if (rc < 0) {
        sl_eprintf("policy_bench: snapshot invalid: %s %s", errs.count ? errs.items[0].path : "",
                   errs.count ? errs.items[0].message : sl_strerror(rc));
        sl_policy_errors_finish(&errs);
        sl_buf_finish(&json);
        return 1;
    }
    printf("snapshot: %d environments x %d rules, %zu bytes of JSON, parsed and compiled in "
           "%.1f ms\n",
           ENVS, RULES, json.len, (double)(now_ns() - t0) / 1e6);
    sl_buf_finish(&json);
    if (make_workload(s, work) < 0) {
        sl_eprintf("policy_bench: cannot build the workload");
        sl_snapshot_unref(s);
        return 1;
    }
    for (int b = 0; b < BATCHES; b++) {
        struct sl_decision d;

        t0 = now_ns();
        for (int k = 0; k < PER_BATCH; k++) {
            const struct item *it = &work[k % WORKLOAD];
            struct sl_request_view v = { &it->host, it->port, it->method, true, NULL };

            sl_policy_decide(s, it->client, &v, 1800000000, &d);
            allowed += d.allow;
        }
        times[b] = (now_ns() - t0) * 1000u / PER_BATCH;
    }
    qsort(times, BATCHES, sizeof(times[0]), cmp_u64);
    printf("decision: median %.1f ns (min %.1f, max %.1f) over %d batches of %d; %.0f%% allowed\n",
           (double)times[BATCHES / 2] / 1000.0, (double)times[0] / 1000.0,
           (double)times[BATCHES - 1] / 1000.0, BATCHES, PER_BATCH,
           100.0 * (double)allowed / ((double)BATCHES * PER_BATCH));
    sl_snapshot_unref(s);
    return 0;
}

static int bench_mints(void)
{
    struct sl_ca *ca = NULL;
    struct sl_minter *m = NULL;
    char err[256];
    uint64_t t0;
    int rc;

    rc = sl_ca_create(&ca, err, sizeof(err));
    if (rc == 0) {
        rc = sl_minter_create(ca, &m, err, sizeof(err));
    }
    if (rc < 0) {
        sl_eprintf("policy_bench: %s", err);
        sl_ca_destroy(ca);
        return 1;
    }
    t0 = now_ns();
    for (int i = 0; i < MINTS; i++) {
        char host[64];
        X509 *leaf = NULL;

        (void)snprintf(host, sizeof(host), "h%d.bench.example", i);
        rc = sl_minter_mint(m, host, &leaf, err, sizeof(err));
        X509_free(leaf);
        if (rc < 0) {
            sl_eprintf("policy_bench: mint failed: %s", err);
            break;
        }
    }
    if (rc == 0) {
        double s = (double)(now_ns() - t0) / 1e9;

        printf("minting: %.0f leaf certificates per second on one core (%d in %.2f s)\n", MINTS / s,
               MINTS, s);
    }
    sl_minter_destroy(m);
    sl_ca_destroy(ca);
    return rc < 0;
}

int main(void)
{
    int rc = bench_decisions();

    return rc | bench_mints();
}
