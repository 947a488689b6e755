/* placeholder until the policy subcommand lands (replaced by its author) */
#include "base/log.h"
#include "cmd/cmd.h"

int sl_cmd_policy(int argc, char **argv)
{
    (void)argc;
    sl_eprintf("'%s' is not built yet", argv[0]);
    return SL_CMD_USAGE;
}
