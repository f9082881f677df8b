/*
 * ext.h - the host side of the short-message extensions (ext_host.c), as
 * the VIPL library uses it.
 *
 * The extensions sit between the library and the NIC: they know the NIC's
 * doorbell tokens and SRAM slots (nic.h, via_abi.h) and nothing of the
 * library's objects. The library keeps a struct ext_vi per VI, passes what
 * a send needs, and rings the token they build.
 */
#ifndef EXT_H
#define EXT_H

#include <stddef.h>
#include <stdint.h>

#include "via_spec.h"

#include "nic.h"

struct ext_merged;

/* Per VI: the mode chosen and the host's state of the short paths. */
struct ext_vi {
    enum fw_ext_mode mode;
    uint32_t max;              /* largest message that takes the short path */
    uint32_t descless_next;    /* next SRAM slot the host fills */
    struct ext_merged *merged; /* staging of merged descriptors, once attached */
};

/* The largest message each mode can carry. */
uint32_t ext_mode_cap(enum fw_ext_mode m);
/* The mode and threshold of VIP_EXT_MODE / VIP_EXT_MAX (unmodified programs). */
void ext_vi_init(struct ext_vi *e);
/* Bytes (and alignment) of the registered staging area merged mode needs. */
size_t ext_merged_bytes(void);
/* Give merged mode its staging (registered by the library with handle mh). */
int ext_merged_attach(struct ext_vi *e, void *buf, VIP_MEM_HANDLE mh);
/* The staging area to deregister and free when the VI goes (NULL if none). */
void *ext_merged_detach(struct ext_vi *e, VIP_MEM_HANDLE *mh);

/* What a send needs to know of its VI. */
struct ext_send_ctx {
    struct fw_vi *hw;          /* the NIC's VI (TPT checks, progress) */
    struct via_vi_page *db;    /* doorbell page: SRAM slots, counters */
    uint32_t max_transfer;
};
/* Choose how a send reaches the NIC and build its doorbell token; *bytes
 * is the message length the host cost depends on. Called with the VI's
 * lock held (nic_vi_lock). */
enum fw_ext_mode ext_prepare_send(struct ext_vi *e, const struct ext_send_ctx *c,
                                  VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh,
                                  struct via_db_token *tok, uint32_t *bytes);

#endif
