/* SPDX-License-Identifier: GPL-2.0-only */
/* Why profd owns the GnuTLS credentials instead of giving libmicrohttpd the PEM files:
 *
 * MHD reads a certificate, key and trust list once, into credentials of its own, when its daemon
 * starts. Reloading through MHD would mean starting a second MHD daemon on the same listening
 * socket (MHD_quiesce_daemon) and draining the first, with two sets of loop sources and the
 * suspended profile requests of one daemon to finish while the other takes new ones.
 * MHD_OPTION_HTTPS_CERT_CALLBACK alone swaps the server certificate but not the client CAs, and
 * those matter beyond verification: the server names them in its CertificateRequest, and Go
 * clients (Alloy, Parca, go tool pprof) send only a certificate whose issuer is on that list.
 *
 * So each load of (certificate, key, client CAs) is a refcounted generation of credentials. When
 * MHD announces a new connection (MHD_CONNECTION_NOTIFY_STARTED: its TLS session exists, no byte
 * of the handshake has been read), the session is switched to the current generation, which the
 * connection holds until it closes. SIGHUP loads a new generation and makes it current: new
 * connections get it, open ones (a 300 s profile request included) keep theirs, and a generation
 * that fails to load never replaces the current one. MHD itself gets a certificate callback that
 * refuses every handshake: it is reached only by a session that somehow kept MHD's credentials.
 *
 * Client certificates are requested (GNUTLS_CERT_REQUEST) and checked by a verify function during
 * the handshake, which fails it when the certificate is missing or does not verify. REQUEST rather
 * than REQUIRE so that a missing certificate reaches that function and is counted by reason; it
 * is refused all the same. */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>
#include <gnutls/x509.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/http-tls.h"
#include "util/config-file.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* Certificate chains and CA bundles; the system's full CA bundle is about 200 KiB. */
#define PEM_FILE_MAX (1024 * 1024)
/* GnuTLS's defaults without TLS 1.0 and 1.1, which Debian 12's GnuTLS still offers; every scraper
 * (Go, curl, Python) speaks 1.2 and 1.3. */
#define TLS_PRIORITIES "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1"

typedef struct TlsCreds {
        unsigned n_ref;
        HttpTls *owner;
        gnutls_certificate_credentials_t cred;
        bool verify_clients;
        int64_t not_after; /* of the server certificate, seconds since the epoch */
        char serial[64];   /* hex */
} TlsCreds;

struct HttpTls {
        char *cert_file, *key_file, *client_ca_file;
        http_tls_refused_t on_refused;
        void *refused_userdata;
        TlsCreds *current;
        unsigned n_generations; /* alive: current + older ones still held by connections */
        uint64_t reloads_ok, reloads_failed;
        struct MHD_OptionItem mhd_options[3];
};

static void creds_unref(TlsCreds *c)
{
        if (!c || --c->n_ref > 0)
                return;
        c->owner->n_generations--;
        gnutls_certificate_free_credentials(c->cred);
        free(c);
}

/* Serial and expiry of the served certificate, for logs and /metrics. */
static void creds_describe(TlsCreds *c, gnutls_x509_crt_t crt, char *subject, size_t subject_size)
{
        unsigned char serial[32];
        size_t serial_size = sizeof(serial), n = subject_size;

        c->not_after = (int64_t)gnutls_x509_crt_get_expiration_time(crt);
        if (gnutls_x509_crt_get_serial(crt, serial, &serial_size) >= 0)
                for (size_t i = 0; i < serial_size && 2 * i + 2 < sizeof(c->serial); i++)
                        snprintf(c->serial + 2 * i, 3, "%02x", serial[i]);
        if (gnutls_x509_crt_get_dn(crt, subject, &n) < 0)
                snprintf(subject, subject_size, "?");
}

static void crt_list_free(gnutls_x509_crt_t *list, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                gnutls_x509_crt_deinit(list[i]);
        gnutls_free(list);
}

