/*
 * faultshim.c - an LD_PRELOAD library that injects system call faults into
 * weir for its tests.  WEIR_FAULT holds one fault:
 *
 *   read_eio=N          read() on fd 0 fails with EIO once N bytes were read
 *   write_enospc=N      write()/writev() on fd 1 fail with ENOSPC after N bytes
 *   close_enospc=SUFFIX close() of a file whose path ends in SUFFIX closes it
 *                       and then reports ENOSPC (as NFS does at close)
 *   eintr=K             every K-th read, write, writev and poll fails with
 *                       EINTR without doing anything
 *   short_write=M       write()/writev() move at most M bytes per call (the
 *                       real call, with a smaller count)
 *   slow_write=BPS      write()/writev() on fd 1 first sleep as long as their
 *                       bytes take at BPS bytes a second (a slow disk: one
 *                       call of a large block takes seconds)
 *   mmap_enomem=BYTES   mmap() of BYTES or more fails with ENOMEM
 *   fdatasync_eio=1     fdatasync() fails with EIO (a writeback error)
 *   fsync_eio=1         fsync() fails with EIO (weir fsyncs only directories)
 *   ftruncate_efbig=1   ftruncate() fails with EFBIG (setting a sparse output's size)
 *   seek_data_eio=1     lseek(SEEK_DATA) fails with EIO (looking for an input's holes)
 *   seek_data_einval=1  lseek(SEEK_DATA) fails with EINVAL, as on a file system
 *                       that cannot say where its holes are
 *   sigwait_late=MS     sigtimedwait() sleeps MS milliseconds, then takes only
 *                       what is pending (a busy main thread: the children
 *                       die of a group's signal before weir takes its own)
 *   seal_slow=MS        EVP_EncryptFinal_ex() (OpenSSL) sleeps MS milliseconds
 *                       before the real one when the record it ends holds
 *                       1 KiB or more of plaintext: a data block sealed slowly
 *                       (by a worker, with -T), while an abort, a frame's
 *                       prefix or suffix and the handshake's records go at
 *                       once; a keyed sender's connection can then go while
 *                       a block is still being sealed for it
 *   connect_refuse=K    the K-th TCP connect() of the process fails with
 *                       ECONNREFUSED (a connection that cannot be made: a
 *                       spread sender's joiner, say, once it is back after a
 *                       break)
 *   tcp_long=MS         getsockopt(TCP_INFO) says the path's round trip is MS
 *                       milliseconds, and that the connection was busy and
 *                       limited by the peer's window all the time since the
 *                       process first asked (a long path that one window
 *                       cannot fill, on loopback: --streams auto grows)
 *   tcp_probe=MS        as tcp_long, and each connection is in its first
 *                       slow start (no ssthresh, nothing sent again) with
 *                       a window of 8 MiB over a least round trip of MS:
 *                       past half of any send buffer's most, so
 *                       --streams auto probes at once
 *
 * Everything else passes straight through to libc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static atomic_ullong counter;
static atomic_ullong moved;

/* seal_slow: the plaintext this thread put into the record it is sealing */
static _Thread_local unsigned long long seal_plain;

static const char *fault(const char *name)
{
    const char *spec = getenv("WEIR_FAULT");
    size_t len = strlen(name);
    if (spec && strncmp(spec, name, len) == 0 && spec[len] == '=')
        return spec + len + 1;
    return NULL;
}

static unsigned long long fault_num(const char *name)
{
    const char *v = fault(name);
    return v ? strtoull(v, NULL, 10) : 0;
}

static int eintr_now(void)
{
    unsigned long long k = fault_num("eintr");
    return k && atomic_fetch_add(&counter, 1) % k == k - 1;
}

/* The real functions, resolved once before main() and any thread. */
static __typeof__(read) *real_read;
static __typeof__(write) *real_write;
static __typeof__(writev) *real_writev;
static __typeof__(poll) *real_poll;
static __typeof__(close) *real_close;
static __typeof__(mmap) *real_mmap;
static __typeof__(fdatasync) *real_fdatasync;
static __typeof__(fsync) *real_fsync;
static __typeof__(ftruncate) *real_ftruncate;
static __typeof__(lseek) *real_lseek;
static __typeof__(sigtimedwait) *real_sigtimedwait;
static __typeof__(connect) *real_connect;
static __typeof__(getsockopt) *real_getsockopt;

/* OpenSSL's, declared here so that the shim needs no OpenSSL headers (and
 * links no OpenSSL: found at run time, when the program has it) */
int EVP_EncryptUpdate(void *ctx, unsigned char *out, int *outl, const unsigned char *in,
                      int inl);
int EVP_EncryptFinal_ex(void *ctx, unsigned char *out, int *outl);
static __typeof__(EVP_EncryptUpdate) *real_EVP_EncryptUpdate;
static __typeof__(EVP_EncryptFinal_ex) *real_EVP_EncryptFinal_ex;

