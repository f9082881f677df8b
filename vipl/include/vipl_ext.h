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

/*
 * Short-message extensions (Berkeley VIA paper, "VIA Extensions").
 * Once a VI's mode is set, an ordinary VipPostSend of a message with one
 * data segment (or none), no RDMA, of at most MaxBytes takes the fast
 * path; its descriptor completes with the same status as on the standard
 * path. Anything else, and anything above MaxBytes, goes the standard way.
 * Receives are always standard. Unmodified programs choose a mode with the
 * environment: VIP_EXT_MODE=standard|descriptorless|merged, VIP_EXT_MAX.
 */
typedef enum {
    VIP_EXT_STANDARD = 0,       /* doorbell -> descriptor -> data */
    VIP_EXT_DESCRIPTORLESS = 1, /* data by programmed I/O into NIC SRAM; token = size */
    VIP_EXT_MERGED = 2          /* descriptor and data contiguous: one DMA */
} VIP_EXT_MODE;

#define VIP_EXT_MAX_DEFAULT 256u     /* bytes */
#define VIP_EXT_DESCRIPTORLESS_MAX 256u
#define VIP_EXT_MERGED_MAX 8192u

/* MaxBytes 0 means VIP_EXT_MAX_DEFAULT; larger than the mode allows ->
 * VIP_INVALID_PARAMETER. */
VIP_RETURN VipExtSetMode(VIP_VI_HANDLE ViHandle, VIP_EXT_MODE Mode, VIP_ULONG MaxBytes);
VIP_RETURN VipExtGetMode(VIP_VI_HANDLE ViHandle, VIP_EXT_MODE *Mode, VIP_ULONG *MaxBytes);

/* The hardware profile of the NIC ("native", "sbus", "pci"). */
const char *VipExtProfileName(VIP_NIC_HANDLE NicHandle);

/* The time a program should measure itself by, in nanoseconds:
 * CLOCK_MONOTONIC, or under VIP_CLOCK=virtual the process's virtual clock
 * (the caller's computation since its last VIPL call is charged first).
 * Only differences mean anything. */
unsigned long long VipExtClockNs(void);

/* 1 when this process runs in virtual time (a NIC open under
 * VIP_CLOCK=virtual), else 0. */
int VipExtClockVirtual(void);

/* The name of a return code, e.g. "VIP_INVALID_PTAG". */
const char *vip_strerror(VIP_RETURN rc);

/* An asynchronous error code (VIP_ERROR_DESCRIPTOR.ErrorCode) in words. */
const char *vip_error_code_str(VIP_ERROR_CODE code);

/* Why the last failing VIPL call of this thread failed, in words. */
const char *vip_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
