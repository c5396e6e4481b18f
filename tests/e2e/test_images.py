"""Images in chat messages through nginx (tests/suites/e2e_images.sh): a tiny Gemma 4 with the real multimodal tokens
and chat template (tests/fixtures/gemma4_vision_text_q8_0.gguf) and its vision projector
(tests/fixtures/gemma4_vision_mmproj.gguf), --image-tokens 70. The numerics of the image path are test_gemma4v_text's
(against transformers); here the OpenAI request shapes: the official openai SDK with a base64 data URL, whole and
streamed; PNG, JPEG, WebP and GIF; the same pixels in lossless formats give the same answer and reuse the cached
prefix (cached_tokens through the image); usage counts the image's positions; several images and turns; the
image URLs fetched from the one host the worker may fetch from (tests/e2e/image_host.py, --image-url-allow) and
the refusal of the rest (other hosts, redirects, too large, too slow, HTTP errors); the refusals (bad base64,
unknown media types, corrupt or hostile images, too many images, a bad detail) are 400s naming the part, and the
worker serves on after each. Videos: frames given as images, and video_url files (tests/fixtures/video_*.{webm,mp4},
tools/make_video_fixture.py) decoded into the frames transformers samples, also fetched by URL."""
import base64
import io
import os

import numpy as np
from PIL import Image

from e2e import MODEL, auth, chat_body, client, error_of, http, metrics, run_all, sse_events, test

IMAGE_TOKENS = 63 + 2  # a 64x48 picture at 70 soft tokens: 63, with <|image> and <image|> around them


def picture(seed=0, size=(64, 48), colors=None):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size[1], 0:size[0]]
    a = np.stack([xx * 4 % 256, yy * 5 % 256, (xx + yy) * 2 % 256], -1).astype(np.uint8)
    a = (a // 64 * 64) if colors else a  # few colours: a GIF keeps them exactly
    a[rng.integers(0, size[1], 20), rng.integers(0, size[0], 20)] = rng.integers(0, 256, (20, 3))
    return Image.fromarray(a.astype(np.uint8), "RGB")


def encoded(im, fmt, **kw):
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def data_url(data, mime="image/png"):
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_part(url, detail=None):
    iu = {"url": url}
    if detail:
        iu["detail"] = detail
    return {"type": "image_url", "image_url": iu}


def ask(parts, **kw):
    body = chat_body(parts, **{"max_tokens": 6, "logprobs": True, "top_logprobs": 3, **kw})
    with http() as h:
        return h.post("/v1/chat/completions", headers=auth(), json=body)


def ok(r):
    assert r.status_code == 200, r.text[:300]
    return r.json()


@test
def openai_sdk_base64_image_whole_and_streamed():
    c = client()
    url = data_url(encoded(picture(), "PNG"))
    msgs = [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]
    whole = c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0)
    text_only = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "What is in this picture?"}],
                                          max_tokens=8, temperature=0)
    added = whole.usage.prompt_tokens - text_only.usage.prompt_tokens
    # the placeholder's own id becomes boi + 63 + eoi; the template adds its line breaks around it
    assert IMAGE_TOKENS - 1 <= added <= IMAGE_TOKENS + 4, (whole.usage, text_only.usage)
    assert whole.usage.prompt_tokens_details.image_tokens == IMAGE_TOKENS - 2, whole.usage
    assert whole.choices[0].message.content is not None
    parts = [ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model=MODEL, messages=msgs, max_tokens=8, temperature=0, stream=True) if ch.choices]
    assert "".join(parts) == whole.choices[0].message.content, (parts, whole.choices[0].message.content)


