/*
 * main.c - weir's command line: options, logging, the engine, the status
 * line and the summary, the JSON progress lines (progress.h), the exit
 * status.
 *
 * main() is the only place that prints a fatal setup error and the only
 * place that exits.  Everything after setup is the engine's (weir.h); this
 * file only draws what the engine reports.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sync.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "crypto/keyfile.h"
#include "options/options.h"
#include "os/os.h"
#include "remote/remote.h"
#include "serve/serve.h"
#include "weir/error.h"
#include "weir/log.h"
#include "weir/weir.h"

#ifndef WEIR_VERSION
#define WEIR_VERSION "0.0.0"
#endif

#define STATUS_INTERVAL 0.5   /* seconds between redraws of the status line */

/* A descriptor 0, 1 or 2 that is closed at startup would be handed to the
 * first file or socket weir opens, and messages or data meant for it would
 * land there (weir -o out 2>&- would write "weir: ..." into out).  Each
 * closed one gets /dev/null first; which ones were closed is remembered, so
 * that a closed standard input or output used as the data's endpoint is an
 * error rather than an empty input or a silent sink.  Returns -1 when even
 * /dev/null cannot be opened. */
static int standard_descriptors(bool closed[3])
{
    for (int fd = 0; fd < 3; fd++) {
        closed[fd] = fcntl(fd, F_GETFD) < 0 && errno == EBADF;
        if (!closed[fd])
            continue;
        /* the lowest free descriptor is fd: 0-2 are filled in order */
        int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (got != fd) {
            if (got >= 0)
                close(got);
            return -1;
        }
    }
    return 0;
}

/* What the engine's observer draws: the status line and the progress
 * lines, each at its own interval; the engine calls it at the shorter. */
struct observer {
    struct weir_log *log;
    bool status_on;                   /* the status line is drawn */
    double status_next;               /* monotonic time it is due again */
    struct stats_snapshot status_prev;   /* its last, for its rates */
    struct progress *progress;
    double tick;                      /* the engine's interval */
};

/* The status line, redrawn in place on a terminal, or printed whole when
 * SIGUSR1 asks for it (as is a progress line then). */
static void observe(void *ctx, const struct stats_snapshot *prev,
                    const struct stats_snapshot *now, bool whole_line)
{
    struct observer *ob = ctx;
    char line[400];
    double t = clock_now();
    if (whole_line) {
        stats_status_line(prev, now, line, sizeof line);
        log_status_line(ob->log, line);
    } else if (ob->status_on && t + ob->tick / 2 >= ob->status_next) {
        stats_status_line(&ob->status_prev, now, line, sizeof line);
        log_status(ob->log, line);
        ob->status_prev = *now;
        ob->status_next = t + STATUS_INTERVAL;
    }
    progress_observe(ob->progress, now, t, ob->tick, whole_line);
}

/* --genkey FILE: a new key named --key-id or after this host. */
static int genkey(const struct weir_options *opts)
{
    char host[256] = "";
    const char *id = opts->key_id;
    if (!id) {
        if (gethostname(host, sizeof host - 1) != 0 || !host[0])
            snprintf(host, sizeof host, "weir");
        id = host;
    }
    struct weir_error err;
    if (keyfile_generate(opts->genkey, id, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        return err.status;
    }
    if (!opts->quiet)
        fprintf(stderr, "weir: wrote the key '%s' to %s (mode 0600): copy it to the other "
                "host the same way\n", id, opts->genkey);
    return WEIR_EXIT_OK;
}

/* A start that failed: the progress lines say so too, unless weir refused
 * to start at all (exit 2, as for a bad option: nothing is written). */
static void progress_failed_start(struct progress *pr, const struct weir_error *err)
{
    if (err->status == WEIR_EXIT_USAGE) {
        progress_abandon(pr);
        return;
    }
    struct stats_snapshot none;
    memset(&none, 0, sizeof none);
    none.phase = STATS_DONE;
    progress_end(pr, &none, err->status, err->msg);
}

/* Run the created engine: the status line (or JSON progress) while it
 * runs, the summary once it is done.  Its exit status. */
static int run_observed(struct weir_engine *engine, const struct weir_options *opts,
                        struct weir_log *log, struct progress *pr)
{
    /* JSON lines on standard error take the place of the status line */
    struct observer ob = {.log = log, .progress = pr,
                          .status_on = log->tty && !opts->quiet && !progress_on_stderr(pr)};
    double tick = ob.status_on ? STATUS_INTERVAL : 0;
    if (progress_on(pr) && (tick == 0 || pr->interval < tick))
        tick = pr->interval;
    ob.tick = tick;
    ob.status_next = clock_now() + STATUS_INTERVAL;
    struct stats_snapshot s;
    weir_snapshot(engine, &s);
    ob.status_prev = s;
    progress_begin(pr, &s);
    struct weir_observer obs = {.status = observe, .ctx = &ob, .interval = tick};
    int status = weir_run(engine, &obs);
    weir_snapshot(engine, &s);
    log_status_end(log);
    if (!opts->quiet) {
        char line[512];
        stats_summary(&s, weir_succeeded(engine), line, sizeof line);
        log_status_line(log, line);
    }
    progress_end(pr, &s, status, s.failure);
    return status;
}

/* One transfer; remote (--ssh, --ssh-server: remote.h) when the other end
 * is started over ssh. */
static int run(const struct weir_options *opts, struct weir_log *log, struct progress *pr,
               struct remote *remote)
{
    struct weir_config cfg;
    struct weir_error err;
    options_to_config(opts, &cfg);
    progress_config(pr, &cfg);
    /* test-only: change keys every few records, so that tests cross epochs */
    const char *epochs = getenv("WEIR_TEST_EPOCH_RECORDS");
    if (epochs)
        cfg.epoch_records = strtoull(epochs, NULL, 10);
    if (weir_signals_block(&err) || (remote && remote_configure(remote, &cfg, &err))) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        progress_failed_start(pr, &err);
        return remote ? remote_finish(remote, err.status) : err.status;
    }
    struct weir_engine *engine = NULL;
    int status;
    bool created = weir_create(&cfg, log, &engine, &err) == 0;
    if (created && remote && remote_started(remote, engine, &err)) {
        weir_destroy(engine);
        engine = NULL;
        created = false;
    }
    if (!created) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        status = err.status;
        /* a signal while starting: the transfer was begun and is not done */
        if (status > WEIR_EXIT_SIGNAL && !opts->quiet)
            log_status_line(log, "summary: INCOMPLETE: nothing was transferred (interrupted "
                            "while starting)");
        progress_failed_start(pr, &err);
    } else {
        status = run_observed(engine, opts, log, pr);
        if (remote)   /* before the engine goes: remote.c watches ssh beside it */
            status = remote_finish(remote, status);
        remote = NULL;
    }
    weir_destroy(engine);
    return remote ? remote_finish(remote, status) : status;
}

