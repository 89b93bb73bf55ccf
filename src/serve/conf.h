/*
 * conf.h - a service's configuration file (weir --serve FILE; weir.conf(5)).
 *
 * Contract: serve_conf_load() reads the whole file and either fills a
 * configuration that is complete and consistent or fails naming the file,
 * the line and the cause; it never leaves half a configuration behind, so
 * a reload that fails keeps the old one.  The file is line-based: '#'
 * begins a comment (at the start of a word), words are separated by blanks
 * and hold no blank themselves (no quoting).  Directives:
 *
 *   listen [ADDRESS:]PORT       where to listen ([::]:9090, 0.0.0.0:9090,
 *                               9090; port 0: one the system picks, which
 *                               the log names); unused when systemd passes
 *                               a socket
 *   key-file PATH               the clients' keys, one line each (--genkey)
 *   max-transfers N             transfers at once, 1 to 1024 (default 4)
 *   client NAME target TARGET [user USER] -o PATH
 *   client NAME target TARGET [user USER] -- COMMAND [ARGUMENT ...]
 *
 * A client line says what runs for the key named NAME when it asks for
 * TARGET (or names no target and TARGET is its first): the stream written
 * to PATH (strftime(3) conversions are expanded when the transfer starts;
 * an existing file is never overwritten) or to the standard input of
 * COMMAND, run as USER (default: the service's user).  serve_conf_check()
 * then checks the file against its keys: every client must have a key.
 *
 * serve_conf_load() reports warnings (a zfs recv that may roll back, -F)
 * through the log; they do not fail the load.
 */
#ifndef WEIR_SERVE_CONF_H
#define WEIR_SERVE_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "crypto/keyfile.h"
#include "format/codec.h"
#include "weir/error.h"
#include "weir/log.h"

#define SERVE_CONF_MAX_BYTES (1 << 20)
#define SERVE_MAX_TRANSFERS 1024
#define SERVE_USER_MAX 32

struct serve_target {
    char client[KEY_ID_MAX + 1];
    char name[CODEC_TARGET_MAX + 1];
    char user[SERVE_USER_MAX + 1];   /* "": the service's own */
    const char *output;              /* -o PATH (a strftime(3) pattern), or NULL */
    char **command;                  /* -- COMMAND ..., NULL-ended, or NULL */
    int line;
};

struct serve_conf {
    char path[4096];
    char bind[256];                  /* "" : every address */
    char port[16];                   /* "" : no listen line */
    int listen_line;
    char key_file[4096];
    int max_transfers;
    struct serve_target *targets;
    size_t ntargets;
    char *words;                     /* the storage the targets' words point into */
    char **argv;                     /* the storage of their commands */
};

int serve_conf_load(struct serve_conf *c, const char *path, struct weir_log *log,
                    struct weir_error *err);
/* Every client line's key is in ring; else fails naming the line. */
int serve_conf_check(const struct serve_conf *c, const struct keyring *ring,
                     struct weir_error *err);
/* The target client asks for (target "": its first), or NULL. */
const struct serve_target *serve_conf_find(const struct serve_conf *c, const char *client,
                                           const char *target);
void serve_conf_free(struct serve_conf *c);

#endif
