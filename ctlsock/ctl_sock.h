/*
 * ctl_sock.h - framing of the kernel agent's control channel.
 *
 * One request = struct via_ctl_hdr + body; one reply = struct
 * via_ctl_reply_hdr + body; file descriptors ride with the header in one
 * SCM_RIGHTS message. Shared by vipd, vipctl and libvipl so that both ends
 * frame messages the same way.
 */
#ifndef CTL_SOCK_H
#define CTL_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_MAX_FDS 4

/* Send hdr+body (one buffer each) and up to CTL_MAX_FDS fds. 0 or -errno. */
int ctl_send(int sock, const void *hdr, size_t hdr_len, const void *body, size_t body_len,
             const int *fds, int nfds);

/*
 * Receive exactly hdr_len bytes of header (with any fds that came with it),
 * then the body length found at byte offset 4 of the header (both header
 * kinds keep the body length there), into body (capacity body_cap; a longer
 * body is read and dropped, and -EMSGSIZE returned). *nfds in: capacity, out:
 * received. Returns the body length, or -errno (-ECONNRESET on EOF).
 */
long ctl_recv(int sock, void *hdr, size_t hdr_len, void *body, size_t body_cap, int *fds,
              int *nfds);

/* Connect to a vipd socket path; returns fd or -errno. Refuses (-EACCES)
 * a path another user could have planted (its directory a link, or not
 * ours or root's, or writable by others and not sticky; the socket not
 * ours or root's), and (-EPERM) a listener that runs as another user;
 * ctl_refusal() then says why. */
int ctl_connect(const char *path);
/* The same for the system vipd's socket: directory, socket and listener
 * must all be root's (our own uid is not enough). */
int ctl_connect_root(const char *path);
const char *ctl_refusal(void);

/* The system vipd's socket (vipd --system): $VIPD_SYSTEM_SOCKET, else this. */
#define CTL_SYSTEM_SOCKET "/run/vipd/vipd.sock"
char *ctl_system_socket_path(char *buf, size_t cap);

/* The socket a program uses: $VIPD_SOCKET if set; else the user's own
 * (ctl_socket_path) if something is there, or if no system socket exists
 * either (a vipd of the user's is then started); else the system socket.
 * Writes into buf; true when it is the system socket (ctl_connect_root). */
bool ctl_socket_find(char *buf, size_t cap);

/* The socket path: $VIPD_SOCKET, else $XDG_RUNTIME_DIR/vipd/vipd.sock, else
 * /tmp/vipd-<uid>/vipd.sock. Writes into buf; returns buf. */
char *ctl_socket_path(char *buf, size_t cap);

/* Create (mode 0700) the directory that holds path, if missing. One that
 * exists must be ours; it is tightened to 0700, unless it is sticky (a
 * shared directory such as /tmp, left as it is). 0 or -errno. */
int ctl_make_socket_dir(const char *path);

#endif
