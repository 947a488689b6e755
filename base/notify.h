/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/notify.h - telling systemd how a daemon started (the sd_notify protocol, written by hand:
 * one datagram to the unix socket $NOTIFY_SOCKET names; no libsystemd). Outside a
 * `Type=notify` unit the variable is unset and nothing is sent.
 */
#ifndef SL_BASE_NOTIFY_H
#define SL_BASE_NOTIFY_H

#include <stdbool.h>

/* Sends `state` ("READY=1\nSTATUS=...", newline-separated assignments) to the socket `path`
 * names (the value of $NOTIFY_SOCKET: an absolute path, or an abstract name written with a
 * leading '@'; NULL sends nothing). Returns true when it was sent, false otherwise (never fatal:
 * the caller goes on). */
bool sl_notify(const char *path, const char *state);

#endif