/* One generation from the files; logs what is wrong with them. */
static int creds_load(HttpTls *t, TlsCreds **ret)
{
        char *cert = NULL, *key = NULL, *ca = NULL;
        size_t cert_size = 0, key_size = 0, ca_size = 0;
        struct stat st = {};
        TlsCreds *c = NULL;
        gnutls_x509_crt_t *chain = NULL, *cas = NULL;
        unsigned n_chain = 0, n_cas = 0;
        gnutls_x509_privkey_t pkey = NULL;
        int r;

        r = config_file_read(t->cert_file, PEM_FILE_MAX, false, &cert, &cert_size, NULL);
        if (r < 0) {
                log_error_errno(r, "Cannot read --tls-cert %s: %s", t->cert_file,
                                r == -EINVAL ? "not a regular file" : strerror(-r));
                goto out;
        }
        r = config_file_read(t->key_file, PEM_FILE_MAX, true, &key, &key_size, &st);
        if (r == -EPERM) {
                log_error_errno(r, "--tls-key %s is readable by every user (mode %04o): run chmod o-r on it",
                                t->key_file, (unsigned)(st.st_mode & 07777));
                goto out;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot read --tls-key %s: %s", t->key_file,
                                r == -EINVAL ? "not a regular file" : strerror(-r));
                goto out;
        }
        if (t->client_ca_file) {
                r = config_file_read(t->client_ca_file, PEM_FILE_MAX, false, &ca, &ca_size, NULL);
                if (r < 0) {
                        log_error_errno(r, "Cannot read --tls-client-ca %s: %s", t->client_ca_file,
                                        r == -EINVAL ? "not a regular file" : strerror(-r));
                        goto out;
                }
        }

        /* GnuTLS's own words for these ("The requested data were not available.") name no file. */
        if (!strstr(cert, "-----BEGIN CERTIFICATE-----")) {
                r = log_error_errno(-EINVAL,
                                    "--tls-cert %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                                    t->cert_file);
                goto out;
        }
        if (strstr(key, "-----BEGIN ENCRYPTED PRIVATE KEY-----") || strstr(key, "Proc-Type: 4,ENCRYPTED")) {
                r = log_error_errno(-EINVAL,
                                    "--tls-key %s is encrypted: profd needs the key unencrypted "
                                    "(protect it with the file's permissions)",
                                    t->key_file);
                goto out;
        }
        if (!strstr(key, "PRIVATE KEY-----")) {
                r = log_error_errno(-EINVAL,
                                    "--tls-key %s holds no PEM private key (-----BEGIN PRIVATE KEY-----)",
                                    t->key_file);
                goto out;
        }
        if (ca && !strstr(ca, "-----BEGIN CERTIFICATE-----")) {
                r = log_error_errno(-EINVAL, "--tls-client-ca %s holds no PEM certificate",
                                    t->client_ca_file);
                goto out;
        }

        c = calloc(1, sizeof(*c));
        if (!c || gnutls_certificate_allocate_credentials(&c->cred) < 0) {
                free(c);
                c = NULL;
                r = log_error_errno(-ENOMEM, "Out of memory for TLS credentials");
                goto out;
        }
        c->owner = t;
        c->n_ref = 1;
        t->n_generations++;

        /* Parsed here rather than with gnutls_certificate_set_x509_key_mem2(), which leaks the
         * certificate it was parsing when the PEM is corrupt (GnuTLS 3.7.9): a reload with a bad
         * file must cost nothing. */
        gnutls_datum_t cd = {(unsigned char *)cert, (unsigned)cert_size};
        r = gnutls_x509_crt_list_import2(&chain, &n_chain, &cd, GNUTLS_X509_FMT_PEM, 0);
        if (r >= 0 && n_chain == 0)
                r = GNUTLS_E_NO_CERTIFICATE_FOUND;
        if (r < 0) {
                log_error("Cannot use --tls-cert %s: %s", t->cert_file, gnutls_strerror(r));
                r = -EINVAL;
                goto out;
        }
        gnutls_datum_t kd = {(unsigned char *)key, (unsigned)key_size};
        r = gnutls_x509_privkey_init(&pkey);
        if (r >= 0)
                r = gnutls_x509_privkey_import2(pkey, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
        if (r < 0) {
                log_error("Cannot use --tls-key %s: %s", t->key_file, gnutls_strerror(r));
                r = -EINVAL;
                goto out;
        }
        /* Copies both, and checks that the key belongs to the certificate. */
        r = gnutls_certificate_set_x509_key(c->cred, chain, n_chain, pkey);
        if (r < 0) {
                log_error("Cannot use --tls-cert %s with --tls-key %s: %s", t->cert_file, t->key_file,
                          gnutls_strerror(r));
                r = -EINVAL;
                goto out;
        }
        if (ca) {
                gnutls_datum_t ad = {(unsigned char *)ca, (unsigned)ca_size};
                r = gnutls_x509_crt_list_import2(&cas, &n_cas, &ad, GNUTLS_X509_FMT_PEM, 0);
                if (r >= 0)
                        r = gnutls_certificate_set_x509_trust(c->cred, cas, n_cas);
                if (r <= 0) {
                        log_error("Cannot use --tls-client-ca %s: %s", t->client_ca_file,
                                  r < 0 ? gnutls_strerror(r) : "no PEM certificate in it");
                        r = -EINVAL;
                        goto out;
                }
                c->verify_clients = true;
        }

        char subject[256];
        creds_describe(c, chain[0], subject, sizeof(subject));
        time_t now = time(NULL), na = (time_t)c->not_after;
        struct tm tm;
        char until[64] = "?";
        if (c->not_after > 0)
                strftime(until, sizeof(until), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&na, &tm));
        if (c->not_after > 0 && c->not_after < (int64_t)now)
                log_warning("TLS certificate %s (%s) EXPIRED on %s: clients will refuse it", t->cert_file,
                            subject, until);
        log_info("TLS certificate %s: %s, serial %s, valid until %s%s", t->cert_file, subject, c->serial,
                 until, c->verify_clients ? "; client certificates required" : "");
        *ret = TAKE_PTR(c);
        r = 0;
out:
        creds_unref(c);
        crt_list_free(chain, n_chain);
        crt_list_free(cas, n_cas);
        if (pkey)
                gnutls_x509_privkey_deinit(pkey);
        free(cert);
        config_file_free_secret(key, key_size);
        free(ca);
        return r;
}

