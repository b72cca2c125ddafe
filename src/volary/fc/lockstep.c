/* volary's lock-step and port shim for Betaflight SITL (LD_PRELOAD; written for volary).
 *
 * Betaflight's SITL reads CLOCK_MONOTONIC for its clock (scaled by the rate at which state
 * packets arrive) and binds fixed ports on every interface. Loaded before libc, this library
 *   - moves every listening socket to 127.0.0.1 and to the ports named in the environment,
 *     and redirects the motor packets to the simulator's port (several firmware processes on
 *     one machine);
 *   - in lock-step mode gives the firmware a virtual monotonic clock: the main thread's clock
 *     advances by a fixed tick per read (and by the requested time per sleep) up to a horizon,
 *     the time of the latest state packet; there it blocks and sends the simulator an
 *     acknowledgement (12 bytes: "VLAK" + the packet's timestamp, float64) through the socket
 *     the motor packets use, after the motor packet of that step. A state packet and the RC
 *     packet of the same step are applied by the firmware's receiver threads while the main
 *     thread is blocked, so the firmware's work and outputs depend only on the packets;
 *   - exits with status 3 (PORT_TAKEN) when a port named in the environment is taken
 *     (another process bound it after volary chose it): volary then starts it again;
 *   - sends everything the simulator receives (motor packets, acknowledgements) from one socket
 *     bound to 127.0.0.1:VOLARY_BF_SEND_PORT, so the simulator can connect() to it and the kernel
 *     drops datagrams from anyone else;
 *   - hands the firmware's state and RC threads only datagrams from the simulator's socket
 *     (127.0.0.1:VOLARY_BF_MOTOR_PORT): anything else is returned as "nothing received" (-1,
 *     EAGAIN), which the firmware ignores like a timeout, and is not counted;
 *   - counts a 12-byte "VLNR" + timestamp datagram on the RC port as the step's RC packet
 *     without a frame (the radio sent nothing this step): the firmware gets "nothing received"
 *     and keeps the last RC frame it had, as Betaflight 4.6.0's UDP receiver does when packets
 *     stop.
 *
 * Environment: VOLARY_BF_STATE_PORT, VOLARY_BF_RC_PORT (the firmware listens), VOLARY_BF_MOTOR_PORT
 * (the simulator listens), VOLARY_BF_SEND_PORT (the shim sends from), VOLARY_BF_TCP_BASE (UART n listens on TCP_BASE + n),
 * VOLARY_BF_LOCKSTEP (1: lock-step), VOLARY_BF_BOOT_US (virtual time the firmware boots for
 * before the first state packet), VOLARY_BF_TICK_NS (virtual time per clock read).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { FW_STATE = 9003, FW_RC = 9004, FW_MOTOR = 9002, FW_RAW = 9001, FW_TCP = 5760 };
enum { STATE_BYTES = 144, RC_BYTES = 40, NO_RC_BYTES = 12 };
enum { PORT_TAKEN = 3 }; /* exit status: a port named in the environment was taken */

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_nanosleep)(const struct timespec *, struct timespec *);
static int (*real_bind)(int, const struct sockaddr *, socklen_t);
static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);

static int state_port, rc_port, motor_port, send_port, tcp_base, lockstep;
static uint64_t tick_ns;
static pthread_t main_thread;

static _Atomic uint64_t vt_ns;      /* virtual time; written by the main thread only */
static _Atomic uint64_t horizon_ns; /* the main thread may run up to here */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int state_fd = -1, rc_fd = -1;
static int out_fd = -1; /* the one socket the simulator hears from; main thread only */
static uint64_t steps_state, steps_rc, steps_released, steps_acked;
static int have_origin, boot_acked;
static uint64_t origin_ns;
static double origin_ts, release_ts, pending_ts;
static __thread int pending_state, pending_rc;

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

