"""deploy/compose.tls.yaml agrees with what it overlays: the certificate HAPROXY_CERT names is inside a
directory the overlay mounts from deploy/certs (where scripts/make-cert.sh is told to write bff.pem), and the
port it publishes is the one deploy/haproxy.cfg's TLS frontend binds by default. (No Docker engine here:
the files are checked against each other; ClusterHAProxyHTTP2Tests runs haproxy.cfg itself with TLS.)"""

import os
import posixpath
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load(name):
    with open(os.path.join(ROOT, "deploy", name)) as f:
        return yaml.safe_load(f)


def test_the_tls_overlay_mounts_the_certificate_haproxy_is_told_to_use_and_publishes_its_port():
    base = load("compose.yaml")["services"]["haproxy"]
    tls = load("compose.tls.yaml")["services"]["haproxy"]
    cert = tls["environment"]["HAPROXY_CERT"]
    mounts = [v.split(":") for v in base.get("volumes", []) + tls["volumes"]]
    holder = [m for m in mounts if posixpath.dirname(cert) == m[1]]
    assert holder, f"{cert} is in no mounted directory: {mounts}"
    assert holder[0][0] == "./certs" and holder[0][2:] == ["ro"], holder
    assert posixpath.basename(cert) == "bff.pem"
    with open(os.path.join(ROOT, "scripts", "make-cert.sh")) as f:
        assert '"$dir/bff.pem"' in f.read(), "make-cert.sh writes bff.pem"
    with open(os.path.join(ROOT, "deploy", "haproxy.cfg")) as f:
        bind = re.search(r'bind "\$\{HAPROXY_TLS_BIND-:(\d+)\}" ssl crt "\$\{HAPROXY_CERT\}" alpn h2,http/1\.1', f.read())
    assert bind, "haproxy.cfg's TLS frontend"
    assert f"{bind.group(1)}:{bind.group(1)}" in [str(p) for p in tls["ports"]]
    # The overlay adds to the base service; it does not replace its configuration mount.
    assert any(m[1] == "/usr/local/etc/haproxy/haproxy.cfg" for m in mounts)
