/*
 * os.h - what differs between operating systems, in one place.  Every call
 * that a POSIX system may lack, or spell differently, is reached through
 * these functions; the rest of weir uses plain POSIX beside them.
 *
 * Contract: each function is a thin, thread-safe wrapper that reports as
 * the system call does (-1 with errno, unless it says otherwise) and never
 * prints or allocates.  Where the system has no such thing, the function
 * says what it does instead: "best effort" ones return nothing and are
 * hints; the others fail with ENOSYS so that the caller takes its portable
 * path.  The functions marked async-signal-safe may be called in a child
 * between fork and exec.
 *
 * This layer is the ground floor: it uses nothing of weir's.  Two files
 * implement it, chosen by the build (meson's -Dplatform): linux.c, every
 * fast path the kernel has, and posix.c, the portable path that FreeBSD,
 * illumos and macOS take (each with what it has beyond POSIX), which a
 * Linux build with -Dplatform=posix runs too, so that the suite proves it.
 */
#ifndef WEIR_OS_H
#define WEIR_OS_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/* ---- processes and memory ---- */

/* No core dumps of this process, and no debugger or /proc reading of its
 * memory by its own user (secrets live in it). */
int os_undumpable(void);
/* Keep n bytes at p out of core dumps (best effort; os_undumpable() is what
 * holds). */
void os_no_core(void *p, size_t n);
/* Reserve bytes of address space, readable and writable, whose pages are
 * committed only as they are first touched: the address, or NULL with
 * errno. */
void *os_reserve(size_t bytes);
/* Lock all memory, present and future, committing pages only as they are
 * touched where the system can (--lock-memory). */
int os_lock_memory(void);
/* The calling child gets sig when its parent thread ends (best effort;
 * async-signal-safe).  Where the system has no such thing, the child is
 * stopped by weir itself (its parent signals and waits for every child on
 * every way out). */
void os_die_with_parent(int sig);
/* Wait up to `seconds` for one of the blocked signals in set: the signal
 * number, or -1 with EAGAIN (none came) or EINTR. */
int os_wait_signal(const sigset_t *set, siginfo_t *si, double seconds);
/* Condition variables that time their waits by the monotonic clock: set
 * up the attribute (0 or an error number), and wait until deadline, a
 * CLOCK_MONOTONIC time (as pthread_cond_timedwait: 0, ETIMEDOUT or an
 * error number). */
int os_cond_monotonic(pthread_condattr_t *attr);
int os_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline);
/* In a child between fork and exec (async-signal-safe): close every
 * descriptor from 3 up but keep, where a descriptor another thread has
 * just made may not yet be close-on-exec (nothing where every descriptor
 * is made close-on-exec at once). */
void os_close_inherited(int keep);

/* ---- descriptors ---- */

/* A pipe whose two ends are close-on-exec. */
int os_pipe(int fds[2]);
/* A connected pair of local stream sockets, close-on-exec. */
int os_socketpair(int fds[2]);
/* A socket, close-on-exec and non-blocking. */
int os_socket(int family, int type, int protocol);
/* Accept a connection, close-on-exec and non-blocking. */
int os_accept(int fd, struct sockaddr *sa, socklen_t *len);
/* send() that never raises SIGPIPE; dontwait: never blocks. */
ssize_t os_send(int fd, const void *buf, size_t len, bool dontwait);
/* A pipe's capacity in bytes, or -1 where it cannot be known. */
int os_pipe_capacity(int fd);
/* Ask for a pipe of at least bytes (best effort). */
void os_pipe_widen(int fd, int bytes);
/* The file will be read from start to end / this range soon (hints). */
void os_advise_sequential(int fd);
void os_advise_willneed(int fd, off_t off, off_t len);
/* Make the file's data durable (what fdatasync promises, or more). */
int os_datasync(int fd);
/* Open the file that fd refers to anew, with its own offset (flags as
 * open's); -1 with ENOSYS where the system cannot name an open file. */
int os_reopen(int fd, int flags);
/* The folders whose entries name this process's descriptors by number
 * ("/dev/fd/", "/proc/self/fd/", ...): up to max of them, each at most
 * len bytes; returns how many. */
int os_fd_dirs(char (*dirs)[32], int max);
/* Move up to len bytes from one descriptor to the other without copying
 * them through user space, where one is a pipe; -1 with EINVAL where
 * neither is, or ENOSYS where the system cannot: the caller copies. */
ssize_t os_splice(int from, int to, size_t len);

/* ---- TCP ---- */

/* Keepalive probes after idle seconds, every intvl seconds, cnt times. */
int os_tcp_keepalive(int fd, int idle, int intvl, int cnt);
/* Data unacknowledged for ms milliseconds fails the connection; 0 where
 * the system has no such bound (weir's own waits then bound the time). */
int os_tcp_user_timeout(int fd, unsigned ms);
/* A listening socket keeps each connection's SYN (best effort). */
void os_tcp_save_syn(int fd);
/* The SYN of an accepted connection, its IP header first: the length, or
 * -1 (ENOSYS where the system keeps none). */
int os_tcp_saved_syn(int fd, unsigned char *buf, size_t len);
/* Bytes sent but not yet acknowledged by the peer (the send queue):
 * 0 with *bytes, or -1 with ENOSYS where the system cannot say. */
int os_tcp_unsent(int fd, int *bytes);
/* Whether the connection's state is closed (a reset took it): 1 yes, 0 no
 * or cannot say. */
int os_tcp_closed(int fd);

/* What the system says of a connection's path, for a user telling a slow
 * link from a long one (and for choosing how many connections to use).
 * Each figure the system cannot give is left at its "unknown" value. */
struct os_tcp_stats {
    double rtt_ms;              /* smoothed round trip, ms; < 0 unknown */
    uint32_t cwnd;              /* congestion window, segments; 0 unknown */
    uint64_t retrans;           /* segments sent again, all told; UINT64_MAX unknown */
    uint64_t delivery_rate;     /* bytes a second the path delivers now; 0 unknown */
    /* microseconds the sender was busy, and of them limited by the peer's
     * window or by its own send buffer; busy 0: unknown */
    uint64_t busy_us, rwnd_limited_us, sndbuf_limited_us;
    double min_rtt_ms;          /* the least round trip seen, ms; < 0 unknown */
    /* while the connection is in its first slow start (no loss yet): the
     * bytes its congestion window lets fly now, and the most its send
     * buffer can grow to; 0 unknown, or past its first slow start */
    uint64_t ss_window, ss_sndbuf_most;
};
/* 0 with *st (every unknown figure at its unknown value), or -1 with
 * errno (ENOSYS where the system says nothing of a connection). */
int os_tcp_stats(int fd, struct os_tcp_stats *st);
/* Every figure unknown. */
static inline void os_tcp_stats_unknown(struct os_tcp_stats *st)
{
    *st = (struct os_tcp_stats){.rtt_ms = -1, .retrans = UINT64_MAX, .min_rtt_ms = -1};
}

#endif
