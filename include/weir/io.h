/*
 * io.h - read and write that survive EINTR, EAGAIN and short counts.
 *
 * Contract: io_read() and io_write() perform one transfer of at least one
 * byte (io_read may return 0 at end of file).  EINTR is retried unless *stop
 * is set, in which case they fail with ECANCELED: this is how a blocked
 * thread is woken for shutdown (the pipeline sends it a signal).  EAGAIN on a
 * non-blocking descriptor waits in poll(), for at most timeout_ms without
 * progress (-1: no limit), then fails with ETIMEDOUT.  They never spin.
 * io_write_all() loops until every byte is written.  Any thread may call
 * them on a descriptor it owns.
 */
#ifndef WEIR_IO_H
#define WEIR_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

ssize_t io_read(int fd, void *buf, size_t n, int timeout_ms, atomic_bool *stop);
ssize_t io_write(int fd, const void *buf, size_t n, int timeout_ms, atomic_bool *stop);
int io_write_all(int fd, const void *buf, size_t n, int timeout_ms, atomic_bool *stop);
struct iovec;
/* One writev() of at least one byte, with the same rules. */
ssize_t io_writev(int fd, const struct iovec *iov, int cnt, int timeout_ms, atomic_bool *stop);
/* Write every byte of an iovec array (which it modifies). */
int io_writev_all(int fd, struct iovec *iov, int cnt, int timeout_ms, atomic_bool *stop);
/* Read exactly n bytes; returns n, or fewer at end of file, or -1. */
ssize_t io_read_full(int fd, void *buf, size_t n, int timeout_ms, atomic_bool *stop);
/* Wait for fd to be ready for events (POLLIN/POLLOUT); 0 ok, -1 errno. */
int io_wait(int fd, short events, int timeout_ms, atomic_bool *stop);

#endif
