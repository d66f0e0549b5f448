/* SPDX-License-Identifier: GPL-2.0-only */
/* Socket addresses as the HTTP server compares them: which client a connection comes from. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

/* The client's IP address as 16 bytes, IPv4 as its IPv4-mapped IPv6 form so that a dual-stack
 * socket's view of an IPv4 client (::ffff:a.b.c.d) and an IPv4 socket's agree; *ret_port in
 * network order. false for anything that is not IP (AF_UNIX clients have no address). */
static inline bool sockaddr_ip_key(const struct sockaddr *sa, socklen_t len, uint8_t ret_key[16],
                                   uint16_t *ret_port)
{
        if (!sa)
                return false;
        if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
                memset(ret_key, 0, 10);
                ret_key[10] = ret_key[11] = 0xff;
                memcpy(ret_key + 12, &in->sin_addr, 4);
                *ret_port = in->sin_port;
                return true;
        }
        if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
                memcpy(ret_key, &in6->sin6_addr, 16);
                *ret_port = in6->sin6_port;
                return true;
        }
        return false;
}
