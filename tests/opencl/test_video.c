/* Video files decoded and sampled (video.h) against tests/fixtures/video_ref.json, which
 * tools/make_video_fixture.py wrote with PyAV's decode and transformers' sampling rule (checked against
 * transformers' own default_sample_indices_fn):
 *   sampling   video_sample: the indices k * N / n for n = min(32, N), exact, for the fixtures and a sweep
 *   decode     each fixture's frame count, sampled indices and their "mm:ss" exact, seconds within 1e-9;
 *              pixels: H.264 and VP9 bit-exact with PyAV's RGB24 (SHA-256), MPEG-4 Part 2 within PIXEL_TOL on every
 *              8th pixel of every 8th row and MEAN_TOL on each channel's mean (why: below)
 * and the refusals, each one "video: ..." line: truncated files, random bytes, a PNG, a header claiming a huge
 * frame, a stream with no frames, every limit (bytes, packets, duration, frame size, pixels decoded) and a
 * callback that stops the decode. */
#include <json-c/json.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture_io.h"
#include "video.h"

#define FIX "tests/fixtures/"
/* the fixtures the reference marks bitexact (H.264, VP9: decoding bit-exact by their specs) must match PyAV's RGB24
 * byte for byte: swscale's BT.601 limited-range 4:2:0 to RGB24 with SWS_BILINEAR gives the same bytes in the
 * system's FFmpeg 5.1 as in the FFmpeg 8.1 PyAV's wheel bundles (measured), so a later FFmpeg that rounds otherwise
 * fails here first. MPEG-4 Part 2 specifies its IDCT only to IEEE 1180 accuracy and FFmpeg's implementations
 * differ by version (measured: 4 of 32 frames not bit-exact, no sampled pixel off); a unit or two of drift through
 * P-frames is what that allows, so each sampled value within PIXEL_TOL and each channel's mean within MEAN_TOL. */
#define PIXEL_TOL 2
#define MEAN_TOL 0.05

typedef struct {
    int n, idx[VIDEO_MAX_FRAMES], w[VIDEO_MAX_FRAMES], h[VIDEO_MAX_FRAMES];
    double sec[VIDEO_MAX_FRAMES];
    uint8_t grid[VIDEO_MAX_FRAMES][12 * 8 * 3]; /* every 8th pixel of every 8th row, frames up to 96x64 */
    uint8_t sha[VIDEO_MAX_FRAMES][32];
    uint64_t sum[VIDEO_MAX_FRAMES][3];          /* each channel's sum */
    int stop_at;                                /* the callback refuses frame k == stop_at (-1: never) */
} got_frames;

static int on_frame(void *ctx, const image_rgb *f, int k, int n, int64_t index, double seconds, char *err,
                    size_t errlen)
{
    got_frames *g = ctx;
    if (k == g->stop_at) { snprintf(err, errlen, "video: stopped at frame %d of %d", k, n); return -1; }
    if (k != g->n || k >= VIDEO_MAX_FRAMES) { snprintf(err, errlen, "video: frame %d out of order", k); return -1; }
    g->idx[k] = (int)index;
    g->sec[k] = seconds;
    g->w[k] = f->w;
    g->h[k] = f->h;
    for (int y = 0, o = 0; y < f->h && y < 64; y += 8)
        for (int x = 0; x < f->w && x < 96; x += 8, o += 3)
            memcpy(g->grid[k] + o, f->rgb + ((size_t)y * f->w + x) * 3, 3);
    for (size_t i = 0; i < (size_t)f->w * f->h; i++)
        for (int c = 0; c < 3; c++) g->sum[k][c] += f->rgb[3 * i + c];
    unsigned len = 0;
    EVP_Digest(f->rgb, (size_t)f->w * f->h * 3, g->sha[k], &len, EVP_sha256(), NULL);
    g->n++;
    return 0;
}

static int run(const void *data, size_t n, const video_limits *lim, got_frames *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->stop_at = -1;
    return video_decode(data, n, lim, on_frame, g, err, errlen);
}

static int hexbyte(const char *s) { unsigned v = 0; sscanf(s, "%2x", &v); return (int)v; }

static void test_sampling_rule(void)
{
    int64_t idx[VIDEO_MAX_FRAMES];
    CHECK(video_sample(0, 32, idx) == 0, "no frames, no samples");
    CHECK(video_sample(1, 32, idx) == 1 && idx[0] == 0, "one frame");
    int n = video_sample(8, 32, idx);
    CHECK(n == 8, "8 frames: %d taken", n);
    for (int k = 0; k < n; k++) CHECK(idx[k] == k, "8 frames: index %d is %lld", k, (long long)idx[k]);
    /* numpy's np.arange(32) * total // 32, written out for 100 and 1000 frames */
    static const int64_t t100[32] = { 0, 3, 6, 9, 12, 15, 18, 21, 25, 28, 31, 34, 37, 40, 43, 46,
                                      50, 53, 56, 59, 62, 65, 68, 71, 75, 78, 81, 84, 87, 90, 93, 96 };
    CHECK(video_sample(100, 32, idx) == 32 && !memcmp(idx, t100, sizeof t100), "100 frames");
    CHECK(video_sample(1000, 32, idx) == 32 && idx[1] == 31 && idx[31] == 968, "1000 frames: %lld %lld",
          (long long)idx[1], (long long)idx[31]);
    CHECK(video_sample(1000, 4, idx) == 4 && idx[3] == 750, "4 of 1000");
}

