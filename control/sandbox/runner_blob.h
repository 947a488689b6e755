/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/runner_blob.h - the sluice-run executable (control/sandbox/runner/run.c),
 * embedded.
 *
 * The control plane copies these bytes into every sandbox container as /opt/sluice/sluice-run
 * (mode 0755) and runs each command through it (docs/reference/api.md §5.3), so the sluice binary
 * needs no file beside it at run time. They are a statically linked ELF executable for the build's
 * own architecture, built from the same tree as the sluice binary holding them.
 */
#ifndef SL_CONTROL_SANDBOX_RUNNER_BLOB_H
#define SL_CONTROL_SANDBOX_RUNNER_BLOB_H

#include <stddef.h>

/* The executable's bytes, sl_runner_blob_len of them (never 0); read-only, alive for the
 * whole process. */
extern const unsigned char sl_runner_blob[];
extern const size_t sl_runner_blob_len;

#endif
