#!/bin/bash
# Issue 23's image figures (docs/design-vision.md 6): clgemma against llama.cpp CUDA on the same files and the
# same PNGs, on the GPU machine, in one device call (repo root; $OUT from the device tool, else ./vision-out).
#   bash tools/gpu_vision.sh [MODELS] [BUDGETS]
# MODELS (default "31b e4b"): 31b = Gemma 4 31B Q4_K_M with the 31B tower (1152 wide, 27 layers, 16 x 72, MLP
#   4304, standardize), e4b = E4B Q8_0 with the E tower (768, 16 layers, 12 x 64, MLP 3072, clipped linears);
#   26b / e2b likewise; tiny = the test shapes (seconds: a check of this script). Text and projector written by
#   `clgemma synth` (llama.cpp's layouts, the real vocabulary from .gpu/vocab-gemma-4.gguf.xz, random weights:
#   timing only); projectors F16 (`convert_hf_to_gguf --outtype f16`).
# BUDGETS (default "70 280 1120"): soft tokens per image. Each image is made by `clgemma vbench --save-images` at
#   a size of exactly that many tokens (sides multiples of 48), so neither side resizes it: llama.cpp runs with
#   --image-min-tokens T --image-max-tokens T.
# Rows of $OUT/vision.md (ratio > 1: clgemma faster; llama.cpp: llama-mtmd-cli, -ngl 99 -fa on -b/-ub 2048, an
#   image never split across ubatches, so the 31B's bidirectional image attention holds on both sides; --jinja
#   for Gemma 4's template, -lv 4 for the library's timing lines):
#   encode 1 image ms     clgemma: median of REPS (default 3) encodes, REPS_LARGE (default 1) at 560 and 1120
#                         tokens, measured last; llama.cpp: "mtmd batch encoding done in N ms" of its 1-image runs
#                         (median of LLAMA_REPS, default 1, processes, each loading the model)
#   encode ms/image of 8  clgemma: 8 images in one engine_image_encode (as many per encoder pass as its scratch,
#                         one image of the run's largest budget, holds); llama.cpp: the 8 encodes of an 8-image
#                         prompt (mtmd-cli encodes each image alone: text chunks split its batches), their mean
#   TTFT ms               encode + prefill + first token of a 1-image prompt; llama.cpp: its encode plus
#                         "prompt eval time" (every multi-token decode: text chunks and the image's rows)
#   prefill ms            the same without the encode
#   TTFT cached ms        clgemma only: the same prompt again (image rows held, KV from the prefix cache)
#   8 images ms, tok/s    clgemma: 8 one-image prompts, encodes then one engine step; llama.cpp (no batching
#                         of prompts in mtmd-cli): one prompt of 8 images, its encodes plus prompt eval time
# The clgemma binary: $CG, else .gpu/now/clgemma, else build/clgemma (built on Debian 12: the libraries it links
# beyond the machine's, image decoders included, are .gpu/debs' packages, which .gpu/gpu-env.sh unpacks).
# llama.cpp is built once per machine into LLAMA_DIR (default /tmp/lcpp) from .gpu/llama-slim.tar.xz
# (tools/gpu_llama_src.sh), CUDA sm_90a, target llama-mtmd-cli, in the background while clgemma measures. Work
# stops being started TIME_S (default 570) seconds after the start, so a 600 s call ends with its table; rows go to
# $OUT as they are measured.
# VBENCH_ARGS: more arguments of clgemma's vbench runs (--profile: per-kernel times of an encode, in run.log;
#   --set NAME=VALUE).
# KEEP=1 keeps the model files in VIS_DIR (default /tmp/vision) for a later call on the same machine.
models=${1:-31b e4b}
budgets=${2:-70 280 1120}
reps=${REPS:-3}
lreps=${LLAMA_REPS:-1}
out=${OUT:-vision-out}
lcpp=${LLAMA_DIR:-/tmp/lcpp}
work=${VIS_DIR:-/tmp/vision}
t_end=$(( $(date +%s) + ${TIME_S:-570} ))
mkdir -p "$out" "$work"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/cc}
cg=${CG:-build/clgemma}; [ -z "${CG:-}" ] && [ -x .gpu/now/clgemma ] && cg=.gpu/now/clgemma
[ -x "$cg" ] || { echo "gpu_vision: no clgemma binary (\$CG, .gpu/now/clgemma or build/clgemma)" >&2; exit 1; }
cgrun() { "$cg" "$@"; }
missing=$(ldd "$cg" | grep "not found")
[ -n "$missing" ] && { echo "gpu_vision: $cg lacks libraries (.gpu/debs, which .gpu/gpu-env.sh unpacks):"
                       echo "$missing"; exit 1; }