static void test_decode_matches_pyav(void)
{
    json_object *ref = json_object_from_file(FIX "video_ref.json"), *vids = NULL;
    CHECK(ref && json_object_object_get_ex(ref, "videos", &vids), "cannot read " FIX "video_ref.json");
    if (!vids) { json_object_put(ref); return; }
    for (size_t v = 0; v < json_object_array_length(vids); v++) {
        json_object *o = json_object_array_get_idx(vids, v), *f, *ix, *sec, *mm, *sha, *grid, *w, *h, *sums, *be;
        json_object_object_get_ex(o, "file", &f);
        json_object_object_get_ex(o, "indices", &ix);
        json_object_object_get_ex(o, "seconds", &sec);
        json_object_object_get_ex(o, "mmss", &mm);
        json_object_object_get_ex(o, "sha256", &sha);
        json_object_object_get_ex(o, "grid8", &grid);
        json_object_object_get_ex(o, "width", &w);
        json_object_object_get_ex(o, "height", &h);
        json_object_object_get_ex(o, "sums", &sums);
        json_object_object_get_ex(o, "bitexact", &be);
        int bitexact = json_object_get_boolean(be);
        double worst_mean = 0;
        const char *name = json_object_get_string(f);
        char path[256], err[256] = "";
        snprintf(path, sizeof path, FIX "%s", name);
        long len = 0;
        char *data = slurp(path, &len);
        CHECK(data, "cannot read %s", path);
        if (!data) continue;
        got_frames g;
        int n = run(data, (size_t)len, NULL, &g, err, sizeof err), want = (int)json_object_array_length(ix);
        CHECK(n == want && g.n == want, "%s: %d frames (%s), reference %d", name, n, err, want);
        int worst = 0, exact = 0;
        for (int k = 0; k < g.n && k < want; k++) {
            CHECK(g.idx[k] == json_object_get_int(json_object_array_get_idx(ix, k)), "%s: frame %d is index %d", name,
                  k, g.idx[k]);
            double s = json_object_get_double(json_object_array_get_idx(sec, k));
            CHECK(g.sec[k] > s - 1e-9 && g.sec[k] < s + 1e-9, "%s: frame %d at %.12f s, reference %.12f", name, k,
                  g.sec[k], s);
            char t[48];
            long whole = (long)g.sec[k]; /* as api_chat.c's frame_text writes it */
            snprintf(t, sizeof t, "%02ld:%02ld", whole / 60, whole % 60);
            CHECK(!strcmp(t, json_object_get_string(json_object_array_get_idx(mm, k))), "%s: frame %d mm:ss %s", name,
                  k, t);
            CHECK(g.w[k] == json_object_get_int(w) && g.h[k] == json_object_get_int(h), "%s: frame %d is %dx%d", name,
                  k, g.w[k], g.h[k]);
            const char *gh = json_object_get_string(json_object_array_get_idx(grid, k));
            for (size_t i = 0; gh && i < sizeof g.grid[k] && gh[2 * i]; i++) {
                int d = abs((int)g.grid[k][i] - hexbyte(gh + 2 * i));
                worst = d > worst ? d : worst;
            }
            json_object *sk = json_object_array_get_idx(sums, k);
            for (int c = 0; c < 3; c++) {
                double ref = (double)json_object_get_int64(json_object_array_get_idx(sk, c));
                double d = fabs((double)g.sum[k][c] - ref) / ((double)g.w[k] * g.h[k]);
                worst_mean = d > worst_mean ? d : worst_mean;
            }
            char hex[65];
            for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", g.sha[k][i]);
            exact += !strcmp(hex, json_object_get_string(json_object_array_get_idx(sha, k)));
        }
        CHECK(!bitexact || exact == g.n, "%s: %d of %d frames bit-exact", name, exact, g.n);
        CHECK(worst <= PIXEL_TOL && worst_mean <= MEAN_TOL, "%s: a sampled value %d from PyAV's (tolerance %d), a "
              "channel's mean %.4f (tolerance %.2f)", name, worst, PIXEL_TOL, worst_mean, MEAN_TOL);
        printf("  %s: %d frames, %d of them bit-exact with PyAV, worst sampled value difference %d, channel mean "
               "%.4f\n", name, g.n, exact, worst, worst_mean);
        free(data);
    }
    json_object_put(ref);
}

