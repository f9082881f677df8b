/*
 * kd_main.c - vipd: options, daemonizing, the single-instance lock,
 * the listening socket and the poll() event loop with its timers.
 */
#include "kd.h"
#include "nic.h" /* fw_fault_parse: the NIC's interface for vipd */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vipd [options]\n"
            "  the kernel agent of the emulated VIA NIC: owns the NICs, registers memory,\n"
            "  creates VIs and matches connections for the processes of this user.\n"
            "  -f, --foreground       stay in the foreground, log to stderr\n"
            "  -n, --nics N           number of NICs via0..via{N-1} (1..%u, default 1)\n"
            "  -s, --socket PATH      control socket (default: $VIPD_SOCKET, else\n"
            "                         $XDG_RUNTIME_DIR/vipd/vipd.sock, else /tmp/vipd-UID/vipd.sock)\n"
            "      --profile NAME     timing profile of every NIC: native (default), sbus,\n"
            "                         pci, or a path to a .conf file (default: $VIP_PROFILE,\n"
            "                         else native)\n"
            "      --profile viaN=NAME  profile of NIC viaN only (repeatable; a later\n"
            "                         option overrides an earlier one for its NICs)\n"
            "      --profile-dir DIR  where NAME.conf is found (default: $VIP_PROFILE_DIR,\n"
            "                         else the first existing of EXE/../share/vipl/profiles,\n"
            "                         EXE/../../lanai-fw/profiles, /usr/local/share/vipl/profiles,\n"
            "                         /usr/share/vipl/profiles; EXE = vipd's directory)\n"
            "      --hosts FILE       names for VipNSGetHostByName (default: $VIPD_HOSTS):\n"
            "                         lines 'name address...', address viaN or\n"
            "                         hh:hh:hh:hh:hh:hh, or ADDR:PORT (the via0 of the vipd\n"
            "                         that listens there), '#' comments; a bad line is an error\n"
            "      --listen ADDR:PORT this vipd is a host of several: the others (the hosts\n"
            "                         file's ADDR:PORT lines) reach its NICs through here\n"
            "      --key FILE         the cluster key every host proves itself with\n"
            "                         (default: %s beside the hosts file; make one with\n"
            "                         'vipctl keygen FILE', mode 0600, copy it to every host)\n"
            "      --frame-mac        a MAC on every UDP frame of this host's connections\n"
            "                         (without: frames carry the connection's secret token)\n"
            "      --link udp|ofi     the link between hosts' NICs: udp (the default) or\n"
            "                         ofi (libfabric FI_EP_RDM; FI_PROVIDER, default tcp;ofi_rxm)\n"
            "      --faults SPEC      inject faults on every link to another host:\n"
            "                         drop=R,dup=R,reorder=R,corrupt=R,delay=R,delay_ms=N\n"
            "                         (R a rate 0..1; default $VIP_FAULTS in each process)\n"
            "      --clock real|virtual  how the paced NICs' model time passes (default:\n"
            "                         $VIP_CLOCK, else real): waited out in real time, or\n"
            "                         virtual (spec-notes/virtual-time.md); virtual needs every\n"
            "                         NIC paced (sbus, pci), native has no model time\n"
            "  -l, --log-level LEVEL  error|warn|info|debug (default info)\n"
            "  -v                     same as --log-level debug\n"
            "  -q                     same as --log-level error\n"
            "      --idle-exit SECS   exit after SECS without sessions (0 = never)\n"
            "      --max-sessions N   NIC sessions (VipOpenNic) this vipd serves at once\n"
            "                         (default %u); more are refused with a reason\n"
            "      --system           serve every user of this host (run as root): socket\n"
            "                         %s, mode 0666, in a root-owned 0755\n"
            "                         directory ($VIPD_SYSTEM_SOCKET or -s moves it); users\n"
            "                         are kept apart by the uid of each connection\n"
            "      --max-sessions-per-user N  NIC sessions of one uid (system: %u)\n"
            "      --max-vis-per-user N       VIs of one uid, all NICs (system: %u)\n"
            "      --max-reg-bytes-per-user N[K|M|G|T]  bytes one uid may have registered\n"
            "                         (system: %lluG); 0 = no limit, the default of a\n"
            "                         vipd of one user\n"
            "      --autostart        started by VipOpenNic: daemonize, exit quietly when\n"
            "                         another vipd serves the socket, idle-exit after\n"
            "                         $VIPD_IDLE_EXIT seconds (default 60)\n"
            "  -h, --help             this text\n",
            VIA_MAX_NICS, KD_AUTH_KEY_FILE, KD_MAX_SESSIONS, CTL_SYSTEM_SOCKET,
            KD_SYSTEM_SESSIONS_PER_USER,
            KD_SYSTEM_VIS_PER_USER, (unsigned long long)(KD_SYSTEM_REG_BYTES_PER_USER >> 30));
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > max || s[0] == '-')
        return false;
    *out = v;
    return true;
}

