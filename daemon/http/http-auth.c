/* SPDX-License-Identifier: GPL-2.0-only */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http/http-auth.h"
#include "http/http-tls.h"
#include "util/config-file.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* A token is a line of printable ASCII; this is far more than any generator produces. */
#define TOKEN_MAX 4096

struct HttpAuth {
        char *token_file;
        char *token; /* NULL: no token required */
        size_t token_len;
        uint64_t failures[_AUTH_FAILURE_MAX];
        uint64_t reloads_ok, reloads_failed;
};

/* Reads and validates the token; logs why not. */
static int token_load(const char *path, char **ret, size_t *ret_len)
{
        struct stat st = {};
        char *buf = NULL;
        size_t n = 0;
        int r;

        r = config_file_read(path, TOKEN_MAX + 2, true, &buf, &n, &st);
        if (r == -EPERM)
                return log_error_errno(
                        r,
                        "--auth-token-file %s is readable by every user (mode %04o): run chmod "
                        "o-r on it (and keep it from the group too unless that is meant)",
                        path, (unsigned)(st.st_mode & 07777));
        if (r == -EINVAL)
                return log_error_errno(r, "--auth-token-file %s is not a regular file", path);
        if (r == -EFBIG)
                return log_error_errno(r, "--auth-token-file %s is larger than %d bytes: not a token", path,
                                       TOKEN_MAX);
        if (r < 0)
                return log_error_errno(r, "Cannot read --auth-token-file %s: %m", path);

        /* The content, less a trailing newline (echo, editors). */
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                buf[--n] = 0;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
                        config_file_free_secret(buf, n);
                        return log_error_errno(
                                -EINVAL,
                                "--auth-token-file %s: the token contains a space, line break or "
                                "non-ASCII byte (at offset %zu); clients could not send it",
                                path, i);
                }
        if (n == 0) {
                config_file_free_secret(buf, n);
                return log_error_errno(-EINVAL, "--auth-token-file %s is empty", path);
        }
        if (n > TOKEN_MAX) {
                config_file_free_secret(buf, n);
                return log_error_errno(-EFBIG, "--auth-token-file %s is larger than %d bytes: not a token",
                                       path, TOKEN_MAX);
        }
        *ret = buf;
        *ret_len = n;
        return 0;
}

int http_auth_new(const char *token_file, HttpAuth **ret)
{
        _cleanup_(http_auth_freep) HttpAuth *a = calloc(1, sizeof(*a));
        int r;

        if (!a)
                return log_error_errno(-ENOMEM, "Out of memory");
        if (token_file) {
                a->token_file = strdup(token_file);
                if (!a->token_file)
                        return log_error_errno(-ENOMEM, "Out of memory");
                r = token_load(a->token_file, &a->token, &a->token_len);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

HttpAuth *http_auth_free(HttpAuth *a)
{
        if (!a)
                return NULL;
        config_file_free_secret(a->token, a->token_len);
        free(a->token_file);
        free(a);
        return NULL;
}

int http_auth_reload(HttpAuth *a)
{
        char *token = NULL;
        size_t len = 0;
        int r;

        if (!a || !a->token_file)
                return 0;
        r = token_load(a->token_file, &token, &len);
        if (r < 0) {
                a->reloads_failed++;
                log_error("Keeping the previous bearer token: %s could not be used (see above)",
                          a->token_file);
                return r;
        }
        config_file_free_secret(a->token, a->token_len);
        a->token = token;
        a->token_len = len;
        a->reloads_ok++;
        log_info("Bearer token re-read from %s", a->token_file);
        return 0;
}

void http_auth_count(HttpAuth *a, AuthFailure f)
{
        if (a && f < _AUTH_FAILURE_MAX)
                a->failures[f]++;
}

void http_auth_count_handshake(AuthFailure f, void *userdata)
{
        http_auth_count(userdata, f);
}

/* The time taken depends on the expected token's length only, never on where the given one
 * differs or how long it is. */
static bool token_equal(const char *given, size_t given_len, const char *want, size_t want_len)
{
        unsigned char diff = given_len != want_len;
        for (size_t i = 0; i < want_len; i++)
                diff |= (unsigned char)(i < given_len ? given[i] : 0) ^ (unsigned char)want[i];
        return diff == 0;
}

/* RFC 6750 section 2.1: "Bearer" (any case), one or more spaces, the token. */
static int token_check(const HttpAuth *a, const char *header, AuthFailure *ret)
{
        if (!header) {
                *ret = AUTH_FAILURE_TOKEN_MISSING;
                return -EACCES;
        }
        if (strncasecmp(header, "Bearer ", 7) != 0) {
                *ret = AUTH_FAILURE_TOKEN_MALFORMED;
                return -EACCES;
        }
        const char *t = header + 7;
        while (*t == ' ')
                t++;
        size_t len = strlen(t);
        while (len > 0 && (t[len - 1] == ' ' || t[len - 1] == '\t'))
                len--;
        if (len == 0) {
                *ret = AUTH_FAILURE_TOKEN_MALFORMED;
                return -EACCES;
        }
        if (!token_equal(t, len, a->token, a->token_len)) {
                *ret = AUTH_FAILURE_TOKEN_WRONG;
                return -EACCES;
        }
        return 0;
}

static const char *peer_address(struct MHD_Connection *c, char *buf, size_t size)
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        snprintf(buf, size, "?");
        if (sa && sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)size);
        else if (sa && sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)size);
        return buf;
}

