/*
 * gen_corpus.c - writes the seed inputs of fuzz_ctl and fuzz_wire into
 * tests/fuzz/corpus/{ctl,wire}/ (make fuzz-corpus; the files are kept in
 * the repository). The formats are those of the targets' file comments.
 *
 * ctl: the requests a VIPL program and vipctl send, in the order they send
 * them: open, register, create, listen, connect, accept, disconnect, tear
 * down, and the management calls.
 *
 * wire: real packets. The fixture's VI A sends real messages (SEND in one
 * and in several fragments, with immediate data, RDMA writes, an RDMA
 * read request) and its packets are taken off the link as the NIC wrote
 * them; B's own RDMA read is answered by A's real READ_RESP packets, and
 * B's reliable sends by the ACKs A would send.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/tfw.h"
#include "via_abi.h"

static const char *outdir;
static uint8_t buf[1 << 20];
static size_t len;

static void put(const void *p, size_t n)
{
    if (len + n > sizeof buf)
        abort();
    memcpy(buf + len, p, n);
    len += n;
}
static void put8(uint32_t v) { uint8_t b = (uint8_t)v; put(&b, 1); }
static void put16(uint32_t v) { put8(v); put8(v >> 8); }
static void put32(uint32_t v) { put16(v); put16(v >> 16); }

static void save1(const char *kind, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", outdir, kind, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* wire: each exchange also as fuzz_wire's paced NIC receives it (config 0x20). */
static void save(const char *kind, const char *name)
{
    save1(kind, name);
    if (!strcmp(kind, "wire")) {
        char paced[128];
        snprintf(paced, sizeof paced, "%s-paced", name);
        buf[0] |= 0x20;
        save1(kind, paced);
    }
    len = 0;
}

/* ---- ctl --------------------------------------------------------------------------- */

static void req(unsigned slot, uint32_t op, const void *body, size_t n)
{
    put8(slot);
    put8(op);
    put16((uint32_t)n);
    put(body, n);
}

static void hello(unsigned slot, uint32_t nic)
{
    struct via_ctl_hello h = {.abi = VIA_ABI_VERSION, .nic = nic, .pid = 1};
    snprintf(h.progname, sizeof h.progname, "seed%u", slot);
    req(slot, VIA_CTL_HELLO, &h, sizeof h);
}

static uint32_t host_id(void)
{
    char name[256] = "";
    if (gethostname(name, sizeof name - 1) < 0)
        snprintf(name, sizeof name, "localhost");
    uint32_t h = 2166136261u; /* as kd_nic_init */
    for (const char *p = name; *p; p++) {
        h ^= (uint8_t)*p;
        h *= 16777619u;
    }
    return h ? h : 1;
}

static void setup_vi(unsigned slot, uint32_t rel)
{
    hello(slot, 0);
    req(slot, VIA_CTL_CREATE_PTAG, NULL, 0);
    struct via_ctl_reg_mem rm = {.va = 0x7f0000001000ull, .len = 65536, .ptag = 1 + slot,
                                 .flags = VIA_TPT_RDMA_WRITE};
    req(slot, VIA_CTL_REG_MEM, &rm, sizeof rm);
    struct via_ctl_create_cq cq = {.entries = 16};
    req(slot, VIA_CTL_CREATE_CQ, &cq, sizeof cq);
    struct via_ctl_create_vi cv = {.attr = {.reliability = rel, .max_transfer = 32768,
                                            .ptag = 1 + slot, .rdma_write = 1},
                                   .send_cq = 1, .recv_cq = 1};
    req(slot, VIA_CTL_CREATE_VI, &cv, sizeof cv);
}

