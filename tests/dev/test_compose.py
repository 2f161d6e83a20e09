"""``docker-compose.yml`` and the ``Dockerfile`` agree with the code (no Docker engine here).

Checks: every image is pinned; host ports do not collide; every MissionWeave command in the
file exists in our CLI (``--help`` exits 0) with options it knows; every environment variable
set for our services is read by the package (or, for ``OTEL_*``, by the OpenTelemetry SDK our
``setup_tracing`` configures); ``depends_on`` names services; the Authority, Temporal, MinIO and
trace URLs point at the right service names and ports; the search attributes registered are
the Mission's.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opentelemetry.sdk.environment_variables as otel_env
import pytest
import typer
import yaml
from typer.testing import CliRunner

from missionweave.cli import app
from missionweave.dev import SEARCH_ATTRIBUTES
from missionweave.protocol.temporal_contract import mission_workflow_id

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "missionweave"
OUR_IMAGE = re.compile(r"^missionweave:")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def _ours(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run our image."""
    return {n: s for n, s in _services(compose).items() if OUR_IMAGE.match(s.get("image", ""))}


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _words(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _invocations(service: dict[str, Any]) -> Iterator[list[str]]:
    """The ``missionweave`` argument lists a service of our image runs: its command under our
    entrypoint, or every ``missionweave …`` of a ``sh -c`` script."""
    entrypoint = service.get("entrypoint")
    words = _words(service)
    if entrypoint is None:
        yield words
        return
    assert entrypoint[:2] == ["/bin/sh", "-c"], entrypoint
    for part in re.split(r"&&|;|\|\|", " ".join(words)):
        tokens = [t.strip("()") for t in shlex.split(part)]
        if tokens[:1] == ["exec"]:
            tokens = tokens[1:]
        if tokens and tokens[0] == "missionweave":
            yield tokens[1:]


def _command_path(args: list[str]) -> tuple[list[str], Any, list[str]]:
    """Resolve ``args`` to the (click) command it names; (path, command, the rest)."""
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    rest = list(args)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        sub = command.commands.get(rest[0])
        assert sub is not None, f"no command {' '.join([*path, rest[0]])!r} in our CLI"
        path.append(rest.pop(0))
        command = sub
    return path, command, rest


def test_every_image_is_pinned(compose: dict[str, Any]) -> None:
    for name, service in _services(compose).items():
        image = service.get("image")
        assert image, f"{name} has no image"
        _, sep, tag = image.rpartition(":")
        assert sep and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d", tag), f"{name}: {image} is not pinned"
    froms = re.findall(
        r"^ARG PYTHON_IMAGE=(\S+)|^FROM (\S+)", (ROOT / "Dockerfile").read_text(), flags=re.M
    )
    images = [a or f for a, f in froms if (a or f) != "${PYTHON_IMAGE}"]
    assert images, "the Dockerfile names no base image"
    for image in images:
        assert ":" in image and not image.endswith(":latest"), image


def test_host_ports_do_not_collide(compose: dict[str, Any]) -> None:
    seen: dict[str, str] = {}
    for name, service in _services(compose).items():
        replicas = int((service.get("deploy") or {}).get("replicas", 1))
        for port in service.get("ports", []):
            first, _, last = str(port).split(":")[-2].partition("-")
            hosts = [str(p) for p in range(int(first), int(last or first) + 1)]
            # a replicated service publishes one host port per replica (a range)
            assert len(hosts) in (1, replicas), f"{name}: {port} for {replicas} replicas"
            for host in hosts:
                assert host not in seen, f"host port {host}: {seen.get(host)} and {name}"
                seen[host] = name
    assert {"7233", "8080", "8787", "8788", "9000", "16686", "4318"} <= set(seen)


def test_the_authority_runs_two_replicas_on_its_own_postgresql_database(
    compose: dict[str, Any],
) -> None:
    """Issue 15: the Authority on PostgreSQL (a database and role of its own beside Temporal's),
    two replicas signing with one key, both health-checked."""
    services = _services(compose)
    authority = services["authority"]
    assert authority["deploy"]["replicas"] == 2 and "healthcheck" in authority
    # readiness (issue 37): a replica whose store is away is not healthy, though it answers
    assert "/readyz" in " ".join(authority["healthcheck"]["test"])
    url = _env(authority)["MISSIONWEAVE_AUTHORITY_DB"]
    m = re.fullmatch(r"postgresql://(\w+):\$\{(\w+):\?[^}]*\}@postgresql:5432/(\w+)", url)
    assert m, url
    role, password_var, database = m.groups()
    assert database != _env(services["temporal"]).get("DBNAME", "temporal")
    setup = services["authority-db"]
    script = " ".join(_words(setup))
    assert (
        f"CREATE ROLE {role} LOGIN" in script
        and f"CREATE DATABASE {database} OWNER {role}" in script
    )
    assert f"${{{password_var}:?" in str(_env(setup)["AUTHORITY_DB_PASSWORD"])
    assert setup["depends_on"]["postgresql"]["condition"] == "service_healthy"
    deps = authority["depends_on"]
    assert deps["authority-db"]["condition"] == "service_completed_successfully"
    assert deps["authority-keys"]["condition"] == "service_completed_successfully"
    # every replica signs with the key authority-keys makes once (never one per replica)
    key = _flag(authority, "--key")
    assert f"missionweave keys generate {key}" in " ".join(_words(services["authority-keys"]))
    (words,) = [w for w in _invocations(authority) if w[:2] == ["authority", "serve"]]
    assert "--db" not in words  # the URL (with its password) comes from the environment


def test_published_ports_bind_loopback_and_secrets_come_from_an_env_file(
    compose: dict[str, Any],
) -> None:
    """Nothing is published beyond this machine, and no secret is written in the file."""
    for name, service in _services(compose).items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    assert "missionweave-secret" not in text and "POSTGRES_PASSWORD: temporal" not in text
    needed = set(re.findall(r"\$\{(\w+):\?", text))
    assert needed >= {"POSTGRES_PASSWORD", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    assert needed <= set(re.findall(r"^(\w+)=", example, re.M))
    assert "/.env" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    authority = _services(compose)["authority"]
    assert "--operator-key" in " ".join(_words(authority))


def test_depends_on_names_services(compose: dict[str, Any]) -> None:
    services = _services(compose)
    # the start order the stack needs is declared (a file without depends_on would pass the
    # loop below trivially)
    needs = {
        "temporal": "postgresql", "authority": "authority-db", "bootstrap": "authority",
        "coordinator": "bootstrap", "agent-counter": "coordinator",
    }  # fmt: skip
    for name, dep in needs.items():
        assert dep in (services[name].get("depends_on") or []), f"{name} does not wait for {dep}"
    for name, service in services.items():
        deps = service.get("depends_on") or []
        for dep in deps if isinstance(deps, list) else list(deps):
            assert dep in services, f"{name} depends on unknown service {dep}"
            if isinstance(deps, dict):
                assert deps[dep]["condition"] in {
                    "service_started",
                    "service_healthy",
                    "service_completed_successfully",
                }
                if deps[dep]["condition"] == "service_healthy":
                    assert "healthcheck" in services[dep], f"{dep} has no healthcheck"


def test_our_services_run_commands_and_options_our_cli_has(compose: dict[str, Any]) -> None:
    ours = _ours(compose)
    assert {"authority", "bootstrap", "coordinator", "agent-counter", "agent-checker"} <= set(ours)
    runner = CliRunner()
    seen: set[str] = set()
    for name, service in ours.items():
        invocations = list(_invocations(service))
        assert invocations, f"{name} runs no missionweave command"
        for args in invocations:
            path, command, rest = _command_path(args)
            r = runner.invoke(app, [*path, "--help"])
            assert r.exit_code == 0, (name, path, r.output)
            known = {opt for p in command.params for opt in p.opts}
            for token in rest:
                if token.startswith("--"):
                    assert token.split("=", 1)[0] in known, f"{name}: {' '.join(path)} {token}"
            seen.add(" ".join(path))
    assert {"authority serve", "coordinator", "worker", "group create", "group add"} <= seen


def test_our_services_set_only_variables_the_code_reads(compose: dict[str, Any]) -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    sdk_variables = {v for k, v in vars(otel_env).items() if k.startswith("OTEL_")}
    assert "setup_tracing(" in source  # our processes hand OTEL_* to the OpenTelemetry SDK
    for name, service in _ours(compose).items():
        for var in _env(service):
            if var.startswith("OTEL_"):
                assert var in source or var in sdk_variables, f"{name}: {var} is read by nobody"
            else:
                assert re.search(rf"[\"']{var}[\"']", source), f"{name}: {var} is never read"


def _port(service: dict[str, Any], container: str) -> bool:
    return any(str(p).rsplit(":", 1)[-1] == container for p in service.get("ports", []))


def test_urls_point_at_the_right_services(compose: dict[str, Any]) -> None:
    services = _services(compose)
    authority = services["authority"]
    (words,) = [w for w in _invocations(authority) if w[:2] == ["authority", "serve"]]
    port = words[words.index("--port") + 1] if "--port" in words else "8787"
    assert "--host" in words and words[words.index("--host") + 1] == "0.0.0.0"
    assert _port(authority, port)
    authority_url = f"http://authority:{port}"
    expected = {
        "MISSIONWEAVE_AUTHORITY_URL": authority_url,
        "--authority-url": authority_url,
        "TEMPORAL_ADDRESS": "temporal:7233",
        "--temporal-address": "temporal:7233",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318",
        "--s3-endpoint": "minio:9000",
        "TEMPORAL_NAMESPACE": "default",
        "--namespace": "default",
    }
    checked: set[str] = set()
    for name, service in services.items():
        for var, value in _env(service).items():
            if var in expected:
                assert value == expected[var], f"{name}: {var}={value}"
                checked.add(var)
        for args in _invocations(service) if OUR_IMAGE.match(service["image"]) else []:
            for flag, value in itertools.pairwise(args):
                if flag in expected:
                    assert value == expected[flag], f"{name}: {flag} {value}"
                    checked.add(flag)
    assert {
        "MISSIONWEAVE_AUTHORITY_URL",
        "TEMPORAL_ADDRESS",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "--s3-endpoint",
    } <= checked
    assert _port(services["temporal"], "7233")
    assert _port(services["jaeger"], "4318")
    assert _env(services["jaeger"])["COLLECTOR_OTLP_ENABLED"] == "true"
    assert _port(services["minio"], "9000")
    # The bucket the services use is the one minio-setup makes, with the same credentials.
    setup = " ".join(_words(services["minio-setup"]))
    minio_env = _env(services["minio"])
    assert f"local/{_flag(services['coordinator'], '--s3-bucket')}" in setup
    assert f"local/{_flag(services['authority'], '--s3-bucket')}" in setup
    store_user = _env(services["minio-setup"])
    assert "mc admin user add local" in setup and "--user" in setup
    for name in ("authority", "coordinator"):
        env = _env(services[name])
        for var in ("MISSIONWEAVE_S3_ACCESS_KEY", "MISSIONWEAVE_S3_SECRET_KEY"):
            assert env[var] == store_user[var], (name, var)
        assert env["MISSIONWEAVE_S3_ACCESS_KEY"] != minio_env["MINIO_ROOT_USER"]


def test_agents_hold_no_artifact_store_credential__MW_13_3_d(compose: dict[str, Any]) -> None:
    """Only the Authority (which grants one object at a time) and the coordinator (the
    operator's review) hold the store; no agent gets a credential, an S3 option or MinIO's
    root account."""
    services = _services(compose)
    secrets = {"MISSIONWEAVE_S3_ACCESS_KEY", "MISSIONWEAVE_S3_SECRET_KEY", "MINIO_ROOT_USER",
               "MINIO_ROOT_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # fmt: skip
    agents = [n for n, s in _ours(compose).items() if any(a[:1] == ["worker"] for a in
              _invocations(s))]  # fmt: skip
    assert sorted(agents) == ["agent-checker", "agent-counter"]
    for name in agents:
        assert not secrets & set(_env(services[name])), name
        words = " ".join(_words(services[name]))
        assert "--s3" not in words and "--artifacts" not in words, name
    for name, service in _ours(compose).items():
        if name not in ("authority", "coordinator", *agents):
            assert not secrets & set(_env(service)), name
    assert "--s3-endpoint" in _words(services["authority"])


def test_our_commands_reach_the_servers_by_option_or_environment(
    compose: dict[str, Any],
) -> None:
    """Every server option of every command our services run ends up at the right service:
    its flag when given, else the environment variable the option itself reads (click's
    ``envvar``, the code's setting), never the loopback default."""
    expected = {
        "--authority-url": "http://authority:8787",
        "--url": "http://authority:8787",
        "--temporal-address": "temporal:7233",
        "--namespace": "default",
    }
    resolved: set[str] = set()
    for name, service in _ours(compose).items():
        env = _env(service)
        for args in _invocations(service):
            path, command, rest = _command_path(args)
            for param in command.params:
                flags = [o for o in param.opts if o in expected]
                if not flags:
                    continue
                given = [b for a, b in itertools.pairwise(rest) if a in param.opts]
                envvar = param.envvar if isinstance(param.envvar, str) else None
                assert given or (envvar and envvar in env), (
                    f"{name}: {' '.join(path)} {flags[0]} falls back to {param.default!r}"
                )
                value = given[-1] if given else env[str(envvar)]
                assert value == expected[flags[0]], f"{name}: {' '.join(path)} {flags[0]} {value}"
                resolved.add(" ".join(path))
    assert {"coordinator", "worker", "group create", "group add"} <= resolved


def _flag(service: dict[str, Any], flag: str) -> str:
    words = _words(service)
    return words[words.index(flag) + 1]


def test_agents_join_the_group_bootstrap_creates(compose: dict[str, Any]) -> None:
    services = _services(compose)
    script = " ".join(_words(services["bootstrap"]))
    for name in ("agent-counter", "agent-checker"):
        card = yaml.safe_load(
            (
                ROOT / "examples" / _flag(services[name], "--card").removeprefix("examples/")
            ).read_text()
        )
        key = _flag(services[name], "--key")
        assert f"--agent-id {card['agent_id']} --agent-key {key}" in script
        assert f"--group {_flag(services[name], '--group')}" in script
    assert f"--key {_flag(services['coordinator'], '--key')}" in script


def test_temporal_setup_registers_the_mission_search_attributes(compose: dict[str, Any]) -> None:
    script = " ".join(_words(_services(compose)["temporal-setup"]))
    types = {1: "Text", 2: "Keyword", 3: "Int"}
    for key in SEARCH_ATTRIBUTES:
        assert f"{key.name}={types[int(key.indexed_value_type)]}" in script
    assert mission_workflow_id("x") == "mission-x"  # the README's host-side example relies on it


def test_dockerfile_copies_what_exists_and_runs_our_cli() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, flags=re.M):
        for source in line.split()[:-1]:
            assert (ROOT / source).exists(), f"the Dockerfile copies missing {source}"
    assert 'ENTRYPOINT ["missionweave"]' in text
    assert "USER missionweave" in text  # not root
    # the agents' cards and handlers are in the image, where compose says
    assert (ROOT / "examples" / "agents" / "handlers.py").is_file()
