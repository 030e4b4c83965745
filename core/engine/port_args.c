#include "engine/port_args.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/curve.h"
#include "ipc/messages.h"

/* sun_path holds 108 bytes; keep every endpoint's path well inside it, with room for
 * the longest per-rank suffix. */
#define MAX_SOCKET_PATH 100
#define LONGEST_SOCKET_NAME "/detokenizer-in"
#define LONGEST_SUFFIX "-dp1023-tp1023"

/* tcp ports from port_base: the main process's status channel, the detokenizer's input,
 * then per replica its tp0's input, its plan channel, each rank's RPC and its tcp
 * communicator (used when its ranks are on different hosts). */
#define PORT_STATUS 0
#define PORT_DETOKENIZER 1
#define PORTS_BEFORE_REPLICAS 2
#define PORTS_PER_REPLICA(tp_size) ((tp_size) + 3)

/* host without "user@", resolved to a numeric address (IPv4 first). */
static int resolve_host(const char *listed, char *out, size_t out_bytes, struct cinfer_error *err)
{
    const char *at = strrchr(listed, '@');
    const char *host = at ? at + 1 : listed;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "launcher.hosts: host '%s' does not resolve: %s", host,
                                gai_strerror(rc));
    const struct addrinfo *pick = res;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    rc = getnameinfo(pick->ai_addr, pick->ai_addrlen, out, (socklen_t)out_bytes, NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(res);
    if (rc != 0)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "launcher.hosts: host '%s': %s", host, gai_strerror(rc));
    return CINFER_OK;
}

/* The address this machine reaches `peer` from (the kernel's route, found by a UDP
 * socket that connects and sends nothing). */
static int local_address_toward(const char *peer, char *out, size_t out_bytes, struct cinfer_error *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICHOST}, *res = NULL;
    int rc = getaddrinfo(peer, "9", &hints, &res);
    if (rc != 0)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "address %s: %s", peer, gai_strerror(rc));
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    rc = fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0 ||
         getsockname(fd, (struct sockaddr *)&local, &len) != 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    if (rc)
        return cinfer_error_set(err, CINFER_ERR_IO, "no route from this machine to %s: %s", peer, strerror(e));
    if (getnameinfo((struct sockaddr *)&local, len, out, (socklen_t)out_bytes, NULL, 0, NI_NUMERICHOST) != 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "the address toward %s has no name", peer);
    return CINFER_OK;
}

/* The kernel's range of ephemeral ports (outgoing connections, and listeners such as
 * MPI's daemons that bind port 0): [low, high]. */
static void ephemeral_ports(int *low, int *high)
{
    *low = 32768;
    *high = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (!f)
        return;
    int l, h;
    if (fscanf(f, "%d %d", &l, &h) == 2 && l > 0 && h >= l && h <= 65535) {
        *low = l;
        *high = h;
    }
    fclose(f);
}

/* With launcher.port_base unset: a base picked from the process id, outside the
 * ephemeral range, so a port the kernel handed to some connection or daemon is never
 * one the engine's workers then fail to bind ("Address already in use"). The larger
 * of the windows [10000, low) and (high, 65535] holds the engine's span of ports. */
static int default_port_base(int span)
{
    int low, high;
    ephemeral_ports(&low, &high);
    int first = 10000, last = low - span;              /* below the range */
    if (65535 - span - high > last - first) {          /* above it is wider */
        first = high + 1;
        last = 65535 - span;
    }
    if (last <= first)                                 /* no room outside: anywhere above 1024 */
        first = 1024, last = 65535 - span;
    int slots = (last - first) / 64 + 1;               /* bases 64 apart, one per process id */
    return first + (int)(getpid() % slots) * 64;
}

