/*
 * vipl_ext.h - extensions of this VIPL beyond VIA 1.0.
 *
 * Nothing here is needed by a VIA program; it is for tools and for users
 * who want to know why a call failed.
 */
#ifndef VIPL_EXT_H
#define VIPL_EXT_H

#include <vipl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The name of a return code, e.g. "VIP_INVALID_PTAG". */
const char *vip_strerror(VIP_RETURN rc);

/* Why the last failing VIPL call of this thread failed, in words. */
const char *vip_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
