"""Fixtures of the aws provider's unit tests: one moto emulator per session (per xdist worker),
emptied after every test, and a fresh VPC world (its own cluster ID) per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import botocore.session
import pytest

from kccm.emulators.aws import World, build_world, moto_emulator, reset_moto, shared_loader
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config


@pytest.fixture(scope="session")
def moto_server_url() -> Iterator[str]:
    """moto's EC2 of a region, made anew after each reset, would otherwise load ~1300 default
    AMIs (a volume and a snapshot each) that no test uses; the worlds' instances name an AMI
    moto need not know."""
    with moto_emulator(default_amis=False) as moto:
        yield moto.url


@pytest.fixture
def moto_url(moto_server_url: str) -> Iterator[str]:
    """The session's moto server, reset after the test: every test finds moto empty, and
    leaves it so. Without it moto's state grows all session long, and its describe calls
    (which scan all of it) grow slower test by test."""
    yield moto_server_url
    reset_moto(moto_server_url)


@pytest.fixture(autouse=True)
def _shared_botocore_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each AWSCloud still makes its own boto3 session and clients, as in production; the
    service models botocore reads from its data files are parsed once per process rather than
    once per session (see :func:`kccm.emulators.aws.clients.shared_loader`)."""
    monkeypatch.setattr(botocore.session, "create_loader", shared_loader)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for moto through the standard chain (environment variables)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def world(moto_url: str) -> World:
    return build_world(moto_url, f"c{uuid.uuid4().hex[:8]}", instances=3)


@pytest.fixture
def cloud(world: World, aws_env: None) -> AWSCloud:
    return AWSCloud(load_aws_config(world.cloud_config(APIMaxAttempts="1")))