static void gen_ctl(void)
{
    uint32_t host = host_id();
    struct via_net_addr srv = {.discrim_len = 3, .discrim = "srv"};
    srv.host[0] = (uint8_t)(host >> 24);
    srv.host[1] = (uint8_t)(host >> 16);
    srv.host[2] = (uint8_t)(host >> 8);
    srv.host[3] = (uint8_t)host;
    struct via_net_addr cli = srv;
    memcpy(cli.discrim, "cli", 3);

    /* one program: open, query, register, create, destroy */
    setup_vi(0, VIP_SERVICE_RELIABLE_DELIVERY);
    req(0, VIA_CTL_QUERY_NIC, NULL, 0);
    struct via_ctl_ns_lookup ns = {.name = "via0"};
    req(0, VIA_CTL_NS_LOOKUP, &ns, sizeof ns);
    struct via_ctl_set_vi sv = {.vi_id = 0, .attr = {.reliability = VIP_SERVICE_UNRELIABLE,
                                                     .ptag = 1}};
    req(0, VIA_CTL_SET_VI, &sv, sizeof sv);
    struct via_ctl_set_mem sm = {.va = 0x7f0000001000ull, .handle = 1u << 16, .ptag = 1,
                                 .flags = VIA_TPT_RDMA_READ};
    req(0, VIA_CTL_SET_MEM, &sm, sizeof sm);
    struct via_ctl_vi vi0 = {.vi_id = 0};
    req(0, VIA_CTL_DESTROY_VI, &vi0, sizeof vi0);
    struct via_ctl_dereg_mem dm = {.va = 0x7f0000001000ull, .handle = 1u << 16};
    req(0, VIA_CTL_DEREG_MEM, &dm, sizeof dm);
    struct via_ctl_cq cq0 = {.cq_id = 0};
    req(0, VIA_CTL_DESTROY_CQ, &cq0, sizeof cq0);
    struct via_ctl_ptag pt = {.ptag = 1};
    req(0, VIA_CTL_DESTROY_PTAG, &pt, sizeof pt);
    save("ctl", "lifecycle");

    /* two programs connect: listen, request, accept, disconnect */
    setup_vi(0, VIP_SERVICE_RELIABLE_RECEPTION);
    setup_vi(1, VIP_SERVICE_RELIABLE_RECEPTION);
    struct via_ctl_attach at = {.session_id = 2};
    req(2, VIA_CTL_ATTACH, &at, sizeof at); /* the acceptor's side socket */
    struct via_ctl_conn_wait cw = {.local = srv, .timeout_ms = 5000};
    req(2, VIA_CTL_CONN_WAIT, &cw, sizeof cw);
    struct via_ctl_conn_request cr = {.vi_id = 0, .timeout_ms = 5000, .local = cli,
                                      .remote = srv};
    req(0, VIA_CTL_CONN_REQUEST, &cr, sizeof cr);
    struct via_ctl_conn_accept ca = {.conn_id = 1, .vi_id = 1};
    req(1, VIA_CTL_CONN_ACCEPT, &ca, sizeof ca);
    struct via_ctl_vi_error ve = {.vi_id = 1, .code = 2};
    req(1, VIA_CTL_VI_ERROR, &ve, sizeof ve);
    req(0, VIA_CTL_DISCONNECT, &vi0, sizeof vi0);
    save("ctl", "connect");

    /* a request nobody waits for, then one that is rejected, then a timeout */
    setup_vi(0, VIP_SERVICE_UNRELIABLE);
    setup_vi(1, VIP_SERVICE_UNRELIABLE);
    cr.timeout_ms = 100;
    req(0, VIA_CTL_CONN_REQUEST, &cr, sizeof cr);
    cw.timeout_ms = 0;
    req(1, VIA_CTL_CONN_WAIT, &cw, sizeof cw);
    struct via_ctl_conn_reject rj = {.conn_id = 1};
    req(1, VIA_CTL_CONN_REJECT, &rj, sizeof rj);
    req(0x3c, VIA_CTL_CONN_REQUEST, &cr, sizeof cr); /* slot 0, the clock moves 32 s */
    req(0x3c, VIA_CTL_PING, NULL, 0);
    save("ctl", "reject-timeout");

    /* vipctl: every management call */
    req(2, VIA_CTL_PING, NULL, 0);
    req(2, VIA_CTL_LIST_NICS, NULL, 0);
    setup_vi(0, VIP_SERVICE_RELIABLE_DELIVERY);
    req(2, VIA_CTL_LIST_VIS, NULL, 0);
    req(2, VIA_CTL_LIST_MEM, NULL, 0);
    struct via_ctl_trace tr = {.on = 1};
    req(2, VIA_CTL_TRACE, &tr, sizeof tr);
    tr.on = 2;
    req(2, VIA_CTL_TRACE, &tr, sizeof tr);
    struct via_ctl_get_profile gp = {.nic = 1};
    req(2, VIA_CTL_GET_PROFILE, &gp, sizeof gp);
    /* a client scribbling on its status page, then the trace dump */
    put8(0x40);
    put8(0);
    put16(1); /* trace_head */
    put32(5000);
    put32(0);
    req(2, VIA_CTL_TRACE, &tr, sizeof tr);
    req(2, VIA_CTL_SHUTDOWN, NULL, 0);
    save("ctl", "vipctl");

    /* framing trouble: a body that is too long, and a lying header */
    hello(0, 0);
    uint8_t big[1100] = {0};
    req(1, VIA_CTL_REG_MEM, big, sizeof big);
    put8(0x81);
    put8(VIA_CTL_PING);
    put16(0);
    put32(64);
    save("ctl", "framing");
}

