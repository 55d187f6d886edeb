# syntax=docker/dockerfile:1
# The bff server and the GitHub simulator in a small Debian image.
#   docker build -t bff .
#   docker run --rm -p 8080:8080 -e GITHUB_TOKEN bff
# Stage 1 builds release binaries with the Swift toolchain; stage 2 holds only the binaries, their
# resource bundles, Public/ and the shared libraries they load.

ARG SWIFT_VERSION=6.3
ARG DEBIAN_RELEASE=bookworm

FROM swift:${SWIFT_VERSION}-${DEBIAN_RELEASE} AS build
# The C libraries the system-library targets wrap (CLibevent, CSQLite, CHiredis).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libevent-dev libsqlite3-dev libhiredis-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# Dependencies first, so editing sources does not re-fetch packages.
COPY Package.swift ./
RUN swift package resolve
COPY Sources/ ./Sources/
# SwiftPM loads every target of the manifest, test targets included, so their folders must exist.
COPY Tests/ ./Tests/
# Static Swift runtime: the runtime image needs no Swift toolchain, only the C libraries below.
RUN swift build -c release --static-swift-stdlib --product bff \
    && swift build -c release --static-swift-stdlib --product github-sim \
    && mkdir -p /staging/bin \
    && cp "$(swift build -c release --show-bin-path)/bff" "$(swift build -c release --show-bin-path)/github-sim" \
        /staging/bin/ \
    && find "$(swift build -c release --show-bin-path)" -maxdepth 1 -name '*.resources' \
        -exec cp -R {} /staging/bin/ \;

FROM debian:${DEBIAN_RELEASE}-slim
# libevent, hiredis and SQLite for the server; libcurl (FoundationNetworking) and CA certificates for HTTPS
# to GitHub; curl for the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates curl libcurl4 libevent-2.1-7 libhiredis0.14 libsqlite3-0 tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /app --shell /usr/sbin/nologin bff
WORKDIR /app
# Binaries beside their resource bundles (Bundle.module looks next to the executable).
COPY --from=build /staging/bin/ /app/bin/
COPY Public/ /app/Public/
# The search cache lives in /app/var, the one folder the server writes.
RUN mkdir -p /app/var && chown bff:bff /app/var
VOLUME ["/app/var"]
ENV PATH="/app/bin:${PATH}" \
    PORT=8080
# Numeric, so orchestrators can verify the user is not root.
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/bin/sh", "-c", "curl -fsS \"http://127.0.0.1:${PORT}/healthz\" > /dev/null || exit 1"]
STOPSIGNAL SIGTERM
CMD ["bff", "--host", "0.0.0.0"]
