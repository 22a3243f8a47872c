"""Registry configuration: registries.conf, ARES's own file and variables, mirrors, blocked and insecure."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from oci_registry_kit import (
    FAST_RETRY,
    PASSWORD,
    USER,
    Pushed,
    Registry,
    free_port,
    serve,
    start_registry,
)
from test_registry_proxy import forwarding_app

from ares.images.errors import ImageError
from ares.images.registry import (
    DockerConfigCredentials,
    RegistryClient,
    RegistryConfig,
    fetch_layer,
    parse_reference,
    resolve,
)

DIGEST = "sha256:" + "a" * 64


def load(tmp_path: Path, conf: str | None = None, ares: str | None = None, **env: str) -> RegistryConfig:
    """A config from these files and variables only (a HOME of its own, no system files)."""
    full = {"HOME": str(tmp_path / "home"), **env}
    if conf is not None:
        (tmp_path / "registries.conf").write_text(conf)
        full["CONTAINERS_REGISTRIES_CONF"] = str(tmp_path / "registries.conf")
    if ares is not None:
        (tmp_path / "ares.toml").write_text(ares)
        full["ARES_REGISTRIES_CONFIG"] = str(tmp_path / "ares.toml")
    return RegistryConfig.load(full, system_dir=tmp_path / "etc")


def where(config: RegistryConfig, text: str) -> list[str]:
    return [
        str(e.reference) + (" (mirror)" if e.mirror else "") for e in config.endpoints(parse_reference(text))
    ]


REGISTRIES_CONF = """
unqualified-search-registries = ["quay.io", "docker.io"]

[[registry]]
prefix = "docker.io"
location = "docker.io"
[[registry.mirror]]
location = "mirror.example:5000"
[[registry.mirror]]
location = "digests.example/hub"
pull-from-mirror = "digest-only"

[[registry]]
prefix = "docker.io/team"
location = "internal.example/dockerhub-team"

[[registry]]
prefix = "*.corp.example"
[[registry.mirror]]
location = "cache.corp.example"

[[registry]]
prefix = "quay.io"
mirror-by-digest-only = true
[[registry.mirror]]
location = "quay-cache.example"
insecure = true

[[registry]]
location = "evil.example"
blocked = true

[aliases]
"alpine" = "quay.io/not/alpine"
"""


def test_registries_conf_prefixes_mirrors_and_rewrites(tmp_path: Path) -> None:
    config = load(tmp_path, REGISTRIES_CONF)
    # Bare names are Docker Hub's: no search of unqualified-search-registries, no short-name aliases.
    assert where(config, "alpine:3") == [
        "mirror.example:5000/library/alpine:3 (mirror)",
        "docker.io/library/alpine:3",
    ]
    assert where(config, f"alpine@{DIGEST}") == [
        f"mirror.example:5000/library/alpine@{DIGEST} (mirror)",
        f"digests.example/hub/library/alpine@{DIGEST} (mirror)",
        f"docker.io/library/alpine@{DIGEST}",
    ]
    # The longest prefix wins, and its location replaces the prefix.
    assert where(config, "team/app:1") == ["internal.example/dockerhub-team/app:1"]
    assert where(config, "docker.io/teammate/app:1")[-1] == "docker.io/teammate/app:1"  # not a prefix match
    assert where(config, "git.corp.example:8443/x/y:2") == [
        "cache.corp.example/x/y:2 (mirror)",
        "git.corp.example:8443/x/y:2",
    ]
    assert where(config, "corp.example/x:1") == ["corp.example/x:1"]  # the wildcard needs a subdomain
    assert where(config, "quay.io/a/b:1") == ["quay.io/a/b:1"]  # mirror-by-digest-only
    assert where(config, f"quay.io/a/b@{DIGEST}")[0] == f"quay-cache.example/a/b@{DIGEST} (mirror)"
    assert where(config, "ghcr.io/o/r:1") == ["ghcr.io/o/r:1"]
    with pytest.raises(
        ImageError, match=r"evil.example/x:latest: pulls from evil.example are blocked by .*registries.conf"
    ):
        config.endpoints(parse_reference("evil.example/x"))
    # insecure is per host, exactly as named; loopback is not implicitly insecure.
    assert config.insecure == frozenset({"quay-cache.example"})
    assert not config.is_insecure(parse_reference("127.0.0.1:5000/x"))


def test_ares_variables_and_file_come_first(tmp_path: Path) -> None:
    ares = """