/* ---- wire --------------------------------------------------------------------------- */

/* A packet record of fuzz_wire's format, from a real header and payload. */
static void put_packet(const struct via_wire_hdr *h, const uint8_t *payload)
{
    unsigned target = 5;
    uint32_t roff = 0, raw = h->rkey;
    if (h->type == VIA_PKT_RDMA_WRITE || h->type == VIA_PKT_RDMA_READ_REQ) {
        /* Addresses of this process mean nothing to the next: name the
         * region the fuzzer's fixture has at that place. */
        uint64_t a = h->raddr, rd = (uint64_t)(uintptr_t)F.rdma;
        uint64_t sp = (uint64_t)(uintptr_t)(F.mem + OFF_SPARE);
        if (a >= rd && a < rd + RDMA_LEN) {
            target = 0;
            roff = (uint32_t)(a - rd);
        } else if (a >= sp && a < sp + SPARE_LEN) {
            target = 4;
            roff = (uint32_t)(a - sp);
        }
    }
    put8(0);
    put8(h->type);
    put8(h->flags & 7);
    put8(target);
    put32(h->msg_seq);
    put32(h->msg_len);
    put32(h->frag_off);
    put16(h->frag_len);
    put16(roff);
    put32(h->imm);
    put32(h->ack_seq);
    put32(raw);
    put(payload, h->frag_len);
}

/* Write every packet published on direction dir since the last call as a
 * record, leaving the ring to its receiver: read from a copy of it. */
static uint64_t cursor[2];
static struct via_chan_dir copy;

static void capture(int dir)
{
    memcpy(&copy, &F.chan->dir[dir], sizeof copy);
    atomic_store(&copy.tail, cursor[dir]);
    struct via_wire_hdr h;
    const uint8_t *p;
    while (fw_link_peek(&copy, &h, &p) == FW_LINK_PACKET) {
        put_packet(&h, p);
        fw_link_consume(&copy, &h);
    }
    cursor[dir] = atomic_load(&copy.tail);
}

/* Both VIs go on as far as they can (B places, answers; A completes). */
static void pump_both(void)
{
    for (int i = 0; i < 64; i++) {
        progress(F.b);
        progress(F.a);
    }
}

/* A receive on B: posted here, and as a record for fuzz_wire to post the
 * same way (its slot i: descriptor and buffer at the same offsets). */
static unsigned rslot;

