/* placeholder until the ca subcommand lands (replaced by its author) */
#include "base/log.h"
#include "cmd/cmd.h"

int sl_cmd_ca(int argc, char **argv)
{
    (void)argc;
    sl_eprintf("'%s' is not built yet", argv[0]);
    return SL_CMD_USAGE;
}
