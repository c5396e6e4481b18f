#!/usr/bin/env python3
"""Build the tiny Gemma 4 fixtures with llama.cpp's own converter and quantizer, and their references.

For each variant (dense, moe, e; see VARIANTS) this script
  1. builds a tiny random-weight transformers Gemma4ForCausalLM (float32; norms, layer scalars and router
     scales randomized too) and saves it with save_pretrained next to the truncated real Gemma 4 tokenizer of
     tools/gemma4_fixture_vocab.py; the E variant also gets random k_proj/v_proj/k_norm on its KV-shared
     layers, as the published E2B/E4B checkpoints carry them (transformers ignores them on load);
  2. converts that directory with llama.cpp's convert_hf_to_gguf.py (.cache/llama.cpp, its own gguf-py) to
     f32, bf16 and q8_0, and quantizes the bf16 file to Q4_K_M with llama.cpp's llama_model_quantize
     (tools/llamacpp_gemma4_ref.py in .venv-ref): tests/fixtures/gemma4_<variant>{,_bf16,_q8_0,_q4_k_m}.gguf;
  3. computes references for three token sequences (8 random tokens, and two chat prompts rendered with the
     file's template; two run past the sliding window of 8):
       * tools/ref_gemma4.py (float64 numpy, reads only the GGUF; weights dequantized with gguf-py) on each file;
       * transformers float32 on the original weights and on each file's weights (dequantized, put back into
         the HF model by exact value match with the f32 file); it must agree with the float64 reference on the
         same weights to float32 rounding (asserted);
       * llama.cpp (llama-cpp-python, CPU) on each file: logits at every position, its own greedy
         continuation (recorded), and the logits after each of the reference's greedy tokens: at every greedy
         step where the reference's top-1/top-2 margin exceeds twice llama.cpp's largest |delta logit| on
         that row, llama.cpp's argmax must be the reference's token (asserted); its tokenization of the chat
         texts must give the sequences;
  4. writes tests/golden/gemma4_<variant>.json (tokens, greedy continuations and their margins, tensor types,
     hyperparameters, agreement numbers) and tests/golden/gemma4_<variant>.logits (float32 logits, layout in
     the JSON's "logits" section).

Run from the repository root (needs .venv-hf, .venv-ref and sh deploy/fetch_llama_ref.sh):
    .venv-hf/bin/python tools/gen_gemma4_fixtures.py [dense] [moe] [e]
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / ".cache" / "llama.cpp"
REF_PY = ROOT / ".venv-ref" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import Gemma4ForCausalLM, Gemma4TextConfig  # noqa: E402

import gemma4_fixture_vocab as fvocab  # noqa: E402
from fixture_checks import (agree, generate, greedy_entries, hf_greedy_margins, llama_run, new_check, r6,  # noqa: E402
                            top2_gap, golden_files, write_golden, write_logits)
from ref_gemma4 import Gemma4Model  # noqa: E402

S, F = "sliding_attention", "full_attention"
WINDOW = 8
N_GREEDY = 8
TYPES = ("f32", "bf16", "q8_0", "q4_k_m")
SUFFIX = {"f32": "", "bf16": "_bf16", "q8_0": "_q8_0", "q4_k_m": "_q4_k_m"}
GREEDY_MIN_GAP = 0.05        # transformers f32 greedy top-1/top-2 gap every fixture must have
ROUTER_MIN_GAP = 2e-3        # k-th vs (k+1)-th router logit gap (MoE)
HF_VS_REF_MAX = 2e-4         # transformers f32 vs float64 reference on the same weights
CHAT_CASES = (    # engine_chat_prompt must equal jinja2's rendering of the file's template (bos_token '')
    ([{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi\n"},
      {"role": "assistant", "content": "<|channel>thought\nhmm<channel|> Hello!"}, {"role": "user", "content": "Bye"}],
     True),
    ([{"role": "user", "content": "Hi\n"}], False),
)
CHATS = (
    [{"role": "user", "content": "Hi there!"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the capital of France?"}],
)

COMMON = dict(
    max_position_embeddings=2048, rms_norm_eps=1e-6, sliding_window=WINDOW, final_logit_softcapping=30.0,
    tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh", pad_token_id=0, bos_token_id=2, eos_token_id=1,
    rope_parameters={F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
                     S: {"rope_type": "default", "rope_theta": 10_000.0}},
)

# hidden size 256 everywhere, so that every matrix that reads the hidden state has rows of whole Q4_K/Q6_K
# blocks; the other row lengths (128, 64, 32) take llama-quantize's Q5_0 / Q8_0 fallbacks, as the real 26B's
# ffn_down (2112) and ffn_down_exps (704) do
VARIANTS = {
    # like 31B: 2 sliding layers then a full one, full layers with twice the head dim, fewer KV heads and K = V
    "dense": dict(hidden_size=256, intermediate_size=256, num_hidden_layers=3, layer_types=[S, S, F],
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32, global_head_dim=64,
                  num_global_key_value_heads=1, attention_k_eq_v=True, hidden_size_per_layer_input=0,
                  num_kv_shared_layers=0),
    # like 26B-A4B: a small dense MLP beside 6 experts (top-2) in every layer, router and per-expert scales
    "moe": dict(hidden_size=256, intermediate_size=32, num_hidden_layers=3, layer_types=[S, S, F],
                num_attention_heads=4, num_key_value_heads=2, head_dim=32, global_head_dim=64,
                num_global_key_value_heads=1, attention_k_eq_v=True, enable_moe_block=True, num_experts=6,
                top_k_experts=2, moe_intermediate_size=32, hidden_size_per_layer_input=0, num_kv_shared_layers=0),
    # like E2B: per-layer embeddings (4 x 64 = 256 wide), the last 2 layers reuse the K/V of layers 0 (sliding)
    # and 1 (full) and have the double-wide MLP
    "e": dict(hidden_size=256, intermediate_size=32, num_hidden_layers=4, layer_types=[S, F, S, F],
              num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=64,
              attention_k_eq_v=False, hidden_size_per_layer_input=64, num_kv_shared_layers=2,
              use_double_wide_mlp=True),
}
DESCRIPTION = {
    "dense": "31B-like: sliding, sliding, full; full layers with 2x head dim, 1 KV head and K=V (no attn_v), "
             "proportional partial RoPE",
    "moe": "26B-A4B-like: every layer has a dense MLP beside 6 experts (top-2), router input scale, per-expert "
           "scales, K=V full layer",
    "e": "E2B-like: per-layer embeddings, layers 2 and 3 reuse the K/V of layers 0 (sliding) and 1 (full) and have "
         "the double-wide MLP; the file also carries the unused random attn_k/attn_v/attn_k_norm of the shared "
         "layers, as published E-series checkpoints do",
}
SEEDS = {"dense": 4201, "moe": 4202, "e": 4203}


# ---- the HF model ----------------------------------------------------------------------------------------

def make_model(name: str, seed: int, n_vocab: int) -> Gemma4ForCausalLM:
    extra = {"vocab_size_per_layer_input": n_vocab} if VARIANTS[name]["hidden_size_per_layer_input"] else {}
    cfg = Gemma4TextConfig(vocab_size=n_vocab, **COMMON, **VARIANTS[name], **extra)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"      # the plain per-expert loop of Gemma4TextExperts.forward
    torch.manual_seed(seed)
    model = Gemma4ForCausalLM(cfg).eval()
    rng = np.random.default_rng(seed)
    sd = model.state_dict()
    with torch.no_grad():
        for n in sorted(sd):
            if n == "lm_head.weight":
                continue                                    # tied to embed_tokens
            t = sd[n]
            if n.endswith("embed_tokens.weight"):
                v = rng.standard_normal(t.shape) * 0.3     # x0 = 4.8 rms: the layers' outputs (rms ~1) matter
            elif n.endswith("embed_tokens_per_layer.weight"):
                v = rng.standard_normal(t.shape)
            elif n == "model.norm.weight":                  # random signs: with tied embeddings a positive final
                v = rng.uniform(0.2, 1.8, size=t.shape) * rng.choice([-1.0, 1.0], size=t.shape)   # norm
                #                                            makes every greedy step repeat the last token
            elif n.endswith("router.proj.weight"):
                v = rng.standard_normal(t.shape) * 2.0      # decisive routing (large top-k margins)
            elif t.ndim == 1 or n.endswith("layer_scalar"):
                v = rng.uniform(0.2, 1.8, size=t.shape)     # norms, scalars, router scales: far from 1 and 0
            else:
                v = rng.standard_normal(t.shape) / np.sqrt(t.shape[-1])
            t.copy_(torch.from_numpy(np.asarray(v, dtype=np.float32)))
    return model


def decoys(model: Gemma4ForCausalLM, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """k_proj / v_proj / k_norm of the KV-shared layers, which published E-series checkpoints carry."""
    c = model.config
    out = {}
    for il in range(c.num_hidden_layers - c.num_kv_shared_layers, c.num_hidden_layers):
        attn = model.model.layers[il].self_attn
        hd, nkv, H = attn.head_dim, attn.config.num_key_value_heads, c.hidden_size
        p = f"model.layers.{il}.self_attn."
        for w in ("k_proj", "v_proj"):
            out[p + w + ".weight"] = torch.from_numpy((rng.standard_normal((nkv * hd, H)) / np.sqrt(H)).astype(np.float32))
        out[p + "k_norm.weight"] = torch.from_numpy(rng.uniform(0.2, 1.8, size=(hd,)).astype(np.float32))
    return out


def hf_logits(model, tokens) -> np.ndarray:
    with torch.no_grad():
        out = model(input_ids=torch.tensor([tokens]), use_cache=False)
    return out.logits[0].double().numpy()


def greedy(logits_fn, tokens, n) -> tuple[list[int], list[float]]:
    seq, out, gaps = list(tokens), [], []
    for _ in range(n):
        row = logits_fn(seq)[-1]
        gaps.append(top2_gap(row))
        out.append(int(np.argmax(row)))
        seq.append(out[-1])
    return out, gaps


def router_gap(model, tokens) -> float | None:
    """Smallest gap between the k-th and (k+1)-th router logit over all tokens and MoE layers."""
    if not model.config.enable_moe_block:
        return None
    gaps = []
    k = model.config.top_k_experts

    def hook(mod, args, out):
        srt = torch.sort(out.double(), dim=-1, descending=True).values
        gaps.append(float((srt[:, k - 1] - srt[:, k]).min()))

    hs = [layer.router.proj.register_forward_hook(hook) for layer in model.model.layers]
    hf_logits(model, tokens)
    for h in hs:
        h.remove()
    return min(gaps)


def margins_ok(model, seqs) -> bool:
    """No near tie in any greedy step or expert choice, so float32 engines cannot legitimately disagree."""
    for toks in seqs:
        g, gaps = greedy(lambda s: hf_logits(model, s), toks, N_GREEDY)
        rg = router_gap(model, toks + g)
        if min(gaps) < GREEDY_MIN_GAP or (rg is not None and rg < ROUTER_MIN_GAP):
            return False
    return True


def with_weights(model, ref: Gemma4Model, names: dict[str, str]):
    """A float32 copy of model whose weights are the (dequantized) tensors of a GGUF."""
    m = Gemma4ForCausalLM(model.config).eval()
    m.load_state_dict(model.state_dict())
    sd = m.state_dict()
    with torch.no_grad():
        for g, h in names.items():
            sd[h].copy_(torch.from_numpy(ref.t[g].astype(np.float32)).reshape(sd[h].shape))
    return m


def gguf_to_hf_names(ref_f32: Gemma4Model, model) -> dict[str, str]:
    """GGUF tensor name -> HF parameter name, by exact equality of the f32 file's data with the HF weights
    (the converter copies values unchanged); rope_freqs (generated) and the decoys have no HF parameter."""
    by_bytes = {}
    for n, t in model.state_dict().items():
        if n != "lm_head.weight":
            by_bytes.setdefault(t.numpy().astype(np.float32).tobytes(), []).append(n)
    names = {}
    for g, a in ref_f32.t.items():
        hit = by_bytes.get(a.astype(np.float32).tobytes())
        if hit:
            assert len(hit) == 1, (g, hit)
            names[g] = hit[0]
    return names


# ---- llama.cpp's converter and quantizer -------------------------------------------------------------------

def run(cmd: list[str], what: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(LLAMA / "gguf-py"))
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit(f"{what} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")


def save_hf(model, out: Path, tokdir: Path, extra: dict[str, torch.Tensor]) -> None:
    model.save_pretrained(out)
    for f in tokdir.iterdir():
        shutil.copy(f, out / f.name)
    if extra:
        st = out / "model.safetensors"
        sd = load_file(st)
        sd.update(extra)
        save_file(sd, st, metadata={"format": "pt"})


def convert(hf_dir: Path, paths: dict[str, Path]) -> None:
    for t in ("f32", "bf16", "q8_0"):
        run([sys.executable, LLAMA / "convert_hf_to_gguf.py", hf_dir, "--outfile", paths[t], "--outtype", t],
            f"convert_hf_to_gguf.py --outtype {t}")
    run([REF_PY, ROOT / "tools" / "llamacpp_gemma4_ref.py", "quantize", paths["bf16"], paths["q4_k_m"], "q4_k_m"],
        "llama_model_quantize Q4_K_M")


def check_tokenizer_keys(path: Path) -> None:
    """The converter must have written the real file's tokenizer keys: same key set, the same token texts,
    types and scores at the kept real ids, the same special ids and flags."""
    import gguf
    a, b = gguf.GGUFReader(str(path)), gguf.GGUFReader(str(fvocab.VOCAB_GGUF))
    ka = {k: f.contents() for k, f in a.fields.items() if k.startswith("tokenizer.")}
    kb = {k: f.contents() for k, f in b.fields.items() if k.startswith("tokenizer.")}
    assert set(ka) == set(kb), set(ka) ^ set(kb)
    for k in ka:
        if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            assert ka[k][:fvocab.N_REAL] == kb[k][:fvocab.N_REAL], k
        elif k not in ("tokenizer.ggml.merges", "tokenizer.chat_template"):
            assert ka[k] == kb[k], (k, ka[k], kb[k])
    assert ka["tokenizer.chat_template"] == fvocab.TEMPLATE.read_text(encoding="utf-8")


# ---- one variant -------------------------------------------------------------------------------------------

def sequences(tok, rng: np.random.Generator) -> tuple[list[list[int]], list[str]]:
    texts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in CHATS]
    body = rng.integers(fvocab.FIRST_PIECE, len(tok), size=7)
    seqs = [[tok.bos_token_id] + [int(x) for x in body]]
    for t in texts:
        seqs.append(tok(t, add_special_tokens=False)["input_ids"])     # the template writes <bos> itself
    return seqs, texts


def build_variant(name: str, tokdir: Path, tok) -> dict:
    n_vocab = len(tok)
    seqs, texts = sequences(tok, np.random.default_rng(SEEDS[name] + 1_000_000))
    seed = SEEDS[name]
    while True:
        model = make_model(name, seed, n_vocab)
        if margins_ok(model, seqs):
            break
        print(f"{name}: seed {seed} has a near tie, trying {seed + 100}")
        seed += 100
    fixtures = ROOT / "tests" / "fixtures"
    paths = {t: fixtures / f"gemma4_{name}{SUFFIX[t]}.gguf" for t in TYPES}
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        hf_dir = td / f"gemma-4-tiny-{name}"
        extra = decoys(model, np.random.default_rng(seed + 2_000_000)) if model.config.num_kv_shared_layers else {}
        save_hf(model, hf_dir, tokdir, extra)
        convert(hf_dir, paths)
        check_tokenizer_keys(paths["q4_k_m"])
        refs = {t: Gemma4Model(str(paths[t])) for t in TYPES}
        ref_greedy = {t: [greedy(refs[t].forward, s, N_GREEDY)[0] for s in seqs] for t in TYPES}
        # llama.cpp on the sequences, and on each sequence followed by the reference's greedy tokens
        llama = {t: llama_run(paths[t], seqs + [s + g for s, g in zip(seqs, ref_greedy[t])], texts, N_GREEDY, td)
                 for t in TYPES}
    for t in TYPES:
        assert llama[t]["tokenized"] == seqs[1:], (name, t, llama[t]["tokenized"], seqs[1:])

    names = gguf_to_hf_names(refs["f32"], model)
    shared = range(refs["f32"].first_shared, refs["f32"].n_layer)
    no_hf = {"rope_freqs.weight"} | {f"blk.{il}.{w}.weight" for il in shared for w in ("attn_k", "attn_v", "attn_k_norm")}
    assert set(refs["f32"].t) - set(names) == no_hf & set(refs["f32"].t), sorted(set(refs["f32"].t) - set(names))
    model64 = Gemma4ForCausalLM(model.config).eval()
    model64.load_state_dict(model.state_dict())
    model64 = model64.double()
    hf_on = {t: (model if t == "f32" else with_weights(model, refs[t], names)) for t in TYPES}

    logits = {f"hf:{t}": [] for t in ("f32", "bf16")} | {f"ref:{t}": [] for t in TYPES}
    check = new_check(TYPES)
    agree(name, TYPES, refs, hf_on, model64, seqs, llama, logits, check, HF_VS_REF_MAX, hf_logits)
    hf_greedy = hf_greedy_margins(model, seqs, N_GREEDY, check, lambda s: hf_logits(model, s), router_gap)
    seq_out = greedy_entries(name, TYPES, refs, seqs, texts, hf_greedy, ref_greedy, llama, check, N_GREEDY)
    assert check["max_abs_hf64_vs_ref_f32"] <= 1e-4, check

    bin_path = ROOT / "tests" / "golden" / f"gemma4_{name}.logits"
    sets = write_logits(logits, bin_path)
    trace: dict = {}
    refs["f32"].forward(seqs[0], trace=trace)
    c = model.config
    golden = {
        "variant": name,
        "description": DESCRIPTION[name],
        "generator": f"tools/gen_gemma4_fixtures.py (weight seed {seed}): transformers {__import__('transformers').__version__}, "
                     "llama.cpp convert_hf_to_gguf.py + llama_model_quantize (llama-cpp-python 0.3.36 sdist)",
        **golden_files(paths, refs, tokdir, n_vocab, fvocab.N_REAL, "tools/gemma4_fixture_vocab.py", c),
        "hparams": {
            "n_layer": c.num_hidden_layers, "n_embd": c.hidden_size, "n_vocab": n_vocab,
            "is_swa": [x == S for x in c.layer_types], "n_kv_shared": c.num_kv_shared_layers,
            "kv_source_per_layer": [refs["f32"].kv_source(i) for i in range(c.num_hidden_layers)],
            "sliding_window": c.sliding_window,
        },
        "n_greedy": N_GREEDY,
        "sequences": seq_out,
        "chat": [{"roles": [m["role"] for m in msgs], "contents": [m["content"] for m in msgs],
                  "add_generation_prompt": gen,
                  "prompt": tok.apply_chat_template(msgs, add_generation_prompt=gen, tokenize=False, bos_token="")}
                 for msgs, gen in CHAT_CASES],
        "logits": {
            "file": str(bin_path.relative_to(ROOT)),
            "format": "little-endian float32; the sets below one after another, each holding the sequences one "
                      "after another, each [position][vocab]",
            "sets": sets,
            "about": {
                "hf:f32": "transformers float32 (eager) on the original weights",
                "hf:bf16": "transformers float32 on the bf16 file's weights (each tensor as the file holds it)",
                "ref:<type>": "tools/ref_gemma4.py float64 on the <type> file, weights dequantized by gguf-py",
            },
        },
        "check": check | {
            "thresholds": {"greedy_min_gap": GREEDY_MIN_GAP, "router_min_gap": ROUTER_MIN_GAP,
                           "hf_vs_ref_max": HF_VS_REF_MAX},
            "note": "max |delta logit| over every position of all sequences (logits lie in [-30, 30]); llama.cpp "
                    "(CPU) rounds activations to bf16 / q8 for bf16 and quantized weights, hence its larger "
                    "deltas; llama_greedy_steps_checked: greedy steps (of llama_greedy_steps_total) where the "
                    "reference's top-2 margin exceeded twice llama.cpp's max |delta| on that row, so that its "
                    "argmax had to be (and was) the reference's token",
        },
        "trace_seq0": {
            "note": "float64 reference on the f32 file for sequences[0]: scaled input embeddings and every layer's "
                    "output (after layer_output_scale), [position][dim]",
            "inp_scaled": r6(trace["inp_scaled"]),
            "layer_out": [r6(x) for x in trace["layer_out"]],
        },
    }
    return write_golden(golden, ROOT / "tests" / "golden" / f"gemma4_{name}.json", paths, bin_path, name, seed)


if __name__ == "__main__":
    sys.exit(generate(VARIANTS, fvocab.write, build_variant, 5_000_000))
