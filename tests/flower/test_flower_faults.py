"""Flower deployment faults and security (slow: several minutes of real SuperLink/SuperNode processes).

* a SuperNode killed mid-run: its rounds complete with the other nodes, ``rounds.csv`` logs the failure in
  ``failed_clients``, and the node, started again, rejoins;
* TLS with self-signed certificates (made here with ``cryptography``) and SuperNode authentication.
"""

from __future__ import annotations

import csv
import datetime
import ipaddress
import json
import subprocess
from pathlib import Path

import pytest

from tests.support.flower_cluster import Cluster, wait_for

pytest.importorskip("flwr")
x509 = pytest.importorskip("cryptography.x509")

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

BASE = ["dataset=digits", "scenario=concept-swap", "model=logistic", "progress=false", "algorithm=fedavg"]


def _rounds(run_dir: Path) -> list[dict[str, str]]:
    path = run_dir / "rounds.csv"
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_killed_node_is_dropped_then_rejoins(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    out = tmp_path / "run"
    try:
        c.start_link()
        for i in range(5):
            c.start_node(i)
        serve = c.serve_async([*BASE, "num_clients=5", "rounds=6", f"out={out}", "flower.timeout=45",
                               "flower.min_clients=3"])
        wait_for(lambda: len(_rounds(out)) >= 1, 300, "round 1")
        c.stop("node4")  # crash: SIGTERM/SIGKILL to the SuperNode's process group
        wait_for(lambda: any(float(r["failed_clients"]) > 0 for r in _rounds(out)), 300, "a round without node 4")
        c.start_node(4)  # comes back: a new node id, greeted and mapped to partition 4 again
        assert serve.wait(timeout=600) == 0
    finally:
        c.close()
    rows = _rounds(out)
    assert [int(r["round"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    failed = [float(r["failed_clients"]) for r in rows]
    assert failed[0] == 0 and max(failed) == 1, failed  # only node 4's round(s) ran without it
    assert failed[-1] == 0, failed  # it rejoined before the end
    assert all(float(r["skipped"]) == 0 for r in rows)
    assert json.loads((out / "summary.json").read_text())["rounds"] == 6


def _self_signed(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA and a SuperLink certificate for 127.0.0.1 signed by it (PEM files)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedcluster test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP384R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp / "ca.pem", tmp / "server.pem", tmp / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


def _node_keys(tmp: Path, i: int) -> tuple[Path, Path]:
    """A SuperNode's authentication key pair (EC P-384, OpenSSH format)."""
    key = ec.generate_private_key(ec.SECP384R1())
    priv, pub = tmp / f"node{i}", tmp / f"node{i}.pub"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                  serialization.PublicFormat.OpenSSH))
    return priv, pub


@pytest.mark.slow
def test_tls_and_supernode_authentication(tmp_path: Path) -> None:
    c = Cluster(tmp_path, tls=_self_signed(tmp_path), extra_link=["--enable-supernode-auth"])
    out = tmp_path / "run"
    try:
        c.start_link()
        tls = c.security(False)
        for i in range(2):
            priv, pub = _node_keys(tmp_path, i)
            reg = c.run_cli(["flower", "register", str(pub), "--superlink", c.address, *tls], timeout=120)
            assert reg.returncode == 0, reg.stdout + reg.stderr
            c.start_node(i, ["--auth-private-key", str(priv)])
        stranger, _ = _node_keys(tmp_path, 9)  # a node whose key was never registered
        c.start_node(2, ["--auth-private-key", str(stranger)])
        res = c.serve([*BASE, "num_clients=3", "clients_per_round=2", "rounds=2", f"out={out}",
                       "flower.timeout=60", "flower.min_clients=2"], timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        rows = _rounds(out)
        assert len(rows) == 2
        # the unregistered node never joined: partition 2's rounds ran without it, when it was sampled
        try:  # a plain-HTTP client cannot talk to the TLS SuperLink: it fails or hangs
            insecure = c.run_cli(["flower", "serve", "--superlink", c.address, "--insecure", *BASE, "rounds=1",
                                  f"out={tmp_path / 'plain'}"], timeout=120)
            assert insecure.returncode != 0
        except subprocess.TimeoutExpired:
            pass
        assert not (tmp_path / "plain" / "rounds.csv").exists()
        node2 = (tmp_path / "node2.log").read_text(errors="replace")
        assert "Failed to activate SuperNode" in node2, node2[-2000:]  # the SuperLink refused its key
        assert c.procs["node2"].poll() not in (None, 0) and c.procs["node0"].poll() is None
    finally:
        c.close()
