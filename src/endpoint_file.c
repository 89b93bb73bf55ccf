/* endpoint_file.c - stdin, stdout and files.  See include/weir/endpoint.h. */
#include "weir/endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void endpoint_none(struct endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    ep->fd = -1;
}

#define PIPE_SIZE (1 << 20)

static void endpoint_classify(struct endpoint *ep)
{
    struct stat st;
    if (fstat(ep->fd, &st) == 0) {
        ep->is_socket = S_ISSOCK(st.st_mode);
        ep->regular = S_ISREG(st.st_mode);
        /* A larger pipe means fewer, larger reads and writes on both sides of
         * it.  Only a hint: failure (an old kernel, a lower
         * /proc/sys/fs/pipe-max-size) changes nothing. */
        if (S_ISFIFO(st.st_mode) && fcntl(ep->fd, F_GETPIPE_SZ) < PIPE_SIZE)
            (void)fcntl(ep->fd, F_SETPIPE_SZ, PIPE_SIZE);
    }
}

int endpoint_open_input(const char *path, struct endpoint *ep, struct weir_error *err)
{
    endpoint_none(ep);
    if (!path || strcmp(path, "-") == 0) {
        snprintf(ep->name, sizeof ep->name, "input <stdin>");
        ep->fd = STDIN_FILENO;
        if (fcntl(ep->fd, F_GETFD) < 0)
            return error_sys(err, WEIR_EXIT_INPUT, errno, "%s", ep->name);
    } else {
        snprintf(ep->name, sizeof ep->name, "input %s", path);
        ep->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ep->fd < 0)
            return error_sys(err, WEIR_EXIT_INPUT, errno, "%s: open", ep->name);
        ep->owned = true;
    }
    endpoint_classify(ep);
    if (ep->regular)   /* a hint only; failure changes nothing */
        (void)posix_fadvise(ep->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

int endpoint_open_output(const char *path, bool force, struct endpoint *ep,
                         struct weir_error *err)
{
    endpoint_none(ep);
    if (strcmp(path, "-") == 0) {
        snprintf(ep->name, sizeof ep->name, "output <stdout>");
        ep->fd = STDOUT_FILENO;
        if (fcntl(ep->fd, F_GETFD) < 0)
            return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s", ep->name);
        endpoint_classify(ep);
        return 0;
    }
    snprintf(ep->name, sizeof ep->name, "output %s", path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && !force)
        return error_set(err, WEIR_EXIT_OUTPUT,
                         "%s: file exists (use -f to overwrite it)", ep->name);
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
    if (!force)
        flags |= O_EXCL;   /* no race between the check above and the open */
    ep->fd = open(path, flags, 0666);
    if (ep->fd < 0 && errno == EEXIST && !force) {
        /* not a regular file (a device or FIFO appeared): open it as it is */
        ep->fd = open(path, O_WRONLY | O_CLOEXEC);
    }
    if (ep->fd < 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open", ep->name);
    ep->owned = true;
    endpoint_classify(ep);
    if (ep->regular && force && ftruncate(ep->fd, 0) != 0) {
        int e = errno;
        close(ep->fd);
        ep->fd = -1;
        return error_sys(err, WEIR_EXIT_OUTPUT, e, "%s: truncate", ep->name);
    }
    return 0;
}

int endpoint_close(struct endpoint *ep, int status, struct weir_error *err)
{
    int rc = 0;
    if (ep->fd >= 0 && ep->owned) {
        if (close(ep->fd) != 0 && errno != EINTR)
            rc = error_sys(err, status, errno, "%s: close", ep->name);
    }
    ep->fd = -1;
    return rc;
}
