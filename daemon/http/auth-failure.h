/* SPDX-License-Identifier: GPL-2.0-only */
/* Why a request or a TLS handshake was refused: what http-tls.c (client certificates) and
 * http-auth.c (the bearer token) report, and the reason label of profd_http_auth_failures_total. */
#pragma once

typedef enum AuthFailure {
        AUTH_FAILURE_TOKEN_MISSING,   /* no Authorization header */
        AUTH_FAILURE_TOKEN_MALFORMED, /* not "Bearer <token>" */
        AUTH_FAILURE_TOKEN_WRONG,     /* another token */
        AUTH_FAILURE_CLIENT_CERT_MISSING,
        AUTH_FAILURE_CLIENT_CERT_INVALID, /* not signed by --tls-client-ca, expired, wrong purpose */
        _AUTH_FAILURE_MAX,
} AuthFailure;

static inline const char *auth_failure_to_string(AuthFailure f)
{
        static const char *const failure_names[_AUTH_FAILURE_MAX] = {
                [AUTH_FAILURE_TOKEN_MISSING] = "token_missing",
                [AUTH_FAILURE_TOKEN_MALFORMED] = "token_malformed",
                [AUTH_FAILURE_TOKEN_WRONG] = "token_wrong",
                [AUTH_FAILURE_CLIENT_CERT_MISSING] = "client_certificate_missing",
                [AUTH_FAILURE_CLIENT_CERT_INVALID] = "client_certificate_invalid",
        };
        return f < _AUTH_FAILURE_MAX ? failure_names[f] : "unknown";
}
