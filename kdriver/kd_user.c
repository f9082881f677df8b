/*
 * kd_user.c - users of one vipd: who may connect, who sees what, and the
 * per-user limits.
 *
 * A vipd of one user (the default) admits only processes of its own uid.
 * A system vipd (vipd --system, root) admits every uid of the host and
 * keeps them apart by the uid the kernel gives for each connection
 * (SO_PEERCRED), never by anything a client says: every object (VI, CQ,
 * ptag, region, pages) belongs to a session and a session to its uid, so a
 * request can only ever name objects of its own session (kd_vi_of,
 * kd_ptag_owned, region_of, ...). What crosses users is a connection both
 * sides asked for. The limits bound what one user can take from the others:
 * sessions, VIs and registered bytes, counted over that uid's sessions.
 */
#include "kd.h"

#include <stdio.h>
#include <unistd.h>

#include "via_spec.h"

bool kd_user_admitted(uid_t uid)
{
    return kd.system || uid == getuid();
}

bool kd_user_sees(const struct kd_client *c, uid_t owner)
{
    return c->uid == owner || c->uid == 0;
}

bool kd_user_admin(const struct kd_client *c, const char *what, struct kd_reply *r)
{
    if (c->uid == 0 || c->uid == getuid())
        return true;
    kd_fail(r, VIP_INVALID_PARAMETER, "only root may %s: this vipd serves every user (uid %u "
            "asked)", what, (unsigned)c->uid);
    return false;
}

struct usage {
    unsigned sessions, vis;
    uint64_t reg_bytes;
};

/* What uid holds now, over its sessions (a few hundred at most: counting
 * is cheaper than keeping a second set of books in step). */
static struct usage usage_of(uid_t uid)
{
    struct usage u = {0, 0, 0};
    for (const struct kd_session *s = kd.sessions; s; s = s->next)
        if (s->uid == uid) {
            u.sessions++;
            u.vis += s->nvis;
            u.reg_bytes += s->reg_bytes;
        }
    return u;
}

bool kd_user_may_open(uid_t uid, struct kd_reply *r)
{
    unsigned max = kd.max_sessions_per_user;
    if (max && usage_of(uid).sessions >= max) {
        kd_fail(r, VIP_ERROR_RESOURCE, "uid %u has %u NIC sessions open, its limit "
                "(vipd --max-sessions-per-user)", (unsigned)uid, max);
        return false;
    }
    return true;
}

bool kd_user_may_create_vi(uid_t uid, struct kd_reply *r)
{
    unsigned max = kd.max_vis_per_user;
    if (max && usage_of(uid).vis >= max) {
        kd_fail(r, VIP_ERROR_RESOURCE, "uid %u has %u VIs, its limit (vipd --max-vis-per-user)",
                (unsigned)uid, max);
        return false;
    }
    return true;
}

bool kd_user_may_register(uid_t uid, uint64_t len, struct kd_reply *r)
{
    uint64_t max = kd.max_reg_bytes_per_user;
    if (!max)
        return true;
    uint64_t have = usage_of(uid).reg_bytes;
    if (have > max || len > max - have) {
        /* (the option first: a reply's reason has 111 characters) */
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd --max-reg-bytes-per-user %llu: uid %u has %llu "
                "bytes registered, %llu more do not fit", (unsigned long long)max,
                (unsigned)uid, (unsigned long long)have, (unsigned long long)len);
        return false;
    }
    return true;
}
