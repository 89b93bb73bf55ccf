/* check.h - a tiny test harness: CHECK prints "ok N - what" or fails the test. */
#ifndef WEIR_CHECK_H
#define WEIR_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_count;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
            exit(1);                                                  \
        }                                                             \
        check_count++;                                                \
    } while (0)

#define CHECK_DONE()                                                  \
    do {                                                              \
        if (check_count == 0) {                                       \
            fprintf(stderr, "FAIL: no checks ran\n");                 \
            return 1;                                                 \
        }                                                             \
        printf("%d checks passed\n", check_count);                    \
        return 0;                                                     \
    } while (0)

#endif
