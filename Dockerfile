# MissionWeave: one image for the Authority, the coordinator and the agents (see
# docker-compose.yml). Build: docker build -t missionweave:0.1.0 .
ARG PYTHON_IMAGE=python:3.12.7-slim-bookworm

# --- build: wheels of the package and of every dependency ----------------------------------
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY missionweave ./missionweave
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# --- run: the wheels installed offline, a non-root user, the example agents -----------------
FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels missionweave \
 && useradd --create-home --uid 10001 missionweave \
 && mkdir -p /data /keys /state \
 && chown missionweave:missionweave /data /keys /state
WORKDIR /app
# `--handlers examples.agents.handlers` imports relative to the working directory.
COPY examples ./examples
USER missionweave
ENTRYPOINT ["missionweave"]
CMD ["--help"]
