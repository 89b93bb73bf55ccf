/*
 * sync.h - a pthread layer whose calls cannot fail silently.
 *
 * Contract: every call either succeeds or aborts the process with the file
 * and line of the caller and the pthread error (thread creation excepted:
 * see sync_create).  A pthread error is a
 * programming error (a destroyed mutex, a wrong owner), never a condition a
 * transfer can recover from, so aborting is the honest answer.  Callers never
 * check return values and never assert() on them (NDEBUG would remove the
 * check).
 *
 * Condition variables use CLOCK_MONOTONIC so that deadlines do not move when
 * the wall clock is set.  Any thread may call any function here.
 */
#ifndef WEIR_SYNC_H
#define WEIR_SYNC_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "weir/error.h"

void sync_mutex_init_at(pthread_mutex_t *m, const char *file, int line);
void sync_cond_init_at(pthread_cond_t *c, const char *file, int line);
void sync_lock_at(pthread_mutex_t *m, const char *file, int line);
void sync_unlock_at(pthread_mutex_t *m, const char *file, int line);
void sync_wait_at(pthread_cond_t *c, pthread_mutex_t *m, const char *file, int line);
/* Returns false when the absolute CLOCK_MONOTONIC deadline passed. */
bool sync_wait_until_at(pthread_cond_t *c, pthread_mutex_t *m,
                        const struct timespec *deadline, const char *file, int line);
void sync_broadcast_at(pthread_cond_t *c, const char *file, int line);
void sync_signal_at(pthread_cond_t *c, const char *file, int line);
/* Thread creation is the one call here that a transfer can survive:
 * running out of threads (EAGAIN) is reported as WEIR_EXIT_INTERNAL in *err
 * and -1 returned; any other failure aborts. */
int sync_create_at(pthread_t *t, void *(*fn)(void *), void *arg, struct weir_error *err,
                   const char *file, int line);
void sync_join_at(pthread_t t, const char *file, int line);
void sync_kill_at(pthread_t t, int sig, const char *file, int line);
void sync_sigmask_at(int how, const sigset_t *set, sigset_t *old, const char *file, int line);

#define sync_mutex_init(m) sync_mutex_init_at((m), __FILE__, __LINE__)
#define sync_cond_init(c) sync_cond_init_at((c), __FILE__, __LINE__)
#define sync_lock(m) sync_lock_at((m), __FILE__, __LINE__)
#define sync_unlock(m) sync_unlock_at((m), __FILE__, __LINE__)
#define sync_wait(c, m) sync_wait_at((c), (m), __FILE__, __LINE__)
#define sync_wait_until(c, m, d) sync_wait_until_at((c), (m), (d), __FILE__, __LINE__)
#define sync_broadcast(c) sync_broadcast_at((c), __FILE__, __LINE__)
#define sync_signal(c) sync_signal_at((c), __FILE__, __LINE__)
#define sync_create(t, fn, arg, err) sync_create_at((t), (fn), (arg), (err), __FILE__, __LINE__)
#define sync_join(t) sync_join_at((t), __FILE__, __LINE__)
#define sync_kill(t, sig) sync_kill_at((t), (sig), __FILE__, __LINE__)
#define sync_sigmask(how, set) sync_sigmask_at((how), (set), NULL, __FILE__, __LINE__)
#define sync_sigmask_get(how, set, old) sync_sigmask_at((how), (set), (old), __FILE__, __LINE__)

/* SIGINT, SIGTERM or SIGHUP pending for the process (blocked everywhere,
 * not yet taken by the main thread): its number, or 0.  For waits that run
 * where the main thread cannot take signals. */
/* The signal that wakes a thread blocked in a system call (its handler,
 * installed by the engine, does nothing, so the call fails with EINTR);
 * every thread that may be woken so unblocks it. */
#define SYNC_WAKE_SIGNAL SIGUSR2

int sync_pending_stop(void);
/* A signal's name without "SIG" ("TERM"), or NULL for one it does not
 * know: the same on every system (glibc's sigabbrev_np is not). */
const char *sync_signal_name(int sig);

/* A thread that, between sync_stop_watch_start and _end, sets halt (and
 * sig) once sync_pending_stop finds a signal, looking every 50 ms: the
 * stop flag of waits that run while no thread takes signals.  Zero it
 * before the first start; halt and sig stay set across later starts. */
struct sync_stop_watch {
    atomic_bool halt;     /* set once a signal is pending */
    atomic_int sig;       /* which */
    atomic_bool running;  /* between start and end */
    pthread_t thread;
    bool started;         /* the owner's */
    pthread_mutex_t lock; /* _end wakes the thread at once, not after its 50 ms */
    pthread_cond_t cv;
};
int sync_stop_watch_start(struct sync_stop_watch *w, struct weir_error *err);
void sync_stop_watch_end(struct sync_stop_watch *w);

/* Monotonic clock helpers. */
double clock_now(void);                       /* seconds, monotonic */
struct timespec clock_deadline(double secs);  /* now + secs, for sync_wait_until */

#endif
