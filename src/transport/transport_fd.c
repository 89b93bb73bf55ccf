/* transport_fd.c - descriptors: stdin, stdout, files, devices, pipes.  See
 * src/transport/transport.h. */
#include "transport/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/io.h"
#include "base/sync.h"
#include "os/os.h"

static ssize_t none_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                         atomic_bool *stop)
{
    (void)t, (void)buf, (void)n, (void)timeout_ms, (void)stop;
    errno = EBADF;
    return -1;
}

static ssize_t none_writev(struct transport *t, const struct iovec *iov, int cnt,
                           int timeout_ms, atomic_bool *stop)
{
    (void)t, (void)iov, (void)cnt, (void)timeout_ms, (void)stop;
    errno = EBADF;
    return -1;
}

static int none_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop)
{
    (void)t, (void)events, (void)timeout_ms, (void)stop;
    errno = EBADF;
    return -1;
}

static int none_half_close(struct transport *t, struct weir_error *err)
{
    (void)t, (void)err;
    return 0;
}

static void none_abort(struct transport *t)
{
    (void)t;
}

static int none_close(struct transport *t, bool success, atomic_bool *stop,
                      struct weir_error *err)
{
    (void)t, (void)success, (void)stop, (void)err;
    return 0;
}

static const struct transport_ops none_ops = {
    .read = none_read, .writev = none_writev, .wait = none_wait,
    .half_close = none_half_close, .abort = none_abort, .close = none_close,
};

void transport_none(struct transport *t)
{
    memset(t, 0, sizeof *t);
    t->ops = &none_ops;
    t->fd = -1;
}

/* ---- the operations on a plain descriptor ---------------------------------- */

ssize_t transport_fd_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                          atomic_bool *stop)
{
    ssize_t r = io_read(t->fd, buf, n, timeout_ms, stop);
    transport_count(t->wire_rx, r);
    return r;
}

#define PACED_IOV_MAX 8            /* a cut write keeps at most this many parts */
#define PACED_FILE_WRITE (256u << 10)   /* -W: the most one write() to a file takes */
#define PACED_PIPE_GUESS (16 << 10)     /* -W: a pipe whose size the system will not say is
                                         * taken to be this small (macOS's and FreeBSD's
                                         * smallest): a write then waits at most for the
                                         * reader to take that much */

/* The parts of iov that fit in room bytes, into cut. */
static int cut_to(const struct iovec *iov, int cnt, size_t room, struct iovec *cut)
{
    int n = 0;
    for (int i = 0; i < cnt && n < PACED_IOV_MAX && room > 0; i++) {
        size_t len = iov[i].iov_len < room ? iov[i].iov_len : room;
        cut[n++] = (struct iovec){iov[i].iov_base, len};
        room -= len;
    }
    return n;
}

/* The room a pipe has now: what FIONREAD says is not queued; a full pipe,
 * or one that cannot tell, gets a page, which waits for the reader to take
 * one. */
static size_t pipe_room(const struct transport *t)
{
    int queued;
    if (ioctl(t->fd, FIONREAD, &queued) == 0 && queued >= 0 &&
        t->pipe_size - queued > PIPE_BUF)
        return (size_t)(t->pipe_size - queued);
    return PIPE_BUF;
}

void transport_pace_writes(struct transport *t)
{
    struct stat st;
    if (t->fd < 0 || fstat(t->fd, &st) != 0)
        return;   /* cannot tell: whole writes, as without -W */
    if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
        t->write_max = PACED_FILE_WRITE;
        return;
    }
    if (!S_ISFIFO(st.st_mode))
        return;
    int size = os_pipe_capacity(t->fd);
    t->pipe_size = size > 0 ? size : PACED_PIPE_GUESS;
}

ssize_t transport_fd_writev(struct transport *t, const struct iovec *iov, int cnt,
                            int timeout_ms, atomic_bool *stop)
{
    struct iovec cut[PACED_IOV_MAX];
    if (t->pipe_size > 0 || t->write_max > 0) {
        cnt = cut_to(iov, cnt, t->pipe_size > 0 ? pipe_room(t) : t->write_max, cut);
        iov = cut;
    }
    ssize_t w = io_writev(t->fd, iov, cnt, timeout_ms, stop);
    transport_count(t->wire_tx, w);
    return w;
}

int transport_fd_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop)
{
    return io_wait(t->fd, events, timeout_ms, stop);
}

static int fd_half_close(struct transport *t, struct weir_error *err)
{
    (void)t, (void)err;   /* a file or pipe ends when it is closed */
    return 0;
}