static void recv_rec(unsigned segs, uint32_t seglen)
{
    put8(1);
    put8(segs - 1);
    put16(seglen / 2);
    put8(0);
    unsigned i = rslot++;
    VIP_DESCRIPTOR *rd = at(OFF_RDESC + 256 * i);
    tl_desc_split(rd, F.mem + OFF_RDATA + i * (128u << 10), segs * seglen, segs, F.mh);
    post_recv(F.b, rd, F.mh);
}

static void progress_rec(void)
{
    put8(2);
    put8(3);
}

static void take_rec(void)
{
    put8(4);
}

/* A sends `n` bytes (SEND, or RDMA write to F.rdma + off), as a program would. */
static void a_sends(uint16_t op, uint32_t n, uint32_t off, bool imm)
{
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    memset(sd, 0, 256);
    tl_fill(F.mem + OFF_SDATA, n, 7);
    VIP_DATA_SEGMENT *seg = (VIP_DATA_SEGMENT *)&sd->DS[0];
    unsigned k = 0;
    if (op != VIP_CONTROL_OP_SENDRECV) {
        VIP_ADDRESS_SEGMENT *as = (VIP_ADDRESS_SEGMENT *)&seg[k++];
        as->Data.AddressBits = (uint64_t)(uintptr_t)(op == VIP_CONTROL_OP_RDMAREAD
                                                         ? F.mem + OFF_SPARE + off
                                                         : F.rdma + off);
        as->Handle = op == VIP_CONTROL_OP_RDMAREAD ? VIA_MH_MAKE(2, 6) : F.mh_rdma;
    }
    seg[k].Data.AddressBits = (uint64_t)(uintptr_t)(F.mem + OFF_SDATA);
    seg[k].Handle = F.mh;
    seg[k].Length = n;
    sd->CS.SegCount = (uint16_t)(k + 1);
    sd->CS.Control = (uint16_t)(op | (imm ? VIP_CONTROL_IMMEDIATE : 0));
    sd->CS.ImmediateData = 0xC0DE0001u;
    post_send(F.a, sd, F.mh);
    progress(F.a);
}

static void fresh(uint32_t rel)
{
    setup(rel, true);
    cursor[0] = cursor[1] = 0;
    rslot = 0;
}

