/*
 * vipl_ext.c - the extension calls of vipl_ext.h (VipExtSetMode and
 * friends) and the merged mode's staging area.
 *
 * The short paths themselves are in extensions/ext_host.c; this file is
 * the library's side of them: it resolves handles, and registers the
 * staging area merged descriptors are built in (registered memory of the
 * VI's ptag, like any buffer a program would give the NIC).
 */
#include <stdlib.h>

#include "vipl_ext.h"
#include "vipl_int.h"

/* Register the merged staging area of a VI, once. */
static bool merged_staging(struct vip_vi *vi)
{
    if (vi->ext.merged)
        return true;
    size_t len = ext_merged_bytes();
    void *buf = NULL;
    if (posix_memalign(&buf, VIP_DESCRIPTOR_ALIGNMENT, len))
        return false;
    VIP_MEM_ATTRIBUTES ma = {.Ptag = vi->attr.Ptag};
    VIP_MEM_HANDLE mh;
    if (VipRegisterMem(vi->nic->handle, buf, len, &ma, &mh) != VIP_SUCCESS) {
        free(buf);
        return false;
    }
    if (ext_merged_attach(&vi->ext, buf, mh) < 0) {
        VipDeregisterMem(vi->nic->handle, buf, mh);
        free(buf);
        return false;
    }
    return true;
}

void vipl_ext_vi_init(struct vip_vi *vi)
{
    ext_vi_init(&vi->ext);
    if (vi->ext.mode == FW_EXT_MERGED)
        merged_staging(vi); /* register it now, not on the first send */
}

void vipl_ext_vi_fini(struct vip_vi *vi)
{
    VIP_MEM_HANDLE mh;
    void *buf = ext_merged_detach(&vi->ext, &mh);
    if (!buf)
        return;
    VipDeregisterMem(vi->nic->handle, buf, mh);
    free(buf);
}

VIP_RETURN VipExtSetMode(VIP_VI_HANDLE ViHandle, VIP_EXT_MODE Mode, VIP_ULONG MaxBytes)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || (unsigned)Mode >= FW_EXT_NMODES)
        return vipl_fail(VIP_INVALID_PARAMETER, "bad VI handle or extension mode %d", (int)Mode);
    enum fw_ext_mode m = (enum fw_ext_mode)Mode;
    uint32_t max = MaxBytes ? (uint32_t)MaxBytes : VIP_EXT_MAX_DEFAULT;
    if (m != FW_EXT_STANDARD && (MaxBytes > ext_mode_cap(m) || max > ext_mode_cap(m)))
        return vipl_fail(VIP_INVALID_PARAMETER, "%s messages are at most %u bytes",
                         fw_ext_mode_name[m], ext_mode_cap(m));
    if (m == FW_EXT_MERGED && !merged_staging(vi))
        return vipl_fail(VIP_ERROR_RESOURCE, "cannot register the merged-descriptor staging "
                                             "area: %s", vip_last_error());
    fw_lock(vi->lock);
    vi->ext.mode = m;
    vi->ext.max = max;
    fw_unlock(vi->lock);
    return VIP_SUCCESS;
}

VIP_RETURN VipExtGetMode(VIP_VI_HANDLE ViHandle, VIP_EXT_MODE *Mode, VIP_ULONG *MaxBytes)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !Mode || !MaxBytes)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipExtGetMode");
    fw_lock(vi->lock);
    *Mode = (VIP_EXT_MODE)vi->ext.mode;
    *MaxBytes = vi->ext.max;
    fw_unlock(vi->lock);
    return VIP_SUCCESS;
}

const char *VipExtProfileName(VIP_NIC_HANDLE NicHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    return n ? n->attr.profile : NULL;
}

int VipExtClockVirtual(void)
{
    return nic_virtual_time ? 1 : 0;
}

unsigned long long VipExtClockNs(void)
{
    if (!nic_virtual_time)
        return nic_now_ns();
    NIC_VT_SITE();
    return nic_vt_clock_read();
}