left() { echo $(( t_end - $(date +%s) )); }
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/run.log"; }

bin=$lcpp/build/bin
if [ ! -x $bin/llama-mtmd-cli ]; then
  ( t=$(date +%s)
    mkdir -p $lcpp && { [ -d $lcpp/llama.cpp ] || tar -xJf .gpu/llama-slim.tar.xz -C $lcpp; } &&
    cmake -S $lcpp/llama.cpp -B $lcpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      > $work/llama-build.log 2>&1 &&
    nice ninja -C $lcpp/build llama-mtmd-cli >> $work/llama-build.log 2>&1 &&
    echo "llama.cpp built in $(( $(date +%s) - t )) s" ) > $work/build.status 2>&1 &
  build_pid=$!
fi
llama_ready() {
  [ -n "${build_pid:-}" ] && { wait $build_pid; build_pid=; el "$(cat $work/build.status)"; }
  [ -x $bin/llama-mtmd-cli ] && return 0
  el "llama.cpp build failed:"; tail -20 $work/llama-build.log | tee -a "$out/run.log"; return 1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
device=$(head -1 "$out/device.txt" | cut -d, -f1)

list=$(echo $budgets | tr ' ' ,)
cgrun vbench --save-images $work/img --image-tokens $list -b 8 2>>"$out/run.log" || exit 1
vocab=$work/vocab-g4.gguf
[ -f $vocab ] || xz -dc .gpu/vocab-gemma-4.gguf.xz > $vocab || exit 1

# a model's synth names, mix, table name; its files' paths
spec() {
  case $1 in 31b) arch=gemma4-31b mix=q4_k_m name="31B Q4_K_M + 31B tower" ;;
             26b) arch=gemma4-26b-a4b mix=q4_k_m name="26B-A4B Q4_K_M + 31B tower" ;;
             e4b) arch=gemma4-e4b mix=q8_0 name="E4B Q8_0 + E tower" ;;
             e2b) arch=gemma4-e2b mix=q8_0 name="E2B Q8_0 + E tower" ;;
             tiny) arch=gemma4-tiny mix=q8_0 name="tiny (a smoke test of this script)" ;;
             *) echo "gpu_vision: unknown model $1" >&2; return 1 ;; esac
  text=$work/$1.gguf; mm=$work/mmproj-$1.gguf
}
# writes a model's pair (text, projector) when missing; $work/files-M.ok when both are there
files() {
  spec $1 || return 1
  { [ -f $text ] || cgrun synth $arch -o $text --mix $mix --vocab $vocab; } &&
  { [ -f $mm ] || cgrun synth ${arch/gemma4/gemma4v} -o $mm; } && touch $work/files-$1.ok
}

# clgemma's figures of a model at some budgets: cg_model M "T ..." REPS; JSON lines appended to $work/cg-M.json
cg_model() {
  [ -n "$2" ] || return 0
  [ $(left) -gt 30 ] || { el "clgemma $1 $2: skipped (time)"; return 1; }
  timeout $(left) "$cg" vbench -m $text --mmproj $mm --image-tokens $(echo $2 | tr ' ' ,) \
    -r $3 -b 8 -o $work/cg.part ${VBENCH_ARGS:-} \
    >> "$out/clgemma.md" 2>>"$out/run.log"
  rc=$?; cat $work/cg.part >> $work/cg-$1.json 2>/dev/null; rm -f $work/cg.part
  el "clgemma $1 $2 (-r $3): rc $rc"
}

