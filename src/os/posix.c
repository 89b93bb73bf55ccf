/* posix.c - os.h on every system but Linux: FreeBSD, illumos, macOS, and
 * Linux itself when built with -Dplatform=posix (the build that proves
 * this file).
 *
 * The portable path is POSIX.1-2008.  What a system offers beyond it is
 * used where that system is named (__FreeBSD__, __sun, __APPLE__); a
 * Linux build of this file names none of them, so it runs the path that a
 * system without the extra runs.  doc/portability.md gives, call by call,
 * what each system uses and why the portable path is still safe. */
#include "os/os.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* FreeBSD and illumos make descriptors close-on-exec at birth (pipe2,
 * accept4, SOCK_CLOEXEC) and wait for signals with a timeout
 * (sigtimedwait); macOS, and the generic path, do neither. */
#if defined(__FreeBSD__) || defined(__sun)
#define OS_ATOMIC_CLOEXEC 1
#define OS_SIGTIMEDWAIT 1
#endif

#if defined(__FreeBSD__)
#include <sys/procctl.h>
#include <sys/ioctl.h>
#include <sys/filio.h>
#endif

/* ---- processes and memory ---- */

int os_undumpable(void)
{
    /* no core file, whatever the system: a core would hold the keys */
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0)
        return -1;
#if defined(__FreeBSD__)
    /* and no debugger of the same user (what Linux's dumpable flag also
     * refuses) */
    int off = PROC_TRACE_CTL_DISABLE;
    if (procctl(P_PID, getpid(), PROC_TRACE_CTL, &off) != 0)
        return -1;
#endif
    return 0;
}

void os_no_core(void *p, size_t n)
{
#if defined(__FreeBSD__) && defined(MADV_NOCORE)
    (void)madvise(p, n, MADV_NOCORE);
#else
    (void)p, (void)n;   /* os_undumpable's RLIMIT_CORE of 0 is what holds */
#endif
}

void *os_reserve(size_t bytes)
{
    /* FreeBSD, illumos and macOS commit anonymous pages as they are
     * touched without being asked; Linux's overcommit heuristics may
     * refuse a large reservation without MAP_NORESERVE, which -m then
     * reports as what it is */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int os_lock_memory(void)
{
    return mlockall(MCL_CURRENT | MCL_FUTURE);
}

void os_die_with_parent(int sig)
{
#if defined(__FreeBSD__) && defined(PROC_PDEATHSIG_CTL)
    (void)procctl(P_PID, 0, PROC_PDEATHSIG_CTL, &sig);
#else
    /* none: weir signals and reaps every child on every way out, and a
     * weir killed with SIGKILL leaves its child a closed pipe or socket,
     * which ends it as the end of its input or a failed write */
    (void)sig;
#endif
}

#if defined(OS_SIGTIMEDWAIT)
int os_wait_signal(const sigset_t *set, siginfo_t *si, double seconds)
{
    if (seconds < 0)
        seconds = 0;
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    return sigtimedwait(set, si, &ts);
}
#else
/* The pause between two looks at the pending signals: a signal is taken
 * within it. */
#define SIGNAL_POLL_NS (5 * 1000 * 1000L)

/* The first signal of set that is pending for the process or this thread,
 * or 0. */
static int first_pending(const sigset_t *set)
{
    sigset_t pend;
    if (sigpending(&pend) != 0)
        return 0;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(set, sig) == 1 && sigismember(&pend, sig) == 1)
            return sig;
    return 0;
}

int os_wait_signal(const sigset_t *set, siginfo_t *si, double seconds)
{
    /* without sigtimedwait: look at what is pending, and take it with
     * sigwait, which then returns at once.  One thread at a time waits for
     * a given signal in weir (the main thread, or a link test's watch), so
     * what was pending is still there when sigwait asks. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double end = (double)now.tv_sec + now.tv_nsec / 1e9 + (seconds > 0 ? seconds : 0);
    for (;;) {
        int sig = first_pending(set);
        if (sig) {
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, sig);
            int got = 0;
            if (sigwait(&one, &got) != 0)
                return -1;
            if (si) {
                /* sigwait tells no sender: taken as sent to weir alone,
                 * which weir passes on to its children (one from a
                 * terminal then reaches them twice, which ends them all
                 * the same) */
                *si = (siginfo_t){0};
                si->si_signo = got;
                si->si_code = SI_USER;
            }
            return got;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = end - ((double)now.tv_sec + now.tv_nsec / 1e9);
        if (left <= 0) {
            errno = EAGAIN;
            return -1;
        }
        long ns = left * 1e9 < SIGNAL_POLL_NS ? (long)(left * 1e9) + 1 : SIGNAL_POLL_NS;
        struct timespec pause = {0, ns};
        if (nanosleep(&pause, NULL) != 0 && errno == EINTR)
            return -1;
    }
}
#endif

