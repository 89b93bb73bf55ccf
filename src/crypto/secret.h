/*
 * secret.h - memory for secrets: keys, the record keys a handshake
 * exports, the sealers' key schedules, a key's text on its way in.
 *
 * Contract: secret_alloc() makes the process non-dumpable first (no core
 * dump, no ptrace attach by another process of the same user: OpenSSL
 * keeps copies of secrets in its own memory that weir cannot wipe), then
 * maps fresh pages that are excluded from core dumps and locked in memory
 * where RLIMIT_MEMLOCK allows.  secret_free() wipes them before unmapping.
 * secret_protect() is the first half alone, for a process that is about to
 * read a secret into memory of another kind (a key arriving on a pipe).
 * Any thread may call them; nothing here blocks.  A process never becomes
 * dumpable again.
 */
#ifndef WEIR_SECRET_H
#define WEIR_SECRET_H

#include <stddef.h>

/* Make the process non-dumpable; 0, or -1 with errno. */
int secret_protect(void);
/* n bytes of zeroed secret memory, or NULL (errno set). */
void *secret_alloc(size_t n);
/* Wipe and unmap what secret_alloc(n) gave; NULL is ignored. */
void secret_free(void *p, size_t n);

#endif
