"""``fedcluster flower simulate | serve | node``: build and start a Flower run from a fedcluster config.

* ``simulate CONFIG [key=value ...]`` — Flower's Simulation Runtime (Ray backend) in this process, one
  virtual SuperNode per client, ``--gpu-fraction`` of a GPU per client when one is present.
* ``serve CONFIG [key=value ...] --superlink HOST:PORT`` — writes a Flower app for the config and submits it
  with ``flwr run`` to a running ``flower-superlink``; returns when the run ends.
* ``node --superlink HOST:PORT --partition-id N`` — starts a ``flower-supernode`` that serves partition N.
* ``register PUBLIC_KEY --superlink HOST:PORT`` — registers a node's key (SuperNode authentication).

Besides the run's keys, ``flower.min_clients`` and ``flower.timeout`` set the fault tolerance (see
:class:`~fedcluster.flower.server.FlowerOptions`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fedcluster.config.bounds import MAX_WAIT_SECONDS, RUN_BOUNDS
from fedcluster.errors import UserError
from fedcluster.flower.process import (
    DEFAULT_NODE_PORT,
    check_port_free,
    run_forwarding_signals,
    split_address,
    wait_for_superlink,
)

MAX_CPUS_PER_CLIENT = 1024  # more cores than one machine has
MAX_PARTITIONS = RUN_BOUNDS["num_clients"]  # a partition id names one of a run's clients
TASK_POLL_SECONDS = 0.2  # FLWR_SUPEREXEC_TASK_POLL_INTERVAL for a node's SuperExec unless set
FLOWER_KEYS_HELP = """\
keys besides the run's (fedcluster run --help):
  flower.min_clients=N   fewest clients a round may run with; a round left with fewer after its failed
                         clients are dropped is skipped, the models unchanged (default 1)
  flower.timeout=SECONDS how long the server waits for each reply before it counts the client as failed
                         and replays the round without it (default 600)

