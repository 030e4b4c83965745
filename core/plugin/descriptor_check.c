/* The loader's checks, in the order they are safe to make: the two header words
 * first (their layout never changes), then the fields they vouch for, then the
 * vtable's own version words and its required slots. */
#include "plugin/descriptor_check.h"

#include <stddef.h>

#include "cinfer/backend.h"
#include "cinfer/launcher.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"

const char *cinfer_plugin_kind_name(uint32_t kind)
{
    switch (kind) {
    case CINFER_PLUGIN_KIND_LAUNCHER: return "launcher";
    case CINFER_PLUGIN_KIND_TOKENIZER: return "tokenizer";
    case CINFER_PLUGIN_KIND_BACKEND: return "backend";
    }
    return NULL;
}

/* Every vtable starts with these two words. */
struct vtable_head {
    uint32_t version;
    uint32_t struct_size;
};

#define REQUIRE_SLOT(ops, slot)                                                              \
    do {                                                                                     \
        if (!(ops)->slot)                                                                    \
            return cinfer_error_set(err, CINFER_ERR_PLUGIN,                                  \
                                    "%s: plugin '%s': required %s slot '%s' is NULL", origin, \
                                    d->name, kind_name, #slot);                              \
    } while (0)

static int check_tokenizer_ops(const struct cinfer_plugin_descriptor *d, const char *origin,
                               const char *kind_name, struct cinfer_error *err)
{
    const struct cinfer_tokenizer_ops *ops = d->vtable;
    REQUIRE_SLOT(ops, open);
    REQUIRE_SLOT(ops, close);
    REQUIRE_SLOT(ops, info);
    REQUIRE_SLOT(ops, encode);
    REQUIRE_SLOT(ops, decode);
    REQUIRE_SLOT(ops, id_to_piece);
    REQUIRE_SLOT(ops, piece_to_id);
    REQUIRE_SLOT(ops, is_special);
    REQUIRE_SLOT(ops, decoder_new);
    REQUIRE_SLOT(ops, decoder_step);
    REQUIRE_SLOT(ops, decoder_finish);
    REQUIRE_SLOT(ops, decoder_free);
    return CINFER_OK;
}

static int check_launcher_ops(const struct cinfer_plugin_descriptor *d, const char *origin,
                              const char *kind_name, struct cinfer_error *err)
{
    const struct cinfer_launcher_ops *ops = d->vtable;
    REQUIRE_SLOT(ops, query);
    REQUIRE_SLOT(ops, init);
    REQUIRE_SLOT(ops, spawn);
    REQUIRE_SLOT(ops, status);
    REQUIRE_SLOT(ops, signal);
    REQUIRE_SLOT(ops, wait);
    REQUIRE_SLOT(ops, fini);
    if (ops->version >= 2) {
        if (ops->struct_size < offsetof(struct cinfer_launcher_ops, describe) + sizeof ops->describe)
            return cinfer_error_set(err, CINFER_ERR_ABI,
                                    "%s: plugin '%s' has launcher vtable version %u but only %u bytes, expected at "
                                    "least %zu", origin, d->name, ops->version, ops->struct_size,
                                    offsetof(struct cinfer_launcher_ops, describe) + sizeof ops->describe);
        REQUIRE_SLOT(ops, query_config);
        REQUIRE_SLOT(ops, init_config);
    }
    /* version 3's slots are optional, but the vtable must be long enough to hold them */
    size_t v3_size = offsetof(struct cinfer_launcher_ops, allocation_hosts) + sizeof ops->allocation_hosts;
    if (ops->version >= 3 && ops->struct_size < v3_size)
        return cinfer_error_set(err, CINFER_ERR_ABI,
                                "%s: plugin '%s' has launcher vtable version %u but only %u bytes, expected at "
                                "least %zu",
                                origin, d->name, ops->version, ops->struct_size, v3_size);
    return CINFER_OK;
}

/* Version 7 added the mixture-of-experts ops, version 8 what selection, error reporting
 * and testing need (query, create_on, status, upload): the core calls them
 * unconditionally, so older backend vtables are refused above. */
static int check_backend_ops(const struct cinfer_plugin_descriptor *d, const char *origin,
                             const char *kind_name, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = d->vtable;
    REQUIRE_SLOT(ops, create);
    REQUIRE_SLOT(ops, destroy);
    REQUIRE_SLOT(ops, buffer_alloc);
    REQUIRE_SLOT(ops, buffer_free);
    REQUIRE_SLOT(ops, copy);
    REQUIRE_SLOT(ops, download);
    REQUIRE_SLOT(ops, kv_create);
    REQUIRE_SLOT(ops, kv_destroy);
    REQUIRE_SLOT(ops, kv_write);
    REQUIRE_SLOT(ops, embedding);
    REQUIRE_SLOT(ops, matmul);
    REQUIRE_SLOT(ops, rmsnorm);
    REQUIRE_SLOT(ops, rope);
    REQUIRE_SLOT(ops, silu_mul);
    REQUIRE_SLOT(ops, add);
    REQUIRE_SLOT(ops, attention);
    REQUIRE_SLOT(ops, weight_prepare);
    REQUIRE_SLOT(ops, weight_release);
    REQUIRE_SLOT(ops, attention_windowed);
    REQUIRE_SLOT(ops, gelu_tanh_mul);
    REQUIRE_SLOT(ops, scale);
    REQUIRE_SLOT(ops, softcap);
    REQUIRE_SLOT(ops, moe_route);
    REQUIRE_SLOT(ops, gather_rows);
    REQUIRE_SLOT(ops, scatter_add_rows);
    REQUIRE_SLOT(ops, zero);
    REQUIRE_SLOT(ops, query);
    REQUIRE_SLOT(ops, create_on);
    REQUIRE_SLOT(ops, status);
    REQUIRE_SLOT(ops, upload);
    return CINFER_OK;
}

int cinfer_plugin_check_descriptor(const struct cinfer_plugin_descriptor *d, const char *origin,
                                   uint32_t expected_kind, struct cinfer_error *err)
{
    if (d->abi_version != CINFER_PLUGIN_ABI_VERSION)
        return cinfer_error_set(err, CINFER_ERR_ABI,
                                "%s: plugin ABI version %u, but this cinfer expects ABI version %u "
                                "(rebuild the plugin against this cinfer's headers)",
                                origin, d->abi_version, CINFER_PLUGIN_ABI_VERSION);
    if (d->struct_size != sizeof(struct cinfer_plugin_descriptor))
        return cinfer_error_set(err, CINFER_ERR_ABI,
                                "%s: plugin descriptor is %u bytes, but ABI version %u's is %zu bytes",
                                origin, d->struct_size, CINFER_PLUGIN_ABI_VERSION,
                                sizeof(struct cinfer_plugin_descriptor));
    if (!d->name || !d->name[0])
        return cinfer_error_set(err, CINFER_ERR_PLUGIN, "%s: plugin descriptor has no name", origin);
    if (!d->version || !d->version[0])
        return cinfer_error_set(err, CINFER_ERR_PLUGIN, "%s: plugin '%s' descriptor has no version",
                                origin, d->name);
    const char *kind_name = cinfer_plugin_kind_name(d->kind);
    if (!kind_name)
        return cinfer_error_set(err, CINFER_ERR_PLUGIN,
                                "%s: plugin '%s' has unknown kind %u (known: 1 launcher, 2 tokenizer, 3 backend)",
                                origin, d->name, d->kind);
    if (expected_kind && d->kind != expected_kind)
        return cinfer_error_set(err, CINFER_ERR_PLUGIN, "%s: plugin '%s' is a %s plugin, expected a %s plugin",
                                origin, d->name, kind_name, cinfer_plugin_kind_name(expected_kind));
    if (!d->vtable)
        return cinfer_error_set(err, CINFER_ERR_PLUGIN, "%s: plugin '%s' has no vtable", origin, d->name);

    const struct vtable_head *head = d->vtable;
    uint32_t known_version = 0, known_size = 0;
    switch (d->kind) {
    case CINFER_PLUGIN_KIND_TOKENIZER:
        /* version 1 still serves: its slots end at decoder_free */
        known_version = CINFER_TOKENIZER_OPS_MIN_VERSION;
        known_size = offsetof(struct cinfer_tokenizer_ops, token_bytes);
        break;
    case CINFER_PLUGIN_KIND_LAUNCHER:
        /* version 1 still drives: its slots end at fini */
        known_version = CINFER_LAUNCHER_OPS_MIN_VERSION;
        known_size = offsetof(struct cinfer_launcher_ops, query_config);
        break;
    default: /* backend: version 8 is the first the core can select and run */
        known_version = CINFER_BACKEND_OPS_MIN_VERSION;
        known_size = offsetof(struct cinfer_backend_ops, upload) + sizeof(((struct cinfer_backend_ops *)0)->upload);
        break;
    }
    /* Slots are only appended, so a newer vtable (more slots) serves an older core;
     * an older one lacks slots this core calls unconditionally. */
    if (head->version < known_version || head->struct_size < known_size)
        return cinfer_error_set(err, CINFER_ERR_ABI,
                                "%s: plugin '%s' has %s vtable version %u (%u bytes), but this cinfer needs "
                                "version %u (%u bytes) or newer",
                                origin, d->name, kind_name, head->version, head->struct_size, known_version,
                                known_size);
    if (d->kind == CINFER_PLUGIN_KIND_TOKENIZER)
        return check_tokenizer_ops(d, origin, kind_name, err);
    if (d->kind == CINFER_PLUGIN_KIND_LAUNCHER)
        return check_launcher_ops(d, origin, kind_name, err);
    return check_backend_ops(d, origin, kind_name, err);
}