def first_logprobs(j):
    return [(t["token"], round(t["logprob"], 3)) for t in j["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]


@test
def lossless_formats_agree_and_reuse_the_cached_image():
    im = picture(1, colors=4)
    forms = [("image/png", encoded(im, "PNG")), ("image/webp", encoded(im, "WEBP", lossless=True)),
             ("image/gif", encoded(im, "GIF"))]
    outs = []
    for mime, data in forms:
        j = ok(ask([{"type": "text", "text": "Describe:"}, image_part(data_url(data, mime))]))
        outs.append((j["choices"][0]["message"]["content"], first_logprobs(j), j["usage"]))
    assert all(o[0] == outs[0][0] and o[1] == outs[0][1] for o in outs), outs
    # the second and third requests find every whole block of the first's before the last token, the image's
    # among them (same pixels, same digest: the same ids); the image starts in the first block
    for _, _, u in outs[1:]:
        assert u["prompt_tokens_details"]["cached_tokens"] == (u["prompt_tokens"] - 1) // 32 * 32 >= 64, u
    jpeg = ok(ask([{"type": "text", "text": "Describe:"}, image_part(data_url(encoded(im, "JPEG", quality=90),
                                                                               "image/jpeg"))]))
    assert jpeg["usage"]["prompt_tokens"] == outs[0][2]["prompt_tokens"], jpeg["usage"]


@test
def different_images_give_different_distributions():
    a = ok(ask([image_part(data_url(encoded(picture(2), "PNG"))), {"type": "text", "text": "Caption:"}]))
    b = ok(ask([image_part(data_url(encoded(picture(3, size=(48, 64)), "PNG"))), {"type": "text", "text": "Caption:"}]))
    assert first_logprobs(a) != first_logprobs(b), (first_logprobs(a), first_logprobs(b))


@test
def several_images_and_turns():
    p1, p2 = data_url(encoded(picture(4), "PNG")), data_url(encoded(picture(5), "PNG"))
    body = chat_body("", max_tokens=4)
    body["messages"] = [
        {"role": "user", "content": [{"type": "text", "text": "First:"}, image_part(p1)]},
        {"role": "assistant", "content": "A gradient."},
        {"role": "user", "content": [image_part(p2, "low"), {"type": "text", "text": "and this?"}, image_part(p1)]},
    ]
    with http() as h:
        j = ok(h.post("/v1/chat/completions", headers=auth(), json=body))
    assert j["usage"]["prompt_tokens"] >= 3 * IMAGE_TOKENS, j["usage"]


@test
def refusals_name_the_part():
    png = encoded(picture(6), "PNG")
    cases = [
        (image_part("https://example.com/cat.png"), "messages[0].content[1].image_url.url", "not among the hosts"),
        (image_part("data:image/png;base64,@@@@"), "messages[0].content[1].image_url.url", "base64"),
        (image_part(data_url(png, "image/bmp")), "messages[0].content[1].image_url.url", "data URL"),
        (image_part(data_url(png[:60])), "messages[0].content[1]", "image"),
        (image_part(data_url(b"GIF89a" + b"\xff" * 40, "image/gif")), "messages[0].content[1]", "image"),
        (image_part(data_url(png), "ultra"), "messages[0].content[1].image_url.detail", "auto, low, high"),
        ({"type": "image_url"}, "messages[0].content[1].image_url", "url"),
        ({"type": "input_audio", "input_audio": {}}, "messages[0].content", "text"),
    ]
    for part, param, words in cases:
        r = ask([{"type": "text", "text": "Look:"}, part])
        err = error_of(r, 400)
        assert err["param"] == param and words in err["message"], (param, err)
    # a decompression bomb's header is refused before any pixel buffer exists
    bomb = encoded(Image.new("L", (7100, 7100)), "PNG")  # 50.4 Mpx, 49 KiB of PNG
    err = error_of(ask([image_part(data_url(bomb))]), 400)
    assert "limit" in err["message"], err
    # a strip so wide its patch grid passes the tiny tower's 64-entry position table: refused before the engine
    err = error_of(ask([image_part(data_url(encoded(picture(8, size=(3000, 40)), "PNG")))]), 400)
    assert "position table" in err["message"] and err["param"] == "messages[0].content[0]", err
    many = [image_part(data_url(png))] * 5
    err = error_of(ask(many), 400)
    assert "at most 4" in err["message"], err
    ok(ask([{"type": "text", "text": "still serving"}, image_part(data_url(png))]))


@test
def urls_fetched_from_the_allowed_host_only():
    host, root = os.environ["IMAGE_HOST"], os.environ["IMAGE_HOST_DIR"]
    png = encoded(picture(11), "PNG")
    with open(os.path.join(root, "pic.png"), "wb") as f:
        f.write(png)
    with open(os.path.join(root, "big.png"), "wb") as f:
        f.write(png + b"\0" * (1 << 20))  # past the suite's --image-url-max-mb 1
    text = {"type": "text", "text": "Look:"}
    by_url = ok(ask([text, image_part(f"{host}/pic.png")]))
    by_data = ok(ask([text, image_part(data_url(png))]))
    assert by_url["usage"]["prompt_tokens"] == by_data["usage"]["prompt_tokens"], (by_url["usage"], by_data["usage"])
    assert first_logprobs(by_url) == first_logprobs(by_data), "the fetched image is not the same picture"
    frames = ok(ask([{"type": "video", "frames": [f"{host}/pic.png", data_url(png)], "timestamps": [0, 1]}]))
    assert frames["usage"]["prompt_tokens_details"]["image_tokens"] == 2 * 63, frames["usage"]
    cases = [
        (f"{host}/missing.png", "HTTP 404"),
        (f"{host}/redirect", "redirects are not followed"),
        (f"{host}/big.png", "larger than"),
        (f"{host}/slow", "longer than 2 s"),
        (host.replace("127.0.0.1", "localhost") + "/pic.png", "not among the hosts"),
        (host.replace("http:", "https:") + "/pic.png", "not among the hosts"),
        ("http://user:pw@" + host[len("http://"):] + "/pic.png", "credentials"),
    ]
    for url, words in cases:
        err = error_of(ask([image_part(url)]), 400)
        assert err["param"] == "messages[0].content[0].image_url.url" and words in err["message"], (url, err)
    ok(ask([text, image_part(f"{host}/pic.png")]))  # still serving


@test
def concurrent_image_prompts():
    # prompts arriving together have their images encoded in one pass (sched.c pin_together); each answer is
    # then what its prompt gets alone (engine-level equality of a batch's rows: test_gemma4v_encode)
    import concurrent.futures
    pics = [encoded(picture(30 + i), "PNG") for i in range(3)]
    text = {"type": "text", "text": "Look:"}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda p: ok(ask([text, image_part(data_url(p))])), pics))
    for p, t in zip(pics, together):
        assert t["usage"]["prompt_tokens_details"]["image_tokens"] == IMAGE_TOKENS - 2, t["usage"]
        assert first_logprobs(ok(ask([text, image_part(data_url(p))]))) == first_logprobs(t)


