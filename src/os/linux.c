/* linux.c - os.h on Linux: every fast path the kernel offers. */
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* ---- processes and memory ---- */

int os_undumpable(void)
{
    return prctl(PR_SET_DUMPABLE, 0) == 0 ? 0 : -1;
}

void os_no_core(void *p, size_t n)
{
    (void)madvise(p, n, MADV_DONTDUMP);
}

void *os_reserve(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int os_lock_memory(void)
{
    return mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
}

void os_die_with_parent(int sig)
{
    (void)prctl(PR_SET_PDEATHSIG, sig);
}

int os_wait_signal(const sigset_t *set, siginfo_t *si, double seconds)
{
    if (seconds < 0)
        seconds = 0;
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    return sigtimedwait(set, si, &ts);
}

int os_cond_monotonic(pthread_condattr_t *attr)
{
    return pthread_condattr_setclock(attr, CLOCK_MONOTONIC);
}

int os_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline)
{
    return pthread_cond_timedwait(c, m, deadline);
}

void os_close_inherited(int keep)
{
    (void)keep;   /* every descriptor weir makes is close-on-exec from its birth */
}

/* ---- descriptors ---- */

int os_pipe(int fds[2])
{
    return pipe2(fds, O_CLOEXEC);
}

int os_socketpair(int fds[2])
{
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
}

int os_socket(int family, int type, int protocol)
{
    return socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
}

int os_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
    return accept4(fd, sa, len, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

ssize_t os_send(int fd, const void *buf, size_t len, bool dontwait)
{
    return send(fd, buf, len, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
}

int os_pipe_capacity(int fd)
{
    return fcntl(fd, F_GETPIPE_SZ);
}

void os_pipe_widen(int fd, int bytes)
{
    if (fcntl(fd, F_GETPIPE_SZ) < bytes)
        (void)fcntl(fd, F_SETPIPE_SZ, bytes);
}

void os_advise_sequential(int fd)
{
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
}

void os_advise_willneed(int fd, off_t off, off_t len)
{
    (void)posix_fadvise(fd, off, len, POSIX_FADV_WILLNEED);
}

int os_datasync(int fd)
{
    return fdatasync(fd);
}

int os_reopen(int fd, int flags)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, flags);
}

int os_fd_dirs(char (*dirs)[32], int max)
{
    static const char *const fixed[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed && n < max; i++)
        snprintf(dirs[n++], sizeof *dirs, "%s", fixed[i]);
    if (n < max)
        snprintf(dirs[n++], sizeof *dirs, "/proc/%ld/fd/", (long)getpid());
    return n;
}

ssize_t os_splice(int from, int to, size_t len)
{
    return splice(from, NULL, to, NULL, len, SPLICE_F_MOVE);
}

/* ---- TCP ---- */

int os_tcp_keepalive(int fd, int idle, int intvl, int cnt)
{
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0)
        return -1;
    return 0;
}

int os_tcp_user_timeout(int fd, unsigned ms)
{
    return setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
}

void os_tcp_save_syn(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof one);
}

int os_tcp_saved_syn(int fd, unsigned char *buf, size_t len)
{
    socklen_t got = (socklen_t)len;
    if (getsockopt(fd, IPPROTO_TCP, TCP_SAVED_SYN, buf, &got) != 0)
        return -1;
    return (int)got;
}

int os_tcp_unsent(int fd, int *bytes)
{
    return ioctl(fd, SIOCOUTQ, bytes) == 0 ? 0 : -1;
}

int os_tcp_closed(int fd)
{
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && ti.tcpi_state == TCP_CLOSE;
}
