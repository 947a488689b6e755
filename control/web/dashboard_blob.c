/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/dashboard_blob.c - puts the dashboard's files (control/web/dashboard/) into sl_web's
 * read-only data, as control/sandbox/runner_blob.c does for the runner: the assembler's .incbin
 * copies each file of control/web/dashboard_files.h between two symbols and computes its length.
 * control/web/CMakeLists.txt passes the folder as SL_DASHBOARD_DIR and makes this object depend on
 * every file in it.
 */
#include "control/web/dashboard_files.h"

#ifndef SL_DASHBOARD_DIR
#error "SL_DASHBOARD_DIR must name the dashboard's folder"
#endif

#define SL_DASHBOARD_BLOB(sym, file)                      \
    __asm__(".pushsection .rodata,\"a\"\n"                \
            ".globl " #sym "\n"                           \
            ".type " #sym ", %object\n"                   \
            ".balign 16\n" #sym ":\n"                     \
            ".incbin \"" SL_DASHBOARD_DIR "/" file "\"\n" \
            ".L" #sym "_end:\n"                           \
            ".size " #sym ", .L" #sym "_end - " #sym "\n" \
            ".globl " #sym "_len\n"                       \
            ".type " #sym "_len, %object\n"               \
            ".balign 8\n" #sym "_len:\n"                  \
            ".quad .L" #sym "_end - " #sym "\n"           \
            ".size " #sym "_len, 8\n"                     \
            ".popsection\n")

#define SL_DASHBOARD_BLOB_FILE(sym, file) SL_DASHBOARD_BLOB(sym, file);
SL_DASHBOARD_FILES(SL_DASHBOARD_BLOB_FILE)
