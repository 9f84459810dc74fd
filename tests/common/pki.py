"""A throwaway certificate authority, made with the openssl command for each run, and a server
certificate it signs for the test's names (host names or IP literals). Whoever trusts it does
so only because a test says so: tests/net copies ca.pem into the box and points SSL_CERT_FILE
(and curl's and pip's variables) at it; tests/oci gives it to codebox's skopeo the same way."""
import ipaddress
import os
import shutil
import subprocess


def why_not_possible():
    """None when make() can work here, else what is missing (for a skip message)."""
    if shutil.which("openssl") is None:
        return "`openssl` is missing (apt-get install openssl)"
    return None


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])}: {r.stderr.strip()}")


def _san(name):
    try:
        ipaddress.ip_address(name)
        return f"IP:{name}"
    except ValueError:
        return f"DNS:{name}"


def make(directory, names, subject="codebox test CA"):
    """Writes ca.pem, server.pem and server.key into `directory`: a CA, and a certificate for
    every name in `names` signed by it. Returns (ca.pem, server.pem, server.key) paths."""
    os.makedirs(directory, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", f"/CN={subject}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr",
             "-subj", f"/CN={names[0]}", cwd=directory)
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectAltName=" + ",".join(_san(n) for n in names) + "\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
             cwd=directory)
    return tuple(os.path.join(directory, f) for f in ("ca.pem", "server.pem", "server.key"))
