/*
 * tam2.h - what the AM-II tests share (test_am2*.c).
 */
#ifndef TAM2_H
#define TAM2_H

#include <stdio.h>

#include <am2.h>

#include "tlib.h"

/* An AM call must return `expect`; otherwise say what it returned and why,
 * and leave the test through `out:`. */
#define TAM(call, expect)                                                                 \
    do {                                                                                  \
        int tam_rc_ = (call);                                                             \
        if (tam_rc_ != (expect))                                                          \
            fprintf(stderr, "\n  %s:%d: %s returned %d, expected %d (%s)\n", __FILE__,      \
                    __LINE__, #call, tam_rc_, (expect), AMX_LastError());                  \
        CU_assertImplementation(tam_rc_ == (expect), __LINE__, #call " == " #expect,       \
                                __FILE__, "", CU_FALSE);                                   \
        if (tam_rc_ != (expect))                                                          \
            goto out;                                                                     \
    } while (0)

#endif
