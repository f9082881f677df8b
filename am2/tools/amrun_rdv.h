/*
 * amrun_rdv.h - amrun's TCP rendezvous server (amrun_rdv.c; the protocol
 * is am2/src/am_rdv.h).
 */
#ifndef AMRUN_RDV_H
#define AMRUN_RDV_H

#include <stddef.h>

/* Listen on every address, on a port of the system's choice; addr gets
 * what the ranks are told (AM2_SPMD_RDV: host:port:cookie). 0 or -1. */
int amrun_rdv_open(int nranks, char *addr, size_t cap);
/* Wait up to timeout_ms for rendezvous traffic and serve it. */
void amrun_rdv_step(int timeout_ms);
void amrun_rdv_close(void);
/* amrun's environment as the ranks get it (am_rdv.h); its length. */
size_t amrun_env_block(char *out, size_t cap);

#endif
