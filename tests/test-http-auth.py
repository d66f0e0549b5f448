#!/usr/bin/env python3
"""Who may scrape, with real clients against the real profd: HTTPS with a throwaway CA (python's
ssl, curl, openssl s_client, go tool pprof), client certificates (mTLS) and the bearer token;
refusals counted on /metrics by reason; certificate, CA and token reloaded on SIGHUP while a
profile request is in flight; unusable files at start are one line and exit 2. Then what profiles
reveal: kernel frames are served by name with zero addresses unless --kernel-addresses.

Hostile clients (no certificate, another CA's certificate, no or a wrong token) run as nobody."""
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time

from profdtest import (PROFD, Daemon, check, fetch_profile, finish, go_env, log, pprof, require_bpf,
                       skip, tmpdir)

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# A kernel address on x86-64: the top half of the address space.
KERNEL_ADDRESS = re.compile(r"(?i)\b(?:0x)?ffff[89a-f][0-9a-f]{11}\b")


def kernel_addresses_in(text):
    """Kernel addresses in text, less the legacy vsyscall page ([vsyscall] in /proc/PID/maps), which
    is at 0xffffffffff600000 on every x86-64 machine and so reveals nothing."""
    return [a for a in KERNEL_ADDRESS.findall(text) if not re.match(r"(?i)(0x)?ffffffffff60[01]", a)]
TOKEN = "profd-test-token.0123456789abcdef"


def sh(*cmd, **kw):
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True, **kw)


class Pki:
    """A throwaway CA with server and client certificates, made with openssl."""

    def __init__(self, d):
        self.d = d
        os.chmod(d, 0o755)  # nobody reads the public parts and the hostile client's key

    def path(self, name):
        return os.path.join(self.d, name)

    def ca(self, name, cn):
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", self.path(name + ".key"), "-out", self.path(name + ".crt"), "-days", "2", "-subj", "/CN=" + cn)
        os.chmod(self.path(name + ".key"), 0o600)

    def leaf(self, name, ca, cn, ext, key_mode=0o600):
        with open(self.path(name + ".ext"), "w") as f:
            f.write(ext)
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", self.path(name + ".key"), "-out", self.path(name + ".csr"), "-subj", "/CN=" + cn)
        sh("openssl", "x509", "-req", "-in", self.path(name + ".csr"), "-CA", self.path(ca + ".crt"),
           "-CAkey", self.path(ca + ".key"), "-CAcreateserial", "-out", self.path(name + ".crt"), "-days", "1",
           "-extfile", self.path(name + ".ext"))
        os.chmod(self.path(name + ".key"), key_mode)
        return serial_of(self.path(name + ".crt"))


def serial_of(pem_path=None, der=None):
    if der is not None:
        r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                           capture_output=True, check=True)
        out = r.stdout.decode()
    else:
        out = sh("openssl", "x509", "-in", pem_path, "-noout", "-serial").stdout
    return out.strip().split("=", 1)[1].lower()


def context(ca, cert=None, key=None):
    c = ssl.create_default_context(cafile=ca)
    if cert:
        c.load_cert_chain(cert, key)
    return c