/* N with an optional binary suffix K, M, G or T. */
static bool parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return false;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT", *u = strchr(units, *end);
        if (!u || end[1])
            return false;
        shift = 10 * (unsigned)(u - units + 1);
    }
    if (v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

/*
 * A system vipd's socket directory: created root's and 0755 (every user
 * must reach the socket) if missing; an existing one must be a real
 * directory of root's that nobody else can write to (its mode is the
 * administrator's: 0750 and a group limits who may use the NIC). Checked
 * through an O_NOFOLLOW descriptor, like a client checks it.
 */
static bool system_socket_dir(const char *sockpath)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sockpath);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) {
        fprintf(stderr, "vipd: --system wants the socket in a directory of its own, not %s\n",
                sockpath);
        return false;
    }
    *slash = 0;
    bool made = mkdir(dir, 0755) == 0;
    if (!made && errno != EEXIST) {
        fprintf(stderr, "vipd: cannot create %s: %s\n", dir, strerror(errno));
        return false;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "vipd: %s: %s\n", dir,
                errno == ELOOP || errno == ENOTDIR ? "a symbolic link or not a directory"
                                                   : strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool ok = st.st_uid == 0 && !(st.st_mode & 022);
    /* made now: 0755 whatever our umask took away */
    if (ok && made && fchmod(fd, 0755) < 0)
        ok = false;
    close(fd);
    if (!ok) {
        fprintf(stderr, "vipd: %s must be root's and writable by root only (it is uid %u's, "
                        "mode %o)\n", dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return false;
    }
    return true;
}

/*
 * Take "<socket>.lock". Returns the fd (held), -2 when another vipd holds
 * it, -1 on error. Re-checks the inode after locking: a vipd that is exiting
 * unlinks the lock file, and a lock on an unlinked file protects nothing.
 */
static int take_lock(const char *lockpath)
{
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            fprintf(stderr, "vipd: cannot open lock file %s: %s\n", lockpath, strerror(errno));
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK)
                return -2;
            fprintf(stderr, "vipd: cannot lock %s: %s\n", lockpath, strerror(e));
            return -1;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lockpath, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return fd;
        close(fd); /* lost a race with an exiting vipd: try the new file */
    }
    fprintf(stderr, "vipd: lock file %s keeps changing under us\n", lockpath);
    return -1;
}

static int bind_socket(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        fprintf(stderr, "vipd: socket path %s is too long (max %zu bytes)\n", path,
                sizeof a.sun_path - 1);
        return -1;
    }
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
        fprintf(stderr, "vipd: socket: %s\n", strerror(errno));
        return -1;
    }
    unlink(path); /* stale socket of a vipd that died: we hold the lock */
    /* A system vipd's socket is everybody's to connect to (0666): who may
     * do what is decided per connection, by its SO_PEERCRED. */
    mode_t old = umask(kd.system ? 0111 : 077);
    int rc = bind(s, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (rc < 0 || listen(s, 64) < 0) {
        fprintf(stderr, "vipd: cannot listen on %s: %s\n", path, strerror(errno));
        close(s);
        return -1;
    }
    return s;
}

