/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn.h - one client connection of the proxy: the state machine of SPEC.md §4.
 *
 *   REQUEST_HEAD --CONNECT allowed--> TUNNEL_SNIFF --ClientHello--> TLS_HANDSHAKE (MINTING)
 *        ^   |                             |plain HTTP, port 80            |
 *        |   |absolute-form allowed        v                               v
 *        |   +-------------------------> DIALING --upstream ready--> FORWARDING --101--> RELAY
 *        +------------------------------------------- response complete ---+
 *   Any refusal or error -> a response with X-Sluice-Reason when one can still be sent ->
 *   CLOSING (flush, FIN, linger while discarding input) -> closed.
 *
 * Every request is decided against the worker's newest snapshot when its head has arrived,
 * before any byte of it leaves; the connection keeps that snapshot until the request's audit
 * line is written. The connection's memory is bounded: two streams (proxy/stream.h), two
 * parsers with capped heads, one arena per request, nothing that grows with a body.
 *
 * The functions are declared in proxy_int.h (sl__conn_accept and friends): a connection is
 * created by its worker's listener and frees itself when it closes.
 */
#ifndef SL_PROXY_CONN_H
#define SL_PROXY_CONN_H

#include "proxy/proxy_int.h"

#endif
