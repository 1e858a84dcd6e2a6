#!/usr/bin/env bash
# Make sure the Debian tools the pipeline shells out to are present: Ghostscript (pre-compression)
# and Tesseract (the CPU OCR engine). Installs them when missing and running as root; otherwise
# says exactly what to install. Usage: scripts/system-deps.sh [extra-debian-package ...]
set -euo pipefail
need=()
command -v gs >/dev/null 2>&1 || need+=(ghostscript)
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr tesseract-ocr-eng)
for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "missing system packages: ${need[*]}" >&2
  echo "install them first, e.g.: sudo apt-get install ${need[*]}" >&2
  exit 1
fi