static void fd_abort(struct transport *t)
{
    (void)t;   /* what was written stays written; the exit status tells */
}

/* Close, reporting errors that only appear at close (NFS, some quotas). */
static int fd_close(struct transport *t, bool success, atomic_bool *stop,
                    struct weir_error *err)
{
    (void)success, (void)stop;
    int rc = 0;
    if (t->fd >= 0 && t->owned && close(t->fd) != 0 && errno != EINTR)
        rc = error_sys(err, t->status, errno, "%s: close", t->name);
    t->fd = -1;
    return rc;
}

static const struct transport_ops fd_ops = {
    .read = transport_fd_read, .writev = transport_fd_writev, .wait = transport_fd_wait,
    .half_close = fd_half_close, .abort = fd_abort, .close = fd_close,
};

static void fd_transport(struct transport *t, int status)
{
    t->ops = &fd_ops;
    t->kind = TRANSPORT_FD;
    t->status = status;
}

#define PIPE_SIZE (1 << 20)

void transport_classify(struct transport *t)
{
    struct stat st;
    if (fstat(t->fd, &st) != 0)
        return;
    t->identified = true;
    t->dev = st.st_dev;
    t->ino = st.st_ino;
    t->mode = st.st_mode;
    t->is_socket = S_ISSOCK(st.st_mode);
    t->regular = S_ISREG(st.st_mode);
    t->blockdev = S_ISBLK(st.st_mode);
    /* A larger pipe means fewer, larger reads and writes on both sides of
     * it.  Only a hint: failure (an old kernel, a lower
     * /proc/sys/fs/pipe-max-size) changes nothing. */
    if (S_ISFIFO(st.st_mode))
        os_pipe_widen(t->fd, PIPE_SIZE);
}

