/* endpoint_file.c - stdin, stdout and files.  See include/weir/endpoint.h. */
#include "weir/endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
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
    if (fstat(ep->fd, &st) != 0)
        return;
    ep->identified = true;
    ep->dev = st.st_dev;
    ep->ino = st.st_ino;
    ep->mode = st.st_mode;
    ep->is_socket = S_ISSOCK(st.st_mode);
    ep->regular = S_ISREG(st.st_mode);
    ep->blockdev = S_ISBLK(st.st_mode);
    /* A larger pipe means fewer, larger reads and writes on both sides of
     * it.  Only a hint: failure (an old kernel, a lower
     * /proc/sys/fs/pipe-max-size) changes nothing. */
    if (S_ISFIFO(st.st_mode) && fcntl(ep->fd, F_GETPIPE_SZ) < PIPE_SIZE)
        (void)fcntl(ep->fd, F_SETPIPE_SZ, PIPE_SIZE);
}

void endpoint_identify(struct endpoint *ep, int fd, const char *name)
{
    endpoint_none(ep);
    snprintf(ep->name, sizeof ep->name, "%s", name);
    struct stat st;
    if (fstat(fd, &st) == 0) {
        ep->identified = true;
        ep->dev = st.st_dev;
        ep->ino = st.st_ino;
        ep->mode = st.st_mode;
    }
}

bool endpoint_same_file(const struct endpoint *a, const struct endpoint *b)
{
    if (!a->identified || !b->identified)
        return false;
    if (S_ISCHR(a->mode) || S_ISSOCK(a->mode))
        return false;
    return a->dev == b->dev && a->ino == b->ino;
}

int endpoint_open_input(const char *path, bool closed, struct endpoint *ep,
                        struct weir_error *err)
{
    endpoint_none(ep);
    if (!path || strcmp(path, "-") == 0) {
        snprintf(ep->name, sizeof ep->name, "input <stdin>");
        if (closed)
            return error_set(err, WEIR_EXIT_INPUT,
                             "%s: standard input is closed (give -i FILE, or </dev/null "
                             "for an empty input)", ep->name);
        ep->fd = STDIN_FILENO;
    } else {
        snprintf(ep->name, sizeof ep->name, "input %s", path);
        ep->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ep->fd < 0)
            return error_sys(err, WEIR_EXIT_INPUT, errno, "%s: open", ep->name);
        ep->owned = true;
        ep->path = path;
    }
    endpoint_classify(ep);
    if (ep->regular)   /* a hint only; failure changes nothing */
        (void)posix_fadvise(ep->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

int endpoint_open_output(const char *path, bool force, bool closed, struct endpoint *ep,
                         struct weir_error *err)
{
    endpoint_none(ep);
    if (!path || strcmp(path, "-") == 0) {
        snprintf(ep->name, sizeof ep->name, "output <stdout>");
        if (closed)
            return error_set(err, WEIR_EXIT_OUTPUT,
                             "%s: standard output is closed (give -o FILE, or >/dev/null "
                             "to discard the data)", ep->name);
        ep->fd = STDOUT_FILENO;
        endpoint_classify(ep);
        return 0;
    }
    snprintf(ep->name, sizeof ep->name, "output %s", path);
    ep->path = path;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && !force)
        return error_set(err, WEIR_EXIT_OUTPUT,
                         "%s: file exists (use -f to overwrite it)", ep->name);
    /* O_EXCL: no race between the check above and the open; then only a
     * file that did not exist is one weir created */
    ep->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (ep->fd >= 0) {
        ep->created = true;
    } else if (errno == EEXIST) {
        /* -f, or not a regular file (a device or FIFO): open it as it is */
        ep->fd = open(path, O_WRONLY | O_CLOEXEC);
    }
    if (ep->fd < 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open", ep->name);
    ep->owned = true;
    endpoint_classify(ep);
    if (ep->regular && !force && !ep->created) {
        /* a regular file appeared between stat and open */
        close(ep->fd);
        ep->fd = -1;
        return error_set(err, WEIR_EXIT_OUTPUT,
                         "%s: file exists (use -f to overwrite it)", ep->name);
    }
    return 0;
}

int endpoint_truncate(struct endpoint *ep, struct weir_error *err)
{
    if (ep->fd < 0 || !ep->regular || ep->created || !ep->path)
        return 0;
    if (ftruncate(ep->fd, 0) != 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: truncate", ep->name);
    return 0;
}

static int sync_directory(struct endpoint *ep, struct weir_error *err)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", ep->path) >= (int)sizeof dir)
        return error_set(err, WEIR_EXIT_OUTPUT, "%s: path too long to sync its directory",
                         ep->name);
    const char *d = dirname(dir);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open its directory %s to sync it",
                         ep->name, d);
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL)   /* EINVAL: a directory that cannot be synced */
        rc = error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: fsync of its directory %s",
                       ep->name, d);
    close(fd);
    return rc;
}

int endpoint_sync(struct endpoint *ep, struct weir_error *err)
{
    if (ep->fd < 0 || !(ep->regular || ep->blockdev))
        return 0;
    if (fdatasync(ep->fd) != 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno,
                         "%s: fdatasync (the data may not be on stable storage)", ep->name);
    if (ep->created)
        return sync_directory(ep, err);
    return 0;
}

void endpoint_discard(struct endpoint *ep)
{
    if (ep->created && ep->path) {
        /* only what weir itself created, and never after data was written */
        (void)unlink(ep->path);
        ep->created = false;
    }
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
