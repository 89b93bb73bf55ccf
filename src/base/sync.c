/* sync.c - see sync.h. */
#include "base/sync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/os.h"

static void sync_die(int err, const char *what, const char *file, int line)
{
    fprintf(stderr, "weir: internal error: %s failed at %s:%d: %s\n",
            what, file, line, strerror(err));
    abort();
}

void sync_mutex_init_at(pthread_mutex_t *m, const char *file, int line)
{
    int err = pthread_mutex_init(m, NULL);
    if (err)
        sync_die(err, "pthread_mutex_init", file, line);
}

void sync_cond_init_at(pthread_cond_t *c, const char *file, int line)
{
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (!err)
        err = os_cond_monotonic(&attr);
    if (!err)
        err = pthread_cond_init(c, &attr);
    if (err)
        sync_die(err, "pthread_cond_init", file, line);
    pthread_condattr_destroy(&attr);
}

void sync_lock_at(pthread_mutex_t *m, const char *file, int line)
{
    int err = pthread_mutex_lock(m);
    if (err)
        sync_die(err, "pthread_mutex_lock", file, line);
}

void sync_unlock_at(pthread_mutex_t *m, const char *file, int line)
{
    int err = pthread_mutex_unlock(m);
    if (err)
        sync_die(err, "pthread_mutex_unlock", file, line);
}

void sync_wait_at(pthread_cond_t *c, pthread_mutex_t *m, const char *file, int line)
{
    int err = pthread_cond_wait(c, m);
    if (err)
        sync_die(err, "pthread_cond_wait", file, line);
}

bool sync_wait_until_at(pthread_cond_t *c, pthread_mutex_t *m,
                        const struct timespec *deadline, const char *file, int line)
{
    int err = os_cond_wait_until(c, m, deadline);
    if (err == ETIMEDOUT)
        return false;
    if (err)
        sync_die(err, "pthread_cond_timedwait", file, line);
    return true;
}

void sync_broadcast_at(pthread_cond_t *c, const char *file, int line)
{
    int err = pthread_cond_broadcast(c);
    if (err)
        sync_die(err, "pthread_cond_broadcast", file, line);
}

void sync_signal_at(pthread_cond_t *c, const char *file, int line)
{
    int err = pthread_cond_signal(c);
    if (err)
        sync_die(err, "pthread_cond_signal", file, line);
}

int sync_create_at(pthread_t *t, void *(*fn)(void *), void *arg, struct weir_error *e,
                   const char *file, int line)
{
    int err = pthread_create(t, NULL, fn, arg);
    if (err == EAGAIN)
        return error_sys(e, WEIR_EXIT_INTERNAL, err, "cannot start a thread");
    if (err)
        sync_die(err, "pthread_create", file, line);
    return 0;
}

void sync_kill_at(pthread_t t, int sig, const char *file, int line)
{
    int err = pthread_kill(t, sig);
    if (err)
        sync_die(err, "pthread_kill", file, line);
}

void sync_sigmask_at(int how, const sigset_t *set, sigset_t *old, const char *file, int line)
{
    int err = pthread_sigmask(how, set, old);
    if (err)
        sync_die(err, "pthread_sigmask", file, line);
}

void sync_join_at(pthread_t t, const char *file, int line)
{
    int err = pthread_join(t, NULL);
    if (err)
        sync_die(err, "pthread_join", file, line);
}

int sync_pending_stop(void)
{
    sigset_t set;
    if (sigpending(&set) != 0)
        return 0;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigismember(&set, sigs[i]) == 1)
            return sigs[i];
    return 0;
}

const char *sync_signal_name(int sig)
{
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "HUP"},   {SIGINT, "INT"},     {SIGQUIT, "QUIT"}, {SIGILL, "ILL"},
        {SIGTRAP, "TRAP"}, {SIGABRT, "ABRT"},   {SIGBUS, "BUS"},   {SIGFPE, "FPE"},
        {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},   {SIGSEGV, "SEGV"}, {SIGUSR2, "USR2"},
        {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},   {SIGTERM, "TERM"}, {SIGCHLD, "CHLD"},
        {SIGCONT, "CONT"}, {SIGSTOP, "STOP"},   {SIGTSTP, "TSTP"}, {SIGTTIN, "TTIN"},
        {SIGTTOU, "TTOU"}, {SIGURG, "URG"},     {SIGXCPU, "XCPU"}, {SIGXFSZ, "XFSZ"},
        {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGSYS, "SYS"},
#ifdef SIGWINCH
        {SIGWINCH, "WINCH"},
#endif
#ifdef SIGIO
        {SIGIO, "IO"},
#endif
#ifdef SIGPWR
        {SIGPWR, "PWR"},
#endif
#ifdef SIGINFO
        {SIGINFO, "INFO"},
#endif
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].sig == sig)
            return names[i].name;
    return NULL;
}

static void *stop_watch_main(void *arg)
{
    struct sync_stop_watch *w = arg;
    sync_lock(&w->lock);
    while (atomic_load(&w->running)) {
        int sig = sync_pending_stop();
        if (sig) {
            atomic_store(&w->sig, sig);
            atomic_store(&w->halt, true);
            break;
        }
        struct timespec until = clock_deadline(0.05);
        sync_wait_until(&w->cv, &w->lock, &until);
    }
    sync_unlock(&w->lock);
    return NULL;
}

int sync_stop_watch_start(struct sync_stop_watch *w, struct weir_error *err)
{
    sync_mutex_init(&w->lock);
    sync_cond_init(&w->cv);
    atomic_store(&w->running, true);
    if (sync_create(&w->thread, stop_watch_main, w, err)) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->lock);
        return -1;
    }
    w->started = true;
    return 0;
}

void sync_stop_watch_end(struct sync_stop_watch *w)
{
    if (!w->started)
        return;
    sync_lock(&w->lock);
    atomic_store(&w->running, false);
    sync_signal(&w->cv);
    sync_unlock(&w->lock);
    sync_join(w->thread);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->lock);
    w->started = false;
}

double clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);  /* cannot fail for CLOCK_MONOTONIC */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct timespec clock_deadline(double secs)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(secs * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}
