# kccm container image: a multi-stage build on python:3.11-slim, running as a non-root user.
# Images cannot be built on the project's machine (no container runtime); this file is parsed
# and checked by tests/unit/test_deploy_dockerfile.py. Build elsewhere with:
#   docker build -t ghcr.io/kccm/kccm:0.1.0 .
#   docker build --build-arg PROVIDER_PACKAGES="my-cloud-provider==1.2" -t my/ccm:1.2 .
# PROVIDER_PACKAGES are pip requirements installed beside kccm; a provider registers itself
# through the kccm.cloud_providers entry point and is chosen with --cloud-provider.

ARG PYTHON_IMAGE=python:3.11-slim

# ---- builder: build the wheel and install it into a self-contained venv --------------------
FROM ${PYTHON_IMAGE} AS builder
ARG PROVIDER_PACKAGES=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/kccm \
 && /opt/kccm/bin/pip install /dist/*.whl ${PROVIDER_PACKAGES} \
 && /opt/kccm/bin/kccm --version

# ---- runtime: only the venv on a slim base --------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="kccm" \
      org.opencontainers.image.description="Kubernetes cloud-controller-manager framework in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/kccm/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/kccm /opt/kccm
# 65532: the conventional "nonroot" uid/gid of distroless images; deploy/ runs as it too.
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
USER 65532:65532
EXPOSE 10258
ENTRYPOINT ["kccm"]