__attribute__((constructor)) static void volary_shim_init(void)
{
    real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    real_nanosleep = dlsym(RTLD_NEXT, "nanosleep");
    real_bind = dlsym(RTLD_NEXT, "bind");
    real_sendto = dlsym(RTLD_NEXT, "sendto");
    real_recvfrom = dlsym(RTLD_NEXT, "recvfrom");
    real_select = dlsym(RTLD_NEXT, "select");
    state_port = env_int("VOLARY_BF_STATE_PORT", FW_STATE);
    rc_port = env_int("VOLARY_BF_RC_PORT", FW_RC);
    motor_port = env_int("VOLARY_BF_MOTOR_PORT", FW_MOTOR);
    send_port = env_int("VOLARY_BF_SEND_PORT", 0);
    tcp_base = env_int("VOLARY_BF_TCP_BASE", FW_TCP);
    lockstep = env_int("VOLARY_BF_LOCKSTEP", 0);
    tick_ns = (uint64_t)env_int("VOLARY_BF_TICK_NS", 1000);
    vt_ns = 1000000000ull; /* one second: the firmware subtracts its start time */
    horizon_ns = vt_ns + 1000ull * (uint64_t)env_int("VOLARY_BF_BOOT_US", 1000000);
    main_thread = pthread_self();
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the simulator that started it */
    setvbuf(stdout, NULL, _IOLBF, 0); /* the firmware's log, line by line */
}

static uint16_t mapped_port(uint16_t port, int stream)
{
    if (stream) {
        return (port > FW_TCP && port <= FW_TCP + 8) ? (uint16_t)(tcp_base + port - FW_TCP) : port;
    }
    if (port == FW_STATE) return (uint16_t)state_port;
    if (port == FW_RC) return (uint16_t)rc_port;
    return port;
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Motor packets and acknowledgements (both sent by the main thread) leave from one socket bound
 * to 127.0.0.1:send_port; the firmware exits if it cannot have that port. */
static ssize_t to_simulator(const void *buf, size_t n)
{
    struct sockaddr_in a = loopback(motor_port);
    if (out_fd < 0) {
        out_fd = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in me = loopback(send_port);
        if (out_fd < 0 || real_bind(out_fd, (const struct sockaddr *)&me, sizeof(me)) != 0) {
            fprintf(stderr, "volary shim: cannot bind 127.0.0.1:%d: %s\n", send_port,
                    strerror(errno));
            _exit(PORT_TAKEN);
        }
    }
    return real_sendto(out_fd, buf, n, 0, (const struct sockaddr *)&a, sizeof(a));
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        int type = 0;
        socklen_t tl = sizeof(type);
        memcpy(&a, addr, sizeof(a));
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl);
        uint16_t fw_port = ntohs(a.sin_port);
        a.sin_port = htons(mapped_port(fw_port, type == SOCK_STREAM));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never every interface */
        if (type == SOCK_DGRAM && fw_port == FW_STATE) state_fd = fd;
        if (type == SOCK_DGRAM && fw_port == FW_RC) rc_fd = fd;
        int got = real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
        if (got != 0 && errno == EADDRINUSE && ntohs(a.sin_port) != fw_port) {
            /* a port volary chose was taken between its choice and now: exit at once with
             * PORT_TAKEN, so volary starts this firmware again on other ports rather than
             * waiting out a firmware that never hears its state packets */
            fprintf(stderr, "volary shim: cannot bind 127.0.0.1:%d: %s\n", ntohs(a.sin_port),
                    strerror(errno));
            _exit(PORT_TAKEN);
        }
        return got;
    }
    return real_bind(fd, addr, len);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tl)
{
    if (to && to->sa_family == AF_INET && tl >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, to, sizeof(a));
        uint16_t port = ntohs(a.sin_port);
        if (port == FW_RAW) return (ssize_t)n; /* RealFlight's raw PWM: nobody listens */
        if (port == FW_MOTOR) return to_simulator(buf, n);
    }
    return real_sendto(fd, buf, n, flags, to, tl);
}

static void send_ack(double ts)
{
    unsigned char pkt[12];
    memcpy(pkt, "VLAK", 4);
    memcpy(pkt + 4, &ts, 8);
    to_simulator(pkt, sizeof(pkt));
}

/* Called with mu held: a step is released once its state and RC packets have both been applied.
 * The first state packet maps to the end of the boot time; later ones by their timestamps. */
static void try_release(void)
{
    if (steps_state > steps_released && steps_rc >= steps_state) {
        steps_released = steps_state;
        if (!have_origin) {
            have_origin = 1;
            origin_ts = pending_ts;
            origin_ns = atomic_load(&horizon_ns);
        }
        release_ts = pending_ts;
        double since = (pending_ts - origin_ts) * 1e9;
        uint64_t target = origin_ns + (since > 0 ? (uint64_t)(since + 0.5) : 0);
        if (target > atomic_load(&horizon_ns)) atomic_store(&horizon_ns, target);
        pthread_cond_broadcast(&cv);
    }
}

