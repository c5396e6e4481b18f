/* api_chat.c — POST /v1/chat/completions.
 *
 * The messages go to the engine as a JSON conversation; the model's chat template is rendered natively
 * (opencl/io/chat.h) and tokenized so that message text can never become control tokens: only the control
 * tokens the template itself writes are parsed as such. A user who writes "<end_of_turn>" gets the
 * characters, not the turn boundary. A conversation the template refuses (as jinja2 would raise) is a 400. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_respond.h"
#include "api_video.h"
#include "chat_reply.h"
#include "json_io.h"
#include "engine.h"

static const char *role_name(enum api_role r)
{
    static const char *const names[] = { [ROLE_SYSTEM] = "system", [ROLE_USER] = "user",
                                         [ROLE_ASSISTANT] = "assistant", [ROLE_TOOL] = "tool" };
    return names[r];
}

/* the conversation as the template reads it (OpenAI's shape; tool call arguments as objects) */
static json_object *conversation(const api_message *msgs, int n)
{
    json_object *arr = json_object_new_array();
    for (int i = 0; arr && i < n; i++) {
        const api_message *m = &msgs[i];
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(arr, o)) { json_object_put(o); json_object_put(arr); return NULL; }
        json_object_object_add(o, "role", json_object_new_string(role_name(m->role)));
        json_object_object_add(o, "content", m->parts ? json_object_get(m->parts)
                                             : m->content ? json_object_new_string_len(m->content, (int)m->len) : NULL);
        if (m->tool_calls) json_object_object_add(o, "tool_calls", json_object_get(m->tool_calls));
        if (m->tool_call_id) json_object_object_add(o, "tool_call_id", json_object_new_string(m->tool_call_id));
        if (m->name) json_object_object_add(o, "name", json_object_new_string(m->name));
        if (m->reasoning) json_object_object_add(o, "reasoning_content", json_object_new_string(m->reasoning));
    }
    return arr;
}

static int build_prompt(const engine *e, const api_chat_request *req, int32_t **ids, int *n_ids, api_error *err)
{
    int gemma4 = engine_chat_reply_syntax(e) == REPLY_GEMMA4;
    for (int i = 0; i < req->n_msgs && !gemma4; i++)
        if (req->msgs[i].tool_calls || req->msgs[i].role == ROLE_TOOL)
            return api_fail(err, 400, "invalid_request_error", NULL, "messages",
                            "messages[%d]: this model's chat template (%s) has no tool calls", i, engine_chat_template(e));
    if (req->tools.list && !gemma4 && req->tools.choice != TOOL_CHOICE_NONE)
        return api_fail(err, 400, "invalid_request_error", NULL, "tools",
                        "this model's chat template (%s) has no tool calls", engine_chat_template(e));
    if (req->thinking == 1 && !gemma4)
        return api_fail(err, 400, "invalid_request_error", NULL, "reasoning_effort",
                        "this model's chat template (%s) has no thinking mode", engine_chat_template(e));
    json_object *arr = conversation(req->msgs, req->n_msgs);
    if (!arr) return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    /* tool_choice none: the model is not told of the tools (and cannot call one) */
    json_object *tools = req->tools.choice == TOOL_CHOICE_NONE ? NULL : req->tools.list;
    engine_chat_opts o = { 1, req->thinking == 1 };
    char why[512];
    int k = engine_chat_encode(e, arr, tools, &o, ids, why, sizeof why);
    json_object_put(arr);
    if (k == -1) return api_fail(err, 400, "invalid_request_error", NULL, "messages", "%s", why);
    if (k < 0) return api_fail(err, 500, "server_error", NULL, NULL, "%s", why);
    *n_ids = k;
    return 0;
}

/* the n images (URLs fetched under rules) decoded and prepared (engine_image_prepare) into ims; a 400 naming the
 * part (those made so far destroyed) */
static int images_prepare(const engine *e, const fetch_rules *rules, const api_image *const *in, int n,
                          engine_image **ims, api_error *err)
{
    for (int i = 0; i < n; i++) {
        char why[256];
        if (ims[i]) continue; /* a video_url's frame: prepared as it was decoded */
        unsigned char *got = NULL;
        size_t len = 0;
        if (in[i]->url && fetch_get(rules, in[i]->url, &got, &len, why, sizeof why)) {
            api_fail(err, 400, "invalid_request_error", NULL, in[i]->url_param, "'%s': %s", in[i]->url_param, why);
        } else if (!(ims[i] = engine_image_prepare(e, got ? got : in[i]->bytes, got ? len : in[i]->len,
                                                   in[i]->max_tokens, why, sizeof why))) {
            api_fail(err, 400, "invalid_request_error", NULL, in[i]->param, "%s: %s", in[i]->param, why);
        }
        free(got);
        if (!ims[i]) {
            while (i-- > 0) { engine_image_destroy(ims[i]); ims[i] = NULL; }
            return -1;
        }
    }
    return 0;
}

