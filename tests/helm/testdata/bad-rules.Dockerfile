# Test input: breaks every rule check_dockerfile.py enforces once; the test
# expects exactly these violations.
FROM debian AS build
ADD . /src
RUN apt-get update && apt-get install -y g++ cmake
FROM debian:latest
RUN apt-get update && apt-get install -y --no-install-recommends libgrpc++1.51
COPY build/inferd /usr/local/bin/inferd
USER 10001
ENTRYPOINT /usr/local/bin/inferd --listen 0.0.0.0:50051
USER root
