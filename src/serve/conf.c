/*
 * conf.c - reading a service's configuration file.  See conf.h.
 *
 * The file is read whole into one allocation, which becomes the storage of
 * every word (each word ends where its blank was), so that a target's
 * output and command point into it and one free releases everything.
 */
#include "serve/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_WORDS 256   /* on one line */

/* One line, split into words (in place). */
struct line {
    char *w[MAX_WORDS];
    int n;
    int no;
};

static int at(struct weir_error *err, const struct serve_conf *c, int line, const char *fmt,
              const char *a, const char *b)
{
    char what[512];
    snprintf(what, sizeof what, fmt, a ? a : "", b ? b : "");
    return error_set(err, WEIR_EXIT_USAGE, "%s:%d: %s", c->path, line, what);
}

/* Read the file whole, NUL-ended, into *out. */
static int read_whole(const char *path, char **out, size_t *len, struct weir_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_sys(err, WEIR_EXIT_USAGE, errno, "%s: open", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > SERVE_CONF_MAX_BYTES) {
        int e = errno;
        close(fd);
        return S_ISREG(st.st_mode) && st.st_size > SERVE_CONF_MAX_BYTES
                   ? error_set(err, WEIR_EXIT_USAGE, "%s: larger than 1 MiB", path)
                   : error_sys(err, WEIR_EXIT_USAGE, S_ISREG(st.st_mode) ? e : EINVAL, "%s",
                               path);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t r = buf ? 0 : -1;
    int e = buf ? 0 : ENOMEM;
    while (buf && r < st.st_size) {   /* a file that grew is read as it was */
        ssize_t got = read(fd, buf + r, (size_t)(st.st_size - r));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            e = got < 0 ? errno : 0;
            r = got < 0 ? -1 : r;
            break;
        }
        r += got;
    }
    close(fd);
    if (r < 0) {
        free(buf);
        return error_sys(err, WEIR_EXIT_USAGE, e, "%s: read", path);
    }
    buf[r] = 0;
    if (memchr(buf, 0, (size_t)r))
        return free(buf), error_set(err, WEIR_EXIT_USAGE, "%s: not a text file", path);
    *out = buf;
    *len = (size_t)r;
    return 0;
}

/* The word at q, its quotes taken out in place: '...' as it is, "..." with
 * \" and \\ for a quote and a backslash.  Where the next word may begin,
 * or NULL when a quote is not closed. */
static char *word(char *q)
{
    char *out = q;
    while (*q && *q != ' ' && *q != '\t' && *q != '\r') {
        char quote = *q;
        if (quote != '\'' && quote != '"') {
            *out++ = *q++;
            continue;
        }
        for (q++; *q && *q != quote; *out++ = *q++)
            if (quote == '"' && *q == '\\' && (q[1] == '"' || q[1] == '\\'))
                q++;
        if (!*q)
            return NULL;
        q++;
    }
    char c = *q;
    *out = 0;
    return c ? q + 1 : q;
}

/* Split the line that begins at p (ended by '\n' or NUL, which become NUL)
 * into words; '#' at a word's start ends the line.  The next line's start. */
static char *split(char *p, struct line *l, struct weir_error *err, const struct serve_conf *c,
                   int *bad)
{
    l->n = 0;
    *bad = 0;
    char *end = p + strcspn(p, "\n");
    char *next = *end ? end + 1 : end;
    *end = 0;
    for (char *q = p; *q;) {
        q += strspn(q, " \t\r");
        if (!*q || *q == '#')
            break;
        if (l->n == MAX_WORDS) {
            *bad = at(err, c, l->no, "more than 256 words on one line%s%s", NULL, NULL);
            break;
        }
        l->w[l->n++] = q;
        if (!(q = word(q))) {
            *bad = at(err, c, l->no, "a quote is not closed%s%s", NULL, NULL);
            break;
        }
    }
    return next;
}

/* listen [ADDRESS:]PORT, ADDRESS in brackets when it holds colons. */
static int take_listen(struct serve_conf *c, const struct line *l, struct weir_error *err)
{
    if (l->n != 2)
        return at(err, c, l->no, "listen takes one [ADDRESS:]PORT%s%s", NULL, NULL);
    if (c->listen_line)
        return at(err, c, l->no, "a second listen line (one service listens once)%s%s", NULL,
                  NULL);
    const char *v = l->w[1], *port = strrchr(v, ':');
    const char *addr = v;
    size_t alen = port ? (size_t)(port - v) : 0;
    port = port ? port + 1 : v;
    if (alen >= 2 && addr[0] == '[' && addr[alen - 1] == ']') {
        addr++;
        alen -= 2;
    }
    char *e;
    errno = 0;
    long n = strtol(port, &e, 10);
    if (!*port || *e || errno || n < 0 || n > 65535 || alen >= sizeof c->bind ||
        memchr(addr, '[', alen) || memchr(addr, ']', alen) ||
        (alen == 0 && port != v && !(v[0] == '[' || v[0] == ':')))
        return at(err, c, l->no, "listen %s: not [ADDRESS:]PORT (a port from 0 to 65535)%s",
                  v, NULL);
    memcpy(c->bind, addr, alen);
    c->bind[alen] = 0;
    snprintf(c->port, sizeof c->port, "%ld", n);
    c->listen_line = l->no;
    return 0;
}