/*
 * Detach from the terminal. The socket is already bound and listening and
 * the lock held (both inherited by the grandchild), so the launcher can
 * connect as soon as the original process exits: no readiness pipe needed.
 */
static void daemonize(const char *sockpath)
{
    fflush(stderr);
    pid_t p = fork();
    if (p < 0) {
        fprintf(stderr, "vipd: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (p > 0)
        _exit(0);
    setsid();
    p = fork();
    if (p < 0)
        _exit(1);
    if (p > 0)
        _exit(0);
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s", sockpath);
    char *slash = strrchr(logpath, '/');
    if (slash)
        snprintf(slash + 1, sizeof logpath - (size_t)(slash + 1 - logpath), "vipd.log");
    else
        snprintf(logpath, sizeof logpath, "vipd.log");
    int nul = open("/dev/null", O_RDWR);
    int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (nul >= 0) {
        dup2(nul, STDIN_FILENO);
        dup2(nul, STDOUT_FILENO);
        if (log < 0)
            dup2(nul, STDERR_FILENO);
        if (nul > STDERR_FILENO)
            close(nul);
    }
    if (log >= 0) {
        dup2(log, STDERR_FILENO);
        close(log);
    }
    if (chdir("/") < 0) {
        /* harmless: we only use absolute paths from here on */
    }
}

static void raise_fd_limit(void)
{
    /* Each session keeps its event page fd open, and each socket is an fd. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The profile directory when neither --profile-dir nor $VIP_PROFILE_DIR
 * names one: installed beside vipd, the build tree, then system paths.
 * NULL when none exists. */
static const char *find_profile_dir(char *buf, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char cand[4][PATH_MAX + 32];
    int nc = 0;
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(cand[nc++], sizeof cand[0], "%s/../share/vipl/profiles", exe);
            snprintf(cand[nc++], sizeof cand[0], "%s/../../lanai-fw/profiles", exe);
        }
    }
    snprintf(cand[nc++], sizeof cand[0], "/usr/local/share/vipl/profiles");
    snprintf(cand[nc++], sizeof cand[0], "/usr/share/vipl/profiles");
    for (int i = 0; i < nc; i++) {
        struct stat st;
        if (stat(cand[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(buf, cap, "%s", cand[i]);
            return buf;
        }
    }
    return NULL;
}

/* --profile NAME (every NIC) or --profile viaN=NAME (one NIC: *named =
 * max(*named, N + 1)). */
static bool parse_profile_opt(const char *arg, const char *names[VIA_MAX_NICS],
                              unsigned long *named)
{
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "via", 3) == 0 && eq && eq > arg + 3) {
        unsigned long idx;
        char num[16];
        size_t len = (size_t)(eq - arg - 3);
        if (len >= sizeof num)
            len = sizeof num - 1;
        memcpy(num, arg + 3, len);
        num[len] = 0;
        if (!parse_uint(num, VIA_MAX_NICS - 1, &idx)) {
            fprintf(stderr, "vipd: --profile %s: no NIC via%s (via0..via%u)\n", arg, num,
                    VIA_MAX_NICS - 1);
            return false;
        }
        if (!eq[1]) {
            fprintf(stderr, "vipd: --profile %s: no profile name after '='\n", arg);
            return false;
        }
        names[idx] = eq + 1;
        if (idx + 1 > *named)
            *named = idx + 1;
        return true;
    }
    if (!*arg) {
        fprintf(stderr, "vipd: --profile wants a profile name, not an empty string\n");
        return false;
    }
    for (unsigned i = 0; i < VIA_MAX_NICS; i++)
        names[i] = arg;
    return true;
}

/* Out of file descriptors (EMFILE): vipd keeps one spare descriptor, so
 * it can still take the client waiting and close it at once (the client
 * sees a clean end, not a hang), and it stops watching the listening
 * socket for a while instead of spinning on it; it says so once. */
#define KD_ACCEPT_BACKOFF_NS 100000000ull
static int spare_fd = -1;
static uint64_t accept_paused_until;
static bool out_of_fds;

/* Every client waiting now is refused (closed at once): none could be
 * served before some leave, and each would otherwise wait in the queue. */
static void refuse_waiting(int lsock)
{
    while (spare_fd >= 0) {
        close(spare_fd);
        int fd = accept4(lsock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
            close(fd);
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            break;
    }
}

static void accept_clients(int lsock)
{
    for (;;) {
        int fd = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                if (!out_of_fds)
                    kd_warn("out of file descriptors (%s): new clients are refused until "
                            "some leave", strerror(errno));
                out_of_fds = true;
                refuse_waiting(lsock);
                accept_paused_until = kd_now_ns() + KD_ACCEPT_BACKOFF_NS;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                kd_warn("accept: %s", strerror(errno));
            }
            return;
        }
        if (out_of_fds)
            kd_info("file descriptors are available again: accepting clients");
        out_of_fds = false;
        kd_client_new(fd);
    }
}