/* The main thread wants to move virtual time to `next`: block at the horizon until released,
 * acknowledging once per released step (and once when booted). */
static void advance_to(uint64_t next)
{
    if (next <= atomic_load(&horizon_ns)) {
        atomic_store(&vt_ns, next);
        return;
    }
    pthread_mutex_lock(&mu);
    while (next > atomic_load(&horizon_ns)) {
        uint64_t h = atomic_load(&horizon_ns);
        if (atomic_load(&vt_ns) < h) atomic_store(&vt_ns, h);
        if (!boot_acked) {
            boot_acked = 1;
            send_ack(-1.0); /* booted: ready for the first state packet */
        } else if (steps_acked < steps_released) {
            steps_acked = steps_released;
            send_ack(release_ts);
        }
        pthread_cond_wait(&cv, &mu);
    }
    atomic_store(&vt_ns, next);
    pthread_mutex_unlock(&mu);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    if (!lockstep || (clk != CLOCK_MONOTONIC && clk != CLOCK_MONOTONIC_RAW)) {
        return real_clock_gettime(clk, ts);
    }
    uint64_t t;
    if (pthread_equal(pthread_self(), main_thread)) {
        t = atomic_load(&vt_ns) + tick_ns;
        advance_to(t);
    } else {
        t = atomic_load(&vt_ns);
    }
    ts->tv_sec = (time_t)(t / 1000000000ull);
    ts->tv_nsec = (long)(t % 1000000000ull);
    return 0;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    if (!lockstep || !pthread_equal(pthread_self(), main_thread) || !req) {
        return real_nanosleep(req, rem);
    }
    uint64_t d = (uint64_t)req->tv_sec * 1000000000ull + (uint64_t)req->tv_nsec;
    advance_to(atomic_load(&vt_ns) + (d ? d : 1));
    if (rem) memset(rem, 0, sizeof(*rem));
    return 0;
}

/* Whether a datagram came from the simulator's socket. */
static int from_simulator(const struct sockaddr_in *src, socklen_t len)
{
    return len >= sizeof(*src) && src->sin_family == AF_INET &&
           src->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(src->sin_port) == motor_port;
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fl)
{
    if (fd != state_fd && fd != rc_fd) return real_recvfrom(fd, buf, n, flags, from, fl);
    /* Received into our own buffer first: what is not for the firmware never touches its. */
    unsigned char own[STATE_BYTES > RC_BYTES ? STATE_BYTES : RC_BYTES];
    size_t cap = n < sizeof(own) ? n : sizeof(own);
    struct sockaddr_in src;
    socklen_t sl = sizeof(src);
    memset(&src, 0, sizeof(src));
    ssize_t got = real_recvfrom(fd, own, cap, flags, (struct sockaddr *)&src, &sl);
    if (got < 0) return got;
    if (!from_simulator(&src, sl)) {
        errno = EAGAIN; /* someone else's datagram: not for the firmware, not counted */
        return -1;
    }
    if (lockstep && fd == rc_fd && got == NO_RC_BYTES && memcmp(own, "VLNR", 4) == 0) {
        pending_rc = 1; /* this step's RC, without a frame: the firmware keeps its last one */
        errno = EAGAIN;
        return -1;
    }
    memcpy(buf, own, (size_t)got);
    if (from && fl) {
        socklen_t k = *fl < sl ? *fl : sl;
        memcpy(from, &src, k);
        *fl = sl;
    }
    if (lockstep && fd == state_fd && got == STATE_BYTES) {
        double ts;
        memcpy(&ts, buf, 8);
        pthread_mutex_lock(&mu);
        pending_ts = ts;
        pthread_mutex_unlock(&mu);
        pending_state = 1;
    } else if (lockstep && fd == rc_fd && got == RC_BYTES) {
        pending_rc = 1;
    }
    return got;
}

/* A receiver thread back in select() has applied the packet it read last. */
int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    if (pending_state || pending_rc) {
        pthread_mutex_lock(&mu);
        if (pending_state) steps_state++;
        if (pending_rc) steps_rc++;
        pending_state = pending_rc = 0;
        try_release();
        pthread_mutex_unlock(&mu);
    }
    return real_select(nfds, r, w, e, tv);
}
