/*
 * am_xlate.c - the translation table: index -> (name, tag) of the
 * endpoints this one sends requests to.
 *
 * Mapping is local and never waits: the VI to the endpoint named is made
 * when the first message goes there or comes from there (am_conn.c). An
 * entry points at that peer once it exists, and the peer knows its index
 * (the source id a handler asks for; -1 while unmapped, and then its
 * requests are returned with EBADENTRY).
 */
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

static int bad_index(struct am2_ep *ep, int i)
{
    return am_fail(AM_ERR_BAD_ARG, "translation index %d (the table has %d entries)", i, ep->nxl);
}

int AM_Map(ep_t ea, int index, en_t name, tag_t tag)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    if (index < 0 || index >= ea->nxl)
        return bad_index(ea, index);
    if (name.magic != AM2_EN_MAGIC)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint name (from AM_AllocateEndpoint)");
    struct am_xlate *x = &ea->xl[index];
    if (x->inuse)
        return am_fail(AM_ERR_IN_USE, "translation index %d is mapped already", index);
    x->inuse = true;
    x->name = name;
    x->tag = tag;
    x->peer = am_peer_find(ea, &name);
    if (x->peer && x->peer->xidx < 0)
        x->peer->xidx = index;
    return AM_OK;
}

int AM_MapAny(ep_t ea, int *index, en_t name, tag_t tag)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !index)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL index");
    for (int i = 0; i < ea->nxl; i++)
        if (!ea->xl[i].inuse) {
            int r = AM_Map(ea, i, name, tag);
            if (r == AM_OK)
                *index = i;
            return r;
        }
    return am_fail(AM_ERR_RESOURCE, "all %d translations are in use", ea->nxl);
}

int AM_UnMap(ep_t ea, int index)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    if (index < 0 || index >= ea->nxl)
        return bad_index(ea, index);
    struct am_xlate *x = &ea->xl[index];
    if (!x->inuse)
        return am_fail(AM_ERR_BAD_ARG, "translation index %d is not mapped", index);
    if (am_g.cur && am_g.cur->ep == ea && am_g.cur->src_idx == index)
        return am_fail(AM_ERR_IN_USE, "index %d is the source of the running handler", index);
    if (x->peer && x->peer->xidx == index) {
        x->peer->xidx = -1;
        /* another entry may name the same endpoint */
        for (int i = 0; i < ea->nxl; i++)
            if (i != index && ea->xl[i].inuse && ea->xl[i].peer == x->peer) {
                x->peer->xidx = i;
                break;
            }
    }
    memset(x, 0, sizeof *x);
    return AM_OK;
}

int AM_GetTranslationInuse(ep_t ea, int index)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    if (index < 0 || index >= ea->nxl)
        return bad_index(ea, index);
    return ea->xl[index].inuse ? AM_OK : AM_ERR_RESOURCE;
}

int AM_GetTranslationTag(ep_t ea, int index, tag_t *tag)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !tag)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL tag");
    if (index < 0 || index >= ea->nxl)
        return bad_index(ea, index);
    if (!ea->xl[index].inuse)
        return am_fail(AM_ERR_RESOURCE, "translation index %d is not mapped", index);
    *tag = ea->xl[index].tag;
    return AM_OK;
}

int AM_GetTranslationName(ep_t ea, int index, en_t *name)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !name)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL name");
    if (index < 0 || index >= ea->nxl)
        return bad_index(ea, index);
    if (!ea->xl[index].inuse)
        return am_fail(AM_ERR_RESOURCE, "translation index %d is not mapped", index);
    *name = ea->xl[index].name;
    return AM_OK;
}

int AM_MaxNumTranslations(int *ntrans)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!ntrans)
        return am_fail(AM_ERR_BAD_ARG, "NULL result");
    *ntrans = AM2_MAX_TRANSLATIONS;
    return AM_OK;
}

int AM_GetNumTranslations(ep_t ea, int *ntrans)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !ntrans)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL result");
    *ntrans = ea->nxl;
    return AM_OK;
}

/* Grows or shrinks the table; entries in use beyond the new size refuse
 * the shrink (AM_ERR_IN_USE) rather than vanish. */
int AM_SetNumTranslations(ep_t ea, int n)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || n < 1 || n > AM2_MAX_TRANSLATIONS)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or %d translations (1..%d)", n,
                       AM2_MAX_TRANSLATIONS);
    for (int i = n; i < ea->nxl; i++)
        if (ea->xl[i].inuse)
            return am_fail(AM_ERR_IN_USE, "translation index %d is mapped", i);
    struct am_xlate *x = realloc(ea->xl, (size_t)n * sizeof *x);
    if (!x)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    if (n > ea->nxl)
        memset(x + ea->nxl, 0, (size_t)(n - ea->nxl) * sizeof *x);
    ea->xl = x;
    ea->nxl = n;
    return AM_OK;
}

/* A hint: the credits per peer are fixed (AM_CREDITS), so this checks and
 * records. */
int AM_SetExpectedResources(ep_t ea, int n_endpoints, int n_outstanding_requests)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || n_endpoints < 0 || n_endpoints > AM2_MAX_TRANSLATIONS ||
        n_outstanding_requests < 0)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or %d endpoints / %d requests",
                       n_endpoints, n_outstanding_requests);
    ea->expected_eps = n_endpoints;
    ea->expected_reqs = n_outstanding_requests;
    return AM_OK;
}