static void event_loop(int lsock, unsigned idle_s)
{
    sigset_t unblocked;
    sigprocmask(SIG_SETMASK, NULL, &unblocked);
    sigdelset(&unblocked, SIGTERM);
    sigdelset(&unblocked, SIGINT);
    struct pollfd *pfd = NULL;
    struct kd_client **who = NULL;
    size_t cap = 0;
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    while (!kd.stop && !got_signal) {
        kd_reap_clients();
        size_t n = 1 + kd_host_npollfds();
        for (struct kd_client *c = kd.clients; c; c = c->next)
            n++;
        if (n > cap) {
            size_t nc = n * 2;
            struct pollfd *np = realloc(pfd, nc * sizeof *np);
            if (!np) {
                kd_err("out of memory for the poll set");
                break;
            }
            pfd = np;
            struct kd_client **nw = realloc(who, nc * sizeof *nw);
            if (!nw) {
                kd_err("out of memory for the poll set");
                break;
            }
            who = nw;
            cap = nc;
        }
        uint64_t now = kd_now_ns();
        bool paused = now < accept_paused_until;
        pfd[0] = (struct pollfd){.fd = paused ? -1 : lsock, .events = POLLIN};
        n = 1;
        for (struct kd_client *c = kd.clients; c; c = c->next) {
            pfd[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            who[n++] = c;
        }
        size_t hbase = n; /* then the other hosts' connections (kd_host.c) */
        size_t hn = kd_host_pollfds(pfd + n, cap - n);
        n += hn;

        /* Next timer: a connection timeout, the idle exit, or accepting again. */
        uint64_t deadline = kd_conn_next_deadline();
        uint64_t hb = kd_host_next_deadline();
        if (hb && (!deadline || hb < deadline))
            deadline = hb;
        if (paused && (!deadline || accept_paused_until < deadline))
            deadline = accept_paused_until;
        if (idle_s && kd.nsessions == 0 && !kd.clients) {
            uint64_t idle_at = kd.last_session_end_ns + (uint64_t)idle_s * 1000000000ull;
            if (now >= idle_at) {
                kd_info("no sessions for %u s: exiting", idle_s);
                break;
            }
            if (!deadline || idle_at < deadline)
                deadline = idle_at;
        }
        struct timespec ts, *tsp = NULL;
        if (deadline) {
            uint64_t d = deadline > now ? deadline - now : 0;
            d += 999999; /* round up: never wake a little early and spin */
            ts.tv_sec = (time_t)(d / 1000000000ull);
            ts.tv_nsec = (long)(d % 1000000000ull);
            tsp = &ts;
        }
        int rc = ppoll(pfd, n, tsp, &unblocked);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            kd_err("poll: %s", strerror(errno));
            break;
        }
        kd_conn_expire(kd_now_ns());
        kd_host_events(pfd + hbase, hn);
        kd_host_tick(kd_now_ns());
        if (pfd[0].revents & POLLIN)
            accept_clients(lsock);
        for (size_t i = 1; i < hbase; i++) {
            struct kd_client *c = who[i];
            if (c->dead || !pfd[i].revents)
                continue;
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                kd_client_readable(c);
        }
    }
    if (got_signal)
        kd_info("signal %d: shutting down", (int)got_signal);
    free(pfd);
    free(who);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"foreground", no_argument, NULL, 'f'},  {"nics", required_argument, NULL, 'n'},
        {"socket", required_argument, NULL, 's'}, {"profile", required_argument, NULL, 'P'},
        {"log-level", required_argument, NULL, 'l'}, {"idle-exit", required_argument, NULL, 'I'},
        {"autostart", no_argument, NULL, 'A'},   {"help", no_argument, NULL, 'h'},
        {"profile-dir", required_argument, NULL, 'D'}, {"hosts", required_argument, NULL, 'H'},
        {"max-sessions", required_argument, NULL, 'M'},
        {"listen", required_argument, NULL, 'L'}, {"link", required_argument, NULL, 'K'},
        {"faults", required_argument, NULL, 'F'},
        {"clock", required_argument, NULL, 'C'},
        {"system", no_argument, NULL, 'S'},
        {"max-sessions-per-user", required_argument, NULL, 'U'},
        {"max-vis-per-user", required_argument, NULL, 'V'},
        {"max-reg-bytes-per-user", required_argument, NULL, 'R'},
        {"key", required_argument, NULL, 'k'}, {"frame-mac", no_argument, NULL, 'm'},
        {NULL, 0, NULL, 0}};
    /* Not dumpable: /proc/<vipd>/fd and /proc/<vipd>/mem are then root's
     * only, so no process of the user reaches, through vipd, the pages
     * (event pages, NIC pages, channels) vipd keeps for every session; each
     * process holds only what it was handed. (No core dumps either.) */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    bool foreground = false, autostart = false;
    unsigned long nnics = 1, idle = 0;
    bool idle_set = false, limits_set[3] = {false, false, false};
    char sockpath[512] = "";
    /* Per NIC; a NIC no --profile names gets the default (NULL here). */
    const char *profiles[VIA_MAX_NICS] = {NULL};
    unsigned long named_max = 0; /* highest NIC index a viaN= option named, + 1 */
    const char *profile_dir = NULL, *hosts = NULL, *clock_opt = NULL, *key = NULL;
    int c;
    kd.link = VIA_LINK_UDP; /* connections to other hosts, unless --link says otherwise */
    while ((c = getopt_long(argc, argv, "fn:s:l:vqh", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            foreground = true;
            break;
        case 'n':
            if (!parse_uint(optarg, VIA_MAX_NICS, &nnics) || nnics < 1) {
                fprintf(stderr, "vipd: --nics wants a number from 1 to %u, not '%s'\n",
                        VIA_MAX_NICS, optarg);
                return 1;
            }
            break;
        case 's':
            if (strlen(optarg) >= sizeof sockpath - 8) {
                fprintf(stderr, "vipd: socket path too long\n");
                return 1;
            }
            snprintf(sockpath, sizeof sockpath, "%s", optarg);
            break;
        case 'P':
            if (!parse_profile_opt(optarg, profiles, &named_max))
                return 1;
            break;
        case 'D':
            if (!*optarg) {
                fprintf(stderr, "vipd: --profile-dir wants a directory\n");
                return 1;
            }
            profile_dir = optarg;
            break;
        case 'L':
            if (!kd_host_parse_addr(optarg, &kd.listen_ip, &kd.listen_port)) {
                fprintf(stderr, "vipd: --listen wants IPv4-ADDRESS:PORT, not '%s'\n", optarg);
                return 1;
            }
            break;
        case 'K':
            if (strcmp(optarg, "udp") == 0) {
                kd.link = VIA_LINK_UDP;
            } else if (strcmp(optarg, "ofi") == 0) {
                kd.link = VIA_LINK_OFI;
            } else {
                fprintf(stderr, "vipd: --link %s: the links are udp and ofi (libfabric)\n",
                        optarg);
                return 1;
            }
            break;
        case 'C':
            clock_opt = optarg;
            break;
        case 'F': {
            char why[120];
            if (!fw_fault_parse(optarg, &kd.faults, why, sizeof why)) {
                fprintf(stderr, "vipd: --faults: %s\n", why);
                return 1;
            }
            break;
        }
        case 'H':
            if (!*optarg) {
                fprintf(stderr, "vipd: --hosts wants a file\n");
                return 1;
            }
            hosts = optarg;
            break;
        case 'l': {
            int lv = kd_log_level_of(optarg);
            if (lv < 0) {
                fprintf(stderr, "vipd: log level must be error, warn, info or debug, not '%s'\n",
                        optarg);
                return 1;
            }
            kd_log_level = (enum kd_level)lv;
            break;
        }
        case 'v':
            kd_log_level = KD_DEBUG;
            break;
        case 'q':
            kd_log_level = KD_ERROR;
            break;
        case 'M': {
            unsigned long m;
            if (!parse_uint(optarg, 1000000, &m) || m < 1) {
                fprintf(stderr, "vipd: --max-sessions wants a number from 1 to 1000000, "
                                "not '%s'\n", optarg);
                return 1;
            }
            kd.max_sessions = (unsigned)m;
            break;
        }
        case 'S':
            kd.system = true;
            break;
        case 'U':
        case 'V': {
            unsigned long m;
            if (!parse_uint(optarg, 1000000, &m)) {
                fprintf(stderr, "vipd: --max-%s-per-user wants a number from 0 (no limit) to "
                                "1000000, not '%s'\n", c == 'U' ? "sessions" : "vis", optarg);
                return 1;
            }
            *(c == 'U' ? &kd.max_sessions_per_user : &kd.max_vis_per_user) = (unsigned)m;
            limits_set[c == 'U' ? 0 : 1] = true;
            break;
        }
        case 'R':
            if (!parse_bytes(optarg, &kd.max_reg_bytes_per_user)) {
                fprintf(stderr, "vipd: --max-reg-bytes-per-user wants bytes (0 = no limit; "
                                "suffix K, M, G or T), not '%s'\n", optarg);
                return 1;
            }
            limits_set[2] = true;
            break;
        case 'I':
            if (!parse_uint(optarg, 365ul * 86400, &idle)) {
                fprintf(stderr, "vipd: --idle-exit wants seconds (0 = never), not '%s'\n",
                        optarg);
                return 1;
            }
            idle_set = true;
            break;
        case 'A':
            autostart = true;
            break;
        case 'k':
            key = optarg;
            break;
        case 'm':
            kd.frame_mac = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vipd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 1;
    }
    if (kd.system && geteuid() != 0) {
        fprintf(stderr, "vipd: --system serves every user of the host and runs as root "
                        "(clients trust no other uid at the system socket)\n");
        return 1;
    }
    if (kd.system && autostart) {
        fprintf(stderr, "vipd: --system and --autostart do not go together: programs start "
                        "a vipd of their own user only\n");
        return 1;
    }
    if (kd.system) {
        if (!limits_set[0])
            kd.max_sessions_per_user = KD_SYSTEM_SESSIONS_PER_USER;
        if (!limits_set[1])
            kd.max_vis_per_user = KD_SYSTEM_VIS_PER_USER;
        if (!limits_set[2])
            kd.max_reg_bytes_per_user = KD_SYSTEM_REG_BYTES_PER_USER;
    }
    if (named_max > nnics) {
        fprintf(stderr, "vipd: --profile names via%lu, but there %s only %lu NIC%s (see -n)\n",
                named_max - 1, nnics == 1 ? "is" : "are", nnics, nnics == 1 ? "" : "s");
        return 1;
    }
    /* Profiles are read before the lock and the socket: a bad one is an
     * error the caller (or the autostarting library) sees as our exit status. */
    const char *def = getenv("VIP_PROFILE");
    if (!def || !*def)
        def = "native";
    bool need_dir = false;
    for (unsigned i = 0; i < nnics; i++) {
        if (!profiles[i])
            profiles[i] = def;
        /* native needs no file: vipd knows it (kd_nic.c) */
        if (!strchr(profiles[i], '/') && strcmp(profiles[i], "native") != 0)
            need_dir = true;
    }
    char dirbuf[PATH_MAX + 32];
    if (!profile_dir) {
        const char *e = getenv("VIP_PROFILE_DIR");
        profile_dir = e && *e ? e : find_profile_dir(dirbuf, sizeof dirbuf);
    }
    if (!profile_dir && need_dir) {
        fprintf(stderr,
                "vipd: no profile directory found (looked in <vipd dir>/../share/vipl/profiles, "
                "<vipd dir>/../../lanai-fw/profiles, /usr/local/share/vipl/profiles, "
                "/usr/share/vipl/profiles); use --profile-dir DIR or VIP_PROFILE_DIR\n");
        return 1;
    }
    /* The clock: --clock, else the environment an autostarting program
     * handed down; virtual time is a paced NIC's only. */
    if (!clock_opt) {
        const char *e = getenv("VIP_CLOCK");
        clock_opt = e && *e ? e : "real";
    }
    if (!strcmp(clock_opt, "virtual")) {
        kd.clock = VIA_CLOCK_VIRTUAL;
    } else if (strcmp(clock_opt, "real") != 0) {
        fprintf(stderr, "vipd: --clock (or VIP_CLOCK) is real or virtual, not '%s'\n", clock_opt);
        return 1;
    }
    if (!kd_nic_init((unsigned)nnics, profiles, profile_dir))
        return 1;
    /* Like the profiles: a bad hosts file is our exit status, before the lock. */
    if (!hosts) {
        const char *e = getenv("VIPD_HOSTS");
        hosts = e && *e ? e : NULL;
    }
    if (hosts && !kd_ns_load(hosts)) {
        kd_nic_fini();
        return 1;
    }
    if (hosts) {
        char real[PATH_MAX];
        const char *path = realpath(hosts, real) ? real : hosts;
        size_t l = strnlen(path, sizeof kd.hosts_path - 1); /* cut to fit HELLO */
        memcpy(kd.hosts_path, path, l);
        kd.hosts_path[l] = 0;
    }
    /* A host of several proves itself with the cluster key: none, no start. */
    if (kd.listen_port) {
        char kpath[1024], why[400];
        if (!kd_auth_key_path(key, hosts, kpath, sizeof kpath)) {
            fprintf(stderr, "vipd: --listen needs the cluster key: --key FILE, or %s beside "
                            "the hosts file (make one with 'vipctl keygen FILE')\n",
                    KD_AUTH_KEY_FILE);
            kd_nic_fini();
            return 1;
        }
        if (!kd_auth_load(kpath, why, sizeof why)) {
            fprintf(stderr, "vipd: %s\n", why);
            kd_nic_fini();
            return 1;
        }
    }

    if (autostart && !idle_set) {
        idle = 60;
        const char *e = getenv("VIPD_IDLE_EXIT");
        if (e && *e && !parse_uint(e, 365ul * 86400, &idle)) {
            fprintf(stderr, "vipd: VIPD_IDLE_EXIT must be seconds, not '%s'; using 60\n", e);
            idle = 60;
        }
    }
    if (!sockpath[0] && kd.system)
        ctl_system_socket_path(sockpath, sizeof sockpath);
    else if (!sockpath[0])
        ctl_socket_path(sockpath, sizeof sockpath);
    if (kd.system) {
        if (!system_socket_dir(sockpath)) {
            kd_nic_fini();
            kd_ns_free();
            return 1;
        }
    } else {
        int rc = ctl_make_socket_dir(sockpath);
        if (rc < 0) {
            fprintf(stderr, "vipd: cannot use the directory of %s: %s\n", sockpath,
                    strerror(-rc));
            return 1;
        }
    }

    char lockpath[520];
    snprintf(lockpath, sizeof lockpath, "%s.lock", sockpath);
    int lockfd = take_lock(lockpath);
    if (lockfd == -2 && !autostart) {
        fprintf(stderr, "vipd: another vipd already serves %s\n", sockpath);
        kd_nic_fini();
        kd_ns_free();
        return 1;
    }
    /* Lost the autostart race. The winner may not listen yet, and our
     * launcher connects as soon as we exit: wait until it can. If the lock
     * holder was an idle vipd on its way out, take over instead. */
    for (int waited = 0; lockfd == -2; waited += 10) {
        int s = ctl_connect(sockpath);
        if (s >= 0) {
            close(s);
            kd_nic_fini();
            kd_ns_free();
            return 0;
        }
        if (waited >= 10000) {
            fprintf(stderr, "vipd: another vipd holds %s but does not answer on %s\n",
                    lockpath, sockpath);
            kd_nic_fini();
            kd_ns_free();
            return 1;
        }
        usleep(10000);
        lockfd = take_lock(lockpath);
    }
    if (lockfd < 0) {
        kd_nic_fini();
        kd_ns_free();
        return 1;
    }
    int lsock = bind_socket(sockpath);
    if (lsock < 0) {
        unlink(lockpath);
        kd_nic_fini();
        kd_ns_free();
        return 1;
    }

    /* The layers below call up only through what the layers above hand
     * them here. */
    kd_remote_init();  /* other hosts' messages (kd_host.c) */
    kd_connect_init(); /* a VI's end (kd_vi.c) */
    if (!kd_host_listen()) {
        fprintf(stderr, "vipd: cannot listen for other hosts on port %u: %s\n",
                kd.listen_port, strerror(errno));
        unlink(lockpath);
        kd_nic_fini();
        kd_ns_free();
        return 1;
    }
    if (!foreground)
        daemonize(sockpath);

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* Blocked except inside ppoll(): a signal can never slip in between the
     * loop's check of got_signal and the wait. */
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, NULL);
    raise_fd_limit();

    kd.last_session_end_ns = kd_now_ns();
    char plist[VIA_MAX_NICS * 40] = "";
    for (unsigned i = 0, n = 0; i < kd.nnics && n < sizeof plist; i++)
        n += (unsigned)snprintf(plist + n, sizeof plist - n, "%svia%u=%s", i ? " " : "", i,
                                kd.nic[i].prof.name);
    kd_info("serving %s: %u NIC%s, profiles %s, host id %08x%s", sockpath, kd.nnics,
            kd.nnics == 1 ? "" : "s", plist, kd.host_id, idle ? "" : ", no idle exit");
    if (kd.system)
        kd_info("system vipd: every user of the host; per user at most %u sessions, %u VIs, "
                "%llu registered bytes (0 = no limit)", kd.max_sessions_per_user,
                kd.max_vis_per_user, (unsigned long long)kd.max_reg_bytes_per_user);
    if (profile_dir)
        kd_info("profile directory %s", profile_dir);
    if (hosts)
        kd_info("hosts file %s: %zu name-address pairs", hosts, kd.nhosts);
    if (idle)
        kd_info("idle exit after %lu s without sessions", idle);

    event_loop(lsock, (unsigned)idle);

    kd_shutdown_all();
    kd_host_fini();
    kd_nic_fini();
    kd_ns_free();
    unlink(sockpath);
    unlink(lockpath);
    close(lsock);
    close(lockfd);
    free(kd.ptag);
    kd_trace_free();
    kd_info("stopped");
    return 0;
}