static void gen_wire(void)
{
    static const uint32_t rels[3] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                     VIP_SERVICE_RELIABLE_RECEPTION};
    const char *names[3] = {"unreliable", "delivery", "reception"};
    char name[64];
    for (unsigned r = 0; r < 3; r++) {
        /* one short message, one in three fragments with immediate data */
        fresh(rels[r]);
        put8(r);
        recv_rec(1, 4096);
        recv_rec(2, 32768);
        a_sends(VIP_CONTROL_OP_SENDRECV, 100, 0, false);
        capture(0);
        pump_both();
        a_sends(VIP_CONTROL_OP_SENDRECV, 40000, 0, true);
        capture(0);
        pump_both();
        progress_rec();
        take_rec();
        snprintf(name, sizeof name, "send-%s", names[r]);
        save("wire", name);
        teardown();

        /* RDMA writes into B's RDMA region, the second with immediate data */
        fresh(rels[r]);
        put8(r | 0x04 | 0x10);
        set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
        recv_rec(1, 64);
        a_sends(VIP_CONTROL_OP_RDMAWRITE, 3000, 128, false);
        capture(0);
        pump_both();
        a_sends(VIP_CONTROL_OP_RDMAWRITE, 20000, 4096, true);
        capture(0);
        pump_both();
        progress_rec();
        take_rec();
        snprintf(name, sizeof name, "rdma-write-%s", names[r]);
        save("wire", name);
        teardown();
    }
    for (unsigned r = 1; r < 3; r++) {
        /* A reads from B's read-enabled region: B answers with READ_RESP. */
        fresh(rels[r]);
        put8(r | 0x08);
        /* B's read-enabled region, as fuzz_wire registers it (index 6) */
        reg(6, 2, PTAG_A, F.mem + OFF_SPARE, SPARE_LEN, VIA_TPT_RDMA_READ);
        struct nic_vi_params pb = {.vi_id = VI_B, .ptag = PTAG_A, .reliability = rels[r],
                                   .max_transfer = VIA_MAX_TRANSFER, .rdma_read = true};
        nic_vi_set_params(F.b, &pb);
        a_sends(VIP_CONTROL_OP_RDMAREAD, 20000, 256, false);
        capture(0);
        pump_both();
        progress_rec();
        take_rec();
        snprintf(name, sizeof name, "rdma-read-req-%s", names[r]);
        save("wire", name);
        teardown();

        /* B reads from A: A's real READ_RESP fragments come back. B's read
         * names the peer's memory; the fixture's A serves it from its own. */
        fresh(rels[r]);
        set_vi(F.a, PTAG_A, VIA_MAX_TRANSFER, false);
        struct nic_vi_params p = {.vi_id = VI_A, .ptag = PTAG_A, .reliability = rels[r],
                                  .max_transfer = VIA_MAX_TRANSFER, .rdma_read = true};
        nic_vi_set_params(F.a, &p);
        reg(IDX_STAGING, 9, PTAG_A, F.mem + OFF_SPARE, SPARE_LEN, VIA_TPT_RDMA_READ);
        VIP_DESCRIPTOR *bd = at(OFF_SDESC + 256);
        memset(bd, 0, 256);
        VIP_ADDRESS_SEGMENT *as = (VIP_ADDRESS_SEGMENT *)&bd->DS[0];
        as->Data.AddressBits = (uint64_t)(uintptr_t)(F.mem + OFF_SPARE);
        as->Handle = VIA_MH_MAKE(9, IDX_STAGING);
        VIP_DATA_SEGMENT *ls = (VIP_DATA_SEGMENT *)&bd->DS[1];
        ls->Data.AddressBits = (uint64_t)(uintptr_t)(F.mem + OFF_SDATA + 131072);
        ls->Handle = F.mh;
        ls->Length = 20000;
        bd->CS.SegCount = 2;
        bd->CS.Control = VIP_CONTROL_OP_RDMAREAD;
        post_send(F.b, bd, F.mh);
        for (int i = 0; i < 64; i++)
            progress(F.a);
        put8(r);
        put8(3); /* B's read as fuzz_wire posts it: slot 0, 20000 bytes */
        put8(VIP_CONTROL_OP_RDMAREAD);
        put16(10000);
        put32(0);
        put16(0);
        capture(0);
        pump_both();
        progress_rec();
        take_rec();
        snprintf(name, sizeof name, "rdma-read-resp-%s", names[r]);
        save("wire", name);
        teardown();

        /* B sends; A's ACK (or NAK, with no receive posted on A) answers. */
        for (int nak = 0; nak < 2; nak++) {
            fresh(rels[r]);
            if (!nak) {
                VIP_DESCRIPTOR *rd = at(OFF_RDESC);
                tl_desc_split(rd, F.mem + OFF_RDATA, 4096, 1, F.mh);
                post_recv(F.a, rd, F.mh);
            }
            VIP_DESCRIPTOR *sd = at(OFF_SDESC + 512);
            tl_desc_split(sd, F.mem + OFF_SDATA, 100, 1, F.mh);
            post_send(F.b, sd, F.mh);
            for (int i = 0; i < 64; i++)
                progress(F.a);
            put8(r);
            put8(3);
            put8(VIP_CONTROL_OP_SENDRECV);
            put16(50);
            put32(0);
            put16(0);
            capture(0);
        pump_both();
            progress_rec();
            take_rec();
            snprintf(name, sizeof name, "%s-%s", nak ? "nak" : "ack", names[r]);
            save("wire", name);
            teardown();
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR (writes DIR/ctl/* and DIR/wire/*)\n");
        return 2;
    }
    outdir = argv[1];
    gen_ctl();
    gen_wire();
    return 0;
}
