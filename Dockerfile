# The soak runner's image: `soak` as the entrypoint, run by the CronJob with its arguments.
#   docker build -t registry.example.com/soak:0.1.0 . && docker push registry.example.com/soak:0.1.0
# For amd64 and arm64 at once (docs/deploy.md; the release workflow does this on a tag):
#   docker buildx build --platform linux/amd64,linux/arm64 -t registry.example.com/soak:0.1.0 --push .
# Needs BuildKit (the default builder since Docker 23, and buildx): the final stage mounts the
# build stage's wheels rather than copying them into a layer.
#
# PYTHON_IMAGE is any Debian-based image with python3 (3.11, the version the wheels are built
# for, in both stages) and its venv module: the official image below by default. pip runs from
# a virtual environment in both stages, so the same steps work where the system Python has no
# pip, or refuses to install into itself (Debian's python3, PEP 668).
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# Build a wheel of every dependency, exactly as requirements.lock pins them, and of the project.
# Most are downloaded as binary wheels; the rest are compiled here (hdrhistogram has no wheel for
# Linux arm64), and so is the project's native engine (setup.py: runner/load/native/, C, linked to
# the system's libssl for HTTPS: the image's Python links the same libssl.so.3), on
# each platform from source, so this stage has a C compiler, which never reaches the final image.
# With buildx, each platform of --platform builds this stage as that platform (under QEMU where
# the builder's machine is another: docker run --privileged --rm tonistiigi/binfmt --install arm64,
# or Debian's qemu-user-static); the engine's C has a portable path where there is no SSE2.
FROM ${PYTHON_IMAGE} AS build
# Versions are not pinned: the compiler is whatever the base image's Debian release ships, and
# it builds wheels only; what is installed in the image is pinned by requirements.lock. The
# Python headers: the official image has its own; a Debian python3 gets python3-dev.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev zlib1g-dev libssl-dev \
    && if ! python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'; \
       then apt-get install -y --no-install-recommends python3-dev; fi \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/build
WORKDIR /src
COPY requirements.lock ./
# A package built from source is built as PEP 517 says, in an isolated environment whose build
# tools (setuptools, and pbr for hdrhistogram) are pinned by the lock too (PIP_CONSTRAINT).
ENV PIP_CONSTRAINT=/src/requirements.lock
RUN /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check --use-pep517 --wheel-dir /wheels \
        --requirement requirements.lock
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY runner/ runner/
RUN /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels .

# The image: the base, and a virtual environment holding the wheels above and nothing else
# (with the s3 extra, obstore: an s3:// resultsStore, some 16 MB; docs/results-store.md)
# (--no-index: pip may not look anywhere but the build stage's wheels). No compiler, no pip.
# The extension is optional for `pip install .` (a machine without a compiler still gets soak),
# not for the image: without the native engine the build fails here, rather than the image
# quietly running every load on the Python engine.
FROM ${PYTHON_IMAGE}
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python3 -m venv /opt/soak \
    && /opt/soak/bin/pip install --no-cache-dir --disable-pip-version-check --no-index --find-links /wheels \
        'soak-pallet[remote,s3]' \
    && { /opt/soak/bin/python -c 'import runner.load.native._engine' \
         || { echo 'the wheel has no native engine (runner/load/native/, setup.py): see the build stage' >&2; exit 1; }; } \
    && /opt/soak/bin/pip uninstall --yes --disable-pip-version-check pip
ENV PATH="/opt/soak/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Non-root, numeric so Kubernetes can verify runAsNonRoot; the manifests use the same UID.
USER 10001:10001
ENTRYPOINT ["soak"]
# With no arguments the image runs the demo: a few seconds against a built-in target.
CMD ["demo"]
