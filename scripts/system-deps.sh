#!/usr/bin/env bash
# Install the Debian packages the integration tests use, only when missing.
set -euo pipefail
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
if ((${#need[@]})); then
  echo "system-deps: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian starts nginx on install where it can; the tests run their own instances.
  $SUDO service nginx stop >/dev/null 2>&1 || true
fi