def https_get(port, path, ctx, token=None, timeout=120):
    """(status, headers, body) over a fresh connection, closed afterwards; raises when TLS fails."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def refused(port, path, ctx, token=None):
    """True when the TLS connection is refused (handshake or first read fails: no HTTP answer).
    A timeout is not a refusal: profd must say no, not hang."""
    try:
        st, _, _ = https_get(port, path, ctx, token, timeout=60)
        log("    (answered %d)" % st)
        return False
    except TimeoutError as e:
        log("    (timed out: %s)" % e)
        return False
    except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError) as e:
        log("    (refused: %s: %s)" % (type(e).__name__, e))
        return True


def peer_serial(port, ctx):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            return serial_of(der=t.getpeercert(binary_form=True))


def curl(*args, nobody=False):
    cmd = (NOBODY if nobody else []) + ["curl", "-sS", "--max-time", "60", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    log("    $ %s -> rc %d %s" % (" ".join(cmd[-3:]), r.returncode, (r.stdout + r.stderr).strip()[-200:]))
    return r


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def wait_for(what, cond, timeout=30):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return True
        time.sleep(0.05)
    return check(False, what)


def start_fails(args, want, what):
    """profd with args exits 2 at once, printing one line that contains want."""
    r = subprocess.run([PROFD, "--http-address", "127.0.0.1:1", *args], capture_output=True, text=True, timeout=30)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    log("    %s -> %d %r" % (what, r.returncode, lines))
    check(r.returncode == 2 and len(lines) == 1 and want in lines[0],
          "%s: exit 2 with one line naming it (%r)" % (what, want))


def pprof_raw(path_or_url, env=None):
    # -timeout: the wait for the answer (default 60 s), generous on a loaded machine.
    r = subprocess.run(["go", "tool", "pprof", "-timeout", "180", "-raw", path_or_url], capture_output=True, text=True,
                       env=env or go_env(), timeout=300)
    if r.returncode != 0:
        log(r.stderr[-2000:])
    return r


def kernel_frames(raw):
    """From go tool pprof -raw: the kernel mapping (start, limit, offset) and its locations
    [(address, name)]."""
    mapping, locs = None, []
    mid = None
    for m in re.finditer(r"^\s*(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) \[kernel\.kallsyms\]", raw, re.M):
        mid, mapping = m.group(1), tuple(int(m.group(i), 16) for i in (2, 3, 4))
    if mid is None:
        return None, []
    for m in re.finditer(r"^\s*\d+: 0x([0-9a-f]+) M=%s (\S+)" % mid, raw, re.M):
        locs.append((int(m.group(1), 16), m.group(2)))
    return mapping, locs


def spinner_dd():
    """A process that spends its time in read(2)/write(2): kernel stacks in every sample."""
    return subprocess.Popen(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=4000000000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    require_bpf()
    for tool in ("openssl", "curl", "setpriv"):
        if not shutil.which(tool):
            skip("%s is not installed (docs/debian-packages-tests.txt)" % tool)
    if not os.path.exists(PROFD):
        skip("profd is not built")

    pki = Pki(tmpdir())
    p = pki.path
    pki.ca("ca", "profd test CA 1")
    pki.ca("ca2", "profd test CA 2")
    server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    client_ext = "extendedKeyUsage=clientAuth\n"
    serial1 = pki.leaf("server", "ca", "localhost", server_ext)
    pki.leaf("client", "ca", "scraper", client_ext)
    # The hostile client's own material: readable by nobody, who runs it.
    pki.leaf("other", "ca2", "intruder", client_ext, key_mode=0o644)
    os.chmod(p("ca.crt"), 0o644)
    token_file = p("token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")  # the trailing newline is not part of the token
    os.chmod(token_file, 0o600)

    # -- Unusable files at start: one line, exit 2, before anything else happens.
    with open(p("garbage.crt"), "w") as f:
        f.write("not a certificate\n")
    start_fails(["--tls-cert", p("garbage.crt"), "--tls-key", p("server.key")], "--tls-cert", "garbage certificate")
    start_fails(["--tls-cert", p("server.crt"), "--tls-key", p("client.key")], "do not match", "key of another certificate")
    start_fails(["--tls-cert", p("server.crt"), "--tls-key", p("other.key")], "readable by every user",
                "world-readable key")
    start_fails(["--tls-cert", p("server.crt"), "--tls-key", p("nonexistent.key")], "--tls-key", "missing key")
    start_fails(["--tls-cert", p("server.crt"), "--tls-key", p("server.key"), "--tls-client-ca", p("garbage.crt")],
                "--tls-client-ca", "garbage client CA")
    start_fails(["--tls-cert", p("server.crt")], "--tls-key", "certificate without key")
    shutil.copy(token_file, p("open-token"))
    os.chmod(p("open-token"), 0o644)
    start_fails(["--auth-token-file", p("open-token")], "readable by every user", "world-readable token file")
    with open(p("empty-token"), "w") as f:
        f.write("\n")
    os.chmod(p("empty-token"), 0o600)
    start_fails(["--auth-token-file", p("empty-token")], "empty", "empty token file")

    good = context(p("ca.crt"), p("client.crt"), p("client.key"))
    no_cert = context(p("ca.crt"))
    # The server's own certificate (serverAuth only) signed by the right CA: not a client's.
    server_as_client = context(p("ca.crt"), p("server.crt"), p("server.key"))

    def healthz(port, timeout):
        return https_get(port, "/healthz", good, timeout=timeout)[0]

    args = ["--tls-cert", p("server.crt"), "--tls-key", p("server.key"), "--tls-client-ca", p("ca.crt"),
            "--auth-token-file", token_file]
    with Daemon(*args, healthz=healthz) as d:
        port = d.port
        url = "https://127.0.0.1:%d" % port

        def metrics():
            st, _, body = https_get(port, "/metrics", good, TOKEN)
            return body.decode() if st == 200 else ""

        def failures():
            m = metrics()
            return {r: metric(m, "profd_http_auth_failures_total", '{reason="%s"}' % r) for r in
                    ("token_missing", "token_malformed", "token_wrong", "client_certificate_missing",
                     "client_certificate_invalid")}

        m = metrics()
        check(metric(m, "profd_http_tls_enabled") == 1 and
              metric(m, "profd_http_tls_client_certificates_required") == 1 and
              metric(m, "profd_http_auth_token_required") == 1, "/metrics: TLS, client certificates, token on")
        expiry = metric(m, "profd_http_tls_certificate_expiry_timestamp_seconds") or 0
        check(time.time() < expiry < time.time() + 2 * 86400, "/metrics: certificate expiry %.0f" % expiry)

        # -- The right client, the right token: a profile.
        st, hdr, body = https_get(port, "/debug/pprof/profile?seconds=2", good, TOKEN)
        check(st == 200 and body[:2] == b"\x1f\x8b", "mTLS + token: profile 200, gzipped (%d, %d bytes)" % (st, len(body)))

        # -- Plain HTTP on the HTTPS port gets nothing.
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/healthz")
            st = c.getresponse().status
            check(False, "plain HTTP is refused (got %d)" % st)
        except TimeoutError:
            check(False, "plain HTTP is refused (timed out instead)")
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            check(True, "plain HTTP is refused (%s)" % type(e).__name__)

        # -- Client certificates: missing, another CA's, a server certificate: refused in the
        #    handshake, each counted.
        before = failures()
        check(refused(port, "/healthz", no_cert), "mTLS: no client certificate is refused (python ssl)")
        r = curl("--cacert", p("ca.crt"), url + "/healthz", nobody=True)
        # 28 would be curl's timeout: not a refusal.
        check(r.returncode not in (0, 28) and "ok" not in r.stdout,
              "mTLS: no client certificate is refused (curl as nobody)")
        r = curl("--cacert", p("ca.crt"), "--cert", p("other.crt"), "--key", p("other.key"),
                 "-H", "Authorization: Bearer " + TOKEN, url + "/metrics", nobody=True)
        check(r.returncode not in (0, 28) and "profd_" not in r.stdout,
              "mTLS: a certificate signed by another CA is refused, with the right token (curl as nobody)")
        check(refused(port, "/healthz", server_as_client),
              "mTLS: a certificate of the right CA without clientAuth usage is refused")
        after = failures()
        check(after["client_certificate_missing"] - before["client_certificate_missing"] == 2 and
              after["client_certificate_invalid"] - before["client_certificate_invalid"] == 2,
              "/metrics counts the refused certificates by reason: %s -> %s" % (before, after))

        # -- Bearer token: /healthz open, everything else needs it.
        before = failures()
        st, _, body = https_get(port, "/healthz", good)
        check(st == 200 and body == b"ok\n", "/healthz answers without a token")
        for path in ("/metrics", "/debug/pprof/profile?seconds=1", "/debug/pprof/flamegraph?seconds=1",
                     "/debug/pprof/", "/debug/pprof", "/debug/profd/process?pid=1", "/no/such/path"):
            st, hdr, body = https_get(port, path, good)
            check(st == 401 and hdr.get("www-authenticate", "").startswith("Bearer") and b"profd_" not in body,
                  "%s without a token: 401, WWW-Authenticate: %s" % (path, hdr.get("www-authenticate")))
        st, hdr, _ = https_get(port, "/metrics", good, "wrong-" + TOKEN)
        check(st == 401 and 'error="invalid_token"' in hdr.get("www-authenticate", ""),
              "wrong token: 401 invalid_token")
        st, _, _ = https_get(port, "/metrics", good, TOKEN[:-1])
        check(st == 401, "a prefix of the token: 401")
        st, _, _ = https_get(port, "/metrics", good, TOKEN + "x")
        check(st == 401, "the token and more: 401")
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=good, timeout=30)
        conn.request("GET", "/metrics", headers={"Authorization": "Basic " + TOKEN})
        r = conn.getresponse()
        r.read()
        conn.close()
        check(r.status == 401, "another scheme (Basic): 401")
        r = curl("--cacert", p("ca.crt"), "--cert", p("client.crt"), "--key", p("client.key"), "-o", "/dev/null",
                 "-w", "%{http_code}", url + "/metrics")
        check(r.stdout == "401", "curl without a token: 401")
        st, _, body = https_get(port, "/metrics", good, TOKEN)
        check(st == 200 and b"profd_http_auth_failures_total" in body, "right token: /metrics 200")
        after = failures()
        check(after["token_missing"] - before["token_missing"] == 8 and
              after["token_wrong"] - before["token_wrong"] == 3 and
              after["token_malformed"] - before["token_malformed"] == 1,
              "/metrics counts the refused tokens by reason: %s -> %s" % (before, after))
        m = metrics()
        check((metric(m, "profd_http_requests_total", '{endpoint="/metrics",code="401"}') or 0) >= 4,
              "profd_http_requests_total counts the 401s")

        # -- curl fetches a profile with certificate and token; go tool pprof reads it.
        cpu = os.path.join(tmpdir(), "cpu.pb.gz")
        r = curl("--cacert", p("ca.crt"), "--cert", p("client.crt"), "--key", p("client.key"),
                 "-H", "Authorization: Bearer " + TOKEN, "-o", cpu, "-w", "%{http_code}",
                 url + "/debug/pprof/profile?seconds=2")
        check(r.stdout == "200", "curl with certificate and token: 200")
        top = pprof("-top", cpu, check_rc=False)
        check(top.returncode == 0 and "Type: cpu" in top.stdout, "go tool pprof reads the profile curl fetched")

        # -- The CA names in the CertificateRequest (Go clients choose their certificate by them).
        s_client = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile", p("ca.crt"),
                                   "-cert", p("client.crt"), "-key", p("client.key")],
                                  input="", capture_output=True, text=True, timeout=30)
        check("profd test CA 1" in s_client.stdout.split("Acceptable client certificate CA names", 1)[-1][:400],
              "openssl s_client: the server asks for certificates of CA 1")

        # -- Reload on SIGHUP while a profile request is in flight.
        result = {}

        def inflight():
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=good, timeout=120)
            try:
                conn.connect()
                result["serial"] = serial_of(der=conn.sock.getpeercert(binary_form=True))
                conn.request("GET", "/debug/pprof/profile?seconds=5", headers={"Authorization": "Bearer " + TOKEN})
                r = conn.getresponse()
                result["status"], result["body"] = r.status, r.read()
            except Exception as e:  # reported below
                result["error"] = repr(e)
            finally:
                conn.close()

        t = threading.Thread(target=inflight)
        t.start()
        wait_for("the in-flight request started", lambda: "serial" in result)
        time.sleep(1)
        serial2 = pki.leaf("server2", "ca", "localhost", server_ext)
        check(serial2 != serial1, "a new server certificate: serial %s (was %s)" % (serial2, serial1))
        # Replaced the way a certificate manager does it: new files renamed over the old ones.
        for src, dst in (("server2.crt", "server.crt"), ("server2.key", "server.key")):
            shutil.copy2(p(src), p(dst) + ".new")
            os.rename(p(dst) + ".new", p(dst))
        d.proc.send_signal(signal.SIGHUP)
        wait_for("profd reloaded its certificate",
                 lambda: metric(metrics(), "profd_http_tls_reloads_total", '{result="ok"}') == 1)
        check(peer_serial(port, good) == serial2, "after SIGHUP a new connection gets the new certificate")
        check(metric(metrics(), "profd_http_tls_credential_generations") == 2,
              "the in-flight connection still holds the old credentials (2 generations)")
        t.join(150)
        check(result.get("status") == 200 and result.get("body", b"")[:2] == b"\x1f\x8b" and
              result.get("serial") == serial1,
              "the in-flight profile request completes, on the old certificate (%s)" %
              {k: v for k, v in result.items() if k != "body"})
        check(wait_for("old credentials released",
                       lambda: metric(metrics(), "profd_http_tls_credential_generations") == 1),
              "once that connection closed, only the current credentials remain")
        check(d.proc.poll() is None, "profd kept running through the reload")

        # -- A bad certificate at reload: the current one stays, the error is logged and counted.
        with open(p("server.crt"), "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
        d.proc.send_signal(signal.SIGHUP)
        wait_for("the failed reload is counted",
                 lambda: metric(metrics(), "profd_http_tls_reloads_total", '{result="failed"}') == 1)
        check(peer_serial(port, good) == serial2, "after a bad reload the certificate in force stays")
        d.logf.flush()
        with open(d.logpath) as f:
            text = f.read()
        check("Keeping the current TLS certificate" in text, "the bad reload is logged")

        # -- Client CA rotation: profd's --tls-client-ca file now holds CA 2. (The server's own
        #    certificate is still CA 1's: clients verify it with their own copy of CA 1.)
        shutil.copy2(p("server2.crt"), p("server.crt"))
        shutil.copy2(p("ca.crt"), p("server-ca.crt"))
        shutil.copy2(p("ca2.crt"), p("ca.crt.new"))
        os.rename(p("ca.crt.new"), p("ca.crt"))
        old_client = context(p("server-ca.crt"), p("client.crt"), p("client.key"))
        new_client = context(p("server-ca.crt"), p("other.crt"), p("other.key"))
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for("CA 2's client gets in", lambda: not refused_quiet(port, new_client)),
              "after rotating --tls-client-ca, CA 2's client is accepted")
        good = new_client
        check(metric(metrics(), "profd_http_tls_reloads_total", '{result="ok"}') == 2, "the CA reload is counted")
        check(refused(port, "/healthz", old_client), "and CA 1's client is refused")
        s_client = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile",
                                   p("server-ca.crt"), "-cert", p("other.crt"), "-key", p("other.key")],
                                  input="", capture_output=True, text=True, timeout=30)
        names = s_client.stdout.split("Acceptable client certificate CA names", 1)[-1][:400]
        check("profd test CA 2" in names and "profd test CA 1" not in names,
              "openssl s_client: the server now asks for certificates of CA 2")

        # -- Token reload: the new token in, the old one out; a world-readable file is refused.
        with open(token_file + ".new", "w") as f:
            f.write("second-token\n")
        os.chmod(token_file + ".new", 0o600)
        os.rename(token_file + ".new", token_file)
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for("the new token works", lambda: https_get(port, "/metrics", good, "second-token")[0] == 200),
              "after SIGHUP the new token is accepted")
        check(https_get(port, "/metrics", good, TOKEN)[0] == 401, "and the old token is refused")
        os.chmod(token_file, 0o644)
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for("the refused token file is counted", lambda: metric(
            https_get(port, "/metrics", good, "second-token")[2].decode(), "profd_http_auth_token_reloads_total",
            '{result="failed"}') == 1), "a world-readable token file at reload is refused and counted")
        check(https_get(port, "/metrics", good, "second-token")[0] == 200, "and the token in force stays")
        check(d.proc.poll() is None, "profd is still running")

    # -- HTTPS without client certificates or token; what kernel frames reveal by default.
    args = ["--tls-cert", p("server2.crt"), "--tls-key", p("server2.key")]
    server_only = context(p("server-ca.crt"))
    dd = spinner_dd()
    try:
        with Daemon(*args, healthz=lambda port, timeout: https_get(port, "/healthz", server_only,
                                                                      timeout=timeout)[0]) as d:
            url = "https://127.0.0.1:%d" % d.port
            env = go_env()
            env["SSL_CERT_FILE"] = p("server-ca.crt")  # go tool pprof trusts the system roots only
            r = pprof_raw(url + "/debug/pprof/profile?seconds=3&pid=%d" % dd.pid, env)
            check(r.returncode == 0, "go tool pprof fetches a profile over HTTPS (SSL_CERT_FILE = the CA)")
            mapping, locs = kernel_frames(r.stdout)
            log("kernel mapping %s, %d kernel locations, e.g. %s" % (mapping, len(locs), locs[:4]))
            check(mapping == (0, 0, 0), "default: the kernel mapping has no address range (%s)" % (mapping,))
            check(len(locs) > 0 and all(a == 0 for a, _ in locs) and
                  any("sys_" in n for _, n in locs) and not any(n.startswith("[unknown]") and "0x" in n for _, n in locs),
                  "default: kernel frames are named (e.g. %s) with address 0" % sorted({n for _, n in locs})[:5])
            for what, path in (("folded", "/debug/pprof/profile?seconds=2&format=folded&pid=%d" % dd.pid),
                               ("flame graph", "/debug/pprof/flamegraph?seconds=2&pid=%d" % dd.pid),
                               ("/metrics", "/metrics"), ("/debug/profd/process", "/debug/profd/process?pid=%d" % dd.pid),
                               ("index", "/debug/pprof/")):
                st, _, body = https_get(d.port, path, server_only)
                text = body.decode(errors="replace")
                hits = kernel_addresses_in(text)
                check(st == 200 and not hits, "%s: no kernel address in it (%s)" % (what, hits[:3] or "none"))
            st, _, body = https_get(d.port, "/debug/pprof/profile?seconds=2&format=folded&pid=%d" % dd.pid, server_only)
            check(b"_[k]" in body, "folded stacks still carry the kernel frames (by name)")
    finally:
        dd.kill()
        dd.wait()

    # -- --kernel-addresses: the real addresses, unless the kernel hides them from profd too.
    dd = spinner_dd()
    try:
        with Daemon("--kernel-addresses") as d:
            st, _, body = d.get("/metrics")
            hidden = metric(body.decode(), "profd_symbolizer_kallsyms_hidden")
            path = fetch_profile(d, 3, "&pid=%d" % dd.pid)
            mapping, locs = kernel_frames(pprof_raw(path).stdout)
            log("kernel mapping %s, %d kernel locations, e.g. %s" % (
                tuple(hex(x) for x in mapping) if mapping else None, len(locs), [(hex(a), n) for a, n in locs[:4]]))
            if hidden:
                log("NOT CHECKED: kptr_restrict hides kernel addresses from profd on this machine")
                check(mapping == (0, 0, 0), "--kernel-addresses under kptr_restrict: still no addresses")
            else:
                check(mapping is not None and mapping[0] >= 0xffff800000000000 and mapping[1] > mapping[0],
                      "--kernel-addresses: the kernel mapping spans kernel text")
                check(len(locs) > 0 and all(a >= 0xffff800000000000 for a, _ in locs) and
                      any("sys_" in n for _, n in locs),
                      "--kernel-addresses: kernel frames have their real addresses and names")
    finally:
        dd.kill()
        dd.wait()
    finish()


def refused_quiet(port, ctx):
    try:
        https_get(port, "/healthz", ctx, timeout=60)
        return False
    except TimeoutError:
        return False
    except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError):
        return True


if __name__ == "__main__":
    main()
