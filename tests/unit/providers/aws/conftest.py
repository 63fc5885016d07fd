"""Fixtures of the aws provider's unit tests: one moto server per session, a fresh VPC world
(its own cluster ID) per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from aws_moto import World, build_world, moto_server

from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


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
