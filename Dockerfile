# syntax=docker/dockerfile:1
# inferd container: build on Debian bookworm, run on bookworm-slim with only
# the shared libraries the binary links (checked offline by
# tests/helm/check_dockerfile.py against `ldd` of the built binary).
#
#   docker build -t inferd:0.1.0 .
#   docker run --rm -p 50051:50051 -p 9090:9090 -v "$PWD/models:/models:ro" \
#     inferd:0.1.0 --listen 0.0.0.0:50051 --metrics-listen 0.0.0.0:9090 \
#     --model NAME=/models/NAME

FROM debian:bookworm AS build
WORKDIR /src
# Dependencies first, so that source edits do not reinstall them.
COPY scripts/install-deps.sh scripts/install-deps.sh
COPY tools/npm/package.json tools/npm/package-lock.json tools/npm/
RUN bash scripts/install-deps.sh \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DINFERD_BUILD_TESTS=OFF -DINFERD_BUILD_BENCH=OFF \
    && cmake --build build --target inferd inferd_max_pooling \
    && bin="$(find build -type f -name inferd -perm -u+x | head -n 1)" \
    && test -n "$bin" \
    && install -D -m 0755 "$bin" /out/inferd \
    && install -D -m 0644 build/examples/plugin/libinferd_max_pooling.so \
        /out/plugins/libinferd_max_pooling.so

FROM debian:bookworm-slim AS runtime
# Runtime libraries only; their dependencies (libgrpc29, libssl3, libre2-9,
# libc-ares2, ...) come with them.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates \
        libabsl20220623 \
        libcpp-httplib0.11 \
        libcurl4 \
        libfmt9 \
        libgrpc++1.51 \
        libicu72 \
        libonig5 \
        libprometheus-cpp-core1.0 \
        libprometheus-cpp-pull1.0 \
        libprotobuf32 \
        libspdlog1.10 \
        libyaml-cpp0.7 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 inferd \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin inferd \
    && mkdir -p /models
COPY --from=build /out/inferd /usr/local/bin/inferd
# The example plug-in (max pooling): server.plugins in the helm chart.
COPY --from=build /out/plugins/ /usr/local/lib/inferd/plugins/
# Model directories are mounted here (read-only is enough).
VOLUME ["/models"]
# gRPC (API + grpc.health.v1) and Prometheus /metrics.
EXPOSE 50051 9090
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/inferd"]
CMD ["--help"]
