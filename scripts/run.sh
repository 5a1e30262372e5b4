#!/usr/bin/env bash
# Main job: set up and build, then print the device report and run a short
# demo workload on the best available device.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "$VPY" examples/demo.py "$@"
