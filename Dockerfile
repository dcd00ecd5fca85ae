# Images built from local files only: a prebuilt static truss-push (and, for
# the debug target, Debian's static busybox) laid out per architecture in the
# build context:
#
#   dist/<TARGETARCH>/truss-push   static binary (see .github/workflows/release.yml)
#   dist/<TARGETARCH>/busybox      /bin/busybox from busybox-static (debug only)
#   dist/rootfs.tar                tmp/ only, mode 1777, owned by 0:0
#
#   docker build --target release --build-arg TARGETARCH=amd64 -t truss-push .
#   docker build --target debug   --build-arg TARGETARCH=amd64 -t truss-push:debug .
#
# No USER: GitHub runs container steps as root and bind-mounts runner-owned
# files. The binary is world-readable and its only writable need is a
# sticky, world-writable /tmp (the truss is packaged into a temporary file),
# so `--user` works for CI systems that want non-root.

FROM scratch AS release
ARG TARGETARCH
ARG VERSION=dev
LABEL org.opencontainers.image.title="truss-push" \
      org.opencontainers.image.description="Deploy Truss models to Baseten from CI and report the truth about the deploy" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="https://github.com/truss-push/truss-push"
# ADD of a local tar keeps its modes; COPY of a directory would make /tmp 0755.
ADD dist/rootfs.tar /
COPY dist/${TARGETARCH}/truss-push /usr/local/bin/truss-push
ENV PATH=/usr/local/bin:/bin
ENTRYPOINT ["/usr/local/bin/truss-push"]

# For CI systems that start job images through a shell (GitLab with
# `entrypoint: [""]`, CircleCI, Jenkins): same entrypoint, plus sh and coreutils.
FROM release AS debug
ARG TARGETARCH
COPY dist/${TARGETARCH}/busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
