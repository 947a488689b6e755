/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker.h - the Docker backend of control/sandbox/launcher.h: the Engine API
 * (v1.41) over the daemon's unix socket (or over TCP with TLS client certificates,
 * sl_docker_launcher_create_tls, where the inner wall is a helper container's work), with
 * libcurl's multi interface driven by the control plane's libuv loop (one uv_poll_t per socket
 * curl opens, one uv_timer_t for curl's timeouts).
 * Nothing blocks the loop; each HTTP call is one easy handle.
 *
 * How the operations map onto the API:
 *   ping             GET /_ping
 *   ensure_network   GET /networks/NAME, POST /networks/create when it is missing (internal,
 *                    ICC off, pinned bridge name, IPAM subnet and gateway, label
 *                    sluice.managed=1); an existing one is checked setting by setting
 *   has_image        GET /images/NAME/json
 *   pull_image       POST /images/create?fromImage=NAME&tag=TAG (`latest` when the reference
 *                    has no tag or digest), X-Registry-Auth with the credentials given; the
 *                    streamed progress is read as it arrives (control/sandbox/dockerpull) and
 *                    an error line in it fails the pull; the deadline is the caller's
 *   create_and_start POST /containers/create, PUT /containers/ID/archive?path=/ (one tar built
 *                    in memory with libarchive: the directories, then the files; missing parent
 *                    directories are created by the daemon, mode 0755, owner root, and existing
 *                    ones are left as they are), POST .../start, GET .../json for the address
 *                    and the network namespace (NetworkSettings.SandboxKey), in which the inner
 *                    wall is installed on the thread pool (docker_wall.c); a failure after the
 *                    create removes the container before the callback. The spec's `cmd` is
 *                    the Entrypoint (the request then has no Cmd, so the image's is not used)
 *   set_egress       GET /containers/ID/json (it must be running), then the inner wall
 *                    replaced in the namespace it names
 *   exec             POST /containers/ID/exec, POST /exec/EID/start (attach stream,
 *                    demultiplexed by control/sandbox/dockerframe), GET /exec/EID/json for the exit
 * code (polled every 50 ms, at most 10 times, while it still says Running; still running after
 * that: rc 0 with exit_code -1). The exec runs as the container's user; stdin is not attached stat
 * HEAD /containers/ID/archive?path=P (the X-Docker-Container-Path-Stat header); the path itself is
 * not followed when it is a symbolic link read_file        stat, then GET archive; the one regular
 * file in the tar is returned. A symbolic link is not followed: reading one fails with SL_EINVAL
 * ("is a symbolic link"), as does any other non-regular file write_file       stat (a directory is
 * SL_EISDIR), then PUT archive?path=DIRNAME with one entry (owner root) remove           DELETE
 * /containers/ID?force=true&v=true (404 counts as removed) list             GET
 * /containers/json?all=1&filters={"label":[KEY]}, then GET /containers/ID/json for each (one that
 * vanished meanwhile is skipped)
 *
 * Limits: control responses are capped at 8 MiB; an exec keeps at most max_stdout/max_stderr
 * bytes and drops the rest; a read_file keeps at most `max` bytes. Control operations have a
 * 30 s deadline for the whole operation (a create_and_start that fails gets 30 s more to remove
 * its container). An exec's deadline (deadline_ms) is enforced through the transfer timeouts
 * libcurl reports to the loop timer: when it passes, the transfer in flight is dropped and the
 * result has deadline_passed and exit_code -1.
 *
 * Container ids and names must match [A-Za-z0-9][A-Za-z0-9_.-]* (at most 128 characters),
 * network names the same, paths must be absolute without `.`/`..` components; anything else
 * fails with SL_EINVAL before any request is made.
 *
 * Results: `err` is NULL when rc is 0 (for exec: when r->rc is 0, deadline passed or not),
 * otherwise one line starting "docker: ", carrying the daemon's message when it sent one; it
 * never contains request bodies (environment values, file data). Codes: no answer, a refused
 * connection or a timeout is SL_EUNAVAILABLE; HTTP 404 SL_ENOTFOUND, other 4xx SL_EINVAL (a name
 * conflict at create included), 5xx SL_EIO; a malformed answer SL_EIO; an existing network with
 * other settings SL_EEXIST. A create call that gets no answer at all (the daemon wedged) leaves
 * no id to remove: such a container, if it was made, is found by a list by label.
 *
 * Closing: operations in flight complete with SL_ECANCELED (a create_and_start cancelled
 * after its create leaves the container behind: a later list by label finds it), then the
 * multi handle and every uv handle are closed, then `closed(arg)` runs once.
 */
#ifndef SL_CONTROL_SANDBOX_DOCKER_H
#define SL_CONTROL_SANDBOX_DOCKER_H

#include <stdint.h>

#include <uv.h>

#include "base/err.h"
#include "control/sandbox/launcher.h"

/*
 * Creates a launcher talking to the daemon at `socket_path` (borrowed; copied), running on
 * `loop`. Makes no request yet. Returns 0 with `*out` set, SL_EINVAL for an empty or overlong
 * path, SL_ENOMEM, or SL_EIO when libcurl cannot be set up; on failure `*out` is untouched and
 * nothing was allocated. Release with (*out)->ops->close().
 */
SL_MUST_CHECK int sl_docker_launcher_create(uv_loop_t *loop, const char *socket_path,
                                            struct sl_launcher **out);

/* An engine over TCP with TLS: the daemon runs with --tlsverify, so both sides show a
 * certificate. Every pointer is borrowed for the call (copied). */
struct sl_docker_tls {
    /* The engine's IPv4 address (its certificate must name it) and TCP port (2376). */
    const char *host;
    uint16_t port;
    /* PEM files: the CA that signed the engine's certificate, our client certificate and its
     * key. Read by libcurl at each new connection. */
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    /* The image of the inner wall's helper on that engine (docker_wall.c): one holding
     * `/sluice` (sluice's own binary, `sluice wall`) and its libraries; NULL for none, and then
     * a create or set_egress with an inner wall fails: a network namespace on another machine
     * cannot be entered from here. */
    const char *wall_image;
};

/*
 * Creates a launcher talking to the engine `t` describes, as sl_docker_launcher_create() does
 * for a unix socket; every operation behaves the same, but the inner wall, which a helper
 * container on that engine installs (docs/scale-lab.md "The Swarm backend"). Returns 0 with
 * `*out`, SL_EINVAL (an incomplete `t`, a host that is not an IPv4 address), SL_ENOMEM or SL_EIO.
 */
SL_MUST_CHECK int sl_docker_launcher_create_tls(uv_loop_t *loop, const struct sl_docker_tls *t,
                                                struct sl_launcher **out);

#endif
