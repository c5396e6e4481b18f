#!/bin/sh
# End to end through nginx (TLS, API key) to one clgemma-fcgi worker with a vision projector: a tiny Gemma 4 with
# the real multimodal tokens and chat template (tests/fixtures/gemma4_vision_text_q8_0.gguf) and its mmproj
# (tests/fixtures/gemma4_vision_mmproj.gguf): OpenAI image_url parts through the openai SDK and raw HTTP, every
# format, the image cache and prefix reuse, videos as frames and as video_url files (tests/fixtures/video_*), refusals
# (tests/e2e/test_images.py).
cd "$(dirname "$0")/../.." || exit 1
E2E_MODEL=tests/fixtures/gemma4_vision_text_q8_0.gguf
E2E_NGINX_MAX_BODY=32m
. tests/e2e/lib.sh
e2e_start e2e_images --ctx 1024 --max-seqs 2 --max-queue 4 --threads 10 --mmproj tests/fixtures/gemma4_vision_mmproj.gguf \
  --image-tokens 70 --max-images 4
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_images.py
