#!/usr/bin/env python3
"""Writes the video fixtures of tests/opencl/test_video.c and the e2e image suite, and their reference.

    .venv/bin/python tools/make_video_fixture.py [tests/fixtures]

Two small files with distinct content in every frame (a moving square, the frame's number as bars, a gradient):
  video_h264.mp4   80x56, 36 frames at 12 fps (3 s), H.264 with B-frames (decode order differs from display order)
  video_vp9.webm   80x56, 8 frames at 4 fps (2 s), VP9: fewer frames than the 32 sampled, so every frame is taken
  video_mpeg4.mov  80x56, 40 frames at 0.1 fps (400 s), MPEG-4 Part 2 in QuickTime: timestamps past a minute
  video_empty.webm video_vp9.webm cut before its first SimpleBlock: a video stream without frames (a refusal)
(copied into tests/fuzz/corpus_video as fuzz_video's seeds) and video_ref.json: for each file the frame count and fps as transformers' default backend (torchcodec, exact
mode) measures them (every packet counted; fps = count / (last packet's end - first packet's start)), the indices
and timestamps of Gemma4VideoProcessor's sampling (transformers.video_utils.default_sample_indices_fn with
num_frames 32: k * N // n), and per sampled frame PyAV's RGB24 decode as a SHA-256, each channel's sum and every 8th
pixel of every 8th row. When transformers imports (it does in .venv-hf), its own sampling function is checked
against ours.
"""
import hashlib
import json
import os
import shutil
import sys
from fractions import Fraction

import av
import numpy as np

NUM_FRAMES = 32  # Gemma4VideoProcessor.num_frames
W, H = 80, 56  # 10:7, which Gemma 4's size rule takes to 480x336 = 630 patches: exactly 70 tokens a frame


def frame_rgb(i, n):
    """distinct per frame: a gradient shifting with i, a square moving across, i as 6 binary bars"""
    y, x = np.mgrid[0:H, 0:W]
    img = np.zeros((H, W, 3), np.uint8)
    img[..., 0] = (x * 255 // (W - 1) + i * 7) % 256
    img[..., 1] = (y * 255 // (H - 1)) ^ (i * 29 % 256)
    img[..., 2] = 128
    sx = 4 + (W - 24) * i // max(n - 1, 1)
    img[20:40, sx:sx + 16] = (255, 255, 0)
    for b in range(6):
        if (i >> b) & 1:
            img[52:60, 8 + 14 * b:18 + 14 * b] = (0, 0, 0)
        else:
            img[52:60, 8 + 14 * b:18 + 14 * b] = (255, 255, 255)
    return img


def write(path, container, codec, n, fps, opts):
    with av.open(path, "w", format=container) as out:
        s = out.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = W, H, "yuv420p"
        s.options = opts
        for i in range(n):
            fr = av.VideoFrame.from_ndarray(frame_rgb(i, n), format="rgb24")
            for p in s.encode(fr):
                out.mux(p)
        for p in s.encode():
            out.mux(p)


def sample_indices(total, num_frames=NUM_FRAMES):
    """default_sample_indices_fn(metadata, num_frames=32): transformers raises when total < 32; clgemma takes
    every frame then, which is the same formula with n = total"""
    n = min(num_frames, total)
    return (np.arange(n, dtype=int) * total // n).tolist()


def scan(path):
    """torchcodec's exact scan: every non-discarded packet of the best video stream counted, its pts (or dts)
    and pts + duration bounding the stream"""
    with av.open(path) as c:
        st = c.streams.video[0]
        begin, end, count = None, None, 0
        for p in c.demux(st):
            if p.size == 0 and p.pts is None and p.dts is None:
                continue  # PyAV's flush packet at the end, not a frame
            t = p.pts if p.pts is not None else p.dts
            count += 1
            begin = t if begin is None else min(begin, t)
            end = t + (p.duration or 0) if end is None else max(end, t + (p.duration or 0))
        dur = float((end - begin) * st.time_base)
        fps = count / dur if dur > 0 else float(st.average_rate or 24)
        return count, fps, int(st.frames), float(st.average_rate)


def decode(path, indices):
    want, frames = set(indices), []
    with av.open(path) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i > indices[-1]:
                break
            if i in want:
                frames.append(f.to_ndarray(format="rgb24"))
    return frames


def check_against_transformers():
    try:
        from transformers.video_utils import VideoMetadata, default_sample_indices_fn
    except Exception as e:  # not in .venv: the reimplementation stands alone
        return f"transformers not importable here ({type(e).__name__})"
    for total in range(NUM_FRAMES, 400):
        got = default_sample_indices_fn(VideoMetadata(total_num_frames=total, fps=24.0), num_frames=NUM_FRAMES)
        assert got.tolist() == sample_indices(total), total
    return "transformers' default_sample_indices_fn agrees for 32..399 frames"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    files = [
        ("video_h264.mp4", "mp4", "libx264", 36, 12, {"bf": "2", "g": "12", "crf": "20", "preset": "medium"}, True),
        ("video_vp9.webm", "webm", "libvpx-vp9", 8, 4, {"crf": "30", "b": "0", "g": "4"}, True),
        # MPEG-4 Part 2 specifies its IDCT only to IEEE 1180 accuracy: FFmpeg versions may differ by a unit or two
        ("video_mpeg4.mov", "mov", "mpeg4", 40, Fraction(1, 10), {"qscale": "4"}, False),
    ]
    ref = {"note": "written by tools/make_video_fixture.py; PyAV " + av.__version__, "videos": []}
    for name, container, codec, n, fps, opts, bitexact in files:
        path = os.path.join(out, name)
        write(path, container, codec, n, fps, opts)
        count, mfps, hdr_frames, hdr_rate = scan(path)
        assert count == n and abs(mfps - fps) < 1e-9, (name, count, mfps)
        idx = sample_indices(count)
        secs = [i / mfps for i in idx]
        frames = decode(path, idx)
        assert len(frames) == len(idx)
        ref["videos"].append({
            "file": name, "width": W, "height": H, "frames": count, "fps": mfps,
            "header_frames": hdr_frames, "header_fps": hdr_rate,
            "indices": idx, "seconds": secs,
            "mmss": ["%02d:%02d" % (int(s // 60), int(s % 60)) for s in secs],
            "bitexact": bitexact,  # the codec's decoding is bit-exact by its specification
            "sha256": [hashlib.sha256(f.tobytes()).hexdigest() for f in frames],
            "sums": [f.reshape(-1, 3).sum(0, dtype=np.int64).tolist() for f in frames],
            "grid8": [f[::8, ::8].tobytes().hex() for f in frames],
        })
        print(f"{path}: {os.path.getsize(path)} bytes, {count} frames at {mfps:g} fps, {len(idx)} sampled")
    with open(os.path.join(out, "video_vp9.webm"), "rb") as f:
        webm = f.read()
    with open(os.path.join(out, "video_empty.webm"), "wb") as f:
        cluster = webm.index(b"\x1f\x43\xb6\x75")  # the first Cluster's ID, then its size and Timestamp
        f.write(webm[:webm.index(b"\xa3", cluster + 4)])  # up to its first SimpleBlock's ID
    with open(os.path.join(out, "video_ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    seeds = os.path.join(os.path.dirname(os.path.abspath(out)), "fuzz", "corpus_video")  # fuzz_video's seeds
    if os.path.isdir(seeds):
        for name in [f[0] for f in files] + ["video_empty.webm"]:
            shutil.copyfile(os.path.join(out, name), os.path.join(seeds, name))
    print(check_against_transformers())


if __name__ == "__main__":
    main()
