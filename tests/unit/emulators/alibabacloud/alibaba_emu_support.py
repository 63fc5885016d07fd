"""What the Alibaba Cloud emulator's tests share: kccm's provider parts built against a running
emulator (keys and VPC of the emulator's default world) and seeded ECS instances."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import Parts, build_parts

VPC, VSWITCH = "vpc-kccm", "vsw-kccm"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def parts_for(emu: AlibabaEmulator, **config: str) -> Parts:
    text = "global:\n" + "".join(f"  {k}: {v!r}\n" for k, v in config.items())
    return build_parts(load_alibaba_config(text), emu.endpoint_env())


def parts(emu: AlibabaEmulator) -> Parts:
    return parts_for(
        emu,
        region="cn-hangzhou",
        vpcid=VPC,
        vswitchid=VSWITCH,
        accessKeyID=b64("kccm-ak"),
        accessKeySecret=b64("kccm-secret"),
        clusterID="c-kccm",
    )


def seeded(emu: AlibabaEmulator, ip: str, **spec: Any) -> Iterator[dict[str, Any]]:
    made = emu.admin.add_instance(vpc=VPC, vswitch=VSWITCH, private_ip=ip, **spec)
    try:
        yield made
    finally:
        emu.admin.delete_instance(made["InstanceId"])
