/* systemd.c - socket activation and notifications.  See systemd.h. */
#include "serve/systemd.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "os/os.h"

void systemd_notify(const char *path, const char *state, struct weir_log *log)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if ((path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof sun.sun_path)
        return;
    memcpy(sun.sun_path, path, strlen(path));
    if (path[0] == '@')
        sun.sun_path[0] = 0;   /* an abstract socket */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    int fd = os_socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd < 0 || sendto(fd, state, strlen(state), 0, (struct sockaddr *)&sun, len) < 0)
        log_msg(log, LOG_WARN, "NOTIFY_SOCKET %s: cannot tell systemd '%s': %s", path, state,
                strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* Descriptor fd, passed by systemd, as a listener. */
static int take_socket(int fd, struct tcp_listener *l, struct weir_error *err)
{
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
        return error_set(err, WEIR_EXIT_NETWORK, "LISTEN_FDS: descriptor %d is not a "
                         "listening socket", fd);
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return error_sys(err, WEIR_EXIT_NETWORK, errno, "LISTEN_FDS: descriptor %d", fd);
    struct tcp_settings none = {0};
    return tcp_listener_adopt(&none, fd, l, err);
}

int systemd_sockets(struct tcp_listener *l, int max, int *n, struct weir_error *err)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    *n = 0;
    if (!pid || !fds || strtol(pid, NULL, 10) != (long)getpid())
        return 0;
    char given[32];
    snprintf(given, sizeof given, "%s", fds);
    long count = strtol(given, NULL, 10);
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (count < 1 || count > max)
        return error_set(err, WEIR_EXIT_NETWORK, "LISTEN_FDS=%s: not 1 to %d sockets", given,
                         max);
    for (int fd = 3; fd < 3 + count; fd++) {
        if (take_socket(fd, &l[*n], err))
            return -1;
        (*n)++;
    }
    return 1;
}
