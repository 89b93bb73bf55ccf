/* io.c - see io.h. */
#include "base/io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/sync.h"

int io_wait(int fd, short events, int timeout_ms, atomic_bool *stop)
{
    double deadline = timeout_ms < 0 ? 0 : clock_now() + timeout_ms / 1000.0;
    bool waited = false;
    for (;;) {
        if (stop && atomic_load(stop)) {
            errno = ECANCELED;
            return -1;
        }
        int wait_ms = -1;
        bool last = false;
        if (timeout_ms >= 0) {
            double left = deadline - clock_now();
            /* a timeout of 0 fails at once; a wait that overran its deadline
             * (a signal, a stopped process) looks once more before it fails */
            if (left <= 0 && !waited) {
                errno = ETIMEDOUT;
                return -1;
            }
            last = left <= 0;
            wait_ms = last ? 0 : (int)(left * 1000.0) + 1;
        }
        if (stop && (wait_ms < 0 || wait_ms > IO_STOP_LOOK_MS)) {
            wait_ms = IO_STOP_LOOK_MS;   /* not the last look: the deadline is further */
            last = false;
        }
        struct pollfd pfd = {.fd = fd, .events = events};
        int r = poll(&pfd, 1, wait_ms);
        waited = true;
        if (r > 0)
            return 0;   /* ready, or an error/hangup the next call will report */
        if (r < 0 && errno != EINTR)
            return -1;
        if (r == 0 && last) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
}

/* After a failed call: 0 to try again, -1 to give up with errno set. */
static int io_retry(int fd, short events, int timeout_ms, atomic_bool *stop)
{
    if (errno == EINTR) {
        if (stop && atomic_load(stop)) {
            errno = ECANCELED;
            return -1;
        }
        return 0;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    return io_wait(fd, events, timeout_ms, stop);
}

ssize_t io_read(int fd, void *buf, size_t n, int timeout_ms, atomic_bool *stop)
{
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r >= 0)
            return r;
        if (io_retry(fd, POLLIN, timeout_ms, stop))
            return -1;
    }
}

ssize_t io_writev(int fd, const struct iovec *iov, int cnt, int timeout_ms, atomic_bool *stop)
{
    for (;;) {
        ssize_t w = writev(fd, iov, cnt);
        if (w > 0)
            return w;
        if (w == 0)
            errno = EAGAIN;   /* not expected for a non-empty iovec: wait, do not spin */
        if (io_retry(fd, POLLOUT, timeout_ms, stop))
            return -1;
    }
}

void io_iov_advance(struct iovec **iov, int *cnt, size_t n)
{
    while (*cnt > 0 && n >= (*iov)->iov_len) {
        n -= (*iov)->iov_len;
        (*iov)++;
        (*cnt)--;
    }
    if (*cnt > 0) {
        (*iov)->iov_base = (char *)(*iov)->iov_base + n;
        (*iov)->iov_len -= n;
    }
}

void io_drain(int fd, double secs)
{
    double until = clock_now() + secs;
    unsigned char buf[4096];
    for (;;) {
        double left = until - clock_now();
        if (left <= 0)
            return;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return;
    }
}
