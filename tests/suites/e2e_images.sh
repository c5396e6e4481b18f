#!/bin/sh
# End to end through nginx (TLS, API key) to one clgemma-fcgi worker with a vision projector: a tiny Gemma 4 with
# the real multimodal tokens and chat template (tests/fixtures/gemma4_vision_text_q8_0.gguf) and its mmproj
# (tests/fixtures/gemma4_vision_mmproj.gguf): OpenAI image_url parts through the openai SDK and raw HTTP, every
# format, the image cache and prefix reuse, image URLs fetched from an allowed local host, videos as frames and
# as video_url files (tests/fixtures/video_*), refusals
# (tests/e2e/test_images.py).
cd "$(dirname "$0")/../.." || exit 1
E2E_MODEL=tests/fixtures/gemma4_vision_text_q8_0.gguf
E2E_NGINX_MAX_BODY=32m
. tests/e2e/lib.sh
# image URLs: a local server (tests/e2e/image_host.py) that the worker may fetch from, and nothing else
IMAGE_HOST_DIR=$(mktemp -d /tmp/clgemma-img.XXXXXX)
host_port=$(e2e_free_port)
"$E2E_PY" tests/e2e/image_host.py "$IMAGE_HOST_DIR" "$host_port" $$ &
IMAGE_HOST=http://127.0.0.1:$host_port
export IMAGE_HOST IMAGE_HOST_DIR
e2e_start e2e_images --ctx 1024 --max-seqs 2 --max-queue 4 --threads 10 --mmproj tests/fixtures/gemma4_vision_mmproj.gguf \
  --image-tokens 70 --max-images 4 --image-url-allow "$IMAGE_HOST" --image-url-max-mb 1 --image-url-timeout 2
trap 'e2e_cleanup; rm -rf "$IMAGE_HOST_DIR"' EXIT
PYTHONPATH=tests/e2e "$E2E_PY" tests/e2e/test_images.py