/* one refusal: -1, one "video: " line naming what (when given) */
static void refused(const char *what, const void *data, size_t n, const video_limits *lim, const char *needle)
{
    got_frames g;
    char err[256] = "";
    int rc = run(data, n, lim, &g, err, sizeof err);
    CHECK(rc == -1, "%s: accepted (%d frames)", what, rc);
    CHECK(!strncmp(err, "video: ", 7) && !strchr(err, '\n'), "%s: error line '%s'", what, err);
    CHECK(!needle || strstr(err, needle), "%s: '%s' does not say '%s'", what, err, needle);
    printf("  %s: %s\n", what, err);
}

static void test_hostile_inputs(void)
{
    long len = 0, wlen = 0;
    char *mp4 = slurp(FIX "video_h264.mp4", &len), *webm = slurp(FIX "video_vp9.webm", &wlen);
    CHECK(mp4 && webm, "cannot read the fixtures");
    if (!mp4 || !webm) { free(mp4); free(webm); return; }
    refused("empty", mp4, 0, NULL, "empty");
    refused("48 bytes of MP4", mp4, 48, NULL, NULL);
    refused("half the MP4", mp4, (size_t)len / 2, NULL, NULL);
    refused("all but 100 bytes of the MP4", mp4, (size_t)len - 100, NULL, NULL);
    got_frames g;
    char err[256] = "";
    /* Matroska is read up to where it ends (as torchcodec counts it): the frames before the cut, and no more */
    int rc = run(webm, (size_t)wlen / 2, NULL, &g, err, sizeof err);
    CHECK(rc >= 1 && rc < 8 && g.idx[rc - 1] == rc - 1, "half the WebM: %d frames (%s)", rc, err);
    uint8_t rnd[4096];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof rnd; i++) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; rnd[i] = (uint8_t)s; }
    refused("random bytes", rnd, sizeof rnd, NULL, "not a readable");
    memcpy(rnd, mp4, 64); /* a real MP4 header, then noise */
    refused("an MP4 header and random bytes", rnd, sizeof rnd, NULL, NULL);
    long plen = 0;
    char *png = slurp("tests/fuzz/corpus_image/bw.png", &plen);
    if (png) refused("a PNG", png, (size_t)plen, NULL, "not a readable");
    free(png);
    /* the avc1 sample entry's width and height (24 bytes after its type) claiming 65535 x 65535 */
    char *big = malloc((size_t)len);
    memcpy(big, mp4, (size_t)len);
    char *stsd = memmem(big, (size_t)len, "stsd", 4);
    char *avc1 = stsd ? memmem(stsd, (size_t)(big + len - stsd), "avc1", 4) : NULL;
    CHECK(avc1, "no avc1 entry in the MP4");
    if (avc1) {
        memset(avc1 + 4 + 24, 0xff, 4);
        refused("a header claiming 65535x65535", big, (size_t)len, NULL, "65535x65535");
    }
    free(big);
    long elen = 0;
    char *empty = slurp(FIX "video_empty.webm", &elen);
    CHECK(empty, "cannot read " FIX "video_empty.webm");
    if (empty) refused("a stream with no frames", empty, (size_t)elen, NULL, "no frames");
    free(empty);

    video_limits lim = video_limits_default();
    lim.max_bytes = 1000;
    refused("over max_bytes", mp4, (size_t)len, &lim, "over the limit of 1000");
    lim = video_limits_default();
    lim.max_packets = 10;
    refused("over max_packets", mp4, (size_t)len, &lim, "more than 10 frames");
    lim = video_limits_default();
    lim.max_seconds = 2;
    refused("over max_seconds", mp4, (size_t)len, &lim, "seconds long");
    lim = video_limits_default();
    lim.frame.max_side = 64;
    refused("a side over the frame limit", mp4, (size_t)len, &lim, "80x56");
    lim = video_limits_default();
    lim.max_decoded_px = 80 * 56 * 20;
    refused("over max_decoded_px", mp4, (size_t)len, &lim, "pixels of frames");
    lim = video_limits_default();
    lim.max_frames = 0;
    refused("max_frames 0", mp4, (size_t)len, &lim, "frames asked for");
    memset(&g, 0, sizeof g);
    g.stop_at = 3;
    rc = video_decode((const uint8_t *)mp4, (size_t)len, NULL, on_frame, &g, err, sizeof err);
    CHECK(rc == -1 && g.n == 3 && !strcmp(err, "video: stopped at frame 3 of 32"), "callback stop: %d, %d, '%s'", rc,
          g.n, err);
    lim = video_limits_default();
    lim.max_frames = 4;
    rc = run(mp4, (size_t)len, &lim, &g, err, sizeof err);
    CHECK(rc == 4 && g.idx[1] == 9 && g.idx[3] == 27, "4 frames of 36: %d (%s), %d %d", rc, err, g.idx[1], g.idx[3]);
    free(mp4);
    free(webm);
}

int main(void)
{
    RUN_TEST(test_sampling_rule);
    RUN_TEST(test_decode_matches_pyav);
    RUN_TEST(test_hostile_inputs);
    CHECK_EXIT();
}
