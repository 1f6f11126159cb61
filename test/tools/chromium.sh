#!/usr/bin/env bash
# Prints the path of a Chromium for the queue page's browser test (test/e2e TestQueuePage),
# installing Debian's package first when there is none: apt-get, as root or through
# `sudo -n`. Debian's Chromium downloads nothing by itself; the test also starts it with
# background networking, component updates and sync turned off.
#   CPS_CHROMIUM=/path/to/chromium   use that one
set -euo pipefail
for candidate in "${CPS_CHROMIUM:-}" chromium chromium-browser; do
  if [[ -n $candidate ]] && path=$(command -v "$candidate"); then
    echo "$path"
    exit 0
  fi
done
sudo=()
if [[ $(id -u) != 0 ]]; then sudo=(sudo -n); fi
export DEBIAN_FRONTEND=noninteractive
echo "chromium.sh: installing Debian's chromium (apt-get)" >&2
"${sudo[@]}" apt-get update -qq >&2
# fonts-dejavu-core: text in screenshots on a machine without fonts.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
command -v chromium