example: fedcluster flower serve configs/flower-ifca-digits.yaml flower.min_clients=4 flower.timeout=120 \\
             --superlink HOST:8000 --root-certificates ca.pem"""


def add_parser(sub: Any) -> None:
    """Register ``fedcluster flower ...`` on the main parser's subcommands."""
    fl = sub.add_parser("flower", help="run a method on Flower: simulate | serve | node | register")
    fsub = fl.add_subparsers(dest="flower_command", required=True)
    sim = fsub.add_parser("simulate", help="Flower simulation (Ray): simulate [CONFIG] [key=value ...]",
                          epilog=FLOWER_KEYS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sim.add_argument("items", nargs="*", metavar="CONFIG.yaml | key=value")
    sim.add_argument("--gpu-fraction", type=float, default=None,
                     help="GPU share per virtual client (default: 1/cohort size when a GPU is present, else 0)")
    sim.add_argument("--cpus-per-client", type=float, default=1.0)
    sim.set_defaults(fn=cmd_simulate)
    srv = fsub.add_parser("serve", help="submit a run to a SuperLink: fedcluster flower serve [CONFIG] [key=value ...]",
                          epilog=FLOWER_KEYS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    srv.add_argument("items", nargs="*", metavar="CONFIG.yaml | key=value")
    srv.add_argument("--superlink", default="127.0.0.1:8000", help="SuperLink address host:port")
    _tls_args(srv)
    srv.set_defaults(fn=cmd_serve)
    nd = fsub.add_parser("node", help="start a SuperNode serving one partition of the federation")
    nd.add_argument("--superlink", default="127.0.0.1:8000", help="SuperLink address host:port")
    nd.add_argument("--partition-id", type=int, required=True, help="the client this node holds (0-based)")
    nd.add_argument("--port", type=int, default=None,
                    help=f"this node's local port for its ClientApps (default {DEFAULT_NODE_PORT}); every node on "
                         "one machine needs its own")
    nd.add_argument("--connect-timeout", type=float, default=120.0, metavar="SECONDS",
                    help="give up with an error when the SuperLink cannot be reached for this long, at the start "
                         "or after losing it during a run (default 120)")
    nd.add_argument("--no-warm-worker", action="store_true",
                    help="let every ClientApp process import PyTorch and build the partition itself (Flower's "
                         "default) instead of handing the work to this process, which keeps them ready")
    nd.add_argument("--auth-private-key", default=None,
                    help="SuperNode authentication: this node's EC private key (PEM); its public key must be "
                         "registered first (fedcluster flower register)")
    _tls_args(nd)
    nd.set_defaults(fn=cmd_node)
    rg = fsub.add_parser("register", help="register a SuperNode's public key with a SuperLink that runs with "
                                          "--enable-supernode-auth")
    rg.add_argument("public_key", help="the node's EC public key (OpenSSH format, NIST curve)")
    rg.add_argument("--superlink", default="127.0.0.1:8000", help="SuperLink address host:port")
    _tls_args(rg)
    rg.set_defaults(fn=cmd_register)


def _tls_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--insecure", action="store_true", help="plain HTTP (loopback tests only)")
    g.add_argument("--root-certificates", default=None, help="CA certificate (PEM) that signed the SuperLink's")


def split_options(items: list[str]) -> tuple[str | None, list[str], Any]:
    """The optional CONFIG, the run's key=value overrides and the ``flower.*`` options."""
    from fedcluster.config.run_config import coerce, parse_value
    from fedcluster.flower.server import FlowerOptions

    path = items[0] if items and "=" not in items[0] else None
    overrides, opts = [], {}
    for item in items[1:] if path else items:
        key, sep, text = item.partition("=")
        if not sep:
            raise UserError(f"argument {item!r} is not of the form key=value (only the first argument may be "
                            "a config file)")
        if key.startswith("flower."):
            name = key[7:]
            if name not in FlowerOptions.__dataclass_fields__:
                raise UserError(f"unknown key {key!r}; valid: flower.min_clients, flower.timeout")
            hint = {"min_clients": int, "timeout": float}[name]
            opts[name] = coerce(parse_value(text), hint, key)
        else:
            overrides.append(item)
    try:
        return path, overrides, FlowerOptions(**opts)
    except ValueError as e:
        raise UserError(str(e)) from None


def resolved_yaml(path: str | None, overrides: list[str]) -> tuple[str, Any]:
    """The resolved config as YAML, with ``out`` fixed (the server and the report agree on it)."""
    from fedcluster.config.run_config import dump_config, load_raw, resolve
    from fedcluster.tracking.run_dir import default_run_dir

    cfg, _ = resolve(load_raw(path, overrides))
    if cfg.ranks != 1:
        raise UserError(f"ranks={cfg.ranks}: a Flower run spreads its clients over Flower's nodes (or the "
                        "simulation's actors), not over ranks: leave ranks out (ranks apply to `fedcluster run`)")
    if not cfg.out:  # created now (-2, -3, ... when taken), so a run started in the same second picks another
        cfg.out = str(default_run_dir(f"flower-{cfg.algorithm}", cfg.scenario))
    cfg.out = str(Path(cfg.out).resolve())
    out = Path(cfg.out)
    if (out / "rounds.csv").exists() or (out / "checkpoint.pt").exists():
        raise UserError(f"run directory {cfg.out!r} already holds a run; pass another out=")
    return dump_config(cfg), cfg


def cmd_simulate(args: argparse.Namespace) -> int:
    import torch

    from fedcluster.flower.simulation import simulate
    from fedcluster.storage.folders import removed_if_empty

    path, overrides, options = split_options(args.items)
    check_ray_temp_dir()
    config_yaml, cfg = resolved_yaml(path, overrides)
    with removed_if_empty(Path(cfg.out)):  # a refused or failed start leaves no folder
        gpu = args.gpu_fraction
        if gpu is None:
            gpu = 1.0 / max(cfg.cohort_size(), 1) if torch.cuda.is_available() else 0.0
        if not (0 <= gpu <= 1 and 0 < args.cpus_per_client <= MAX_CPUS_PER_CLIENT):  # NaN fails both
            raise UserError(f"--gpu-fraction must be in [0, 1] and --cpus-per-client above 0 and at most "
                            f"{MAX_CPUS_PER_CLIENT}, got {gpu:g} and {args.cpus_per_client:g}")
        summary = simulate(config_yaml, options, cfg.num_clients, gpu, args.cpus_per_client)
        _print_done(summary, cfg.out)
    return 0


RAY_SOCKET_MAX = 107  # bytes of a Unix socket's path (Linux; Ray refuses longer ones, then hangs)


def check_ray_temp_dir() -> None:
    """Refuse, before Ray starts, a temporary folder so long that Ray's socket paths would not fit a Unix socket
    (Ray puts them at TMP/ray/session_DATE_TIME_PID/sockets/plasma_store)."""
    base = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
    socket = os.path.join(base, "ray", "session_2000-01-01_00-00-00_000000_" + "9" * 7, "sockets", "plasma_store")
    if len(socket.encode("utf-8", "surrogateescape")) > RAY_SOCKET_MAX:
        raise UserError(f"the temporary folder {base[:80]!r} is too long for the simulation: Ray's socket paths "
                        f"under it would exceed the {RAY_SOCKET_MAX} bytes a Unix socket allows; set TMPDIR (or "
                        "RAY_TMPDIR) to a short folder, e.g. TMPDIR=/tmp")


def _print_done(summary: dict[str, Any] | None, out: str) -> None:
    if not summary:
        raise UserError(f"the Flower run ended without a summary; see the log above and {out}")
    final = summary["final"]
    print(f"done: {summary['rounds']} rounds on Flower; final val_acc {final.get('val_acc', float('nan')):.4f}, "
          f"test_acc {final.get('test_acc', float('nan')):.4f}, ari {final.get('ari', 0):.3f}, "
          f"clusters {final.get('num_clusters')}; results in {out}")


def flwr_bin(name: str) -> str:
    """A Flower executable of this Python environment (or on PATH)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        raise UserError(f"{name!r} not found: install Flower with `pip install 'fedcluster[flower]'`")
    return found


def write_app(directory: Path, config_yaml: str, options: Any) -> None:
    """A Flower app (pyproject.toml) whose components are fedcluster's and whose run config is the run."""
    import tomli_w

    directory.mkdir(parents=True, exist_ok=True)
    doc = {
        "build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
        "project": {"name": "fedcluster-run", "version": "1.0.0", "dependencies": []},
        "tool": {"flwr": {"app": {
            "publisher": "fedcluster",
            "components": {"serverapp": "fedcluster.flower.apps:server_app",
                           "clientapp": "fedcluster.flower.apps:client_app"},
            "config": {"config": config_yaml, "min-clients": options.min_clients, "timeout": options.timeout},
        }}},
    }
    (directory / "pyproject.toml").write_text(tomli_w.dumps(doc, multiline_strings=True))


def write_connection(home: Path, address: str, insecure: bool, root_certificates: str | None) -> None:
    """$FLWR_HOME/config.toml naming the SuperLink (``flwr run APP fedcluster``)."""
    import tomli_w

    conn: dict[str, Any] = {"address": address}
    if insecure:
        conn["insecure"] = True
    elif root_certificates:
        conn["root-certificates"] = str(Path(root_certificates).resolve())
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(tomli_w.dumps({"superlink": {"default": "fedcluster", "fedcluster": conn}}))


def _check_tls(args: argparse.Namespace) -> None:
    if not args.insecure and not args.root_certificates:
        raise UserError("say how to reach the SuperLink: --root-certificates CA.pem (TLS) or --insecure "
                        "(plain HTTP, loopback tests only)")
    if args.root_certificates and not Path(args.root_certificates).is_file():
        raise UserError(f"--root-certificates {args.root_certificates!r} is not a file")


def cmd_serve(args: argparse.Namespace) -> int:
    import json

    from fedcluster.storage.folders import removed_if_empty

    _check_tls(args)
    split_address(args.superlink)  # the address's form; serve runs no Ray, so the temporary folder's length is free
    path, overrides, options = split_options(args.items)
    config_yaml, cfg = resolved_yaml(path, overrides)
    with removed_if_empty(Path(cfg.out)), tempfile.TemporaryDirectory(prefix="fedcluster-flower-") as tmp:
        app, home = Path(tmp) / "app", Path(tmp) / "home"
        write_app(app, config_yaml, options)
        write_connection(home, args.superlink, args.insecure, args.root_certificates)
        env = {**os.environ, "FLWR_HOME": str(home)}
        code = subprocess.run([flwr_bin("flwr"), "run", str(app), "fedcluster", "--stream"], env=env).returncode
        summary_path = Path(cfg.out) / "summary.json"
        if code != 0 or not summary_path.is_file():
            raise UserError(f"the Flower run did not finish (flwr run exit status {code}); see the log above")
    _print_done(json.loads(summary_path.read_text()), cfg.out)
    return 0


def cmd_node(args: argparse.Namespace) -> int:
    from fedcluster.flower.wire import WORKER_ENV
    from fedcluster.flower.worker import warm_worker

    _check_tls(args)
    if not 0 <= args.partition_id < MAX_PARTITIONS:
        raise UserError(f"--partition-id must be >= 0 and below {MAX_PARTITIONS} (the most clients a run has), "
                        f"got {args.partition_id}")
    if args.auth_private_key is not None and not Path(args.auth_private_key).is_file():
        raise UserError(f"--auth-private-key {args.auth_private_key!r} is not a file")
    if not 0 < args.connect_timeout <= MAX_WAIT_SECONDS:
        raise UserError(f"--connect-timeout must be > 0 and at most {MAX_WAIT_SECONDS} seconds (a week), got "
                        f"{args.connect_timeout:g}")
    port = DEFAULT_NODE_PORT if args.port is None else args.port
    if not 0 < port < 65536:
        raise UserError(f"--port must be in 1..65535, got {port}")
    check_port_free(port)
    wait_for_superlink(args.superlink, args.connect_timeout, None if args.insecure else args.root_certificates)
    cmd = [flwr_bin("flower-supernode"), "--superlink", args.superlink,
           "--node-config", f"partition-id={args.partition_id}", "--port", str(port),
           "--max-wait-time", str(args.connect_timeout)]
    cmd += ["--insecure"] if args.insecure else ["--root-certificates", args.root_certificates]
    if args.auth_private_key:
        cmd += ["--auth-supernode-private-key", args.auth_private_key]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # the SuperNode's SuperExec looks for a message to start a ClientApp for every second by default (Flower
    # 1.41); every message of a round waits half of that on average
    env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", str(TASK_POLL_SECONDS))
    if args.no_warm_worker:
        env.pop(WORKER_ENV, None)
        code, stopped_by = run_forwarding_signals(cmd, env)
    else:
        with warm_worker() as worker:
            code, stopped_by = run_forwarding_signals(cmd, {**env, WORKER_ENV: worker.path}, on_start=worker.start)
    if stopped_by is not None:
        return 128 + stopped_by  # stopped on request: the shell's status for a process ended by that signal
    if code != 0:
        raise UserError(f"the SuperNode stopped with exit status {code} (see its log above); if it could not "
                        f"reach {args.superlink} for --connect-timeout={args.connect_timeout:g} s, check the "
                        "address, the certificates and that the SuperLink runs")
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    _check_tls(args)
    if not Path(args.public_key).is_file():
        raise UserError(f"public key {args.public_key!r} is not a file")
    with tempfile.TemporaryDirectory(prefix="fedcluster-flower-") as tmp:
        write_connection(Path(tmp), args.superlink, args.insecure, args.root_certificates)
        code = subprocess.run([flwr_bin("flwr"), "supernode", "register", str(Path(args.public_key).resolve()),
                               "fedcluster"], env={**os.environ, "FLWR_HOME": tmp}).returncode
    if code != 0:
        raise UserError(f"registering {args.public_key!r} failed (flwr supernode register exit status {code})")
    return 0