# one llama-mtmd-cli run: TAG T IMAGES...; its log in $work/ll-TAG.log
ll_run() {
  tag=$1 T=$2; shift 2
  [ $(left) -gt 20 ] || { el "llama $tag: skipped (time)"; return 1; }
  args=(); for i in "$@"; do args+=(--image "$i"); done
  timeout $(left) $bin/llama-mtmd-cli -m $text --mmproj $mm -ngl 99 -fa on -b 2048 -ub 2048 \
    -c $(( $# * (T + 32) + 512 )) --image-min-tokens $T --image-max-tokens $T -n 1 --temp 0 --jinja -lv 4 \
    -p "What does it show? Answer briefly." "${args[@]}" > $work/ll-$tag.log 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    el "llama $tag: rc $rc"; grep -iE "error|failed|abort" $work/ll-$tag.log | head -5 >> "$out/run.log"
  fi
  { echo "== $tag"; grep -E "encoding done|image decoded|prompt eval time|n_tokens_batch|causal" $work/ll-$tag.log; } \
    >> "$out/llama.log"
  return $rc
}
ll_model() {
  llama_ready || return 1
  for T in $budgets; do
    for r in $(seq 1 $lreps); do ll_run $1-$T-1-$r $T $work/img/vbench-$T-0.png; done
    ll_run $1-$T-8 $T $work/img/vbench-$T-{0..7}.png
  done
}

# the side-by-side rows of a model from its logs
table() {
  python3 - "$1" "$2" "$budgets" "$lreps" "$work" "$device" <<'PY' | tee -a "$out/vision.md"
import json, re, statistics as st, sys
m, name, budgets, lreps, work, device = sys.argv[1:7]
cg = {}
try:
    for l in open(f"{work}/cg-{m}.json"):
        j = json.loads(l); cg[j["budget"]] = j
except OSError:
    pass
def log(tag):
    try:
        return open(f"{work}/ll-{tag}.log", errors="replace").read()
    except OSError:
        return ""
def enc(t): return [float(x) for x in re.findall(r"encoding done in (\d+) ms", t)]
def pe(t):
    r = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", t)
    return (float(r.group(1)), int(r.group(2))) if r else None
med = lambda v: st.median(v) if v else None
def row(T, fig, a, b, faster_is_lower=True):
    f = lambda x: "-" if x is None else f"{x:.1f}"
    ratio = "-" if a in (None, 0) or b in (None, 0) else f"{(b / a) if faster_is_lower else (a / b):.2f}"
    print(f"| {name} | {T} | {fig} | {f(a)} | {f(b)} | {ratio} |")
for T in map(int, budgets.split()):
    c = cg.get(T, {})
    one = [log(f"{m}-{T}-1-{r}") for r in range(1, int(lreps) + 1)]
    e1 = med([e for t in one for e in enc(t)[:1]])
    p1 = med([p[0] for p in map(pe, one) if p])
    eight = log(f"{m}-{T}-8")
    e8, p8 = enc(eight), pe(eight)
    row(T, "encode 1 image ms", c.get("encode_ms"), e1)
    row(T, "encode ms/image, 8 images", c.get("encode_batch_ms_per_image"), st.mean(e8) if len(e8) == 8 else None)
    row(T, "TTFT ms (1-image prompt)", c.get("ttft_ms"), e1 + p1 if e1 is not None and p1 is not None else None)
    row(T, "prefill ms (TTFT less encode)", c.get("ttft_prefill_ms"), p1)
    row(T, "TTFT cached ms", c.get("ttft_cached_ms"), None)
    ll8 = sum(e8) + p8[0] if len(e8) == 8 and p8 else None
    row(T, "8 images ms (encodes + prefill)", c.get("batch_prompts_ms"), ll8)
    row(T, "8 images prompt tok/s", c.get("batch_prompt_tok_s"), p8[1] / ll8 * 1e3 if ll8 and p8 else None, False)
PY
}

if [ ! -f "$out/vision.md" ]; then
  { echo "Device: $device. clgemma: vbench medians of $reps; llama.cpp: llama-mtmd-cli ($lreps 1-image run(s) and one"
    echo "8-image run per budget). Ratio = llama.cpp time / clgemma time (tok/s: clgemma / llama.cpp): > 1,"
    echo "clgemma faster."
    echo
    echo "| model | tokens | figure | clgemma | llama.cpp | ratio |"
    echo "| --- | --- | --- | --- | --- | --- |"; } | tee "$out/vision.md"
fi
# every model's files written at once in the background (one thread each). Then clgemma at the small budgets,
# llama.cpp (built meanwhile) at all, and clgemma at the large ones last (REPS_LARGE, default 1: 0.2 s an encode
# at 1,120 tokens on the 31B tower, seconds with --set VIS_FA=0), so that what a cut-short call loses is that
small=; large=
for T in $budgets; do if [ $T -ge 560 ]; then large="$large $T"; else small="$small $T"; fi; done
for m in $models; do
  rm -f $work/files-$m.ok $work/cg-$m.json
  ( files $m >> $work/synth-$m.log 2>&1 ) & eval "files_$m=$!"
done
for m in $models; do
  eval "wait \$files_$m"; spec $m || continue
  cat $work/synth-$m.log >> "$out/run.log"
  [ -f $work/files-$m.ok ] || { el "files of $m failed"; continue; }
  el "files of $m: $(du -h $text | cut -f1) text, $(du -h $mm | cut -f1) projector"
  cg_model $m "$small" $reps
done
for m in $models; do spec $m && [ -f $work/files-$m.ok ] && ll_model $m; done
for m in $models; do spec $m && [ -f $work/files-$m.ok ] && cg_model $m "$large" ${REPS_LARGE:-1}; done
for m in $models; do
  spec $m && [ -f $work/files-$m.ok ] || continue
  table $m "$name"
  [ "${KEEP:-0}" = 1 ] || rm -f $text $mm
done
tail -n 30 $work/llama-build.log > "$out/llama-build.log" 2>/dev/null
el "done"
