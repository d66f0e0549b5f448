/* SPDX-License-Identifier: GPL-2.0-only */
/* HTTPS for the HTTP server: the certificate, key and client CAs as GnuTLS credentials that profd
 * owns and swaps on SIGHUP, handed to each new libmicrohttpd connection, and the verification of
 * client certificates (mTLS). */
#pragma once

#include <microhttpd.h>
#include <stdio.h>

#include "http/auth-failure.h"
#include "util/macro.h"

typedef struct HttpTls HttpTls;

/* Told of each handshake refused for want of an acceptable client certificate (http-auth.c counts
 * them with the requests it refuses). */
typedef void (*http_tls_refused_t)(AuthFailure f, void *userdata);

/* Reads the PEM certificate (chain) and key, and the client CAs when client_ca_file is set (then
 * every connection must present a certificate they signed). A file that is missing, unusable,
 * or (the key) readable by every user is one log line and -errno. on_refused (may be NULL) is
 * called with userdata for every refused client certificate; userdata must outlive the object. */
int http_tls_new(const char *cert_file, const char *key_file, const char *client_ca_file,
                 http_tls_refused_t on_refused, void *userdata, HttpTls **ret);
/* After the HTTP server is stopped (connections hold references). */
HttpTls *http_tls_free(HttpTls *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpTls *, http_tls_free);

/* Re-reads the files (SIGHUP). New connections get the new credentials, open ones keep theirs; if
 * anything fails to load the current credentials stay, and the error is logged. */
int http_tls_reload(HttpTls *t);

/* For MHD_start_daemon(): MHD_USE_TLS, and the options (MHD_OPTION_ARRAY) to pass. t may be NULL
 * (plain HTTP: no flag, an empty array). */
unsigned http_tls_mhd_flags(const HttpTls *t);
const struct MHD_OptionItem *http_tls_mhd_options(HttpTls *t);
/* From MHD_OPTION_NOTIFY_CONNECTION: STARTED gives the connection the current credentials and
 * stores them in *slot, CLOSED releases them. Contract with the HTTP server: MHD's socket context
 * of the connection points at a struct whose first member is that slot (a void *), which is how
 * the handshake's verify function finds them. */
void http_tls_connection_notify(HttpTls *t, struct MHD_Connection *c, void **slot,
                                enum MHD_ConnectionNotificationCode code);
/* With --tls-client-ca: 0 if the connection's client certificate verifies, else -EACCES and the
 * reason in *ret_failure. Without client CAs: 0. */
int http_tls_check_client(HttpTls *t, struct MHD_Connection *c, AuthFailure *ret_failure);

/* "https" or "http", for links and log lines. */
const char *http_tls_scheme(const HttpTls *t);
/* Every family, also when t is NULL (TLS off). */
void http_tls_write_metrics(const HttpTls *t, FILE *f);
