/* SPDX-License-Identifier: Apache-2.0 */
#include "base/notify.h"

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

bool sl_notify(const char *path, const char *state)
{
    struct sockaddr_un sa;
    size_t len;
    socklen_t salen;
    ssize_t sent;
    int fd;

    if (path == NULL || (path[0] != '/' && path[0] != '@')) {
        return false;
    }
    len = strlen(path);
    if (len >= sizeof(sa.sun_path)) {
        return false;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0';
    }
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        return false;
    }
    sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (const struct sockaddr *)&sa, salen);
    (void)close(fd);
    return sent == (ssize_t)strlen(state);
}
