/* registry.c — the architectures clgemma runs, one row each: the only list of them. A new
 * architecture is its file (models/<name>.c, defining the functions its row points at) plus a row. */
#include "model.h"

#include <stdio.h>
#include <string.h>

#include "errf.h"

model_load_fn gemma3_load;
model_unload_fn gemma3_unload;
model_layer_window_fn gemma3_layer_window;
model_forward_fn gemma3_forward;
model_kv_layout_fn gemma3_kv_layout;

model_load_fn gemma4_load;
model_unload_fn gemma4_unload;
model_bufs_create_fn gemma4_bufs_create;
model_bufs_destroy_fn gemma4_bufs_destroy;
model_layer_window_fn gemma4_layer_window;
model_forward_fn gemma4_forward;
model_kv_layout_fn gemma4_kv_layout;
model_kv_export_fn gemma4_kv_export;

model_load_fn gemma4_assistant_load;
model_unload_fn gemma4_assistant_unload;
model_layer_window_fn gemma4_assistant_layer_window;
model_kv_layout_fn gemma4_assistant_kv_layout;
model_pair_check_fn gemma4_assistant_pair_check;
model_bufs_create_fn gemma4_assistant_bufs_create;
model_bufs_destroy_fn gemma4_assistant_bufs_destroy;
model_draft_fn gemma4_assistant_draft;

model_load_fn qwen35_load;
model_unload_fn qwen35_unload;
model_bufs_create_fn qwen35_bufs_create;
model_bufs_destroy_fn qwen35_bufs_destroy;
model_layer_window_fn qwen35_layer_window;
model_forward_fn qwen35_forward;
model_kv_layout_fn qwen35_kv_layout;
model_kv_layout_fn qwen35moe_kv_layout;
model_replay_fn qwen35_replay;

static const model_arch ARCHES[] = {
    {
        .name = "gemma3",
        .chat = CHAT_GEMMA3,
        .stop_texts = (const char *const[]){ "<end_of_turn>", NULL },
        .load = gemma3_load,
        .unload = gemma3_unload,
        .layer_window = gemma3_layer_window,
        .forward = gemma3_forward,
        .kv_layout = gemma3_kv_layout,
    },
    {
        .name = "gemma4",
        .chat = CHAT_GEMMA4,
        /* <turn|> ends a turn; <|tool_response> hands over to a tool */
        .stop_texts = (const char *const[]){ "<turn|>", "<|tool_response>", NULL },
        .host_tensors = (const char *const[]){ "per_layer_token_embd.weight", NULL },
        .load = gemma4_load,
        .unload = gemma4_unload,
        .bufs_create = gemma4_bufs_create,
        .bufs_destroy = gemma4_bufs_destroy,
        .layer_window = gemma4_layer_window,
        .forward = gemma4_forward,
        .kv_layout = gemma4_kv_layout,
        .kv_export = gemma4_kv_export,
    },
    {
        /* the MTP drafter ("assistant") of Gemma 4 models: reads their cache and embeddings */
        .name = "gemma4-assistant",
        .chat = CHAT_GEMMA4,
        .drafts_for = "gemma4",
        .load = gemma4_assistant_load,
        .unload = gemma4_assistant_unload,
        .layer_window = gemma4_assistant_layer_window,
        .bufs_create = gemma4_assistant_bufs_create,
        .bufs_destroy = gemma4_assistant_bufs_destroy,
        .kv_layout = gemma4_assistant_kv_layout,
        .pair_check = gemma4_assistant_pair_check,
        .draft = gemma4_assistant_draft,
    },
    {
        /* Qwen 3.5 / 3.6 dense: gated-delta layers with a recurrent state beside gated attention */
        .name = "qwen35",
        .chat = CHAT_QWEN35,
        .stop_texts = (const char *const[]){ "<|im_end|>", NULL },
        .load = qwen35_load,
        .unload = qwen35_unload,
        .bufs_create = qwen35_bufs_create,
        .bufs_destroy = qwen35_bufs_destroy,
        .layer_window = qwen35_layer_window,
        .forward = qwen35_forward,
        .kv_layout = qwen35_kv_layout,
        .replay = qwen35_replay,
    },
    {
        /* Qwen 3.5 / 3.6 MoE: the same trunk, experts beside a gated shared expert (qwen35.c) */
        .name = "qwen35moe",
        .chat = CHAT_QWEN35,
        .stop_texts = (const char *const[]){ "<|im_end|>", NULL },
        .load = qwen35_load,
        .unload = qwen35_unload,
        .bufs_create = qwen35_bufs_create,
        .bufs_destroy = qwen35_bufs_destroy,
        .layer_window = qwen35_layer_window,
        .forward = qwen35_forward,
        .kv_layout = qwen35moe_kv_layout,
        .replay = qwen35_replay,
    },
};

enum { N_ARCHES = sizeof ARCHES / sizeof *ARCHES };

const model_arch *model_arch_find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_ARCHES; i++)
        if (strlen(ARCHES[i].name) == len && !memcmp(ARCHES[i].name, name, len)) return &ARCHES[i];
    return NULL;
}

void model_arch_names(char *out, size_t cap)
{
    size_t o = 0;
    if (cap) out[0] = 0;
    for (size_t i = 0; i < N_ARCHES && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", ARCHES[i].name);
}

int model_arch_of(const gguf_file *f, const model_arch **out, char *err, size_t errlen)
{
    gguf_str a;
    *out = NULL;
    if (gguf_get_str(f, "general.architecture", &a) != 0) return ERR("no general.architecture key");
    if (gguf_str_eq(a, "clip")) /* llama.cpp's projectors: images in beside a model, never a model */
        return ERR("'clip' is a vision projector (mmproj), not a model: load it beside one (--mmproj)");
    if (!(*out = model_arch_find(a.ptr, a.len))) {
        char names[128];
        model_arch_names(names, sizeof names);
        return ERR("unsupported architecture '%.*s' (supported: %s)", (int)(a.len > 40 ? 40 : a.len), a.ptr, names);
    }
    return 0;
}