/* Installed into MHD's own credentials: refuses every handshake that did not get profd's. */
static gnutls_certificate_retrieve_function2 refuse_handshake; /* the type MHD passes on */
static int refuse_handshake(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                            const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                            gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
        log_error_errno_ratelimited(-EPROTO, "A TLS connection did not get profd's credentials; refused");
        return -1;
}

HttpTls *http_tls_free(HttpTls *t)
{
        if (!t)
                return NULL;
        creds_unref(t->current);
        if (t->n_generations > 0)
                log_warning("%u TLS credential generation(s) still referenced at exit", t->n_generations);
        free(t->cert_file);
        free(t->key_file);
        free(t->client_ca_file);
        free(t);
        return NULL;
}

int http_tls_new(const char *cert_file, const char *key_file, const char *client_ca_file,
                 http_tls_refused_t on_refused, void *userdata, HttpTls **ret)
{
        _cleanup_(http_tls_freep) HttpTls *t = NULL;
        int r;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
            MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)
                return log_error_errno(-EOPNOTSUPP, "This libmicrohttpd was built without TLS (GnuTLS): "
                                                    "--tls-cert cannot be used");
        t = calloc(1, sizeof(*t));
        if (!t)
                return log_error_errno(-ENOMEM, "Out of memory");
        t->on_refused = on_refused;
        t->refused_userdata = userdata;
        t->cert_file = strdup(cert_file);
        t->key_file = strdup(key_file);
        t->client_ca_file = client_ca_file ? strdup(client_ca_file) : NULL;
        if (!t->cert_file || !t->key_file || (client_ca_file && !t->client_ca_file))
                return log_error_errno(-ENOMEM, "Out of memory");
        r = creds_load(t, &t->current);
        if (r < 0)
                return r;
        t->mhd_options[0] =
                (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)refuse_handshake};
        t->mhd_options[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES};
        t->mhd_options[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        *ret = TAKE_PTR(t);
        return 0;
}

int http_tls_reload(HttpTls *t)
{
        TlsCreds *c = NULL;
        int r;

        if (!t)
                return 0;
        r = creds_load(t, &c);
        if (r < 0) {
                t->reloads_failed++;
                log_error("Keeping the current TLS certificate (serial %s): the new files could not be "
                          "used (see above)",
                          t->current->serial);
                return r;
        }
        creds_unref(t->current);
        t->current = c;
        t->reloads_ok++;
        return 0;
}

unsigned http_tls_mhd_flags(const HttpTls *t)
{
        return t ? MHD_USE_TLS : 0;
}

const struct MHD_OptionItem *http_tls_mhd_options(HttpTls *t)
{
        static const struct MHD_OptionItem none[] = {{MHD_OPTION_END, 0, NULL}};
        return t ? t->mhd_options : none;
}

static int client_verdict(gnutls_session_t session, AuthFailure *ret_failure, char *why, size_t why_size)
{
        /* The certificate must also be meant for TLS clients (extended key usage, when it has one):
         * a server's certificate signed by the same CA is not a client's. */
        gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                         .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
        unsigned status = 0;
        gnutls_datum_t text;

        int r = gnutls_certificate_verify_peers(session, &purpose, 1, &status);
        if (r == GNUTLS_E_NO_CERTIFICATE_FOUND) {
                *ret_failure = AUTH_FAILURE_CLIENT_CERT_MISSING;
                snprintf(why, why_size, "no client certificate");
                return -EACCES;
        }
        if (r < 0) {
                *ret_failure = AUTH_FAILURE_CLIENT_CERT_INVALID;
                snprintf(why, why_size, "%s", gnutls_strerror(r));
                return -EACCES;
        }
        if (status != 0) {
                *ret_failure = AUTH_FAILURE_CLIENT_CERT_INVALID;
                if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) >= 0) {
                        snprintf(why, why_size, "%s", (const char *)text.data);
                        gnutls_free(text.data);
                } else
                        snprintf(why, why_size, "status 0x%x", status);
                return -EACCES;
        }
        return 0;
}