__attribute__((constructor)) static void shim_init(void)
{
    real_read = (__typeof__(read) *)dlsym(RTLD_NEXT, "read");
    real_write = (__typeof__(write) *)dlsym(RTLD_NEXT, "write");
    real_writev = (__typeof__(writev) *)dlsym(RTLD_NEXT, "writev");
    real_poll = (__typeof__(poll) *)dlsym(RTLD_NEXT, "poll");
    real_close = (__typeof__(close) *)dlsym(RTLD_NEXT, "close");
    real_mmap = (__typeof__(mmap) *)dlsym(RTLD_NEXT, "mmap");
    real_fdatasync = (__typeof__(fdatasync) *)dlsym(RTLD_NEXT, "fdatasync");
    real_fsync = (__typeof__(fsync) *)dlsym(RTLD_NEXT, "fsync");
    real_ftruncate = (__typeof__(ftruncate) *)dlsym(RTLD_NEXT, "ftruncate");
    real_lseek = (__typeof__(lseek) *)dlsym(RTLD_NEXT, "lseek");
    real_sigtimedwait = (__typeof__(sigtimedwait) *)dlsym(RTLD_NEXT, "sigtimedwait");
    real_connect = (__typeof__(connect) *)dlsym(RTLD_NEXT, "connect");
    real_getsockopt = (__typeof__(getsockopt) *)dlsym(RTLD_NEXT, "getsockopt");
    real_EVP_EncryptUpdate =
        (__typeof__(EVP_EncryptUpdate) *)dlsym(RTLD_NEXT, "EVP_EncryptUpdate");
    real_EVP_EncryptFinal_ex =
        (__typeof__(EVP_EncryptFinal_ex) *)dlsym(RTLD_NEXT, "EVP_EncryptFinal_ex");
}

#define REAL(fn) if (!real_##fn) shim_init()

ssize_t read(int fd, void *buf, size_t n)
{
    REAL(read);
    if (eintr_now()) {
        errno = EINTR;
        return -1;
    }
    if (fd == 0 && fault("read_eio") && atomic_load(&moved) >= fault_num("read_eio")) {
        errno = EIO;
        return -1;
    }
    ssize_t r = real_read(fd, buf, n);
    if (fd == 0 && r > 0)
        atomic_fetch_add(&moved, (unsigned long long)r);
    return r;
}

static size_t limit_write(int fd, size_t n, int *fail)
{
    *fail = 0;
    if (fd == 1 && fault("write_enospc")) {
        unsigned long long lim = fault_num("write_enospc"), done = atomic_load(&moved);
        if (done >= lim) {
            *fail = 1;
            return 0;
        }
        if (n > lim - done)
            n = (size_t)(lim - done);
    }
    unsigned long long m = fault_num("short_write");
    if (m && n > m)
        n = (size_t)m;
    return n;
}

/* slow_write: the time n bytes take on a slow device, slept before the call
 * (a signal cuts it short, as it would a real wait) */
static void slow_down(int fd, size_t n)
{
    unsigned long long bps = fd == 1 ? fault_num("slow_write") : 0;
    if (!bps)
        return;
    double secs = (double)n / (double)bps;
    struct timespec ts = {.tv_sec = (time_t)secs,
                          .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
    (void)nanosleep(&ts, NULL);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(write);
    if (eintr_now()) {
        errno = EINTR;
        return -1;
    }
    int fail;
    size_t allowed = limit_write(fd, n, &fail);
    if (fail) {
        errno = ENOSPC;
        return -1;
    }
    slow_down(fd, allowed);
    ssize_t r = real_write(fd, buf, allowed);
    if (fd == 1 && r > 0)
        atomic_fetch_add(&moved, (unsigned long long)r);
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    REAL(writev);
    if (eintr_now()) {
        errno = EINTR;
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    int fail;
    size_t allowed = limit_write(fd, total, &fail);
    if (fail) {
        errno = ENOSPC;
        return -1;
    }
    struct iovec cut[64];
    int n = 0;
    for (int i = 0; i < cnt && n < 64 && allowed > 0; i++) {
        cut[n] = iov[i];
        if (cut[n].iov_len > allowed)
            cut[n].iov_len = allowed;
        allowed -= cut[n].iov_len;
        n++;
    }
    size_t moving = 0;
    for (int i = 0; i < n; i++)
        moving += cut[i].iov_len;
    slow_down(fd, moving);
    ssize_t r = real_writev(fd, cut, n);
    if (fd == 1 && r > 0)
        atomic_fetch_add(&moved, (unsigned long long)r);
    return r;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    REAL(poll);
    if (eintr_now()) {
        errno = EINTR;
        return -1;
    }
    return real_poll(fds, n, timeout);
}

int close(int fd)
{
    REAL(close);
    const char *suffix = fault("close_enospc");
    char path[PATH_MAX] = "";
    if (suffix) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(link, path, sizeof path - 1);
        path[len > 0 ? len : 0] = '\0';
    }
    int r = real_close(fd);
    size_t pl = strlen(path), sl = suffix ? strlen(suffix) : 0;
    if (r == 0 && suffix && pl >= sl && sl > 0 && strcmp(path + pl - sl, suffix) == 0) {
        errno = ENOSPC;
        return -1;
    }
    return r;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    REAL(mmap);
    unsigned long long lim = fault_num("mmap_enomem");
    if (lim && len >= lim) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return real_mmap(addr, len, prot, flags, fd, off);
}

int fdatasync(int fd)
{
    REAL(fdatasync);
    if (fault("fdatasync_eio")) {
        errno = EIO;
        return -1;
    }
    return real_fdatasync(fd);
}

int fsync(int fd)
{
    REAL(fsync);
    if (fault("fsync_eio")) {
        errno = EIO;
        return -1;
    }
    return real_fsync(fd);
}

int ftruncate(int fd, off_t len)
{
    REAL(ftruncate);
    if (fault("ftruncate_efbig")) {
        errno = EFBIG;
        return -1;
    }
    return real_ftruncate(fd, len);
}

off_t lseek(int fd, off_t off, int whence)
{
    REAL(lseek);
    if (whence == SEEK_DATA && (fault("seek_data_eio") || fault("seek_data_einval"))) {
        errno = fault("seek_data_eio") ? EIO : EINVAL;
        return -1;
    }
    return real_lseek(fd, off, whence);
}

int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout)
{
    REAL(sigtimedwait);
    unsigned long long ms = fault_num("sigwait_late");
    if (!ms)
        return real_sigtimedwait(set, info, timeout);
    /* a thread busy for MS milliseconds, then a look at what is pending */
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    struct timespec zero = {0, 0};
    return real_sigtimedwait(set, info, &zero);
}