/* weir --ssh-server: the other end of weir --ssh, whose request says what to
 * run (remote.h). */
/* --ssh: the local end that is plainly unusable (a closed standard
 * descriptor, an input file that is not there) is named before ssh logs in
 * and the far end starts its command; the engine still checks everything
 * when it opens them.  0, or the exit status after the message. */
static int ssh_local_ends(const struct weir_options *o, struct weir_log *log)
{
    if (o->command)
        return 0;   /* the local command is the producer or the consumer */
    if (o->pull) {
        bool to_stdout = o->noutputs == 0;
        for (int i = 0; i < o->noutputs; i++)
            to_stdout |= o->outputs[i].kind == OUTPUT_FILE && strcmp(o->outputs[i].path, "-") == 0;
        if (to_stdout && o->stdout_closed) {
            log_msg(log, LOG_ERROR, "output <stdout>: standard output is closed (give -o FILE, "
                    "or >/dev/null to discard the data)");
            return WEIR_EXIT_OUTPUT;
        }
        return 0;
    }
    struct stat st;
    if (!o->input_path || strcmp(o->input_path, "-") == 0) {
        if (o->stdin_closed) {
            log_msg(log, LOG_ERROR, "input <stdin>: standard input is closed (give -i FILE, or "
                    "</dev/null for an empty input)");
            return WEIR_EXIT_INPUT;
        }
    } else if (stat(o->input_path, &st) != 0) {
        log_msg(log, LOG_ERROR, "input %s: open: %s", o->input_path, strerror(errno));
        return WEIR_EXIT_INPUT;
    }
    return 0;
}

static int serve_ssh(struct weir_log *log, struct progress *pr)
{
    struct remote *r = NULL;
    struct weir_options o;
    struct weir_error err;
    int status;
    /* only the engine's threads take signals, from the start: the ssh
     * channel's relays start before the engine does */
    if (weir_signals_block(&err) || remote_server_new(&r, log, &o, &err)) {
        if (!remote_refused(r))   /* else the local weir says it */
            log_msg(log, LOG_ERROR, "%s", err.msg);
        status = err.status;
    } else if (remote_rejoining(r)) {
        status = remote_relay(r);
    } else {
        log->quiet = o.quiet;
        log->verbosity = o.verbosity;
        status = run(&o, log, pr, r);
    }
    remote_free(r);
    return status;
}

/* --link-test: the observer's JSON lines as figures come. */
static void link_rtt(void *ctx, const struct linktest_result *r)
{
    progress_link_rtt(ctx, r);
}

static void link_figure(void *ctx, const struct linktest_result *r, int row,
                        enum linktest_way way)
{
    progress_link_figure(ctx, r, row, way);
}

/* --link-test: the test (linktest.h), its table on standard output (unless
 * the JSON lines go there), the JSON lines, the exit status. */