static void identify(struct transport *t, const struct stat *st, const char *name)
{
    transport_none(t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->identified = true;
    t->dev = st->st_dev;
    t->ino = st->st_ino;
    t->mode = st->st_mode;
}

void transport_identify_fd(struct transport *t, int fd, const char *name)
{
    struct stat st;
    transport_none(t);
    if (fstat(fd, &st) == 0)
        identify(t, &st, name);
}

void transport_identify_path(struct transport *t, const char *path, const char *name)
{
    struct stat st;
    transport_none(t);
    if (stat(path, &st) == 0)
        identify(t, &st, name);
}

bool transport_same_file(const struct transport *a, const struct transport *b)
{
    if (!a->identified || !b->identified)
        return false;
    if (S_ISCHR(a->mode) || S_ISSOCK(a->mode))
        return false;
    return a->dev == b->dev && a->ino == b->ino;
}

/* The standard descriptor (0, 1 or 2) that path names through /dev/stdin,
 * /dev/fd/N or /proc/self/fd/N, through symbolic links to them too; -1 for
 * any other path.  A closed standard input or output is /dev/null by the
 * time the path is opened (main.c puts it there), so a path to it must be
 * refused as the descriptor itself is, not read as empty. */
static int standard_alias(const char *path)
{
    static const char *const names[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    char now[PATH_MAX], next[PATH_MAX], dirs[8][32];
    int ndirs = os_fd_dirs(dirs, 8);
    snprintf(now, sizeof now, "%s", path);
    for (int hop = 0; hop < 16; hop++) {
        for (int i = 0; i < 3; i++)
            if (strcmp(now, names[i]) == 0)
                return i;
        for (int i = 0; i < ndirs; i++) {
            const char *d = dirs[i];
            size_t n = strlen(d);
            if (strncmp(now, d, n) == 0 && now[n] >= '0' && now[n] <= '2' && now[n + 1] == '\0')
                return now[n] - '0';
        }
        ssize_t len = readlink(now, next, sizeof next - 1);
        if (len < 0)
            return -1;   /* not a link (or gone): it names what it names */
        next[len] = '\0';
        if (next[0] == '/') {
            snprintf(now, sizeof now, "%s", next);
        } else {
            /* relative to the link's directory */
            char *slash = strrchr(now, '/');
            size_t keep = slash ? (size_t)(slash - now) + 1 : 0;
            if (keep + (size_t)len + 1 > sizeof now)
                return -1;
            memmove(now + keep, next, (size_t)len + 1);
        }
    }
    return -1;
}

int transport_open_input(struct transport *t, const char *path, bool closed,
                         struct weir_error *err)
{
    transport_none(t);
    fd_transport(t, WEIR_EXIT_INPUT);
    if (!path || strcmp(path, "-") == 0) {
        snprintf(t->name, sizeof t->name, "input <stdin>");
        if (closed)
            return error_set(err, WEIR_EXIT_INPUT,
                             "%s: standard input is closed (give -i FILE, or </dev/null "
                             "for an empty input)", t->name);
        t->fd = STDIN_FILENO;
    } else {
        snprintf(t->name, sizeof t->name, "input %s", path);
        if (closed && standard_alias(path) == STDIN_FILENO)
            return error_set(err, WEIR_EXIT_INPUT,
                             "%s: it is standard input, which is closed (give -i FILE, or "
                             "</dev/null for an empty input)", t->name);
        t->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (t->fd < 0)
            return error_sys(err, WEIR_EXIT_INPUT, errno, "%s: open", t->name);
        t->owned = true;
        t->path = path;
    }
    transport_classify(t);
    if (t->regular)   /* a hint only; failure changes nothing */
        os_advise_sequential(t->fd);
    return 0;
}

/* -W: a FIFO that no reader opens within secs fails the start instead of
 * blocking it for ever.  Opened without blocking, a FIFO fails with ENXIO
 * until it has a reader, so the open is tried again every few milliseconds;
 * then the descriptor blocks as any other.  A signal ends the wait (EINTR,
 * which weir_create reports). */
static int open_fifo_waiting(struct transport *t, int flags, double secs,
                             struct weir_error *err)
{
    double until = clock_now() + secs;
    for (;;) {
        int fd = open(t->path, flags | O_NONBLOCK);
        if (fd >= 0) {
            int fl = fcntl(fd, F_GETFL);
            if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
                int e = errno;
                close(fd);
                return error_sys(err, WEIR_EXIT_OUTPUT, e, "%s: fcntl", t->name);
            }
            t->fd = fd;
            return 0;
        }
        if (errno != ENXIO)
            return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open", t->name);
        if (clock_now() >= until)
            return error_set(err, WEIR_EXIT_OUTPUT,
                             "watchdog (-W %g): %s: no reader opened the FIFO for %g s", secs,
                             t->name, secs);
        struct timespec pause = {.tv_nsec = 20 * 1000000L};
        if (nanosleep(&pause, NULL) != 0)
            return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open", t->name);
    }
}

int transport_open_output(struct transport *t, const char *path, bool force, bool dsync,
                          bool closed, double reader_wait, struct weir_error *err)
{
    transport_none(t);
    fd_transport(t, WEIR_EXIT_OUTPUT);
    if (!path || strcmp(path, "-") == 0) {
        snprintf(t->name, sizeof t->name, "output <stdout>");
        if (closed)
            return error_set(err, WEIR_EXIT_OUTPUT,
                             "%s: standard output is closed (give -o FILE, or >/dev/null "
                             "to discard the data)", t->name);
        t->fd = STDOUT_FILENO;
        transport_classify(t);
        return 0;
    }
    snprintf(t->name, sizeof t->name, "output %s", path);
    t->path = path;
    if (closed && standard_alias(path) == STDOUT_FILENO)
        return error_set(err, WEIR_EXIT_OUTPUT,
                         "%s: it is standard output, which is closed (give -o FILE, or "
                         ">/dev/null to discard the data)", t->name);
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISREG(st.st_mode) && !force)
        return error_set(err, WEIR_EXIT_OUTPUT,
                         "%s: file exists (use -f to overwrite it)", t->name);
    int sync_flag = dsync ? O_DSYNC : 0;
    if (exists && S_ISFIFO(st.st_mode) && reader_wait > 0) {
        if (open_fifo_waiting(t, O_WRONLY | O_CLOEXEC | sync_flag, reader_wait, err))
            return -1;
        t->owned = true;
        transport_classify(t);
        return 0;
    }
    /* O_EXCL: no race between the check above and the open; then only a
     * file that did not exist is one weir created */
    t->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | sync_flag, 0666);
    if (t->fd >= 0) {
        t->created = true;
    } else if (errno == EEXIST) {
        /* -f, or not a regular file (a device or FIFO): open it as it is */
        t->fd = open(path, O_WRONLY | O_CLOEXEC | sync_flag);
    }
    if (t->fd < 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open", t->name);
    t->owned = true;
    transport_classify(t);
    if (t->regular && !force && !t->created) {
        /* a regular file appeared between stat and open */
        close(t->fd);
        t->fd = -1;
        return error_set(err, WEIR_EXIT_OUTPUT,
                         "%s: file exists (use -f to overwrite it)", t->name);
    }
    return 0;
}

