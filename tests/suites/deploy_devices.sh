#!/bin/sh
# deploy/devices.sh (issue 24 item 1): which devices get a worker when none are named — the GPUs of the
# first platform that lists any, parsed from `clgemma devices --plain` — and the fit check that refuses
# a model too big for one device with one line, before any worker starts.
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
same() { # name, expected, got
  if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=1; fi
}
gpus() { printf "$1" | sh deploy/devices.sh --gpus | tr '\n' ' '; }

same devices_gpus_none "" "$(gpus '0:0 CPU 6805028864 pthread-haswell-AMD EPYC\n')"
same devices_gpus_two "0:0 0:1 " "$(gpus '0:0 GPU 85899345920 NVIDIA H100 80GB HBM3\n0:1 GPU 85899345920 NVIDIA H100 80GB HBM3\n')"
# PoCL's CPU first, the cards on platform 1, and the same cards again through a second driver on 2
same devices_gpus_first_platform_only "1:0 1:1 " \
  "$(gpus '0:0 CPU 100 cpu\n1:0 GPU 85899345920 NVIDIA H200\n1:1 GPU 85899345920 NVIDIA H200\n2:0 GPU 85899345920 NVIDIA H200\n')"
same devices_gpus_skip_others "0:1 " "$(gpus '0:0 other 100 accel\n0:1 GPU 100 a gpu\n')"

# the real listing of this machine parses, and the real pick: this machine's GPUs, or "default"
if build/clgemma devices --plain > "$tmp/plain" && grep -Eq '^[0-9]+:[0-9]+ (GPU|CPU|other) [0-9]+ .' "$tmp/plain" &&
   [ "$(wc -l < "$tmp/plain")" -eq "$(build/clgemma devices | grep -c '^  device ')" ]; then
  echo "PASS devices_plain_listing ($(head -n 1 "$tmp/plain"))"
else echo "FAIL devices_plain_listing: $(cat "$tmp/plain")"; fails=1; fi
want=$(sh deploy/devices.sh --gpus < "$tmp/plain"); [ -n "$want" ] || want=default
same devices_pick_this_host "$want" "$(sh deploy/devices.sh models/gemma-3-270m-q4_k_m.gguf 2>&1)"
same devices_named_kept "0:0" "$(DEVICES=0:0 sh deploy/devices.sh 2>&1)"

# too big: one line naming weights against device memory, exit 1
.venv/bin/python tools/make_bad_models.py "$tmp" models/gemma-3-270m-q4_k_m.gguf >/dev/null 2>&1
if out=$(sh deploy/devices.sh "$tmp/huge.gguf" 2>&1); then echo "FAIL devices_refuses_too_big: $out"; fails=1
elif [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q 'needs 64.00 GiB of weights but device .* has .*no tensor or pipeline parallelism'; then
  echo "PASS devices_refuses_too_big"
else echo "FAIL devices_refuses_too_big: $out"; fails=1; fi
# the workers' config sizes the check: a context no cache holds is refused too
printf 'kv-tokens = 1000000000\n' > "$tmp/big-kv.conf"
if out=$(CONFIG=$tmp/big-kv.conf sh deploy/devices.sh models/gemma-3-270m-q4_k_m.gguf 2>&1); then
  echo "FAIL devices_checks_with_the_config: $out"; fails=1
else echo "PASS devices_checks_with_the_config"; fi
if out=$(DEVICES=0:99 sh deploy/devices.sh 2>&1); then echo "FAIL devices_unknown_device: $out"; fails=1
else same devices_unknown_device "devices: device 0:99: no OpenCL device 0:99 (see clgemma devices)" "$out"; fi
exit $fails
