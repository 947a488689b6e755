/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/cmd.h - the subcommands of the `sluice` binary.
 *
 * Each takes the arguments after its own name (argv[0] is the subcommand's name) and returns
 * the process exit status: 0 success, 1 a negative answer or a failed operation (an invalid
 * policy, a refused request), 2 a usage error. Usage errors print one line naming the problem.
 */
#ifndef SL_CMD_CMD_H
#define SL_CMD_CMD_H

#include <stdbool.h>

struct sl_store;

/* Exit statuses shared by every subcommand. */
enum sl_cmd_exit {
    SL_CMD_OK = 0,
    SL_CMD_FAIL = 1,
    SL_CMD_USAGE = 2,
};

/* `sluice ca init|show ...` */
int sl_cmd_ca(int argc, char **argv);

/* `sluice backup --data DIR --out FILE`, `sluice restore --from FILE --data DIR` */
int sl_cmd_backup(int argc, char **argv);
int sl_cmd_restore(int argc, char **argv);

/* `sluice config check FILE [--for up|control|proxy]` */
int sl_cmd_config(int argc, char **argv);

/* `sluice control [flags]` */
int sl_cmd_control(int argc, char **argv);

/* `sluice pki init|issue|revoke|list DIR ...` */
int sl_cmd_pki(int argc, char **argv);

/* `sluice policy check|explain ...` */
int sl_cmd_policy(int argc, char **argv);

/* `sluice proxy [flags]` */
int sl_cmd_proxy(int argc, char **argv);

/* `sluice up [flags] [-- proxy flags]` */
int sl_cmd_up(int argc, char **argv);

/* The flags of `sluice up`, `control` or `proxy` checked as the command would (usage errors
 * printed), without running anything: 0 or 2. What `sluice config check` runs. */
int sl_cmd_up_check(int argc, char **argv);
int sl_cmd_control_check(int argc, char **argv);
int sl_cmd_proxy_check(int argc, char **argv);

/* `sluice wall --gateway ADDR [--tcp PORTS] [--udp PORTS]` (cmd/wall.c) */
int sl_cmd_wall(int argc, char **argv);

/* `sluice user add NAME [--admin] [--email E] [--data DIR]`, `user disable|enable NAME`,
 * `user list` */
int sl_cmd_user(int argc, char **argv);

/* Creates the user `name` in `st` (with `email`, NULL for none) and a new API token of scope
 * admin for an admin and write otherwise, written to `token` (SL_TOKEN_SIZE bytes,
 * control/store/secrets.h; wiped on error). Returns 0, SL_EEXIST (a user of that name exists,
 * ignoring ASCII case: its name goes to `taken`, `taken_len` bytes, when that is not NULL) or
 * another negative code. What `sluice user add` and `sluice up` share. */
int sl_cmd_user_create(struct sl_store *st, const char *name, bool admin, const char *email,
                       char *token, char *taken, size_t taken_len);

#endif