def video_part(n, timestamps=None, size=(64, 48)):
    part = {"type": "video", "frames": [data_url(encoded(picture(20 + k, size=size), "PNG")) for k in range(n)]}
    if timestamps is not None:
        part["timestamps"] = timestamps
    return part


@test
def video_as_frames():
    """each frame: its "mm:ss " text, boi, 63 soft tokens, eoi (transformers' processor's expansion); a frame is
    an image at 70 tokens, so a one-frame video of a picture costs that picture's tokens plus its timestamp"""
    one = ok(ask([video_part(1), {"type": "text", "text": "What happens?"}]))["usage"]["prompt_tokens"]
    three = ok(ask([video_part(3, [0, 1.5, 61]), {"type": "text", "text": "What happens?"}]))["usage"]["prompt_tokens"]
    pic = ok(ask([image_part(data_url(encoded(picture(20), "PNG"))),
                  {"type": "text", "text": "What happens?"}]))["usage"]["prompt_tokens"]
    assert one > pic and three - one >= 2 * IMAGE_TOKENS, (pic, one, three)
    # the same frames at other timestamps: other text between them, the same images (found in the cache)
    ok(ask([video_part(3, [0, 2, 120]), {"type": "text", "text": "What happens?"}]))
    for part, param, words in [
        ({"type": "video", "frames": []}, "messages[0].content[0].frames", "1 to 32"),
        (video_part(2, [0]), "messages[0].content[0].timestamps", "one time"),
        (video_part(2, [0, -1]), "messages[0].content[0].timestamps[1]", "seconds"),
        ({"type": "video", "frames": ["https://example.com/f.png"]}, "messages[0].content[0].frames[0]",
         "not among the hosts"),
    ]:
        err = error_of(ask([part, {"type": "text", "text": "?"}]), 400)
        assert err["param"] == param and words in err["message"], (param, err)
    err = error_of(ask([{"type": "video", "frames": ["x"] * 33}]), 400)
    assert "1 to 32" in err["message"], err


