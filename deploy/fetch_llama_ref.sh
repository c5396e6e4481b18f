#!/bin/sh
# Fetches llama.cpp's source of October 2026 (inside the PyPI sdist llama-cpp-python==0.3.36) into the
# git-ignored .cache/llama.cpp/: the real Gemma 4 and Qwen vocabularies with llama.cpp's tokenizer cases, the
# real chat templates, the converter and gguf-py. Tests and tools read these references; nothing
# from it is built into the product. Prints the directory; quiet when it is already there.
set -e
cd "$(dirname "$0")/.."
ver=0.3.36
dst=.cache/llama.cpp
if [ ! -f "$dst/.complete-$ver" ]; then
  [ -x .venv/bin/pip ] || sh deploy/setup.sh >&2
  tmp=.cache/llama-cpp-python-sdist
  rm -rf "$tmp" "$dst"; mkdir -p "$tmp"
  tarball=${LLAMA_CPP_SDIST:-}
  if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
    .venv/bin/pip download -q --disable-pip-version-check --no-deps --no-binary :all: --no-build-isolation \
      "llama-cpp-python==$ver" -d "$tmp" >&2 2>/dev/null ||
    .venv/bin/pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$ver" -d "$tmp" >&2
    tarball=$tmp/llama_cpp_python-$ver.tar.gz
  fi
  pre=llama_cpp_python-$ver/vendor/llama.cpp
  tar -xzf "$tarball" -C "$tmp" "$pre/models" "$pre/convert_hf_to_gguf.py" "$pre/conversion" "$pre/gguf-py" \
    "$pre/src/llama-vocab.cpp" "$pre/src/models" "$pre/LICENSE"
  mv "$tmp/$pre" "$dst"
  rm -rf "$tmp"
  touch "$dst/.complete-$ver"
fi
echo "$dst"