static int take_simple(struct serve_conf *c, const struct line *l, struct weir_error *err)
{
    const char *d = l->w[0];
    if (l->n != 2)
        return at(err, c, l->no, "%s takes one value%s", d, NULL);
    if (strcmp(d, "key-file") == 0) {
        if (c->key_file[0])
            return at(err, c, l->no, "a second key-file line%s%s", NULL, NULL);
        if (l->w[1][0] != '/' || strlen(l->w[1]) >= sizeof c->key_file)
            return at(err, c, l->no, "key-file %s: not an absolute path%s", l->w[1], NULL);
        snprintf(c->key_file, sizeof c->key_file, "%s", l->w[1]);
        return 0;
    }
    char *e;
    errno = 0;
    long n = strtol(l->w[1], &e, 10);
    if (*e || errno || n < 1 || n > SERVE_MAX_TRANSFERS || !l->w[1][0])
        return at(err, c, l->no, "max-transfers %s: not a number from 1 to 1024%s", l->w[1],
                  NULL);
    c->max_transfers = (int)n;
    return 0;
}

/* What follows "client NAME target TARGET [user USER]": -o PATH or -- CMD. */
static int take_action(struct serve_conf *c, const struct line *l, int i,
                       struct serve_target *t, char ***argv, struct weir_error *err)
{
    if (i + 2 == l->n && strcmp(l->w[i], "-o") == 0) {
        if (l->w[i + 1][0] != '/')
            return at(err, c, l->no, "-o %s: not an absolute path%s", l->w[i + 1], NULL);
        t->output = l->w[i + 1];
        return 0;
    }
    if (i + 1 < l->n && strcmp(l->w[i], "--") == 0) {
        t->command = *argv;
        for (int k = i + 1; k < l->n; k++)
            *(*argv)++ = l->w[k];
        *(*argv)++ = NULL;
        return 0;
    }
    return at(err, c, l->no, "client %s target %s: give -o PATH or -- COMMAND after the "
              "target (and its user)", t->client, t->name);
}

static int take_client(struct serve_conf *c, const struct line *l, char ***argv,
                       struct weir_error *err)
{
    if (l->n < 5 || strcmp(l->w[2], "target") != 0)
        return at(err, c, l->no, "a client line is: client NAME target TARGET [user USER] "
                  "-o PATH | -- COMMAND%s%s", NULL, NULL);
    const char *name = l->w[1], *target = l->w[3];
    if (!keyfile_valid_id(name, strlen(name)))
        return at(err, c, l->no, "client %s: not a key's name%s", name, NULL);
    if (!target[0] || !codec_target_name_ok(target))
        return at(err, c, l->no, "target %s: a target's name is 1 to 63 of A-Z a-z 0-9 . _ -%s",
                  target, NULL);
    if (serve_conf_find(c, name, target))
        return at(err, c, l->no, "client %s target %s: given twice", name, target);
    struct serve_target *t = &c->targets[c->ntargets];
    *t = (struct serve_target){.line = l->no};
    snprintf(t->client, sizeof t->client, "%s", name);
    snprintf(t->name, sizeof t->name, "%s", target);
    int i = 4;
    if (strcmp(l->w[i], "user") == 0 && i + 1 < l->n) {
        if (strlen(l->w[i + 1]) > SERVE_USER_MAX || !getpwnam(l->w[i + 1]))
            return at(err, c, l->no, "user %s: no such user%s", l->w[i + 1], NULL);
        snprintf(t->user, sizeof t->user, "%s", l->w[i + 1]);
        i += 2;
    }
    if (take_action(c, l, i, t, argv, err))
        return -1;
    c->ntargets++;
    return 0;
}

/* A zfs recv with -F rolls the target back and destroys what the stream
 * does not hold; without -u it mounts what it receives where the stream
 * says.  Both are said, not refused: some targets want them. */
