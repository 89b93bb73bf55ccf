/* secret.c - see secret.h. */
#include "crypto/secret.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "os/os.h"

int secret_protect(void)
{
    return os_undumpable();
}

void *secret_alloc(size_t n)
{
    if (secret_protect() != 0)
        return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    os_no_core(p, n);
    (void)mlock(p, n);   /* a hint: RLIMIT_MEMLOCK may refuse it */
    return p;
}

void secret_free(void *p, size_t n)
{
    if (!p)
        return;
    OPENSSL_cleanse(p, n);
    (void)munlock(p, n);
    if (munmap(p, n) != 0)
        abort();   /* only a size that secret_alloc did not give can fail here */
}