int transport_truncate(struct transport *t, struct weir_error *err)
{
    if (t->fd < 0 || !t->regular || t->created || !t->path)
        return 0;
    if (ftruncate(t->fd, 0) != 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: truncate", t->name);
    return 0;
}

static int sync_directory(struct transport *t, struct weir_error *err)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", t->path) >= (int)sizeof dir)
        return error_set(err, WEIR_EXIT_OUTPUT, "%s: path too long to sync its directory",
                         t->name);
    const char *d = dirname(dir);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: open its directory %s to sync it",
                         t->name, d);
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL)   /* EINVAL: a directory that cannot be synced */
        rc = error_sys(err, WEIR_EXIT_OUTPUT, errno, "%s: fsync of its directory %s",
                       t->name, d);
    close(fd);
    return rc;
}

int transport_sync(struct transport *t, struct weir_error *err)
{
    if (t->fd < 0 || !(t->regular || t->blockdev))
        return 0;
    if (os_datasync(t->fd) != 0)
        return error_sys(err, WEIR_EXIT_OUTPUT, errno,
                         "%s: fdatasync (the data may not be on stable storage)", t->name);
    if (t->created)
        return sync_directory(t, err);
    return 0;
}

bool transport_skips_holes(const struct transport *t)
{
    if (t->kind != TRANSPORT_FD || !t->regular || t->fd < 0)
        return false;
    int flags = fcntl(t->fd, F_GETFL);
    if (flags < 0 || (flags & O_APPEND))
        return false;   /* every write lands at the end, wherever weir seeks */
    struct stat st;
    off_t at = lseek(t->fd, 0, SEEK_CUR);
    if (at < 0 || fstat(t->fd, &st) != 0)
        return false;
    /* bytes beyond the offset (weir 1<>file) would show through a skip */
    return st.st_size <= at;
}

int transport_skip(struct transport *t, uint64_t n, struct weir_error *err)
{
    off_t at = lseek(t->fd, 0, SEEK_CUR);
    if (at < 0)
        return error_sys(err, t->status, errno, "%s: lseek", t->name);
    if (n > (uint64_t)INT64_MAX - (uint64_t)at)
        return error_set(err, t->status, "%s: a hole of %llu bytes at %lld goes beyond the "
                         "largest file offset", t->name, (unsigned long long)n, (long long)at);
    if (lseek(t->fd, at + (off_t)n, SEEK_SET) < 0)
        return error_sys(err, t->status, errno, "%s: lseek over a hole of %llu bytes", t->name,
                         (unsigned long long)n);
    return 0;
}

int transport_end_holes(struct transport *t, bool dsync, struct weir_error *err)
{
    off_t at = lseek(t->fd, 0, SEEK_CUR);
    struct stat st;
    if (at < 0)
        return error_sys(err, t->status, errno, "%s: lseek", t->name);
    if (fstat(t->fd, &st) != 0)
        return error_sys(err, t->status, errno, "%s: fstat", t->name);
    if (st.st_size >= at)
        return 0;
    if (ftruncate(t->fd, at) != 0)
        return error_sys(err, t->status, errno, "%s: ftruncate to %lld bytes (the hole at its "
                         "end)", t->name, (long long)at);
    if (dsync && os_datasync(t->fd) != 0)
        return error_sys(err, t->status, errno,
                         "%s: fdatasync (the data may not be on stable storage)", t->name);
    return 0;
}

void transport_discard(struct transport *t)
{
    if (t->created && t->path) {
        /* only what weir itself created, and never after data was written */
        (void)unlink(t->path);
        t->created = false;
    }
}


/* ---- helpers over any transport ------------------------------------------ */

int transport_writev_all(struct transport *t, struct iovec *iov, int cnt, int timeout_ms,
                         atomic_bool *stop)
{
    while (cnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            cnt--;
            continue;
        }
        ssize_t w = t->ops->writev(t, iov, cnt, timeout_ms, stop);
        if (w < 0)
            return -1;
        io_iov_advance(&iov, &cnt, (size_t)w);
    }
    return 0;
}

int transport_write_all(struct transport *t, const void *buf, size_t n, int timeout_ms,
                        atomic_bool *stop)
{
    struct iovec iov = {(void *)buf, n};
    return transport_writev_all(t, &iov, 1, timeout_ms, stop);
}

ssize_t transport_read_full(struct transport *t, void *buf, size_t n, int timeout_ms,
                            atomic_bool *stop)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = t->ops->read(t, p + got, n - got, timeout_ms, stop);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int transport_close(struct transport *t, bool success, atomic_bool *stop,
                    struct weir_error *err)
{
    return t->ops->close(t, success, stop, err);
}