static void warn_zfs(const struct serve_conf *c, const struct serve_target *t,
                     struct weir_log *log)
{
    char **a = t->command;
    if (!a || !a[0] || !a[1] || strcmp(strrchr(a[0], '/') ? strrchr(a[0], '/') + 1 : a[0],
                                         "zfs") != 0 ||
        (strcmp(a[1], "recv") != 0 && strcmp(a[1], "receive") != 0))
        return;
    bool force = false, unmounted = false;
    for (int i = 2; a[i]; i++) {   /* option words only: their values never begin with '-' */
        force |= a[i][0] == '-' && strchr(a[i], 'F') != NULL;
        unmounted |= a[i][0] == '-' && strchr(a[i], 'u') != NULL;
    }
    if (force)
        log_msg(log, LOG_WARN, "%s:%d: warning: client %s target %s: zfs recv -F rolls the "
                "dataset back and destroys its snapshots that the stream does not hold",
                c->path, t->line, t->client, t->name);
    if (!unmounted)
        log_msg(log, LOG_WARN, "%s:%d: warning: client %s target %s: zfs recv without -u "
                "mounts what it receives at the mountpoint the stream names (add -u and "
                "-x mountpoint)", c->path, t->line, t->client, t->name);
}

static int take_line(struct serve_conf *c, const struct line *l, char ***argv,
                     struct weir_error *err)
{
    const char *d = l->w[0];
    if (strcmp(d, "listen") == 0)
        return take_listen(c, l, err);
    if (strcmp(d, "key-file") == 0 || strcmp(d, "max-transfers") == 0)
        return take_simple(c, l, err);
    if (strcmp(d, "client") == 0)
        return take_client(c, l, argv, err);
    return at(err, c, l->no, "'%s': not a directive (listen, key-file, max-transfers, "
              "client)%s", d, NULL);
}

/* Room for the targets and their commands: at most one a line, and one
 * pointer a word and a line. */
static int make_room(struct serve_conf *c, const char *text, size_t len, struct weir_error *err)
{
    size_t lines = 1, words = 0;
    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
        words += !strchr(" \t\r\n", text[i]) && (i == 0 || strchr(" \t\r\n", text[i - 1]));
    }
    c->targets = calloc(lines, sizeof *c->targets);
    c->argv = calloc(words + lines, sizeof *c->argv);
    if (!c->targets || !c->argv)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s", c->path);
    return 0;
}

static int parse(struct serve_conf *c, struct weir_log *log, struct weir_error *err)
{
    char **argv = c->argv;
    struct line l = {.no = 0};
    for (char *p = c->words; *p;) {
        int bad;
        l.no++;
        p = split(p, &l, err, c, &bad);
        if (bad || (l.n > 0 && take_line(c, &l, &argv, err)))
            return -1;
    }
    if (!c->key_file[0])
        return error_set(err, WEIR_EXIT_USAGE, "%s: no key-file line (a service admits keyed "
                         "senders only)", c->path);
    if (c->ntargets == 0)
        return error_set(err, WEIR_EXIT_USAGE, "%s: no client line: nobody could send", c->path);
    for (size_t i = 0; i < c->ntargets; i++)
        warn_zfs(c, &c->targets[i], log);
    return 0;
}

int serve_conf_load(struct serve_conf *c, const char *path, struct weir_log *log,
                    struct weir_error *err)
{
    memset(c, 0, sizeof *c);
    c->max_transfers = 4;
    snprintf(c->path, sizeof c->path, "%s", path);
    size_t len = 0;
    if (read_whole(path, &c->words, &len, err) || make_room(c, c->words, len, err) ||
        parse(c, log, err)) {
        serve_conf_free(c);
        return -1;
    }
    return 0;
}

int serve_conf_check(const struct serve_conf *c, const struct keyring *ring,
                     struct weir_error *err)
{
    for (size_t i = 0; i < c->ntargets; i++) {
        const struct serve_target *t = &c->targets[i];
        if (!keyfile_find(ring, t->client, strlen(t->client)))
            return error_set(err, WEIR_EXIT_USAGE, "%s:%d: client %s: no key of that name in "
                             "%s", c->path, t->line, t->client, c->key_file);
    }
    return 0;
}

const struct serve_target *serve_conf_find(const struct serve_conf *c, const char *client,
                                           const char *target)
{
    for (size_t i = 0; i < c->ntargets; i++)
        if (strcmp(c->targets[i].client, client) == 0 &&
            (!target[0] || strcmp(c->targets[i].name, target) == 0))
            return &c->targets[i];
    return NULL;
}

void serve_conf_free(struct serve_conf *c)
{
    free(c->words);
    free(c->targets);
    free(c->argv);
    c->words = NULL;
    c->targets = NULL;
    c->argv = NULL;
    c->ntargets = 0;
}
