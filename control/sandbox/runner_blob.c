/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/runner_blob.c - puts the sluice-run executable into sl_sandbox's read-only data.
 *
 * The assembler's .incbin copies the file named by SL_RUNNER_PATH (control/sandbox/CMakeLists.txt
 * passes the path of the sluice-run target, and makes this object depend on it) between two
 * symbols; the length is computed by the assembler too, so no generated source is needed.
 * Top-level asm in a C file rather than a .S file: the compiler then marks the object's stack
 * non-executable as it does every other.
 */
#include "control/sandbox/runner_blob.h"

#ifndef SL_RUNNER_PATH
#error "SL_RUNNER_PATH must name the sluice-run executable"
#endif

__asm__(".pushsection .rodata,\"a\"\n"
        ".globl sl_runner_blob\n"
        ".type sl_runner_blob, %object\n"
        ".balign 16\n"
        "sl_runner_blob:\n"
        ".incbin \"" SL_RUNNER_PATH "\"\n"
        ".Lsl_runner_blob_end:\n"
        ".size sl_runner_blob, .Lsl_runner_blob_end - sl_runner_blob\n"
        ".globl sl_runner_blob_len\n"
        ".type sl_runner_blob_len, %object\n"
        ".balign 8\n"
        "sl_runner_blob_len:\n"
        ".quad .Lsl_runner_blob_end - sl_runner_blob\n"
        ".size sl_runner_blob_len, 8\n"
        ".popsection\n");
