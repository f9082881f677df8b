/*
 * fw_live.c - the link carries liveness: the NIC notices that the process
 * at the other end of a local link has died, without vipd.
 *
 * vipd tells a NIC that its peer died when the peer's session ends. A
 * stopped or killed vipd tells nobody, and a survivor's infinite wait
 * would hang for good. So with each connection between two processes of
 * this host vipd hands over a pidfd of the peer process (opened by vipd,
 * in its own pid namespace, where the pid it has from SO_PEERCRED means
 * that process), and the NIC looks at them now and then: a pidfd polls
 * readable once its process has exited (a zombie included).
 *
 * Never on a message's path: the host library calls nic_peers_check when
 * a wait wakes from its futex sleep (at least once a second), the NIC's
 * thread when it wakes from its own sleeps (which then have a timer while
 * a peer is watched), and each call looks at most every FW_LIVE_NS: one
 * poll() over all watched pidfds. A dead peer's link is broken as vipd
 * would break it (VIA_CHAN_BROKEN), the VI is run at once (it drains what
 * the peer sent, then goes to the error state with VIP_ERROR_CONN_LOST,
 * its descriptors flushed), and our sleepers are woken.
 *
 * A remote peer (another host's NIC) comes with no pidfd: its link's own
 * timeouts are its liveness. Which pidfd a VI watches is its connection's
 * (fw_live_watch in fw_vi.c); whether a process has exited, the host's
 * (hal_pidfd_exited in fw_hal.h).
 */
#include <poll.h>

#include "fw.h"
#include "fw_hal.h"

#define FW_LIVE_NS 200000000u /* look at most this often */
#define FW_LIVE_BATCH 64u     /* pidfds per poll() */


/* A watched pidfd of VI id polled readable: confirm under the VI's lock
 * (the connection may have ended, and the fd number been reused, since
 * the look), then break the link and let the VI see it. */
static bool peer_died(struct fw_nic *nic, unsigned id)
{
    struct fw_vi *vi = fw_vi_get(nic, id);
    if (!vi)
        return false;
    fw_lock(&vi->lock);
    bool dead = vi->chan && hal_pidfd_exited(atomic_load(&vi->peer_pidfd));
    if (dead) {
        fw_live_unwatch(vi); /* told once */
        uint32_t open = VIA_CHAN_OPEN;
        atomic_compare_exchange_strong(&vi->chan->state, &open, VIA_CHAN_BROKEN);
        fw_vi_run(vi, true); /* drain, then the error, flush and our wake-ups */
        fw_want_visit(vi);   /* and anyone's next turn looks again */
    }
    fw_unlock(&vi->lock);
    fw_vi_put(vi);
    if (dead)
        fw_notify(nic->ev, id); /* CQ waiters and the NIC's thread */
    return dead;
}

bool nic_peers_check(struct fw_nic *nic)
{
    if (!atomic_load_explicit(&nic->nlive, memory_order_relaxed))
        return false;
    uint64_t now = hal_now_ns();
    uint64_t next = atomic_load_explicit(&nic->live_next, memory_order_relaxed);
    if (now < next || !atomic_compare_exchange_strong(&nic->live_next, &next, now + FW_LIVE_NS))
        return false;
    bool found = false;
    for (unsigned base = 0; base < VIA_MAX_VI;) {
        struct pollfd p[FW_LIVE_BATCH];
        unsigned ids[FW_LIVE_BATCH], k = 0;
        pthread_mutex_lock(&nic->lock);
        for (; base < VIA_MAX_VI && k < FW_LIVE_BATCH; base++) {
            struct fw_vi *vi = nic->vis[base];
            int fd = vi ? atomic_load_explicit(&vi->peer_pidfd, memory_order_relaxed) : -1;
            if (fd >= 0) {
                p[k] = (struct pollfd){.fd = fd, .events = POLLIN};
                ids[k++] = base;
            }
        }
        pthread_mutex_unlock(&nic->lock);
        if (k && poll(p, k, 0) > 0)
            for (unsigned i = 0; i < k; i++)
                if (p[i].revents & POLLIN)
                    found |= peer_died(nic, ids[i]);
    }
    return found;
}
