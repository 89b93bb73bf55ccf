/* error.c - see include/weir/error.h. */
#include "weir/error.h"

#include <stdio.h>
#include <string.h>

int error_vset(struct weir_error *e, int status, const char *fmt, va_list ap)
{
    e->status = status;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return -1;
}

int error_set(struct weir_error *e, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, status, fmt, ap);
    va_end(ap);
    return -1;
}

int error_sys(struct weir_error *e, int status, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, status, fmt, ap);
    va_end(ap);
    size_t used = strlen(e->msg);
    snprintf(e->msg + used, sizeof e->msg - used, ": %s", strerror(err));
    return -1;
}