static int link_test(const struct weir_options *opts, struct weir_log *log,
                     struct progress *pr)
{
    struct linktest_config cfg;
    struct weir_error err;
    options_to_linktest(opts, &cfg);
    const char *epochs = getenv("WEIR_TEST_EPOCH_RECORDS");   /* test-only, as for -I */
    if (epochs)
        cfg.epoch_records = strtoull(epochs, NULL, 10);
    bool table = !(pr->target == PROGRESS_FD && pr->fd == STDOUT_FILENO);
    if (table && opts->stdout_closed) {
        fprintf(stderr, "weir: output <stdout>: standard output is closed (the table goes "
                "there)\n");
        return WEIR_EXIT_OUTPUT;
    }
    if (weir_signals_block(&err)) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        return err.status;
    }
    progress_link_begin(pr, &cfg);
    struct linktest_observer obs = {.rtt = link_rtt, .figure = link_figure, .ctx = pr};
    struct linktest_result *res = malloc(sizeof *res);
    if (!res) {
        log_msg(log, LOG_ERROR, "link test: out of memory");
        return WEIR_EXIT_INTERNAL;
    }
    int status = WEIR_EXIT_OK;
    if (linktest_run(&cfg, log, &obs, res, &err)) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        status = err.status;
    } else if (table) {
        char text[8192];
        stats_link_table(res, text, sizeof text);
        if (fputs(text, stdout) == EOF || fflush(stdout) != 0) {
            error_sys(&err, WEIR_EXIT_OUTPUT, errno, "output <stdout>");
            status = err.status;
            log_msg(log, LOG_ERROR, "%s", err.msg);
        }
    }
    progress_link_end(pr, res, status, status ? err.msg : NULL);
    free(res);
    return status;
}

/* -h or -V: the text on standard output, which must be open. */
static int help_or_version(const struct weir_options *o, bool stdout_closed)
{
    if (stdout_closed) {
        fprintf(stderr, "weir: output <stdout>: standard output is closed\n");
        return WEIR_EXIT_OUTPUT;
    }
    if (o->help)
        options_usage(stdout);
    else
        printf("weir %s\n", WEIR_VERSION);
    return fflush(stdout) == 0 ? WEIR_EXIT_OK : WEIR_EXIT_OUTPUT;
}

/* What this weir is: a link tester, the far end of --ssh, the near end of
 * --ssh, or a transfer; its exit status. */
static int dispatch(struct weir_options *o, struct weir_log *log, struct progress *pr)
{
    if (o->link_test)
        return link_test(o, log, pr);
    if (o->serve)
        return serve_main(o->serve, log);
    if (o->ssh_server)
        return serve_ssh(log, pr);
    if (!o->ssh_host)
        return run(o, log, pr, NULL);
    struct remote *r = NULL;
    struct weir_error err;
    int status = ssh_local_ends(o, log);
    if (status != 0) {
        /* said */
    } else if (remote_local_new(&r, o, log, &err)) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        status = err.status;
    } else {
        status = run(o, log, pr, r);
    }
    remote_free(r);
    return status;
}

int main(int argc, char **argv)
{
    bool closed[3];
    if (standard_descriptors(closed) != 0)
        return WEIR_EXIT_INTERNAL;   /* not even stderr to say so */
    struct weir_options opts;
    struct weir_error err;
    if (options_parse(argc, argv, &opts, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        return err.status;
    }
    opts.stdin_closed = closed[0];
    opts.stdout_closed = opts.stdout_null = closed[1];
    if (opts.help || opts.version)
        return help_or_version(&opts, closed[1]);
    if (opts.genkey)
        return genkey(&opts);
    if (opts.print_pid)   /* mbuffer's --pid: scripts read it to signal weir */
        fprintf(stderr, "weir: PID is %ld\n", (long)getpid());
    /* -L: the buffer's pages are locked as they are first used, so that
     * -m stays a bound rather than an allocation */
    if (opts.lock_memory && os_lock_memory() != 0) {
        fprintf(stderr, "weir: -L: cannot lock the buffer in memory: %s (RLIMIT_MEMLOCK, "
                "or CAP_IPC_LOCK)\n", strerror(errno));
        return WEIR_EXIT_INTERNAL;
    }
    struct weir_log log;
    log_init(&log, opts.quiet, opts.verbosity);
    if (opts.log_path && log_open_file(&log, opts.log_path)) {
        fprintf(stderr, "weir: log %s: open: %s\n", opts.log_path, strerror(errno));
        return WEIR_EXIT_USAGE;
    }
    struct progress pr;
    progress_off(&pr);
    if (opts.progress &&
        progress_open(&pr, opts.progress_to_fd ? opts.progress_fd : -1, opts.progress_path,
                      opts.interval, closed, &log, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        log_close(&log);
        return err.status;
    }
    int status = dispatch(&opts, &log, &pr);
    progress_close(&pr);
    log_close(&log);
    return status;
}