static int init_tcp(struct engine_endpoints *ep, const struct cinfer_server_args *args, struct cinfer_error *err)
{
    int ranks = ep->dp_size * ep->tp_size;
    ep->tcp = 1;
    ep->rank_address = calloc((size_t)ranks, sizeof *ep->rank_address);
    ep->rank_host = calloc((size_t)ranks, sizeof *ep->rank_host);
    if (!ep->rank_address || !ep->rank_host)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d ranks' addresses", ranks);
    int per_rank = args->hosts.count == ranks; /* else one host per replica */
    for (int i = 0; i < ranks; i++) {
        const char *listed = args->hosts.items[per_rank ? i : i / ep->tp_size];
        snprintf(ep->rank_host[i], sizeof ep->rank_host[i], "%s", listed);
        int rc = resolve_host(listed, ep->rank_address[i], sizeof ep->rank_address[i], err);
        if (rc)
            return rc;
    }
    const char *bind = args->bind_address && args->bind_address[0] ? args->bind_address : NULL;
    int bind_all = bind && (!strcmp(bind, "*") || !strcmp(bind, "0.0.0.0"));
    int rc = bind && !bind_all ? resolve_host(bind, ep->main_address, sizeof ep->main_address, err)
                               : local_address_toward(ep->rank_address[0], ep->main_address, sizeof ep->main_address,
                                                      err);
    if (rc) {
        cinfer_error_prefix(err, "launcher.bind_address");
        return rc;
    }
    snprintf(ep->main_bind, sizeof ep->main_bind, "%s", bind_all ? "*" : ep->main_address);
    int span = PORTS_BEFORE_REPLICAS + ep->dp_size * PORTS_PER_REPLICA(ep->tp_size);
    ep->port_base = args->port_base > 0 ? args->port_base : default_port_base(span);
    if (ep->port_base + span > 65535)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "launcher.port_base %d: the engine's %d ports would pass 65535", ep->port_base, span);
    return cinfer_curve_keys_generate(&ep->keys, err);
}

int cinfer_endpoints_init(struct engine_endpoints *ep, const char *run_dir, const struct cinfer_server_args *args,
                          int group_comm, struct cinfer_error *err)
{
    memset(ep, 0, sizeof *ep);
    ep->group_comm = group_comm;
    if (strlen(run_dir) + sizeof LONGEST_SOCKET_NAME + sizeof LONGEST_SUFFIX > MAX_SOCKET_PATH ||
        strlen(run_dir) >= sizeof ep->run_dir)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "run folder %s is too long for a unix socket path "
                                "(at most %d bytes with the socket name)",
                                run_dir, MAX_SOCKET_PATH);
    snprintf(ep->run_dir, sizeof ep->run_dir, "%s", run_dir);
    /* A shared-memory name is one path component: the run folder's own name makes it
     * unique to this engine. */
    const char *base = strrchr(run_dir, '/');
    snprintf(ep->comm_prefix, sizeof ep->comm_prefix, "/%.40s-comm", base ? base + 1 : run_dir);
    ep->dp_size = args->dp_size > 0 ? args->dp_size : 1;
    ep->tp_size = args->tp_size > 0 ? args->tp_size : 1;
    if (args->hosts.count > 0) {
        int rc = init_tcp(ep, args, err);
        if (rc) {
            cinfer_endpoints_free(ep);
            return rc;
        }
    }
    return CINFER_OK;
}

void cinfer_endpoints_free(struct engine_endpoints *ep)
{
    free(ep->rank_address);
    free(ep->rank_host);
    ep->rank_address = NULL;
    ep->rank_host = NULL;
}