/* The session's verify function: runs inside the handshake, a non-zero return fails it. */
static int verify_client(gnutls_session_t session)
{
        /* MHD makes the connection the session's pointer; the socket context's first member is the
         * generation (set in http_tls_connection_notify). Without either: refuse. */
        struct MHD_Connection *conn = gnutls_session_get_ptr(session);
        const union MHD_ConnectionInfo *ci =
                conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
        TlsCreds *c = ci && ci->socket_context ? *(TlsCreds **)ci->socket_context : NULL;
        AuthFailure f;
        char why[256];

        if (!c)
                return -1;
        if (client_verdict(session, &f, why, sizeof(why)) >= 0)
                return 0;
        if (c->owner->on_refused)
                c->owner->on_refused(f, c->owner->refused_userdata);
        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_NOTICE, 0,
                                   "Refused a TLS handshake: %s: %s", auth_failure_to_string(f), why);
        return -1;
}

void http_tls_connection_notify(HttpTls *t, struct MHD_Connection *conn, void **slot,
                                enum MHD_ConnectionNotificationCode code)
{
        if (!t)
                return;
        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                creds_unref(*slot);
                *slot = NULL;
                return;
        }
        if (code != MHD_CONNECTION_NOTIFY_STARTED)
                return;

        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        gnutls_session_t session = ci ? ci->tls_session : NULL;
        TlsCreds *c = t->current;
        if (!session)
                return; /* the handshake meets refuse_handshake() */
        int r = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, c->cred);
        if (r < 0) {
                log_error_errno_ratelimited(-EPROTO, "Cannot give a TLS connection its credentials: %s",
                                            gnutls_strerror(r));
                return;
        }
        if (c->verify_clients) {
                gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST);
                gnutls_session_set_verify_function(session, verify_client);
        }
        c->n_ref++;
        *slot = c;
}

int http_tls_check_client(HttpTls *t, struct MHD_Connection *conn, AuthFailure *ret_failure)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        const union MHD_ConnectionInfo *si =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        TlsCreds *c = ci && ci->socket_context ? *(TlsCreds **)ci->socket_context : NULL;
        char why[256];

        if (!t)
                return 0;
        if (!c || !si) {
                /* Not a connection this module set up: never served. */
                *ret_failure = AUTH_FAILURE_CLIENT_CERT_INVALID;
                return -EACCES;
        }
        if (!c->verify_clients)
                return 0;
        return client_verdict(si->tls_session, ret_failure, why, sizeof(why));
}

const char *http_tls_scheme(const HttpTls *t)
{
        return t ? "https" : "http";
}

void http_tls_write_metrics(const HttpTls *t, FILE *f)
{
        static const char *const results[] = {"ok", "failed"};
        uint64_t reloads[] = {t ? t->reloads_ok : 0, t ? t->reloads_failed : 0};

        metric_gauge(f, "profd_http_tls_enabled", "1 if HTTP is served over TLS (--tls-cert).", t ? 1 : 0);
        metric_gauge(f, "profd_http_tls_client_certificates_required",
                     "1 if every connection must present a certificate signed by --tls-client-ca.",
                     t && t->current->verify_clients ? 1 : 0);
        metric_labelled(f, "profd_http_tls_reloads_total", "counter",
                        "Re-reads of the certificate, key and client CAs on SIGHUP, by result (failed: the "
                        "current ones stay).",
                        "result", results, reloads, ELEMENTSOF(results));
        metric_gauge(f, "profd_http_tls_credential_generations",
                     "Loaded credential sets: the current one plus older ones still used by open "
                     "connections (at most one per connection).",
                     t ? t->n_generations : 0);
        metric_family(f, "profd_http_tls_certificate_expiry_timestamp_seconds", "gauge",
                      "When the served certificate expires (absent without TLS).");
        if (t && t->current->not_after > 0)
                metric_sample(f, "profd_http_tls_certificate_expiry_timestamp_seconds", NULL,
                              (uint64_t)t->current->not_after);
}
