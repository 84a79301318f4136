// Floor relay for the egress bench: answers one CONNECT head with 200,
// connects to 127.0.0.1:<port of the authority>, then splices both ways
// with blocking splice(2), one thread per direction. argv[1]: pipe size
// (0 = default); argv[2], optional: the congestion control of its socket
// to the client (as Paddock's proxy sets `reno` on its socket to a
// loopback job; the host's default otherwise). Prints its port on stdout.
// Both sockets are TCP_NODELAY (as Paddock's proxy's are) and no splice
// says SPLICE_F_MORE: on a TCP
// socket that flag corks the data (MSG_MORE), so the last partial segment
// of an answer waited for the kernel's 200 ms cork timer; every tunnel
// stalled that long until session 24.
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static int pipesz;
static const char *congestion;
struct dir { int from, to; };
static void *pump(void *arg) {
    struct dir *d = arg; int p[2]; if (pipe2(p, O_CLOEXEC)) return 0;
    if (pipesz) fcntl(p[1], F_SETPIPE_SZ, pipesz);
    for (;;) {
        ssize_t n = splice(d->from, 0, p[1], 0, 1 << 20, SPLICE_F_MOVE);
        if (n <= 0) break;
        while (n > 0) { ssize_t k = splice(p[0], 0, d->to, 0, n, SPLICE_F_MOVE); if (k <= 0) goto out; n -= k; }
    }
out: shutdown(d->to, SHUT_WR); close(p[0]); close(p[1]); return 0;
}
static void *conn(void *arg) {
    int c = (int)(long)arg; char head[8192]; size_t len = 0;
    while (len < sizeof head - 1) { ssize_t n = read(c, head + len, 1); if (n <= 0) { close(c); return 0; } len += n; head[len] = 0; if (len >= 4 && !memcmp(head + len - 4, "\r\n\r\n", 4)) break; }
    char *colon = strchr(head, ':'); int port = colon ? atoi(colon + 1) : 0;
    int u = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) }; a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(u, (void *)&a, sizeof a)) { close(c); close(u); return 0; }
    int one = 1; setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (congestion) setsockopt(c, IPPROTO_TCP, TCP_CONGESTION, congestion, strlen(congestion));
    const char *ok = "HTTP/1.1 200 Connection established\r\n\r\n"; write(c, ok, strlen(ok));
    struct dir up = { c, u }, down = { u, c }; pthread_t t; pthread_create(&t, 0, pump, &up); pump(&down); pthread_join(t, 0);
    close(c); close(u); return 0;
}
int main(int argc, char **argv) {
    pipesz = argc > 1 ? atoi(argv[1]) : 0;
    congestion = argc > 2 ? argv[2] : 0;
    int l = socket(AF_INET, SOCK_STREAM, 0); int one = 1; setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET }; a.sin_addr.s_addr = htonl(0x7f000001);
    bind(l, (void *)&a, sizeof a); listen(l, 128); socklen_t sl = sizeof a; getsockname(l, (void *)&a, &sl);
    printf("%d\n", ntohs(a.sin_port)); fflush(stdout);
    for (;;) { int c = accept(l, 0, 0); if (c < 0) continue; pthread_t t; pthread_create(&t, 0, conn, (void *)(long)c); pthread_detach(t); }
}
