/*
 * test_abi.c - the ABI of the built libvipl.so.1: it exports the API of
 * vipl.h and vipl_ext.h and nothing else (vipl/libvipl.map), no vipd needed.
 *
 * The library is the one beside this program, ../lib/libvipl.so.1 from
 * /proc/self/exe. Public names must resolve through dlsym() to a definition
 * in that file; internal ones must not; and the file's dynamic symbol table
 * must define no symbol that is not in the public list.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/tlib.h"

/* Every function of vipl.h and vipl_ext.h. Taking each one's address makes
 * the compiler check that the header declares it. */
typedef void (*any_fn)(void);
#define PUB(f) {#f, (any_fn)f}
static const struct {
    const char *name;
    any_fn fn;
} public_api[] = {
    /* vipl.h */
    PUB(VipOpenNic), PUB(VipCloseNic), PUB(VipQueryNic),
    PUB(VipCreatePtag), PUB(VipDestroyPtag),
    PUB(VipRegisterMem), PUB(VipDeregisterMem), PUB(VipQueryMem), PUB(VipSetMemAttributes),
    PUB(VipCreateVi), PUB(VipDestroyVi), PUB(VipQueryVi), PUB(VipSetViAttributes),
    PUB(VipConnectWait), PUB(VipConnectAccept), PUB(VipConnectReject), PUB(VipConnectRequest),
    PUB(VipDisconnect),
    PUB(VipConnectPeerRequest), PUB(VipConnectPeerDone), PUB(VipConnectPeerWait),
    PUB(VipQuerySystemManagementInfo),
    PUB(VipPostSend), PUB(VipSendDone), PUB(VipSendWait),
    PUB(VipPostRecv), PUB(VipRecvDone), PUB(VipRecvWait),
    PUB(VipCreateCQ), PUB(VipDestroyCQ), PUB(VipResizeCQ), PUB(VipCQDone), PUB(VipCQWait),
    PUB(VipSendNotify), PUB(VipRecvNotify), PUB(VipCQNotify), PUB(VipErrorCallback),
    PUB(VipNSInit), PUB(VipNSGetHostByName), PUB(VipNSGetHostByAddr), PUB(VipNSShutdown),
    /* vipl_ext.h */
    PUB(VipExtSetMode), PUB(VipExtGetMode), PUB(VipExtProfileName), PUB(VipExtClockNs), PUB(VipExtClockVirtual),
    PUB(vip_strerror), PUB(vip_error_code_str), PUB(vip_last_error),
};
#define N_PUBLIC (sizeof(public_api) / sizeof(public_api[0]))

/* Internals of the library, firmware, extensions and control socket, which
 * the shared library used to export. */
static const char *const internal_names[] = {
    "fw_tx_progress", "fw_rx_progress", "fw_updt", "fw_vi_init", "fw_profile_load",
    "fw_predict", "fw_link_publish", "fw_tpt_check", "fw_tx_state_name",
    "ext_prepare_send", "ext_vi_init", "ext_xdes_fetch",
    "vipl_call", "vipl_fail", "vipl_wait", "vipl_set_error", "vipl_deliver_error",
    "ctl_send", "ctl_recv", "ctl_connect",
    "hal_report_vi_error", "via_stage_name",
};
#define N_INTERNAL (sizeof(internal_names) / sizeof(internal_names[0]))

#define LIB_NAME "libvipl.so.1"

/* ../lib/libvipl.so.1 relative to this program; 0 on success. */
static int lib_path(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    int w = snprintf(out, cap, "%s/../lib/" LIB_NAME, exe);
    return w > 0 && (size_t)w < cap ? 0 : -1;
}

static void *open_lib(void)
{
    char path[PATH_MAX + 32];
    if (lib_path(path, sizeof(path)) != 0) {
        fprintf(stderr, "\n  cannot find this program's path\n");
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "\n  dlopen %s: %s\n", path, dlerror());
    return h;
}

static int is_public(const char *name)
{
    for (size_t i = 0; i < N_PUBLIC; i++)
        if (strcmp(public_api[i].name, name) == 0)
            return 1;
    return 0;
}