insecure-registries = ["127.0.0.1:5001"]
[mirrors]
"docker.io" = ["file-mirror.example"]
"ghcr.io/org" = ["127.0.0.1:5001/ghcr"]
"""
    config = load(
        tmp_path,
        REGISTRIES_CONF,
        ares,
        ARES_REGISTRY_MIRRORS="docker.io=127.0.0.1:5000, docker.io=env2.example",
        ARES_INSECURE_REGISTRIES="127.0.0.1:5000",
    )
    assert where(config, "alpine") == [
        "127.0.0.1:5000/library/alpine:latest (mirror)",
        "env2.example/library/alpine:latest (mirror)",
        "file-mirror.example/library/alpine:latest (mirror)",
        "mirror.example:5000/library/alpine:latest (mirror)",
        "docker.io/library/alpine:latest",
    ]
    assert where(config, "ghcr.io/org/tool:1") == [
        "127.0.0.1:5001/ghcr/tool:1 (mirror)",
        "ghcr.io/org/tool:1",
    ]
    assert config.insecure == {"127.0.0.1:5000", "127.0.0.1:5001", "quay-cache.example"}
    assert not config.is_insecure(parse_reference("127.0.0.1:5002/x"))
    assert not config.is_insecure(parse_reference("localhost:5000/x"))
    # The variable alone, without any file, keeps today's behaviour.
    assert load(tmp_path, ARES_INSECURE_REGISTRIES="a:1,b:2").insecure == {"a:1", "b:2"}


def test_default_files_user_over_system_plus_drop_ins(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "registries.conf.d").mkdir(parents=True)
    (etc / "registries.conf").write_text('[[registry]]\nlocation = "sys.example"\nblocked = true\n')
    (etc / "registries.conf.d/10-m.conf").write_text(
        '[[registry]]\nprefix = "docker.io"\n[[registry.mirror]]\nlocation = "dropin.example"\n'
    )
    (etc / "registries.conf.d/20-v1.conf").write_text('[registries.block]\nregistries = ["v1.example"]\n')
    assert where(load(tmp_path), "alpine")[0] == "dropin.example/library/alpine:latest (mirror)"
    with pytest.raises(ImageError, match="blocked"):
        load(tmp_path).endpoints(parse_reference("sys.example/a"))
    with pytest.raises(ImageError, match="blocked"):
        load(tmp_path).endpoints(parse_reference("v1.example/a"))
    user = tmp_path / "home/.config/containers"
    user.mkdir(parents=True)
    (user / "registries.conf").write_text('unqualified-search-registries = ["docker.io"]\n')
    assert load(tmp_path).endpoints(parse_reference("sys.example/a"))  # the user's file replaces it
    ares = tmp_path / "home/.config/ares/registries.toml"
    ares.parent.mkdir(parents=True)
    ares.write_text('[mirrors]\n"quay.io" = ["q.example"]\n')
    assert where(load(tmp_path), "quay.io/a/b:1")[0] == "q.example/a/b:1 (mirror)"


@pytest.mark.parametrize(
    ("conf", "env", "message"),
    [
        ("", {"ARES_REGISTRY_MIRRORS": "docker.io"}, "is not prefix=location"),
        ('[[registry]]\nprefix = "*.x.example"\nlocation = "y"\n', {}, "cannot set a location"),
        ('[[registry]]\nprefix = "a*.example"\n', {}, "must look like"),
        (
            '[[registry]]\nprefix = "a.example"\n[[registry.mirror]]\nlocation = "m"\n'
            'pull-from-mirror = "x"\n',
            {},
            "pull-from-mirror",
        ),
        ("[[registry]\n", {}, "cannot read registry configuration"),
    ],
)
def test_bad_configuration_is_a_clear_error(
    tmp_path: Path, conf: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ImageError, match=message):
        load(tmp_path, conf, **env)


# --- against real registries ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mirror(
    registry: Registry, images: dict[str, Pushed], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    """A registry holding copies, made with `skopeo copy`, of ares/gzip and ares/multi."""
    reg = start_registry(tmp_path_factory.mktemp("mirror"))
    for name in ("ares/gzip:v1", "ares/multi:v1"):
        subprocess.run(
            ["skopeo", "copy", "--quiet", "--all", "--src-tls-verify=false", "--dest-tls-verify=false",
             f"docker://{registry.host}/{name}", f"docker://{reg.host}/{name}"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    reg = start_registry(tmp_path_factory.mktemp("empty"))
    yield reg
    reg.stop()


def client_for(config: RegistryConfig, auth: list[Path] | None = None) -> RegistryClient:
    return RegistryClient(credentials=DockerConfigCredentials(auth or []), config=config, retry=FAST_RETRY)


async def pull(client: RegistryClient, text: str, pushed: Pushed):
    image = await resolve(client, parse_reference(text))
    out: list[bytes] = []
    await fetch_layer(client, image.reference, image.layers[0], image.diff_ids[0], out.append)
    assert image.diff_ids == (pushed.diff_id,)
    return image


async def test_mirror_serves_when_the_primary_is_down(
    tmp_path: Path, mirror: Registry, images: dict[str, Pushed]
) -> None:
    down = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = load(
        tmp_path,
        ARES_REGISTRY_MIRRORS=f"{down}={mirror.host}",
        ARES_INSECURE_REGISTRIES=f"{mirror.host},{down}",
    )
    async with client_for(config) as client:
        image = await pull(client, f"{down}/ares/gzip:v1", images["gzip"])
        assert image.reference.registry == down  # the name asked for, pinned
        assert image.source is not None and image.source.registry == mirror.host
        assert image.source.digest == image.manifest_digest
        index = await resolve(client, parse_reference(f"{down}/ares/multi:v1"))
        assert index.index_digest is not None and index.source.registry == mirror.host  # type: ignore[union-attr]


async def test_falls_back_to_the_primary_when_mirrors_lack_the_image_or_are_down(
    tmp_path: Path, registry: Registry, empty: Registry, images: dict[str, Pushed]
) -> None:
    app, seen = forwarding_app(empty.host)
    async with serve(app) as lacking:
        down = f"127.0.0.1:{free_port()}"
        config = load(
            tmp_path,
            ARES_REGISTRY_MIRRORS=f"{registry.host}={down},{registry.host}={lacking}",
            ARES_INSECURE_REGISTRIES=f"{registry.host},{lacking},{down}",
        )
        async with client_for(config) as client:
            start = time.monotonic()
            image = await pull(client, f"{registry.host}/ares/gzip:v1", images["gzip"])
            assert time.monotonic() - start < 5  # a dead mirror is skipped, not retried with backoff
            assert image.source is not None and image.source.registry == registry.host
            # The layer went straight to the endpoint that served the manifest.
            assert [r["path"] for r in seen] == ["/v2/ares/gzip/manifests/v1"]
            with pytest.raises(ImageError, match=r"not found on .*\(tried before it: ") as caught:
                await resolve(client, parse_reference(f"{registry.host}/ares/gzip:nope"))
            assert all(host in str(caught.value) for host in (registry.host, lacking, down))


async def test_a_mirror_serving_altered_content_is_an_error_not_a_fallback(
    tmp_path: Path, registry: Registry, images: dict[str, Pushed]
) -> None:
    async def alter(request: web.Request, _: bytes) -> web.StreamResponse | None:
        if "/manifests/" in request.path:
            return web.Response(
                body=b'{"schemaVersion": 2, "layers": []}',
                content_type="application/vnd.oci.image.manifest.v1+json",
            )
        return None

    primary_app, primary_seen = forwarding_app(registry.host)
    async with serve(primary_app) as primary:
        async with client_for(load(tmp_path, ARES_INSECURE_REGISTRIES=primary)) as client:
            digest = (await resolve(client, parse_reference(f"{primary}/ares/gzip:v1"))).manifest_digest
        primary_seen.clear()
        mirror_app, _ = forwarding_app(registry.host, alter)
        async with serve(mirror_app) as bad:
            config = load(
                tmp_path,
                ARES_REGISTRY_MIRRORS=f"{primary}={bad}",
                ARES_INSECURE_REGISTRIES=f"{primary},{bad}",
            )
            async with client_for(config) as client:
                with pytest.raises(ImageError, match="altered it"):
                    await resolve(client, parse_reference(f"{primary}/ares/gzip@{digest}"))
    assert primary_seen == []


async def test_blocked_registry_is_refused_before_any_request(tmp_path: Path, registry: Registry) -> None:
    config = load(tmp_path, f'[[registry]]\nprefix = "{registry.host}/ares"\nblocked = true\n')
    async with client_for(config.with_insecure([registry.host])) as client:
        with pytest.raises(ImageError, match=f"pulls from {registry.host}/ares are blocked"):
            await resolve(client, parse_reference(f"{registry.host}/ares/gzip:v1"))


async def test_plain_http_only_when_named(
    tmp_path: Path, registry: Registry, mirror: Registry, images: dict[str, Pushed]
) -> None:
    quick = RegistryClient(credentials=DockerConfigCredentials([]), config=load(tmp_path), retry=FAST_RETRY)
    async with quick as client:
        with pytest.raises(
            ImageError, match=r"seems to serve plain HTTP.*ARES_INSECURE_REGISTRIES=host:port"
        ):
            await resolve(client, parse_reference(f"{registry.host}/ares/gzip:v1"))
    named = load(tmp_path, f'[[registry]]\nlocation = "{registry.host}"\ninsecure = true\n')
    async with client_for(named) as client:
        await pull(client, f"{registry.host}/ares/gzip:v1", images["gzip"])
    # A mirror's insecure flag covers the mirror only: the primary stays TLS.
    down = f"127.0.0.1:{free_port()}"
    conf = (
        f'[[registry]]\nlocation = "{down}"\n'
        f'[[registry.mirror]]\nlocation = "{mirror.host}"\ninsecure = true\n'
    )
    config = load(tmp_path, conf)
    assert config.insecure == {mirror.host}
    async with client_for(config) as client:
        await pull(client, f"{down}/ares/gzip:v1", images["gzip"])


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("mirror_has_login", [True, False], ids=["own-login", "no-login"])
async def test_a_mirror_never_gets_the_primarys_credentials(
    tmp_path: Path, basic_registry: Registry, images: dict[str, Pushed], mirror_has_login: bool
) -> None:
    """The mirror (a recording proxy in front of a Basic-auth registry) sees only its own login."""
    app, seen = forwarding_app(basic_registry.host)
    async with serve(app) as mirror_host:
        primary = basic_registry.host
        auths = {primary: {"auth": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}}
        if mirror_has_login:
            # The same account, so the mirror works; the primary's entry carries a marker password.
            auths[primary] = {"username": USER, "password": "primary-only"}
            auths[mirror_host] = {"username": USER, "password": PASSWORD}
        auth_file = tmp_path / "auth.json"
        auth_file.write_text(json.dumps({"auths": auths}))
        config = load(
            tmp_path,
            ARES_REGISTRY_MIRRORS=f"{primary}={mirror_host}",
            ARES_INSECURE_REGISTRIES=f"{primary},{mirror_host}",
        )
        async with client_for(config, [auth_file]) as client:
            image = await pull(client, f"{primary}/ares/gzip:v1", images["gzip"])
    sent = {r["headers"].get("Authorization") for r in seen}
    assert seen
    if mirror_has_login:
        assert image.source is not None and image.source.registry == mirror_host
        assert sent == {None, _basic(USER, PASSWORD)}
    else:  # the mirror asked for a login it has none of: skipped, and the primary served
        assert image.source is not None and image.source.registry == primary
        assert sent == {None}