static void tcp_endpoint(char *out, size_t out_bytes, const char *address, int port)
{
    /* an IPv6 address goes in brackets */
    snprintf(out, out_bytes, strchr(address, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", address, port);
}

/* 1 when every rank of the replica runs at the same address. */
static int replica_on_one_host(const struct engine_endpoints *ep, int dp_rank)
{
    for (int t = 1; t < ep->tp_size; t++)
        if (strcmp(ep->rank_address[dp_rank * ep->tp_size + t], ep->rank_address[dp_rank * ep->tp_size]))
            return 0;
    return 1;
}

/* The replica's communicator, as struct cinfer_port_args' comm spells it. */
static void replica_comm(const struct engine_endpoints *ep, int dp_rank, char *out, size_t out_bytes)
{
    if (ep->tp_size <= 1)
        out[0] = '\0';
    else if (ep->group_comm)
        snprintf(out, out_bytes, "%s", CINFER_COMM_GROUP);
    else if (!ep->tcp)
        snprintf(out, out_bytes, "%s-dp%d", ep->comm_prefix, dp_rank);
    else if (replica_on_one_host(ep, dp_rank))
        snprintf(out, out_bytes, "%s%s-dp%d", CINFER_COMM_SHM_BY_RANK0, ep->comm_prefix, dp_rank);
    else
        tcp_endpoint(out, out_bytes, ep->rank_address[dp_rank * ep->tp_size],
                     ep->port_base + PORTS_BEFORE_REPLICAS + dp_rank * PORTS_PER_REPLICA(ep->tp_size) + ep->tp_size +
                         2);
}

void cinfer_endpoints_of_worker(const struct engine_endpoints *ep, int role, int dp_rank, int tp_rank,
                                struct cinfer_port_args *out)
{
    memset(out, 0, sizeof *out);
    const char *dir = ep->run_dir;
    snprintf(out->run_dir, sizeof out->run_dir, "%s", dir);
    /* The detokenizer runs beside the main process, so its output stays on a unix socket. */
    snprintf(out->tokenizer_input, sizeof out->tokenizer_input, "ipc://%s/tokenizer-in", dir);
    if (ep->tcp) {
        tcp_endpoint(out->status, sizeof out->status, ep->main_address, ep->port_base + PORT_STATUS);
        /* the detokenizer binds its input where the main process binds (every interface
         * with bind_address "*"); the schedulers connect to the advertised address */
        tcp_endpoint(out->detokenizer_input, sizeof out->detokenizer_input,
                     role == CINFER_WORKER_DETOKENIZER ? ep->main_bind : ep->main_address,
                     ep->port_base + PORT_DETOKENIZER);
        memcpy(out->curve_server_public, ep->keys.curve_server_public, sizeof out->curve_server_public);
        memcpy(out->curve_server_secret, ep->keys.curve_server_secret, sizeof out->curve_server_secret);
        memcpy(out->curve_client_public, ep->keys.curve_client_public, sizeof out->curve_client_public);
        memcpy(out->curve_client_secret, ep->keys.curve_client_secret, sizeof out->curve_client_secret);
    } else {
        snprintf(out->status, sizeof out->status, "ipc://%s/status", dir);
        snprintf(out->detokenizer_input, sizeof out->detokenizer_input, "ipc://%s/detokenizer-in", dir);
    }
    if (role != CINFER_WORKER_SCHEDULER)
        return;
    replica_comm(ep, dp_rank, out->comm, sizeof out->comm);
    if (!ep->tcp) {
        snprintf(out->scheduler_input, sizeof out->scheduler_input, "ipc://%s/scheduler-in-dp%d", dir, dp_rank);
        snprintf(out->rpc, sizeof out->rpc, "ipc://%s/rpc-dp%d-tp%d", dir, dp_rank, tp_rank);
        snprintf(out->plan, sizeof out->plan, "ipc://%s/plan-dp%d", dir, dp_rank);
        return;
    }
    int replica_port = ep->port_base + PORTS_BEFORE_REPLICAS + dp_rank * PORTS_PER_REPLICA(ep->tp_size);
    const char *tp0 = ep->rank_address[dp_rank * ep->tp_size];
    tcp_endpoint(out->scheduler_input, sizeof out->scheduler_input, tp0, replica_port);
    tcp_endpoint(out->plan, sizeof out->plan, tp0, replica_port + 1);
    tcp_endpoint(out->rpc, sizeof out->rpc, ep->rank_address[dp_rank * ep->tp_size + tp_rank],
                 replica_port + 2 + tp_rank);
}

void cinfer_endpoints_status_bind(const struct engine_endpoints *ep, char *out, size_t out_bytes)
{
    if (ep->tcp)
        tcp_endpoint(out, out_bytes, ep->main_bind, ep->port_base + PORT_STATUS);
    else
        snprintf(out, out_bytes, "ipc://%s/status", ep->run_dir);
}

const char *cinfer_endpoints_host_of(const struct engine_endpoints *ep, int dp_rank, int tp_rank)
{
    return ep->tcp ? ep->rank_host[dp_rank * ep->tp_size + tp_rank] : NULL;
}