/* seal_slow: count the record's plaintext (an update with no output is its
 * associated data, the header) */
int EVP_EncryptUpdate(void *ctx, unsigned char *out, int *outl, const unsigned char *in,
                      int inl)
{
    REAL(EVP_EncryptUpdate);
    if (!real_EVP_EncryptUpdate)
        abort();   /* only a program that has OpenSSL calls it */
    if (out && inl > 0)
        seal_plain += (unsigned long long)inl;
    return real_EVP_EncryptUpdate(ctx, out, outl, in, inl);
}

int EVP_EncryptFinal_ex(void *ctx, unsigned char *out, int *outl)
{
    REAL(EVP_EncryptFinal_ex);
    if (!real_EVP_EncryptFinal_ex)
        abort();
    unsigned long long ms = fault_num("seal_slow"), plain = seal_plain;
    seal_plain = 0;
    if (ms && plain >= 1024) {
        /* the whole time, signals or not: the block is still being sealed */
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                              .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    return real_EVP_EncryptFinal_ex(ctx, out, outl);
}

static atomic_ullong connects;

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    REAL(connect);
    unsigned long long k = fault_num("connect_refuse");
    bool tcp = addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
    if (k && tcp && atomic_fetch_add(&connects, 1) + 1 == k) {
        errno = ECONNREFUSED;
        return -1;
    }
    return real_connect(fd, addr, len);
}

/* tcp_long: the figures of a long, window-limited path */
static _Atomic long long first_asked_us;

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    REAL(getsockopt);
    int rc = real_getsockopt(fd, level, name, val, len);
    unsigned long long ms = fault_num("tcp_long");
    unsigned long long probe = fault_num("tcp_probe");
    if (!ms)
        ms = probe;
    if (rc != 0 || !ms || level != IPPROTO_TCP || name != TCP_INFO)
        return rc;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long us = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    long long zero = 0;
    atomic_compare_exchange_strong(&first_asked_us, &zero, us);
    unsigned long long since = (unsigned long long)(us - atomic_load(&first_asked_us));
    struct tcp_info *ti = val;
    if (*len >= offsetof(struct tcp_info, tcpi_rttvar))
        ti->tcpi_rtt = (uint32_t)(ms * 1000);
    if (*len >= offsetof(struct tcp_info, tcpi_sndbuf_limited) + sizeof ti->tcpi_sndbuf_limited) {
        ti->tcpi_busy_time = since;
        ti->tcpi_rwnd_limited = since;
        ti->tcpi_sndbuf_limited = 0;
    }
    if (probe && *len >= offsetof(struct tcp_info, tcpi_min_rtt) + sizeof ti->tcpi_min_rtt) {
        ti->tcpi_min_rtt = (uint32_t)(ms * 1000);
        ti->tcpi_snd_ssthresh = 0x7fffffffU;
        ti->tcpi_total_retrans = 0;
        ti->tcpi_snd_mss = 1024;
        ti->tcpi_snd_cwnd = 8192;
    }
    return rc;
}