int os_cond_monotonic(pthread_condattr_t *attr)
{
#if defined(__APPLE__)
    (void)attr;   /* macOS times its waits relatively (os_cond_wait_until) */
    return 0;
#else
    return pthread_condattr_setclock(attr, CLOCK_MONOTONIC);
#endif
}

int os_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline)
{
#if defined(__APPLE__)
    struct timespec now, rel;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ns = (long long)(deadline->tv_sec - now.tv_sec) * 1000000000LL +
                   (deadline->tv_nsec - now.tv_nsec);
    if (ns <= 0)
        return ETIMEDOUT;
    rel.tv_sec = (time_t)(ns / 1000000000LL);
    rel.tv_nsec = (long)(ns % 1000000000LL);
    return pthread_cond_timedwait_relative_np(c, m, &rel);
#else
    return pthread_cond_timedwait(c, m, deadline);
#endif
}

/* Close every descriptor from 3 up but keep: between fork and exec, so
 * that one another thread opened and had not yet marked close-on-exec
 * does not reach the child. */
void os_close_inherited(int keep)
{
#if defined(OS_ATOMIC_CLOEXEC)
    (void)keep;   /* every descriptor weir makes is close-on-exec from its birth */
#else
    struct rlimit rl;
    int top = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        top = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
    for (int fd = 3; fd < top; fd++)
        if (fd != keep)
            (void)close(fd);
#endif
}

/* ---- descriptors ---- */

#if !defined(OS_ATOMIC_CLOEXEC)
/* Mark fd close-on-exec and, if asked, non-blocking: 0, or -1 with the
 * descriptor closed. */
static int mark_fd(int fd, bool nonblocking)
{
    int fl;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
        (nonblocking && ((fl = fcntl(fd, F_GETFL)) < 0 ||
                         fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0))) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
#if defined(SO_NOSIGPIPE) && !defined(MSG_NOSIGNAL)
    int one = 1;   /* macOS: what MSG_NOSIGNAL does elsewhere, set once */
    (void)setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return 0;
}
#endif

#if defined(OS_ATOMIC_CLOEXEC)
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
#else
/* Both ends of a new pipe or pair marked close-on-exec: 0, or -1 with
 * both closed. */
static int mark_pair(int fds[2])
{
    if (mark_fd(fds[0], false) != 0) {
        close(fds[1]);
        return -1;
    }
    if (mark_fd(fds[1], false) != 0) {
        close(fds[0]);
        return -1;
    }
    return 0;
}

int os_pipe(int fds[2])
{
    return pipe(fds) != 0 ? -1 : mark_pair(fds);
}

int os_socketpair(int fds[2])
{
    return socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0 ? -1 : mark_pair(fds);
}

int os_socket(int family, int type, int protocol)
{
    int fd = socket(family, type, protocol);
    return fd < 0 || mark_fd(fd, true) != 0 ? -1 : fd;
}

int os_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
    int c = accept(fd, sa, len);
    return c < 0 || mark_fd(c, true) != 0 ? -1 : c;
}
#endif

ssize_t os_send(int fd, const void *buf, size_t len, bool dontwait)
{
#if defined(MSG_NOSIGNAL)
    int flags = MSG_NOSIGNAL;
#else
    int flags = 0;   /* SO_NOSIGPIPE, set by mark_fd() */
#endif
    if (!dontwait)
        return send(fd, buf, len, flags);
#if defined(MSG_DONTWAIT)
    return send(fd, buf, len, flags | MSG_DONTWAIT);
#else
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return -1;
    ssize_t n = send(fd, buf, len, flags);
    int e = errno;
    if (!(fl & O_NONBLOCK))
        (void)fcntl(fd, F_SETFL, fl);
    errno = e;
    return n;
#endif
}

int os_pipe_capacity(int fd)
{
    (void)fd;
    errno = ENOSYS;   /* the caller keeps PIPE_BUF-sized expectations */
    return -1;
}

void os_pipe_widen(int fd, int bytes)
{
    (void)fd, (void)bytes;   /* pipes keep the system's size */
}

void os_advise_sequential(int fd)
{
#if defined(__FreeBSD__) || defined(__sun)
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#else
    (void)fd;
#endif
}

void os_advise_willneed(int fd, off_t off, off_t len)
{
#if defined(__FreeBSD__) || defined(__sun)
    (void)posix_fadvise(fd, off, len, POSIX_FADV_WILLNEED);
#else
    (void)fd, (void)off, (void)len;
#endif
}