def video_url_part(data, mime="video/webm"):
    return {"type": "video_url", "video_url": {"url": data_url(data, mime)}}


def fixture(name):
    with open(f"tests/fixtures/{name}", "rb") as f:
        return f.read()


@test
def video_url_decoded_into_frames():
    """a video file (tests/fixtures/video_vp9.webm: 8 frames of 80x56, each 70 tokens at Gemma 4's size rule) through
    the openai SDK: every frame sampled (fewer than 32), image_tokens = frames x 70; the same file as the URL string;
    the H.264 MP4 of 36 frames samples 32 (over 2,304 tokens, past this worker's 1,024 context: refused as too long,
    not as a bad video); corrupt and hostile files are 400s naming the part and the worker serves on"""
    webm = fixture("video_vp9.webm")
    c = client()
    msgs = [{"role": "user", "content": [video_url_part(webm), {"type": "text", "text": "What happens?"}]}]
    r = c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4, temperature=0)
    assert r.usage.prompt_tokens_details.image_tokens == 8 * 70, r.usage
    assert r.usage.prompt_tokens > 8 * (70 + 2), r.usage
    j = ok(ask([{"type": "video_url", "video_url": data_url(webm, "video/webm")}, {"type": "text", "text": "?"}]))
    assert j["usage"]["prompt_tokens_details"]["image_tokens"] == 8 * 70, j["usage"]
    err = error_of(ask([video_url_part(fixture("video_h264.mp4"), "video/mp4")]), 400)
    too_long = int(err["message"].split("resulted in ")[1].split()[0])
    assert err["code"] == "context_length_exceeded" and too_long >= 32 * (70 + 2), err
    # Matroska cut after whole frames is read up to the cut: its first frames
    cut = ok(ask([video_url_part(webm[:len(webm) // 3]), {"type": "text", "text": "?"}]))["usage"]
    assert 0 < cut["prompt_tokens_details"]["image_tokens"] < 8 * 70 and cut["prompt_tokens_details"][
        "image_tokens"] % 70 == 0, cut
    png = encoded(picture(6), "PNG")
    for part, param, words in [
        (video_url_part(webm[:100]), "messages[0].content[0]", "video: not a readable"),
        (video_url_part(bytes(range(256)) * 8, "video/mp4"), "messages[0].content[0]", "video: not a readable"),
        (video_url_part(png, "video/mp4"), "messages[0].content[0]", "video: not a readable"),
        (video_url_part(fixture("video_empty.webm")), "messages[0].content[0]", "no frames"),
        (video_url_part(webm, "image/png"), "messages[0].content[0].video_url.url", "data:video/"),
        ({"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}},
         "messages[0].content[0].video_url.url", "not among the hosts"),
        ({"type": "video_url", "video_url": 7}, "messages[0].content[0].video_url", "url"),
    ]:
        err = error_of(ask([part, {"type": "text", "text": "?"}]), 400)
        assert err["param"] == param and words in err["message"], (param, words, err)
    # the same file fetched from the host the worker may fetch from
    host, root = os.environ["IMAGE_HOST"], os.environ["IMAGE_HOST_DIR"]
    with open(os.path.join(root, "v.webm"), "wb") as f:
        f.write(webm)
    j = ok(ask([{"type": "video_url", "video_url": {"url": f"{host}/v.webm"}}, {"type": "text", "text": "?"}]))
    assert j["usage"]["prompt_tokens_details"]["image_tokens"] == 8 * 70, j["usage"]
    err = error_of(ask([{"type": "video_url", "video_url": {"url": f"{host}/none.webm"}}]), 400)
    assert err["param"] == "messages[0].content[0].video_url.url" and "HTTP 404" in err["message"], err
    ok(ask([video_url_part(webm), {"type": "text", "text": "still serving"}]))


@test
def metrics_count_images():
    before = metrics().get(("clgemma_images_total", frozenset()), 0)
    ok(ask([image_part(data_url(encoded(picture(7), "PNG")))]))
    after = metrics().get(("clgemma_images_total", frozenset()), 0)
    assert after == before + 1, (before, after)


if __name__ == "__main__":
    raise SystemExit(run_all())
