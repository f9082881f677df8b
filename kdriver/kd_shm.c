/*
 * kd_shm.c - the shared-memory objects vipd creates (memfd + size + seal + map).
 *
 * Every object is sealed against SHRINK and GROW before its fd leaves vipd:
 * otherwise a client could ftruncate it and make vipd's own mapping raise
 * SIGBUS. F_SEAL_SEAL stops a client from adding seals that would hurt the
 * other processes that map the same object (e.g. a peer's event page).
 */
#include "kd.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

void *kd_shm_create(const char *name, size_t size, unsigned extra_seals, int *fd)
{
    int f = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0)
        return NULL;
    if (ftruncate(f, (off_t)size) < 0)
        goto fail;
    /* Map before sealing: F_SEAL_FUTURE_WRITE only refuses mappings made
     * after it, so vipd keeps write access and the client cannot get it. */
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p == MAP_FAILED)
        goto fail;
    unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | extra_seals | F_SEAL_SEAL;
    if (fcntl(f, F_ADD_SEALS, seals) < 0) {
        int e = errno;
        munmap(p, size);
        close(f);
        errno = e;
        return NULL;
    }
    *fd = f;
    return p; /* memfd pages start zeroed */
fail:;
    int e = errno;
    close(f);
    errno = e;
    return NULL;
}

void kd_shm_unmap(void *p, size_t size)
{
    if (p)
        munmap(p, size);
}