int os_datasync(int fd)
{
#if defined(__APPLE__)
    /* fsync on macOS leaves the data in the drive's cache */
    if (fcntl(fd, F_FULLFSYNC) == 0)
        return 0;
    return fsync(fd);   /* a file system without it (a network one) */
#else
    return fdatasync(fd);   /* POSIX's synchronized I/O: FreeBSD, illumos, Linux */
#endif
}

int os_reopen(int fd, int flags)
{
#if defined(__APPLE__) && defined(F_GETPATH)
    char path[PATH_MAX];
    if (fcntl(fd, F_GETPATH, path) != 0)
        return -1;
    return open(path, flags);
#elif defined(__sun)
    char path[64];   /* illumos: /proc/self/path/N names the file itself */
    snprintf(path, sizeof path, "/proc/self/path/%d", fd);
    return open(path, flags);
#else
    /* /dev/fd/N opens the same file description on FreeBSD and macOS: the
     * caller opens the file by the name it was given, where it has one */
    (void)fd, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

int os_fd_dirs(char (*dirs)[32], int max)
{
    /* names only, compared with a path: a folder the system lacks costs
     * nothing (illumos has /proc/self/fd, FreeBSD's fdescfs /dev/fd) */
    static const char *const fixed[] = {"/dev/fd/", "/proc/self/fd/"};
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed && n < max; i++)
        snprintf(dirs[n++], sizeof *dirs, "%s", fixed[i]);
    if (n < max)
        snprintf(dirs[n++], sizeof *dirs, "/proc/%ld/fd/", (long)getpid());
    return n;
}

ssize_t os_splice(int from, int to, size_t len)
{
    (void)from, (void)to, (void)len;
    errno = ENOSYS;
    return -1;
}

/* ---- TCP ---- */

int os_tcp_keepalive(int fd, int idle, int intvl, int cnt)
{
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0)
        return -1;
#if defined(TCP_KEEPIDLE)
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0)
        return -1;
#elif defined(TCP_KEEPALIVE)
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPALIVE, &idle, sizeof idle) != 0)
        return -1;
#else
    (void)idle;
#endif
#if defined(TCP_KEEPINTVL) && defined(TCP_KEEPCNT)
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0)
        return -1;
#else
    (void)intvl, (void)cnt;
#endif
    return 0;
}

int os_tcp_user_timeout(int fd, unsigned ms)
{
    /* no such bound: weir's own waits (-W, --io-timeout) end a transfer
     * whose data stopped being acknowledged */
    (void)fd, (void)ms;
    return 0;
}

void os_tcp_save_syn(int fd)
{
    (void)fd;
}

int os_tcp_saved_syn(int fd, unsigned char *buf, size_t len)
{
    (void)fd, (void)buf, (void)len;
    errno = ENOSYS;
    return -1;
}

int os_tcp_unsent(int fd, int *bytes)
{
#if defined(__FreeBSD__) && defined(FIONWRITE)
    return ioctl(fd, FIONWRITE, bytes) == 0 ? 0 : -1;
#elif defined(__APPLE__) && defined(SO_NWRITE)
    socklen_t len = sizeof *bytes;
    return getsockopt(fd, SOL_SOCKET, SO_NWRITE, bytes, &len) == 0 ? 0 : -1;
#else
    (void)fd, (void)bytes;
    errno = ENOSYS;
    return -1;
#endif
}

int os_tcp_closed(int fd)
{
    (void)fd;
    return 0;
}

/* FreeBSD's TCP_INFO and macOS's TCP_CONNECTION_INFO give the round trip,
 * the window in bytes (here in segments, as Linux gives it) and the
 * segments sent again, but no delivery rate and no limits; illumos and the
 * generic path give nothing. */
int os_tcp_stats(int fd, struct os_tcp_stats *st)
{
    os_tcp_stats_unknown(st);
#if defined(__FreeBSD__) && defined(TCP_INFO)
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return -1;
    if (ti.tcpi_rtt > 0)
        st->rtt_ms = ti.tcpi_rtt / 1000.0;
    if (ti.tcpi_snd_mss > 0)
        st->cwnd = ti.tcpi_snd_cwnd / ti.tcpi_snd_mss;
    st->retrans = ti.tcpi_snd_rexmitpack;
    return 0;
#elif defined(__APPLE__) && defined(TCP_CONNECTION_INFO)
    struct tcp_connection_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONNECTION_INFO, &ti, &len) != 0)
        return -1;
    if (ti.tcpi_srtt > 0)
        st->rtt_ms = ti.tcpi_srtt;
    if (ti.tcpi_maxseg > 0)
        st->cwnd = ti.tcpi_snd_cwnd / ti.tcpi_maxseg;
    st->retrans = ti.tcpi_txretransmitpackets;
    return 0;
#else
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}