/* the tokens of a video frame's timestamp text before its boi: "mm:ss " (" mm:ss " after the first frame: the
 * processor joins frames with spaces), tokenized alone as the processor's text around its specials is */
#define FRAME_TEXT 16 /* tokens of " mm:ss " at most: one a byte */
static int frame_text(const tokenizer *t, const api_image *f, int32_t *out, int cap)
{
    char s[32];
    long sec = (long)f->seconds;
    int n = snprintf(s, sizeof s, "%s%02ld:%02ld ", f->frame ? " " : "", sec / 60, sec % 60);
    return tokenizer_encode(t, s, (size_t)n, 0, 0, out, cap);
}

/* The template's placeholders in *ids replaced as transformers' processor expands them: an image's
 * (info.image_token) by boi, its soft tokens, eoi; a video's (<|video|>) by each frame's timestamp text, boi,
 * soft tokens, eoi. *spans (malloc'd, one per image or frame) where the soft tokens are. */
static int images_expand(const engine *e, int32_t **ids, int *n_ids, const api_image *const *in,
                         engine_image *const *ims, int n, engine_span **spans, api_error *err)
{
    const engine_info *info = engine_get_info(e);
    const tokenizer *tok = engine_tokenizer(e);
    int32_t video = tokenizer_find(tok, "<|video|>");
    *spans = NULL;
    if (info->image_token < 0 || info->boi_token < 0 || info->eoi_token < 0)
        return api_fail(err, 400, "invalid_request_error", NULL, "messages",
                        "this model's vocabulary has no image tokens (<|image>, <image|>, <|image|>)");
    int n_img = 0, n_vid = 0, found_img = 0, found_vid = 0;
    size_t total = (size_t)*n_ids; /* at most: a frame's timestamp text is under FRAME_TEXT tokens */
    for (int i = 0; i < n; i++) {
        n_img += in[i]->frame < 0;
        n_vid += in[i]->frame == 0;
        total += (size_t)engine_image_tokens(ims[i]) + 2 + (in[i]->frame >= 0 ? FRAME_TEXT : 0);
    }
    for (int k = 0; k < *n_ids; k++) {
        found_img += (*ids)[k] == info->image_token;
        found_vid += video >= 0 && (*ids)[k] == video;
    }
    if (found_img != n_img || found_vid != n_vid)
        return api_fail(err, 400, "invalid_request_error", NULL, "messages",
                        "the chat template placed %d images and %d videos of the %d and %d given", found_img, found_vid,
                        n_img, n_vid);
    int32_t *out = malloc(total * sizeof *out);
    engine_span *sp = malloc((size_t)(n ? n : 1) * sizeof *sp);
    if (!out || !sp) {
        free(out);
        free(sp);
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    size_t o = 0;
    int next_img = 0, next_vid = 0; /* the images array in order: images and videos' frames interleaved */
    for (int k = 0; k < *n_ids; k++) {
        int is_img = (*ids)[k] == info->image_token, is_vid = video >= 0 && (*ids)[k] == video;
        if (!is_img && !is_vid) { out[o++] = (*ids)[k]; continue; }
        int i = 0;
        if (is_img) { /* the next plain image */
            while (in[next_img]->frame >= 0) next_img++;
            i = next_img++;
        } else { /* the next video's first frame */
            while (in[next_vid]->frame != 0) next_vid++;
            i = next_vid++;
        }
        do {
            int k = in[i]->frame >= 0 ? frame_text(tok, in[i], out + o, FRAME_TEXT) : 0;
            if (k < 0 || k > FRAME_TEXT) {
                free(out);
                free(sp);
                return api_fail(err, 500, "server_error", NULL, NULL, "tokenizing a frame's timestamp failed");
            }
            o += (size_t)k;
            int S = engine_image_tokens(ims[i]);
            out[o++] = info->boi_token;
            sp[i] = (engine_span){ (int)o, S, 0, ims[i] };
            for (int j = 0; j < S; j++) out[o++] = engine_image_token(ims[i], j);
            out[o++] = info->eoi_token;
            i++;
        } while (is_vid && i < n && in[i]->frame > 0);
    }
    free(*ids);
    *ids = out;
    *n_ids = (int)o;
    *spans = sp;
    return 0;
}

/* the messages' images and videos' frames decoded and prepared, in order (the template places them in the
 * same order); in: the request's parts behind them (malloc'd) */
static int prepare_images(const api_ctx *c, const api_chat_request *req, const api_image ***in, engine_image ***ims,
                          int *n, api_error *e)
{
    int total = 0, parts = 0;
    for (int i = 0; i < req->n_msgs; i++) {
        total += req->msgs[i].n_images;
        for (int j = 0; j < req->msgs[i].n_images; j++) parts += req->msgs[i].images[j].frame <= 0;
    }
    if (!total) return 0;
    if (!engine_get_info(c->eng)->vision_proj[0])
        return api_fail(e, 400, "invalid_request_error", NULL, "messages",
                        "this model takes no images: the server has no vision projector (--mmproj)");
    if (parts > c->cfg->max_images)
        return api_fail(e, 400, "invalid_request_error", NULL, "messages",
                        "%d images and videos in one request; this server takes at most %d", parts, c->cfg->max_images);
    total = 0;
    for (int i = 0; i < req->n_msgs; i++) { /* video_url parts decoded into their frames */
        if (api_video_expand(c->eng, &c->cfg->image_urls, &req->msgs[i].images, &req->msgs[i].n_images, e))
            return -1;
        total += req->msgs[i].n_images;
    }
    *in = malloc((size_t)total * sizeof **in);
    *ims = calloc((size_t)total, sizeof **ims);
    if (!*in || !*ims) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    int k = 0;
    for (int i = 0; i < req->n_msgs; i++)
        for (int j = 0; j < req->msgs[i].n_images; j++) {
            api_image *im = &req->msgs[i].images[j];
            (*in)[k] = im;
            (*ims)[k++] = im->ready; /* taken: the caller destroys ims[0, n) */
            im->ready = NULL;
        }
    *n = total; /* also on a refusal: the frames taken above are the caller's to destroy */
    return images_prepare(c->eng, &c->cfg->image_urls, *in, total, *ims, e);
}

/* how the reply is read and what it must be */
static void reply_rules(const engine *e, api_chat_request *req)
{
    api_gen *g = &req->gen;
    const tokenizer *tok = engine_tokenizer(e);
    g->reply_syntax = engine_chat_reply_syntax(e);
    g->think_open = g->think_close = -1;
    if (g->reply_syntax != REPLY_GEMMA4) return;
    g->think_open = tokenizer_find(tok, "<|channel>");
    g->think_close = tokenizer_find(tok, "<channel|>");
    g->parse_tools = req->tools.choice != TOOL_CHOICE_NONE;
    g->thinking = req->thinking == 1;
    if (req->tools.choice == TOOL_CHOICE_REQUIRED || req->tools.choice == TOOL_CHOICE_NAMED) g->force_tools = &req->tools;
    int32_t call = tokenizer_find(tok, "<|tool_call>");
    if (!g->parse_tools && call >= 0 && g->n_bias < API_MAX_BIAS) { /* tool_choice none: no call can start */
        g->bias_tok[g->n_bias] = call;
        g->bias_val[g->n_bias++] = -100;
    }
}

int api_chat(const api_ctx *c, http_req *r)
{
    static const api_shape shape = { "chat.completion", "chat.completion.chunk", "chatcmpl-", 1 };
    api_error e;
    char *body = NULL;
    size_t len;
    api_chat_request req;
    memset(&req, 0, sizeof req);
    if (api_require_ready(c, &e) || http_read_body(r, c->cfg->max_body, &body, &len, &e) ||
        json_parse_chat(body, len, &req, &e) || api_check_model(c, req.model, &e)) {
        free(body);
        api_chat_request_free(&req);
        return api_reply_error(r, &e);
    }
    free(body);
    int32_t *ids = NULL;
    int n_ids = 0, n_images = 0, rc;
    engine_image **ims = NULL;
    const api_image **parts = NULL;
    engine_span *spans = NULL;
    reply_rules(c->eng, &req);
    rc = prepare_images(c, &req, &parts, &ims, &n_images, &e) || build_prompt(c->eng, &req, &ids, &n_ids, &e) ||
         (n_images && images_expand(c->eng, &ids, &n_ids, parts, ims, n_images, &spans, &e));
    if (rc) {
        rc = api_reply_error(r, &e);
    } else {
        gen_prompt one = { .ids = ids, .n = n_ids, .spans = spans, .n_spans = spans ? n_images : 0, .images = ims,
                           .n_images = n_images };
        rc = api_generate(c, r, &shape, &req.gen, &one);
    }
    for (int i = 0; i < n_images; i++) engine_image_destroy(ims[i]); /* those the job did not take */
    free(ims);
    free(parts);
    free(spans);
    free(ids);
    api_chat_request_free(&req);
    return rc;
}