/* Every public function resolves, to a definition in libvipl.so.1 itself. */
static void test_public_resolve(void)
{
    void *h = open_lib();
    TCHK(h != NULL);
    unsigned bad = 0;
    for (size_t i = 0; i < N_PUBLIC; i++) {
        void *sym = dlsym(h, public_api[i].name);
        Dl_info info;
        const char *base = NULL;
        if (sym && dladdr(sym, &info) && info.dli_fname) {
            base = strrchr(info.dli_fname, '/');
            base = base ? base + 1 : info.dli_fname;
        }
        if (!sym || !base || strcmp(base, LIB_NAME) != 0) {
            fprintf(stderr, "\n  %s: %s\n", public_api[i].name,
                    !sym ? "not exported" : "defined outside " LIB_NAME);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
out:
    if (h)
        dlclose(h);
}

/* No internal name resolves. */
static void test_internals_hidden(void)
{
    void *h = open_lib();
    TCHK(h != NULL);
    unsigned bad = 0;
    for (size_t i = 0; i < N_INTERNAL; i++) {
        if (dlsym(h, internal_names[i])) {
            fprintf(stderr, "\n  internal symbol %s is exported\n", internal_names[i]);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
out:
    if (h)
        dlclose(h);
}

/* The file's dynamic symbol table defines exactly the public functions:
 * nothing that does not start with Vip or vip_, and nothing that does but
 * is not in the list. */
static void test_only_api_exported(void)
{
    char path[PATH_MAX + 32];
    int fd = -1;
    void *map = MAP_FAILED;
    size_t size = 0;
    TCHK(lib_path(path, sizeof(path)) == 0);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    TCHK(fd >= 0);
    struct stat st;
    TCHK(fstat(fd, &st) == 0);
    size = (size_t)st.st_size;
    TCHK(size >= sizeof(ElfW(Ehdr)));
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    TCHK(map != MAP_FAILED);

    const unsigned char *base = map;
    const ElfW(Ehdr) *eh = map;
    TCHK(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0);
    TCHK(eh->e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32));
    TCHK(eh->e_shentsize == sizeof(ElfW(Shdr)));
    TCHK(eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= size);
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(const void *)(base + eh->e_shoff);

    const ElfW(Shdr) *dynsym = NULL;
    for (unsigned i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_type == SHT_DYNSYM)
            dynsym = &sh[i];
    TCHK(dynsym != NULL);
    TCHK(dynsym->sh_entsize == sizeof(ElfW(Sym)));
    TCHK(dynsym->sh_offset + dynsym->sh_size <= size);
    TCHK(dynsym->sh_link < eh->e_shnum);
    const ElfW(Shdr) *strtab = &sh[dynsym->sh_link];
    TCHK(strtab->sh_offset + strtab->sh_size <= size);
    const char *str = (const char *)base + strtab->sh_offset;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)(const void *)(base + dynsym->sh_offset);
    size_t nsym = dynsym->sh_size / sizeof(ElfW(Sym));

    unsigned defined = 0, foreign = 0, unlisted = 0, public_funcs = 0;
    for (size_t i = 1; i < nsym; i++) {
        unsigned bind = ELF64_ST_BIND(sym[i].st_info);
        unsigned type = ELF64_ST_TYPE(sym[i].st_info);
        if (sym[i].st_shndx == SHN_UNDEF ||
            (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE))
            continue;
        TCHK(sym[i].st_name < strtab->sh_size);
        const char *name = str + sym[i].st_name;
        defined++;
        if (strncmp(name, "Vip", 3) != 0 && strncmp(name, "vip_", 4) != 0) {
            fprintf(stderr, "\n  exported: %s (%s)\n", name,
                    type == STT_FUNC ? "function" : type == STT_OBJECT ? "object" : "other");
            foreign++;
        } else if (!is_public(name)) {
            fprintf(stderr, "\n  exported but not in vipl.h/vipl_ext.h: %s\n", name);
            unlisted++;
        } else if (type == STT_FUNC) {
            public_funcs++;
        }
    }
    CU_ASSERT_EQUAL(foreign, 0);
    CU_ASSERT_EQUAL(unlisted, 0);
    CU_ASSERT_EQUAL(public_funcs, N_PUBLIC);
    CU_ASSERT_EQUAL(defined, N_PUBLIC);
out:
    if (map != MAP_FAILED)
        munmap(map, size);
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_public_resolve),
        TL_TEST(test_internals_hidden),
        TL_TEST(test_only_api_exported),
        TL_END,
    };
    return tl_main(argc, argv, "abi", tests);
}
