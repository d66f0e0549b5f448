/* SPDX-License-Identifier: GPL-2.0-only */
/* Who may read profiles: the bearer token (--auth-token-file), the per-request check that also
 * asks the TLS layer about client certificates, and the count of refusals by reason. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "http/auth-failure.h"
#include "util/macro.h"

struct MHD_Connection;
typedef struct HttpTls HttpTls;
typedef struct HttpAuth HttpAuth;

/* token_file NULL: no token is required (the object still counts client certificate refusals).
 * Otherwise the token is read now: a missing, empty, world-readable or unusable file is one log
 * line and -errno. */
int http_auth_new(const char *token_file, HttpAuth **ret);
HttpAuth *http_auth_free(HttpAuth *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpAuth *, http_auth_free);

/* Re-reads the token file (SIGHUP). On failure the previous token stays in force; logged. */
int http_auth_reload(HttpAuth *a);

void http_auth_count(HttpAuth *a, AuthFailure f);
/* http_tls_new()'s refusal callback (userdata: the HttpAuth): counts a refused TLS handshake. */
void http_auth_count_handshake(AuthFailure f, void *userdata);

/* May this request be served? 0 if so; else the status to answer (401: token, 403: client
 * certificate), with *ret_reason a line for the body and *ret_challenge the WWW-Authenticate
 * value (401 only). The refusal is counted and logged (rate-limited). tls may be NULL. */
unsigned http_auth_check_request(HttpAuth *a, HttpTls *tls, struct MHD_Connection *c,
                                 const char **ret_reason, const char **ret_challenge);

/* Always writes every family (zero when off), so dashboards and the man page see them all. */
void http_auth_write_metrics(const HttpAuth *a, FILE *f);
