#!/bin/sh
# The devices a host's workers get, each checked to hold the model: one OpenCL "P:D" a line, or the
# single word "default" (one worker on the engine's pick) where the host has no GPU. serve.sh and
# install-systemd.sh call it when no devices are given.
#   sh deploy/devices.sh [MODEL]   MODEL default: "model" of CONFIG
#   sh deploy/devices.sh --gpus    only the parsing: `clgemma devices --plain` lines on stdin -> P:D lines
# Environment: DEVICES ("0:0,0:1": these, not the GPUs found; still checked), CONFIG (the workers'
# config, default conf/clgemma.conf: ctx, kv-type, max-seqs, kv-tokens, max-batch size the check),
# CTX (overrides the config's ctx), CLI (default build/clgemma).
# A worker holds the whole model on its one device (no tensor or pipeline parallelism), so a model
# that does not fit one device is refused here, with one line, before any worker starts.
set -eu
cd "$(dirname "$0")/.."

# GPUs of the first platform that has any: a card reached through two drivers (NVIDIA's OpenCL and
# PoCL's CUDA, say) is listed on both platforms and must not get two workers
gpus() { awk '$2 == "GPU" { split($1, pd, ":"); if (p == "") p = pd[1]; if (pd[1] == p) print $1 }'; }

[ "${1:-}" = --gpus ] && { gpus; exit 0; }

CONFIG=${CONFIG:-conf/clgemma.conf}
CLI=${CLI:-build/clgemma}
# the last uncommented "name = value" of the config
conf() { [ ! -f "$CONFIG" ] || sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/p" "$CONFIG" | tail -n 1; }
MODEL=${1:-$(conf model)}
[ -n "$MODEL" ] || { echo "devices: no model given and none in $CONFIG" >&2; exit 1; }
[ -x "$CLI" ] || { echo "devices: $CLI is not built (make build/clgemma)" >&2; exit 1; }

if [ -n "${DEVICES:-}" ]; then
  list=$(printf '%s\n' "$DEVICES" | tr ', ' '\n\n' | grep .)
else
  list=$("$CLI" devices --plain | gpus)
  [ -n "$list" ] || list=default
fi

# the worker's own sizing, so the check is the load's check (0 or unset: the engine's default)
set --
ctx=${CTX:-$(conf ctx)}; [ -n "$ctx" ] && [ "$ctx" != 0 ] && set -- "$@" --ctx "$ctx"
v=$(conf kv-type); [ -n "$v" ] && set -- "$@" --kv-type "$v"
v=$(conf max-seqs); [ -n "$v" ] && [ "$v" != 0 ] && set -- "$@" --seqs "$v"
v=$(conf kv-tokens); [ -n "$v" ] && [ "$v" != 0 ] && set -- "$@" --kv-tokens "$v"
v=$(conf max-batch); [ -n "$v" ] && [ "$v" != 0 ] && set -- "$@" --max-batch "$v"

for dev in $list; do
  if [ "$dev" = default ]; then why=$("$CLI" info -m "$MODEL" "$@" 2>&1 >/dev/null) && continue
  else why=$("$CLI" info -m "$MODEL" --device "$dev" "$@" 2>&1 >/dev/null) && continue; fi
  case "$why" in
    *"does not fit"*) echo "devices: refused on device $dev: ${why#clgemma: }; one worker holds the whole model on" \
      "one device (no tensor or pipeline parallelism): take a smaller quantization, a smaller ctx or a device with" \
      "more memory" >&2 ;;
    *) echo "devices: device $dev: ${why#clgemma: }" >&2 ;;
  esac
  exit 1
done
printf '%s\n' "$list"
