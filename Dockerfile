# The soak runner's image: `soak` as the entrypoint, run by the CronJob with its arguments.
#   docker build -t registry.example.com/soak:0.1.0 . && docker push registry.example.com/soak:0.1.0
# Every dependency ships as a binary wheel, so no compiler is needed in either stage.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# Build the project's own wheel; only the wheel leaves this stage.
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY runner/ runner/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/requirements.lock
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-cache-dir --only-binary=:all: --constraint /tmp/requirements.lock /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels /tmp/requirements.lock
# Non-root, numeric so Kubernetes can verify runAsNonRoot; the manifests use the same UID.
USER 10001:10001
ENTRYPOINT ["soak"]
# With no arguments the image runs the demo: a few seconds against a built-in target.
CMD ["demo"]
