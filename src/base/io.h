/*
 * io.h - read and write that survive EINTR, EAGAIN and short counts.
 *
 * Contract: io_read() and io_writev() perform one transfer of at least one
 * byte (io_read may return 0 at end of file).  EINTR is retried unless *stop
 * is set, in which case they fail with ECANCELED: this is how a blocked
 * thread is woken for shutdown (the pipeline sends it a signal).  EAGAIN on a
 * non-blocking descriptor waits in poll(), for at most timeout_ms without
 * progress (-1: no limit), then fails with ETIMEDOUT.  They never spin.
 * A wait with a stop flag also looks at it every IO_STOP_LOOK_MS, so a
 * thread that no signal wakes (one with its signals blocked, such as the
 * ssh start's, whose flag a watching thread sets) stops promptly too.
 * The transports (transport.h) build on them.  Any thread may call them on
 * a descriptor it owns.
 */
#ifndef WEIR_IO_H
#define WEIR_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

ssize_t io_read(int fd, void *buf, size_t n, int timeout_ms, atomic_bool *stop);
struct iovec;
/* One writev() of at least one byte, with the same rules. */
ssize_t io_writev(int fd, const struct iovec *iov, int cnt, int timeout_ms, atomic_bool *stop);
/* Step past n bytes written from an iovec array (which it modifies). */
void io_iov_advance(struct iovec **iov, int *cnt, size_t n);
#define IO_STOP_LOOK_MS 100
/* Wait for fd to be ready for events (POLLIN/POLLOUT); 0 ok, -1 errno. */
int io_wait(int fd, short events, int timeout_ms, atomic_bool *stop);
/* After a last record (an abort, a status): read and drop what the peer of
 * socket fd still sends until it closes, for secs at most.  Closing a
 * socket with unread bytes resets the connection, and a reset can reach the
 * peer before it has read that record, which it then never sees. */
void io_drain(int fd, double secs);

#endif