unsigned http_auth_check_request(HttpAuth *a, HttpTls *tls, struct MHD_Connection *c,
                                 const char **ret_reason, const char **ret_challenge)
{
        AuthFailure f;
        char peer[INET6_ADDRSTRLEN];

        *ret_reason = NULL;
        *ret_challenge = NULL;

        /* The handshake already refused connections without an acceptable client certificate;
         * this is the same verdict again, so that no request is ever served without one. */
        if (tls && http_tls_check_client(tls, c, &f) < 0) {
                http_auth_count(a, f);
                log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_NOTICE, 0,
                                           "Refused a request from %s: %s",
                                           peer_address(c, peer, sizeof(peer)), auth_failure_to_string(f));
                *ret_reason = "client certificate not accepted";
                return 403;
        }
        if (!a || !a->token)
                return 0;
        if (token_check(a, MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                        &f) >= 0)
                return 0;
        http_auth_count(a, f);
        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_NOTICE, 0,
                                   "Refused a request from %s: %s", peer_address(c, peer, sizeof(peer)),
                                   auth_failure_to_string(f));
        if (f == AUTH_FAILURE_TOKEN_MISSING) {
                *ret_reason = "this endpoint needs a bearer token: send 'Authorization: Bearer <token>' "
                              "(profd --auth-token-file)";
                *ret_challenge = "Bearer realm=\"profd\"";
        } else {
                *ret_reason = f == AUTH_FAILURE_TOKEN_WRONG ? "wrong bearer token"
                                                            : "malformed Authorization header: expected "
                                                              "'Bearer <token>'";
                *ret_challenge = "Bearer realm=\"profd\", error=\"invalid_token\"";
        }
        return 401;
}

void http_auth_write_metrics(const HttpAuth *a, FILE *f)
{
        static const uint64_t none[_AUTH_FAILURE_MAX];
        static const char *const results[] = {"ok", "failed"};
        const char *names[_AUTH_FAILURE_MAX];
        uint64_t reloads[] = {a ? a->reloads_ok : 0, a ? a->reloads_failed : 0};

        for (AuthFailure i = 0; i < _AUTH_FAILURE_MAX; i++)
                names[i] = auth_failure_to_string(i);
        metric_labelled(f, "profd_http_auth_failures_total", "counter",
                        "Requests and TLS handshakes refused, by reason.", "reason", names,
                        a ? a->failures : none, _AUTH_FAILURE_MAX);
        metric_gauge(f, "profd_http_auth_token_required",
                     "1 if every endpoint but /healthz needs the bearer token.", a && a->token ? 1 : 0);
        metric_labelled(f, "profd_http_auth_token_reloads_total", "counter",
                        "Re-reads of --auth-token-file on SIGHUP, by result (failed: the previous token "
                        "stays).",
                        "result", results, reloads, ELEMENTSOF(results));
}
